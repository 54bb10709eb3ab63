"""Kafka's own storage classes as the model's oracle, driven through JPype.

:class:`KafkaLeaderEpochCache` wraps Kafka's ``LeaderEpochFileCache`` with its real
``LeaderEpochCheckpointFile`` on disk, in the same vocabulary as ``epochlab.LeaderEpochCache``
(the Rust core) and ``epochlab.reference.LeaderEpochCache`` (the pure-Python twin): ``None``
where Kafka answers UNDEFINED, Python ints and tuples everywhere else. Every call goes to the
Kafka class itself; nothing here re-implements a rule.

Why JPype: one in-process JVM (``epochlab.kafka.jvm``) costs a few microseconds per call, so a
million operations take a minute, and Kafka's objects stay live between calls (a subprocess
driver would need a wire protocol for every operation and observable).
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION
from epochlab.kafka.jvm import ensure_jvm

__all__ = ["KafkaError", "KafkaLeaderEpochCache", "KafkaProducerStateManager", "KafkaUnifiedLog", "kafka_scheduler",
           "scratch_directory"]

_scheduler: Any = None
_drain_task: Any = None


def scratch_directory() -> Path:
    """A fresh temporary directory for Kafka's files, on ``/dev/shm`` (memory) where there is
    one: Kafka's own code runs unchanged, but its fsyncs (every ``flush``, every close) and
    segment writes no longer wait for a disk, which made ``replica-log`` five times faster."""
    shm = Path("/dev/shm")
    base = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="epochlab-kafka-", dir=base))


def kafka_scheduler(version: str = DEFAULT_KAFKA_VERSION) -> Any:
    """One started ``KafkaScheduler`` (a single thread) for the checkpoint's async flushes;
    ``MockTime`` and the test schedulers are only in Kafka's test jars."""
    global _scheduler
    jpype = ensure_jvm(version)
    if _scheduler is None:
        scheduler_class = jpype.JClass("org.apache.kafka.server.util.KafkaScheduler")
        _scheduler = scheduler_class(1, True, "epochlab-oracle-")
        _scheduler.startup()
    return _scheduler


def _drain(jpype: Any, scheduler: Any) -> None:
    """Wait until ``scheduler`` has run every task queued so far (its one thread runs them in
    order, so a no-op queued now finishes after them)."""
    global _drain_task
    if _drain_task is None:
        _drain_task = jpype.JProxy("java.lang.Runnable", dict={"run": lambda: None})
    scheduler.scheduleOnce("epochlab-drain", _drain_task).get()


class KafkaLeaderEpochCache:
    """Kafka 4.x ``LeaderEpochFileCache`` over a checkpoint file in ``directory`` (a fresh
    temporary directory, removed by :meth:`close`, when not given)."""

    def __init__(self, directory: str | Path | None = None, version: str = DEFAULT_KAFKA_VERSION) -> None:
        jpype = ensure_jvm(version)
        self._jpype = jpype
        self._owned = directory is None
        self.directory = scratch_directory() if directory is None else Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._file_class = jpype.JClass("org.apache.kafka.storage.internals.checkpoint.LeaderEpochCheckpointFile")
        self._cache_class = jpype.JClass("org.apache.kafka.storage.internals.epoch.LeaderEpochFileCache")
        self._tp = jpype.JClass("org.apache.kafka.common.TopicPartition")("epochlab", 0)
        self._failure = jpype.JClass("org.apache.kafka.storage.internals.log.LogDirFailureChannel")(1)
        self._scheduler = kafka_scheduler(version)
        self.path = self.directory / "leader-epoch-checkpoint"
        self._cache = self._open()

    def _open(self) -> Any:
        java_file = self._jpype.JClass("java.io.File")(str(self.path))
        checkpoint = self._file_class(java_file, self._failure)
        return self._cache_class(self._tp, checkpoint, self._scheduler)

    # -- operations (the names of epochlab.LeaderEpochCache) --------------------------------
    def assign(self, epoch: int, start_offset: int) -> None:
        self._cache.assign(epoch, start_offset)

    def end_offset_for(self, requested_epoch: int | None, log_end_offset: int) -> tuple[int, int] | None:
        answer = self._cache.endOffsetFor(-1 if requested_epoch is None else requested_epoch, log_end_offset)
        epoch, offset = int(answer.getKey()), int(answer.getValue())
        return None if epoch == -1 or offset == -1 else (epoch, offset)

    def truncate_from_end(self, end_offset: int) -> None:
        self._cache.truncateFromEndAsyncFlush(end_offset)

    def truncate_from_start(self, start_offset: int) -> None:
        self._cache.truncateFromStartAsyncFlush(start_offset)

    def epoch_for_offset(self, offset: int) -> int | None:
        answer = self._cache.epochForOffset(offset)
        return int(answer.getAsInt()) if answer.isPresent() else None

    def latest_epoch(self) -> int | None:
        answer = self._cache.latestEpoch()
        return int(answer.get()) if answer.isPresent() else None

    def earliest_epoch(self) -> int | None:
        answer = self._cache.earliestEntry()
        return int(answer.get().epoch()) if answer.isPresent() else None

    def entries(self) -> list[tuple[int, int]]:
        return [(int(e.epoch()), int(e.startOffset())) for e in self._cache.epochEntries()]

    def clear(self) -> None:
        self._cache.clearAndFlush()

    def wait_for_flushes(self) -> None:
        """Wait until the scheduler has run every checkpoint flush queued so far."""
        _drain(self._jpype, self._scheduler)

    def reload(self) -> list[tuple[int, int]]:
        """Open a new cache from the checkpoint file Kafka wrote, as a restarted broker does
        (after the queued flushes); returns the reloaded entries."""
        self.wait_for_flushes()
        self._cache = self._open()
        return self.entries()

    def close(self) -> None:
        # The checkpoint's asynchronous flushes first: one running during the removal writes
        # its file back into the directory being removed (rmtree then leaves it behind).
        _drain(self._jpype, self._scheduler)
        if self._owned:
            shutil.rmtree(self.directory, ignore_errors=True)


