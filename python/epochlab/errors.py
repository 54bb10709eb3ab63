"""The one exception hierarchy of epochlab.

Every error a caller can cause is one of these classes, raised identically by the Rust core
(``epochlab._core``) and by the pure-Python reference (``epochlab.reference``), so that
differential tests can compare failures as well as results. Class names follow Kafka's error
names (``OFFSET_OUT_OF_RANGE`` -> :class:`OffsetOutOfRangeError`).

Each exception carries its message and, as attributes, the numbers involved (for example
``err.offset``, ``err.log_end_offset``), so callers never parse messages.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "EpochlabError",
    "InvalidArgumentError",
    "LogError",
    "OffsetOutOfRangeError",
    "UnexpectedAppendOffsetError",
    "InvalidRecordBatchError",
    "ProducerStateError",
    "OutOfOrderSequenceError",
    "InvalidProducerEpochError",
    "InvalidTxnStateError",
    "TransactionCoordinatorFencedError",
    "LeaderEpochError",
    "FencedLeaderEpochError",
    "UnknownLeaderEpochError",
    "CheckpointError",
    "CorruptCheckpointError",
    "StorageError",
    "ConfigError",
    "ScenarioError",
    "ScheduleError",
    "TraceError",
    "KafkaFormatError",
    "UsageError",
]


class EpochlabError(Exception):
    """Base class of every error epochlab raises for a caller's mistake or a protocol outcome."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = dict(details)
        for key, value in details.items():
            setattr(self, key, value)

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep details across pickling (Spark ships exceptions between processes).
        return (_rebuild, (type(self), self.message, self.details))


def _rebuild(cls: type[EpochlabError], message: str, details: dict[str, Any]) -> EpochlabError:
    return cls(message, **details)


class InvalidArgumentError(EpochlabError, ValueError):
    """An argument is outside its domain (negative offset, epoch above Int32.MAX, ...).

    Attributes: ``argument`` (the parameter's name), ``value``, and either ``domain`` (the
    accepted range) or ``reason`` (why an in-range value is refused here).
    """


class LogError(EpochlabError):
    """A partition-log operation was refused."""


class OffsetOutOfRangeError(LogError):
    """Kafka's OFFSET_OUT_OF_RANGE: the offset is outside ``[log_start_offset, log_end_offset]``.

    Attributes: ``offset``, ``log_start_offset``, ``log_end_offset``.
    """


class UnexpectedAppendOffsetError(LogError):
    """A follower append whose first offset is not the log end offset.

    Kafka raises ``UnexpectedAppendOffsetException`` when the first offset is below the log end
    offset (overlap); epochlab also refuses a gap. Attributes: ``first_offset``,
    ``log_end_offset``.
    """


class InvalidRecordBatchError(LogError):
    """A batch that cannot exist: no records, inconsistent producer fields, offsets overflow.

    Attribute: ``reason``."""


class ProducerStateError(EpochlabError):
    """The leader refused an idempotent or transactional append."""


class OutOfOrderSequenceError(ProducerStateError):
    """Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER.

    Attributes: ``producer_id``, ``producer_epoch``, ``base_sequence``, ``expected_sequence``
    (0 after an epoch bump or when no batch of the producer is retained).
    """


class InvalidProducerEpochError(ProducerStateError):
    """Kafka's INVALID_PRODUCER_EPOCH (PRODUCER_FENCED before 2.7): the batch's epoch is older.

    Attributes: ``producer_id``, ``producer_epoch``, ``current_epoch``.
    """


class InvalidTxnStateError(ProducerStateError):
    """Kafka's INVALID_TXN_STATE: a non-transactional write from a producer whose transaction
    is open on the partition. Attributes: ``producer_id``, ``transaction_first_offset``.
    """


class TransactionCoordinatorFencedError(ProducerStateError):
    """Kafka's TRANSACTION_COORDINATOR_FENCED: a transaction marker from an older coordinator
    epoch. Attributes: ``producer_id``, ``coordinator_epoch``, ``current_coordinator_epoch``.
    """


class LeaderEpochError(EpochlabError):
    """A request carried a current leader epoch that does not match the replica's (KIP-320)."""


class FencedLeaderEpochError(LeaderEpochError):
    """Kafka's FENCED_LEADER_EPOCH: the request's epoch is older than the replica's.

    Attributes: ``request_epoch``, ``current_epoch``.
    """


class UnknownLeaderEpochError(LeaderEpochError):
    """Kafka's UNKNOWN_LEADER_EPOCH: the request's epoch is newer than the replica's.

    Attributes: ``request_epoch``, ``current_epoch``.
    """


class CheckpointError(EpochlabError):
    """A checkpoint file could not be used."""


class CorruptCheckpointError(CheckpointError):
    """A checkpoint file is malformed. Attributes: ``path``, ``line`` (1-based), ``reason``."""


class StorageError(EpochlabError, OSError):
    """Reading or writing a file failed. Attributes: ``path``, ``reason``."""


class ConfigError(EpochlabError, ValueError):
    """A configuration value is unknown or out of range.

    Attributes: ``where`` (file or object being read), ``field`` (Kafka's dotted name when it
    has one), ``expected`` (what would be accepted), ``got`` (what was given).
    """


class ScenarioError(EpochlabError, ValueError):
    """A scenario (file or Python object) is malformed.

    Attributes: ``where`` (the file path, or ``"<python>"``), ``field`` (a dotted path such as
    ``steps[3].broker``), ``expected``, ``got``.
    """


class ScheduleError(ScenarioError):
    """A fuzzing schedule (``epochlab-schedule`` JSON, ``docs/fuzzing.md``) is malformed.

    A subclass of :class:`ScenarioError`, with the same attributes: ``where`` (the file path,
    or ``"<python>"``), ``field`` (a dotted path such as ``actions[3].broker``), ``expected``,
    ``got``.
    """


class TraceError(EpochlabError, ValueError):
    """A trace file or table (``docs/trace-format.md``) cannot be read or replayed.

    Attributes: ``path`` (the file, or ``None`` for an in-memory table), ``row`` (0-based index
    of the first row that could not be used: for a damaged Parquet row group or Arrow IPC
    batch, its first row; everything before it was replayed), ``reason``.
    """


class KafkaFormatError(EpochlabError, ValueError):
    """A Kafka on-disk file (segment, checkpoint, index, ``partition.metadata``, producer-state
    snapshot) that does not parse, raised by the ``epochlab._core.parse_*`` functions.

    Attributes: ``file`` (the name the caller passed), ``offset`` (0-based byte position of the
    first byte that could not be used), ``reason``.
    """


class UsageError(Exception):
    """A command line the ``epochlab`` command refuses: argparse's own complaints and the checks a
    command makes of its arguments (an unknown ``--generation``). The message is the whole line
    printed on stderr (it names the option); the exit status is 2.

    Not an :class:`EpochlabError`: it belongs to the command line, not to the library, so the
    handlers that report a library error in their own words never catch it.
    """
