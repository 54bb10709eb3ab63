"""Divergence search: the follower's truncation decision per protocol generation, the leader's
fetch check, KIP-320 fencing, and two ways to compare replica logs."""

from __future__ import annotations

import bisect
from typing import Any

from epochlab.errors import FencedLeaderEpochError, UnknownLeaderEpochError

from . import _validate as v
from .batch import RecordBatch
from .epoch_cache import LeaderEpochCache
from .log import ReplicaLog


class TruncationOutcome:
    """The follower's decision: ``kind`` is ``"truncate"``, ``"truncate_and_retry"`` (KIP-279
    loop), ``"fenced"``, ``"unknown_leader_epoch"`` or ``"discard"`` (KIP-320, epoch changed while
    in flight); ``offset`` is set for the first two only.

    >>> TruncationOutcome.truncate(2).offset
    2
    """

    __slots__ = ("_kind", "_offset")
    _kind: str
    _offset: int | None

    def __init__(self, kind: str, offset: int | None) -> None:
        object.__setattr__(self, "_kind", kind)
        object.__setattr__(self, "_offset", offset)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("TruncationOutcome is frozen")

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def offset(self) -> int | None:
        return self._offset

    @staticmethod
    def truncate(offset: int) -> TruncationOutcome:
        return TruncationOutcome("truncate", v.offset(offset, "offset"))

    @staticmethod
    def truncate_and_retry(offset: int) -> TruncationOutcome:
        return TruncationOutcome("truncate_and_retry", v.offset(offset, "offset"))

    @staticmethod
    def fenced() -> TruncationOutcome:
        return TruncationOutcome("fenced", None)

    @staticmethod
    def unknown_leader_epoch() -> TruncationOutcome:
        return TruncationOutcome("unknown_leader_epoch", None)

    @staticmethod
    def discard() -> TruncationOutcome:
        return TruncationOutcome("discard", None)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TruncationOutcome):
            return NotImplemented
        return (self._kind, self._offset) == (other._kind, other._offset)

    def __hash__(self) -> int:
        return hash((self._kind, self._offset))

    def __repr__(self) -> str:
        if self._offset is None:
            return f"TruncationOutcome.{self._kind}()"
        return f"TruncationOutcome.{self._kind}({self._offset})"


class FetchCheck:
    """The leader's verdict on a follower fetch: ``kind`` is ``"read"``, ``"diverging"`` (with
    ``diverging_epoch = (epoch, end_offset)``) or ``"offset_out_of_range"``.

    >>> FetchCheck.diverging(1, 2).diverging_epoch
    (1, 2)
    """

    __slots__ = ("_kind", "_diverging_epoch")
    _kind: str
    _diverging_epoch: tuple[int, int] | None

    def __init__(self, kind: str, diverging_epoch: tuple[int, int] | None) -> None:
        object.__setattr__(self, "_kind", kind)
        object.__setattr__(self, "_diverging_epoch", diverging_epoch)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("FetchCheck is frozen")

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def diverging_epoch(self) -> tuple[int, int] | None:
        return self._diverging_epoch

    @staticmethod
    def read() -> FetchCheck:
        return FetchCheck("read", None)

    @staticmethod
    def diverging(epoch: int, end_offset: int) -> FetchCheck:
        v.leader_epoch(epoch, "epoch")
        v.offset(end_offset, "end_offset")
        return FetchCheck("diverging", (epoch, end_offset))

    @staticmethod
    def offset_out_of_range() -> FetchCheck:
        return FetchCheck("offset_out_of_range", None)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FetchCheck):
            return NotImplemented
        return (self._kind, self._diverging_epoch) == (other._kind, other._diverging_epoch)

    def __hash__(self) -> int:
        return hash((self._kind, self._diverging_epoch))

    def __repr__(self) -> str:
        if self._diverging_epoch is None:
            return f"FetchCheck.{self._kind}()"
        return f"FetchCheck.diverging{self._diverging_epoch}"


def _check_positions(log_end_offset: Any, high_watermark: Any) -> None:
    """Every truncation function needs ``high_watermark <= log_end_offset``."""
    v.offset(log_end_offset, "log_end_offset")
    v.offset(high_watermark, "high_watermark")
    if high_watermark > log_end_offset:
        raise v.invalid("high_watermark", high_watermark,
                        f"above the log end offset {log_end_offset}")


def _answer(answer: Any, argument: str) -> tuple[int, int]:
    """An ``(epoch, end_offset)`` pair from the leader."""
    try:
        epoch, end_offset = answer
    except (TypeError, ValueError):
        raise TypeError(f"argument '{argument}' must be an (epoch, end_offset) pair") from None
    return v.leader_epoch(epoch, argument), v.offset(end_offset, argument)


def _require_cache(cache: Any, argument: str) -> LeaderEpochCache:
    if not isinstance(cache, LeaderEpochCache):
        raise TypeError(f"argument '{argument}' must be LeaderEpochCache, not {type(cache).__name__}")
    return cache


