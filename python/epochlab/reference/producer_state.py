"""Per-producer state (Kafka's ``ProducerStateManager``): deduplication and sequence order."""

from __future__ import annotations

from typing import Any

from epochlab.errors import InvalidProducerEpochError, OutOfOrderSequenceError

from . import _validate as v
from .batch import RecordBatch

# Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN (KAFKA-5494): enough for max.in.flight = 5.
BATCHES_TO_RETAIN = 5

BatchMetadata = tuple[int, int, int, int]  # (first_seq, last_seq, base_offset, last_offset)


class ProducerStateManager:
    """Per producer id: its epoch and the metadata of its last 5 batches, oldest first."""

    __slots__ = ("_entries", "_coordinator_epochs")

    def __init__(self) -> None:
        # producer id -> (producer epoch, cached batch metadata oldest first)
        self._entries: dict[int, tuple[int, list[BatchMetadata]]] = {}
        # producer id -> coordinator epoch of its latest transaction marker
        self._coordinator_epochs: dict[int, int] = {}

    def check_leader_append(self, batch: RecordBatch) -> tuple[int, int] | None:
        """Validate a client batch as the leader does, without changing state: the original
        ``(base_offset, last_offset)`` of a duplicate, ``None`` for a batch to append; raises
        :class:`InvalidProducerEpochError` or :class:`OutOfOrderSequenceError`."""
        _require_batch(batch)
        pid = batch.producer_id
        if pid is None or pid not in self._entries:
            # Unknown producer: any sequence is accepted (KIP-360 era, state may have expired).
            return None
        epoch, cached = self._entries[pid]
        seqs = (batch.base_sequence, batch.last_sequence)
        if batch.producer_epoch == epoch:
            for first_seq, last_seq, base, last in cached:
                if (first_seq, last_seq) == seqs:
                    return (base, last)
        if batch.producer_epoch < epoch:  # type: ignore[operator]
            raise InvalidProducerEpochError(
                f"producer {pid} epoch {batch.producer_epoch} is older than the current epoch "
                f"{epoch} (fenced)",
                producer_id=pid, producer_epoch=batch.producer_epoch, current_epoch=epoch,
            )
        if batch.producer_epoch > epoch:  # type: ignore[operator]
            expected = 0  # a new producer epoch restarts its sequences
        else:
            expected = 0 if not cached else v.wrapping_sequence_add(cached[-1][1], 1)
        if batch.base_sequence != expected:
            raise OutOfOrderSequenceError(
                f"out of order sequence for producer {pid} epoch {batch.producer_epoch}: "
                f"got {batch.base_sequence}, expected {expected}",
                producer_id=pid, producer_epoch=batch.producer_epoch,
                base_sequence=batch.base_sequence, expected_sequence=expected,
            )
        return None

    def update(self, batch: RecordBatch) -> None:
        """Record an appended batch without validation (leader or follower). A different
        producer epoch, even an older one from a follower's leader, clears the cached batches;
        a control batch caches nothing; at most 5 batches are retained."""
        _require_batch(batch)
        pid = batch.producer_id
        if pid is None:
            return
        epoch, cached = self._entries.get(pid, (batch.producer_epoch, []))
        if batch.producer_epoch != epoch:
            epoch, cached = batch.producer_epoch, []
        if batch.is_control:
            self._coordinator_epochs[pid] = batch.coordinator_epoch  # type: ignore[assignment]
        else:
            # A batch with a producer id has all producer fields (RecordBatch guarantees it).
            meta = (batch.base_sequence, batch.last_sequence, batch.base_offset, batch.last_offset)
            cached = (cached + [meta])[-BATCHES_TO_RETAIN:]  # type: ignore[list-item, assignment]
        self._entries[pid] = (epoch, cached)  # type: ignore[assignment]

    def entry(self, producer_id: int) -> tuple[int, list[BatchMetadata]] | None:
        """``(producer_epoch, [(first_seq, last_seq, base_offset, last_offset), ...])`` oldest
        first, or ``None`` for an unknown producer id."""
        v.producer_id(producer_id, "producer_id")
        found = self._entries.get(producer_id)
        return None if found is None else (found[0], list(found[1]))

    def coordinator_epoch(self, producer_id: int) -> int | None:
        """Coordinator epoch of the producer's latest transaction marker, if any."""
        v.producer_id(producer_id, "producer_id")
        return self._coordinator_epochs.get(producer_id)

    def producer_ids(self) -> list[int]:
        """Known producer ids in increasing order."""
        return sorted(self._entries)

    def snapshot(self) -> list[tuple[int, int, list[BatchMetadata]]]:
        """Every entry as ``(producer_id, producer_epoch, batches)``, by producer id."""
        return [(pid, self._entries[pid][0], list(self._entries[pid][1])) for pid in sorted(self._entries)]

    def snapshot_entries(self) -> dict[int, tuple[int, BatchMetadata | None, int | None]]:
        """Per producer id what a snapshot keeps: ``(epoch, last batch or None, coordinator
        epoch or None)`` (``ProducerStateManager.writeSnapshot``)."""
        return {pid: (epoch, cached[-1] if cached else None, self._coordinator_epochs.get(pid))
                for pid, (epoch, cached) in self._entries.items()}

    def load_snapshot_entry(self, producer_id: int, epoch: int, last_batch: BatchMetadata | None,
                            coordinator_epoch: int | None) -> None:
        """An entry as ``readSnapshot`` rebuilds it: its one batch."""
        self._entries[producer_id] = (epoch, [] if last_batch is None else [last_batch])
        if coordinator_epoch is not None:
            self._coordinator_epochs[producer_id] = coordinator_epoch

    def without_batches(self) -> ProducerStateManager:
        """Every producer with its epoch and coordinator epoch but no batch: where a rebuild's
        ``ProducerAppendInfo`` starts (``ProducerStateEntry.withProducerId``)."""
        clone = ProducerStateManager()
        clone._entries = {pid: (epoch, []) for pid, (epoch, _) in self._entries.items()}
        clone._coordinator_epochs = dict(self._coordinator_epochs)
        return clone

    def merge(self, replayed: ProducerStateManager) -> None:
        """Merge the entries a replay built (from :meth:`without_batches`) into this state, as
        ``UnifiedLog.loadProducersFromRecords`` passes each producer's ``ProducerAppendInfo``
        to ``update`` (``ProducerStateEntry.update``): the replay's final epoch replaces the
        entry's, and forgets its batches, only if it differs; replayed batches are appended
        (5 kept); the replay's coordinator epoch is taken."""
        for pid, (epoch, batches) in replayed._entries.items():
            current_epoch, cached = self._entries.get(pid, (epoch, []))
            if current_epoch != epoch:
                cached = []
            self._entries[pid] = (epoch, (cached + batches)[-BATCHES_TO_RETAIN:])
        for pid, coordinator_epoch in replayed._coordinator_epochs.items():
            self._coordinator_epochs[pid] = coordinator_epoch

    def clear(self) -> None:
        self._entries = {}
        self._coordinator_epochs = {}

    def copy(self) -> ProducerStateManager:
        clone = ProducerStateManager()
        clone._entries = {pid: (epoch, list(cached)) for pid, (epoch, cached) in self._entries.items()}
        clone._coordinator_epochs = dict(self._coordinator_epochs)
        return clone

    def __len__(self) -> int:
        return len(self._entries)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducerStateManager):
            return NotImplemented
        return (self._entries, self._coordinator_epochs) == (other._entries, other._coordinator_epochs)

    def __repr__(self) -> str:
        return f"ProducerStateManager({self.snapshot()!r})"


def _require_batch(batch: Any) -> None:
    if not isinstance(batch, RecordBatch):
        raise TypeError(f"argument 'batch' must be RecordBatch, not {type(batch).__name__}")
