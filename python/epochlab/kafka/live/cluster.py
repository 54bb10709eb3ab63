"""A local KRaft cluster of real Kafka processes, started from the resolved jars.

One JVM per node: a controller quorum (``controllers`` dedicated controllers, ids 100, 101, ...)
and ``brokers`` brokers (ids 1 .. N), each started as ``java -cp '<jars>/*' kafka.Kafka
server.properties`` in its own process group, with small heaps and timeouts lowered for fast
failover (:data:`FAST_FAILOVER`). Everything a node writes is under the cluster directory::

    DIR/cluster.json            pids, addresses, namespaces: what `cluster down --dir DIR` needs
    DIR/node-<id>/server.properties
    DIR/node-<id>/data/         the node's log directory (KRaft metadata and partition logs)
    DIR/node-<id>/stdout.log    the JVM's stdout and stderr
    DIR/node-<id>/server.log    the node's log (log4j 2, INFO, 4.0+ releases: LOG_PATTERN)
    DIR/node-<id>/disk/         a ``lossy_brokers`` broker's disk, mounted at data/ through
                                the lossy filesystem (:mod:`epochlab.kafka.live.lossyfs`)

Networking (``network=``):

* ``"netns"`` (the default as root): each node runs in its own network namespace
  ``el<tag>-<id>``, joined by a veth pair to a bridge ``elbr-<tag>`` in the harness's namespace,
  with its own address ``10.213.K.<id + 10>`` (:mod:`epochlab.kafka.live.netns`); the harness
  and its confluent-kafka clients reach the nodes through the bridge from ``10.213.K.1`` (the
  endpoint :data:`CLIENT`). A connection
  between two nodes then carries the sender's own address, so a firewall rule can cut a chosen
  pair (:mod:`epochlab.kafka.live.faults`). Per-node loopback addresses (127.0.0.x) cannot do that:
  Linux picks 127.0.0.1 as the source of every loopback connection that does not bind one, and
  Kafka's clients never bind, so a rule on ``lo`` could not tell which node sent a packet.
* ``"loopback"``: every node on 127.0.0.1 with ports of its own; no network partitions. The
  fallback when not root.

Readiness is the Admin API's word: the cluster is up once every broker is in the metadata.
:meth:`LocalCluster.stop` sends SIGCONT (a paused node cannot act on a signal), SIGTERM to the
brokers, then to the controllers, SIGKILL to what is left after ``grace_s``, and removes the
namespaces and the bridge. A cluster started by this process is also stopped at interpreter
exit and on SIGINT/SIGTERM, and its JVMs get SIGKILL when this process dies
(``PR_SET_PDEATHSIG`` through util-linux's ``setpriv``) unless started with ``detach=True``
(``epochlab kafka cluster up``).

>>> with LocalCluster("/tmp/kc", brokers=3) as cluster:     # doctest: +SKIP
...     print(cluster.bootstrap_servers)
10.213.7.11:9092,10.213.7.12:9092,10.213.7.13:9092
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from epochlab.errors import ConfigError
from epochlab.kafka.live import lossyfs, netns

__all__ = ["CLIENT", "FAST_FAILOVER", "JVM_OPTIONS", "LOG_PATTERN", "LocalCluster", "Node", "live_pid",
           "log4j2_properties"]

#: The endpoint name of the harness's own side of the network (where its clients run).
CLIENT = "client"

#: Heap and collector of each JVM: the machine has two cores and other work running.
JVM_OPTIONS = ("-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true")

#: Timeouts lowered from Kafka's defaults so a crashed or cut-off broker is fenced in ~3 s
#: (default session timeout 9 s) and a stalled follower leaves the ISR in ~5 s (default 30 s).
FAST_FAILOVER = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "5000",
    "controller.quorum.fetch.timeout.ms": "3000",
    "controller.quorum.election.timeout.ms": "1000",
}

#: Each line of a node's ``server.log``: wall-clock ms since the epoch, level, logger, message.
LOG_PATTERN = "%d{UNIX_MILLIS} %p [%c] %m%n"


def log4j2_properties(path: Path) -> str:
    """A log4j 2 configuration writing INFO and above to ``path`` (:data:`LOG_PATTERN`), like
    the ``server.log`` of Kafka's own ``config/log4j2.yaml``, with the state-change logger
    (leader and follower transitions) in the same file."""
    return "\n".join([
        "status = warn",
        "appender.server.type = File",
        "appender.server.name = server",
        f"appender.server.fileName = {path}",
        "appender.server.append = true",
        "appender.server.layout.type = PatternLayout",
        f"appender.server.layout.pattern = {LOG_PATTERN}",
        "rootLogger.level = INFO",
        "rootLogger.appenderRef.server.ref = server",
        "",
    ])


_PORT_BROKER = 9092
_PORT_CONTROLLER = 9093
_STATE = "cluster.json"
_START_ATTEMPTS = 2  # a start that fails after the spawn is tried once more (see LocalCluster.start)
_STALL_S = 30.0  # a node not yet the JVM, or without its first log line, this long after the spawn is stuck


@dataclass
class Node:
    """One Kafka process. ``roles``: ``"broker"`` or ``"controller"``; ``host``/``port``: its
    listener; ``pid``: the JVM (``None`` while it is not running); ``netns`` and ``veth``: its
    namespace and the bridge end of its link (``None`` on the loopback network)."""

    node_id: int
    roles: str
    host: str
    port: int
    dir: str
    argv: list[str] = field(default_factory=list)
    pid: int | None = None
    netns: str | None = None
    veth: str | None = None
    paused: bool = False

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def data_dir(self) -> Path:
        return Path(self.dir) / "data"

    @property
    def log_path(self) -> Path:
        return Path(self.dir) / "stdout.log"

    @property
    def config_path(self) -> Path:
        return Path(self.dir) / "server.properties"

    @property
    def server_log(self) -> Path:
        """The node's own log (log4j 2, INFO; releases 4.0+): one line per event, starting
        with the wall-clock time in ms since the epoch (:data:`LOG_PATTERN`)."""
        return Path(self.dir) / "server.log"


def live_pid(pid: int | None, marker: str | None = None) -> bool:
    """Whether ``pid`` is a running (not zombie) process whose command line contains
    ``marker`` (a guard against a reused pid)."""
    if pid is None:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    state = stat.rsplit(")", 1)[-1].split()[0]
    return state not in ("Z", "X") and (marker is None or marker in cmdline)


def process_age_s(pid: int | None) -> float | None:
    """Seconds since process ``pid`` started (``/proc/<pid>/stat`` field 22, in clock ticks
    since boot, against ``/proc/uptime``); ``None`` when there is no such process."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))  # field 22 = index 19 after ")"


