"""Record batches and append results, as frozen values."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from epochlab.errors import InvalidRecordBatchError

from . import _validate as v


def _invalid_batch(reason: str) -> InvalidRecordBatchError:
    return InvalidRecordBatchError(f"invalid record batch: {reason}", reason=reason)


#: ``RecordBatch.NO_TIMESTAMP``: a batch no leader stamped carries no timestamp.
NO_TIMESTAMP = -1


def timestamp_arg(value: object, name: str) -> int:
    """A timestamp argument: -1 (none) or an offset-domain int (0 .. 2^63-1)."""
    if value == NO_TIMESTAMP and isinstance(value, int) and not isinstance(value, bool):
        return NO_TIMESTAMP
    v.offset(value, name)
    return value  # type: ignore[return-value]


class RecordBatch:
    """One record batch, a frozen value: offsets, the partition leader epoch, record values and
    optional producer fields (all three present or all ``None``).

    >>> b = RecordBatch(10, 3, [7, 8, 9])
    >>> (b.base_offset, b.last_offset, b.partition_leader_epoch)
    (10, 12, 3)
    """

    __slots__ = (
        "_base_offset",
        "_partition_leader_epoch",
        "_records",
        "_producer_id",
        "_producer_epoch",
        "_base_sequence",
        "_is_transactional",
        "_is_control",
        "_max_timestamp",
    )
    _base_offset: int
    _partition_leader_epoch: int
    _records: tuple[int, ...]
    _producer_id: int | None
    _producer_epoch: int | None
    _base_sequence: int | None
    _is_transactional: bool
    _is_control: bool
    _max_timestamp: int

    def __init__(
        self,
        base_offset: int,
        partition_leader_epoch: int,
        records: Sequence[int],
        *,
        producer_id: int | None = None,
        producer_epoch: int | None = None,
        base_sequence: int | None = None,
        is_transactional: bool = False,
        is_control: bool = False,
        max_timestamp: int = NO_TIMESTAMP,
    ) -> None:
        """Raise ``InvalidArgumentError`` for a value outside its domain and
        ``InvalidRecordBatchError`` for a batch that cannot exist."""
        v.offset(base_offset, "base_offset")
        v.leader_epoch(partition_leader_epoch, "partition_leader_epoch")
        values = v.record_values(records, "records")
        if len({f is None for f in (producer_id, producer_epoch, base_sequence)}) > 1:
            # Checked before the fields' domains: an incomplete triple is a bad batch whatever
            # its values.
            raise _invalid_batch("producer_id, producer_epoch and base_sequence go together")
        v.optional(v.producer_id, producer_id, "producer_id")
        v.optional(v.producer_epoch, producer_epoch, "producer_epoch")
        v.optional(v.sequence, base_sequence, "base_sequence")
        v.require_bool(is_transactional, "is_transactional")
        v.require_bool(is_control, "is_control")
        timestamp_arg(max_timestamp, "max_timestamp")
        _check_shape(base_offset, values, (producer_id, producer_epoch, base_sequence),
                     is_transactional, is_control)
        setter = object.__setattr__
        setter(self, "_base_offset", base_offset)
        setter(self, "_partition_leader_epoch", partition_leader_epoch)
        setter(self, "_records", values)
        setter(self, "_producer_id", producer_id)
        setter(self, "_producer_epoch", producer_epoch)
        setter(self, "_base_sequence", base_sequence)
        setter(self, "_is_transactional", is_transactional)
        setter(self, "_is_control", is_control)
        setter(self, "_max_timestamp", max_timestamp)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("RecordBatch is frozen")

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def last_offset(self) -> int:
        return self._base_offset + len(self._records) - 1

    @property
    def partition_leader_epoch(self) -> int:
        return self._partition_leader_epoch

    @property
    def producer_id(self) -> int | None:
        return self._producer_id

    @property
    def producer_epoch(self) -> int | None:
        return self._producer_epoch

    @property
    def base_sequence(self) -> int | None:
        return self._base_sequence

    @property
    def control_type(self) -> str | None:
        """``"commit"`` or ``"abort"`` for a control batch (the record's lowest bit)."""
        if not self._is_control:
            return None
        return "commit" if self._records[0] & 1 else "abort"

    @property
    def coordinator_epoch(self) -> int | None:
        """The coordinator epoch a control batch's marker carries."""
        return self._records[0] >> 1 if self._is_control else None

    @property
    def last_sequence(self) -> int | None:
        """``base_sequence + len(records) - 1`` wrapping past Int32.MAX to 0, as Kafka does."""
        if self._base_sequence is None:
            return None
        return v.wrapping_sequence_add(self._base_sequence, len(self._records) - 1)

    @property
    def is_transactional(self) -> bool:
        return self._is_transactional

    @property
    def is_control(self) -> bool:
        return self._is_control

    @property
    def records(self) -> tuple[int, ...]:
        return self._records

    @property
    def record_count(self) -> int:
        return len(self._records)

    @property
    def max_timestamp(self) -> int:
        """The largest record timestamp: the leader's append time (LogAppendTime), -1 if none."""
        return self._max_timestamp

    def with_base_offset(self, base_offset: int) -> RecordBatch:
        """The same batch moved to ``base_offset`` (what a leader does on append)."""
        v.offset(base_offset, "base_offset")
        return RecordBatch(
            base_offset,
            self._partition_leader_epoch,
            self._records,
            producer_id=self._producer_id,
            producer_epoch=self._producer_epoch,
            base_sequence=self._base_sequence,
            is_transactional=self._is_transactional,
            is_control=self._is_control,
            max_timestamp=self._max_timestamp,
        )

    def _key(self) -> tuple[Any, ...]:
        return (
            self._base_offset,
            self._partition_leader_epoch,
            self._records,
            self._producer_id,
            self._producer_epoch,
            self._base_sequence,
            self._is_transactional,
            self._is_control,
            self._max_timestamp,
        )

    def __len__(self) -> int:
        return len(self._records)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RecordBatch):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        text = (
            f"RecordBatch(base_offset={self._base_offset}, "
            f"partition_leader_epoch={self._partition_leader_epoch}, records={list(self._records)}"
        )
        if self._producer_id is not None:
            text += (
                f", producer_id={self._producer_id}, producer_epoch={self._producer_epoch}, "
                f"base_sequence={self._base_sequence}"
            )
        if self._is_transactional:
            text += ", is_transactional=True"
        if self._is_control:
            text += ", is_control=True"
        if self._max_timestamp != NO_TIMESTAMP:
            text += f", max_timestamp={self._max_timestamp}"
        return text + ")"