def _jclass(jpype: Any, name: str) -> Any:
    return jpype.JClass(name)


class KafkaUnifiedLog:
    """Kafka 4.x ``UnifiedLog`` on a real directory, in the vocabulary of
    ``epochlab.ReplicaLog``: record values are unsigned 64-bit integers (8 big-endian bytes in
    each record's value), batches are RecordBatch v2 built by Kafka's ``MemoryRecords``
    factories, answers are Python ints and tuples, errors Kafka's error names.

    The log's ``ProducerStateManager`` (its snapshot files in the same directory) and its
    transaction index are Kafka's own; :meth:`producer_entries`, :meth:`last_stable_offset`
    and :meth:`aborted_transactions` read them."""

    def __init__(self, directory: str | Path | None = None, version: str = DEFAULT_KAFKA_VERSION) -> None:
        jpype = ensure_jvm(version)
        self._jpype = jpype
        j = lambda name: _jclass(jpype, name)  # noqa: E731
        self._owned = directory is None
        self.directory = scratch_directory() if directory is None else Path(directory)
        self.log_dir = self.directory / "epochlab-0"
        self._file = j("java.io.File")
        self._optional = j("java.util.Optional")
        self._records = j("org.apache.kafka.common.record.internal.MemoryRecords")
        self._simple = j("org.apache.kafka.common.record.internal.SimpleRecord")
        self._simple_array = jpype.JArray(self._simple)
        self._bytes = jpype.JArray(jpype.JByte)
        marker = j("org.apache.kafka.common.record.internal.EndTransactionMarker")
        control = j("org.apache.kafka.common.record.internal.ControlRecordType")
        self._marker = lambda commit, coordinator_epoch: marker(control.COMMIT if commit else control.ABORT,
                                                                 coordinator_epoch)
        self._none = j("org.apache.kafka.common.compress.Compression").NONE
        self._unified = j("org.apache.kafka.storage.internals.log.UnifiedLog")
        origin = j("org.apache.kafka.storage.internals.log.AppendOrigin")
        self._coordinator = origin.COORDINATOR
        self._request_local = j("org.apache.kafka.server.common.RequestLocal").noCaching()
        self._sentinel = j("org.apache.kafka.storage.internals.log.VerificationGuard").SENTINEL
        self._short = jpype.JShort
        props = j("java.util.HashMap")()
        # Deleted segments are still deleted asynchronously (LocalLog.deleteSegmentFiles), but at
        # once rather than a minute later: at thousands of operations a second the default
        # 60 s kept tens of thousands of deleted segments' files open (EMFILE).
        props.put("file.delete.delay.ms", "0")
        self._config = j("org.apache.kafka.storage.internals.log.LogConfig")(props)
        self._time = j("org.apache.kafka.common.utils.Time").SYSTEM
        self._psm = j("org.apache.kafka.storage.internals.log.ProducerStateManagerConfig")(86_400_000, False)
        self._stats = j("org.apache.kafka.storage.log.metrics.BrokerTopicStats")()
        self._failure = j("org.apache.kafka.storage.internals.log.LogDirFailureChannel")(1)
        self._scheduler = kafka_scheduler(version)
        self._unreplicated_field: Any = None
        self._log = self._open(clean=True, log_start_offset=0, recovery_point=0)

    def _open(self, clean: bool, log_start_offset: int, recovery_point: int) -> Any:
        log = self._unified.create(self._file(str(self.log_dir)), self._config, log_start_offset,
                                   recovery_point, self._scheduler, self._stats, self._time,
                                   300_000, self._psm, 600_000, self._failure, clean,
                                   self._optional.empty())
        # Both objects live as long as the log (UnifiedLog keeps them final): one JPype call
        # less per observable.
        self._epochs = log.leaderEpochCache()
        self._producers = log.producerStateManager()
        return log

    def _batch(self, base_offset: int, epoch: int, values: Sequence[int],
               producer: tuple[int, int, int] | None, transactional: bool = False) -> Any:
        # Records carry the producer's wall-clock time, as real clients stamp them: with no
        # timestamp a reloaded producer entry counts as expired (ProducerStateManager
        # removeExpiredProducers) and its sequences are forgotten.
        now = self._time.milliseconds()
        records = self._simple_array([self._simple(now, None, self._bytes(struct.pack(">Q", v))) for v in values])
        if producer is None:
            return self._records.withRecords(base_offset, self._none, epoch, records)
        pid, pepoch, seq = producer
        factory = self._records.withTransactionalRecords if transactional else self._records.withIdempotentRecords
        return factory(base_offset, self._none, pid, pepoch, seq, epoch, records)

    def _marker_batch(self, base_offset: int, epoch: int, producer_id: int, producer_epoch: int,
                      coordinator_epoch: int, commit: bool) -> Any:
        return self._records.withEndTransactionMarker(base_offset, self._time.milliseconds(), epoch, producer_id,
                                                      producer_epoch, self._marker(commit, coordinator_epoch))

    def _call(self, f: Any, *args: Any) -> Any:
        try:
            return f(*args)
        except self._jpype.JException as exc:
            name = exc.getClass().getSimpleName()
            return KafkaError(_ERRORS.get(name, name))

    # -- operations -------------------------------------------------------------------------
    def append_as_leader(self, values: Sequence[int], leader_epoch: int,
                         producer: tuple[int, int, int] | None,
                         transactional: bool = False) -> tuple[int, int] | KafkaError:
        """``appendAsLeader`` (origin CLIENT): ``(first offset, last offset)``, the original
        offsets for a duplicate, or Kafka's error name."""
        batch = self._batch(0, leader_epoch, values, producer, transactional)
        info = self._call(self._log.appendAsLeader, batch, leader_epoch)
        return info if isinstance(info, KafkaError) else (int(info.firstOffset()), int(info.lastOffset()))

    def append_end_txn_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                              leader_epoch: int, transaction_version: int = 0) -> tuple[int, int] | KafkaError:
        """A COMMIT/ABORT marker written by the leader for the transaction coordinator
        (``appendAsLeader`` with origin COORDINATOR, as ``ReplicaManager`` does for
        WriteTxnMarkers): ``(offset, offset)`` or Kafka's error name."""
        batch = self._marker_batch(0, leader_epoch, producer_id, producer_epoch, coordinator_epoch, commit)
        info = self._call(self._log.appendAsLeader, batch, leader_epoch, self._coordinator, self._request_local,
                          self._sentinel, self._short(transaction_version))
        return info if isinstance(info, KafkaError) else (int(info.firstOffset()), int(info.lastOffset()))

    def append_as_follower(self, base_offset: int, epoch: int, values: Sequence[int],
                           producer: tuple[int, int, int] | None,
                           transactional: bool = False) -> KafkaError | None:
        batch = self._batch(base_offset, epoch, values, producer, transactional)
        done = self._call(self._log.appendAsFollower, batch, epoch)
        return done if isinstance(done, KafkaError) else None

    def append_marker_as_follower(self, base_offset: int, epoch: int, producer_id: int, producer_epoch: int,
                                  coordinator_epoch: int, commit: bool) -> KafkaError | None:
        batch = self._marker_batch(base_offset, epoch, producer_id, producer_epoch, coordinator_epoch, commit)
        done = self._call(self._log.appendAsFollower, batch, epoch)
        return done if isinstance(done, KafkaError) else None

    def truncate_to(self, offset: int) -> bool:
        return bool(self._log.truncateTo(offset))

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._log.truncateFullyAndStartAt(offset, self._optional.empty())

    def update_high_watermark(self, offset: int) -> int:
        return int(self._log.updateHighWatermark(offset))

    def take_snapshot(self) -> None:
        """``ProducerStateManager.takeSnapshot`` at the current map end offset (what a segment
        roll does): a later truncation or restart reloads from the newest snapshot at or below
        its target and replays the log after it."""
        self._producers.takeSnapshot()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int] | None:
        answer = self._log.endOffsetForEpoch(epoch)
        if not answer.isPresent():
            return None
        found = answer.get()
        return (int(found.epoch()), int(found.offset()))

    def reopen(self, clean: bool) -> None:
        """Close (flushing everything) and open again; ``clean=False`` makes Kafka recover the
        log as after an unclean shutdown (segments re-read from offset 0, producer state and
        epoch cache rebuilt). The HW is restored as the broker restores it (checkpoint)."""
        hw, start = self.high_watermark(), self.log_start_offset()
        self._log.flush(True)
        _drain(self._jpype, self._scheduler)  # the epoch checkpoint's async flushes
        self._log.close()
        self._log = self._open(clean=clean, log_start_offset=start, recovery_point=0)
        self._log.updateHighWatermark(hw)

    # -- observables ------------------------------------------------------------------------
    def log_end_offset(self) -> int:
        return int(self._log.logEndOffset())

    def log_start_offset(self) -> int:
        return int(self._log.logStartOffset())

    def high_watermark(self) -> int:
        return int(self._log.highWatermark())

    def epoch_entries(self) -> list[tuple[int, int]]:
        return [(int(e.epoch()), int(e.startOffset())) for e in self._epochs.epochEntries()]

    def producer_entries(self) -> tuple[tuple[int, int, tuple[tuple[int, int, int, int], ...], int | None], ...]:
        """``ProducerStateManager.activeProducers``: per producer id (increasing) its epoch,
        its cached batches ``(first_seq, last_seq, first_offset, last_offset)`` oldest first,
        and its coordinator epoch (``None`` for Kafka's -1)."""
        return _producer_rows(self._producers)

    def first_unstable_offset(self) -> int | None:
        """``UnifiedLog.firstUnstableOffset``: a cached value, refreshed by appends, HW and log
        start updates (``maybeIncrementFirstUnstableOffset``) but not by ``truncateTo``."""
        answer = self._log.firstUnstableOffset()
        return int(answer.get()) if answer.isPresent() else None

    def producer_first_unstable_offset(self) -> int | None:
        """``ProducerStateManager.firstUnstableOffset``, the current value the log's cache is
        refreshed from (at least the log start offset, as ``maybeIncrementFirstUnstableOffset``
        clamps it)."""
        answer = self._producers.firstUnstableOffset()
        return max(int(answer.get().messageOffset), self.log_start_offset()) if answer.isPresent() else None

    def last_stable_offset(self) -> int:
        return int(self._log.lastStableOffset())

    def settled_first_unstable_offset(self) -> int | None:
        """The first unstable offset as Kafka answers it once its bookkeeping has caught up
        with the HW it already has: the first ongoing transaction, or the first ended one
        whose marker is at or above the HW (``ProducerStateManager.unreplicatedTxns`` after
        ``onHighWatermarkUpdated(HW)``), at least the log start. ``UnifiedLog.truncateTo``
        moves the HW only when it is at or above the new log end, so until the next HW update
        the replayed transactions whose markers are below it stay unreplicated (and the next
        append makes the LSO go back to them); the model keeps no such state."""
        if self._unreplicated_field is None:
            field = self._producers.getClass().getDeclaredField("unreplicatedTxns")
            field.setAccessible(True)
            self._unreplicated_field = field
        high_watermark = self.high_watermark()
        firsts = [int(t.firstOffset.messageOffset) for t in self._unreplicated_field.get(self._producers).values()
                  if t.lastOffset.isPresent() and t.lastOffset.getAsLong() >= high_watermark]
        undecided = self.first_undecided_offset()
        if undecided is not None:
            firsts.append(undecided)
        return max(min(firsts), self.log_start_offset()) if firsts else None

    def settled_last_stable_offset(self) -> int:
        """``min(settled_first_unstable_offset, HW)``, as ``UnifiedLog.lastStableOffset``."""
        first, high_watermark = self.settled_first_unstable_offset(), self.high_watermark()
        return high_watermark if first is None else min(first, high_watermark)

    def first_undecided_offset(self) -> int | None:
        """``ProducerStateManager.firstUndecidedOffset``: the first ongoing transaction's start."""
        answer = self._producers.firstUndecidedOffset()
        return int(answer.getAsLong()) if answer.isPresent() else None

    def aborted_transactions(self, from_offset: int, upper_bound_offset: int) -> list[tuple[int, int, int, int]]:
        """``collectAbortedTransactions`` (the segments' transaction indexes):
        ``(producer_id, first_offset, last_offset, last_stable_offset)`` in index order."""
        return [(int(t.producerId()), int(t.firstOffset()), int(t.lastOffset()), int(t.lastStableOffset()))
                for t in self._log.collectAbortedTransactions(from_offset, upper_bound_offset)]

    def close(self) -> None:
        try:
            self._log.close()
            # the epoch checkpoint's asynchronous flushes, before the directory goes: one
            # running during the removal wrote its file back (a leftover directory)
            _drain(self._jpype, self._scheduler)
        finally:
            if self._owned:
                shutil.rmtree(self.directory, ignore_errors=True)


