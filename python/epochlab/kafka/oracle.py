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
import tempfile
from pathlib import Path
from typing import Any

from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION
from epochlab.kafka.jvm import ensure_jvm

__all__ = ["KafkaLeaderEpochCache", "kafka_scheduler"]

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
        """Wait until the scheduler has run every checkpoint flush queued so far (its one
        thread runs them in order, so a no-op queued now finishes after them)."""
        runnable = self._jpype.JProxy("java.lang.Runnable", dict={"run": lambda: None})
        self._scheduler.scheduleOnce("epochlab-drain", runnable).get()

    def reload(self) -> list[tuple[int, int]]:
        """Open a new cache from the checkpoint file Kafka wrote, as a restarted broker does
        (after the queued flushes); returns the reloaded entries."""
        self.wait_for_flushes()
        self._cache = self._open()
        return self.entries()

    def close(self) -> None:
        if self._owned:
            shutil.rmtree(self.directory, ignore_errors=True)
