"""A ZooKeeper-mode cluster of an older Kafka release: ZooKeeper, a controller broker, brokers.

Before KRaft (and beside it up to 3.9) a Kafka cluster keeps its metadata in ZooKeeper: each
broker registers an ephemeral ``/brokers/ids/<id>`` under its ZooKeeper session, and one broker,
the one that creates the ephemeral ``/controller`` znode first, is the controller
(``kafka.controller.KafkaController``, elected through ``KafkaZkClient.registerControllerAndIncrementControllerEpoch``
from 2.1, ``ZookeeperLeaderElector`` in 0.11 - 2.0). The controller watches ``/brokers/ids``:
a broker whose session expires (no heartbeat for ``zookeeper.session.timeout.ms``) is gone
(``KafkaController.onBrokerFailure``), its leaderships move, and the controller sends
``LeaderAndIsr`` to the replicas, which become leader or follower in
``ReplicaManager.becomeLeaderOrFollower`` -> ``Partition.makeLeader`` / ``makeFollower``.

:class:`ZkCluster` lays this out the way :class:`~epochlab.kafka.live.cluster.LocalCluster`
lays out a KRaft cluster, so the faults, the run driver and the scenarios' ``"controller"``
endpoint work unchanged:

* node 100 (role ``controller``) is a broker (``broker.id=100``) started first, alone, so it
  wins ``/controller``; no scenario topic has a replica on it, so it is a dedicated controller,
  as KRaft's node 100 is. ZooKeeper runs **in node 100's network namespace** (the same address,
  port 2181): the scenario's ``"controller"`` is the metadata authority, which in ZooKeeper
  mode is ZooKeeper plus the controller broker. Cutting broker B from ``"controller"`` cuts B's
  ZooKeeper session (it expires after ``zookeeper.session.timeout.ms``, the controller then
  moves B's leaderships, as a KRaft controller does when B's ``broker.session.timeout.ms``
  ends) and B's link to the controller broker (no ``LeaderAndIsr`` / ``UpdateMetadata`` reaches
  B, as no metadata reaches a KRaft broker cut from the quorum).
* brokers 1 .. N as in KRaft mode, each in its namespace.
* ZooKeeper is started from the release's own jars (Maven resolves
  ``org.apache.zookeeper:zookeeper`` as a dependency of ``kafka_2.1x``: 3.4.10 with 0.11.0.0,
  3.4.13 with 2.0 and 2.1, 3.5.9 with 2.7.2, 3.8.4 with 3.6.2) as
  ``org.apache.zookeeper.server.ZooKeeperServerMain zoo.cfg``, a standalone server.

No node is formatted (ZooKeeper mode has no ``StorageTool format``). Properties of the KRaft
harness that mean nothing in ZooKeeper mode stay in ``server.properties`` (the brokers ignore
them: the ones the scenarios set are read back by ``cluster_settings``), and
``broker.session.timeout.ms`` is also written as ``zookeeper.session.timeout.ms``.
:meth:`ZkCluster.stop` stops the brokers, then the controller broker, then ZooKeeper (a broker's
controlled shutdown needs both); a cluster started by this process is stopped at exit and on
SIGINT/SIGTERM like a KRaft one, ZooKeeper included, and ZooKeeper's JVM also carries
``PR_SET_PDEATHSIG``.

>>> with make_cluster("/tmp/zk", version="2.1.1") as cluster:      # doctest: +SKIP
...     print(cluster.mode, cluster.zookeeper.address)
zk 10.213.7.110:2181
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from epochlab.errors import ConfigError
from epochlab.kafka.live import netns
from epochlab.kafka.live.cluster import JVM_OPTIONS, LocalCluster, Node, live_pid

__all__ = ["BROKER_EXTRAS", "KRAFT_FROM", "MODES", "REGISTRATION_RETRIED_FROM", "ZK_CLIENT_SUBSTITUTE", "ZK_UNTIL",
           "ZOOKEEPER_PORT", "ZkCluster",
           "broker_extras", "broker_extras_dir", "check_mode", "cluster_modes", "default_mode", "log4j1_properties",
           "make_cluster", "read_znode", "release_tuple", "zk_properties", "zoo_cfg"]

MODES = ("zk", "kraft")
#: The first release line without ZooKeeper mode (KIP-500 finished: 4.0 removed it).
ZK_UNTIL = (4, 0)
#: The first release line whose KRaft mode is production-ready (KIP-833, 3.3).
KRAFT_FROM = (3, 3)
ZOOKEEPER_PORT = 2181
#: ZooKeeper's tick: sessions may last 2 - 120 ticks (``minSessionTimeout`` /
#: ``maxSessionTimeout`` below), so a 1 s - 60 s ``zookeeper.session.timeout.ms`` is granted as asked.
TICK_MS = 500
_CONTROLLER_ID = 100


#: KAFKA-7165 (2.2.0): from 2.2 a broker restarted while its old session's ``/brokers/ids/<id>``
#: still exists retries its registration until that session expires
#: (``KafkaZkClient.registerBroker``); before, the start fails and the JVM exits ("A broker is
#: already registered on the path /brokers/ids/<id> ... restarted it faster than the zookeeper
#: session timeout", 0.10 - 0.11; "node already exists and owner ... does not match current
#: session", 2.0 - 2.1; both measured here).
REGISTRATION_RETRIED_FROM = (2, 2)
#: How long past its session timeout an old registration may take to go (ZooKeeper expires
#: sessions on its tick, and a loaded machine is late) before the restart goes ahead anyway.
REGISTRATION_SLACK_S = 10.0
#: The most a znode read here accepts: ZooKeeper's own default ``jute.maxbuffer`` (1 MiB).
MAX_ZNODE_BYTES = 1 << 20
_GET_DATA, _CLOSE_SESSION, _NO_NODE = 4, -11, -101


def read_znode(host: str, port: int, path: str, timeout_s: float = 1.0) -> bytes | None:
    """The data of znode ``path`` on the ZooKeeper server at ``host:port``, read in a session
    of its own (``None`` when the znode does not exist). ZooKeeper's client protocol, framed
    jute records: ``ConnectRequest`` (protocol 0, a new session) and its response, then
    ``getData`` (``RequestHeader`` xid 1, op 4; the path, no watch) answered by a
    ``ReplyHeader`` and the data, then ``closeSession`` (op -11) so the session ends now rather
    than a session timeout later. Raises ``OSError`` when the server does not answer within
    ``timeout_s`` and ``ValueError`` on an answer that is not such a record."""

    def frame(payload: bytes) -> bytes:
        return struct.pack(">i", len(payload)) + payload

    def receive(sock: socket.socket) -> bytes:
        def exactly(n: int) -> bytes:
            out = b""
            while len(out) < n:
                chunk = sock.recv(n - len(out))
                if not chunk:
                    raise ValueError("ZooKeeper closed the connection mid-answer")
                out += chunk
            return out
        (size,) = struct.unpack(">i", exactly(4))
        if not 0 <= size <= MAX_ZNODE_BYTES + 1024:
            raise ValueError(f"ZooKeeper answered a record of {size} bytes")
        return exactly(size)

    raw = path.encode()
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.settimeout(timeout_s)
        sock.sendall(frame(struct.pack(">iqiqi", 0, 0, int(timeout_s * 1000) + 2000, 0, 16) + bytes(16)))
        if len(receive(sock)) < 20:  # protocol, timeout, session id, password length
            raise ValueError("ZooKeeper refused the session")
        sock.sendall(frame(struct.pack(">iii", 1, _GET_DATA, len(raw)) + raw + b"\x00"))
        reply = receive(sock)
        if len(reply) < 16:
            raise ValueError("ZooKeeper's getData answer is shorter than its header")
        xid, _zxid, err = struct.unpack(">iqi", reply[:16])
        if xid != 1:
            raise ValueError(f"ZooKeeper answered request {xid}, not the getData sent")
        data: bytes | None = None
        if err == 0:
            (size,) = struct.unpack(">i", reply[16:20])
            if not 0 <= size <= len(reply) - 20:
                raise ValueError(f"ZooKeeper's getData answer names {size} bytes of data")
            data = reply[20:20 + size]
        elif err != _NO_NODE:
            raise ValueError(f"ZooKeeper answered getData {path} with error {err}")
        sock.sendall(frame(struct.pack(">ii", 2, _CLOSE_SESSION)))
        return data


def release_tuple(version: str) -> tuple[int, int]:
    """``(major, minor)`` of a release such as ``"2.1.1"``."""
    major, minor = (int(p) for p in version.split(".")[:2])
    return major, minor


def cluster_modes(version: str) -> tuple[str, ...]:
    """The modes a release's cluster can run in here: ``zk`` before 4.0, ``kraft`` from 3.3."""
    t = release_tuple(version)
    return tuple(m for m, ok in (("zk", t < ZK_UNTIL), ("kraft", t >= KRAFT_FROM)) if ok)