def truncate_to_high_watermark(high_watermark: int, log_end_offset: int) -> TruncationOutcome:
    """G0 (before KIP-101): a new follower truncates to its local high watermark."""
    v.offset(high_watermark, "high_watermark")
    v.offset(log_end_offset, "log_end_offset")
    _check_positions(log_end_offset, high_watermark)
    return TruncationOutcome.truncate(high_watermark)


def kip101_truncation(leader_end_offset: int | None, log_end_offset: int, high_watermark: int) -> TruncationOutcome:
    """G1 (0.11): truncate to the leader's end offset for our latest epoch, never beyond our log
    end; an undefined answer (``None``) falls back to the high watermark."""
    v.optional(v.offset, leader_end_offset, "leader_end_offset")
    _check_positions(log_end_offset, high_watermark)
    if leader_end_offset is None:
        return TruncationOutcome.truncate(high_watermark)
    return TruncationOutcome.truncate(min(leader_end_offset, log_end_offset))


def _epoch_search(
    leader_answer: tuple[int, int], follower: LeaderEpochCache, log_end_offset: int,
    lookup: str, retry: bool,
) -> TruncationOutcome:
    """The G2 decision on a defined leader answer, with the follower's ``lookup`` method. When
    the follower lacks the leader's epoch it truncates to its own end of the nearest lower epoch
    and (if ``retry``) asks again with the new latest epoch."""
    leader_epoch, leader_end = leader_answer
    mine = getattr(follower, lookup)(leader_epoch, log_end_offset)
    if mine is None:
        return TruncationOutcome.truncate(min(leader_end, log_end_offset))
    my_epoch, my_end = mine
    if my_epoch != leader_epoch:
        make = TruncationOutcome.truncate_and_retry if retry else TruncationOutcome.truncate
        return make(min(my_end, log_end_offset))
    return TruncationOutcome.truncate(min(my_end, leader_end, log_end_offset))


def kip279_truncation(
    leader_answer: tuple[int, int] | None, follower: LeaderEpochCache, log_end_offset: int,
    high_watermark: int,
) -> TruncationOutcome:
    """G2 (2.0): the iterative search on ``(epoch, end_offset)`` answers, with Kafka 2.0's
    lookups; an undefined answer truncates to the high watermark (the initial fetch offset)."""
    answer = None if leader_answer is None else _answer(leader_answer, "leader_answer")
    _require_cache(follower, "follower")
    _check_positions(log_end_offset, high_watermark)
    if answer is None:
        return TruncationOutcome.truncate(high_watermark)
    return _epoch_search(answer, follower, log_end_offset, "end_offset_for_kip279", retry=True)


_LEADER_ERRORS = {
    "fenced_leader_epoch": TruncationOutcome.fenced,
    "unknown_leader_epoch": TruncationOutcome.unknown_leader_epoch,
}


def kip320_truncation(
    leader_answer: tuple[int, int] | None, follower: LeaderEpochCache, log_end_offset: int,
    high_watermark: int, *, request_epoch: int, current_epoch: int, error: str | None = None,
) -> TruncationOutcome:
    """G3: an answer to a request sent in another epoch is discarded; a FENCED or UNKNOWN
    leader epoch error is reported as such; otherwise KIP-279's search with current lookups."""
    answer = None if leader_answer is None else _answer(leader_answer, "leader_answer")
    _require_cache(follower, "follower")
    v.offset(log_end_offset, "log_end_offset")
    v.offset(high_watermark, "high_watermark")
    v.leader_epoch(request_epoch, "request_epoch")
    v.leader_epoch(current_epoch, "current_epoch")
    if error is not None and not isinstance(error, str):
        raise TypeError("argument 'error' must be str or None")
    # An unknown code is a bad argument, refused even when the answer would be discarded.
    if error is not None and error not in _LEADER_ERRORS:
        raise v.invalid("error", error, f"expected one of {sorted(_LEADER_ERRORS)} or None")
    _check_positions(log_end_offset, high_watermark)
    if request_epoch != current_epoch:
        return TruncationOutcome.discard()
    if error is not None:
        return _LEADER_ERRORS[error]()
    if answer is None:
        return TruncationOutcome.truncate(high_watermark)
    return _epoch_search(answer, follower, log_end_offset, "end_offset_for", retry=True)


def diverging_epoch_truncation(
    diverging_epoch: tuple[int, int], follower: LeaderEpochCache, log_end_offset: int,
    high_watermark: int,
) -> TruncationOutcome:
    """G4 (2.8+): apply a DivergingEpoch from a fetch response; always ``"truncate"``, because
    the next fetch carries the new last fetched epoch and the leader answers again if needed."""
    answer = _answer(diverging_epoch, "diverging_epoch")
    _require_cache(follower, "follower")
    _check_positions(log_end_offset, high_watermark)
    return _epoch_search(answer, follower, log_end_offset, "end_offset_for", retry=False)