class KafkaProducerStateManager:
    """Kafka 4.x ``ProducerStateManager`` alone on a real directory (its snapshot files), in
    the vocabulary of ``epochlab.ProducerStateManager``. Each batch goes through the calls
    ``UnifiedLog`` makes for it: for a client batch ``ProducerStateEntry.findDuplicateBatch``
    on ``lastEntry`` (as ``analyzeAndValidateProducerState``), then
    ``prepareUpdate(producerId, origin)``, ``ProducerAppendInfo.append``, ``update`` and
    ``updateMapEndOffset``. Batches are placed at the map end offset."""

    def __init__(self, directory: str | Path | None = None, version: str = DEFAULT_KAFKA_VERSION) -> None:
        jpype = ensure_jvm(version)
        self._jpype = jpype
        j = lambda name: _jclass(jpype, name)  # noqa: E731
        self._owned = directory is None
        self.directory = scratch_directory() if directory is None else Path(directory)
        # Kafka writes its snapshot files into the directory but does not create it (a broker's
        # log directory exists before its ProducerStateManager)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._records = j("org.apache.kafka.common.record.internal.MemoryRecords")
        self._simple = j("org.apache.kafka.common.record.internal.SimpleRecord")
        self._simple_array = jpype.JArray(self._simple)
        self._bytes = jpype.JArray(jpype.JByte)
        self._none = j("org.apache.kafka.common.compress.Compression").NONE
        marker = j("org.apache.kafka.common.record.internal.EndTransactionMarker")
        control = j("org.apache.kafka.common.record.internal.ControlRecordType")
        self._marker = lambda commit, coordinator_epoch: marker(control.COMMIT if commit else control.ABORT,
                                                                 coordinator_epoch)
        origin = j("org.apache.kafka.storage.internals.log.AppendOrigin")
        self._origins = {"client": origin.CLIENT, "replication": origin.REPLICATION}
        self._empty = j("java.util.Optional").empty()
        self._time = j("org.apache.kafka.common.utils.Time").SYSTEM
        # findDuplicateBatch is package-private; reflection calls that very method.
        entry_class = j("org.apache.kafka.storage.internals.log.ProducerStateEntry")
        batch_class = j("org.apache.kafka.common.record.internal.RecordBatch")
        self._find_duplicate = entry_class.class_.getDeclaredMethod("findDuplicateBatch", batch_class.class_)
        self._find_duplicate.setAccessible(True)
        self._manager = j("org.apache.kafka.storage.internals.log.ProducerStateManager")(
            j("org.apache.kafka.common.TopicPartition")("epochlab", 0), j("java.io.File")(str(self.directory)),
            900_000, j("org.apache.kafka.storage.internals.log.ProducerStateManagerConfig")(86_400_000, False),
            self._time)

    def _batch(self, producer_id: int, producer_epoch: int, base_sequence: int, count: int) -> Any:
        now = self._time.milliseconds()
        values = self._simple_array([self._simple(now, None, self._bytes(struct.pack(">Q", v))) for v in range(count)])
        records = self._records.withIdempotentRecords(self.map_end_offset(), self._none, producer_id, producer_epoch,
                                                      base_sequence, 0, values)
        return records.batches().iterator().next()

    def append(self, producer_id: int, producer_epoch: int, base_sequence: int, count: int,
               origin: str) -> tuple[int, int] | KafkaError | None:
        """A data batch of ``count`` records at the map end offset, from a client (validated,
        deduplicated) or replicated: ``None`` when appended, the original ``(first offset,
        last offset)`` of a duplicate, or Kafka's error name."""
        batch = self._batch(producer_id, producer_epoch, base_sequence, count)
        if origin == "client":
            entry = self._manager.lastEntry(producer_id)
            if entry.isPresent():
                duplicate = self._find_duplicate.invoke(entry.get(), batch)
                if duplicate.isPresent():
                    found = duplicate.get()
                    return (int(found.firstOffset()), int(found.lastOffset()))
        return self._apply(producer_id, batch, origin)

    def append_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                      commit: bool) -> KafkaError | None:
        """A replicated COMMIT/ABORT marker at the map end offset (origin REPLICATION: epochs
        only logged, as a follower writes it)."""
        records = self._records.withEndTransactionMarker(self.map_end_offset(), self._time.milliseconds(), 0,
                                                         producer_id, producer_epoch,
                                                         self._marker(commit, coordinator_epoch))
        return self._apply(producer_id, records.batches().iterator().next(), "replication")

    def _apply(self, producer_id: int, batch: Any, origin: str) -> KafkaError | None:
        try:
            info = self._manager.prepareUpdate(producer_id, self._origins[origin])
            completed = info.append(batch, self._empty)
        except self._jpype.JException as exc:
            name = exc.getClass().getSimpleName()
            return KafkaError(_ERRORS.get(name, name))
        self._manager.update(info)
        if completed.isPresent():  # as UnifiedLog.append does for a marker ending a transaction
            self._manager.completeTxn(completed.get())
        self._manager.updateMapEndOffset(batch.lastOffset() + 1)
        return None

    def skip(self, count: int) -> None:
        """``count`` offsets of batches without producer id (only the map end offset moves)."""
        self._manager.updateMapEndOffset(self.map_end_offset() + count)

    def take_snapshot(self) -> None:
        self._manager.takeSnapshot()

    def map_end_offset(self) -> int:
        return int(self._manager.mapEndOffset())

    def entries(self) -> tuple[tuple[int, int, tuple[tuple[int, int, int, int], ...], int | None], ...]:
        """As :meth:`KafkaUnifiedLog.producer_entries`."""
        return _producer_rows(self._manager)

    def close(self) -> None:
        if self._owned:
            shutil.rmtree(self.directory, ignore_errors=True)