def default_mode(version: str) -> str:
    """``zk`` for a release that has ZooKeeper mode (before 4.0), else ``kraft``."""
    return "zk" if release_tuple(version) < ZK_UNTIL else "kraft"


def check_mode(version: str, mode: str | None) -> str:
    """``mode`` (or the release's default) after checking the release has it; :class:`ConfigError`
    naming the modes it has otherwise."""
    if mode is None:
        return default_mode(version)
    if mode not in MODES:
        raise ConfigError(f"--mode: expected zk or kraft, got {mode!r}", where="--mode", field="mode",
                          expected="zk|kraft", got=mode)
    modes = cluster_modes(version)
    if mode not in modes:
        why = ("ZooKeeper mode was removed in 4.0" if mode == "zk"
               else "KRaft is production-ready from 3.3 (KIP-833)")
        raise ConfigError(f"--mode {mode}: Kafka {version} has only {' and '.join(modes)} mode ({why})",
                          where="--mode", field="mode", expected=list(modes), got=mode)
    return mode


def make_cluster(directory: Any, *, version: str | None = None, mode: str | None = None,
                 **kwargs: Any) -> LocalCluster:
    """A :class:`ZkCluster` or a KRaft :class:`LocalCluster` of ``version`` in ``mode`` (default:
    ZooKeeper before 4.0, :func:`default_mode`); ``kwargs`` as for :class:`LocalCluster`
    (``controllers`` only in KRaft mode)."""
    from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION

    version = version or DEFAULT_KAFKA_VERSION
    from epochlab.kafka.jars import release_for

    release_for(version)  # a malformed version is a usage error before the mode is read
    if check_mode(version, mode) == "zk":
        if kwargs.pop("controllers", 1) != 1:
            raise ConfigError("--controllers: a ZooKeeper-mode cluster has one ZooKeeper server and its "
                              "controller is a broker elected through it", where="--controllers",
                              field="controllers", expected=1, got=kwargs.get("controllers"))
        return ZkCluster(directory, version=version, **kwargs)
    return LocalCluster(directory, version=version, **kwargs)


