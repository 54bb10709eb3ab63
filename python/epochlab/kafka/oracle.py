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

import shutil
import struct
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION
from epochlab.kafka.jvm import ensure_jvm

__all__ = ["KafkaError", "KafkaLeaderEpochCache", "KafkaUnifiedLog", "kafka_scheduler"]

_scheduler: Any = None


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
    runnable = jpype.JProxy("java.lang.Runnable", dict={"run": lambda: None})
    scheduler.scheduleOnce("epochlab-drain", runnable).get()


class KafkaLeaderEpochCache:
    """Kafka 4.x ``LeaderEpochFileCache`` over a checkpoint file in ``directory`` (a fresh
    temporary directory, removed by :meth:`close`, when not given)."""

    def __init__(self, directory: str | Path | None = None, version: str = DEFAULT_KAFKA_VERSION) -> None:
        jpype = ensure_jvm(version)
        self._jpype = jpype
        self._owned = directory is None
        self.directory = Path(tempfile.mkdtemp(prefix="epochlab-kafka-")) if directory is None else Path(directory)
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
        if self._owned:
            shutil.rmtree(self.directory, ignore_errors=True)


def _jclass(jpype: Any, name: str) -> Any:
    return jpype.JClass(name)


class KafkaUnifiedLog:
    """Kafka 4.x ``UnifiedLog`` on a real directory, in the vocabulary of
    ``epochlab.ReplicaLog``: record values are unsigned 64-bit integers (8 big-endian bytes in
    each record's value), batches are RecordBatch v2 built by Kafka's ``MemoryRecords``
    factories, answers are Python ints and tuples, errors Kafka's error names."""

    def __init__(self, directory: str | Path | None = None, version: str = DEFAULT_KAFKA_VERSION) -> None:
        jpype = ensure_jvm(version)
        self._jpype = jpype
        j = lambda name: _jclass(jpype, name)  # noqa: E731
        self._owned = directory is None
        self.directory = Path(tempfile.mkdtemp(prefix="epochlab-kafka-")) if directory is None else Path(directory)
        self.log_dir = self.directory / "epochlab-0"
        self._file = j("java.io.File")
        self._optional = j("java.util.Optional")
        self._records = j("org.apache.kafka.common.record.internal.MemoryRecords")
        self._simple = j("org.apache.kafka.common.record.internal.SimpleRecord")
        self._none = j("org.apache.kafka.common.compress.Compression").NONE
        self._unified = j("org.apache.kafka.storage.internals.log.UnifiedLog")
        props = j("java.util.HashMap")()
        self._config = j("org.apache.kafka.storage.internals.log.LogConfig")(props)
        self._time = j("org.apache.kafka.common.utils.Time").SYSTEM
        self._psm = j("org.apache.kafka.storage.internals.log.ProducerStateManagerConfig")(86_400_000, False)
        self._stats = j("org.apache.kafka.storage.log.metrics.BrokerTopicStats")()
        self._failure = j("org.apache.kafka.storage.internals.log.LogDirFailureChannel")(1)
        self._scheduler = kafka_scheduler(version)
        self._log = self._open(clean=True, log_start_offset=0, recovery_point=0)

    def _open(self, clean: bool, log_start_offset: int, recovery_point: int) -> Any:
        return self._unified.create(self._file(str(self.log_dir)), self._config, log_start_offset,
                                    recovery_point, self._scheduler, self._stats, self._time,
                                    300_000, self._psm, 600_000, self._failure, clean,
                                    self._optional.empty())

    def _batch(self, base_offset: int, epoch: int, values: Sequence[int],
               producer: tuple[int, int, int] | None) -> Any:
        jpype = self._jpype
        # Records carry the producer's wall-clock time, as real clients stamp them: with no
        # timestamp a reloaded producer entry counts as expired (ProducerStateManager
        # removeExpiredProducers) and its sequences are forgotten.
        now = self._time.milliseconds()
        records = jpype.JArray(self._simple)(
            [self._simple(now, None, jpype.JArray(jpype.JByte)(struct.pack(">Q", v))) for v in values])
        if producer is None:
            return self._records.withRecords(base_offset, self._none, epoch, records)
        pid, pepoch, seq = producer
        return self._records.withIdempotentRecords(base_offset, self._none, pid, pepoch, seq, epoch, records)

    def _call(self, f: Any, *args: Any) -> Any:
        try:
            return f(*args)
        except self._jpype.JException as exc:
            name = exc.getClass().getSimpleName()
            return KafkaError(_ERRORS.get(name, name))

    # -- operations -------------------------------------------------------------------------
    def append_as_leader(self, values: Sequence[int], leader_epoch: int,
                         producer: tuple[int, int, int] | None) -> tuple[int, int] | KafkaError:
        info = self._call(self._log.appendAsLeader, self._batch(0, leader_epoch, values, producer), leader_epoch)
        return info if isinstance(info, KafkaError) else (int(info.firstOffset()), int(info.lastOffset()))

    def append_as_follower(self, base_offset: int, epoch: int, values: Sequence[int],
                           producer: tuple[int, int, int] | None) -> KafkaError | None:
        done = self._call(self._log.appendAsFollower, self._batch(base_offset, epoch, values, producer), epoch)
        return done if isinstance(done, KafkaError) else None

    def truncate_to(self, offset: int) -> bool:
        return bool(self._log.truncateTo(offset))

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._log.truncateFullyAndStartAt(offset, self._optional.empty())

    def update_high_watermark(self, offset: int) -> int:
        return int(self._log.updateHighWatermark(offset))

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
        return [(int(e.epoch()), int(e.startOffset())) for e in self._log.leaderEpochCache().epochEntries()]

    def close(self) -> None:
        try:
            self._log.close()
        finally:
            if self._owned:
                shutil.rmtree(self.directory, ignore_errors=True)


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
}
