"""The step driver of :mod:`epochlab.kafka.runs.scenario`: executes a scenario's steps on a real cluster.

:class:`Driver` keeps the clients (created before the run's clock starts, as the model's
are), the cuts in force (a scenario's partition and its dropped links change independently,
as in the model: ``heal`` removes the partition, not the links), the history and the sampled
timeline. Each action is one function of this module, which the step's entry in
``epochlab.steps`` names (``live``), gathered in :data:`ACTIONS`; ``docs/kafka-run.md`` has
the table of what each does on the cluster.
"""

from __future__ import annotations

import dataclasses
import signal
import time
from typing import Any, Callable

from epochlab.errors import ConfigError
from epochlab.kafka.live.clients import History, RecordingConsumer, RecordingProducer
from epochlab.kafka.live.cluster import CLIENT, LocalCluster
from epochlab.kafka.live.controller_admin import ControllerAdmin, controller_admin_available, elect_broker
from epochlab.kafka.live.faults import Faults
from epochlab.kafka.live.java_clients import JavaRecordingConsumer, JavaRecordingProducer
from epochlab.kafka.live.proxy import LinkProxies, client_proxy_port, latency_of
from epochlab.kafka.runs.era import live_generation
from epochlab.kafka.runs.links import node_ids, proxy_plan
from epochlab.kafka.runs.state import RealView
from epochlab.observe import Observer, Snapshot, StepRecord
from epochlab.scenarios.model import Scenario
from epochlab.scenarios.runner import state_conditions
from epochlab.sim.config import ClusterConfig, ConsumerConfig, ProducerConfig
from epochlab.steps import STEPS

__all__ = ["ACTIONS", "SAMPLE_INTERVAL_S", "Driver", "LiveStepRecord"]

#: How often the cluster is sampled while time passes (Admin requests + data directory reads).
SAMPLE_INTERVAL_S = 0.25
#: After the link proxies start, past the followers' fetch backoff: time for their next fetch.
PROXY_SETTLE_S = 0.5
#: The longest an Admin sample can take (two ``describe_partition`` calls of 1.5 s each, when
#: the broker the client asks is cut off): while a link is cut and a step is closer than this,
#: samples read the data directories only, so a sample never makes a step late. Without a cut
#: an Admin sample takes milliseconds, and the disks alone would show a stale high watermark
#: (the checkpoint file, written every 5 s) and no leadership change.
ADMIN_SAMPLE_S = 3.2
#: How often a ``wait_until`` reads the data directories between two samples while its
#: condition does not hold. A replica's log can pass through a state for a moment only: a
#: follower that truncates to the new leader's divergence point refetches at once, and gets
#: a client's retried batch as soon as the leader has it (a retry backoff of 100 ms after the
#: old leader's NOT_LEADER_OR_FOLLOWER). The model sees every state; a sample every 250 ms
#: can miss it, a read every 20 ms does not. The Admin state (leader, ISR, HW) is still
#: taken at :data:`SAMPLE_INTERVAL_S`.
WATCH_INTERVAL_S = 0.02


@dataclasses.dataclass
class LiveStepRecord(StepRecord):
    """A live step's row. ``applied_ms``, for a step that changed the network's cuts: node id
    -> the run clock's ms at which that node's rules took effect. The harness rewrites them one
    namespace after another (:meth:`~epochlab.kafka.live.faults.Faults._apply`), tens of
    milliseconds each, so one partition cuts its links node by node over up to a few hundred
    milliseconds after ``executed_at_ms``, and a broker whose rules come last can still take
    and acknowledge writes meanwhile (:func:`~epochlab.kafka.runs.fuzz.at_real_times` gives the
    model the same order). For a crash: the broker's id -> the ms at which its JVM exited and
    its connections closed (:meth:`~epochlab.kafka.live.faults.Faults.kill`)."""

    applied_ms: dict[int, int] | None = None


