"""Transaction index of one replica (``docs/core-semantics.md``, "Transactions"), plainly.

Ongoing transactions (producer -> first offset), ended ones (marker -> first offset, producer)
and the aborted index. A transaction is unreplicated while its marker is at or above the
current high watermark, and forgotten for good once the HW passed it (Kafka's
``ProducerStateManager.onHighWatermarkUpdated``); the last stable offset follows.
"""

from __future__ import annotations

AbortedTxn = tuple[int, int, int, int]  # (producer_id, first_offset, last_offset, last_stable_offset)


class TxnIndex:
    __slots__ = ("ongoing", "completed", "aborted")

    def __init__(self) -> None:
        self.ongoing: dict[int, int] = {}  # producer id -> first offset
        self.completed: dict[int, tuple[int, int]] = {}  # marker offset -> (first offset, producer)
        self.aborted: list[AbortedTxn] = []

    def copy(self) -> TxnIndex:
        clone = TxnIndex()
        clone.ongoing, clone.completed = dict(self.ongoing), dict(self.completed)
        clone.aborted = list(self.aborted)
        return clone

    def reset_to_snapshot(self, snapshot_offset: int) -> None:
        """As a reload from a snapshot at ``snapshot_offset`` starts: no ongoing or ended
        transaction, aborted ones with a marker below it kept (the ``.txnindex`` files)."""
        self.ongoing, self.completed = {}, {}
        self.aborted = [t for t in self.aborted if t[2] < snapshot_offset]

    def on_transactional_data(self, producer_id: int, base_offset: int) -> None:
        self.ongoing.setdefault(producer_id, base_offset)

    def on_marker(self, producer_id: int, marker_offset: int, commit: bool) -> None:
        # no open transaction: the marker ends nothing (ProducerAppendInfo.appendEndTxnMarker)
        if producer_id not in self.ongoing:
            return
        first = self.ongoing.pop(producer_id)
        self.completed[marker_offset] = (first, producer_id)
        if not commit:
            lso = min(self.ongoing.values(), default=marker_offset + 1)
            self.aborted.append((producer_id, first, marker_offset, lso))

    def on_high_watermark(self, high_watermark: int) -> None:
        """Forget ended transactions whose marker is below the new HW; a HW going back does
        not bring them back (``removeUnreplicatedTransactions``)."""
        self.completed = {m: t for m, t in self.completed.items() if m >= high_watermark}

    def unreplicated(self, high_watermark: int) -> list[tuple[int, int, int]]:
        """``(first offset, producer, marker)`` of ended transactions with marker >= HW."""
        return sorted((f, p, m) for m, (f, p) in self.completed.items() if m >= high_watermark)

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        firsts = list(self.ongoing.values()) + [f for f, _, _ in self.unreplicated(high_watermark)]
        return min(firsts) if firsts else None

    def aborted_between(self, from_offset: int, upper_bound: int) -> list[AbortedTxn]:
        return [t for t in self.aborted if t[2] >= from_offset and t[1] < upper_bound]
