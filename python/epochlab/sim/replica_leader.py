"""Leader side of fetch handling for :class:`epochlab.sim.replica.Replica`.

Follower fetch (``docs/core-semantics.md`` rules 1.4d, 1.5), OffsetsForLeaderEpoch (1.4b-c leader side) and
consumer fetch / position validation (1.12 last bullet, 4 Inv-15). One call per request.
"""

from __future__ import annotations

from dataclasses import dataclass

from types import ModuleType

from epochlab import RecordBatch, ReplicaLog
from epochlab.errors import OffsetOutOfRangeError
from epochlab.generations import Generation
from epochlab.sim.messages import (
    AlterPartitionRequest,
    ConsumerFetchRequest,
    ConsumerFetchResponse,
    FetchRequest,
    FetchResponse,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    RECORD_ABORT_MARKER,
    RECORD_COMMIT_MARKER,
    RECORD_DATA,
    RECORD_TRANSACTIONAL,
)

__all__ = ["FollowerState", "LeaderFetchMixin"]

MAX_FETCH_BATCHES = 1000


@dataclass
class FollowerState:
    """The leader's view of one follower (Kafka's remote ``Replica``, 1.1/1.5).
    ``log_end_offset is None`` until a fetch in the current leadership reported it. The two
    times are ``None`` for "never": Kafka stores 0 there, which on its wall clock is decades
    ago (``Replica.resetReplicaState``), whereas virtual time starts at 0. ``broker_epoch`` is
    the epoch the follower's last accepted fetch carried (KIP-903, G5)."""

    log_end_offset: int | None = None
    last_caught_up_time_ms: int | None = None
    last_fetch_time_ms: int | None = None
    last_fetch_leader_log_end_offset: int = 0
    broker_epoch: int | None = None