def zoo_cfg(data_dir: Path, host: str, port: int) -> str:
    """A standalone ZooKeeper server's configuration (``ZooKeeperServerMain``): its snapshot
    directory, client address, and session bounds wide enough for any scenario's timeout.
    3.5+ would start an AdminServer on port 8080 (Jetty, not on the class path): disabled; the
    four-letter words ``ruok`` and ``srvr`` answer the readiness check (3.5+ whitelists them)."""
    return "\n".join([
        f"tickTime={TICK_MS}", f"dataDir={data_dir}", f"clientPort={port}", f"clientPortAddress={host}",
        "maxClientCnxns=0", f"minSessionTimeout={2 * TICK_MS}", f"maxSessionTimeout={120 * TICK_MS}",
        "admin.enableServer=false", "4lw.commands.whitelist=ruok,srvr", "",
    ])


def zk_properties(node: Node, zookeeper: str, n_brokers: int, overrides: dict[str, str]) -> dict[str, str]:
    """``server.properties`` of a ZooKeeper-mode broker (the controller broker too): its id and
    listener, ``zookeeper.connect``, the internal topics sized for ``n_brokers``, each broker its
    own rack as in KRaft mode, then the harness's timeouts and ``overrides``.

    ``zookeeper.session.timeout.ms`` takes ``broker.session.timeout.ms`` (the scenarios'
    ``session_timeout_ms``): both say how long a broker that stopped heartbeating stays
    registered (``kafka.zk.KafkaZkClient`` / ``ZkUtils`` sessions; KRaft's
    ``BrokerHeartbeatManager``)."""
    from epochlab.kafka.live.cluster import FAST_FAILOVER

    rf = str(min(3, n_brokers))
    props = {
        "broker.id": str(node.node_id), "zookeeper.connect": zookeeper,
        "zookeeper.connection.timeout.ms": "30000",
        "listeners": f"PLAINTEXT://{node.address}", "advertised.listeners": f"PLAINTEXT://{node.address}",
        "log.dirs": str(node.data_dir), "num.partitions": "1",
        "offsets.topic.replication.factor": rf, "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": str(min(2, n_brokers)),
        "transaction.state.log.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0", "auto.create.topics.enable": "false",
        "delete.topic.enable": "true", "broker.rack": str(node.node_id),
    }
    if node.roles == "controller":
        # it leads no scenario partition; its own controlled shutdown would only retry moving
        # what little it holds (KafkaServer.controlledShutdown: 3 tries, 5 s apart)
        props["controlled.shutdown.enable"] = "false"
    props.update(FAST_FAILOVER)
    props.update(overrides)
    props["zookeeper.session.timeout.ms"] = props["broker.session.timeout.ms"]
    return props


