"""The :class:`Cluster` facade of ``docs/sim-api.md``: builds the kernel, network, recorder and
the :class:`~epochlab.sim.context.SimContext` they form, then the controller, coordinator,
brokers and clients on that context, and exposes time, faults, client creation and observation.
The components never see the facade (``docs/sim-api.md``, "Structure").

What watches a run from outside (a trace recorder, ``epochlab.trace.TraceRecorder``) is an
observer: a callable the cluster calls with itself once it is built, before its brokers start.
The simulator knows observers only as that hook list (:attr:`Cluster.observers`,
:func:`observing_clusters`), never what they are.

>>> from epochlab.generations import Generation
>>> from epochlab.sim.config import ClusterConfig, ProducerConfig
>>> c = Cluster(ClusterConfig(), Generation.DIVERGING_EPOCH, seed=1)
>>> p = c.producer("p", ProducerConfig(acks="all"))
>>> _ = p.send(42); p.flush(5000)
True
>>> c.state().replicas[1].values()
[42]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from epochlab import _core
from epochlab.errors import ConfigError, ScenarioError
from epochlab.generations import Generation
from epochlab.sim.broker import REPLICA_REQUEST_TIMEOUT_MS, Broker
from epochlab.sim.clients import Consumer, Producer
from epochlab.sim.config import ClusterConfig, ConsumerConfig, ProducerConfig
from epochlab.sim.context import SimContext
from epochlab.sim.controller import Controller
from epochlab.sim.coordinator import TransactionCoordinator
from epochlab.sim.history import Event, HistoryOp, Recorder, history_to_jsonl
from epochlab.sim.kernel import Kernel
from epochlab.sim.network import Network, Node
from epochlab.sim.state import ClusterState, ReplicaState

__all__ = ["Cluster", "ClusterObserver", "observing_clusters"]

#: An observer: called once with the built cluster, before its brokers start; what it returns
#: is kept in :attr:`Cluster.observers`. It may wrap the instance's methods; it must not change
#: the run.
ClusterObserver = Callable[["Cluster"], Any]

# The observers of clusters made inside ``observing_clusters()`` blocks, whoever makes them (a
# scenario runner, a fuzz executor), in addition to the ones their maker passes.
_OBSERVING: ContextVar[tuple[ClusterObserver, ...]] = ContextVar("epochlab_cluster_observers", default=())


@contextmanager
def observing_clusters(observer: ClusterObserver) -> Iterator[None]:
    """Every :class:`Cluster` made inside the block calls ``observer`` too (after the
    observers passed to it, and after those of enclosing blocks)."""
    token = _OBSERVING.set((*_OBSERVING.get(), observer))
    try:
        yield
    finally:
        _OBSERVING.reset(token)


class Cluster:
    """One simulated partition ``partition`` replicated on ``config.replicas``.

    Everything is deterministic given ``seed`` and the sequence of calls. Time only moves in
    :meth:`run_for`, :meth:`run_until` and the client helpers that call them.
    """

    def __init__(self, config: ClusterConfig, generation: Generation | int | str,
                 seed: int = 0, partition: str = "orders-0", backend: str = "rust",
                 observers: Sequence[ClusterObserver] = ()) -> None:
        """``observers`` are called with the cluster once it is built, before its brokers
        start (``Cluster(..., observers=[epochlab.trace.TraceRecorder])`` records the run's
        trace, ``docs/trace-format.md``); what they return is :attr:`observers`."""
        self.config = config
        self.backend = backend
        self.generation = Generation.parse(generation)
        _check_generation_settings(config, self.generation)
        self.seed = seed
        self.topic_partition = partition
        # the event loop and the network: in Rust (epochlab._core), except for the pure-Python
        # reference backend, which runs the Python ones (the same semantics, draw for draw)
        loop = (Kernel, Network) if backend == "reference" else (_core.Kernel, _core.Network)
        self.kernel: Any = loop[0](seed)
        self.network: Any = loop[1](self.kernel, config.network_delay_ms, config.controller_delay_ms)
        if config.tcp_retransmission_backoff:
            self.network.set_retransmission_backoff(True)
        self.recorder = Recorder(self.kernel)
        self.history: list[HistoryOp] = self.recorder.history
        self.events: list[Event] = self.recorder.events
        pre = config.transaction_pre_kip890
        #: KIP-890 (partition verification, epoch bump per transaction): the latest
        #: generation's default; ``transaction.pre_kip890`` overrides it.
        self.kip890 = (self.generation == max(Generation)) if pre is None else not pre
        #: What the components see of the run (they never see this facade).
        self.context = ctx = SimContext(self.kernel, self.network, self.recorder,
                                        self.generation, self.kip890, partition)
        self.clients: dict[str, Producer | Consumer] = {}
        self.network.set_alive("controller", True)
        self.controller = Controller(ctx, config, self.generation)
        self.coordinator = TransactionCoordinator(
            ctx, self.kip890, config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            self.controller.allocate_producer_id)
        self.brokers: dict[int, Broker] = {b: Broker(ctx, b, config, self.generation, backend)
                                           for b in config.brokers}
        ctx.register("controller", self.controller)
        ctx.register("coordinator", self.coordinator)
        for b, broker in self.brokers.items():
            ctx.register(b, broker)
        if backend == "rust":
            # the replication traffic of Rust replicas without Python frames (broker.py, "follower fetcher")
            release = config.release
            plane = _core.FetchPlane(self.kernel, self.network, ctx.routes(), REPLICA_REQUEST_TIMEOUT_MS,
                                     config.replica_fetch_backoff_ms, config.replica_fetch_wait_max_ms,
                                     self.generation.kraft,
                                     held_reads=self.generation < Generation.DIVERGING_EPOCH,
                                     no_timestamp_lookup=release is not None and release < (0, 10, 1),
                                     rack_selector=config.replica_selector_class is not None)
            for broker in self.brokers.values():
                broker.use_plane(plane)
        #: what each observer returned when it was called, in the order they were called
        self.observers: list[Any] = [observe(self) for observe in (*observers, *_OBSERVING.get())]
        for broker in self.brokers.values():  # its timers are its own (Kernel.call_as)
            self.kernel.call_as(broker, broker.start, config.established)
        if config.established:
            self.controller.take_established({b: broker.heartbeat_phase_ms for b, broker in self.brokers.items()})
        self.coordinator.start()
        self.log_event("controller", f"controller: initial leader {self.controller.leader} "
                       f"epoch 0 ISR {list(self.controller.isr)} ({self.generation.label})")

    # -- plumbing used by the nodes ---------------------------------------------------------
    @property
    def now_ms(self) -> int:
        return self.kernel.now_ms

    def node(self, name: Node) -> Any:
        """The broker, controller, coordinator or client called ``name``."""
        return self.context.node(name)

    def post(self, src: Node, dst: Node, method: str, msg: object, kind: str = "",
             coalesce: str | None = None) -> None:
        """:meth:`SimContext.post <epochlab.sim.context.SimContext.post>`."""
        self.context.post(src, dst, method, msg, kind, coalesce)

    def _known(self, name: Node) -> bool:
        return self.context.knows(name)

    def log_event(self, kind: str, message: str) -> None:
        """:meth:`Recorder.log_event <epochlab.sim.history.Recorder.log_event>`."""
        self.recorder.log_event(kind, message)

    def record(self, process: str, type_: str, f: str, value: Any = None, offset: int | None = None,
               error: str | None = None, acks: str | None = None) -> HistoryOp:
        """:meth:`Recorder.record <epochlab.sim.history.Recorder.record>`."""
        return self.recorder.record(process, type_, f, value, offset, error, acks)

    def history_jsonl(self) -> str:
        """The history as JSON Lines (sorted keys)."""
        return history_to_jsonl(self.history)

    # -- clients ----------------------------------------------------------------------------
    def producer(self, name: str, config: ProducerConfig | None = None) -> Producer:
        self._check_client_name(name)
        client = Producer(self.context, name, config or ProducerConfig())
        self.clients[name] = client
        self.context.register(name, client)
        return client

    def consumer(self, name: str, config: ConsumerConfig | None = None) -> Consumer:
        self._check_client_name(name)
        self.clients[name] = None  # type: ignore[assignment]  # reserve: start() sends at once
        self.context.register(name, None)
        client = Consumer(self.context, name, config or ConsumerConfig())
        self.clients[name] = client
        self.context.register(name, client)
        return client

    def _check_client_name(self, name: str) -> None:
        if not isinstance(name, str) or not name or name in ("controller", "coordinator") \
                or name in self.clients:
            raise ScenarioError(f"client name {name!r} is empty, reserved or already used",
                                where="<python>", field="name", expected="a new client name",
                                got=repr(name))

    # -- time -------------------------------------------------------------------------------
    def run_for(self, ms: int) -> None:
        """Advance virtual time by ``ms`` (>= 0), running every event due."""
        if ms < 0:
            raise ScenarioError("run_for needs ms >= 0", where="<python>", field="ms",
                                expected=">= 0", got=repr(ms))
        self.kernel.run_until(self.now_ms + ms)

    def run_until(self, predicate: Callable[[Cluster], bool], timeout_ms: int) -> bool:
        """Run until ``predicate(cluster)`` holds (checked after every event) or
        ``timeout_ms`` passed; returns whether it held. Time stops at the first event after
        which it held."""
        return self.kernel.run_until(self.now_ms + max(0, timeout_ms), lambda: predicate(self))

    # -- faults -----------------------------------------------------------------------------
    def _broker(self, broker: int) -> Broker:
        if broker not in self.brokers:
            raise ScenarioError(f"unknown broker {broker!r}", where="<python>", field="broker",
                                expected=f"one of {list(self.brokers)}", got=repr(broker))
        return self.brokers[broker]

    def crash(self, broker: int, lose_unflushed: bool = False) -> None:
        """Kill the broker; with ``lose_unflushed`` its page cache is lost too (1.10)."""
        b = self._broker(broker)
        self.kernel.call_as(b, b.crash, lose_unflushed)

    def restart(self, broker: int, startup_ms: int | None = None) -> None:
        """Boot a crashed broker from its disk state (stale HW checkpoint). It comes up after
        a startup time drawn from ``broker_startup_ms`` (process start and log loading; the
        broker is down until then), or after ``startup_ms`` when given: the time a live run
        measured for this restart (``epochlab.kafka.runs.fuzz.at_real_times``). The draw is
        made either way, so a given time changes nothing else of the run."""
        b = self._broker(broker)
        if startup_ms is not None and (isinstance(startup_ms, bool) or not isinstance(startup_ms, int)
                                       or startup_ms < 0):
            raise ScenarioError("restart needs startup_ms >= 0", where="<python>", field="startup_ms",
                                expected="an int >= 0", got=repr(startup_ms))
        if not b.alive and not b.starting:
            lo, hi = self.config.broker_startup_ms
            startup = self.kernel.rng(f"broker-{broker}-startup").randint(lo, hi) if hi else 0
            if startup_ms is not None:
                startup = startup_ms
            self.log_event("restart", f"broker {broker} restarts with LEO "
                           f"{b.replica.log.log_end_offset}, HW {b.replica.log.high_watermark}"
                           + (f"; up after {startup} ms" if startup else ""))
            self.kernel.call_as(b, b.boot, startup)

    def crash_coordinator(self) -> None:
        """Kill the transaction coordinator (its ``__transaction_state`` survives)."""
        self.coordinator.crash()

    def restart_coordinator(self) -> None:
        """Restart it: a new coordinator epoch; pending markers are sent again."""
        self.coordinator.restart()

    def controller_failover(self) -> None:
        """A new controller takes over, one controller epoch up
        (:meth:`epochlab.sim.controller.Controller.failover`)."""
        self.kernel.call_as(self.controller, self.controller.failover)

    def partition(self, groups: Sequence[Sequence[Node]]) -> None:
        """Cut the network into groups; unlisted nodes form one more group together."""
        for group in groups:
            for node in group:
                if not self._known(node):
                    raise ScenarioError(f"unknown node {node!r}", where="<python>", field="groups",
                                        expected="broker ids, 'controller', 'coordinator' or "
                                        "client names", got=repr(node))
        self.network.partition(groups)
        self.log_event("network", f"partition {[list(g) for g in groups]}")

    def heal(self) -> None:
        self.network.heal()
        self.log_event("network", "heal")

    def isolate(self, broker: int) -> None:
        """The broker alone on one side, every other node on the other."""
        self._broker(broker)
        others: list[Node] = [b for b in self.brokers if b != broker]
        self.partition([[broker], [*others, "controller", *sorted(self.clients)]])

    def slow_follower(self, broker: int, extra_delay_ms: int) -> None:
        """Delay every fetch the broker sends by ``extra_delay_ms`` more."""
        self._broker(broker)
        self.network.slow_node(broker, extra_delay_ms)
        self.log_event("network", f"broker {broker} fetches slowed by {extra_delay_ms} ms")

    def set_link(self, a: Node, b: Node, delay_ms: tuple[int, int] | None = None,
                 drop: float = 0.0, duplicate: float = 0.0, reorder: bool = False) -> None:
        """Per-link delay range and drop/duplicate probabilities (both directions);
        ``reorder=True`` (addition) lets messages on the link overtake each other."""
        for node in (a, b):
            if not self._known(node):
                raise ScenarioError(f"unknown node {node!r}", where="<python>", field="link",
                                    expected="broker ids, 'controller' or client names", got=repr(node))
        for name, p in (("drop", drop), ("duplicate", duplicate)):
            if not 0.0 <= p <= 1.0:
                raise ConfigError(f"{name} must be in [0, 1]", where="set_link", field=name,
                                  expected="a probability in [0, 1]", got=repr(p))
        if not self.network.set_link(a, b, delay_ms, drop, duplicate, reorder):
            self.log_event("network", f"link {a}-{b}: the controller channel is one ordered, "
                           "reliable connection; duplicate/reorder not applied")

    def controlled_shutdown(self, broker: int) -> None:
        b = self._broker(broker)
        self.kernel.call_as(b, b.request_controlled_shutdown)

    def elect_preferred_leader(self) -> bool:
        return bool(self.kernel.call_as(self.controller, self.controller.elect_preferred_leader))

    def elect(self, broker: int, unclean: bool = False) -> bool:
        self._broker(broker)
        return bool(self.kernel.call_as(self.controller, self.controller.elect, broker, unclean))

    # -- observation ------------------------------------------------------------------------
    def state(self) -> ClusterState:
        """A frozen snapshot of the controller's view as published (what brokers and an
        operator's Admin client see: a KRaft decision once its metadata batch is committed,
        :meth:`Controller.published`) and of every replica."""
        c = self.controller
        unavailable = c.unavailable_ms + (self.now_ms - c.offline_since_ms
                                          if c.offline_since_ms is not None else 0)
        leader, epoch, isr, partition_epoch, elr = c.published()
        controller = {"leader": leader, "leader_epoch": epoch, "isr": list(isr),
                      "partition_epoch": partition_epoch, "offline": leader is None,
                      "elr": list(elr), "unavailable_ms": unavailable}
        replicas: dict[int, ReplicaState] = {}
        for b in self.config.brokers:
            broker = self.brokers[b]
            r, log = broker.replica, broker.replica.log
            role = r.role if broker.alive and r.role in ("leader", "follower") else "offline"
            if b not in (self.config.replicas or ()):
                continue
            batches = log.batches()
            replicas[b] = ReplicaState(
                b, broker.alive, role, r.leader_epoch, log.log_start_offset, log.log_end_offset,
                log.high_watermark, tuple(log.epoch_entries()),
                tuple((x.base_offset, x.last_offset, x.partition_leader_epoch, x.records)
                      for x in batches if not x.is_control),
                log.last_stable_offset,
                tuple((x.base_offset, x.producer_id, x.control_type)
                      for x in batches if x.is_control))
        return ClusterState(self.now_ms, controller, replicas)


def _check_generation_settings(config: ClusterConfig, generation: Generation) -> None:
    """Settings that exist only in some generations' releases: fetch from follower (KIP-392,
    Kafka 2.4+, so G3 on); ``kafka.release`` names one of the generation's releases."""
    release = config.release
    if release is not None and not generation.covers_release(release):
        raise ConfigError(f"kafka.release {config.kafka_release} is not a release of {generation.label} "
                          f"({generation.kafka_versions})", where="cluster", field="kafka.release",
                          expected=f"a release of {generation.kafka_versions}", got=config.kafka_release)
    if config.replica_selector_class is not None and generation < Generation.KIP_320:
        raise ConfigError(f"replica.selector.class needs fetch from follower (KIP-392, Kafka 2.4+), "
                          f"which {generation.label} ({generation.kafka_versions}) does not have",
                          where="cluster", field="replica.selector.class",
                          expected="null before kip-320", got=config.replica_selector_class)