class Driver:
    """Executes the steps on the cluster, sampling it while time passes."""

    def __init__(self, scenario: Scenario, cluster: LocalCluster, topic: str, replicas: tuple[int, ...],
                 client: str = "librdkafka") -> None:
        self.scenario, self.cluster, self.topic, self.replicas = scenario, cluster, topic, replicas
        #: the clients' family, producers and consumers alike: ``librdkafka`` (confluent-kafka)
        #: or ``java`` (Kafka's own, of the cluster's release)
        self.client = client
        #: librdkafka settings every producer adds: before 0.11 (message format v0/v1) a broker
        #: keeps an uncompressed batch as single messages, while the model of that generation
        #: writes each batch as one compressed wrapper (``Generation.wrapper_batches``), so the
        #: producers compress (gzip, which every release reads)
        self.producer_extra = {"compression.type": "gzip"} if live_generation(cluster.version).wrapper_batches else {}
        uses_txn = any(c.get("transactional.id") or c.get("transactional_id")
                       for c in scenario.producers.values())
        self.view = RealView(cluster, topic, replicas, with_lso=uses_txn)
        self.brokers = ClusterConfig.from_dict(scenario.cluster, f"{scenario.where}: cluster").brokers
        self.faults = Faults(cluster)
        node_links, proxied = proxy_plan(scenario, cluster.broker_ids, cluster.controller_ids)
        #: the links the scenario delays, proxied from the start of the run (started by :meth:`run`)
        self.proxies = LinkProxies(cluster, node_links, proxied) if node_links or proxied else None
        self.faults.proxies = self.proxies
        self.partition_cuts: set[tuple[Any, Any]] = set()
        self.link_cuts: set[tuple[Any, Any]] = set()
        self.groups: list[list[Any]] | None = None
        where = scenario.where
        self.producer_cfgs = {n: ProducerConfig.from_dict(c, f"{where}: producers.{n}")
                              for n, c in scenario.producers.items()}
        self.consumer_cfgs = {n: ConsumerConfig.from_dict(c, f"{where}: consumers.{n}")
                              for n, c in scenario.consumers.items()}
        self.producers: dict[str, RecordingProducer] = {}
        self.consumers: dict[str, RecordingConsumer | JavaRecordingConsumer] = {}
        self.last_commit: dict[str, float] = {}
        #: consumers a ``crash_consumer`` stopped: down until ``restart_consumer``, as the
        #: model's (``sim.consumer.Consumer.crash``: poll, commit and list_offsets do nothing)
        self.crashed_consumers: set[str] = set()
        self.history = History()
        self.observer = Observer()
        self.timeline: list[tuple[int, int | None, int | None, tuple[int, ...], bool]] = []
        self.records: list[StepRecord] = []
        self.notes: list[str] = []
        self._last_sample = 0.0
        self._last_watch = 0.0
        self._controller_admin: ControllerAdmin | None = None
        self.shutting_down: set[int] = set()

    # -- time and sampling ------------------------------------------------------------------
    def now_ms(self) -> int:
        return self.history.now_ms()

    def cuts(self) -> set[tuple[Any, Any]]:
        return self.partition_cuts | self.link_cuts

    def sample(self, admin: bool = True, watch: bool = False) -> Snapshot:
        """The cluster now, recorded; a ``watch`` read (a ``wait_until``'s data-directory
        read between two samples) does not move the next sample."""
        snap, _ = self.view.snapshot(self.now_ms(), self.cuts(), admin=admin)
        self.observer.sample(snap)
        point = (snap.time_ms, snap.leader, snap.leader_epoch, snap.isr, snap.offline)
        if not self.timeline or self.timeline[-1][1:] != point[1:]:
            self.timeline.append(point)
        self._last_watch = time.monotonic()
        if not watch:
            self._last_sample = self._last_watch
        return snap

    def pump(self) -> None:
        for p in self.producers.values():
            p.poll(0)

    def idle_until(self, target_ms: int, stop: Callable[[Snapshot], bool] | None = None) -> bool:
        """Let time pass until ``target_ms`` (run clock), sampling. With ``stop`` (a condition
        on a snapshot), return True as soon as it holds: checked on every sample (with the
        Admin state, as a condition on the leader or ISR needs it) and on the data directories
        read every :data:`WATCH_INTERVAL_S` between samples."""
        while True:
            self.pump()
            now = time.monotonic()
            snap, watch = None, False
            if now - self._last_sample >= SAMPLE_INTERVAL_S:
                snap = self.sample(admin=stop is not None or not self.cuts()
                                   or target_ms - self.now_ms() > ADMIN_SAMPLE_S * 1000)
            elif stop is not None and now - self._last_watch >= WATCH_INTERVAL_S:
                snap, watch = self.sample(admin=False, watch=True), True
            if stop is not None and snap is not None and stop(snap):
                if watch:
                    # the Admin state as of now too (a leader's HW, its ISR): the next step's
                    # row reads it, as it does after a condition met on a sample
                    self.sample(admin=True)
                return True
            left = target_ms - self.now_ms()
            if left <= 0:
                return False
            time.sleep(min(WATCH_INTERVAL_S if stop is not None else 0.05, left / 1000))

    def start_clients(self) -> None:
        """Create the clients before the clock starts, as the model does (their first request
        finds the coordinator, inits transactions, creates internal topics on a new cluster:
        seconds), except those a partition step separates from other clients: they are made
        at first use, bootstrapped from their side."""
        if any(s.action in ("elect", "elect_preferred") for s in self.scenario.steps) \
                and controller_admin_available(self.cluster):
            self.controller_admin()  # its JVM starts in seconds: not inside the run's windows
        late = {n for s in self.scenario.steps if s.action == "partition"
                for n in self._split_clients(s.params["groups"])}
        late |= self._later_sessions()
        for name in self.producer_cfgs:
            if name not in late:
                self.producer(name)
        for name in self.consumer_cfgs:
            if name not in late:
                _prime_group(self.cluster.bootstrap_servers, self.topic, f"{self.topic}-{name}")
                self.consumer(name).committed(30.0)

    def _later_sessions(self) -> set[str]:
        """Transactional producers that share their ``transactional.id`` with a producer
        listed before them: a new session of the same id (seed 001's zombie fencing). Its
        ``init_transactions`` fences the earlier session (InitProducerId bumps the epoch), so
        it is created at first use; the model's transactional producer also asks for its
        producer id only at its first transaction (``sim/producer.py``, ``_drain``)."""
        seen: set[str] = set()
        out: set[str] = set()
        for name, cfg in self.producer_cfgs.items():
            tid = cfg.transactional_id
            if tid is not None:
                if tid in seen:
                    out.add(name)
                seen.add(tid)
        return out

    def _split_clients(self, groups: list[list[Any]]) -> set[str]:
        names = set(self.producer_cfgs) | set(self.consumer_cfgs)
        sides = [{n for n in g if n in names} for g in groups]
        return set().union(*sides) if sum(1 for s in sides if s) > 1 else set()

    def run(self) -> None:
        if self.proxies is not None:
            self.proxies.start()  # before the clients: they bootstrap through it
            if self.proxies.node_links:
                # starting the proxies aborted the brokers' established connections, and a
                # follower whose fetch failed waits replica.fetch.backoff.ms before the next
                # (AbstractFetcherThread.handlePartitionsWithErrors): without this wait a run's
                # first acks=all writes waited for it (measured on Kafka 2.8.0: 1.9 s against a
                # 1 s request timeout, so they were retried and written twice)
                cfg = ClusterConfig.from_dict(self.scenario.cluster, f"{self.scenario.where}: cluster")
                time.sleep(cfg.replica_fetch_backoff_ms / 1000 + PROXY_SETTLE_S)
        self.start_clients()
        warm, self.history = self.history, History()  # the run's clock starts now
        self.history.idempotent |= warm.idempotent
        for c in [*self.producers.values(), *self.consumers.values()]:
            c.history = self.history
        self.last_commit = {n: time.monotonic() for n in self.last_commit}
        self.records.append(StepRecord(None, self.now_ms(), "initial state"))
        self.sample()
        cursor = self.now_ms()
        for step in self.scenario.steps:
            target = step.at_ms if step.at_ms is not None else cursor + (step.after_ms or 0)
            self.idle_until(target)
            # The step starts at its time: while a link is cut the row's state before it is
            # read from the disks (the Admin view is the last one sampled), since an Admin call
            # can take seconds when a broker is cut off (a partition at 0 ms once delayed the
            # next step, due at 3,000 ms, to 3,525 ms: `epochlab kafka fuzz` run 2,
            # docs/kafka-run.md); without a cut it asks the Admin API too (milliseconds).
            self.records[-1].snapshot = self.sample(admin=not self.cuts())
            record = LiveStepRecord(step, self.now_ms())
            self.faults.applied = {}
            try:
                record.outcome = ACTIONS[step.action](self, dict(step.params)) or ""
            except Exception as exc:  # noqa: BLE001 - any failure of a real operation is the step's result
                record.error = f"{type(exc).__name__}: {exc}"
            if self.faults.applied:
                started = self.history.started
                record.applied_ms = {n: int((t - started) * 1000) for n, t in sorted(self.faults.applied.items())}
            self.pump()
            self.records.append(record)
            cursor = self.now_ms()
        self.idle_until(cursor + self.scenario.settle_ms)
        self.records[-1].snapshot = self.sample()

    def controller_admin(self) -> ControllerAdmin:
        """Kafka's Admin client at the controllers (made at first use, closed by :meth:`close`)."""
        if self._controller_admin is None:
            self._controller_admin = ControllerAdmin(self.cluster)
        return self._controller_admin

    def forwarding_broker(self) -> int:
        """A broker that can forward a request to the controller now: running, reached by the
        harness, and connected both ways to every controller (the lowest such id)."""
        cuts = self.cuts()
        for b in self.cluster.broker_ids:
            if self.view.reachable(b, cuts) and not any(
                    (b, c) in cuts or (c, b) in cuts for c in self.cluster.controller_ids):
                return b
        raise ConfigError("no running broker is connected to both the harness and the controller to forward "
                          "the election", where="elect", field="broker", expected="a connected broker", got=None)

    def close(self) -> None:
        """Close the clients, remove the cuts, stop the link proxies (the last two also when
        closing a client fails)."""
        from confluent_kafka import KafkaException

        try:
            if self._controller_admin is not None:
                self._controller_admin.close()
                self._controller_admin = None
            for c in self.consumers.values():
                c.close()
            for p in self.producers.values():
                if isinstance(p, JavaRecordingProducer):
                    p.close(5)  # its I/O thread would go on retrying
                else:
                    try:
                        p.flush(5)
                    except KafkaException:  # a fenced transactional producer is fatal: nothing to flush
                        pass
            self.consumers.clear()
            self.producers.clear()
        finally:
            try:
                if self.cuts():
                    self.faults.set_cuts(set())
            finally:
                if self.proxies is not None:
                    self.proxies.stop()

    # -- clients ----------------------------------------------------------------------------
    def bootstrap_for(self, client: str) -> str:
        """All brokers, or during a partition that splits the clients, the brokers of the
        client's group (a client's only way to be "on one side": they share one address)."""
        brokers = self.cluster.broker_ids
        proxied = self.proxies.clients.get(client) if self.proxies is not None else None
        if self.groups is not None and self._clients_split():
            side = next((g for g in self.groups if client in g), None)
            if side is not None:
                brokers = [b for b in side if isinstance(b, int)] or brokers
                self.notes.append(f"{client} created during a partition that separates the clients: it "
                                  f"bootstraps from brokers {brokers} only")
        if proxied is not None and self.proxies is not None:  # its listener, advertised at the proxy
            return ",".join(f"{self.proxies.host}:{client_proxy_port(proxied, b)}" for b in brokers)
        return ",".join(self.cluster.nodes[b].address for b in brokers)

    def producer(self, name: str) -> Any:
        if name not in self.producers:
            if self.client == "java":
                self.producers[name] = JavaRecordingProducer(self.bootstrap_for(name), self.topic, self.history,
                                                             self.producer_cfgs[name], name=name,
                                                             version=self.cluster.version)
            else:
                self.producers[name] = RecordingProducer(self.bootstrap_for(name), self.topic, self.history,
                                                         self.producer_cfgs[name], name=name, value_format="int64",
                                                         extra=self.producer_extra)
        return self.producers[name]

    def consumer(self, name: str) -> RecordingConsumer | JavaRecordingConsumer:
        if name not in self.consumers:
            cfg = self.consumer_cfgs[name]
            # the scenario's settings, every one of them, with the client's own auto-commit off
            # (the driver commits as the Java consumer does, in poll: the same for both clients)
            real_cfg = dataclasses.replace(cfg, enable_auto_commit=False)
            if self.client == "java":
                self.consumers[name] = JavaRecordingConsumer(self.bootstrap_for(name), self.topic, self.history,
                                                             real_cfg, name=name, group_id=f"{self.topic}-{name}",
                                                             version=self.cluster.version)
            else:
                self.consumers[name] = RecordingConsumer(self.bootstrap_for(name), self.topic, self.history,
                                                         real_cfg, name=name, group_id=f"{self.topic}-{name}",
                                                         value_format="int64")
            self.last_commit[name] = time.monotonic()
        return self.consumers[name]

    # -- the network ------------------------------------------------------------------------
    def endpoint(self, node: Any) -> list[Any]:
        if node == "controller":
            return list(self.cluster.controller_ids)
        if isinstance(node, int):
            return [node]
        return [CLIENT]

    def _clients_split(self) -> bool:
        names = set(self.producer_cfgs) | set(self.consumer_cfgs)
        sides = {i for i, g in enumerate(self.groups or []) for n in g if n in names}
        return len(sides) > 1

    def set_partition(self, groups: list[list[Any]] | None) -> str:
        self.groups = None
        self.partition_cuts = set()
        note = ""
        if groups is not None:
            listed = {n for g in groups for n in g}
            names = set(self.producer_cfgs) | set(self.consumer_cfgs)
            # brokers of the cluster the scenario does not know stay connected to everyone
            rest: list[Any] = [b for b in self.brokers if b not in listed]
            rest += ["controller"] if "controller" not in listed else []
            rest += sorted(names - listed)
            self.groups = [list(g) for g in groups] + ([rest] if rest else [])
            ends = []
            split = self._clients_split()
            for g in self.groups:
                nodes = {e for n in g for e in self.endpoint(n) if not (split and e == CLIENT)}
                ends.append(nodes)
            for i, a in enumerate(ends):
                for j, b in enumerate(ends):
                    if i != j:
                        self.partition_cuts |= {(x, y) for x in a for y in b if x != y}
            if split:
                note = ("the clients are on different sides but share the harness's address: it stays "
                        "connected to every broker; clients created now bootstrap from their side")
                self.notes.append(note)
        self.faults.set_cuts(self.cuts())
        return note