def _producer_rows(manager: Any) -> tuple[tuple[int, int, tuple[tuple[int, int, int, int], ...], int | None], ...]:
    """A ``ProducerStateManager``'s active producers, in increasing id order: id, epoch, cached
    batches ``(first_seq, last_seq, first_offset, last_offset)`` oldest first, and coordinator
    epoch (``None`` for Kafka's -1)."""
    rows = []
    for pid in manager.activeProducers().keySet():
        entry = manager.lastEntry(pid).get()
        batches = tuple((int(b.firstSeq()), int(b.lastSeq()), int(b.firstOffset()), int(b.lastOffset()))
                        for b in entry.batchMetadata())
        coordinator = int(entry.coordinatorEpoch())
        rows.append((int(pid), int(entry.producerEpoch()), batches, None if coordinator < 0 else coordinator))
    return tuple(sorted(rows))


class KafkaError(str):
    """An error Kafka answered with, by Kafka's error name (``OUT_OF_ORDER_SEQUENCE_NUMBER``)."""


#: Kafka's exception classes -> Kafka's error names (``Errors.java``).
_ERRORS = {
    "OutOfOrderSequenceException": "OUT_OF_ORDER_SEQUENCE_NUMBER",
    "InvalidProducerEpochException": "INVALID_PRODUCER_EPOCH",
    "ProducerFencedException": "PRODUCER_FENCED",
    "UnexpectedAppendOffsetException": "UNEXPECTED_APPEND_OFFSET",
    "InvalidRecordException": "INVALID_RECORD",
    "InvalidTxnStateException": "INVALID_TXN_STATE",
    "TransactionCoordinatorFencedException": "TRANSACTION_COORDINATOR_FENCED",
}