class LocalCluster:
    """A KRaft cluster of ``controllers`` + ``brokers`` JVMs under ``directory``.

    ``version``: the Kafka release (its jars must be resolved, see :func:`jar_dir`);
    ``network``: ``"auto"`` (netns as root, else loopback), ``"netns"`` or ``"loopback"``;
    ``overrides``: extra ``server.properties`` entries for every node (after
    :data:`FAST_FAILOVER`); ``detach``: leave the JVMs running when this process exits;
    ``proxied_listeners``: that many extra broker listeners whose advertised address is a
    link proxy (:func:`epochlab.kafka.live.proxy.client_listeners`, netns only), for clients
    whose links to the brokers a run delays.
    Raises :class:`ConfigError` for bad arguments, a directory holding a live cluster, or a
    cluster that is not ready within ``ready_timeout_s`` (with the tail of each dead node's
    log). A release's ZooKeeper-mode cluster is :class:`~epochlab.kafka.live.zookeeper.ZkCluster`.
    """

    #: how the cluster keeps its metadata: ``"kraft"`` here, ``"zk"`` in ``ZkCluster``
    mode = "kraft"

    def __init__(self, directory: str | os.PathLike[str], brokers: int = 3, controllers: int = 1,
                 version: str | None = None, network: str = "auto",
                 overrides: dict[str, str] | None = None, jvm_options: tuple[str, ...] = JVM_OPTIONS,
                 ready_timeout_s: float = 90.0, grace_s: float = 15.0, detach: bool = False,
                 proxied_listeners: int = 0, lossy_brokers: tuple[int, ...] = ()) -> None:
        from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION

        if not 1 <= brokers <= 89:
            raise ConfigError(f"--brokers: expected 1 to 89, got {brokers}", where="--brokers",
                              field="brokers", expected="1..89", got=brokers)
        if not 1 <= controllers <= 9:
            raise ConfigError(f"controllers: expected 1 to 9, got {controllers}", where="controllers",
                              field="controllers", expected="1..9", got=controllers)
        if network not in ("auto", "netns", "loopback"):
            raise ConfigError(f"network: expected auto, netns or loopback, got {network!r}",
                              where="network", field="network", expected="auto|netns|loopback", got=network)
        if network == "netns" and not netns.available():
            raise ConfigError("network namespaces need root, iproute2 (ip) and util-linux (nsenter)", where="network",
                              field="network", expected="root", got=os.geteuid())
        if not 0 <= proxied_listeners <= 20:
            raise ConfigError(f"proxied_listeners: expected 0 to 20, got {proxied_listeners}", where="proxied_listeners",
                              field="proxied_listeners", expected="0..20", got=proxied_listeners)
        self.proxied_listeners = proxied_listeners
        bad = [b for b in lossy_brokers if not 1 <= b <= brokers]
        if bad:
            raise ConfigError(f"lossy_brokers: {bad} are not brokers of this cluster (1 to {brokers})",
                              where="lossy_brokers", field="lossy_brokers", expected=f"1..{brokers}", got=bad)
        self.lossy_brokers = tuple(sorted(set(lossy_brokers)))
        self._disks: dict[int, lossyfs.LossyDisk] = {}
        self.dir = Path(directory).resolve()
        self.version = version or DEFAULT_KAFKA_VERSION
        self.network = ("netns" if netns.available() else "loopback") if network == "auto" else network
        self.overrides = dict(overrides or {})
        self.jvm_options = tuple(jvm_options)
        self.ready_timeout_s = ready_timeout_s
        self.grace_s = grace_s
        self.detach = detach
        self.n_brokers = brokers
        self.n_controllers = controllers
        self.cluster_id = ""
        self.tag = ""
        self.subnet: str | None = None
        self.bridge: str | None = None
        self.client_host = "127.0.0.1"
        self.nodes: dict[int, Node] = {}
        self.started_at_s: float | None = None
        self.ready_after_s: float | None = None
        self.start_attempts = 0
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._lock = threading.RLock()

    # -- views ------------------------------------------------------------------------------
    @property
    def broker_ids(self) -> list[int]:
        return sorted(i for i, n in self.nodes.items() if n.roles == "broker")

    @property
    def controller_ids(self) -> list[int]:
        return sorted(i for i, n in self.nodes.items() if n.roles == "controller")

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(self.nodes[i].address for i in self.broker_ids)

    def pids(self) -> dict[int, int | None]:
        """node id -> pid of its running JVM (``None`` when killed or stopped)."""
        return {i: n.pid for i, n in sorted(self.nodes.items())}

    def host_of(self, endpoint: int | str) -> str:
        """The address of a node id, or of :data:`CLIENT`."""
        if endpoint == CLIENT:
            return self.client_host
        return self.nodes[int(endpoint)].host

    def is_running(self, node_id: int) -> bool:
        """Whether node ``node_id``'s JVM runs. A JVM this object started is its child: the
        kernel's word (``Popen.poll``) decides. Reading ``/proc`` would not do: while the child
        execs from ``setpriv`` to ``nsenter`` to ``java`` its command line is for a moment not
        the node's (measured: in 40 of 40 spawns a check within 50 ms said "not running"), and
        a readiness check right after the spawn then reported a live node as exited (CI,
        before 7db0997). A node of an attached cluster (another process's child) is checked by pid
        and command line (:func:`live_pid`)."""
        n = self.nodes[node_id]
        proc = self._procs.get(node_id)
        if proc is not None and proc.pid == n.pid:
            return proc.poll() is None
        return live_pid(n.pid, str(n.config_path))

    # -- lifecycle --------------------------------------------------------------------------
    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> LocalCluster:
        """Lay out, format and start every node, then wait until the Admin API lists every
        broker. On any failure everything started so far is stopped again.

        A start that fails after the JVMs were spawned (a node exited, stalled before its first
        log line, or the brokers never all registered) is tried once more from scratch, with a
        new network; the failed attempt's evidence (each node's process state, log tail and
        namespace addresses) stays in ``DIR/start-failure-<n>.txt``, is named on stderr, and the
        attempts are counted in ``cluster.json`` (``start_attempts``). Errors before the spawn
        (a bad configuration, a format failure) are not retried."""
        from epochlab.kafka.jars import jar_dir

        jars = jar_dir(self.version, resolve=False)
        self._refuse_live()
        self.dir.mkdir(parents=True, exist_ok=True)
        lossyfs.unmount_all(self.dir)  # a mount left by a process that died
        for old in [*self.dir.glob("node-*"), *self.dir.glob("start-failure-*.txt")]:
            if old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.unlink(missing_ok=True)
        self.start_attempts = 0
        while True:
            self.start_attempts += 1
            try:
                self._start_once(jars)
                return self
            except _StartFailed as failed:
                report = self.dir / f"start-failure-{self.start_attempts}.txt"
                report.write_text(failed.report)
                if self.start_attempts >= _START_ATTEMPTS:
                    raise failed.error from None
                print(f"epochlab: cluster start attempt {self.start_attempts} failed ({failed.error}); "
                      f"evidence in {report}; starting again", file=sys.stderr)
                lossyfs.unmount_all(self.dir)
                for old in self.dir.glob("node-*"):
                    shutil.rmtree(old, ignore_errors=True)

    def _start_once(self, jars: Path) -> None:
        self.nodes = {}
        self.cluster_id = _cluster_id()
        self.tag = uuid.uuid4().hex[:6]
        spawned = False
        try:
            self._plan()
            if self.network == "netns":
                self._make_network()
            self._write_configs()
            self._mount_disks()
            self._format(jars)
            self._register()
            self.started_at_s = time.monotonic()
            spawned = True
            self._spawn_all(jars)
            self._save()
            self.wait_ready(self.ready_timeout_s)
            self.ready_after_s = time.monotonic() - self.started_at_s
            for disk in self._disks.values():
                # what the cluster wrote before it was ready (the format's bootstrap.checkpoint,
                # the metadata log) stands for a machine set up long before: durable
                disk.sync()
        except ConfigError as exc:
            report = self._start_report(exc) if spawned else ""
            self.stop(grace_s=0)
            if spawned:
                raise _StartFailed(exc, report) from exc
            raise
        except BaseException:
            self.stop(grace_s=0)
            raise

    def _spawn_all(self, jars: Path) -> None:
        """Spawn every node, the controllers (100+) first (a ZooKeeper-mode cluster, which
        waits between them, overrides it: :mod:`epochlab.kafka.live.zookeeper`)."""
        for node_id in sorted(self.nodes, reverse=True):
            self._spawn(node_id, jars)

    def _start_report(self, error: ConfigError) -> str:
        """What a failed start leaves to read: the error, each node's process (its program,
        state, kernel wait channel, CPU ticks), whether it wrote a log and the log's tail, and
        the addresses in its namespace."""
        lines = [f"start attempt {self.start_attempts} of the cluster in {self.dir} failed "
                 f"{time.monotonic() - (self.started_at_s or time.monotonic()):.1f} s after the spawn:",
                 f"  {error}", ""]
        for node_id, n in sorted(self.nodes.items()):
            lines.append(f"node {node_id} ({n.roles}, {n.address}, netns {n.netns}): {_process_report(n.pid)}")
            log = n.server_log if n.server_log.exists() else n.log_path
            try:
                tail = log.read_text(errors="replace").splitlines()[-12:]
            except OSError:
                tail = []
            lines.append(f"  {log.name}: {'(absent or empty)' if not tail else ''}")
            lines.extend(f"    {t[:400]}" for t in tail)
            if n.netns:
                addrs = subprocess.run(["ip", "-n", n.netns, "-br", "addr"], capture_output=True, text=True,
                                       check=False)
                lines.append("  addresses: " + " | ".join((addrs.stdout or addrs.stderr).strip().splitlines()))
        if self.bridge:
            ports = subprocess.run(["ip", "-br", "link", "show", "master", self.bridge], capture_output=True,
                                   text=True, check=False)
            lines.append(f"bridge {self.bridge} ports: " + " | ".join((ports.stdout or ports.stderr).strip().splitlines()))
        return "\n".join(lines) + "\n"

    def _refuse_live(self) -> None:
        state = self.dir / _STATE
        if not state.is_file():
            return
        try:
            saved = json.loads(state.read_text())
        except (OSError, ValueError):
            return
        live = [n["node_id"] for n in saved.get("nodes", [])
                if live_pid(n.get("pid"), str(Path(n["dir"]) / "server.properties"))]
        if live:
            raise ConfigError(f"{self.dir} holds a running cluster (nodes {live}): run "
                              f"`epochlab kafka cluster down --dir {self.dir}` first",
                              where=str(state), field="dir", expected="no live cluster", got=live)
        netns.remove(saved)

    def _plan(self) -> None:
        controllers = [100 + i for i in range(self.n_controllers)]
        brokers = [1 + i for i in range(self.n_brokers)]
        if self.network == "netns":
            self.subnet = netns.free_subnet()
            self.bridge = f"elbr-{self.tag}"
            self.client_host = f"{self.subnet}.1"
        ports = _free_ports(len(controllers) + len(brokers)) if self.network == "loopback" else []
        for k, node_id in enumerate(controllers + brokers):
            roles = "controller" if node_id >= 100 else "broker"
            if self.network == "netns":
                host, port = f"{self.subnet}.{node_id + 10}", (_PORT_CONTROLLER if roles == "controller" else _PORT_BROKER)
                namespace, veth = f"el{self.tag}-{node_id}", f"elv{self.tag}-{node_id}"
            else:
                host, port, namespace, veth = "127.0.0.1", ports[k], None, None
            self.nodes[node_id] = Node(node_id, roles, host, port, str(self.dir / f"node-{node_id}"),
                                       netns=namespace, veth=veth)

    def _make_network(self) -> None:
        assert self.bridge is not None and self.subnet is not None
        netns.create(self.bridge, self.client_host, self.nodes.values())

    def _write_configs(self) -> None:
        voters = ",".join(f"{i}@{self.nodes[i].address}" for i in self.controller_ids)
        rf = str(min(3, self.n_brokers))
        for n in self.nodes.values():
            n.data_dir.mkdir(parents=True, exist_ok=True)
            props = {
                "process.roles": n.roles, "node.id": str(n.node_id),
                "controller.quorum.voters": voters, "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                "log.dirs": str(n.data_dir), "num.partitions": "1",
                "offsets.topic.replication.factor": rf, "offsets.topic.num.partitions": "1",
                "transaction.state.log.replication.factor": rf,
                "transaction.state.log.min.isr": str(min(2, self.n_brokers)),
                "transaction.state.log.num.partitions": "1",
                "group.initial.rebalance.delay.ms": "0", "auto.create.topics.enable": "false",
            }
            if n.roles == "controller":
                props["listeners"] = f"CONTROLLER://{n.address}"
            else:
                # each broker its own rack, as the model has it (fetch from follower, KIP-392)
                props.update({"listeners": f"PLAINTEXT://{n.address}",
                              "advertised.listeners": f"PLAINTEXT://{n.address}",
                              "inter.broker.listener.name": "PLAINTEXT", "broker.rack": str(n.node_id)})
                if self.network == "netns" and self.proxied_listeners:
                    from epochlab.kafka.live.proxy import client_listeners

                    for key, value in client_listeners(n.node_id, n.host, self.proxied_listeners).items():
                        props[key] = f"{props[key]},{value}"  # listeners, advertised, protocol map
            props.update(FAST_FAILOVER)
            props.update(self.overrides)
            n.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def _format(self, jars: Path) -> None:
        """``kafka.tools.StorageTool format`` for every node, two at a time (two cores)."""
        procs = []
        for n in self.nodes.values():
            cmd = ["java", *self.jvm_options, "-cp", f"{jars}/*", "kafka.tools.StorageTool", "format",
                   "-t", self.cluster_id, "-c", str(n.config_path)]
            procs.append((n, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))
            if len(procs) % 2 == 0:
                procs[-2][1].wait()
        for n, p in procs:
            out, _ = p.communicate()
            if p.returncode != 0:
                raise ConfigError(f"formatting node {n.node_id} failed: {out.decode(errors='replace')[-600:]}",
                                  where=str(n.config_path), field="format", expected="exit 0",
                                  got=p.returncode)

    def _argv(self, n: Node, jars: Path) -> list[str]:
        from epochlab.kafka.jars import logging_dir

        classpath, logging = f"{jars}/*", logging_dir(jars)
        extra: list[str] = []
        if logging is not None:
            # the release's jars with log4j 2's SLF4J binding in place of the no-op one
            classpath = ":".join([str(p) for p in sorted(logging.glob("*.jar"))] +
                                 [str(p) for p in sorted(jars.glob("*.jar")) if not p.name.startswith("slf4j-nop")])
            config = Path(n.dir) / "log4j2.properties"
            config.write_text(log4j2_properties(n.server_log))
            extra = [f"-Dlog4j2.configurationFile={config}"]
        java = ["java", *self.jvm_options, *extra, f"-Depochlab.node={n.node_id}", "-cp", classpath,
                "kafka.Kafka", str(n.config_path)]
        return (netns.enter(n.netns) + java) if n.netns else java

    def _spawn(self, node_id: int, jars: Path | None = None) -> None:
        """Start node ``node_id``'s JVM (its own session and process group; setpriv and
        nsenter exec on, so the pid is the JVM's)."""
        n = self.nodes[node_id]
        if jars is not None:
            n.argv = self._argv(n, jars)
        # util-linux's setpriv sets PR_SET_PDEATHSIG and execs on (no preexec_fn: this
        # process runs librdkafka threads, and code between fork and exec could deadlock)
        setpriv = shutil.which("setpriv")
        die = [setpriv, "--pdeathsig", "KILL"] if setpriv and not self.detach else []
        with open(n.log_path, "ab") as log:
            proc = subprocess.Popen(die + n.argv, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self._procs[node_id] = proc
        n.pid, n.paused = proc.pid, False

    def wait_ready(self, timeout_s: float) -> None:
        """Block until the Admin API's metadata lists every broker (and so the controller
        quorum answers); raise :class:`ConfigError` with the dead nodes' log tails otherwise."""
        from confluent_kafka.admin import AdminClient

        # librdkafka logs every refused connection while the brokers come up: keep it quiet
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "socket.timeout.ms": 2000,
                             "log_level": 0})
        deadline = time.monotonic() + timeout_s
        want = set(self.broker_ids)
        seen: set[int] = set()
        while time.monotonic() < deadline:
            dead = [i for i in self.nodes if self.nodes[i].pid is not None and not self.is_running(i)]
            if dead:
                raise ConfigError(f"node(s) {dead} exited during start: {self._tails(dead)}",
                                  where=str(self.dir), field="start", expected="running", got=dead)
            stalled = self._stalled()
            if stalled:
                raise ConfigError(f"node(s) {stalled} stalled during start: no JVM or no log line "
                                  f"{_STALL_S:.0f} s after the spawn ({'; '.join(_process_report(self.nodes[i].pid) for i in stalled)})",
                                  where=str(self.dir), field="start", expected="running", got=stalled)
            try:
                seen = set(admin.list_topics(timeout=2).brokers)
            except Exception:  # noqa: BLE001 - KafkaException while the brokers come up
                seen = set()
            if want <= seen:
                return
            time.sleep(0.3)
        raise ConfigError(f"cluster not ready after {timeout_s:.0f} s: brokers {sorted(seen)} of "
                          f"{sorted(want)} in the metadata; {self._tails(list(self.nodes))}",
                          where=str(self.dir), field="start", expected=sorted(want), got=sorted(seen))

    def _stalled(self) -> list[int]:
        """Nodes that show no sign of starting :data:`_STALL_S` seconds after the spawn: the
        process is still not the JVM (stuck in the launcher), or a release that logs through
        log4j 2 has not written its first log line."""
        if self.started_at_s is None or time.monotonic() - self.started_at_s < _STALL_S:
            return []
        out = []
        for i, n in self.nodes.items():
            if n.pid is None or not self.is_running(i):
                continue
            try:
                comm = Path(f"/proc/{n.pid}/comm").read_text().strip()
            except OSError:
                continue
            logs = (Path(n.dir) / "log4j2.properties").exists()
            if comm != "java" or (logs and not n.server_log.exists()):
                out.append(i)
        return out

    def _tails(self, node_ids: list[int]) -> str:
        out = []
        for i in node_ids:
            try:
                text = self.nodes[i].log_path.read_text(errors="replace").strip().splitlines()[-3:]
            except OSError:
                text = []
            out.append(f"node {i}: {' | '.join(text) or '(no output)'}")
        return "; ".join(out)

    def stop(self, grace_s: float | None = None) -> None:
        """Stop every node (SIGCONT, SIGTERM to brokers then controllers, SIGKILL after
        ``grace_s``), remove the network, forget the cluster. Safe to call twice."""
        grace = self.grace_s if grace_s is None else grace_s
        with self._lock:
            if grace > 0:
                for group in (self.broker_ids, self.controller_ids):
                    self.signal_nodes(group, signal.SIGTERM)
                    self.wait_exit(group, grace / 2)
            self.signal_nodes(list(self.nodes), signal.SIGKILL)
            self.wait_exit(list(self.nodes), 10)
            for n in self.nodes.values():
                n.pid = None
            for disk in self._disks.values():
                disk.unmount()
            self._disks = {}
            lossyfs.unmount_all(self.dir)
            if self.nodes:
                netns.remove(self._state())
                self._save()
            _LIVE.discard(self)

    def signal_nodes(self, node_ids: list[int], sig: int) -> None:
        """Send ``sig`` to each running node's process group; SIGCONT goes first with any
        other signal but SIGSTOP, as a paused JVM (maybe paused by another process) could
        not act on SIGTERM."""
        for i in node_ids:
            n = self.nodes[i]
            if not self.is_running(i) or n.pid is None:
                continue
            try:
                if sig != signal.SIGSTOP:
                    os.killpg(n.pid, signal.SIGCONT)
                os.killpg(n.pid, sig)
            except ProcessLookupError:
                pass
            n.paused = sig == signal.SIGSTOP

    def wait_exit(self, node_ids: list[int], timeout_s: float) -> list[int]:
        """Wait up to ``timeout_s`` for the nodes' JVMs to exit (reaping our children);
        the ids still running."""
        deadline = time.monotonic() + timeout_s
        while True:
            for i in node_ids:
                proc = self._procs.get(i)
                if proc is not None:
                    proc.poll()
            left = [i for i in node_ids if self.is_running(i)]
            if not left or time.monotonic() >= deadline:
                for i in node_ids:
                    if i not in left:
                        self.nodes[i].pid = None
                return left
            time.sleep(0.05)

    def restart_node(self, node_id: int) -> None:
        """Start a node whose JVM is not running again, with its data and command line."""
        if self.is_running(node_id):
            raise ConfigError(f"node {node_id} is running (pid {self.nodes[node_id].pid})",
                              where="restart", field="node", expected="a stopped node", got=node_id)
        self._spawn(node_id)
        self._save()

    def _mount_disks(self) -> None:
        """Mount each ``lossy_brokers`` broker's log directory through the lossy filesystem."""
        for node_id in self.lossy_brokers:
            disk = lossyfs.LossyDisk.for_node(self.nodes[node_id].dir)
            disk.mount()
            self._disks[node_id] = disk

    @property
    def lossy_mounted(self) -> tuple[int, ...]:
        """The brokers whose lossy filesystem this process mounted (and so can cut)."""
        return tuple(sorted(i for i, d in self._disks.items() if d.mounted))

    def power_loss(self, node_id: int) -> int:
        """A power cut under broker ``node_id``, whose JVM must be dead already: every write
        its log directory had not fsynced is lost (:meth:`LossyDisk.power_cycle`); returns
        the number of files changed back."""
        if node_id not in self._disks:
            raise ConfigError(f"broker {node_id} has no lossy filesystem (this cluster's: "
                              f"{list(self.lossy_brokers)}); start a cluster for the scenario",
                              where="power_loss", field="broker", expected=list(self.lossy_brokers), got=node_id)
        if self.is_running(node_id):
            raise ConfigError(f"broker {node_id} is running: kill it before cutting its power", where="power_loss",
                              field="broker", expected="a dead broker", got=node_id)
        return self._disks[node_id].power_cycle()

    # -- state file -------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        return {"dir": str(self.dir), "version": self.version, "mode": self.mode, "network": self.network,
                "cluster_id": self.cluster_id, "tag": self.tag, "subnet": self.subnet,
                "bridge": self.bridge, "client_host": self.client_host,
                "bootstrap_servers": self.bootstrap_servers, "owner_pid": os.getpid(),
                "detached": self.detach, "proxied_listeners": self.proxied_listeners,
                "start_attempts": self.start_attempts, "lossy_brokers": list(self.lossy_brokers),
                "nodes": [asdict(n) for _, n in sorted(self.nodes.items())]}

    def _save(self) -> None:
        tmp = self.dir / f"{_STATE}.tmp"
        tmp.write_text(json.dumps(self._state(), indent=1) + "\n")
        tmp.replace(self.dir / _STATE)

    @classmethod
    def attach(cls, directory: str | os.PathLike[str]) -> LocalCluster:
        """The cluster recorded in ``DIR/cluster.json`` (started by any process), to inspect or
        stop it; raises :class:`ConfigError` when there is none."""
        state_path = Path(directory).resolve() / _STATE
        try:
            saved = json.loads(state_path.read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"no cluster recorded in {state_path}: {exc}", where=str(state_path),
                              field="dir", expected="a cluster directory", got=str(directory)) from exc
        if saved.get("mode") == "zk" and cls is LocalCluster:
            raise ConfigError(f"{state_path} records a ZooKeeper-mode cluster: attach it with "
                              "epochlab.kafka.live.start.attach", where=str(state_path), field="mode",
                              expected="kraft", got="zk")
        brokers = sum(1 for n in saved["nodes"] if n["roles"] == "broker")
        controllers = len(saved["nodes"]) - brokers
        c = cls(saved["dir"], brokers=max(1, brokers), controllers=max(1, controllers),
                version=saved["version"], network="loopback", detach=True)
        c.network, c.cluster_id, c.tag = saved["network"], saved["cluster_id"], saved["tag"]
        c.subnet, c.bridge, c.client_host = saved["subnet"], saved["bridge"], saved["client_host"]
        c.proxied_listeners = saved.get("proxied_listeners", 0)
        c.nodes = {n["node_id"]: Node(**n) for n in saved["nodes"]}
        c.lossy_brokers = tuple(saved.get("lossy_brokers", ()))
        return c

    def _register(self) -> None:
        if not self.detach:
            _LIVE.add(self)
            _install_handlers()


