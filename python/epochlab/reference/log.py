"""One replica's partition log (Kafka's ``UnifiedLog``), written plainly as the oracle."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from epochlab.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OffsetOutOfRangeError,
    TransactionCoordinatorFencedError,
    UnexpectedAppendOffsetError,
)

from . import _validate as v
from .batch import NO_TIMESTAMP, LogAppendInfo, RecordBatch, timestamp_arg
from .epoch_cache import LeaderEpochCache
from .producer_state import ProducerStateManager
from .txn import AbortedTxn, TxnIndex


class ReplicaLog:
    """Batches, log start and end offsets, high watermark, recovery point, epoch cache and
    producer state. Offsets below the log end offset are contiguous except after a mid-batch
    truncation, which Kafka answers by dropping the whole batch (see :meth:`holes`).

    >>> log = ReplicaLog()
    >>> log.append_as_leader([1, 2, 3], 0).last_offset
    2
    >>> log.log_end_offset
    3
    """

    def __init__(self, log_start_offset: int = 0, *, kip101_epoch_cache: bool = False,
                 wrapper_batches: bool = False) -> None:
        """``kip101_epoch_cache`` selects the 0.11-2.0 epoch-cache assign rule (no eviction);
        ``wrapper_batches`` the v0/v1 follower check of a compressed wrapper's own (last)
        offset only (Kafka 0.10 ``Log.append``; KAFKA-3919)."""
        v.offset(log_start_offset, "log_start_offset")
        v.require_bool(kip101_epoch_cache, "kip101_epoch_cache")
        v.require_bool(wrapper_batches, "wrapper_batches")
        self._batches: list[RecordBatch] = []
        self._log_start_offset = log_start_offset
        self._log_end_offset = log_start_offset
        self._high_watermark = log_start_offset
        self._recovery_point = log_start_offset
        self._epoch_cache = LeaderEpochCache()
        self._producer_state = ProducerStateManager()
        self._txn = TxnIndex()
        # offset -> producer id -> (epoch, last batch, coordinator epoch, ongoing txn first offset)
        self._snapshots: dict[int, dict[int, tuple[int, Any, int | None, int | None]]] = {}
        self._kip101 = kip101_epoch_cache
        self._wrappers = wrapper_batches
        self._time_ms = NO_TIMESTAMP  # the broker's clock for LogAppendTime (set_time)

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def recovery_point(self) -> int:
        """End (exclusive) of the flushed prefix; what survives a crash that loses the page cache."""
        return self._recovery_point

    @property
    def batch_count(self) -> int:
        return len(self._batches)

    def state_key(self) -> tuple[int, int, int, int]:
        """``(log_end_offset, high_watermark, batch_count, log_start_offset)``: what a state
        checker compares to tell whether the log changed."""
        return (self._log_end_offset, self._high_watermark, len(self._batches), self._log_start_offset)

    @property
    def record_count(self) -> int:
        return sum(len(b) for b in self._batches)

    @property
    def latest_epoch(self) -> int | None:
        return self._epoch_cache.latest_epoch

    @property
    def wrapper_batches(self) -> bool:
        return self._wrappers

    def _follows(self, end: int, base: int, last: int) -> bool:
        """``ReplicaLog::follows``: whether a replicated batch ``[base, last]`` may be appended
        where the log (or the previous batch of the same append) ends: starting there in v2;
        with wrappers, its own (last) offset at or past it."""
        return last >= end if self._wrappers else base == end

    @property
    def kip101_epoch_cache(self) -> bool:
        return self._kip101

    def append_as_leader(
        self,
        records: Sequence[int],
        leader_epoch: int,
        *,
        producer_id: int | None = None,
        producer_epoch: int | None = None,
        base_sequence: int | None = None,
        is_transactional: bool = False,
    ) -> LogAppendInfo:
        """Build the batch at the log end offset stamped ``leader_epoch``, validate it against
        producer state (a duplicate appends nothing and returns the original offsets; an error
        changes nothing), then append it."""
        values = v.record_values(records, "records")
        v.leader_epoch(leader_epoch, "leader_epoch")
        batch = RecordBatch(
            self._log_end_offset, leader_epoch, values,
            producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
            is_transactional=is_transactional, max_timestamp=self._time_ms,
        )
        # Kafka assigns the epoch before it validates producer state (UnifiedLog.append:
        # maybeAssignEpochStartOffset, then analyzeAndValidateProducerState): a refused or
        # duplicate batch still moves the epoch cache.
        self._assign(leader_epoch, self._log_end_offset)
        original = self._producer_state.check_leader_append(batch)
        if original is not None:
            return LogAppendInfo(original[0], original[1], True)
        if producer_id is not None and not is_transactional and producer_id in self._txn.ongoing:
            first = self._txn.ongoing[producer_id]
            raise InvalidTxnStateError(
                f"non-transactional write from producer {producer_id} while its transaction "
                f"from offset {first} is open",
                producer_id=producer_id, transaction_first_offset=first)
        self._append(batch)
        return LogAppendInfo(batch.base_offset, batch.last_offset, False)

    def append_many_as_leader(self, leader_epoch: int, batch_sizes: Sequence[int], records: Sequence[int]) -> int:
        """Append ``len(batch_sizes)`` plain batches cut from ``records`` in order; the sizes
        must be >= 1 and sum to ``len(records)``, else nothing is appended. Returns the new log
        end offset."""
        v.leader_epoch(leader_epoch, "leader_epoch")
        if isinstance(batch_sizes, (str, bytes)):
            raise TypeError("argument 'batch_sizes' must be a sequence of int")
        sizes = [v.count(size, "batch_sizes") for size in batch_sizes]
        values = v.record_values(records, "records")
        if sum(sizes) != len(values):
            raise v.invalid("batch_sizes", sum(sizes),
                            f"batch sizes sum to {sum(sizes)} but {len(values)} records were given")
        if 0 in sizes:
            raise v.invalid("batch_sizes", 0, f"batch {sizes.index(0)} has no records")
        # Build every batch before appending any, so an overflow leaves the log unchanged.
        batches, base, cut = [], self._log_end_offset, 0
        for size in sizes:
            batches.append(RecordBatch(base, leader_epoch, values[cut:cut + size]))
            base, cut = base + size, cut + size
        for batch in batches:
            self._append(batch)
        return self._log_end_offset

    def append_as_follower(self, batch: RecordBatch) -> None:
        """Append a replicated batch with its own offsets and epoch, without producer checks;
        :class:`UnexpectedAppendOffsetError` unless it starts at the log end offset."""
        self.append_batches_as_follower([batch])

    def append_batches_as_follower(self, batches: Sequence[RecordBatch]) -> int:
        """Append replicated batches, all or nothing: the first must start at the log end
        offset and each next one right after the previous (v2), or, with ``wrapper_batches``,
        each wrapper's own (last) offset must be at or past the log end offset and past the
        previous wrapper's, inner offsets unchecked. Returns the new log end offset."""
        chain = list(batches)
        expected = self._log_end_offset
        for batch in chain:
            if not isinstance(batch, RecordBatch):
                raise TypeError(f"argument 'batch' must be RecordBatch, not {type(batch).__name__}")
            if self._follows(expected, batch.base_offset, batch.last_offset):
                pass
            elif self._wrappers:
                raise UnexpectedAppendOffsetError(
                    f"replicated wrapper's offset {batch.last_offset} is below the log end "
                    f"offset {expected} (out of order offsets)",
                    first_offset=batch.last_offset, log_end_offset=expected,
                )
            else:
                raise UnexpectedAppendOffsetError(
                    f"replicated batch starts at offset {batch.base_offset} but the log end "
                    f"offset is {expected}",
                    first_offset=batch.base_offset, log_end_offset=expected,
                )
            expected = batch.last_offset + 1
        for batch in chain:
            self._append(batch)
        return self._log_end_offset

    def append_end_txn_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                              commit: bool, leader_epoch: int,
                              transaction_version: int | None = None) -> LogAppendInfo:
        """Write a COMMIT or ABORT marker as the leader (origin COORDINATOR): producer-epoch and
        coordinator-epoch fencing, no sequence checks. With ``transaction_version`` 2 a marker
        must carry an epoch greater than the producer's, or an equal one while no transaction
        is ongoing (a retried marker); Kafka 4.2+, ``ProducerAppendInfo.checkProducerEpoch``."""
        v.producer_id(producer_id, "producer_id")
        v.producer_epoch(producer_epoch, "producer_epoch")
        v.leader_epoch(coordinator_epoch, "coordinator_epoch")
        v.require_bool(commit, "commit")
        v.leader_epoch(leader_epoch, "leader_epoch")
        transaction_version = 0 if transaction_version is None else \
            v.in_domain(transaction_version, "transaction_version", 2)
        batch = RecordBatch(self._log_end_offset, leader_epoch, [coordinator_epoch << 1 | int(commit)],
                            producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=0,
                            is_transactional=True, is_control=True, max_timestamp=self._time_ms)
        # As for data batches, Kafka assigns the epoch before it validates the producer
        # (UnifiedLog.append): a refused marker still moves the epoch cache.
        self._assign(leader_epoch, self._log_end_offset)
        entry = self._producer_state.entry(producer_id)
        if entry is None:
            fenced = False
        elif transaction_version >= 2:
            retried = producer_epoch == entry[0] and producer_id not in self._txn.ongoing
            fenced = producer_epoch <= entry[0] and not retried
        else:
            fenced = producer_epoch < entry[0]
        if entry is not None and fenced:
            raise InvalidProducerEpochError(
                f"producer {producer_id} epoch {producer_epoch} is older than the current epoch "
                f"{entry[0]} (fenced)",
                producer_id=producer_id, producer_epoch=producer_epoch, current_epoch=entry[0])
        current = self._producer_state.coordinator_epoch(producer_id)
        if current is not None and current > coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"marker for producer {producer_id} from coordinator epoch {coordinator_epoch}, "
                f"older than {current}",
                producer_id=producer_id, coordinator_epoch=coordinator_epoch,
                current_coordinator_epoch=current)
        self._append(batch)
        return LogAppendInfo(batch.base_offset, batch.last_offset, False)

    @property
    def first_unstable_offset(self) -> int | None:
        return self._txn.first_unstable_offset(self._high_watermark)

    @property
    def last_stable_offset(self) -> int:
        first = self._txn.first_unstable_offset(self._high_watermark)
        return self._high_watermark if first is None else min(first, self._high_watermark)

    def aborted_transactions(self, from_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        v.offset(from_offset, "from_offset")
        v.offset(upper_bound_offset, "upper_bound_offset")
        return self._txn.aborted_between(from_offset, upper_bound_offset)

    def ongoing_transactions(self) -> list[tuple[int, int]]:
        return sorted((first, pid) for pid, first in self._txn.ongoing.items())

    def unreplicated_transactions(self) -> list[tuple[int, int, int]]:
        return self._txn.unreplicated(self._high_watermark)

    def _append(self, batch: RecordBatch) -> None:
        self._batches.append(batch)
        self._log_end_offset = batch.last_offset + 1
        self._assign(batch.partition_leader_epoch, batch.base_offset)
        self._apply_producer_state(batch)

    def _apply_producer_state(self, batch: RecordBatch) -> None:
        self._producer_state.update(batch)
        if batch.producer_id is None:
            return
        if batch.is_control:
            self._txn.on_marker(batch.producer_id, batch.base_offset, batch.control_type == "commit")
        elif batch.is_transactional:
            self._txn.on_transactional_data(batch.producer_id, batch.base_offset)

    def _set_high_watermark(self, high_watermark: int) -> None:
        self._high_watermark = high_watermark
        self._txn.on_high_watermark(high_watermark)

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if self._kip101:
            return self._epoch_cache.assign_kip101(epoch, start_offset)
        return self._epoch_cache.assign(epoch, start_offset)

    def read(self, from_offset: int, *, max_batches: int | None = None,
             max_offset: int | None = None) -> list[RecordBatch]:
        """Batches whose last offset is >= ``from_offset`` (the first may start before it), at
        most ``max_batches``, stopping before the first batch whose last offset is >=
        ``max_offset``. :class:`OffsetOutOfRangeError` outside ``[log_start, log_end]``."""
        v.offset(from_offset, "from_offset")
        v.optional(v.count, max_batches, "max_batches")
        v.optional(v.offset, max_offset, "max_offset")
        if from_offset < self._log_start_offset or from_offset > self._log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {from_offset} is out of range [{self._log_start_offset}, "
                f"{self._log_end_offset}]",
                offset=from_offset, log_start_offset=self._log_start_offset,
                log_end_offset=self._log_end_offset,
            )
        result: list[RecordBatch] = []
        for batch in self._batches:
            if batch.last_offset < from_offset:
                continue
            if max_offset is not None and batch.last_offset >= max_offset:
                break
            if max_batches is not None and len(result) >= max_batches:
                break
            result.append(batch)
        return result

    def batches(self) -> list[RecordBatch]:
        return list(self._batches)

    def batch_containing(self, offset: int) -> RecordBatch | None:
        v.offset(offset, "offset")
        # the first batch whose last offset reaches ``offset`` (Kafka's offset lookup), if it
        # holds it: v0/v1 wrappers may overlap, and last offsets always increase
        for batch in self._batches:
            if batch.last_offset >= offset:
                return batch if batch.base_offset <= offset else None
        return None

    def set_time(self, now_ms: int) -> None:
        """The clock a leader's appends are stamped with (LogAppendTime), in ms; -1 for none."""
        self._time_ms = timestamp_arg(now_ms, "now_ms")

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record at or after the log start whose
        timestamp is at least ``timestamp`` (``UnifiedLog.fetchOffsetByTimestamp``; every record
        carries its batch's append time, so it is a batch's base offset)."""
        v.offset(timestamp, "timestamp")
        for batch in self._batches:
            if batch.last_offset >= self._log_start_offset and batch.max_timestamp >= timestamp:
                return max(batch.base_offset, self._log_start_offset), batch.max_timestamp
        return None

    def value_at(self, offset: int) -> int | None:
        """The record value at ``offset``, ``None`` if no batch holds that offset."""
        batch = self.batch_containing(offset)
        return None if batch is None else batch.records[offset - batch.base_offset]

    def holes(self) -> list[tuple[int, int]]:
        """Maximal ``[start, end)`` ranges within ``[log_start, log_end)`` that no batch covers."""
        holes, position = [], self._log_start_offset
        for batch in self._batches:
            if batch.base_offset > position:
                holes.append((position, min(batch.base_offset, self._log_end_offset)))
            position = max(position, batch.last_offset + 1)
        if position < self._log_end_offset:
            holes.append((position, self._log_end_offset))
        return holes

    def truncate_to(self, target_offset: int) -> bool:
        """Kafka's ``truncateTo``: drop every batch whose last offset is >= the target (a
        mid-batch target leaves a hole), set the log end offset to it, clamp HW and recovery
        point, truncate the epoch cache and reload producer state at the target from the newest
        snapshot at or below it, taking a snapshot there (``rebuildProducerState``). At or beyond the log end
        only the epoch cache is truncated at the log end (KAFKA-10706). Returns whether data was
        removed."""
        v.offset(target_offset, "target_offset")
        if target_offset >= self._log_end_offset:
            self._epoch_cache.truncate_from_end(self._log_end_offset)
            return False
        if target_offset < self._log_start_offset:
            self.truncate_fully_and_start_at(target_offset)
            return True
        self._batches = [b for b in self._batches if b.last_offset < target_offset]
        self._log_end_offset = target_offset
        self._epoch_cache.truncate_from_end(target_offset)
        self._recovery_point = min(self._recovery_point, target_offset)
        self._reload_producer_state(target_offset)
        # After the reload, and only when cut (UnifiedLog.truncateTo): the ended transactions
        # the reload replayed below a lower HW stay known, as in Kafka.
        if self._high_watermark >= target_offset:
            self._set_high_watermark(target_offset)
        return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete everything; log start = log end = HW = recovery point = ``new_offset``."""
        v.offset(new_offset, "new_offset")
        self._batches = []
        self._log_start_offset = self._log_end_offset = new_offset
        self._high_watermark = self._recovery_point = new_offset
        self._epoch_cache.clear()
        self._producer_state.clear()
        self._txn = TxnIndex()
        self._snapshots = {}  # ProducerStateManager.truncateFullyAndStartAt

    def flush(self, up_to: int | None = None) -> None:
        """Advance the recovery point to ``up_to`` (default: the log end offset), never past the
        log end offset and never backwards."""
        v.optional(v.offset, up_to, "up_to")
        target = self._log_end_offset if up_to is None else min(up_to, self._log_end_offset)
        self._recovery_point = max(self._recovery_point, target)

    def drop_unflushed(self) -> int:
        """Crash that loses the page cache: drop every batch not wholly below the recovery
        point (a torn batch goes whole), then recover as a restart after an unclean shutdown
        does (:meth:`_recover_producer_state`, also when nothing was dropped). Returns the
        number of records dropped."""
        kept = [b for b in self._batches if b.last_offset < self._recovery_point]
        dropped = sum(len(b) for b in self._batches) - sum(len(b) for b in kept)
        self._batches = kept
        self._log_end_offset = self._data_end()
        self._recovery_point = self._log_end_offset
        self._high_watermark = min(self._high_watermark, self._log_end_offset)
        self._epoch_cache.truncate_from_end(self._log_end_offset)
        self._recover_producer_state()
        return dropped

    def update_high_watermark(self, offset: int) -> int:
        """Set HW to ``offset`` clamped into ``[log_start, log_end]`` (may go down, as on a
        follower). Returns the new HW."""
        v.offset(offset, "offset")
        self._set_high_watermark(self._clamp(offset))
        return self._high_watermark

    def maybe_increment_high_watermark(self, offset: int) -> bool:
        """Leader variant: raise HW to ``offset`` (clamped) only if that is larger."""
        v.offset(offset, "offset")
        candidate = self._clamp(offset)
        if candidate > self._high_watermark:
            self._set_high_watermark(candidate)
            return True
        return False

    def _clamp(self, offset: int) -> int:
        return max(self._log_start_offset, min(offset, self._log_end_offset))

    def assign_epoch(self, epoch: int, start_offset: int) -> bool:
        """Assign in the epoch cache with this log's rule (what ``makeLeader`` does at the log
        end offset)."""
        v.leader_epoch(epoch, "epoch")
        v.offset(start_offset, "start_offset")
        return self._assign(epoch, start_offset)

    def end_offset_for_epoch(self, requested_epoch: int | None) -> tuple[int, int] | None:
        """The cache's ``end_offset_for`` with this log's end offset."""
        return self._epoch_cache.end_offset_for(requested_epoch, self._log_end_offset)

    def epoch_for_offset(self, offset: int) -> int | None:
        return self._epoch_cache.epoch_for_offset(offset)

    def epoch_cache(self) -> LeaderEpochCache:
        """A copy of the epoch cache."""
        return self._epoch_cache.copy()

    def epoch_entries(self) -> list[tuple[int, int]]:
        return self._epoch_cache.entries()

    def epoch_boundaries(self) -> tuple[list[tuple[int, int]], RecordBatch | None]:
        """``([(epoch, base_offset)...], bad)``: the epoch of each batch that starts a new
        epoch, in log order, up to the first batch whose epoch is lower than the one before
        it; ``bad`` is that batch, or ``None``."""
        out: list[tuple[int, int]] = []
        last = -1
        for batch in self._batches:
            e = batch.partition_leader_epoch
            if e < last:
                return out, batch
            if e != last:
                out.append((e, batch.base_offset))
                last = e
        return out, None

    def producer_state(self) -> ProducerStateManager:
        """A copy of the producer state."""
        return self._producer_state.copy()

    def take_producer_snapshot(self) -> bool:
        """``ProducerStateManager.takeSnapshot`` at the log end offset: per producer its epoch,
        last batch, coordinator epoch and ongoing transaction's first offset. Nothing (``False``)
        unless the log end offset is above the newest snapshot and the log start offset."""
        return self._snapshot_at(self._log_end_offset)

    def producer_snapshot_offsets(self) -> list[int]:
        """Offsets of the producer snapshots held, increasing."""
        return sorted(self._snapshots)

    def reload(self, clean_shutdown: bool) -> None:
        """The log as a restarted broker loads it (``LogLoader.load``): the log end offset at
        the data end with the epoch cache truncated there (``truncate_to``). After a clean
        shutdown stray snapshots are removed (all but the newest: one segment) and producer
        state is reloaded at that end from the newest snapshot at or below it; after an
        unclean one it is recovered as :meth:`_recover_producer_state` says."""
        v.require_bool(clean_shutdown, "clean_shutdown")
        self._remove_stray_snapshots()
        truncated = self.truncate_to(min(self._data_end(), self._log_end_offset))
        if not clean_shutdown:
            self._recover_producer_state()
        elif not truncated:
            self._reload_producer_state(self._log_end_offset)

    def _data_end(self) -> int:
        return self._batches[-1].last_offset + 1 if self._batches else self._log_start_offset

    def _recover_producer_state(self) -> None:
        """Producer state after an unclean shutdown (``LogLoader.recoverSegment``: a temporary
        manager's reload at the segment base deletes every snapshot, ``LogSegment.recover``
        replays every batch, a snapshot is taken at the log end offset; the broker's manager
        then loads that snapshot): one batch per producer, ongoing transactions, no
        unreplicated one, aborted ones as the replay indexed them."""
        self._snapshots = {}
        self.rebuild_producer_state()
        self._snapshot_at(self._log_end_offset)
        self._reload_producer_state(self._log_end_offset)

    def _snapshot_at(self, offset: int) -> bool:
        if offset <= max(self._snapshots, default=self._log_start_offset) or offset <= self._log_start_offset:
            return False
        self._snapshots[offset] = {
            pid: (epoch, last, coordinator, self._txn.ongoing.get(pid))
            for pid, (epoch, last, coordinator) in self._producer_state.snapshot_entries().items()}
        return True

    def _remove_stray_snapshots(self) -> None:
        if self._snapshots:
            newest = max(self._snapshots)
            self._snapshots = {newest: self._snapshots[newest]}

    def _reload_producer_state(self, target: int) -> None:
        """``rebuildProducerState`` at ``target`` (batches already end below it): delete the
        snapshots above it or at/below the log start, load the newest left (one batch per
        producer, ongoing transactions, aborted ones below it kept) or start empty, replay the
        batches after it into entries merged into the loaded ones (``ProducerStateManager.merge``),
        take a snapshot at ``target``."""
        self._snapshots = {o: snap for o, snap in self._snapshots.items() if self._log_start_offset < o <= target}
        self._producer_state.clear()
        if self._snapshots:
            at = max(self._snapshots)
            self._txn.reset_to_snapshot(at)
            for pid, (epoch, last, coordinator, first) in sorted(self._snapshots[at].items()):
                self._producer_state.load_snapshot_entry(pid, epoch, last, coordinator)
                if first is not None:
                    self._txn.on_transactional_data(pid, first)
            replay = [b for b in self._batches if b.last_offset >= at]
        else:
            self._txn = TxnIndex()
            replay = self._batches
        # The replay goes into one ProducerAppendInfo per producer, merged into the loaded
        # entries at the end (UnifiedLog.loadProducersFromRecords).
        loaded, self._producer_state = self._producer_state, self._producer_state.without_batches()
        for batch in replay:
            self._apply_producer_state(batch)
        loaded.merge(self._producer_state)
        self._producer_state = loaded
        self._snapshot_at(target)

    def rebuild_producer_state(self) -> None:
        """Recompute producer state and the transaction index by replaying every batch from
        the log start, ignoring snapshots (truncation and restarts reload from one instead)."""
        self._producer_state.clear()
        self._txn = TxnIndex()
        for batch in self._batches:
            self._apply_producer_state(batch)
        self._txn.on_high_watermark(self._high_watermark)

    def copy(self) -> ReplicaLog:
        clone = ReplicaLog(self._log_start_offset, kip101_epoch_cache=self._kip101,
                           wrapper_batches=self._wrappers)
        clone._batches = list(self._batches)  # batches are frozen, sharing them is safe
        clone._log_end_offset = self._log_end_offset
        clone._high_watermark = self._high_watermark
        clone._recovery_point = self._recovery_point
        clone._epoch_cache = self._epoch_cache.copy()
        clone._producer_state = self._producer_state.copy()
        clone._txn = self._txn.copy()
        clone._snapshots = dict(self._snapshots)  # snapshots are never mutated
        return clone

    def __len__(self) -> int:
        """The number of batches."""
        return len(self._batches)

    def __repr__(self) -> str:
        return (f"ReplicaLog(log_start_offset={self._log_start_offset}, "
                f"log_end_offset={self._log_end_offset}, high_watermark={self._high_watermark}, "
                f"batches={len(self._batches)})")