class ZkCluster(LocalCluster):
    """A ZooKeeper-mode cluster: ZooKeeper and the controller broker (node 100) in one network
    namespace, ``brokers`` brokers (1 .. N) in theirs. Arguments as for :class:`LocalCluster`
    (one controller: the broker that wins ``/controller``). :attr:`zookeeper` is ZooKeeper's
    process (not one of :attr:`nodes`: faults address the namespace through node 100)."""

    mode = "zk"

    def __init__(self, directory: Any, brokers: int = 3, controllers: int = 1, version: str | None = None,
                 network: str = "auto", overrides: dict[str, str] | None = None,
                 jvm_options: tuple[str, ...] = JVM_OPTIONS, ready_timeout_s: float = 90.0,
                 grace_s: float = 15.0, detach: bool = False, proxied_listeners: int = 0,
                 lossy_brokers: tuple[int, ...] = ()) -> None:
        # the link proxies' per-client listeners are wired into the KRaft start only: refused
        # here, before anything starts (a lossy log directory is mounted by the shared start,
        # LocalCluster._mount_disks, before a broker of either mode writes to it)
        if proxied_listeners:
            raise ConfigError("delayed client links (Toxiproxy listeners) are not supported on a ZooKeeper-mode "
                              "cluster yet", where="--mode", field="mode", expected="kraft", got="zk")
        super().__init__(directory, brokers=brokers, controllers=1, version=version, network=network,
                         overrides=overrides, jvm_options=jvm_options, ready_timeout_s=ready_timeout_s,
                         grace_s=grace_s, detach=detach, lossy_brokers=lossy_brokers)
        if release_tuple(self.version) >= ZK_UNTIL:
            raise ConfigError(f"Kafka {self.version} has no ZooKeeper mode (removed in 4.0)", where="--mode",
                              field="mode", expected="a release before 4.0", got=self.version)
        self.zookeeper: Node | None = None
        self._zk_proc: subprocess.Popen[bytes] | None = None

    @property
    def zoo_cfg_path(self) -> Path:
        return self.dir / "zookeeper" / "zoo.cfg"

    def zookeeper_running(self) -> bool:
        """Whether ZooKeeper's JVM runs (the kernel's word for our child, else pid and command line)."""
        if self.zookeeper is None:
            return False
        if self._zk_proc is not None and self._zk_proc.pid == self.zookeeper.pid:
            return self._zk_proc.poll() is None
        return live_pid(self.zookeeper.pid, str(self.zoo_cfg_path))

    # -- layout -----------------------------------------------------------------------------
    def _plan(self) -> None:
        super()._plan()
        ctl = self.nodes[_CONTROLLER_ID]
        port = ZOOKEEPER_PORT if self.network == "netns" else _free_port()
        self.zookeeper = Node(0, "zookeeper", ctl.host, port, str(self.dir / "zookeeper"), netns=ctl.netns)

    def _write_configs(self) -> None:
        assert self.zookeeper is not None
        zk = self.zookeeper
        shutil.rmtree(zk.dir, ignore_errors=True)  # no znode of an earlier start may survive
        Path(zk.dir, "data").mkdir(parents=True)
        self.zoo_cfg_path.write_text(zoo_cfg(Path(zk.dir) / "data", zk.host, zk.port))
        for n in self.nodes.values():
            n.data_dir.mkdir(parents=True, exist_ok=True)
            props = zk_properties(n, zk.address, self.n_brokers, self.overrides)
            n.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def _format(self, jars: Path) -> None:
        """Nothing: a ZooKeeper-mode broker creates its log directory itself."""

    def _argv(self, n: Node, jars: Path) -> list[str]:
        """``java ... kafka.Kafka server.properties`` with a log: the release's jars with the
        SLF4J binding for reload4j (log4j 1.2's API, what these releases' own
        ``config/log4j.properties`` configures) in place of ``slf4j-nop``, writing INFO to
        ``server.log`` and the state-change logger to ``state-change.log`` as Kafka's own
        configuration does."""
        extras = broker_extras_dir(jars)
        replaced = ("slf4j-nop", "zookeeper-") if any(extras.glob("zookeeper-*.jar")) else ("slf4j-nop",)
        classpath = ":".join([str(p) for p in sorted(extras.glob("*.jar"))] +
                             [str(p) for p in sorted(jars.glob("*.jar")) if not p.name.startswith(replaced)])
        config = Path(n.dir) / "log4j.properties"
        config.write_text(log4j1_properties(Path(n.dir)))
        java = ["java", *self.jvm_options, f"-Dlog4j.configuration=file:{config}", f"-Depochlab.node={n.node_id}",
                "-cp", classpath, "kafka.Kafka", str(n.config_path)]
        return (netns.enter(n.netns) + java) if n.netns else java

    # -- start ------------------------------------------------------------------------------
    def _spawn_all(self, jars: Path) -> None:
        """ZooKeeper, then the controller broker alone until it holds ``/controller``, then
        the brokers (the base class waits for them to register)."""
        self._spawn_zookeeper(jars)
        self._wait(self._zookeeper_ok, 30.0, "ZooKeeper did not answer `ruok`")
        self._spawn(_CONTROLLER_ID, jars)
        self._wait(self._controller_elected, 60.0, f"broker {_CONTROLLER_ID} did not become the controller")
        for node_id in self.broker_ids:
            self._spawn(node_id, jars)

    def _spawn_zookeeper(self, jars: Path) -> None:
        zk = self.zookeeper
        assert zk is not None
        # ZooKeeper 3.4 registers log4j's JMX beans at start (ManagedUtil.registerLog4jMBeans),
        # and the release's jars carry no log4j 1 (2.0 - 2.1) or log4j without its jmx package:
        # NoClassDefFoundError org/apache/log4j/jmx/HierarchyDynamicMBean, measured on 2.1.1
        java = ["java", *self.jvm_options, "-Dzookeeper.jmx.log4j.disable=true", "-Depochlab.node=zookeeper",
                "-cp", f"{jars}/*",
                "org.apache.zookeeper.server.ZooKeeperServerMain", str(self.zoo_cfg_path)]
        zk.argv = (netns.enter(zk.netns) + java) if zk.netns else java
        setpriv = shutil.which("setpriv")
        die = [setpriv, "--pdeathsig", "KILL"] if setpriv and not self.detach else []
        with open(zk.log_path, "ab") as log:
            self._zk_proc = subprocess.Popen(die + zk.argv, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, start_new_session=True)
        zk.pid = self._zk_proc.pid

    def _wait(self, ready: Any, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.zookeeper_running():
                raise ConfigError(f"ZooKeeper exited during start: {_tail(self.zookeeper)}", where=str(self.dir),
                                  field="start", expected="running", got="zookeeper")
            ctl = self.nodes[_CONTROLLER_ID]
            if ctl.pid is not None and not self.is_running(_CONTROLLER_ID):
                raise ConfigError(f"node {_CONTROLLER_ID} exited during start: {self._tails([_CONTROLLER_ID])}",
                                  where=str(self.dir), field="start", expected="running", got=_CONTROLLER_ID)
            if ready():
                return
            time.sleep(0.2)
        raise ConfigError(f"{what} within {timeout_s:.0f} s: {_tail(self.zookeeper)}; "
                          f"{self._tails([_CONTROLLER_ID])}", where=str(self.dir), field="start",
                          expected="ready", got=what)

    def _zookeeper_ok(self) -> bool:
        """ZooKeeper's four-letter ``ruok`` answered ``imok``."""
        assert self.zookeeper is not None
        try:
            with socket.create_connection((self.zookeeper.host, self.zookeeper.port), timeout=1) as s:
                s.sendall(b"ruok")
                return s.recv(16) == b"imok"
        except OSError:
            return False

    def _controller_elected(self) -> bool:
        """The controller broker's metadata names itself as the controller."""
        from confluent_kafka.admin import AdminClient

        ctl = self.nodes[_CONTROLLER_ID]
        admin = AdminClient({"bootstrap.servers": ctl.address, "socket.timeout.ms": 2000, "log_level": 0})
        try:
            return admin.list_topics(timeout=2).controller_id == _CONTROLLER_ID
        except Exception:  # noqa: BLE001 - KafkaException while the broker comes up
            return False

    def partition_record(self, topic: str, partition: int = 0) -> dict[str, Any] | None:
        """The controller's record of a partition in ZooKeeper,
        ``/brokers/topics/<topic>/partitions/<n>/state`` (``leader``, ``leader_epoch``, ``isr``,
        ``controller_epoch``: what ``KafkaController`` last decided, before or while the brokers
        act on it); ``None`` when ZooKeeper does not answer (cut off, stopped) or has no record."""
        zk = self.zookeeper
        if zk is None or not self.zookeeper_running():
            return None
        try:
            data = read_znode(zk.host, zk.port, f"/brokers/topics/{topic}/partitions/{partition}/state")
            record = json.loads(data) if data is not None else None
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) else None

    def _properties(self, node_id: int) -> dict[str, str]:
        """Node ``node_id``'s ``server.properties``."""
        return dict(line.split("=", 1) for line in self.nodes[node_id].config_path.read_text().splitlines()
                    if "=" in line)

    def await_old_registration(self, node_id: int) -> float | None:
        """Before 2.2 (:data:`REGISTRATION_RETRIED_FROM`), wait until broker ``node_id``'s
        registration of its old session, ``/brokers/ids/<id>``, is gone (at most its
        ``zookeeper.session.timeout.ms`` and :data:`REGISTRATION_SLACK_S`):
        a restart started earlier exits at once, so the harness restarts the broker as a
        supervisor that restarts it until it stays up would, and as the model's restarted broker
        registers once the old session expired (``Controller.on_heartbeat``). Returns the
        seconds waited, ``None`` when there was nothing to wait for (2.2+, no old registration,
        or ZooKeeper not answering)."""
        zk = self.zookeeper
        if zk is None or release_tuple(self.version) >= REGISTRATION_RETRIED_FROM:
            return None
        limit_s = int(self._properties(node_id).get("zookeeper.session.timeout.ms", "6000")) / 1000 \
            + REGISTRATION_SLACK_S
        t0 = time.monotonic()
        while True:
            try:
                if read_znode(zk.host, zk.port, f"/brokers/ids/{node_id}") is None:
                    break
            except (OSError, ValueError):
                return None
            if time.monotonic() - t0 >= limit_s:
                break
            time.sleep(0.05)
        waited = time.monotonic() - t0
        return waited if waited >= 0.05 else None

    def controller_id(self) -> int | None:
        """The broker that holds ``/controller`` now, as the controller broker's metadata says."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "socket.timeout.ms": 2000,
                             "log_level": 0})
        try:
            cid = admin.list_topics(timeout=5).controller_id
        except Exception:  # noqa: BLE001
            return None
        return None if cid is None or cid < 0 else int(cid)

    def settle_topic(self, topic: str, partition: int = 0, timeout_s: float = 30.0) -> float:
        """Wait until a new topic's partition is in place on every broker, as it is at once in
        KRaft mode (every broker replays the same metadata log): here the controller sends
        ``LeaderAndIsr`` and ``UpdateMetadata`` to each broker on its own
        (``ControllerChannelManager``), so for a moment after ``CreateTopics`` answers some
        brokers' metadata has no leader, and a follower whose replica fetcher thread started
        before the partition was added to it sleeps ``replica.fetch.backoff.ms`` before its
        first fetch (``AbstractFetcherThread.maybeFetch`` awaits ``partitionMapCond`` for
        ``fetchBackOffMs`` when it has no partition; measured: broker 2's first fetch 1.0 s after
        its fetcher was added, in 2.7.2 and 3.6.2). Returns the seconds waited: every broker's
        metadata names the leader, then ``replica.fetch.backoff.ms`` more."""
        from epochlab.kafka.live.clients import KafkaAdmin

        t0 = time.monotonic()
        deadline = t0 + timeout_s
        for b in self.broker_ids:
            admin = KafkaAdmin(self.nodes[b].address, only_bootstrap=True)
            while True:
                try:
                    if admin.describe_partition(topic, partition, timeout_s=2, ask_leader=False).leader is not None:
                        break
                except Exception:  # noqa: BLE001 - the broker does not know the topic yet
                    pass
                if time.monotonic() >= deadline:
                    raise ConfigError(f"broker {b} has no leader for {topic}-{partition} {timeout_s:.0f} s after "
                                      "its creation", where="settle_topic", field="topic", expected="a leader",
                                      got=None)
                time.sleep(0.1)
        time.sleep(int(self._properties(self.broker_ids[0]).get("replica.fetch.backoff.ms", "1000")) / 1000)
        return time.monotonic() - t0

    # -- stop -------------------------------------------------------------------------------
    def stop(self, grace_s: float | None = None) -> None:
        """The brokers, then the controller broker (:meth:`LocalCluster.stop`), then ZooKeeper:
        SIGTERM, SIGKILL after up to 5 s (at once with ``grace_s=0``). Safe to call twice."""
        with self._lock:
            super().stop(grace_s)
            grace = self.grace_s if grace_s is None else grace_s
            if grace > 0:
                self._signal_zookeeper(signal.SIGTERM, min(5.0, grace))
            self._signal_zookeeper(signal.SIGKILL, 10.0)
            if self.zookeeper is not None and not self.zookeeper_running():
                self.zookeeper.pid = None
            if self.nodes:
                self._save()

    def _signal_zookeeper(self, sig: int, wait_s: float) -> None:
        """Send ``sig`` to ZooKeeper's process group and wait up to ``wait_s`` for it to exit."""
        zk = self.zookeeper
        if zk is None or zk.pid is None or not self.zookeeper_running():
            return
        try:
            os.killpg(zk.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while self.zookeeper_running() and time.monotonic() < deadline:
            time.sleep(0.05)

    # -- state file -------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        return {**super()._state(), "mode": self.mode,
                "zookeeper": asdict(self.zookeeper) if self.zookeeper is not None else None}

    @classmethod
    def attach(cls, directory: Any) -> LocalCluster:
        c = super().attach(directory)
        assert isinstance(c, ZkCluster)
        saved = json.loads((c.dir / "cluster.json").read_text())
        c.zookeeper = Node(**saved["zookeeper"]) if saved.get("zookeeper") else None
        return c

    def _refuse_live(self) -> None:
        state = self.dir / "cluster.json"
        if state.is_file():
            try:
                saved = json.loads(state.read_text())
            except (OSError, ValueError):
                saved = {}
            zk = saved.get("zookeeper") or {}
            if live_pid(zk.get("pid"), str(self.zoo_cfg_path)):
                raise ConfigError(f"{self.dir} holds a running ZooKeeper (pid {zk['pid']}): run "
                                  f"`epochlab kafka cluster down --dir {self.dir}` first", where=str(state),
                                  field="dir", expected="no live cluster", got=zk["pid"])
        super()._refuse_live()