def _prime_group(bootstrap: str, topic: str, group: str, timeout_s: float = 30.0) -> None:
    """Commit offset 0 of the still empty partition for ``group`` until the coordinator takes
    it: the first group of a new cluster creates ``__consumer_offsets``, and a consumer that
    meets NOT_COORDINATOR then sits in librdkafka's retry backoff for seconds. On an empty
    partition offset 0 is where either ``auto.offset.reset`` would start."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
                return
            except KafkaException:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)
    finally:
        c.close()


def produce(d: Driver, p: dict[str, Any]) -> str:
    prod = d.producer(p["producer"])
    for v in p["values"]:
        prod.send(v)
    return f"sent {len(p['values'])}"


def flush(d: Driver, p: dict[str, Any]) -> str:
    left = d.producer(p["producer"]).flush(p["timeout_ms"] / 1000)
    return "all sends completed" if not left else f"{left} sends still pending after {p['timeout_ms']} ms"


def consume(d: Driver, p: dict[str, Any]) -> str:
    name = p["consumer"]
    if name in d.crashed_consumers:
        return "polled nothing (the consumer is down)"
    c = d.consumer(name)
    cfg = d.consumer_cfgs[name]
    # The Java consumer auto-commits inside poll(), the position before this poll's fetch,
    # once per interval; librdkafka would commit from a timer thread and on close.
    if cfg.enable_auto_commit and time.monotonic() - d.last_commit[name] >= cfg.auto_commit_interval_ms / 1000:
        c.commit()
        d.last_commit[name] = time.monotonic()
    got = c.poll(timeout_s=1.0, quiet_s=0.3)
    return "polled " + (" ".join(f"{o}:m{v}" for o, v in got) if got else "nothing")


def list_offsets(d: Driver, p: dict[str, Any]) -> str:
    if p["consumer"] in d.crashed_consumers:
        return "nothing asked (the consumer is down)"
    got = d.consumer(p["consumer"]).list_offsets(p["spec"])
    return f"the {p['spec']} offset is {got}" if got is not None else f"no {p['spec']} offset within 60 s"


def commit(d: Driver, p: dict[str, Any]) -> str:
    if p["consumer"] in d.crashed_consumers:
        return "nothing to commit (the consumer is down)"
    c = d.consumer(p["consumer"])
    if c.position is None:
        return "nothing to commit"
    return "committed" if c.commit() else "commit not acknowledged yet (its outcome is in the history)"


def crash_consumer(d: Driver, p: dict[str, Any]) -> str:
    c = d.consumers.pop(p["consumer"], None)
    if c is not None:
        c.close()  # the client's own auto-commit is off: closing commits nothing
    d.crashed_consumers.add(p["consumer"])
    return "dropped without a commit"


def restart_consumer(d: Driver, p: dict[str, Any]) -> str:
    crash_consumer(d, p)
    d.crashed_consumers.discard(p["consumer"])
    d.consumer(p["consumer"])  # a known name: the history records ``info restart``
    return "new session, from the committed offset"


def restart_producer(d: Driver, p: dict[str, Any]) -> str:
    old = d.producers.pop(p["producer"], None)
    if isinstance(old, JavaRecordingProducer):
        old.close(0)  # what it still had in flight ends as the model's PRODUCER_RESTARTED does
    elif old is not None:
        old.abandon()  # likewise: purged, every outstanding send gets its outcome
    d.producer(p["producer"])
    return "new producer session"


# A crash or controlled shutdown of a broker that is down, or a restart of one that runs, does
# nothing, as in the model (Broker.crash, request_controlled_shutdown, Cluster.restart):
# fuzzer schedules can contain them.
def crash(d: Driver, p: dict[str, Any]) -> str:
    if not d.cluster.is_running(p["broker"]):
        return "already down"
    pid = d.faults.kill(p["broker"])
    d.faults.drop_sockets(p["broker"])  # the model's crash takes the machine's sockets along
    if p.get("lose_unflushed"):  # a power cut: the disk keeps only what was fsynced
        files = d.cluster.power_loss(p["broker"])
        return f"SIGKILL pid {pid}, its sockets aborted, power cut: {files} files back to their last fsync"
    return f"SIGKILL pid {pid}, its sockets aborted"


def restart(d: Driver, p: dict[str, Any]) -> str:
    b = p["broker"]
    waited = ""
    if b in d.shutting_down:  # a controlled shutdown the controller held: let it end first
        t0 = time.monotonic()
        if d.cluster.wait_exit([b], SHUTDOWN_LIMIT_S):
            raise ConfigError(f"broker {b} still running {SHUTDOWN_LIMIT_S:.0f} s after its controlled shutdown "
                              "began", where="restart", field="broker", expected="exited", got=b)
        waited = f"its controlled shutdown ended {time.monotonic() - t0:.1f} s later; "
    d.shutting_down.discard(b)
    if d.cluster.is_running(b):
        return "already running"
    old = getattr(d.cluster, "await_old_registration", None)  # ZooKeeper mode before 2.2
    expired = old(b) if old is not None else None
    if expired is not None:
        waited += f"its old ZooKeeper registration went {expired * 1000:.0f} ms later; "
    given = "" if p.get("startup_ms") is None else \
        f" (startup_ms={p['startup_ms']} is an input of the model: a real broker starts in its own time)"
    return f"{waited}started, pid {d.faults.restart(b)}{given}"


def controlled_shutdown(d: Driver, p: dict[str, Any]) -> str:
    """SIGTERM, then wait for the JVM to exit, at most :data:`SHUTDOWN_STEP_S`. A KRaft
    controller moves the broker's leaderships at once but lets it exit only when every active
    broker's metadata has reached the offset of that change (``BrokerHeartbeatManager``:
    ``controlledShutdownOffset <= lowestActiveOffset()``), so a broker cut off from the
    controller holds another's shutdown until it catches up or is fenced. The step then ends
    with the broker still exiting, as the model's controlled shutdown ends once the
    controller has moved the leadership; a later ``restart`` waits for the exit."""
    b = p["broker"]
    if not d.cluster.is_running(b):
        return "already down"
    t0 = time.monotonic()
    d.cluster.signal_nodes([b], signal.SIGTERM)
    if d.cluster.wait_exit([b], SHUTDOWN_STEP_S):
        d.shutting_down.add(b)
        return (f"SIGTERM sent; still exiting after {SHUTDOWN_STEP_S:.0f} s (the controller holds a controlled "
                "shutdown until every active broker's metadata has caught up)")
    return f"shut down in {time.monotonic() - t0:.1f} s"


#: How long a controlled shutdown step waits for the JVM to exit before it goes on.
SHUTDOWN_STEP_S = 5.0
#: How long a restart waits for a held controlled shutdown to end.
SHUTDOWN_LIMIT_S = 60.0


def set_link(d: Driver, p: dict[str, Any]) -> str:
    """Cut or restore the pair (``drop`` 1 / 0); with ``delay_ms`` also set the proxied
    links' latency, both streams (the model's link delay holds both ways)."""
    pairs = {(x, y) for x in d.endpoint(p["a"]) for y in d.endpoint(p["b"]) if x != y}
    pairs |= {(y, x) for x, y in pairs}
    if p["drop"] == 1.0:
        d.link_cuts |= pairs
    else:
        d.link_cuts -= pairs
    d.faults.set_cuts(d.cuts())
    outcome = "cut" if p["drop"] == 1.0 else "restored"
    if p.get("delay_ms") is not None:
        assert d.proxies is not None  # planned from the scenario (epochlab.kafka.runs.links)
        latency, jitter = latency_of(p["delay_ms"])
        links = _links_between(d, p["a"], p["b"]) | _links_between(d, p["b"], p["a"])
        for link in sorted(links, key=str):
            for stream in ("upstream", "downstream"):
                d.proxies.set_latency(link, stream, latency, jitter, reason="link")
        outcome += f", {len(links)} proxied connection(s) delayed {latency} +- {jitter} ms each way"
    return outcome


def _links_between(d: Driver, initiator: Any, acceptor: Any) -> set[tuple[Any, int]]:
    """The proxied directed links from scenario node ``initiator`` to ``acceptor``."""
    assert d.proxies is not None
    cl = d.cluster
    targets = node_ids(acceptor, cl.broker_ids, cl.controller_ids)
    if initiator in d.proxies.clients:
        return {(initiator, b) for b in targets if b in cl.broker_ids}
    return {(x, y) for x in node_ids(initiator, cl.broker_ids, cl.controller_ids) for y in targets if x != y}


def slow_follower(d: Driver, p: dict[str, Any]) -> str:
    """Delay what the follower sends on its connections to every other broker (its fetch
    requests) by ``extra_delay_ms``, on top of any link delay; 0 removes it. The model adds
    the delay to each fetch request the broker sends (``Network.send``, ``kind == "fetch"``)."""
    assert d.proxies is not None  # planned from the scenario (epochlab.kafka.runs.links)
    f, extra = p["broker"], int(p["extra_delay_ms"])
    links = [(f, b) for b in d.cluster.broker_ids if b != f]
    for link in links:
        d.proxies.set_latency(link, "upstream", extra, reason="slow")
    return f"fetches of broker {f} to brokers {[b for _, b in links]} delayed {extra} ms" if extra else \
        f"broker {f}'s fetches no longer slowed"


def isolate(d: Driver, p: dict[str, Any]) -> str:
    b = p["broker"]
    others = [x for x in d.brokers if x != b]
    return d.set_partition([[b], [*others, "controller", *d.producer_cfgs, *d.consumer_cfgs]]) or "isolated"


def elect_preferred(d: Driver, p: dict[str, Any]) -> str:
    """A preferred election asked of a broker connected to the controller (a client would send
    it to a broker picked at random, maybe one cut off from the controller); before Kafka 3.7,
    through confluent-kafka's Admin client."""
    if controller_admin_available(d.cluster):
        error = d.controller_admin().elect(d.topic, 0, d.forwarding_broker())
        return "preferred election done" if error is None else f"preferred election: {error}"
    from confluent_kafka import ElectionType, TopicPartition  # ElectionType is not in confluent_kafka.admin
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": d.cluster.bootstrap_servers})
    admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(d.topic, 0)]).result(15)
    return "preferred election requested"


