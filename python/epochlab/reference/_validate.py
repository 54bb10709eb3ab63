"""Argument checks shared by the reference twin.

Every int-typed argument has a value domain (``docs/core-semantics.md``, "Value domains"). A value
of the wrong Python type is a ``TypeError``; an int outside its domain is an
:class:`~epochlab.errors.InvalidArgumentError` carrying the parameter's name and the value, so
the reference fails exactly where and how the Rust core does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from epochlab.errors import InvalidArgumentError

OFFSET_MAX = 2**63 - 1
LEADER_EPOCH_MAX = 2**31 - 1
PRODUCER_ID_MAX = 2**63 - 1
PRODUCER_EPOCH_MAX = 2**15 - 1
SEQUENCE_MAX = 2**31 - 1
RECORD_VALUE_MAX = 2**64 - 1
COUNT_MAX = 2**32 - 1


def require_int(value: Any, argument: str) -> int:
    """Return ``value`` if it is an ``int`` (``bool`` included, as everywhere in Python and in
    the Rust core's argument conversion), else raise ``TypeError``."""
    if not isinstance(value, int):
        raise TypeError(f"argument '{argument}' must be int, not {type(value).__name__}")
    return value


def require_bool(value: Any, argument: str) -> bool:
    """Return ``value`` if it is a ``bool``, else raise ``TypeError``."""
    if not isinstance(value, bool):
        raise TypeError(f"argument '{argument}' must be bool, not {type(value).__name__}")
    return value


def in_domain(value: Any, argument: str, maximum: int, minimum: int = 0) -> int:
    """Return ``value`` if it is an int in ``[minimum, maximum]``, else raise."""
    require_int(value, argument)
    if value < minimum or value > maximum:
        raise InvalidArgumentError(
            f"argument '{argument}' = {value} is outside its domain {minimum}..={maximum}",
            argument=argument,
            value=value,
        )
    return value


def offset(value: Any, argument: str) -> int:
    """An offset, log start offset, high watermark or truncation target."""
    return in_domain(value, argument, OFFSET_MAX)


def leader_epoch(value: Any, argument: str) -> int:
    """A partition leader epoch."""
    return in_domain(value, argument, LEADER_EPOCH_MAX)


def requested_epoch(value: Any, argument: str) -> int | None:
    """The epoch of an OffsetsForLeaderEpoch request: ``None`` or Kafka's UNDEFINED_EPOCH (-1)
    mean "undefined" (answered UNDEFINED_EPOCH_OFFSET: ``LeaderEpochFileCache.endOffsetFor``,
    KAFKA-6857); any other value must be a leader epoch."""
    if value is None or (isinstance(value, int) and value == -1):
        return None
    return leader_epoch(value, argument)


def producer_id(value: Any, argument: str) -> int:
    return in_domain(value, argument, PRODUCER_ID_MAX)


def producer_epoch(value: Any, argument: str) -> int:
    return in_domain(value, argument, PRODUCER_EPOCH_MAX)


def sequence(value: Any, argument: str) -> int:
    return in_domain(value, argument, SEQUENCE_MAX)


def count(value: Any, argument: str, minimum: int = 0) -> int:
    """A count such as ``max_batches`` or a batch size."""
    return in_domain(value, argument, COUNT_MAX, minimum)


def optional(check: Any, value: Any, argument: str) -> Any:
    """Apply ``check`` unless ``value`` is ``None``."""
    return None if value is None else check(value, argument)


def record_values(values: Any, argument: str) -> tuple[int, ...]:
    """A sequence of record values, each in ``[0, 2^64-1]``, as a tuple."""
    # A str is iterable but never a sequence of record values.
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(f"argument '{argument}' must be a sequence of int")
    return tuple(in_domain(v, argument, RECORD_VALUE_MAX) for v in values)


def invalid(argument: str, value: Any, reason: str) -> InvalidArgumentError:
    """An in-domain value that is unacceptable here (``reason`` says why)."""
    return InvalidArgumentError(
        f"argument '{argument}' = {value!r} is invalid: {reason}",
        argument=argument, value=value, reason=reason,
    )


def wrapping_sequence_add(base: int, increment: int) -> int:
    """``base + increment`` wrapping past Int32.MAX to 0 (``DefaultRecordBatch.incrementSequence``)."""
    if base > SEQUENCE_MAX - increment:
        return increment - (SEQUENCE_MAX - base) - 1
    return base + increment