#: What a ZooKeeper-mode broker adds to its release's jars (:func:`broker_extras_dir`): the
#: SLF4J 1.7 binding for log4j 1.2's API and its maintained implementation (reload4j), which it
#: logs through, and the JAXB API, which Java 11 removed from the JDK and 0.11 still calls
#: (``CoreUtils.urlSafeBase64EncodeNoPadding`` uses ``javax.xml.bind.DatatypeConverter`` when it
#: makes the cluster id: ``NoClassDefFoundError`` on Java 17 without it, measured on 0.11.0.0).
BROKER_EXTRAS = ("org.slf4j:slf4j-reload4j:1.7.36", "ch.qos.reload4j:reload4j:1.2.25",
                 "javax.xml.bind:jaxb-api:2.3.1")
#: The ZooKeeper client a broker whose release ships ZooKeeper 3.4.13 or 3.4.14 (Kafka 2.0 -
#: 2.3) runs with instead: those clients cannot connect on Java 14+. ZOOKEEPER-2184 (3.4.13)
#: keeps the connect string's addresses unresolved and re-resolves them through
#: ``StaticHostProvider.getHostString``, which parses ``InetSocketAddress.toString()``; Java 14
#: changed that to ``host/<unresolved>:port``, so the client tries to connect to an unresolved
#: address forever (``java.nio.channels.UnresolvedAddressException``, measured with 2.1.1;
#: apache/zookeeper pull request 1509 changed the parsing in 2020, after the last 3.4 release).
#: 3.4.10, the last 3.4 client before ZOOKEEPER-2184 (the one 0.11.0.0 ships), resolves the
#: addresses once and speaks the same protocol; the ZooKeeper server stays the release's own.
ZK_CLIENT_SUBSTITUTE = "org.apache.zookeeper:zookeeper:3.4.10"
_BROKEN_ZK_CLIENTS = ("zookeeper-3.4.13.jar", "zookeeper-3.4.14.jar")
EXTRAS = "zk-broker"