def elect(d: Driver, p: dict[str, Any]) -> str:
    """The chosen broker first in the replica order, a preferred (or unclean) election, the
    scenario's order back (:func:`epochlab.kafka.live.controller_admin.elect_broker`)."""
    via = d.forwarding_broker()
    return elect_broker(d.controller_admin(), d.topic, 0, d.replicas, p["broker"], via,
                        bool(p.get("unclean"))).describe() + f" (asked of broker {via})"


def wait_until(d: Driver, p: dict[str, Any]) -> str:
    cond = p["condition"]
    start = d.now_ms()

    def holds(snap: Snapshot) -> bool:
        return _holds(d, cond, snap)

    ok = holds(d.sample()) or d.idle_until(start + p["timeout_ms"], stop=holds)
    if ok:
        return f"condition held after {d.now_ms() - start} ms"
    return ("TIMEOUT" if p["required"] else "timeout") + f": condition not met in {p['timeout_ms']} ms"


def _holds(d: Driver, cond: dict[str, Any], snap: Snapshot) -> bool:
    def in_sync(v: bool) -> bool:
        lead = snap.leader_replica()
        ok = lead is not None and snap.available() and all(
            r.log_end_offset == lead.log_end_offset for r in snap.replicas if r.alive)
        return ok == v

    checks = state_conditions(snap) | {
        "in_sync": in_sync,
        "sends_done": lambda name: _sends_done(d, name),
        "transactions_done": lambda name: name not in d.producers or d.producers[name]._txn_values is None,
    }
    return all(checks[k](v) for k, v in cond.items())


