"""The controller: failure detection, elections, ISR changes, epochs (``docs/core-semantics.md``
rules 1.7, 1.9, 1.10) for the one simulated partition, plus the coordinators clients need.

* Failure detection: a broker is declared dead ``session_timeout_ms`` after its last
  heartbeat (KRaft from Kafka 4.0: at the controller's first periodic check after that, every
  ``session_timeout_ms / 8``; :meth:`Controller._expiry_seen_ms`). In every generation a new
  incarnation cannot register while the old session lives (ZooKeeper: the old session's
  ephemeral ``/brokers/ids/<id>``; before 2.2 ``ZKCheckedEphemeral`` / ``registerBrokerInZk``
  fail the start "... restarted it faster than the zookeeper timeout", from 2.2
  ``KafkaZkClient.registerBroker``; KRaft: DuplicateBrokerRegistrationException): the
  failure is handled when the session expires, then the restarted broker registers. Before 2.2 (G0-G2) the controller learns of the expiry
  from a child watch and reads ``/brokers/ids`` a moment later (a ``controller_delay_ms``
  draw); a restarted broker that registers in between is taken for the same broker, and the
  bounce is missed (ZooKeeper's "ABA" re-registration, 1.10, which KIP-380's broker epochs
  fixed in 2.2): no failure handling, no state for the new process. ZooKeeper-era
  heartbeats (session pings) carry no partition state in G0-G2: a broker gets LeaderAndIsr
  when the controller sees it start and on every partition change. From 2.2 the states list
  the registered incarnations (``LeaderAndIsr.brokers``) and a broker applies only those
  addressed to its own.
* Elections (1.9): clean = first live ISR replica in assignment order; else ELR (KIP-966, G5
  with ``eligible_leader_replicas_enable``); else unclean if enabled (ISR := [leader]); else
  OFFLINE, with the unavailable time recorded. The leader epoch is bumped on every leader
  change; controller-initiated ISR removals bump it too in G0-G4 (ZK ``newLeaderAndIsr``) but
  only the partition epoch in G5; a size-1 ISR is never shrunk (ZK rule; KRaft keeps the last
  member as well unless ELR is enabled).
* AlterPartition (1.7) is validated by leader epoch and partition epoch; in the ZooKeeper
  generations a retry whose ISR is already committed is answered with the current state
  (idempotent resend). G5 validates as ``ReplicationControlManager.validateAlterPartitionData``
  does: a stale partition epoch is INVALID_UPDATE_VERSION, and every member of the new ISR must
  be registered, unfenced, not in controlled shutdown and, where the leader sent one, carry its
  registration's broker epoch (``ineligibleReplicasForIsr``, KIP-903), else INELIGIBLE_REPLICA.
* G5 brokers learn the metadata image of the brokers (epoch, fenced, shutting down) with every
  state they receive (:meth:`Controller.state`), versioned by ``metadata_version``.
* Decisions go out as :class:`LeaderAndIsr` messages through the network (delayable,
  droppable); every heartbeat answer carries the current state too, so brokers converge.

* Controller failover (:meth:`Controller.failover`, the ``controller_failover`` step): a new
  controller takes over with the next controller epoch. ZooKeeper era: it reads the state from
  ZooKeeper and sends every live replica a LeaderAndIsr (``KafkaController.onControllerFailover``
  -> ``ReplicaStateMachine.startup``, OnlineReplica), elects if the partition has no live
  leader (``PartitionStateMachine.startup``), and brokers from then on ignore requests of an
  older controller epoch (``ReplicaManager.becomeLeaderOrFollower``: STALE_CONTROLLER_EPOCH), so
  what the deposed one still had on its way is fenced once the new one was heard. A broker
  failure the deposed controller had already been told of but not yet handled (G0-G2's watch
  delay) is handled by it after all, as a zombie: it reads the partition state, aborts if a
  newer controller wrote it ("went through a soft failure", ``removeReplicaFromIsr``), else
  writes it, which before 2.1 nothing fences (the write is conditional on the partition's
  zkVersion only; KAFKA-6082 added the check of ``/controller_epoch``'s zkVersion), and sends
  the result in its old controller epoch. A leader that never hears of that write fails every
  ISR update of its own ("Cached zkVersion ... skip updating ISR", KAFKA-3083 / KAFKA-6082).
  KRaft (G5): the new active controller starts every registered broker's session afresh
  (``ClusterControlManager.activate`` -> ``BrokerHeartbeatManager.register`` -> ``touch``); the
  metadata log itself carries over, so nothing is stale.
* The KRaft metadata log's append linger (G5): the active controller applies a decision to its
  own state at once, but a record reaches the brokers, and the request that caused it is
  answered, only when the record is committed. Records go into a batch that is written
  ``controller.quorum.append.linger.ms`` (default 25) after the batch's first record
  (raft ``BatchAccumulator.append`` -> ``maybeResetLinger``: the timer starts only when none runs;
  ``QuorumConfig.DEFAULT_QUORUM_LINGER_MS``), so every record appended meanwhile goes out with
  it; a request that wrote nothing is still answered only after the records before it commit
  (``QuorumController.ControllerWriteEvent.run``: with no records it waits for
  ``deferredEventQueue.highestPendingOffset()``). The model publishes the state at the batch's
  end (:meth:`Controller._drain`); the quorum's own fsync and replication add nothing here (one
  voter, as on the live cluster).

Simplifications: the controller is one node that is never down (failover is a step, not a
crash); the new controller's view of the partition is ZooKeeper's at every moment (a real one
caches what it read at failover until it next reads or writes); it hands out
producer ids (to idempotent producers directly, to the transaction coordinator
:mod:`epochlab.sim.coordinator` for transactional ones) and acts as group coordinator (committed
offsets), kept durably; the metadata clients fetch is the controller's last published state
(KRaft: the state as of the last committed batch). A KRaft controller failover first commits
the batch in progress (a real failover would drop what was not yet committed and revert the
controller's state to the last committed offset, ``QuorumController.renounce``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from epochlab.generations import Generation
from epochlab.sim.config import ClusterConfig
from epochlab.sim.kernel import Timer
from epochlab.sim.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeat,
    ControlledShutdownRequest,
    LeaderAndIsr,
)

if TYPE_CHECKING:
    from epochlab.sim.context import SimContext

__all__ = ["Controller"]


class Controller:
    """The partition's metadata authority; node name ``"controller"``."""

    #: its events change what the state checker reads (``Kernel``: quiet events); stated, not
    #: left to the default, since a post to a node without the attribute pays for the failed
    #: look-up (an AttributeError made and dropped: ~3% of a fuzz run, decc6ec)
    QUIET = False

    def __init__(self, ctx: SimContext, config: ClusterConfig, generation: Generation) -> None:
        self.ctx = ctx
        self.config = config
        self.generation = generation
        self.replicas: tuple[int, ...] = config.replicas or ()
        unclean = config.unclean_leader_election_enable
        self.unclean_enabled = generation.unclean_default if unclean is None else unclean
        elr = config.eligible_leader_replicas_enable
        self.elr_enabled = generation.kraft and (generation.elr_default if elr is None else elr)
        self.leader: int | None = self.replicas[0]
        self.leader_epoch = 0
        self.partition_epoch = 0
        self.isr: tuple[int, ...] = self.replicas
        self.elr: tuple[int, ...] = ()
        # KIP-966 last known leader (``PartitionRegistration.lastKnownElr``): with ELR on, the
        # leader the partition had when it first became leaderless
        self.last_known_leader: int | None = None
        self.last_known_epochs: set[int] = set()  # leader epochs begun by such an election
        self.live: dict[int, bool] = {b: True for b in config.brokers}
        self.incarnation: dict[int, int] = {b: 1 for b in config.brokers}
        self.shutting_down: set[int] = set()
        self.unclean_shutdown: set[int] = set()
        self._session_timers: dict[int, Timer] = {}
        self._refused: set[int] = set()   # restarted brokers whose registration waits
        # KRaft: restarted brokers registered but fenced until they are ready (their session
        # valid: ``BrokerHeartbeatTracker`` times fenced brokers' heartbeats too)
        self._unready: set[int] = set()
        self._informed: dict[int, int] = {}   # G0-G2: incarnation each broker was sent the state
        self._unnoticed: set[int] = set()     # G0-G2: brokers whose restart the controller missed
        self._expiring: set[int] = set()      # G0-G2: session gone, controller not yet told
        self._reregistered: set[int] = set()  # G0-G2: registered again inside that window
        self.metadata_version = 0
        # the active controller's epoch (ZooKeeper /controller_epoch; KRaft: the quorum's), and
        # the epoch of the controller that wrote the partition state
        # (``LeaderIsrAndControllerEpoch.controllerEpoch``); Kafka's first controller has epoch 1
        self.controller_epoch = 1
        self.state_controller_epoch = 1
        self._sending_epoch: int | None = None  # a deposed controller at work (zombie)
        self._zombie: dict[int, int] = {}       # G0-G2: broker -> epoch of the deposed controller
        self.offline_since_ms: int | None = None
        self.unavailable_ms = 0
        self.elections: list[tuple[int, int, int, bool]] = []  # (time, epoch, leader, unclean)
        self.next_producer_id = 1000
        self.transactional_ids: dict[str, tuple[int, int]] = {}
        # group -> (offset, leader epoch of the last consumed record): OffsetCommit v7+ (2.3+)
        self.committed_offsets: dict[str, tuple[int, int | None]] = {}
        # KRaft: the metadata batch lingering before its write (None: nothing uncommitted),
        # whether it changes the partition state, the answers waiting for it, and the
        # partition state as last committed (what brokers, and so clients, know)
        self._linger_ms = config.controller_quorum_append_linger_ms if generation.kraft else 0
        self._batch: Timer | None = None
        self._broadcast_due = False
        self._waiting: list[Callable[[], None]] = []
        self._published = self._partition_state()
        # KRaft from Kafka 4.0: stale sessions are found by a periodic task
        # (QuorumController.registerMaybeFenceStaleBroker, every session timeout / 8), not at
        # each session's deadline. The active controller started it when it took over, at a
        # time this run does not know: its phase is drawn from a stream of its own.
        release = config.release
        self._fence_period_ms = max(1, config.session_timeout_ms // 8) \
            if generation.kraft and (release is None or release >= (4, 0, 0)) else None
        self._fence_phase_ms = 0 if self._fence_period_ms is None else \
            ctx.kernel.rng("controller-fence-check").randrange(self._fence_period_ms)
        for b in config.brokers:
            self._arm_session(b)

    # -- state and delivery -----------------------------------------------------------------
    def state(self) -> LeaderAndIsr:
        brokers: tuple[tuple[int, int, bool], ...] = ()
        if self.generation.broker_epochs:
            # KRaft: the metadata image of the brokers. ZooKeeper era from 2.2 (KIP-380): the
            # broker epochs the controller's requests carry (a broker rejects a request for
            # another registration: KafkaApis.isBrokerEpochStale, STALE_BROKER_EPOCH).
            brokers = tuple((b, self.incarnation[b], b in self.shutting_down)
                            for b in sorted(self.live) if self.live[b])
        epoch = self.controller_epoch if self._sending_epoch is None else self._sending_epoch
        fenced = tuple((b, self.incarnation[b]) for b in sorted(self.live) if not self.live[b]) \
            if self.generation.kraft else ()
        return LeaderAndIsr(self.leader, self.leader_epoch, self.isr, self.partition_epoch,
                            self.replicas, brokers, self.metadata_version, epoch, fenced)

    def _metadata_changed(self, broadcast: bool = True) -> None:
        """A new metadata record (partition change, broker registration or fencing). KRaft
        brokers follow the metadata log continuously, so in G5 every change reaches them as
        soon as its batch commits (``broadcast``; a partition change broadcasts itself in
        :meth:`_commit`)."""
        self._append()
        self.metadata_version += 1
        if broadcast and self.generation.kraft:
            self._publish()

    def _append(self) -> None:
        """A record goes into the metadata log's open batch, or opens one that is written
        ``controller.quorum.append.linger.ms`` from now (see the module docstring)."""
        if self._linger_ms and self._batch is None:
            self._published = self._partition_state()
            self._batch = self.ctx.kernel.schedule(self._linger_ms, self._drain)

    def _partition_state(self) -> tuple[int | None, int, tuple[int, ...], int, tuple[int, ...]]:
        return self.leader, self.leader_epoch, self.isr, self.partition_epoch, self.elr

    def published(self) -> tuple[int | None, int, tuple[int, ...], int, tuple[int, ...]]:
        """The partition as the brokers, and so clients and operators, know it: leader,
        leader epoch, ISR, partition epoch and ELR as of the last committed metadata batch
        (KRaft with a linger; otherwise the controller's current state)."""
        return self._published if self._batch is not None else self._partition_state()

    def _publish(self) -> None:
        """The partition state to the replicas, once what was appended is committed."""
        if self._batch is not None:
            self._broadcast_due = True
        else:
            self._broadcast()

    def _answer(self, send: Callable[[], None]) -> None:
        """Answer a request once every record appended before its answer is committed."""
        if self._batch is not None:
            self._waiting.append(send)
        else:
            send()

    def _drain(self) -> None:
        """The lingering batch is written and committed: brokers see the state it ends in,
        and the requests waiting for it are answered, in arrival order."""
        self._batch = None
        self._published = self._partition_state()
        if self._broadcast_due:
            self._broadcast_due = False
            self._broadcast()
        waiting, self._waiting = self._waiting, []
        for send in waiting:
            send()

    def _send_state(self, broker: int, msg: LeaderAndIsr) -> None:
        """The partition state to one broker. A KRaft broker that was cut off from the
        controller catches up on the metadata log in one delta and sees only the newest state
        (``MetadataLoader.handleCommit``): held states coalesce. A ZooKeeper-era controller
        resends each queued LeaderAndIsr until delivered (``ControllerChannelManager``)."""
        self.ctx.post("controller", broker, "on_leader_and_isr", msg,
                      coalesce="metadata" if self.generation.kraft else None)

    def _broadcast(self) -> None:
        """The new state to the replicas. Before 2.2 only to the brokers the controller counts
        live (``ControllerChannelManager`` has a queue per live broker; a broker whose session
        expired gets its state when it registers again, ``onBrokerStartup``); from 2.2 the
        states carry the registered incarnations and a broker applies only its own's."""
        msg = self.state()
        for r in self.replicas:
            if self.generation.broker_epochs or self.live.get(r):
                self._send_state(r, msg)

    def _order(self, members: set[int] | tuple[int, ...]) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r in set(members))

    def _commit(self, leader: int | None, isr: tuple[int, ...], why: str,
                unclean: bool = False, bump_epoch: bool = False, by_leader: bool = False) -> None:
        """Install a new partition state: the leader epoch bumps on a leader change (or when
        ``bump_epoch``), the partition epoch always; offline time is accounted. Before AlterIsr
        (G0-G3) a leader writes its ISR changes to ZooKeeper itself (``by_leader``), keeping the
        controller epoch of the decision that made it leader (``Partition.updateIsr`` writes
        the partition's ``controllerEpoch``)."""
        now = self.ctx.now_ms
        self._append()
        if leader != self.leader or bump_epoch:
            self.leader_epoch += 1
        old_isr, old_leader = self.isr, self.leader
        self.leader, self.isr = leader, isr
        self.partition_epoch += 1
        if not (by_leader and self.generation < Generation.DIVERGING_EPOCH):
            self.state_controller_epoch = self.controller_epoch if self._sending_epoch is None \
                else self._sending_epoch
        self._metadata_changed(broadcast=False)
        self.unclean_shutdown -= set(isr)
        self._update_elr(old_isr)
        self._update_last_known_leader(old_leader)
        if leader is None and self.offline_since_ms is None:
            self.offline_since_ms = now
            self.ctx.log_event("offline", f"partition OFFLINE: no eligible leader ({why})")
        elif leader is not None and self.offline_since_ms is not None:
            self.unavailable_ms += now - self.offline_since_ms
            self.offline_since_ms = None
        if leader is not None and (not self.elections or self.elections[-1][2] != leader
                                   or self.elections[-1][1] != self.leader_epoch):
            self.elections.append((now, self.leader_epoch, leader, unclean))
        self.ctx.log_event(
            "election" if why.startswith("elect") or unclean else "controller",
            f"controller: {why}: leader {leader} epoch {self.leader_epoch} ISR {list(isr)} "
            f"partition epoch {self.partition_epoch}" + (" (UNCLEAN)" if unclean else ""))
        self._publish()

    def _update_elr(self, old_isr: tuple[int, ...]) -> None:
        """KIP-966 ``maybePopulateTargetElr`` (1.9), only with ELR enabled."""
        if not self.elr_enabled:
            return
        # PartitionChangeBuilder.maybePopulateTargetElr compares with the topic's effective
        # min ISR, min(min.insync.replicas, replication factor).
        if len(self.isr) >= min(self.config.min_insync_replicas, len(self.replicas)):
            self.elr = ()
        else:
            members = (set(self.elr) | set(old_isr)) - set(self.isr) - self.unclean_shutdown
            self.elr = self._order(members)

    def _update_last_known_leader(self, old_leader: int | None) -> None:
        """``PartitionChangeBuilder.maybeUpdateLastKnownLeader`` (Kafka 4.x, with
        ``useLastKnownLeaderInBalancedRecovery``, which no release turns off): remember the
        leader the first time the partition becomes leaderless, forget it once it has one."""
        if not self.elr_enabled:
            return
        if self.leader is None and self.last_known_leader is None:
            self.last_known_leader = old_leader
        elif self.leader is not None:
            self.last_known_leader = None

    # -- failure detection ------------------------------------------------------------------
    def _arm_session(self, broker: int, since_ms: int | None = None) -> None:
        """(Re)start ``broker``'s session from its heartbeat at ``since_ms`` (default now)."""
        old = self._session_timers.get(broker)
        if old is not None:
            old.cancel()
        since = self.ctx.now_ms if since_ms is None else since_ms
        self._session_timers[broker] = self.ctx.kernel.schedule_at(
            self._expiry_seen_ms(since + self.config.session_timeout_ms),
            lambda: self._session_expired(broker))

    def _expiry_seen_ms(self, deadline_ms: int) -> int:
        """When the controller acts on a session that ends at ``deadline_ms`` (expired once
        the deadline has passed: ``BrokerHeartbeatTracker.isExpired``, ``timeNs +
        sessionTimeoutNs < nowNs``). ZooKeeper and KRaft before 4.0: at once (a deferred event
        at the oldest session's deadline, ``QuorumController.rescheduleMaybeFenceStaleBrokers``).
        KRaft 4.0+: at the first run of the periodic ``maybeFenceStaleBroker`` task after it;
        that run fences one broker and runs again at once while it finds more
        (``ReplicationControlManager.maybeFenceOneStaleBroker`` answers true), so brokers stale
        together are fenced together. A broker cut off at once is so fenced 4.0-6.75 s later
        with Kafka's 6 s session and 2 s heartbeats, not 4-6 s."""
        if self._fence_period_ms is None:
            return deadline_ms + 1
        period = self._fence_period_ms
        return self._fence_phase_ms + ((deadline_ms - self._fence_phase_ms) // period + 1) * period

    def take_established(self, phases: dict[int, int]) -> None:
        """The run begins on brokers registered long before (``ClusterConfig.established``):
        each one's session runs from its last heartbeat, one interval before the first of its
        phase (``phases``: broker -> that first heartbeat's time), and the partition, created
        as the run begins, reaches every replica now."""
        interval = self.config.heartbeat_interval_ms
        for b, phase in sorted(phases.items()):
            self._arm_session(b, phase - interval)
            self._informed[b] = self.incarnation[b]
        self._broadcast()

    def _session_expired(self, broker: int) -> None:
        if self.live.get(broker) and not self.generation.broker_epochs and broker not in self._expiring:
            # ZooKeeper before 2.2: the session's ephemeral /brokers/ids/<id> is deleted now;
            # the controller learns it from a child watch and reads the children a moment
            # later (KafkaController's BrokerChange handling). A restarted broker that
            # registers in between is seen as the same broker: the bounce is missed (the
            # "ABA" restart KIP-380 describes).
            self._expiring.add(broker)
            delay = self.ctx.kernel.rng(f"zk-watch-{broker}").randint(*self.config.controller_delay_ms)
            self.ctx.kernel.schedule(delay, lambda: self._broker_change(broker))
            return
        self._fail_broker(broker)

    def on_session_closed(self, msg: tuple[int, int], src: object) -> None:
        """A ZooKeeper-era broker closed its session when it shut down: its registration goes
        at once (the controller then handles it as a failure, after the watch delay in G0-G2),
        so its restart registers as a new start instead of waiting out a session timeout."""
        broker, incarnation = msg
        if self.incarnation.get(broker) != incarnation:
            return
        timer = self._session_timers.pop(broker, None)
        if timer is not None:
            timer.cancel()
        self._session_expired(broker)

    def _broker_change(self, broker: int) -> None:
        """G0-G2: the controller reads /brokers/ids after the session of ``broker`` expired."""
        if broker not in self._expiring:
            return
        self._expiring.discard(broker)
        deposed = self._zombie.pop(broker, None)
        if deposed is not None:
            self._zombie_broker_failure(broker, deposed)
            return
        if broker in self._reregistered:
            self._reregistered.discard(broker)
            self.ctx.log_event("controller", f"controller: broker {broker}'s session expired but it "
                               "registered again before the controller read /brokers/ids: the bounce "
                               "is missed (ZooKeeper ABA, KIP-380)")
            self._arm_session(broker)
            return
        self._fail_broker(broker)

    def _fail_broker(self, broker: int) -> None:
        # a fenced registration whose session ended: nothing to fence, and a new incarnation
        # may register (hasValidSession is false now)
        self._unready.discard(broker)
        if self.live.get(broker):
            self.ctx.log_event("controller", f"controller: broker {broker} session expired")
            if not self.generation.kraft:
                # onBrokerFailure -> ControllerChannelManager.removeBroker: the request queue
                # of the dead broker and its send thread go; what it had not delivered (held
                # by a partition) is never sent. The broker gets the current state when it
                # registers again (onBrokerStartup).
                self.ctx.network.discard_held("controller", broker)
            self.live[broker] = False
            self._unnoticed.discard(broker)
            self._informed.pop(broker, None)
            self._metadata_changed()
            self._handle_broker_failure(broker)

    def on_heartbeat(self, hb: BrokerHeartbeat, src: object) -> None:
        """Liveness, (re-)registration, and the current state back to the broker."""
        b = hb.broker_id
        if b not in self.live:
            return
        known = self.incarnation.get(b)
        if not self.generation.broker_epochs and b in self._expiring and b not in self._zombie \
                and known != hb.incarnation:
            # G0-G2: registered while the controller had not yet read the old session's
            # deletion: it will find the same id (_broker_change) and miss the bounce
            self.incarnation[b] = hb.incarnation
            self._unnoticed.add(b)
            self._reregistered.add(b)
            self._refused.discard(b)
            self.ctx.log_event("controller", f"controller: broker {b} registered again right after "
                               "its old session expired")
            return
        if (self.live[b] or b in self._unready) and known != hb.incarnation:
            # A new incarnation cannot register while the old one's session is valid, fenced or
            # not. KRaft: ClusterControlManager.registerBroker, DuplicateBrokerRegistrationException
            # (BrokerHeartbeatManager.hasValidSession).
            # ZooKeeper: /brokers/ids/<id> is an ephemeral node of the old session, and
            # KafkaZkClient.registerBroker (checkedEphemeralCreate) fails on it; the broker
            # starts again after the session expired (_session_expired), so the controller
            # handles the failure first (onBrokerFailure), then the startup.
            # Before 2.2 the registration fails the same way (ZKCheckedEphemeral, later
            # KafkaZkClient.registerBrokerInZk: "... or else you have shutdown this broker and
            # restarted it faster than the zookeeper timeout so it appears to be
            # re-registering") and the process exits; the model keeps it retrying, as a
            # supervisor restarting it would.
            if b not in self._refused:
                self._refused.add(b)
                why = "DuplicateBrokerRegistration" if self.generation.kraft else \
                    "its ZooKeeper registration of the old session still exists"
                self.ctx.log_event("controller", f"controller: broker {b} restarted; its "
                                   f"registration waits for the old session to expire ({why})")
            if self.generation.kraft:
                # a KRaft broker reads the metadata log as an observer of the quorum whether
                # registered or not: the state reaches it (and, unregistered, it follows the
                # leader named there: Broker.on_leader_and_isr)
                self._answer(lambda: self._send_state(b, self.state()))
            return
        self._refused.discard(b)
        if known != hb.incarnation or not (self.live[b] or b in self._unready):
            self._register(b, hb)
        elif b in self._unready and not hb.want_fence:
            self._unfence(b)
        self._arm_session(b)
        if self.generation.broker_epochs:
            self._answer(lambda: self._send_state(b, self.state()))
            return
        # ZooKeeper era before 2.2: a session ping carries no partition state. The controller
        # sends LeaderAndIsr on its own events only: a broker it saw start
        # (``KafkaController.onBrokerStartup``) and every partition change it makes. A bounce
        # it missed (ABA) leaves the new process without any partition state, leading and
        # following nothing, until the controller next changes the partition
        # (``ReplicaManager.becomeLeaderOrFollower`` is the only way to a role).
        if b not in self._unnoticed and self._informed.get(b) != hb.incarnation:
            self._informed[b] = hb.incarnation
            self._send_state(b, self.state())

    def _register(self, b: int, hb: BrokerHeartbeat) -> None:
        """A registration (a new incarnation, or a broker whose session had expired). KRaft:
        a broker still starting asks to stay fenced (``wantFence``): it is registered fenced
        (``ClusterControlManager.registerBroker`` writes a fenced ``RegisterBrokerRecord``)
        and unfenced by its first heartbeat that no longer asks it (:meth:`_unfence`)."""
        self.incarnation[b] = hb.incarnation
        self.shutting_down.discard(b)
        if not hb.clean_shutdown and self.elr_enabled and b in self.elr:
            self.unclean_shutdown.add(b)
            self.elr = tuple(r for r in self.elr if r != b)
        if self.generation.kraft and hb.want_fence:
            self._unready.add(b)
            self.ctx.log_event("controller", f"controller: broker {b} registered, fenced until "
                               "it is ready")
            self._metadata_changed()
            return
        self._unfence(b)

    def _unfence(self, b: int) -> None:
        """Let ``b`` in: it may now lead, join the ISR and serve (KRaft:
        ``ReplicationControlManager.handleBrokerUnfenced`` elects a leader for a partition that
        has none)."""
        was_unready = b in self._unready
        self._unready.discard(b)
        if not self.live[b]:
            self.live[b] = True
            self.ctx.log_event("controller", f"controller: broker {b} "
                               + ("unfenced" if was_unready else "registered"))
        self._metadata_changed()
        if self.leader is None:
            self._elect("elect after broker registration")

    def _handle_broker_failure(self, b: int) -> None:
        """``onBrokerFailure`` / broker fenced: re-elect if it led, else shrink the ISR."""
        if b not in self.replicas:
            return
        if self.leader == b:
            self._elect(f"elect after leader {b} failed", failed=b)
        elif b in self.isr:
            self._shrink(b, f"broker {b} removed from ISR")

    def _shrink(self, b: int, why: str) -> None:
        new_isr = tuple(r for r in self.isr if r != b)
        if not new_isr and not self.elr_enabled:
            return  # never shrink a size-1 ISR
        self._commit(self.leader, new_isr, why, bump_epoch=not self.generation.kraft)

    # -- controller failover ----------------------------------------------------------------
    def failover(self) -> None:
        """A new controller takes over, one controller epoch up (see the module docstring)."""
        if self._batch is not None:
            self._batch.cancel()
            self._drain()
        deposed = self.controller_epoch
        self.controller_epoch += 1
        self._metadata_changed(broadcast=False)
        self.ctx.log_event("controller", f"controller failover: controller epoch {deposed} -> "
                           f"{self.controller_epoch}")
        if self.generation.kraft:
            # ClusterControlManager.activate: a fresh BrokerHeartbeatManager registers (touches)
            # every registered broker now, so a dead one is fenced a session timeout from here;
            # the new controller's periodic tasks start now (PeriodicTaskControlManager.activate)
            if self._fence_period_ms is not None:
                self._fence_phase_ms = self.ctx.now_ms % self._fence_period_ms
            for b in sorted(self.live):
                if self.live[b] or b in self._unready:
                    self._arm_session(b)
            return
        # ZooKeeper: the old controller's send queues stop with it (ControllerChannelManager);
        # what it already sent is still on its way
        for b in self.replicas:
            self.ctx.network.discard_held("controller", b)
        # G0-G2: sessions that expired while the deposed controller had not yet read
        # /brokers/ids. It still handles them (its queued event); the new one reads the
        # children now: a broker registered again is live for it, the others are gone.
        for b in sorted(self._expiring):
            if b in self._reregistered:
                self._reregistered.discard(b)
                self._expiring.discard(b)
                self._unnoticed.discard(b)
            else:
                self._zombie.setdefault(b, deposed)  # the event stays the first deposed one's
                self.live[b] = False
                self._informed.pop(b, None)
        self._unnoticed.clear()  # the new controller sends every live replica its state
        msg = self.state()
        for r in self.replicas:
            if self.live.get(r):
                self._informed[r] = self.incarnation[r]
                self._send_state(r, msg)
        if self.leader is None or not self.live.get(self.leader):
            self._elect("elect after controller failover", failed=self.leader)

    def _zombie_broker_failure(self, broker: int, deposed: int) -> None:
        """A deposed controller handles a broker failure it was told of before it lost its
        session (G0-G2; KafkaController.onBrokerFailure -> removeReplicaFromIsr / the
        offline-partition election, which read the partition state from ZooKeeper first)."""
        who = f"deposed controller (controller epoch {deposed})"
        if self.live.get(broker):
            # it reads /brokers/ids and finds the broker registered again: no change for it
            return
        if self.state_controller_epoch > deposed:
            self.ctx.log_event("controller", f"{who} aborts handling broker {broker}'s failure: the "
                               f"partition state was written by controller epoch "
                               f"{self.state_controller_epoch} (a soft failure)")
            return
        # Only G0-G2 have the watch delay, and none of their releases has KAFKA-6082's fix
        # (2.1.0: every controller write checks /controller_epoch's zkVersion, and a deposed
        # controller's fails with ControllerMovedException), so the write lands.
        self.ctx.log_event("controller", f"{who} handles broker {broker}'s failure and writes the "
                           "partition state: nothing fences its write before 2.1 (KAFKA-6082)")
        self._sending_epoch = deposed
        try:
            self._handle_broker_failure(broker)
        finally:
            self._sending_epoch = None

    # -- elections --------------------------------------------------------------------------
    def _eligible(self, r: int) -> bool:
        return self.live.get(r, False) and r not in self.shutting_down

    def _elect(self, why: str, failed: int | None = None) -> None:
        """Offline-partition election (1.9): live ISR first, then ELR, then unclean."""
        live_isr = tuple(r for r in self.isr if self._eligible(r))
        for r in self.replicas:
            if r in live_isr:
                self._commit(r, self._order(live_isr), why)
                return
        for r in self.elr:
            if self._eligible(r):
                self.elr = tuple(x for x in self.elr if x != r)
                self._commit(r, (r,), why + " from ELR")
                return
        last = self.last_known_leader
        if self.elr_enabled and not live_isr and not self.elr and last is not None \
                and self._eligible(last):
            # PartitionChangeBuilder.canElectLastKnownLeader: ISR and ELR empty, the last
            # known leader is registered and not shutting down: elected as an unclean
            # election (ISR := [leader], RECOVERING), whatever unclean.leader.election.enable
            # says; only what that leader lost in an unclean shutdown can be lost.
            self._commit(last, (last,), why + " (last known leader)", unclean=True)
            self.last_known_epochs.add(self.leader_epoch)
            return
        if self.unclean_enabled:
            for r in self.replicas:
                if self._eligible(r):
                    self.elr = ()
                    self._commit(r, (r,), why, unclean=True)
                    return
        if self.leader is None:
            return
        keep = tuple(r for r in self.isr if r != failed) or (self.isr if not self.elr_enabled else ())
        self._commit(None, keep, why)

    def elect_preferred_leader(self) -> bool:
        """Preferred election: ``replicas[0]`` if live, in ISR and not leading already."""
        first = self.replicas[0]
        if self.leader == first or first not in self.isr or not self._eligible(first):
            return False
        self._commit(first, self.isr, "elect preferred leader")
        return True

    def elect(self, broker: int, unclean: bool = False) -> bool:
        """Operator-forced election of ``broker``: allowed if live and in the ISR, or with
        ``unclean`` (then ISR := [broker]). Returns whether it happened."""
        if broker not in self.replicas or not self._eligible(broker) or broker == self.leader:
            return False
        if broker in self.isr:
            self._commit(broker, self.isr, f"elect {broker} (operator)")
            return True
        if not unclean:
            return False
        self.elr = ()
        self._commit(broker, (broker,), f"elect {broker} (operator, unclean)", unclean=True)
        return True

    def on_controlled_shutdown(self, req: ControlledShutdownRequest, src: object) -> None:
        """Move leadership to another live ISR member, drop the broker from a larger ISR
        (1.9), answer with the new state; the broker then stops."""
        b = req.broker_id
        if not self.live.get(b) or self.incarnation.get(b) != req.incarnation:
            return
        self.shutting_down.add(b)
        self._metadata_changed()
        if self.leader == b:
            candidates = [r for r in self.replicas if r in self.isr and self._eligible(r)]
            if candidates:
                isr = tuple(r for r in self.isr if r != b)
                self._commit(candidates[0], isr, f"elect after controlled shutdown of {b}")
        elif b in self.isr and len(self.isr) > 1:
            self._shrink(b, f"broker {b} removed from ISR (controlled shutdown)")
        self._answer(lambda: self.ctx.post("controller", b, "on_controlled_shutdown_response",
                                           self.state()))

    # -- AlterPartition ---------------------------------------------------------------------
    def _ineligible(self, req: AlterPartitionRequest) -> list[int]:
        """``ineligibleReplicasForIsr`` (G5): members not registered and unfenced, shutting
        down, or named with another broker epoch than their registration's."""
        epochs = req.broker_epochs or (None,) * len(req.new_isr)
        return [r for r, epoch in zip(req.new_isr, epochs)
                if not self._eligible(r) or (epoch is not None and epoch != self.incarnation.get(r))]

    def on_alter_partition(self, req: AlterPartitionRequest, src: object) -> None:
        error: str | None = None
        if req.broker_id != self.leader or req.leader_epoch != self.leader_epoch:
            error = "FENCED_LEADER_EPOCH"
        elif req.partition_epoch != self.partition_epoch:
            stale_retry = req.new_isr == self.isr and not self.generation.kraft
            error = None if stale_retry else "INVALID_UPDATE_VERSION"
        elif self.generation.kraft and self._ineligible(req):
            error = "INELIGIBLE_REPLICA"
        elif req.new_isr != self.isr:
            self._commit(self.leader, self._order(req.new_isr),
                         f"AlterPartition from {req.broker_id}", by_leader=True)
        if error is not None:
            self.ctx.log_event("isr", f"controller rejects AlterPartition {list(req.new_isr)} "
                               f"from {req.broker_id}: {error}")
        resp = AlterPartitionResponse(req, error, self.leader_epoch, self.partition_epoch, self.isr)
        self._answer(lambda: self.ctx.post("controller", req.broker_id,
                                           "on_alter_partition_response", resp))

    # -- coordinators (simplification: hosted by the controller) ---------------------------
    def allocate_producer_id(self) -> int:
        """The next producer id (ids are never reused; the coordinator draws from here too)."""
        self.next_producer_id += 1
        return self.next_producer_id

    def init_producer_id(self, transactional_id: str | None) -> tuple[int, int]:
        """InitProducerId: a new id per session; with a transactional id the same id and a
        bumped epoch (the fencing event, 1.12)."""
        if transactional_id is None:
            return (self.allocate_producer_id(), 0)
        known = self.transactional_ids.get(transactional_id)
        if known is None:
            known = (self.allocate_producer_id(), 0)
        else:
            known = (known[0], known[1] + 1)
        self.transactional_ids[transactional_id] = known
        return known

    def on_init_producer_id(self, msg: tuple[str, int, str | None], src: object) -> None:
        client, request_id, tid = msg
        self.ctx.post("controller", client, "on_init_producer_id_response",
                      (request_id, self.init_producer_id(tid)))

    def on_metadata(self, msg: tuple[str, int], src: object) -> None:
        client, request_id = msg
        leader, epoch = self.published()[:2]
        self.ctx.post("controller", client, "on_metadata_response", (request_id, leader, epoch))

    def on_offset_commit(self, msg: tuple[str, int, int, int | None], src: object) -> None:
        client, request_id, offset, leader_epoch = msg
        self.committed_offsets[client] = (offset, leader_epoch)
        self.ctx.post("controller", client, "on_offset_commit_response", (request_id, offset))

    def on_offset_fetch(self, msg: tuple[str, int], src: object) -> None:
        client, request_id = msg
        self.ctx.post("controller", client, "on_offset_fetch_response",
                      (request_id, self.committed_offsets.get(client)))