def broker_extras(jars: Path) -> tuple[str, ...]:
    """The artifacts a ZooKeeper-mode broker of the release in ``jars`` adds to its class path:
    :data:`BROKER_EXTRAS`, and :data:`ZK_CLIENT_SUBSTITUTE` in place of a 3.4.13 / 3.4.14 client."""
    broken = any((jars / name).is_file() for name in _BROKEN_ZK_CLIENTS)
    return BROKER_EXTRAS + ((ZK_CLIENT_SUBSTITUTE,) if broken else ())


def broker_extras_dir(jars: Path) -> Path:
    """``jars/zk-broker`` with :func:`broker_extras`, resolved with Maven the first time
    (atomic: a failed copy leaves no folder). The release folder keeps ``slf4j-nop`` for the
    oracle's JVMs; only a broker's class path takes these."""
    folder = jars / EXTRAS
    wanted = broker_extras(jars)
    if folder.is_dir() and len(list(folder.glob("*.jar"))) == len(wanted):
        return folder
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ConfigError("Maven (mvn) is needed to resolve the broker's log binding and is not on PATH",
                          where="mvn", field="mvn", expected="Apache Maven 3", got=None)
    partial = jars / f".{EXTRAS}.partial.{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    for artifact in wanted:
        cmd = [mvn, "-q", "-B", "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy",
               f"-Dartifact={artifact}", f"-DoutputDirectory={partial}"]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=str(jars))
        if proc.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
            raise ConfigError(f"Maven could not resolve {artifact}: {tail}", where=str(jars), field="logging",
                              expected="an artifact on Maven Central", got=artifact)
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    return folder