class LeaderFetchMixin:
    """Methods of :class:`~epochlab.sim.replica.Replica` that answer requests as leader."""

    broker_id: int
    core: ModuleType
    generation: Generation
    log: ReplicaLog
    role: str
    leader_epoch: int | None
    isr: tuple[int, ...]
    pending_isr: tuple[int, ...] | None
    leader_epoch_start_offset: int | None
    followers: dict[int, FollowerState]
    events: list[str]

    def _epoch_error(self, current_leader_epoch: int | None, require_leader: bool = True) -> str | None:
        """Not-leader and KIP-320 current-epoch checks (G3+; ``None`` field always passes).
        With ``require_leader`` false a follower passes too
        (``Partition.localLogWithEpochOrThrow(currentLeaderEpoch, requireLeader)``)."""
        serves = self.role == "leader" or (not require_leader and self.role == "follower")
        if not serves or self.leader_epoch is None:
            return "NOT_LEADER_OR_FOLLOWER"
        if not self.generation.fences_current_epoch or current_leader_epoch is None:
            return None
        if current_leader_epoch < self.leader_epoch:
            return "FENCED_LEADER_EPOCH"
        if current_leader_epoch > self.leader_epoch:
            return "UNKNOWN_LEADER_EPOCH"
        return None

    def handle_fetch(self, req: FetchRequest, now_ms: int, update_state: bool = True
                     ) -> tuple[FetchResponse, AlterPartitionRequest | None]:
        """Answer one follower fetch. Order: not-leader / epoch fencing (G3+); G4+ with a
        ``last_fetched_epoch``: ``leader_fetch_check`` -> DivergingEpoch (no records, no
        follower-state update) or OFFSET_OUT_OF_RANGE; fetch offset outside
        ``[log_start, LEO]`` -> OFFSET_OUT_OF_RANGE; else read from the fetch offset, update the
        follower's state (may propose an ISR expansion, returned) and maybe the HW. The
        response carries the HW from *before* the update (1.5).

        ``update_state=False`` answers a fetch that waited in the purgatory, at its completion:
        the same checks and read, no follower-state update and so no proposal
        (``DelayedFetch.onComplete`` reads with ``readFromPurgatory``: ``Partition.fetchRecords``
        with ``updateFetchState = false``; the ZooKeeper-era releases updated the state only in
        ``ReplicaManager.fetchMessages`` too)."""
        log = self.log
        error = self._epoch_error(req.current_leader_epoch)
        if error is None and req.replica_id not in self.followers:
            error = "NOT_LEADER_OR_FOLLOWER"
        # the broker epoch is checked where the state is updated (Replica.updateFetchStateOrThrow)
        if update_state and error is None and self._stale_broker_epoch(req):
            self.events.append(f"ignored fetch from broker {req.replica_id}: stale broker epoch "
                               f"{req.broker_epoch}")
            error = "NOT_LEADER_OR_FOLLOWER"
        hw, start, leo = log.high_watermark, log.log_start_offset, log.log_end_offset
        if error is not None:
            return FetchResponse(req, error, (), hw, start, leo), None
        if self.generation.truncate_on_fetch and req.last_fetched_epoch is not None:
            check = self.core.leader_fetch_check(log.epoch_cache(), leo, start, req.fetch_offset,
                                       req.last_fetched_epoch)
            if check.kind == "diverging":
                proposal = None
                if update_state and self.record_diverging_fetch_offset:  # type: ignore[attr-defined]
                    # Kafka 2.8.0 takes the diverged fetch offset as the follower's LEO
                    # (``Partition.readRecords``, ``ReplicaManager.updateFollowerFetchState``);
                    # 2.8.1 skips the update (KAFKA-13141)
                    self.events.append(f"took broker {req.replica_id}'s diverging fetch offset "
                                       f"{req.fetch_offset} as its log end offset (KAFKA-13141)")
                    proposal = self._update_follower_fetch_state(req.replica_id, req.fetch_offset,
                                                                 now_ms, req.broker_epoch)
                return FetchResponse(req, None, (), hw, start, leo, check.diverging_epoch), proposal
            if check.kind == "offset_out_of_range":
                return FetchResponse(req, "OFFSET_OUT_OF_RANGE", (), hw, start, leo), None
        try:
            batches = tuple(log.read(req.fetch_offset, max_batches=MAX_FETCH_BATCHES))
        except OffsetOutOfRangeError:
            return FetchResponse(req, "OFFSET_OUT_OF_RANGE", (), hw, start, leo), None
        proposal = self._update_follower_fetch_state(req.replica_id, req.fetch_offset, now_ms,
                                                     req.broker_epoch) if update_state else None
        return FetchResponse(req, None, batches, hw, start, leo), proposal

    def _stale_broker_epoch(self, req: FetchRequest) -> bool:
        """KIP-903 (G5): a fetch carrying an older broker epoch than the metadata's for that
        broker comes from a previous incarnation and must not update the follower's state
        (``Replica.updateFetchStateOrThrow``, KAFKA-14139)."""
        known = self.brokers.get(req.replica_id)  # type: ignore[attr-defined]
        return req.broker_epoch is not None and known is not None and known[0] > req.broker_epoch

    def _update_follower_fetch_state(self, replica_id: int, fetch_offset: int, now_ms: int,
                                     broker_epoch: int | None) -> AlterPartitionRequest | None:
        """``updateFollowerFetchState`` then ``maybeExpandIsr`` (1.5, 1.7)."""
        st = self.followers[replica_id]
        leader_leo = self.log.log_end_offset
        if fetch_offset >= leader_leo:
            st.last_caught_up_time_ms = now_ms
        elif fetch_offset >= st.last_fetch_leader_log_end_offset and st.last_fetch_time_ms is not None:
            st.last_caught_up_time_ms = max(st.last_caught_up_time_ms or 0, st.last_fetch_time_ms)
        st.last_fetch_leader_log_end_offset = max(leader_leo, st.last_fetch_leader_log_end_offset)
        st.last_fetch_time_ms = now_ms
        st.broker_epoch = broker_epoch
        changed = st.log_end_offset != fetch_offset
        st.log_end_offset = fetch_offset
        proposal = self._maybe_expand_isr(replica_id, fetch_offset)
        if changed:
            self.maybe_increment_high_watermark(now_ms)  # type: ignore[attr-defined]
        return proposal

    def _maybe_expand_isr(self, replica_id: int, follower_leo: int) -> AlterPartitionRequest | None:
        """Expand iff the follower is outside the maximal ISR, no proposal is in flight, it
        is ISR-eligible (G5: ``Partition.isReplicaIsrEligible``), ``LEO_f >= HW`` and, G3+
        (KAFKA-7128), ``LEO_f >= LESO`` (``Partition.canAddReplicaToIsr``, ``isFollowerInSync``)."""
        if self.pending_isr is not None or replica_id in self.isr:
            return None
        if not self._isr_eligible(replica_id):  # type: ignore[attr-defined]
            return None
        if follower_leo < self.log.high_watermark:
            return None
        leso = self.leader_epoch_start_offset
        if self.generation.isr_requires_leso and leso is not None and follower_leo < leso:
            return None
        return self._propose(self.isr + (replica_id,))  # type: ignore[attr-defined,no-any-return]

    def handle_offsets_for_leader_epoch(self, req: OffsetsForLeaderEpochRequest
                                        ) -> OffsetsForLeaderEpochResponse:
        """Leader answer by generation: G1 ``end_offset_for_kip101`` (offset only, v0), G2
        ``end_offset_for_kip279``, G3+ the current ``end_offset_for``, after the not-leader and
        (G3+) current-epoch checks. No HW capping for replica requests (1.4c)."""
        error = self._epoch_error(req.current_leader_epoch)
        if error is not None:
            return OffsetsForLeaderEpochResponse(req, error)
        cache, leo = self.log.epoch_cache(), self.log.log_end_offset
        if self.generation == Generation.KIP_101 or self.generation == Generation.TRUNCATE_TO_HW:
            return OffsetsForLeaderEpochResponse(req, None,
                                                 end_offset=cache.end_offset_for_kip101(req.leader_epoch, leo))
        if self.generation == Generation.KIP_279:
            return OffsetsForLeaderEpochResponse(req, None,
                                                 answer=cache.end_offset_for_kip279(req.leader_epoch, leo))
        return OffsetsForLeaderEpochResponse(req, None, answer=cache.end_offset_for(req.leader_epoch, leo))

    def _follower_may_serve(self, req: ConsumerFetchRequest) -> bool:
        """KIP-392 (2.4+, G3 on): ``FetchParams.fetchOnlyLeader`` is false for a consumer fetch
        with client metadata, so a follower answers it from its own log up to its own HW /
        LSO. ListOffsets and position validation always go to the leader."""
        return (req.rack is not None and req.fetch_offset is not None and req.validate_epoch is None
                and self.generation.fences_current_epoch)

    def preferred_read_replica(self, fetch_offset: int, client_rack: int) -> int | None:
        """``ReplicaManager.findPreferredReadReplica`` with ``RackAwareReplicaSelector``
        (KIP-392), each broker its own rack: on the leader, the follower in the consumer's rack
        if it is a candidate (in the ISR from G4, as since KAFKA-14372 in 3.3.2 / 3.4.0; G3
        takes any follower, as 2.4 - 2.7 did; its LEO as the leader last saw it at or past the
        fetch offset), else ``None`` (read from the leader, also when the client is in the
        leader's rack)."""
        if self.role != "leader" or client_rack == self.broker_id or not self.generation.fences_current_epoch:
            return None
        st = self.followers.get(client_rack)
        if st is None:
            return None
        in_isr = self.generation < Generation.DIVERGING_EPOCH or client_rack in self.isr
        leo = st.log_end_offset
        return client_rack if in_isr and leo is not None and leo >= fetch_offset else None

    def _offset_for_timestamp(self, target: int, hw: int, bound: int) -> tuple[int | None, str | None]:
        """ListOffsets by timestamp (KIP-79): the first offset whose record's timestamp is at
        least ``target``, if it is below the last fetchable offset (HW, or LSO for
        read_committed; ``Partition.fetchOffsetForTimestamp``). Before 1.0.0 it had only to be
        at most the HW (``KafkaApis.handleListOffsetRequestV1``: ``offset <=
        highWatermark``), so the first uncommitted offset could be answered (KAFKA-5522). None
        found: no offset (-1), or from 2.2 (KIP-207) OFFSET_NOT_AVAILABLE while the HW is
        below the leader epoch start offset."""
        found = self.log.offset_for_timestamp(target)
        offset = None if found is None else found[0]
        up_to_hw: bool = self.list_offsets_up_to_hw  # type: ignore[attr-defined]
        if offset is not None and not (offset <= hw if up_to_hw else offset < bound):
            offset = None
        leso = self.leader_epoch_start_offset
        if offset is None and self.generation >= Generation.KIP_320 and leso is not None and leso > hw:
            return None, "OFFSET_NOT_AVAILABLE"
        return offset, None

    def handle_consumer_fetch(self, req: ConsumerFetchRequest) -> ConsumerFetchResponse:
        """A consumer fetch: records strictly below the HW (read_uncommitted) or the LSO
        (read_committed, which also gets the aborted transactions overlapping the range, 1.12);
        control records are returned with their kind so the consumer steps over them. Also
        answers a ListOffsets reset (earliest = log start, latest = HW, or LSO for
        read_committed; from G3, 2.2+, OFFSET_NOT_AVAILABLE for latest while the HW is below
        the leader epoch start offset, KIP-207) and a KIP-320 position validation: ``end_offset_for`` with the leader's
        LEO, not capped at the HW (``Partition.lastOffsetForLeaderEpoch`` answers
        ``UnifiedLog.endOffsetForEpoch`` as is). G3+ fence the current epoch."""
        log, epoch = self.log, self.leader_epoch
        error = self._epoch_error(req.current_leader_epoch, not self._follower_may_serve(req))
        if error is not None:
            return ConsumerFetchResponse(req.request_id, error, epoch)
        hw, lso = log.high_watermark, log.last_stable_offset
        committed = req.isolation_level == "read_committed"
        bound = lso if committed else hw
        if req.validate_epoch is not None:
            return ConsumerFetchResponse(req.request_id, None, epoch, high_watermark=hw,
                                         epoch_end=log.end_offset_for_epoch(req.validate_epoch),
                                         last_stable_offset=lso)
        if req.fetch_offset is None:
            leso = self.leader_epoch_start_offset
            if req.reset == "latest" and self.generation >= Generation.KIP_320 \
                    and leso is not None and leso > hw:
                # KIP-207 (2.2+): Partition.fetchOffsetForTimestamp, LATEST_TIMESTAMP
                return ConsumerFetchResponse(req.request_id, "OFFSET_NOT_AVAILABLE", epoch,
                                             high_watermark=hw, last_stable_offset=lso)
            error = None
            if req.reset == "timestamp":
                assert req.reset_timestamp is not None
                reset, error = self._offset_for_timestamp(req.reset_timestamp, hw, bound)
            else:
                reset = log.log_start_offset if req.reset == "earliest" else bound
            return ConsumerFetchResponse(req.request_id, error, epoch, high_watermark=hw,
                                         reset_offset=reset, last_stable_offset=lso)
        try:
            batches = log.read(req.fetch_offset, max_offset=bound)
        except OffsetOutOfRangeError:
            return ConsumerFetchResponse(req.request_id, "OFFSET_OUT_OF_RANGE", epoch,
                                         high_watermark=hw, last_stable_offset=lso)
        records: list[tuple[int, int, int, int | None, int]] = []
        for batch in batches:
            kind = _record_kind(batch)
            for i, value in enumerate(batch.records):
                offset = batch.base_offset + i
                if req.fetch_offset <= offset < bound and len(records) < req.max_records:
                    records.append((offset, value, batch.partition_leader_epoch,
                                    batch.producer_id, kind))
        aborted: tuple[tuple[int, int], ...] = ()
        if committed and records:
            aborted = tuple((pid, first) for pid, first, _last, _lso
                            in log.aborted_transactions(req.fetch_offset, records[-1][0] + 1))
        return ConsumerFetchResponse(req.request_id, None, epoch, tuple(records), hw,
                                     last_stable_offset=lso, aborted_transactions=aborted)


def _record_kind(batch: RecordBatch) -> int:
    if batch.is_control:
        return RECORD_COMMIT_MARKER if batch.control_type == "commit" else RECORD_ABORT_MARKER
    return RECORD_TRANSACTIONAL if batch.is_transactional else RECORD_DATA