# -- helpers -----------------------------------------------------------------------------------
_LIVE: set[LocalCluster] = set()
_HANDLERS_INSTALLED = False


def _stop_all() -> None:
    for c in list(_LIVE):
        c.stop(grace_s=min(c.grace_s, 5))


def _install_handlers() -> None:
    """atexit, SIGINT and SIGTERM stop this process's clusters, then go on as before."""
    global _HANDLERS_INSTALLED
    if _HANDLERS_INSTALLED or threading.current_thread() is not threading.main_thread():
        if not _HANDLERS_INSTALLED:
            atexit.register(_stop_all)
            _HANDLERS_INSTALLED = True
        return
    _HANDLERS_INSTALLED = True
    atexit.register(_stop_all)
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(sig)
        if previous == signal.SIG_IGN:  # e.g. SIGINT of a background job: leave it ignored
            continue

        def handler(signum: int, frame: Any, previous: Any = previous) -> None:
            _stop_all()
            if callable(previous):
                previous(signum, frame)
            elif previous == signal.SIG_DFL:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        signal.signal(sig, handler)


class _StartFailed(Exception):
    """A start attempt that failed after the spawn, with its evidence (internal)."""

    def __init__(self, error: ConfigError, report: str) -> None:
        super().__init__(str(error))
        self.error, self.report = error, report


def _process_report(pid: int | None) -> str:
    """``comm``, state, kernel wait channel and CPU ticks of a process, from ``/proc``."""
    if pid is None:
        return "no process"
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return f"pid {pid} gone"
    try:
        wchan = Path(f"/proc/{pid}/wchan").read_text().strip() or "-"
    except OSError:
        wchan = "?"
    return f"pid {pid} {comm} state {fields[0]} wchan {wchan} cpu {int(fields[11]) + int(fields[12])} ticks"


def _free_ports(count: int) -> list[int]:
    socks = []
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding (Uuid.toString),
    drawn again while it starts with a dash, as Kafka's ``Uuid.randomUuid`` does: the command
    line tools would read such an id as an option (``kafka-storage format -t -x...`` failed one
    run in 64 before this check)."""
    import base64

    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-") and cluster_id not in ("AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAQ"):
            return cluster_id