def leader_fetch_check(
    leader: LeaderEpochCache, leader_log_end_offset: int, leader_log_start_offset: int,
    fetch_offset: int, last_fetched_epoch: int,
) -> FetchCheck:
    """Leader side of truncate-on-fetch (``Partition.readRecords``): out of range when the
    leader cannot place ``last_fetched_epoch`` or the fetch is below its log start; diverging
    when its epoch ends before the fetch offset or is a lower one; otherwise read."""
    _require_cache(leader, "leader")
    v.offset(leader_log_end_offset, "leader_log_end_offset")
    v.offset(leader_log_start_offset, "leader_log_start_offset")
    v.offset(fetch_offset, "fetch_offset")
    v.leader_epoch(last_fetched_epoch, "last_fetched_epoch")
    found = leader.end_offset_for(last_fetched_epoch, leader_log_end_offset)
    if found is None or fetch_offset < leader_log_start_offset:
        return FetchCheck.offset_out_of_range()
    epoch, end_offset = found
    if epoch < last_fetched_epoch or end_offset < fetch_offset:
        return FetchCheck.diverging(epoch, end_offset)
    if fetch_offset > leader_log_end_offset:
        return FetchCheck.offset_out_of_range()
    return FetchCheck.read()


def check_current_leader_epoch(request_epoch: int | None, current_epoch: int) -> None:
    """KIP-320 fencing: :class:`FencedLeaderEpochError` if ``request_epoch`` is older,
    :class:`UnknownLeaderEpochError` if newer; ``None`` (an old client) always passes."""
    v.optional(v.leader_epoch, request_epoch, "request_epoch")
    v.leader_epoch(current_epoch, "current_epoch")
    if request_epoch is None or request_epoch == current_epoch:
        return
    if request_epoch < current_epoch:
        raise FencedLeaderEpochError(
            f"request leader epoch {request_epoch} is older than the current leader epoch "
            f"{current_epoch}",
            request_epoch=request_epoch, current_epoch=current_epoch,
        )
    raise UnknownLeaderEpochError(
        f"request leader epoch {request_epoch} is newer than the current leader epoch "
        f"{current_epoch}",
        request_epoch=request_epoch, current_epoch=current_epoch,
    )


def _require_log(log: Any, argument: str) -> ReplicaLog:
    if not isinstance(log, ReplicaLog):
        raise TypeError(f"argument '{argument}' must be ReplicaLog, not {type(log).__name__}")
    return log


def divergence_point(a: ReplicaLog, b: ReplicaLog) -> int | None:
    """Where two logs stop agreeing by their epoch caches (the offset the leader-epoch protocol
    would truncate to), or ``None`` if one is a prefix of the other by epochs. Trusts that equal
    ``(epoch, start)`` entries mean equal data."""
    _require_log(a, "a")
    _require_log(b, "b")
    start = max(a.log_start_offset, b.log_start_offset)
    limit = min(a.log_end_offset, b.log_end_offset)
    if start >= limit:
        return None
    entries_a, entries_b = a.epoch_entries(), b.epoch_entries()
    # Entries shared with a form a prefix of b's entries (both caches are monotone and a shared
    # entry implies a shared history), so a lower-bound search finds the first unshared one.
    lo, hi = 0, len(entries_b)
    while lo < hi:
        mid = (lo + hi) // 2
        if entries_b[mid] in entries_a:
            lo = mid + 1
        else:
            hi = mid
    if lo == 0:
        return start
    shared = entries_b[lo - 1]
    end_b = entries_b[lo][1] if lo < len(entries_b) else b.log_end_offset
    after = entries_a.index(shared) + 1
    end_a = entries_a[after][1] if after < len(entries_a) else a.log_end_offset
    point = min(end_a, end_b)
    return None if point >= limit else max(point, start)


def first_mismatch(a: ReplicaLog, b: ReplicaLog) -> int | None:
    """The first offset below both log ends (and at or above both log starts) whose record,
    batch epoch or batch boundaries differ, or that is a hole in one log only; ``None`` if the
    common range is identical."""
    _require_log(a, "a")
    _require_log(b, "b")
    batches_a, batches_b = a.batches(), b.batches()
    for offset in range(max(a.log_start_offset, b.log_start_offset),
                        min(a.log_end_offset, b.log_end_offset)):
        if _offset_key(batches_a, offset) != _offset_key(batches_b, offset):
            return offset
    return None


def _offset_key(batches: list[RecordBatch], offset: int) -> tuple[int, int, int, int] | None:
    """What must agree at ``offset``: batch boundaries, batch epoch and record; ``None`` for a
    hole. The batch is the first holding the offset (last offsets increase; v0/v1 wrappers may
    overlap, and a reader finds the first)."""
    index = bisect.bisect_left(batches, offset, key=lambda b: b.last_offset)
    if index >= len(batches) or batches[index].base_offset > offset:
        return None
    batch = batches[index]
    value = batch.records[offset - batch.base_offset]
    return (batch.base_offset, batch.last_offset, batch.partition_leader_epoch, value)
