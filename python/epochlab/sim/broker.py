"""A broker node: hosts one :class:`~epochlab.sim.replica.Replica` and drives it with timers
and messages (``docs/core-semantics.md`` rules 1.5-1.10).

Timers: heartbeat to the controller at the start (registration), then every
``heartbeat_interval_ms`` from a phase drawn per boot from the run's seed; the others
phase-aligned from the broker's start: ISR expiration every ``replica_lag_time_max_ms / 2``; HW checkpoint
every ``high_watermark_checkpoint_interval_ms``; with ``flush_interval_ms`` set, Kafka's
time-based flush: a check every :data:`~epochlab.sim.config.FLUSH_CHECK_INTERVAL_MS` fsyncs
the log once ``flush_interval_ms`` has passed since its last flush that wrote something
(``_flush_if_dirty``); AlterPartition resent every ``heartbeat_interval_ms`` until answered. A tick
that would find nothing to do is not scheduled (the same grid points, fewer events): ISR
expiration runs only while the broker leads, the checkpoint only after the HW moved, the fsync
only after the log end moved (``_note_state``, called after everything that can move them).

Purgatories: acks=all produce requests wait until HW >= their last offset + 1 (or time out
with REQUEST_TIMED_OUT after the request's timeout, or fail with NOT_LEADER_OR_FOLLOWER when
leadership is lost); follower fetches that find no data wait up to
``replica_fetch_wait_max_ms`` or until new data is appended (Kafka's DelayedFetch with
minBytes = 1: a HW change alone does not complete it, so followers learn the HW one round
trip late); consumer fetches that find nothing to read wait up to the consumer's
``fetch.max.wait.ms`` (carried in the request) until the HW (LSO for read_committed) moves past
the fetch offset, the replica's role or epoch changes, or the offset is above the HW
(``DelayedFetch.tryComplete`` cases A-G; re-checked whenever the leader's HW may have moved,
``Partition.tryCompleteDelayedRequests``, and on a follower serving a fetch-from-follower read
when its HW moved, ``ReplicaFetcherThread.completeDelayedFetchRequests``).

Transactions (1.12): WriteTxnMarkers from the coordinator is appended by the replica and
answered, like an acks=all produce, once the HW is past the marker (or with
REQUEST_TIMED_OUT after ``MARKER_TIMEOUT_MS``). With KIP-890 (``SimContext.kip890``) the first
transactional write of a producer to the partition (no transaction of that producer open in the
log) is verified first: the broker records a verification guard for the producer id, asks the
coordinator (AddPartitionsToTxn with ``verify_only``) and appends only if the answer is OK and
the guard is still there; any marker written for the producer clears the guard (Kafka's
``VerificationGuard``), so a verification that raced with the end of the transaction cannot open
a new one. A failed verification answers INVALID_TXN_STATE; a coordinator that does not answer
within the request's timeout, NOT_ENOUGH_REPLICAS (retriable, as Kafka maps it for old clients).

Zombies: a leader cut off from the controller keeps serving in its old epoch until a newer
LeaderAndIsr reaches it; nothing here consults global state. A follower whose leader is down
gets "connection refused" at once and backs off (a partitioned leader is only noticed by the
30 s request timeout, ``replica.socket.timeout.ms``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import epochlab.reference
from epochlab import _core
from epochlab.errors import ConfigError
from epochlab.generations import Generation
from epochlab.sim.backoff import ExponentialBackoff
from epochlab.sim.config import FLUSH_CHECK_INTERVAL_MS, ClusterConfig
from epochlab.sim.kernel import Timer
from epochlab.sim.network import syn_checks
from epochlab.sim.messages import (
    evolve,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeat,
    ClientDisconnect,
    ConsumerFetchRequest,
    ConsumerFetchResponse,
    ControlledShutdownRequest,
    FetchRequest,
    FetchResponse,
    LeaderAndIsr,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    ProduceRequest,
    ProduceResponse,
    AddPartitionsToTxnRequest,
    TxnCoordinatorResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from epochlab.sim.replica import Replica

BACKENDS = ("rust", "reference")


def make_replica(backend: str, broker_id: int, replicas: tuple[int, ...], generation: Generation,
                 min_insync_replicas: int, replica_lag_time_max_ms: int) -> Replica | _core.Replica:
    """The replica protocol implementation a broker runs.

    ``"rust"``: the Rust state machine (``epochlab._core.Replica``), the default and the fast
    path; ``"reference"``: the readable Python state machine over the pure-Python log
    (``epochlab.reference``), everything in Python: the oracle. Both take and give the same
    messages and must produce identical runs (``tests/test_backends_differential.py``,
    ``benches/backend_agreement.py``).
    """
    if backend == "rust":
        return _core.Replica(broker_id, list(replicas), int(generation), min_insync_replicas,
                             replica_lag_time_max_ms)
    if backend == "reference":
        return Replica(broker_id, replicas, generation, min_insync_replicas,
                       replica_lag_time_max_ms, epochlab.reference)
    raise ConfigError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}",
                      where="Cluster", field="backend", expected=" | ".join(BACKENDS), got=backend)

if TYPE_CHECKING:
    from collections.abc import Callable

    from epochlab.sim.context import SimContext

__all__ = ["Broker"]

REPLICA_REQUEST_TIMEOUT_MS = 30000
ALTER_PARTITION_TIMEOUT_MS = 30000  # the controller channel's request timeout
CONTROLLED_SHUTDOWN_TIMEOUT_MS = 5000
MARKER_TIMEOUT_MS = 30000
#: On an established cluster (``ClusterConfig.established``), how long before the run's clock
#: began its partition's followers took it on their fetcher threads: the live harness makes the
#: run's topic and then starts the clock; the followers' "Follower ... starts at leader epoch 0"
#: lines came 29-2,549 ms before it, median 204 ms, in the 40 runs of ``epochlab kafka fuzz``
#: campaign seed 12 (docs/measurements.md).
ESTABLISHED_PARTITION_LEAD_MS = 200
#: On an established cluster, how much later than a follower the partition's first leader made
#: itself leader: deciles of the 76 measured gaps between a leader's "Leader ... starts at
#: leader epoch 0" line and each follower's "Follower ... starts at leader epoch 0" line (the
#: brokers apply the topic's creation each at its own pace), same campaign; negative when the
#: leader came first. A draw interpolates between two deciles (:meth:`Broker._first_start`).
FIRST_LEADER_LAG_MS = (-48, -18, -11, -7, -3, 4, 13, 20, 35, 49, 112)
#: ``socket.connection.setup.timeout.ms`` and ``.max.ms`` by default: how long the heartbeat
#: channel's connection attempt waits, growing with failed attempts in a row.
CONNECTION_SETUP_TIMEOUT_MS = (10_000, 30_000)


class Broker:
    """Broker ``broker_id``; ``alive`` and ``incarnation`` change with crash/restart."""

    #: its events change what the state checker reads (``Kernel``: quiet events); stated, not
    #: left to the default, since a post to a node without the attribute pays for the failed
    #: look-up (an AttributeError made and dropped: ~3% of a fuzz run, decc6ec)
    QUIET = False

    def __init__(self, ctx: SimContext, broker_id: int, config: ClusterConfig,
                 generation: Generation, backend: str = "rust") -> None:
        self.ctx = ctx
        self.broker_id = broker_id
        self.config = config
        self.replica = make_replica(backend, broker_id, tuple(config.replicas or ()), generation,
                                    config.min_insync_replicas, config.replica_lag_time_max_ms)
        release = config.release
        # KAFKA-13141: Kafka 2.8.0 (diverging-epoch's first release) took a diverging fetch's
        # offset as the follower's LEO; fixed in 2.8.1
        self.replica.record_diverging_fetch_offset = (
            generation == Generation.DIVERGING_EPOCH and release is not None and release < (2, 8, 1))
        # the proposed fix of the re-elected leader's stale follower state (``+skipped-epoch-reset``)
        self.replica.reset_followers_on_skipped_epoch = "skipped-epoch-reset" in config.release_patches
        # KAFKA-5522: before 1.0.0 a ListOffsets by timestamp could answer the HW itself (the
        # first uncommitted offset); hw-truncation's releases up to 0.10.2, kip-101's 0.11.x
        self.replica.list_offsets_up_to_hw = generation == Generation.TRUNCATE_TO_HW or (
            generation == Generation.KIP_101 and release is not None and release < (1, 0, 0))
        # KAFKA-7414 (fixed in 2.0.1 and 2.1.0): before, with unclean leader election disabled,
        # a follower whose log end offset is past the leader's exits instead of truncating
        # (ReplicaFetcherThread.handleOffsetOutOfRange, 0.10.2.0-2.0.0, "Exiting because log
        # truncation is not allowed"); kip-279's releases have it only in 2.0.0
        unclean = config.unclean_leader_election_enable
        self.replica.truncation_halts = not (generation.unclean_default if unclean is None else unclean) and (
            generation < Generation.KIP_279
            or (generation == Generation.KIP_279 and release is not None and release < (2, 0, 1)))
        self.alive = False
        #: when the process last stopped (a crash or the end of a controlled shutdown): when its
        #: clients' connections to it closed (a Java producer's re-bootstrap counts from it)
        self.stopped_ms: int | None = None
        self.incarnation = 0
        self.clean_shutdown = True
        self.kraft = generation.kraft
        self.broker_epochs = generation.broker_epochs  # a restart waits to be registered (G3+)
        self.registered = False   # the controller has registered this incarnation (G3+)
        #: KRaft: the controller accepted this incarnation's registration (fenced or not)
        self._accepted = False
        #: KRaft: done starting, it asks to be unfenced (``BrokerLifecycleManager.readyToUnfence``)
        self._ready_to_unfence = True
        self._unfence_armed = False
        self._hb_now = False  # a heartbeat is due at the answer to the one in flight
        #: the partition's leader and leader epoch as this broker last heard them from the
        #: controller (its metadata cache), and that image's version: what it tells a client
        #: that asks it for metadata (:meth:`on_metadata`)
        self.metadata_image: tuple[int | None, int] | None = None
        self._image_version = -1
        self.controller_epoch = 0   # the newest controller epoch heard (ZooKeeper era)
        self._fetch_token = 0
        self._fetch_timer: Timer | None = None
        self._last_heartbeat_ms: int | None = None
        # the heartbeat channel's connection (``tcp_retransmission_backoff``, KRaft: see
        # _heartbeat): up, the heartbeat in flight (when sent), the attempt under way
        # (attempt, deadline), failed attempts in a row
        self._hb_channel = config.tcp_retransmission_backoff and generation.kraft
        self._hb_connected = True
        self._hb_sent: int | None = None
        self._hb_connecting: tuple[int, int] | None = None
        self._hb_failures = 0
        self._hb_attempts = 0
        self._hb_setup = (ExponentialBackoff(*CONNECTION_SETUP_TIMEOUT_MS,
                                             ctx.kernel.rng(f"broker-{broker_id}-controller-connect"))
                          if self._hb_channel else None)
        self.heartbeat_phase_ms = 0   # when this boot's first periodic heartbeat is due
        # an established cluster's brokers follow other partitions too (ClusterConfig.established):
        # whether this incarnation's fetcher threads already run, and the partition's start on
        # one of them waiting for its long poll to end (_start_fetcher)
        self._fetchers_running = False
        self._fetcher_join: Timer | None = None
        self._fetch_dst: tuple[int, int] | None = None  # (leader, token) of the fetch in flight
        self._fetch_sent: object | None = None  # that request itself (answers echo it)
        self._parked_fetches: list[tuple[int, FetchRequest, Timer]] = []
        # with Rust replicas, the replication traffic runs in ``_core.FetchPlane`` (use_plane)
        self._plane: Any = None
        self._parked_reads: list[tuple[ConsumerFetchRequest, Timer]] = []  # consumer fetches
        self._parked_reads_key: tuple[object, ...] | None = None
        self._parked_produces: list[tuple[int, ProduceRequest, Timer, ProduceResponse]] = []
        self._parked_markers: list[tuple[int, WriteTxnMarkersRequest, Timer, str]] = []
        self._alter_sent_ms: int | None = None            # the AlterPartition in flight
        self._alter_answered: AlterPartitionRequest | None = None
        self._guards: dict[int, int] = {}                 # producer id -> verification token
        self._verifying: dict[int, tuple[ProduceRequest, int, Timer]] = {}
        self._tokens = 0
        self._boot_timer: Timer | None = None  # a restart's process start, until it registers
        # the periodic tasks that sleep while idle (``_arm``): task name -> its next tick
        self._ticks: dict[str, Timer] = {}
        self._started_ms = 0
        self._last_flush_ms = 0  # the log's last flush that wrote something, or its load
        self._seen_state: tuple[int, ...] | None = None  # the log's state_key at the last _note_state
        # One request of a client connection at a time (Kafka's SocketServer mutes a channel
        # from a request's receipt until its response is sent): the connections with a produce
        # request being handled, and the requests that arrived on them meanwhile, in order. A
        # connection is (client, how many of the client's connections had closed before it).
        self._conn_busy: set[tuple[str, int]] = set()
        self._conn_queue: dict[tuple[str, int], list[ProduceRequest]] = {}
        self._conn_gen: dict[str, int] = {}
        # the connection each request being handled came on
        self._req_gen: dict[tuple[str, int], int] = {}
        # connections the client closed whose first response since went out (see
        # ``on_client_disconnect``): the next response's write fails
        self._closed_written: set[tuple[str, int]] = set()
        # when each open connection's latest response was written
        self._conn_last_write: dict[tuple[str, int], int] = {}

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def starting(self) -> bool:
        """Restarted, the process still starting (not yet alive)."""
        return self._boot_timer is not None

    def boot(self, startup_ms: int) -> None:
        """Restart after ``startup_ms`` of process start and log loading: until then the broker
        is down (connections refused, no heartbeat); a crash meanwhile cancels the start."""
        if self.alive or self.starting:
            return
        if startup_ms <= 0:
            self.start()
            return

        def started() -> None:
            self._boot_timer = None
            self.start()
        self._boot_timer = self.ctx.kernel.schedule(startup_ms, started)

    def start(self, established: bool = False) -> None:
        """Boot (first start or restart): new incarnation, timers, register with the
        controller by a first heartbeat. ``established``: the run begins on a broker that
        registered long before (``ClusterConfig.established``): no registration now, and its
        last heartbeat was one interval before the first one of its phase."""
        self.alive = True
        self.incarnation += 1
        self._reset_connections()   # a new process: new connections
        self._hb_connected, self._hb_sent, self._hb_connecting, self._hb_failures = True, None, None, 0
        self.registered = not self.broker_epochs
        # a restarted KRaft broker is ready to be unfenced only once its startup is over
        # (:meth:`_arm_ready_to_unfence`); the run's first brokers are registered and unfenced
        self._ready_to_unfence = not self.kraft or established or self.incarnation == 1
        self._unfence_armed = self._hb_now = False
        self._accepted = self.registered
        self.controller_epoch = 0   # ReplicaManager.controllerEpoch: none heard yet (volatile)
        self._alter_sent_ms = None
        self.ctx.network.set_alive(self.broker_id, True)
        inc, c = self.incarnation, self.config
        # Registration at once, then a heartbeat every interval from a phase of this boot's
        # own: Kafka's BrokerLifecycleManager schedules each heartbeat an interval after the
        # previous answer, from the moment the broker registered, and real brokers boot at
        # different times. Phase-aligned timers made two brokers failing within one interval
        # expire in the order of link jitter rather than of their failures (docs/kafka-run.md).
        phase = self.ctx.kernel.rng(f"broker-{self.broker_id}-heartbeat").randrange(c.heartbeat_interval_ms) + 1
        # a restarted broker makes its fetcher threads anew, for every partition it follows at once
        self._fetchers_running = established
        if established:
            self.registered = self._accepted = True
            self._last_heartbeat_ms = phase - c.heartbeat_interval_ms
        else:
            self.ctx.kernel.schedule(0, lambda: self._if_alive(inc, self._heartbeat))
        self.heartbeat_phase_ms = phase
        self.ctx.kernel.schedule(phase, lambda: self._if_alive(inc, lambda: self._every(
            c.heartbeat_interval_ms, self._heartbeat, inc, now=True)))
        self._every(c.heartbeat_interval_ms, self._resend_alter_partition, inc)
        # a (re)started broker loads its log: LocalLog's lastFlushedTime starts at the load
        self._started_ms = self._last_flush_ms = self.ctx.now_ms
        self._stop_ticks()
        self._note_state()
        self._arm_isr_expiration()

    def crash(self, lose_unflushed: bool) -> None:
        """Stop at once; in-memory state, parked requests and timers are gone."""
        if self._boot_timer is not None:  # killed while starting: it never came up
            self._boot_timer.cancel()
            self._boot_timer = None
            self.ctx.log_event("crash", f"broker {self.broker_id} crashed while starting")
            return
        if not self.alive:
            return
        self.ctx.recorder.before_stop()
        if not lose_unflushed:  # the process died, its kernel closes the connections
            self.ctx.reset_connections(self.broker_id)
        self.alive = False
        self.stopped_ms = self.ctx.now_ms
        self.clean_shutdown = False
        self.ctx.network.set_alive(self.broker_id, False)
        self._clear_parked_fetches()
        self._forget_parked_produces()
        self._drop_parked_reads()
        self._stop_ticks()
        self._reset_connections()
        self._clear_transactional()
        lost = self.replica.crash(lose_unflushed)
        self.ctx.log_event("crash", f"broker {self.broker_id} crashed"
                           + (f", lost {lost} unflushed records" if lose_unflushed else ""))
        self._drain_events()

    def shutdown_cleanly(self) -> None:
        """Final step of a controlled shutdown: flush, checkpoint, stop."""
        if not self.alive:
            return
        self.ctx.recorder.before_stop()
        self._answer_parked_produces(force_error="NOT_LEADER_OR_FOLLOWER")
        # the process exits: its sockets close, and every peer's requests in flight to it fail
        # at once (a consumer fetch held in the purgatory, a follower's fetch)
        self.ctx.reset_connections(self.broker_id)
        if not self.ctx.generation.kraft:
            # a ZooKeeper-era broker closes its session on the way out (KafkaServer.shutdown
            # -> zkClient.close): its /brokers/ids node goes now, not a session timeout later
            self.ctx.post(self.broker_id, "controller", "on_session_closed", (self.broker_id, self.incarnation))
        self.alive = False
        self.stopped_ms = self.ctx.now_ms
        # KIP-966: the controller takes a restart as clean only if the broker names its
        # previous broker epoch (ClusterControlManager.registerBroker compares
        # previousBrokerEpoch with the stored registration); an incarnation that was never
        # registered has none to write into its clean-shutdown file, so its next start counts
        # as unclean (it may have lost its tail in an earlier crash)
        self.clean_shutdown = self._accepted
        self.ctx.network.set_alive(self.broker_id, False)
        self._clear_parked_fetches()
        self._drop_parked_reads()
        self._stop_ticks()
        self._answer_parked_markers(force_error="NOT_LEADER_OR_FOLLOWER")
        self._clear_transactional()
        self.replica.clean_shutdown()
        self.ctx.log_event("shutdown", f"broker {self.broker_id} shut down cleanly")

    def _halt(self) -> None:
        """The fetcher refused a truncation (before 2.0.1, unclean election disabled) and the
        broker exits: 0.11-2.0 throw ``FatalExitError`` and call ``Exit.exit``, 0.10
        ``System.exit``; either way the JVM's shutdown hook runs ``KafkaServer.shutdown``,
        whose first step is the controlled shutdown. (In 0.10 the hook then deadlocks waiting
        for the fetcher thread that called ``System.exit``, KAFKA-4039, fixed in 0.11.0.0: the
        process hangs with its ZooKeeper session open until killed. The model stops it, as
        0.11-2.0 do; either way it serves nothing until restarted.)"""
        self._cancel_fetcher_join()
        if self._plane is not None:
            self._plane.stop_fetcher(self.broker_id)
        else:
            self._fetch_dst = None
            if self._fetch_timer is not None:
                self._fetch_timer.cancel()
        self.ctx.log_event("shutdown", f"broker {self.broker_id} exits: log truncation is not allowed")
        self.request_controlled_shutdown()

    def request_controlled_shutdown(self) -> None:
        """Ask the controller to move leadership away; stop on the answer or after 5 s."""
        if not self.alive:
            return
        inc = self.incarnation
        self.ctx.post(self.broker_id, "controller", "on_controlled_shutdown",
                      ControlledShutdownRequest(self.broker_id, inc))
        self.ctx.kernel.schedule(CONTROLLED_SHUTDOWN_TIMEOUT_MS,
                                 lambda: self._if_alive(inc, self.shutdown_cleanly))

    def on_controlled_shutdown_response(self, msg: LeaderAndIsr, src: object) -> None:
        """ZooKeeper era: the ControlledShutdown answer lets the broker stop at once
        (``KafkaServer.controlledShutdown``). KRaft: the request and its grant ride on
        heartbeats; the controller grants the exit in the answer to a heartbeat that shows the
        broker caught up with the leadership moves (``BrokerHeartbeatManager``: "The request
        from broker N to shut down has been granted since the lowest active offset ..."), so
        the broker stops at its next heartbeat (``BrokerLifecycleManager``: "The controller
        has asked us to exit controlled shutdown"); measured on Kafka 4.3.1 here: leadership
        moves 40-80 ms after SIGTERM, the JVM exits 0.65-0.95 s after it with a 500 ms
        heartbeat interval (docs/kafka-run.md)."""
        self.on_leader_and_isr(msg, src)
        if not self.ctx.generation.kraft or self._last_heartbeat_ms is None:
            self.shutdown_cleanly()
            return
        inc, period = self.incarnation, self.config.heartbeat_interval_ms
        wait = self._last_heartbeat_ms + period - self.ctx.now_ms
        while wait <= 0:
            wait += period
        self.ctx.kernel.schedule(wait, lambda: self._if_alive(inc, self.shutdown_cleanly))

    def _every(self, period_ms: int, action: object, inc: int, now: bool = False) -> None:
        def tick() -> None:
            if self.alive and self.incarnation == inc:
                action()  # type: ignore[operator]
                self.ctx.kernel.schedule(period_ms, tick)
        self.ctx.kernel.schedule(0 if now else period_ms, tick)

    def _arm(self, name: str, period_ms: int, action: Callable[[], None], not_before_ms: int = 0) -> None:
        """Run ``action`` once at the next point after now (and not before ``not_before_ms``)
        of a ``period_ms`` grid aligned with this incarnation's start, unless that task is
        armed already. The periodic tasks that have nothing to do while idle are armed by what
        gives them work (:meth:`_note_state`, leadership) instead of ticking all along."""
        if name in self._ticks:
            return
        start, inc = self._started_ms, self.incarnation
        after = max(self.ctx.now_ms + 1, not_before_ms)
        due = start + -(-(after - start) // period_ms) * period_ms

        def tick() -> None:
            if self._ticks.get(name) is timer:
                del self._ticks[name]
                if self.alive and self.incarnation == inc:
                    action()
        timer = self.ctx.kernel.schedule_at(due, tick)
        self._ticks[name] = timer

    def _flush_if_dirty(self) -> None:
        """Kafka's time-based flush of a log with unflushed data, armed by :meth:`_note_state`.
        LogManager's "kafka-log-flusher" task (``LogManager.flushDirtyLogs``, every
        ``log.flush.scheduler.interval.ms`` from the start) fsyncs a log once
        ``time - log.lastFlushTime >= flush.ms``; the last flush time is the log's load time
        (``LocalLog``: ``lastFlushedTime = new AtomicLong(time.milliseconds)``) and moves only
        when a flush wrote something (``UnifiedLog.flush``: only if ``flushOffset >
        recoveryPoint``, then ``LocalLog.markFlushed``). So a record written after an idle
        spell longer than ``flush.ms`` is fsynced at the next check, one written soon after a
        flush waits out the rest of the interval. The model's checks fall on a
        :data:`~epochlab.sim.config.FLUSH_CHECK_INTERVAL_MS` grid from this incarnation's
        start (the live harness sets the same interval and ``log.initial.task.delay.ms = 0``)."""
        log = self.replica.log
        if log.log_end_offset > log.recovery_point:
            self.replica.flush()
            self._last_flush_ms = self.ctx.now_ms

    def _stop_ticks(self) -> None:
        for timer in self._ticks.values():
            timer.cancel()
        self._ticks.clear()
        self._seen_state = None

    def _note_state(self) -> None:
        """After anything that can append, truncate or move the HW: arm the fsync when the log
        end moved and the HW checkpoint when the HW moved."""
        state = self.replica.log.state_key()  # (LEO, HW, batch count, log start): one call
        seen, self._seen_state = self._seen_state, state
        if seen == state:
            return
        c = self.config
        if c.flush_interval_ms is not None and (seen is None or seen[0] != state[0]):
            self._arm("flush", FLUSH_CHECK_INTERVAL_MS, self._flush_if_dirty,
                      not_before_ms=self._last_flush_ms + c.flush_interval_ms)
        if seen is None or seen[1] != state[1]:
            self._arm("checkpoint", c.high_watermark_checkpoint_interval_ms,
                      self.replica.checkpoint_high_watermark)

    def _if_alive(self, inc: int, action: object) -> None:
        if self.alive and self.incarnation == inc:
            action()  # type: ignore[operator]

    def _drain_events(self) -> None:
        for message in self.replica.take_events():
            self.ctx.log_event("replica", f"broker {self.broker_id}: {message}")

    # -- controller traffic -----------------------------------------------------------------
    def _heartbeat(self) -> None:
        """A heartbeat to the controller (at registration, then each tick). With
        ``tcp_retransmission_backoff`` in KRaft, over a channel that behaves as Kafka's does
        when links drop packets (the heartbeat ``NodeToControllerChannelManager``): one heartbeat
        in flight at a time; one unanswered after ``session_timeout_ms / 2`` (its request
        timeout, ``BrokerServer``: KAFKA-14392) closes the connection, and what the cut held on
        it is gone; the next heartbeat opens a new one, and an attempt across a link that drops
        packets waits for the kernel's next SYN after a heal, or gives up after the connection
        set-up timeout (10 s with jitter, growing to 30 s) and the next heartbeat tries again.
        So a broker cut off from the controller for longer than that timeout is not back (nor
        unfenced) at the heal but up to the next SYN later (:meth:`_hb_connect`)."""
        if self._hb_channel:
            if self._hb_sent is not None:
                return  # one in flight: its answer or its timeout first
            if not self._hb_connected:
                self._hb_connect()
                return
        self._last_heartbeat_ms = self.ctx.now_ms
        # Only the newest heartbeat matters after a gap: a broker has one in flight at a time
        # (KRaft ``BrokerLifecycleManager``; ZooKeeper sessions ping the same way).
        self.ctx.post(self.broker_id, "controller", "on_heartbeat",
                      BrokerHeartbeat(self.broker_id, self.incarnation, self.clean_shutdown,
                                      not self._ready_to_unfence),
                      coalesce="heartbeat")
        if self._hb_channel:
            sent = self._hb_sent = self.ctx.now_ms
            inc = self.incarnation
            self.ctx.kernel.schedule(self.config.session_timeout_ms // 2,
                                     lambda: self._if_alive(inc, lambda: self._hb_timeout(sent)))

    def _arm_ready_to_unfence(self) -> None:
        """A restarted KRaft broker whose registration the controller accepted, fenced: it
        asks to be unfenced once the rest of its startup is over (``broker_unfence_ms``,
        drawn per restart), ``BrokerServer.startup`` -> ``lifecycleManager.setReadyToUnfence``
        after the first metadata publish, which sends a heartbeat at once with ``wantFence``
        false (``BrokerLifecycleManager.SetReadyToUnfenceEvent``). Until the controller has
        unfenced it, its fetches do not count for the ISR (``Partition.isBrokerEpochIsrEligible``:
        a fenced broker is not eligible) and it is not elected."""
        if self._ready_to_unfence or self._unfence_armed:
            return
        self._unfence_armed = True
        lo, hi = self.config.broker_unfence_ms
        delay = self.ctx.kernel.rng(f"broker-{self.broker_id}-unfence").randint(lo, hi) if hi else 0
        inc = self.incarnation
        self.ctx.kernel.schedule(delay, lambda: self._if_alive(inc, self._ready))

    def _ready(self) -> None:
        self._ready_to_unfence = True
        self.ctx.log_event("controller", f"broker {self.broker_id}: started; asks to be unfenced")
        if self._hb_channel and self._hb_sent is not None:
            # one heartbeat in flight: the next goes at its answer
            # (scheduleNextCommunicationImmediately while a communication is in flight)
            self._hb_now = True
            return
        self._heartbeat()

    def _hb_timeout(self, sent: int) -> None:
        """The heartbeat sent at ``sent`` is unanswered after its request timeout: the channel
        closes ("Disconnecting from node N due to request timeout"), dropping what a cut held
        on it both ways; the next heartbeat reconnects."""
        if self._hb_sent != sent:
            return
        self._hb_sent = None
        self._hb_connected = False
        network = self.ctx.network
        network.discard_held(self.broker_id, "controller")
        network.discard_held("controller", self.broker_id)
        self.ctx.log_event("controller", f"broker {self.broker_id}: heartbeat unanswered for "
                           f"{self.config.session_timeout_ms // 2} ms; disconnects from the controller")

    def _hb_connect(self) -> None:
        """Open the heartbeat channel's connection: at once across a usable link (then the
        heartbeat goes), else an attempt whose SYN is resent 1, 2, 3, 4, 5, 7, 11, 19 and 35 s
        after the first (``SYN_RESENDS_MS``) until the link is usable or the set-up timeout passes."""
        if self._hb_connecting is not None:
            return
        if self.ctx.network.usable(self.broker_id, "controller"):
            self._hb_connected, self._hb_failures = True, 0
            self._heartbeat()
            return
        assert self._hb_setup is not None
        self._hb_attempts += 1
        attempt, inc = self._hb_attempts, self.incarnation
        timeout = self._hb_setup.backoff(self._hb_failures)
        self._hb_connecting = (attempt, self.ctx.now_ms + timeout)
        for wait in syn_checks(timeout):
            self.ctx.kernel.schedule(wait, lambda: self._if_alive(inc, lambda: self._hb_syn(attempt)))

    def _hb_syn(self, attempt: int) -> None:
        """Attempt ``attempt``'s resent SYN, or its deadline."""
        if self._hb_connecting is None or self._hb_connecting[0] != attempt:
            return
        deadline = self._hb_connecting[1]
        if self.ctx.network.usable(self.broker_id, "controller"):
            self._hb_connecting = None
            self._hb_connected, self._hb_failures = True, 0
            self._heartbeat()
            return
        if self.ctx.now_ms >= deadline:
            self._hb_connecting = None
            self._hb_failures += 1
            self.ctx.log_event("controller", f"broker {self.broker_id}: gives up connecting to the "
                               "controller (socket connection set-up timeout)")

    def on_leader_and_isr(self, msg: LeaderAndIsr, src: object) -> None:
        """Apply a controller decision (also carried by heartbeat responses).

        A KRaft broker serves nothing until the controller has registered and unfenced its
        incarnation (``BrokerServer.startup`` opens its endpoints only after
        ``lifecycleManager.setReadyToUnfence()``; the controller refuses a new incarnation's
        registration while the old one's session lives, ``ClusterControlManager.registerBroker``:
        DuplicateBrokerRegistrationException). But it follows before that: its replica manager
        applies the metadata image once the broker has read the metadata log up to the
        quorum's high watermark, which it reads as an observer, registered or not
        (``BrokerServer.startup`` installs the metadata publishers before it waits for the
        controller's acknowledgement; ``ReplicaManager.applyDelta`` makes it a follower of the
        leader named there and starts its fetcher). Its fetches carry broker epoch -1 until it
        registers (``BrokerLifecycleManager.brokerEpoch``), which the leader accepts
        (``Replica.updateFetchStateOrThrow`` fences only an older epoch), so while its old
        incarnation is still in the ISR, its fetches move the leader's HW. So until a state
        lists this incarnation, a restarted KRaft broker applies only states that name another
        broker leader; one naming it leader is ignored (Kafka's would lead, serving nothing
        until unfenced). The model's fetch carries the incarnation instead of -1: the leader
        takes either, and counts neither ISR-eligible, where Kafka's lets a -1 fetch join the
        ISR of an unfenced old registration (``Partition.isBrokerEpochIsrEligible``).
        ZooKeeper era from 2.2: a broker starts processing requests only once registered
        (``KafkaServer.startup``: ``registerBroker`` before ``startProcessingRequests``), and
        rejects controller requests carrying another registration's broker epoch
        (``KafkaApis.isBrokerEpochStale``, KIP-380): it ignores partition states until a
        state lists its incarnation."""
        self._hb_sent = None  # the controller's word: the heartbeat in flight is answered
        if self._hb_now:
            self._hb_now = False
            self._heartbeat()
        if not self.registered:
            me = (self.broker_id, self.incarnation)
            if me in {(b, e) for b, e, _ in msg.brokers}:
                self.registered = self._accepted = True
            else:
                if me in msg.fenced:
                    self._accepted = True
                    self._arm_ready_to_unfence()
                if not (self.kraft and msg.leader is not None and msg.leader != self.broker_id):
                    return
        if not self.ctx.generation.kraft:
            # ReplicaManager.becomeLeaderOrFollower: a request of an older controller than
            # one already heard is refused whole (STALE_CONTROLLER_EPOCH); else its epoch is
            # the newest known
            if msg.controller_epoch < self.controller_epoch:
                self.ctx.log_event("controller", f"broker {self.broker_id} ignores a LeaderAndIsr "
                                   f"of controller epoch {msg.controller_epoch} (epoch "
                                   f"{msg.leader_epoch}): STALE_CONTROLLER_EPOCH, it has heard "
                                   f"from controller epoch {self.controller_epoch}")
                return
            self.controller_epoch = msg.controller_epoch
        if msg.metadata_version >= self._image_version:
            self.metadata_image, self._image_version = (msg.leader, msg.leader_epoch), msg.metadata_version
        before = (self.replica.role, self.replica.leader_epoch)
        outcome = self.replica.apply_leader_and_isr(msg, self.ctx.now_ms)
        self._drain_events()
        if outcome == "ignored":
            return
        if outcome in ("leader", "follower"):
            self.ctx.log_event("role", f"broker {self.broker_id} is {outcome} in epoch "
                               f"{msg.leader_epoch} (was {before[0]} in epoch {before[1]}), "
                               f"ISR {list(msg.isr)}, LEO {self.replica.log.log_end_offset}")
        if outcome == "follower" and self.ctx.generation.kraft:
            # ReplicaManager.applyLocalFollowersDelta: the fetcher starts, then the
            # purgatories are completed (completeDelayedOperationsWhenNotPartitionLeader)
            self._start_fetcher()
            self._complete_when_not_leader()
        elif outcome == "follower":
            # ReplicaManager.makeFollowers (ZooKeeper): the purgatories first, then the fetcher
            self._complete_when_not_leader()
            self._start_fetcher()
        elif outcome == "follower-same":
            self._complete_when_not_leader()
        self._arm_isr_expiration()
        self._try_complete_delayed()

    def _isr_expiration(self) -> None:
        """``ReplicaManager.maybeShrinkIsr``, every ``replica.lag.time.max.ms / 2`` while this
        broker leads (on a follower it has nothing to do)."""
        proposal = self.replica.maybe_shrink_isr(self.ctx.now_ms)
        if proposal is not None:
            self._send_alter_partition(proposal)
        if self.replica.maybe_increment_high_watermark(self.ctx.now_ms):
            self._try_complete_delayed()
        self._arm_isr_expiration()

    def _arm_isr_expiration(self) -> None:
        if self.replica.role == "leader":
            self._arm("isr", max(1, self.config.replica_lag_time_max_ms // 2), self._isr_expiration)

    def _send_alter_partition(self, req: AlterPartitionRequest) -> None:
        self.ctx.log_event("isr", f"broker {self.broker_id} proposes ISR {list(req.new_isr)} "
                           f"(leader epoch {req.leader_epoch}, partition epoch {req.partition_epoch})")
        if self._alter_sent_ms is None:
            self._post_alter_partition(req)

    def _post_alter_partition(self, req: AlterPartitionRequest) -> None:
        """At most one AlterPartition in flight (``AlterPartitionManager``'s in-flight flag):
        the next is sent when this one is answered, or, if no answer comes within the controller
        channel's request timeout (a lost connection), sent again."""
        self._alter_sent_ms = self.ctx.now_ms
        self.ctx.post(self.broker_id, "controller", "on_alter_partition", req)

    def _resend_alter_partition(self) -> None:
        sent = self._alter_sent_ms
        if sent is not None and self.ctx.now_ms - sent < ALTER_PARTITION_TIMEOUT_MS:
            return
        self._alter_sent_ms = None
        req = self.replica.pending_alter_partition()
        if req is not None and req != self._alter_answered:
            self._post_alter_partition(req)

    def on_alter_partition_response(self, resp: AlterPartitionResponse, src: object) -> None:
        # a proposal kept pending after an error waits for new metadata, not for a resend
        self._alter_sent_ms, self._alter_answered = None, resp.request
        self.replica.handle_alter_partition_response(resp, self.ctx.now_ms)
        self._try_complete_delayed()
        pending = self.replica.pending_alter_partition()  # a proposal made meanwhile, or kept
        if pending is not None and pending != resp.request:
            self._post_alter_partition(pending)

    # -- follower fetcher -------------------------------------------------------------------
    # With Rust replicas (the ``rust`` backend) ``_core.FetchPlane`` runs this section and the
    # fetch serving below, step for step (the engine is src/sim/fetcher.rs, driven by
    # src/bindings/plane.rs): a fetch, its answer and their timers then run no Python frame
    # unless the broker's own state is involved. These methods are the statement it follows,
    # and what the other backends run.
    def use_plane(self, plane: Any) -> None:
        """Hand this broker's replication traffic to ``plane`` (a ``_core.FetchPlane``; the
        replica must be a Rust replica): its handlers replace ``on_fetch``,
        ``on_fetch_response``, ``on_offsets_for_leader_epoch``,
        ``on_offsets_for_leader_epoch_response``, ``on_connection_reset``, ``on_produce`` and
        ``on_client_disconnect`` on this instance, and the fetcher's and the produce path's
        state live there."""
        self._plane = plane
        for method, handler in plane.attach(self.broker_id, self).items():
            setattr(self, method, handler)

    def fetch_state(self) -> tuple[int, object | None, int]:
        """``(fetch token, the request in flight or None, parked follower fetches)``."""
        if self._plane is not None:
            return self._plane.fetch_state(self.broker_id)  # type: ignore[no-any-return]
        return self._fetch_token, self._fetch_sent, len(self._parked_fetches)

    def _clear_parked_fetches(self) -> None:
        if self._plane is not None:
            self._plane.clear_parked_fetches(self.broker_id)
        else:
            self._parked_fetches.clear()

    def _start_fetcher(self) -> None:
        """Fetch from the (new) leader. On an established cluster (``ClusterConfig.established``:
        the live cluster holds other runs' partitions, led by every broker) a running broker
        already has a fetcher thread to that leader, blocked in its long poll for the other
        partitions; ``AbstractFetcherThread.addPartitions`` only adds the partition to the
        thread's map, and ``doWork`` sends it at the thread's next fetch, when that poll ends
        (``replica.fetch.wait.max.ms`` after it was sent: at a phase drawn uniformly here). The
        fetch to the previous leader is abandoned at once (the partition left that thread,
        ``removeFetcherForPartitions``). A broker's first start of an incarnation makes its
        threads (``ReplicaFetcherManager.addFetcherForPartitions`` with none running), which
        fetch at once. The run's own partition joined the threads before the run's clock began
        (:data:`ESTABLISHED_PARTITION_LEAD_MS`), so a start in its first leader epoch (the
        topic as made) waits that much less; and when that thread's fetch reached the leader
        before the leader had made itself leader (:meth:`_first_start`), the leader
        refused it, and the partition waits ``replica.fetch.backoff.ms`` more (and again,
        while the leader is not one yet): a new
        partition's leader epoch is -1 until ``Partition.makeLeader``, so a fetch in epoch 0
        gets UNKNOWN_LEADER_EPOCH (``Partition.checkCurrentLeaderEpoch``; UNKNOWN_TOPIC_ID or
        UNKNOWN_TOPIC_OR_PARTITION before the leader knows the topic), and
        ``AbstractFetcherThread.processFetchRequest`` delays a partition with any such error by
        the backoff (``handlePartitionsWithErrors``, ``delayPartitions``)."""
        self._cancel_fetcher_join()
        if not self._fetchers_running:
            self._fetchers_running = self.config.established
            self._start_fetching()
            return
        wait = self.ctx.kernel.rng(f"broker-{self.broker_id}-fetcher-poll").randint(
            0, self.config.replica_fetch_wait_max_ms)
        if self.replica.leader_epoch == 0:
            # the partition's first leadership: the topic was made before the run's clock began
            start, lag = self._first_start()
            if wait < lag:  # refused, the leader not yet one: again after each backoff
                backoff = self.config.replica_fetch_backoff_ms
                wait += -(-(lag - wait) // backoff) * backoff
            wait += start
        if wait <= 0:  # the thread's poll ended before the run's clock began
            self._start_fetching()
            return
        self._stop_fetching()
        inc = self.incarnation

        def join() -> None:
            self._fetcher_join = None
            self._if_alive(inc, self._start_fetching)
        self._fetcher_join = self.ctx.kernel.schedule(wait, join)

    def _first_start(self) -> tuple[int, int]:
        """``(start, lag)``: when, on the run's clock, this follower took the partition as the
        topic was made, and how much later its first leader made itself leader: the run's own
        (``ClusterConfig.first_role_ms``), or :data:`ESTABLISHED_PARTITION_LEAD_MS` before
        time 0 and a lag drawn in a stream of its own (:data:`FIRST_LEADER_LAG_MS`, linear
        between two deciles)."""
        roles = dict(self.config.first_role_ms)
        start = roles.get(self.broker_id, -ESTABLISHED_PARTITION_LEAD_MS)
        leader = self.replica.leader_id
        if self.broker_id in roles and leader in roles:
            return start, roles[leader] - start
        u = self.ctx.kernel.rng(f"broker-{self.broker_id}-first-leader-lag").randrange(1000)
        low, high = FIRST_LEADER_LAG_MS[u // 100], FIRST_LEADER_LAG_MS[u // 100 + 1]
        return start, low + (high - low) * (u % 100) // 100

    def _cancel_fetcher_join(self) -> None:
        if self._fetcher_join is not None:
            self._fetcher_join.cancel()
            self._fetcher_join = None

    def _stop_fetching(self) -> None:
        """No request in flight and no timer: what is in flight is abandoned."""
        if self._plane is not None:
            self._plane.abandon_fetcher(self.broker_id)
            return
        self._fetch_token += 1
        self._fetch_dst = self._fetch_sent = None
        if self._fetch_timer is not None:
            self._fetch_timer.cancel()

    def _start_fetching(self) -> None:
        if self._plane is not None:
            self._plane.start_fetcher(self.broker_id)
            return
        self._fetch_token += 1
        self._fetch_sent = None  # a fetch to the previous leader is abandoned
        if self._fetch_timer is not None:
            self._fetch_timer.cancel()
        self._send_next_fetch()

    def _send_next_fetch(self) -> None:
        if not self.alive:
            return
        req = self.replica.next_request()
        leader = self.replica.leader_id
        if req is None or leader is None:
            return
        self._fetch_token += 1
        token, inc = self._fetch_token, self.incarnation
        if not self.ctx.network.is_alive(leader):
            self._backoff(token)
            return
        if isinstance(req, FetchRequest):
            if self.ctx.generation.kraft:  # KIP-903: fetches carry the broker epoch
                req = evolve(req, broker_epoch=self.incarnation)
            self.ctx.post(self.broker_id, leader, "on_fetch", req, kind="fetch")
        else:
            self.ctx.post(self.broker_id, leader, "on_offsets_for_leader_epoch", req, kind="fetch")
        self._fetch_dst, self._fetch_sent = (leader, token), req
        self._fetch_timer = self.ctx.kernel.schedule(
            REPLICA_REQUEST_TIMEOUT_MS, lambda: self._if_alive(inc, lambda: self._fetch_timeout(token)))

    def _fetch_timeout(self, token: int) -> None:
        if self._plane is not None:
            self._plane.fetch_timeout(self.broker_id, token)
            return
        if token == self._fetch_token:
            self._fetch_sent = None  # given up: its connection is closed
            self._backoff(token)

    def on_connection_reset(self, peer: object, src: object) -> None:
        """The leader this follower fetches from died as a process (``SimContext.reset_connections``):
        a fetch in flight to it fails at once and the fetcher backs off
        (``replica.fetch.backoff.ms``, ``ReplicaFetcherThread`` / ``AbstractFetcherThread``
        on a failed fetch) instead of waiting for the request timeout."""
        if self._fetch_dst == (peer, self._fetch_token) and self.alive:
            if self._fetch_timer is not None:
                self._fetch_timer.cancel()
            self._fetch_dst = self._fetch_sent = None
            self._backoff(self._fetch_token)

    def _backoff(self, token: int) -> None:
        inc = self.incarnation

        def retry() -> None:
            if self.alive and self.incarnation == inc and token == self._fetch_token:
                self._send_next_fetch()
        self._fetch_timer = self.ctx.kernel.schedule(self.config.replica_fetch_backoff_ms, retry)

    def _after_response(self, action: str) -> None:
        self._drain_events()
        self._note_state()
        if action == "discard":
            return
        if action == "halt":
            self._halt()
            return
        self._fetch_dst = None
        if self._fetch_timer is not None:
            self._fetch_timer.cancel()
        if action == "continue":
            self._send_next_fetch()
        elif action == "backoff":
            self._backoff(self._fetch_token)

    def _answers_request_in_flight(self, resp: FetchResponse | OffsetsForLeaderEpochResponse) -> bool:
        """Whether ``resp`` answers the request this fetcher is waiting for. A fetcher has one
        request in flight (``AbstractFetcherThread``); one it gave up on (request timeout,
        leader change, restart) went with its connection: ``NetworkClient`` closes the
        connection of a timed-out request (``handleTimedOutRequests``), so its answer, even if
        the leader served it after a partition healed, never reaches the fetcher, and TCP
        delivers no duplicates. Answers echo their request object, so identity tells."""
        if self._plane is not None:
            return bool(self._plane.answers_in_flight(self.broker_id, resp))
        if resp.request is not self._fetch_sent:
            return False
        self._fetch_sent = None
        return True

    def on_fetch_response(self, resp: FetchResponse, src: object) -> None:
        if self._answers_request_in_flight(resp):
            self._after_response(self.replica.handle_fetch_response(resp))
            self._check_parked_reads()  # a follower's HW moved: its fetch-from-follower reads

    def on_offsets_for_leader_epoch_response(self, resp: OffsetsForLeaderEpochResponse,
                                             src: object) -> None:
        if self._answers_request_in_flight(resp):
            self._after_response(self.replica.handle_offsets_for_leader_epoch_response(resp))

    # -- leader: fetch serving --------------------------------------------------------------
    def on_fetch(self, req: FetchRequest, src: object) -> None:
        """Serve a follower fetch now, or park it if it would return no data."""
        resp, proposal = self.replica.handle_fetch(req, self.ctx.now_ms)
        if resp.error is not None or resp.diverging_epoch is not None:
            self._drain_events()  # a refused fetch, or a diverging one taken as the LEO (KAFKA-13141)
        if proposal is not None:
            self._send_alter_partition(proposal)
        self._try_complete_delayed()
        if resp.error is None and not resp.batches and resp.diverging_epoch is None \
                and self.config.replica_fetch_wait_max_ms > 0:
            inc = self.incarnation
            timer = self.ctx.kernel.schedule(
                self.config.replica_fetch_wait_max_ms,
                lambda: self._if_alive(inc, lambda: self._expire_fetch(req)))
            self._parked_fetches.append((req.replica_id, req, timer))
            return
        self.ctx.post(self.broker_id, req.replica_id, "on_fetch_response", resp)

    def _expire_fetch(self, req: FetchRequest) -> None:
        for i, (_, parked, _timer) in enumerate(self._parked_fetches):
            if parked is req:
                del self._parked_fetches[i]
                self._complete_fetch(req)
                return

    def _complete_fetch(self, req: FetchRequest) -> None:
        """A parked fetch is answered with what a read gives now; the follower's state is what
        the fetch set on arrival (``DelayedFetch.onComplete``: no update, no ISR expansion, so
        nothing another purgatory waits for changes)."""
        resp, _ = self.replica.handle_fetch(req, self.ctx.now_ms, update_state=False)
        self.ctx.post(self.broker_id, req.replica_id, "on_fetch_response", resp)

    def _complete_when_not_leader(self) -> None:
        """The broker no longer leads (``ReplicaManager.completeDelayedOperationsWhenNotPartitionLeader``):
        the produce purgatory (produces, then transaction markers) fails what waits there with
        NOT_LEADER_OR_FOLLOWER, then the fetch purgatory answers the parked follower fetches
        and the consumer reads."""
        if self.has_parked_produces():
            self._answer_parked_produces(force_error=None)
        self._answer_parked_markers(force_error=None)
        self._answer_parked_fetches()
        self._check_parked_reads()

    def _answer_parked_fetches(self) -> None:
        if self._plane is not None:
            self._plane.answer_parked_fetches(self.broker_id)
            return
        parked, self._parked_fetches = self._parked_fetches, []
        for _, req, timer in parked:
            timer.cancel()
            self._complete_fetch(req)

    def on_offsets_for_leader_epoch(self, req: OffsetsForLeaderEpochRequest, src: object) -> None:
        resp = self.replica.handle_offsets_for_leader_epoch(req)
        self.ctx.post(self.broker_id, req.replica_id, "on_offsets_for_leader_epoch_response", resp)

    def on_consumer_fetch(self, req: ConsumerFetchRequest, src: object) -> None:
        """Answer a consumer fetch (on a follower too when it carries a rack, KIP-392), or
        hold it while it finds nothing to read (``ReplicaManager.fetchMessages``: answered at
        once when ``maxWaitMs`` is 0, with data, an error, a diverging epoch or a preferred
        read replica; else a ``DelayedFetch``). With Rust replicas ``_core.FetchPlane`` handles
        it and holds the parked reads (the engine is src/sim/reads.rs); these methods are the
        statement it follows."""
        resp = self._read_for_consumer(req)
        if req.max_wait_ms > 0 and self.ctx.generation < Generation.DIVERGING_EPOCH:
            # kip-320 (2.4-2.7, fetch from follower): a redirect to the preferred replica sat
            # in the purgatory until the wait ended (its partition has no offset for
            # DelayedFetch.tryComplete to look at; KAFKA-13767, fixed in 3.2.0), and a read held
            # by a follower was completed by nothing but the wait's end (KAFKA-14334, fixed in
            # 3.3.2 / 3.4.0). diverging-epoch on takes 3.4's rules, as for KAFKA-14372.
            if (resp.error is None and resp.preferred_read_replica is not None) or (
                    self.replica.role != "leader" and self._nothing_to_read(req, resp)):
                inc = self.incarnation
                self.ctx.kernel.schedule(req.max_wait_ms, lambda: self._if_alive(inc, lambda: self._answer_read(req)))
                return
        if req.max_wait_ms > 0 and self._nothing_to_read(req, resp):
            inc = self.incarnation
            timer = self.ctx.kernel.schedule(
                req.max_wait_ms, lambda: self._if_alive(inc, lambda: self._expire_read(req)))
            if not self._parked_reads:
                self._parked_reads_key = self._reads_key()
            self._parked_reads.append((req, timer))
            return
        self.ctx.post(self.broker_id, req.client, "on_fetch_response", resp)

    def _read_for_consumer(self, req: ConsumerFetchRequest) -> ConsumerFetchResponse:
        """One read for a consumer. With ``replica.selector.class`` set, the leader first asks
        the selector; when it names a follower the read is skipped and the answer carries only
        the offsets and that replica (``ReplicaManager.readFromLocalLog``: "If a preferred
        read-replica is set, skip the read"). A ListOffsets by timestamp needs ListOffsets v1
        (KIP-79, 0.10.1): an older release answers UNSUPPORTED_VERSION."""
        if req.reset == "timestamp" and req.fetch_offset is None and req.validate_epoch is None:
            release = self.config.release
            if release is not None and release < (0, 10, 1):
                return ConsumerFetchResponse(req.request_id, "UNSUPPORTED_VERSION", self.replica.leader_epoch)
        if self.config.replica_selector_class is not None and req.rack is not None \
                and req.fetch_offset is not None and req.validate_epoch is None:
            preferred = self.replica.preferred_read_replica(req.fetch_offset, req.rack)
            if preferred is not None:
                # the offsets without the read: no records, so no aborted transactions either
                resp = self.replica.handle_consumer_fetch(evolve(req, max_records=0))
                if resp.error is None:
                    resp = evolve(resp, preferred_read_replica=preferred)
                return resp
        return self.replica.handle_consumer_fetch(req)

    @staticmethod
    def _nothing_to_read(req: ConsumerFetchRequest, resp: ConsumerFetchResponse) -> bool:
        """Whether a consumer fetch keeps waiting (``DelayedFetch.tryComplete`` would not
        complete it): no error, no records, no redirect, and the fetch offset is exactly the
        end of what it may read (the HW, or the LSO for read_committed); an offset above it
        completes at once (case F: a truncated or new leader whose HW is still behind)."""
        if resp.error is not None or resp.records or resp.preferred_read_replica is not None \
                or req.fetch_offset is None or req.validate_epoch is not None:
            return False
        end = resp.last_stable_offset if req.isolation_level == "read_committed" else resp.high_watermark
        return req.fetch_offset == end

    def _reads_key(self) -> tuple[object, ...]:
        r = self.replica
        return (r.role, r.leader_epoch, r.log.high_watermark, r.log.log_end_offset)

    def _check_parked_reads(self) -> None:
        """Complete the held consumer fetches that now have something to answer; a read is
        tried again only when the replica's role, epoch, HW or log end moved since the last
        check (every completion condition depends on those)."""
        if self._plane is not None:
            self._plane.check_parked_reads(self.broker_id)
            return
        if not self._parked_reads:
            return
        key = self._reads_key()
        if key == self._parked_reads_key:
            return
        self._parked_reads_key = key
        waiting: list[tuple[ConsumerFetchRequest, Timer]] = []
        for req, timer in self._parked_reads:
            resp = self._read_for_consumer(req)
            if self._nothing_to_read(req, resp):
                waiting.append((req, timer))
                continue
            timer.cancel()
            self.ctx.post(self.broker_id, req.client, "on_fetch_response", resp)
        self._parked_reads = waiting

    def _expire_read(self, req: ConsumerFetchRequest) -> None:
        for i, (parked, _timer) in enumerate(self._parked_reads):
            if parked is req:
                del self._parked_reads[i]
                self._answer_read(req)
                return

    def _answer_read(self, req: ConsumerFetchRequest) -> None:
        """The end of a consumer fetch's wait: whatever a read gives now (``DelayedFetch.onComplete``)."""
        self.ctx.post(self.broker_id, req.client, "on_fetch_response", self._read_for_consumer(req))

    def has_parked_reads(self) -> bool:
        """Whether a consumer fetch waits in this broker's purgatory."""
        if self._plane is not None:
            return bool(self._plane.parked_reads(self.broker_id))
        return bool(self._parked_reads)

    def _drop_parked_reads(self) -> None:
        if self._plane is not None:
            self._plane.drop_parked_reads(self.broker_id)
            return
        for _req, timer in self._parked_reads:
            timer.cancel()
        self._parked_reads.clear()

    # -- clients' metadata ------------------------------------------------------------------
    def on_metadata(self, msg: tuple[str, int], src: object) -> None:
        """A client's metadata request (``KafkaApis.handleTopicMetadataRequest``): answered
        from this broker's metadata cache, the partition's leader and epoch as the controller
        last told it (:attr:`metadata_image`; a broker cut off from the controller answers
        with what it heard before the cut). A broker that is not registered yet serves no
        requests (:meth:`on_leader_and_isr`): the request goes unanswered."""
        client, request_id = msg
        if not self.registered:
            return
        leader, epoch = self.metadata_image if self.metadata_image is not None else (None, 0)
        self.ctx.post(self.broker_id, client, "on_metadata_response", (request_id, leader, epoch))

    # -- leader: produce --------------------------------------------------------------------
    # With Rust replicas ``_core.FetchPlane`` runs the connections, the answer by acks and the
    # produce purgatory (acks=all writes and transaction markers) of this section step for
    # step (the engine is src/sim/produce.rs): ``on_produce`` and ``on_client_disconnect`` are
    # its handlers on the instance, and the methods below hand their work to it
    # (``_answer_produce``, ``_append_produce``, ``_answer_parked_produces``, the markers'
    # parking and ``_answer_parked_markers``). KIP-890 verification stays here.
    def on_produce(self, req: ProduceRequest, src: object) -> None:
        """Append as leader; answer at once (acks=1, errors), never (acks=0) or when the HW
        covers the batch (acks=all, purgatory). A transactional first write is verified first
        with KIP-890 (module doc). The requests of one client connection are handled one at a
        time: the next is read once the previous one is answered (Kafka's ``SocketServer``
        processor mutes the channel on ``REQUEST_RECEIVED`` and unmutes it on
        ``RESPONSE_SENT``, ``KafkaChannel.ChannelMuteState``), so a produce waiting in the
        purgatory holds back the requests pipelined behind it, and their timeouts start later."""
        conn = (req.client, self._conn_gen.get(req.client, 0))
        if conn in self._conn_busy:
            self._conn_queue.setdefault(conn, []).append(req)
            return
        self._conn_busy.add(conn)
        self._handle_produce(req)

    def _reset_connections(self) -> None:
        if self._plane is not None:
            self._plane.reset_produce_connections(self.broker_id)
            return
        self._conn_busy.clear()
        self._conn_queue.clear()
        self._req_gen.clear()
        self._closed_written.clear()
        self._conn_last_write.clear()

    def on_client_disconnect(self, msg: ClientDisconnect, src: object) -> None:
        """The client closed its connection (a request timed out). Kafka's broker does not see
        the close while the channel is muted behind the request it is handling; the requests
        the client had already sent wait in the socket's receive buffer. The first response
        written after the close goes out (the client's kernel answers it with a reset), the
        processor unmutes the channel and reads the next request, which is handled like any
        other (appended, and answered into the void); the write of its response fails (broken
        pipe) and the processor closes the channel (``Selector.close`` with
        ``CloseMode.NOTIFY_ONLY``: outstanding receives discarded), so the requests behind it
        are never read. Measured on this machine's loopback with plain sockets: after the
        peer's close the first write succeeds, the read behind it returns the queued request,
        the second write fails with EPIPE. The model learns the close when the FIN arrives, a
        link delay later; a response written since ``closed_ms`` was that first write. (Two
        responses within one link delay of the close would both count as written: not
        modelled.) New requests come on a new connection, independent of this one."""
        conn = (msg.client, self._conn_gen.get(msg.client, 0))
        if self._conn_last_write.pop(conn, -1) >= msg.closed_ms and conn in self._conn_busy:
            self._closed_written.add(conn)
        self._conn_gen[msg.client] = conn[1] + 1

    def _answer_produce(self, req: ProduceRequest, resp: ProduceResponse | None) -> None:
        """Send ``resp`` (``None``: acks=0, no response) and read the connection's next request."""
        if self._plane is not None:
            self._plane.answer_produce(self.broker_id, req, resp)
            return
        if resp is not None:
            self.ctx.post(self.broker_id, req.client, "on_produce_response", resp)
        gen = self._req_gen.pop((req.client, req.request_id), None)
        if gen is None:
            return
        conn = (req.client, gen)
        if resp is not None:
            if gen == self._conn_gen.get(req.client, 0):
                self._conn_last_write[conn] = self.ctx.now_ms
            elif conn in self._closed_written:
                self._forget_connection(conn)  # the client closed it: the second write fails
                return
            else:
                self._closed_written.add(conn)  # the first write since the close goes out
        queue = self._conn_queue.get(conn)
        if not queue:
            self._forget_connection(conn)
            return
        nxt = queue.pop(0)
        inc = self.incarnation
        self.ctx.kernel.schedule(0, lambda: self._if_alive(inc, lambda: self._handle_produce(nxt, gen)))

    def _forget_connection(self, conn: tuple[str, int]) -> None:
        """Forget what is kept of a connection with nothing left to read: an idle one (it is
        marked busy again by its next request) or a closed one (its queued requests dropped)."""
        self._conn_busy.discard(conn)
        self._conn_queue.pop(conn, None)
        self._closed_written.discard(conn)

    def _handle_produce(self, req: ProduceRequest, gen: int | None = None) -> None:
        self._req_gen[(req.client, req.request_id)] = self._conn_gen.get(req.client, 0) if gen is None else gen
        if self._needs_verification(req):
            self._verify(req)
            return
        self._append_produce(req)

    def _needs_verification(self, req: ProduceRequest) -> bool:
        if not (self.ctx.kip890 and req.is_transactional and req.producer_id is not None):
            return False
        if self.replica.role != "leader":
            return False
        return all(pid != req.producer_id for _, pid in self.replica.log.ongoing_transactions())

    def _verify(self, req: ProduceRequest) -> None:
        assert req.producer_id is not None and req.producer_epoch is not None
        self._tokens += 1
        token = self._tokens
        guard = self._guards.setdefault(req.producer_id, token)
        inc = self.incarnation
        timer = self.ctx.kernel.schedule(
            req.timeout_ms, lambda: self._if_alive(inc, lambda: self._verification_timeout(token)))
        self._verifying[token] = (req, guard, timer)
        self.ctx.post(self.broker_id, "coordinator", "on_add_partitions_to_txn",
                      AddPartitionsToTxnRequest(str(self.broker_id), token, req.transactional_id or "",
                                                req.producer_id, req.producer_epoch,
                                                self.ctx.topic_partition, verify_only=True))

    def _verification_timeout(self, token: int) -> None:
        entry = self._verifying.pop(token, None)
        if entry is not None:
            req = entry[0]
            self._answer_produce(req, ProduceResponse(req.request_id, "NOT_ENOUGH_REPLICAS"))

    def on_verify_response(self, resp: TxnCoordinatorResponse, src: object) -> None:
        entry = self._verifying.pop(resp.request_id, None)
        if entry is None:
            return
        req, guard, timer = entry
        timer.cancel()
        assert req.producer_id is not None
        if resp.error is None and self._guards.get(req.producer_id) == guard:
            self._append_produce(req)
            return
        error = resp.error or "INVALID_TXN_STATE"
        self.ctx.log_event("replica", f"broker {self.broker_id}: transaction verification "
                           f"rejects produce from {req.client} (producer {req.producer_id} "
                           f"epoch {req.producer_epoch}): {error}")
        self._answer_produce(req, ProduceResponse(req.request_id, error))

    def _clear_transactional(self) -> None:
        for _, _, timer in self._verifying.values():
            timer.cancel()
        self._verifying.clear()
        self._guards.clear()
        if self._plane is not None:
            self._plane.clear_markers(self.broker_id)
            return
        for _, _, timer, _ in self._parked_markers:
            timer.cancel()
        self._parked_markers.clear()

    def on_write_txn_markers(self, req: WriteTxnMarkersRequest, src: object) -> None:
        """Append a COMMIT/ABORT marker; answer when the HW covers it (acks=all)."""
        resp = self.replica.handle_write_txn_markers(req, self.ctx.now_ms)
        self._drain_events()
        self._guards.pop(req.producer_id, None)
        if resp.error is not None:
            self.ctx.post(self.broker_id, "coordinator", "on_write_txn_markers_response", resp)
            return
        assert resp.offset is not None
        self._answer_parked_fetches()
        if self._plane is not None:  # the produce engine's purgatory (src/sim/produce.rs)
            self._plane.park_marker(self.broker_id, req, resp.offset, str(src), MARKER_TIMEOUT_MS)
        else:
            inc = self.incarnation
            timer = self.ctx.kernel.schedule(
                MARKER_TIMEOUT_MS, lambda: self._if_alive(inc, lambda: self._expire_marker(req)))
            self._parked_markers.append((resp.offset + 1, req, timer, str(src)))
        self._try_complete_delayed()

    def _expire_marker(self, req: WriteTxnMarkersRequest) -> None:
        for i, (_, parked, _timer, dst) in enumerate(self._parked_markers):
            if parked is req:
                del self._parked_markers[i]
                self.ctx.post(self.broker_id, dst, "on_write_txn_markers_response",
                              WriteTxnMarkersResponse(req.request_id, "REQUEST_TIMED_OUT"))
                return

    def _answer_parked_markers(self, force_error: str | None) -> None:
        if self._plane is not None:
            self._plane.answer_parked_markers(self.broker_id, force_error)
            return
        waiting = []
        for entry in self._parked_markers:
            required, req, timer, dst = entry
            done, error = (True, force_error) if force_error else self.replica.produce_completion(required)
            if not done:
                waiting.append(entry)
                continue
            timer.cancel()
            offset = required - 1 if error is None else None
            self.ctx.post(self.broker_id, dst, "on_write_txn_markers_response",
                          WriteTxnMarkersResponse(req.request_id, error, offset))
        self._parked_markers = waiting

    def _append_produce(self, req: ProduceRequest) -> None:
        if self._plane is not None:
            self._plane.append_produce(self.broker_id, req)
            return
        resp = self.replica.handle_produce(req, self.ctx.now_ms)
        self._drain_events()
        if resp.error is None and not resp.duplicate:
            self._answer_parked_fetches()
        if req.acks == "0":
            self._answer_produce(req, None)
            self._try_complete_delayed()
            return
        if req.acks == "1" or resp.error is not None:
            self._answer_produce(req, resp)
            self._try_complete_delayed()
            return
        assert resp.last_offset is not None
        inc = self.incarnation
        timer = self.ctx.kernel.schedule(
            req.timeout_ms, lambda: self._if_alive(inc, lambda: self._expire_produce(req)))
        self._parked_produces.append((resp.last_offset + 1, req, timer, resp))
        self._try_complete_delayed()

    def _expire_produce(self, req: ProduceRequest) -> None:
        for i, (_, parked, _timer, _resp) in enumerate(self._parked_produces):
            if parked is req:
                del self._parked_produces[i]
                self._answer_produce(req, ProduceResponse(req.request_id, "REQUEST_TIMED_OUT"))
                return

    def _try_complete_delayed(self) -> None:
        """Complete what the purgatories hold that can now complete (after anything that may
        move the HW or change the replica's role: ``Partition.tryCompleteDelayedRequests``)."""
        if self._plane is not None:
            self._plane.try_complete_delayed(self.broker_id)
            return
        if self._parked_produces:  # (each purgatory is usually empty: no call then)
            self._answer_parked_produces(force_error=None)
        if self._parked_markers:
            self._answer_parked_markers(force_error=None)
        if self._parked_reads:
            self._check_parked_reads()
        self._note_state()

    def has_parked_produces(self) -> bool:
        """Whether a produce request waits in the purgatory."""
        if self._plane is not None:
            return bool(self._plane.parked_produces(self.broker_id))
        return bool(self._parked_produces)

    def _forget_parked_produces(self) -> None:
        """A crash: the purgatory's produce requests are gone (their timers find a dead
        incarnation)."""
        if self._plane is not None:
            self._plane.forget_produces(self.broker_id)
        else:
            self._parked_produces.clear()

    def _answer_parked_produces(self, force_error: str | None) -> None:
        if self._plane is not None:
            self._plane.answer_parked_produces(self.broker_id, force_error)
            return
        waiting: list[tuple[int, ProduceRequest, Timer, ProduceResponse]] = []
        for entry in self._parked_produces:
            required, req, timer, ok = entry
            done, error = (True, force_error) if force_error else self.replica.produce_completion(required)
            if not done:
                waiting.append(entry)
                continue
            timer.cancel()
            resp = ok if error is None else ProduceResponse(req.request_id, error)
            self._answer_produce(req, resp)
        self._parked_produces = waiting