def log4j1_properties(node_dir: Path) -> str:
    """A log4j 1.2 configuration: INFO to ``server.log``, the ``state.change.logger`` (leader and
    follower transitions, ``Partition.makeLeader`` / ``makeFollower``) to ``state-change.log``
    only, as Kafka's own ``config/log4j.properties`` of these releases splits them."""
    def appender(name: str, file: str) -> list[str]:
        return [f"log4j.appender.{name}=org.apache.log4j.FileAppender",
                f"log4j.appender.{name}.File={node_dir / file}",
                f"log4j.appender.{name}.layout=org.apache.log4j.PatternLayout",
                f"log4j.appender.{name}.layout.ConversionPattern=[%d] %p %m (%c)%n"]

    return "\n".join(["log4j.rootLogger=INFO, server", *appender("server", "server.log"),
                      *appender("stateChange", "state-change.log"),
                      "log4j.logger.state.change.logger=INFO, stateChange",
                      "log4j.additivity.state.change.logger=false", ""])


def _tail(node: Node | None) -> str:
    if node is None:
        return "ZooKeeper: not started"
    try:
        text = node.log_path.read_text(errors="replace").strip().splitlines()[-3:]
    except OSError:
        text = []
    return f"ZooKeeper: {' | '.join(text) or '(no output)'}"


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port