def _sends_done(d: Driver, producer: str) -> bool:
    ops = [op for op in d.history.ops if op.process == producer and op.f == "send"]
    return sum(op.type == "invoke" for op in ops) <= sum(op.type != "invoke" for op in ops)


def _txn(call: str) -> Callable[[Driver, dict[str, Any]], str]:
    def run(d: Driver, p: dict[str, Any]) -> str:
        prod = d.producer(p["producer"])
        if call == "begin":
            prod.begin_transaction()
            return "begun"
        ok = getattr(prod, f"{call}_transaction")(30.0)
        return f"{call} " + ("ok" if ok else "failed")
    return run


def partition(d: Driver, p: dict[str, Any]) -> str:
    return d.set_partition(p["groups"]) or "partitioned"


def heal(d: Driver, p: dict[str, Any]) -> str:
    return d.set_partition(None) or "healed"


def wait(d: Driver, p: dict[str, Any]) -> str:
    return d.idle_until(d.now_ms() + p["ms"]) or f"waited {p['ms']} ms"


def note(d: Driver, p: dict[str, Any]) -> str:
    return ""


begin_transaction = _txn("begin")
commit_transaction = _txn("commit")
abort_transaction = _txn("abort")


def _mapped() -> dict[str, Callable[[Driver, dict[str, Any]], str]]:
    """The steps a live cluster takes (``epochlab.steps``: ``live`` names one of this module's
    functions) -> that function."""
    functions = globals()
    missing = [f"{s.name}: {s.live}" for s in STEPS.values() if isinstance(s.live, str) and s.live not in functions]
    if missing:
        raise ImportError(f"epochlab.steps names live actions this module lacks: {', '.join(missing)}")
    return {s.name: functions[s.live] for s in STEPS.values() if isinstance(s.live, str)}


#: step name -> what performs it on the live cluster, for every step the vocabulary maps.
ACTIONS: dict[str, Callable[[Driver, dict[str, Any]], str]] = _mapped()
