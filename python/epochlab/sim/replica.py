"""One partition replica's protocol state machine: leader and follower sides, per generation.

A :class:`Replica` owns a :class:`epochlab.ReplicaLog` and the partition metadata it has
learnt. Every public method handles exactly one message or timer tick and returns the
messages to send (it knows nothing of the kernel or the network), so the class ports 1:1 to a
Rust ``replica.rs``. Rules and their sources are in ``docs/core-semantics.md`` (rule numbers):

* becoming leader / follower (1.9 "Broker reaction"), follower truncation by generation (1.4),
* leader fetch handling, DivergingEpoch, follower-state update, ISR expansion (1.5, 1.7),
* the high watermark (1.6), ISR shrink (1.7), the produce path and acks (1.8),
* checkpointed HW and crash/restart (1.10).

Simplifications (stated where they apply): ISR changes always go through an AlterPartition
request to the controller, in the ZK generations too (ZK-era leaders wrote the ISR to
ZooKeeper with a compare-and-set on the zkVersion, which the partition epoch stands for);
the leader's OffsetOutOfRange answer carries its log start/end offsets instead of a separate
ListOffsets round trip. Before 2.0.1 (KAFKA-7414) a follower whose log end offset is past the
leader's halts its broker when unclean leader election is disabled (``truncation_halts``; the
broker then shuts down as its shutdown hook does).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import epochlab
from epochlab.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from epochlab.generations import Generation
from epochlab.sim.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    LeaderAndIsr,
    ProduceRequest,
    ProduceResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from epochlab.sim.replica_follower import FollowerFetchMixin
from epochlab.sim.replica_leader import FollowerState, LeaderFetchMixin

__all__ = ["FollowerState", "Replica", "reload_log"]


def reload_log(log: epochlab.ReplicaLog, clean_shutdown: bool) -> None:
    """``log`` as a restarted broker loads it (``LogLoader.load``): ``ReplicaLog.reload`` (stray
    producer snapshots removed after a clean shutdown, all of them after an unclean one; the
    log end offset where the data ends with the epoch cache truncated there, KAFKA-10706 at the
    LEO; producer state reloaded from the newest snapshot left, or replayed)."""
    log.reload(clean_shutdown)

def straddle_note(base: int, last: int, target: int) -> str:
    """What a truncation inside a batch leaves (``LogSegment.truncateTo`` cuts at the start of
    the batch holding the target, the log end offset is set to the target): a hole. The Rust
    replica writes the same text."""
    return f"; batch [{base}, {last}] held it and went whole, offsets {base}-{target - 1} are a hole"


class Replica(LeaderFetchMixin, FollowerFetchMixin):
    """One replica of the partition on broker ``broker_id``.

    Roles: ``"leader"``, ``"follower"``, ``"none"`` (no metadata yet, e.g. after a restart).
    Follower fetch states: ``"truncating"`` (G1-G3 OffsetsForLeaderEpoch round trips),
    ``"fetching"``, ``"fenced"`` (KIP-320: wait for newer metadata), ``"idle"``.
    """

    def __init__(self, broker_id: int, replicas: tuple[int, ...], generation: Generation,
                 min_insync_replicas: int, replica_lag_time_max_ms: int,
                 core: ModuleType = epochlab) -> None:
        """``core`` provides the log and the divergence functions: ``epochlab`` (the Rust core)
        or ``epochlab.reference`` (pure Python, for differential runs and benchmarks)."""
        self.core = core
        self.broker_id = broker_id
        self.replicas = replicas
        self.generation = generation
        self.min_insync_replicas = min_insync_replicas
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.log = core.ReplicaLog(kip101_epoch_cache=generation.kip101_epoch_cache,
                                   wrapper_batches=generation.wrapper_batches)
        self.checkpointed_high_watermark = 0
        self.events: list[str] = []
        self.fetcher_session = 0
        #: KAFKA-13141 (Kafka 2.8.0, ``kafka.release``): the leader takes a diverging fetch's
        #: offset as the follower's log end offset
        self.record_diverging_fetch_offset = False
        #: the proposed fix (``kafka.release`` ``+skipped-epoch-reset``): a leader re-elected in an
        #: epoch more than one above its last forgets its followers' state, as a new leader does
        self.reset_followers_on_skipped_epoch = False
        #: KAFKA-5522 (before Kafka 1.0.0): a ListOffsets by timestamp may answer the HW itself
        self.list_offsets_up_to_hw = False
        #: before 2.0.1 (KAFKA-7414), unclean leader election disabled: a follower told its log end
        #: offset is past the leader's halts the broker instead of truncating
        self.truncation_halts = False
        self._reset_volatile()

    def state_key(self) -> tuple[Any, ...]:
        """``(role, leader_epoch, partition_epoch, pending_isr)`` and the log's
        ``state_key()``: what the state checker compares to tell whether this replica changed
        (``epochlab._core.Replica.state_key`` gives the same in one call into Rust)."""
        return (self.role, self.leader_epoch, self.partition_epoch, self.pending_isr, *self.log.state_key())

    def take_events(self) -> list[str]:
        """Events since the last call, oldest first; the list is emptied."""
        events, self.events = self.events, []
        return events

    def _reset_volatile(self) -> None:
        self.role = "none"
        self.leader_id: int | None = None
        self.leader_epoch: int | None = None
        self.partition_epoch: int | None = None
        self.isr: tuple[int, ...] = ()
        self.pending_isr: tuple[int, ...] | None = None
        self.leader_epoch_start_offset: int | None = None
        self.followers: dict[int, FollowerState] = {}
        self.fetch_state = "idle"
        self.fetcher_session += 1  # responses to the previous incarnation's fetcher are stale
        # G5 metadata image of the brokers: id -> (broker epoch, in controlled shutdown).
        self.brokers: dict[int, tuple[int, bool]] = {}
        self.metadata_version = 0

    # -- metadata ---------------------------------------------------------------------------
    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """ISR ∪ pending proposal, in assignment order (1.7: used for HW and acks=all)."""
        members = set(self.isr) | set(self.pending_isr or ())
        return tuple(r for r in self.replicas if r in members)

    def _effective_min_isr(self) -> int:
        return min(self.min_insync_replicas, len(self.replicas))

    def _min_isr(self) -> int:
        """The min.insync.replicas the produce path enforces: 3.7+ (G5) the effective one,
        ``min(min.insync.replicas, replicas)`` (``Partition.effectiveMinIsr``, KAFKA-15432),
        in both the append check and the acks=all completion; before, the configured value,
        so a topic with min.insync.replicas above its replication factor refuses every
        acks=all append with NOT_ENOUGH_REPLICAS (``Partition.appendRecordsToLeader`` <= 3.6)."""
        if self.generation.strict_min_isr:
            return self._effective_min_isr()
        return self.min_insync_replicas

    def _caught_up(self, st: FollowerState, leader_leo: int, now_ms: int) -> bool:
        """``ReplicaState.isCaughtUp``: at the leader's LEO, or caught up within
        replica.lag.time.max.ms (never, if it never was)."""
        if st.log_end_offset is not None and st.log_end_offset == leader_leo:
            return True
        return (st.last_caught_up_time_ms is not None
                and now_ms - st.last_caught_up_time_ms <= self.replica_lag_time_max_ms)

    def _isr_eligible(self, replica_id: int) -> bool:
        """``Partition.isReplicaIsrEligible``: in KRaft (G5) the follower's broker is
        registered, unfenced and not shutting down in this broker's metadata, and its fetches
        carried that registration's broker epoch (KIP-903). Earlier generations: always."""
        if not self.generation.kraft:
            return True
        known = self.brokers.get(replica_id)
        st = self.followers.get(replica_id)
        return (known is not None and not known[1] and st is not None
                and st.broker_epoch is not None and st.broker_epoch == known[0])

    def follower_log_end_offset(self, replica_id: int) -> int | None:
        """The log end offset this replica, as leader, last stored for follower
        ``replica_id`` (``None``: no fetch of it in this leadership, or not a follower)."""
        st = self.followers.get(replica_id)
        return None if st is None else st.log_end_offset

    def _apply_metadata(self, msg: LeaderAndIsr) -> None:
        if msg.metadata_version > self.metadata_version:
            self.metadata_version = msg.metadata_version
            self.brokers = {b: (epoch, shutting_down) for b, epoch, shutting_down in msg.brokers}

    def apply_leader_and_isr(self, msg: LeaderAndIsr, now_ms: int) -> str:
        """Apply a controller decision. Returns ``"ignored"`` (older epoch, or same epoch and
        not a newer partition epoch), ``"isr"`` (same epoch, newer ISR), ``"leader"`` or
        ``"follower"`` (role taken; ``"follower"`` means the fetcher must (re)start) or
        ``"follower-same"`` (same leader, fetcher kept: G0-G2 before KAFKA-7164). The brokers'
        metadata it carries (G5) is applied whenever it is newer, whatever the outcome."""
        self._apply_metadata(msg)
        if self.leader_epoch is not None and msg.leader_epoch < self.leader_epoch:
            return "ignored"
        if self.leader_epoch is not None and msg.leader_epoch == self.leader_epoch:
            if self.partition_epoch is not None and msg.partition_epoch <= self.partition_epoch:
                return "ignored"
            self.isr, self.partition_epoch, self.pending_isr = msg.isr, msg.partition_epoch, None
            if self.role == "leader":
                self.maybe_increment_high_watermark(now_ms)
            return "isr"
        self.replicas = msg.replicas
        if msg.leader == self.broker_id:
            self.make_leader(msg, now_ms)
            return "leader"
        return self.make_follower(msg)

    def make_leader(self, msg: LeaderAndIsr, now_ms: int) -> None:
        """``Partition.makeLeader`` (1.9): LESO := LEO; G3+ assigns ``(epoch, LEO)`` in the
        cache (KAFKA-7415); follower states reset as ``Replica.resetReplicaState`` does: ISR
        followers count as caught up and fetched now, the others never; a new leader forgets
        every follower LEO and broker epoch, a re-elected one keeps them and takes the LESO
        as the leader LEO of their last fetch. Then the HW may advance."""
        was_leader = self.role == "leader"
        if was_leader and self.reset_followers_on_skipped_epoch and msg.leader_epoch > (self.leader_epoch or 0) + 1:
            was_leader = False  # the proposed fix: across a skipped epoch, a new leader
        old = self.followers
        self._become(msg, "leader")
        leso = self.leader_epoch_start_offset = self.log.log_end_offset
        if self.generation.leader_assigns_epoch:
            self.log.assign_epoch(msg.leader_epoch, self.log.log_end_offset)
        self.followers = {}
        for r in self.replicas:
            if r == self.broker_id:
                continue
            state = FollowerState()
            in_sync = r in msg.isr
            if was_leader and r in old:
                state.log_end_offset = old[r].log_end_offset
                state.broker_epoch = old[r].broker_epoch
                state.last_fetch_leader_log_end_offset = leso
                state.last_fetch_time_ms = now_ms if in_sync else None
            if in_sync:
                state.last_caught_up_time_ms = now_ms
            self.followers[r] = state
        self.maybe_increment_high_watermark(now_ms)

    def make_follower(self, msg: LeaderAndIsr) -> str:
        """``makeFollower`` (1.4, 1.9). The fetcher restarts on a new leader, or from G3 on any
        new epoch (KAFKA-7164); on restart G0 truncates to its local HW at once, G1-G3 enter
        ``truncating``, G4+ fetch with ``last_fetched_epoch`` (HW path if the cache is empty)."""
        restart = (self.role != "follower" or self.leader_id != msg.leader
                   or self.generation.fences_current_epoch or self.fetch_state != "fetching")
        self._become(msg, "follower" if msg.leader is not None else "none")
        if msg.leader is None:
            self.fetch_state = "idle"
            return "follower-same"
        if not restart:
            return "follower-same"
        self.fetcher_session += 1
        g = self.generation
        if g == Generation.TRUNCATE_TO_HW or (g.truncate_on_fetch and self.log.latest_epoch is None):
            self._truncate(self.log.high_watermark, "become follower: truncate to local HW")
            self.fetch_state = "fetching"
        elif g.truncate_on_fetch:
            self.fetch_state = "fetching"
        else:
            self.fetch_state = "truncating"
        return "follower"

    def _become(self, msg: LeaderAndIsr, role: str) -> None:
        self.role = role
        self.leader_id = msg.leader
        self.leader_epoch = msg.leader_epoch
        self.partition_epoch = msg.partition_epoch
        self.isr = msg.isr
        self.pending_isr = None
        self.leader_epoch_start_offset = None
        if role != "leader":
            self.followers = {}

    def _truncate(self, offset: int, why: str) -> None:
        before = self.log.log_end_offset
        straddling = self.log.batch_containing(offset) if offset < before else None
        if self.log.truncate_to(offset):
            self.events.append(f"truncated {before} -> {offset} ({why})" + (
                straddle_note(straddling.base_offset, straddling.last_offset, offset)
                if straddling is not None and straddling.base_offset < offset else ""))

    # -- leader: produce --------------------------------------------------------------------
    def handle_produce(self, req: ProduceRequest, now_ms: int) -> ProduceResponse:
        """Leader append (1.8): NOT_LEADER_OR_FOLLOWER if not leader; acks=all with
        ``|ISR| < effective minISR`` is NOT_ENOUGH_REPLICAS (nothing appended); producer-state
        errors map to INVALID_PRODUCER_EPOCH / OUT_OF_ORDER_SEQUENCE_NUMBER / INVALID_TXN_STATE
        (a non-transactional batch while the producer has a transaction open here, 1.12); a
        duplicate answers the original offsets. A successful append may advance the HW."""
        if self.role != "leader" or self.leader_epoch is None:
            return ProduceResponse(req.request_id, "NOT_LEADER_OR_FOLLOWER")
        if req.acks == "all" and len(self.isr) < self._min_isr():
            return ProduceResponse(req.request_id, "NOT_ENOUGH_REPLICAS")
        self.log.set_time(now_ms)  # LogAppendTime: the leader stamps what it appends
        try:
            info = self.log.append_as_leader(
                list(req.records), self.leader_epoch, producer_id=req.producer_id,
                producer_epoch=req.producer_epoch, base_sequence=req.base_sequence,
                is_transactional=req.is_transactional)
        except InvalidProducerEpochError:
            self.events.append(f"rejected produce from {req.client}: INVALID_PRODUCER_EPOCH")
            return ProduceResponse(req.request_id, "INVALID_PRODUCER_EPOCH")
        except OutOfOrderSequenceError:
            return ProduceResponse(req.request_id, "OUT_OF_ORDER_SEQUENCE_NUMBER")
        except InvalidTxnStateError:
            return ProduceResponse(req.request_id, "INVALID_TXN_STATE")
        if not info.duplicate:
            self.maybe_increment_high_watermark(now_ms)
        return ProduceResponse(req.request_id, None, info.base_offset, info.last_offset,
                               info.duplicate)

    def handle_write_txn_markers(self, req: WriteTxnMarkersRequest,
                                 now_ms: int) -> WriteTxnMarkersResponse:
        """WriteTxnMarkers as leader (1.12, origin COORDINATOR, acks=all): not leader ->
        NOT_LEADER_OR_FOLLOWER; ``|ISR| < effective minISR`` -> NOT_ENOUGH_REPLICAS; an older
        producer epoch -> INVALID_PRODUCER_EPOCH; an older coordinator epoch than the last marker
        of this producer -> TRANSACTION_COORDINATOR_FENCED; else the control batch is appended
        at the LEO (the HW may advance) and its offset returned. The caller answers the
        coordinator once the HW is past that offset (:meth:`produce_completion`)."""
        if self.role != "leader" or self.leader_epoch is None:
            return WriteTxnMarkersResponse(req.request_id, "NOT_LEADER_OR_FOLLOWER")
        if len(self.isr) < self._min_isr():
            return WriteTxnMarkersResponse(req.request_id, "NOT_ENOUGH_REPLICAS")
        kind = "COMMIT" if req.commit else "ABORT"
        self.log.set_time(now_ms)
        try:
            info = self.log.append_end_txn_marker(req.producer_id, req.producer_epoch,
                                                  req.coordinator_epoch, req.commit,
                                                  self.leader_epoch, req.transaction_version)
        except InvalidProducerEpochError:
            self.events.append(f"rejected {kind} marker for producer {req.producer_id}: "
                               "INVALID_PRODUCER_EPOCH")
            return WriteTxnMarkersResponse(req.request_id, "INVALID_PRODUCER_EPOCH")
        except TransactionCoordinatorFencedError:
            self.events.append(f"rejected {kind} marker for producer {req.producer_id}: "
                               "TRANSACTION_COORDINATOR_FENCED")
            return WriteTxnMarkersResponse(req.request_id, "TRANSACTION_COORDINATOR_FENCED")
        self.maybe_increment_high_watermark(now_ms)
        return WriteTxnMarkersResponse(req.request_id, None, info.base_offset)

    def produce_completion(self, required_offset: int) -> tuple[bool, str | None]:
        """acks=all purgatory check (``checkEnoughReplicasReachOffset``, 1.8): ``(False, None)``
        while waiting; ``(True, None)`` once HW >= ``required_offset`` with maximal ISR >=
        min.insync.replicas (:meth:`_min_isr`), ``(True, "NOT_ENOUGH_REPLICAS_AFTER_APPEND")``
        if smaller; ``(True, "NOT_LEADER_OR_FOLLOWER")`` after losing leadership."""
        if self.role != "leader":
            return (True, "NOT_LEADER_OR_FOLLOWER")
        if self.log.high_watermark < required_offset:
            return (False, None)
        if len(self.maximal_isr) >= self._min_isr():
            return (True, None)
        return (True, "NOT_ENOUGH_REPLICAS_AFTER_APPEND")

    # -- leader: high watermark and ISR -----------------------------------------------------
    def maybe_increment_high_watermark(self, now_ms: int) -> bool:
        """``Partition.maybeIncrementLeaderHW`` (1.6): min LEO over the leader and every
        follower in the maximal ISR or caught up (:meth:`_caught_up`); from G5 (3.6+,
        KAFKA-15021) a caught-up follower outside the ISR counts only if it is ISR-eligible
        (:meth:`_isr_eligible`), so a fenced broker no longer holds the HW. An unknown follower
        LEO holds the HW. G5: no advance while ``|ISR| < effective minISR``. Returns whether
        HW rose."""
        if self.role != "leader":
            return False
        if self.generation.strict_min_isr and len(self.isr) < self._effective_min_isr():
            return False
        leo = new_hw = self.log.log_end_offset
        maximal = self.maximal_isr
        for r in sorted(self.followers):
            st = self.followers[r]
            if r in maximal or (self._caught_up(st, leo, now_ms) and self._isr_eligible(r)):
                if st.log_end_offset is None:
                    return False
                new_hw = min(new_hw, st.log_end_offset)
        return self.log.maybe_increment_high_watermark(new_hw)

    def maybe_shrink_isr(self, now_ms: int) -> AlterPartitionRequest | None:
        """ISR-expiration tick (1.7): propose removing ISR followers that are neither at the
        leader's LEO nor caught up within replica.lag.time.max.ms. ``None`` if nothing to do or
        a proposal is already in flight."""
        if self.role != "leader" or self.pending_isr is not None:
            return None
        leo = self.log.log_end_offset
        out = [r for r in self.isr if r != self.broker_id and r in self.followers
               and not self._caught_up(self.followers[r], leo, now_ms)]
        if not out:
            return None
        return self._propose(tuple(r for r in self.isr if r not in out))

    def _propose(self, new_isr: tuple[int, ...]) -> AlterPartitionRequest:
        assert self.leader_epoch is not None and self.partition_epoch is not None
        self.pending_isr = new_isr
        return self._alter_partition_request(new_isr)

    def _alter_partition_request(self, new_isr: tuple[int, ...]) -> AlterPartitionRequest:
        """G5 sends each member's broker epoch as last seen in its fetches
        (``Partition.addBrokerEpochToIsr``; unknown for the leader itself)."""
        assert self.leader_epoch is not None and self.partition_epoch is not None
        epochs: tuple[int | None, ...] = ()
        if self.generation.kraft:
            epochs = tuple(self.followers[r].broker_epoch if r in self.followers else None
                           for r in new_isr)
        return AlterPartitionRequest(self.broker_id, self.leader_epoch, self.partition_epoch,
                                     new_isr, epochs)

    def pending_alter_partition(self) -> AlterPartitionRequest | None:
        """The in-flight proposal to resend: Kafka's controller channel retries the one
        outstanding AlterPartition until it is answered (``AlterPartitionManager``)."""
        if self.role != "leader" or self.pending_isr is None:
            return None
        return self._alter_partition_request(self.pending_isr)

    def handle_alter_partition_response(self, resp: AlterPartitionResponse, now_ms: int) -> None:
        """``Partition.submitAlterPartition``'s completion. An answer to anything but the
        proposal in flight (another leader or partition epoch, another ISR) is out of date
        and ignored. Success commits the returned ISR and partition epoch unless they are
        for another leader epoch or older (``handleAlterPartitionUpdate``), then the HW may
        advance. INELIGIBLE_REPLICA and OPERATION_NOT_ATTEMPTED say the request was not
        applied: back to the last committed ISR. Any other error (FENCED_LEADER_EPOCH,
        INVALID_UPDATE_VERSION) keeps the proposal pending until newer metadata replaces it
        (``Partition.handleAlterPartitionError``): rolling it back could let the HW advance
        on a smaller ISR than the controller has committed."""
        req = resp.request
        if self.role != "leader" or self.pending_isr is None or req.new_isr != self.pending_isr \
                or req.leader_epoch != self.leader_epoch or req.partition_epoch != self.partition_epoch:
            return
        if resp.error is None:
            assert self.partition_epoch is not None
            if resp.leader_epoch != self.leader_epoch or resp.partition_epoch < self.partition_epoch:
                return
            self.isr, self.partition_epoch, self.pending_isr = resp.isr, resp.partition_epoch, None
            self.maybe_increment_high_watermark(now_ms)
        elif resp.error in ("INELIGIBLE_REPLICA", "OPERATION_NOT_ATTEMPTED"):
            self.events.append(f"ISR proposal {list(req.new_isr)} refused ({resp.error}): back to "
                               f"ISR {list(self.isr)}")
            self.pending_isr = None

    # -- durability -------------------------------------------------------------------------
    def checkpoint_high_watermark(self) -> None:
        """Write the ``replication-offset-checkpoint`` (every
        replica.high.watermark.checkpoint.interval.ms, 1.10)."""
        self.checkpointed_high_watermark = self.log.high_watermark

    def flush(self) -> None:
        """fsync the log (flush policy tick or clean shutdown)."""
        self.log.flush()

    def crash(self, lose_unflushed: bool) -> int:
        """Process or machine crash (1.10): all in-memory state is gone; with
        ``lose_unflushed`` the page cache is lost too (the unflushed tail is dropped, a torn
        batch whole). The HW comes back from the last checkpoint, clamped to the log: stale by
        up to the checkpoint interval. Returns the number of records lost."""
        lost = self.log.drop_unflushed() if lose_unflushed else 0
        if lost:
            self.events.append(f"lost {lost} unflushed records in crash")
        if not lose_unflushed:  # drop_unflushed reloads the log itself
            reload_log(self.log, clean_shutdown=False)
        self.log.update_high_watermark(self.checkpointed_high_watermark)
        self._reset_volatile()
        return lost

    def clean_shutdown(self) -> None:
        """Controlled shutdown's final step: flush the log, checkpoint the HW, take a producer
        snapshot at the log end offset (``UnifiedLog.close``) and reload the log from it as the
        restarted broker does."""
        self.flush()
        self.checkpoint_high_watermark()
        self.log.take_producer_snapshot()
        reload_log(self.log, clean_shutdown=True)
        self._reset_volatile()