def _check_shape(
    base_offset: int,
    values: tuple[int, ...],
    producer_fields: tuple[int | None, int | None, int | None],  # all given or all None
    is_transactional: bool,
    is_control: bool,
) -> None:
    """The batch-level rules of ``core-semantics.md``, "RecordBatch"."""
    if not values:
        raise _invalid_batch("a batch needs at least one record")
    # The log end offset after the batch (last offset + 1) must itself be an offset.
    if base_offset + len(values) > v.OFFSET_MAX:
        raise _invalid_batch(f"{len(values)} records from base offset {base_offset} overflow the offset domain")
    if (is_transactional or is_control) and producer_fields[0] is None:
        raise _invalid_batch("a transactional or control batch needs producer fields")
    if is_control and len(values) != 1:
        raise _invalid_batch(f"a control batch holds exactly one record, got {len(values)}")
    if is_control and values[0] >> 1 > v.LEADER_EPOCH_MAX:
        # Kafka's EndTransactionMarker: coordinator epoch << 1 | type (COMMIT = 1).
        raise _invalid_batch(f"control record {values[0]} encodes a coordinator epoch beyond 2^31-1")


class LogAppendInfo:
    """What an append did: offsets assigned, or the original offsets of a duplicate."""

    __slots__ = ("_base_offset", "_last_offset", "_duplicate")
    _base_offset: int
    _last_offset: int
    _duplicate: bool

    def __init__(self, base_offset: int, last_offset: int, duplicate: bool = False) -> None:
        object.__setattr__(self, "_base_offset", base_offset)
        object.__setattr__(self, "_last_offset", last_offset)
        object.__setattr__(self, "_duplicate", duplicate)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("LogAppendInfo is frozen")

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def last_offset(self) -> int:
        return self._last_offset

    @property
    def duplicate(self) -> bool:
        """True when producer state recognised a retried batch: nothing was appended and the
        offsets are those of the original append."""
        return self._duplicate

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LogAppendInfo):
            return NotImplemented
        return (self._base_offset, self._last_offset, self._duplicate) == (
            other._base_offset, other._last_offset, other._duplicate)

    def __repr__(self) -> str:
        return (f"LogAppendInfo(base_offset={self._base_offset}, last_offset={self._last_offset}, "
                f"duplicate={self._duplicate})")
