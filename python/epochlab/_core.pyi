"""Type contract of the native module ``epochlab._core`` (checked by ``python -m mypy.stubtest``).

Conventions (see the crate docs in ``src/lib.rs``):

* Offsets are 0-based; a log end offset (LEO) and a high watermark (HW) are *exclusive*.
* Offsets, epochs, sequences and record values are Python ``int``; a negative value or one
  beyond Kafka's field width raises :class:`epochlab.errors.InvalidArgumentError` naming the
  argument. Absence is ``None``, never ``-1``.
* The pure-Python twin ``epochlab.reference`` implements exactly this surface.
"""

from collections.abc import Callable, Sequence
from typing import Any
from os import PathLike
from typing import Final, final

__all__ = [
    "BUILD",
    "FetchCheck",
    "Kernel",
    "Network",
    "LeaderEpochCache",
    "LogAppendInfo",
    "ProducerStateManager",
    "RecordBatch",
    "Replica",
    "ReplicaLog",
    "RECONNECT_MS",
    "RTO_MAX_MS",
    "RTO_MIN_MS",
    "Replayer",
    "Timer",
    "TruncationOutcome",
    "__version__",
    "check_current_leader_epoch",
    "check_trace_batch",
    "divergence_point",
    "diverging_epoch_truncation",
    "first_mismatch",
    "kip101_truncation",
    "kip279_truncation",
    "kip320_truncation",
    "leader_fetch_check",
    "parse_leader_epoch_checkpoint",
    "parse_offset_checkpoint",
    "parse_offset_index",
    "parse_partition_metadata",
    "parse_producer_snapshot",
    "parse_segment",
    "parse_time_index",
    "parse_txn_index",
    "truncate_to_high_watermark",
    "_TRACE_INVARIANTS",
    "_TRACE_KINDS",
    "_generate_trace",
    "_twister_draws",
    "_bootstrap_draws",
    "ChangeWatch",
    "Watcher",
    "StateScan",
    "ProtocolCoverage",
    "FetchPlane",
    "FetchPlaneHandler",
    "FetchPlaneTimer",
]

__version__: Final[str]
BUILD: Final[str]
"""Build identity: crate version, profile and target, printed with every failure."""

@final
class RecordBatch:
    """One record batch, a frozen value.

    ``last_offset = base_offset + len(records) - 1``. Producer fields are all present (idempotent
    or transactional batch) or all ``None``. A control batch (transaction marker) carries one
    record whose value is the marker type (0 = ABORT, 1 = COMMIT).

    >>> b = RecordBatch(10, 3, [7, 8, 9])
    >>> (b.base_offset, b.last_offset, b.partition_leader_epoch)
    (10, 12, 3)
    """

    def __new__(
        cls,
        base_offset: int,
        partition_leader_epoch: int,
        records: Sequence[int],
        *,
        producer_id: int | None = None,
        producer_epoch: int | None = None,
        base_sequence: int | None = None,
        is_transactional: bool = False,
        is_control: bool = False,
        max_timestamp: int = -1,
    ) -> RecordBatch: ...
    @property
    def max_timestamp(self) -> int:
        """The largest record timestamp: the leader's append time (LogAppendTime), -1 if none."""
    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def partition_leader_epoch(self) -> int: ...
    @property
    def producer_id(self) -> int | None: ...
    @property
    def producer_epoch(self) -> int | None: ...
    @property
    def base_sequence(self) -> int | None: ...
    @property
    def last_sequence(self) -> int | None:
        """``base_sequence + len(records) - 1`` wrapping past Int32.MAX to 0, as Kafka does."""
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def records(self) -> tuple[int, ...]: ...
    @property
    def control_type(self) -> str | None:
        """``"commit"`` or ``"abort"`` for a control batch (the record's lowest bit), else ``None``."""
    @property
    def coordinator_epoch(self) -> int | None:
        """The coordinator epoch a control batch's marker carries (record value ``>> 1``)."""
    @property
    def record_count(self) -> int: ...
    def with_base_offset(self, base_offset: int) -> RecordBatch:
        """The same batch moved to another base offset (what a leader does on append)."""
    def __len__(self) -> int: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class LogAppendInfo:
    """What an append did: offsets assigned, or the original offsets of a duplicate."""

    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def duplicate(self) -> bool:
        """True when producer state recognised a retried batch: nothing was appended and the
        offsets are those of the original append."""
    def __eq__(self, other: object, /) -> bool: ...

@final
class LeaderEpochCache:
    """Kafka's ``LeaderEpochFileCache``: epoch -> first offset written in that epoch.

    Epochs strictly increase; start offsets never decrease (Kafka 0.11's assign rule could give
    two epochs the same start offset).

    >>> c = LeaderEpochCache()
    >>> c.assign(0, 0); c.assign(1, 120)
    True
    True
    >>> c.end_offset_for(0, 200)
    (0, 120)
    """

    def __new__(cls, entries: Sequence[tuple[int, int]] | None = None) -> LeaderEpochCache: ...
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Current rule (KAFKA-7415, 2.1+): no-op if ``epoch`` is the latest and ``start_offset``
        is not below its start; otherwise evict trailing entries with an epoch >= ``epoch`` or a
        start offset >= ``start_offset`` and append. Returns whether the cache changed."""
    def assign_kip101(self, epoch: int, start_offset: int) -> bool:
        """0.11-2.0 rule: append only if ``epoch`` > latest epoch and ``start_offset`` >= latest
        start offset; otherwise ignore (no eviction). Returns whether the cache changed."""
    def end_offset_for(
        self, requested_epoch: int | None, log_end_offset: int
    ) -> tuple[int, int] | None:
        """Current ``endOffsetFor``: ``(epoch, end_offset)`` with ``end_offset`` exclusive, or
        ``None`` where Kafka answers UNDEFINED_EPOCH_OFFSET, including a request for an undefined
        epoch (``None`` or Kafka's UNDEFINED_EPOCH, -1; KAFKA-6857). Below every known epoch it
        echoes the requested epoch with the first start offset (2.1+)."""
    def end_offset_for_kip279(
        self, requested_epoch: int | None, log_end_offset: int
    ) -> tuple[int, int] | None:
        """Kafka 2.0 (KIP-279, OffsetsForLeaderEpoch v1): as :meth:`end_offset_for`, except that
        a requested epoch below every known epoch answers ``None`` (UNDEFINED)."""
    def end_offset_for_kip101(self, requested_epoch: int | None, log_end_offset: int) -> int | None:
        """Kafka 0.11 (KIP-101, OffsetsForLeaderEpoch v0): an end offset only. ``log_end_offset``
        for the latest epoch, else the start offset of the first larger epoch; ``None`` when
        there is none or the requested epoch is below the first cached epoch."""
    def truncate_from_end(self, end_offset: int) -> None:
        """Remove every entry whose start offset is >= ``end_offset``."""
    def truncate_from_start(self, start_offset: int) -> None:
        """Remove entries that start at or before ``start_offset`` and re-insert the last of them
        at ``start_offset`` (the log start moved past them)."""
    def epoch_for_offset(self, offset: int) -> int | None:
        """Epoch of the entry with the greatest start offset <= ``offset``; ``None`` if none."""
    @property
    def latest_epoch(self) -> int | None: ...
    @property
    def earliest_epoch(self) -> int | None: ...
    def entries(self) -> list[tuple[int, int]]: ...
    def clear(self) -> None: ...
    def copy(self) -> LeaderEpochCache: ...
    def to_checkpoint_text(self) -> str:
        """Kafka's ``leader-epoch-checkpoint`` text: version 0, entry count, then
        ``"<epoch> <start_offset>"`` lines."""
    @staticmethod
    def from_checkpoint_text(text: str, path: str | None = None) -> LeaderEpochCache:
        """Parse checkpoint text; :class:`~epochlab.errors.CorruptCheckpointError` names the
        (1-based) line that is wrong."""
    def write_checkpoint(self, path: str | PathLike[str]) -> None:
        """Atomic write: ``<path>.tmp``, fsync, rename over ``path``, fsync the directory."""
    @staticmethod
    def read_checkpoint(path: str | PathLike[str]) -> LeaderEpochCache: ...
    def __len__(self) -> int: ...
    def __eq__(self, other: object, /) -> bool: ...

@final
class ProducerStateManager:
    """Per producer id: its epoch and the metadata of its last 5 batches (Kafka's
    ``ProducerStateManager``), used to deduplicate retries and to order sequences."""

    def __new__(cls) -> ProducerStateManager: ...
    def check_leader_append(self, batch: RecordBatch) -> tuple[int, int] | None:
        """Validate a client batch as the leader does, without changing state.

        Returns the original ``(base_offset, last_offset)`` for a duplicate of one of the last 5
        batches, ``None`` for a batch to append. Raises
        :class:`~epochlab.errors.InvalidProducerEpochError` or
        :class:`~epochlab.errors.OutOfOrderSequenceError`. A batch without producer id is
        always ``None``."""
    def update(self, batch: RecordBatch) -> None:
        """Record an appended batch (leader or follower; no validation). A newer producer epoch
        clears the cached batches; at most 5 are retained."""
    def entry(self, producer_id: int) -> tuple[int, list[tuple[int, int, int, int]]] | None:
        """``(producer_epoch, [(first_seq, last_seq, base_offset, last_offset), ...])`` oldest
        first, or ``None`` for an unknown producer id."""
    def coordinator_epoch(self, producer_id: int) -> int | None:
        """Coordinator epoch of the producer's latest transaction marker, if any."""
    def producer_ids(self) -> list[int]:
        """Known producer ids in increasing order."""
    def snapshot(self) -> list[tuple[int, int, list[tuple[int, int, int, int]]]]:
        """Every entry as ``(producer_id, producer_epoch, batches)``, by producer id."""
    def clear(self) -> None: ...
    def copy(self) -> ProducerStateManager: ...
    def __len__(self) -> int: ...
    def __eq__(self, other: object, /) -> bool: ...

@final
class ReplicaLog:
    """One replica's partition log with its leader-epoch cache, producer state, high watermark
    and recovery point, as Kafka's ``UnifiedLog`` holds them.

    Stored column by column. Offsets below ``log_end_offset`` are normally contiguous; the one
    exception is faithful to Kafka: a truncation target that falls inside a batch removes the
    whole batch yet sets the log end offset to the target (``LocalLog.truncateTo``), leaving a
    hole. :meth:`holes` lists such holes; a checker treats them as a protocol bug signal.

    >>> log = ReplicaLog()
    >>> log.append_as_leader([1, 2, 3], 0).last_offset
    2
    >>> log.log_end_offset
    3
    """

    def __new__(cls, log_start_offset: int = 0, *, kip101_epoch_cache: bool = False,
                wrapper_batches: bool = False) -> ReplicaLog:
        """``kip101_epoch_cache`` selects the 0.11-2.0 epoch-cache assign rule (no eviction);
        ``wrapper_batches`` the message format v0/v1 follower check: a replicated compressed
        wrapper is checked by its own (last) offset only, so one whose inner offsets start
        below the log end offset is taken whole (Kafka 0.10 ``Log.append``; KAFKA-3919)."""
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def recovery_point(self) -> int:
        """End (exclusive) of the flushed prefix; what survives a crash that loses the page cache."""
    def state_key(self) -> tuple[int, int, int, int]:
        """``(log_end_offset, high_watermark, batch_count, log_start_offset)`` in one call."""
    @property
    def batch_count(self) -> int: ...
    @property
    def record_count(self) -> int: ...
    @property
    def latest_epoch(self) -> int | None: ...
    @property
    def kip101_epoch_cache(self) -> bool: ...
    @property
    def wrapper_batches(self) -> bool: ...
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
        """Assign offsets from the log end offset, stamp ``leader_epoch``, validate and update
        producer state (a duplicate appends nothing), assign the epoch in the cache."""
    def append_many_as_leader(self, leader_epoch: int, batch_sizes: Sequence[int], records: Sequence[int]) -> int:
        """Bulk path: append ``len(batch_sizes)`` non-idempotent batches, splitting ``records``
        in order. Returns the new log end offset."""
    def append_end_txn_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool, leader_epoch: int,
        transaction_version: int | None = None,
    ) -> LogAppendInfo:
        """Write a COMMIT or ABORT marker as the leader (WriteTxnMarkers): a control batch ending
        the producer's transaction. :class:`~epochlab.errors.InvalidProducerEpochError` for an
        older producer epoch (with ``transaction_version`` 2 also an equal one while a
        transaction is ongoing; ``None`` is 0), :class:`~epochlab.errors.TransactionCoordinatorFencedError` for
        an older coordinator epoch."""
    @property
    def first_unstable_offset(self) -> int | None:
        """Smallest first offset of an ongoing or unreplicated transaction."""
    @property
    def last_stable_offset(self) -> int:
        """``min(first_unstable_offset, high_watermark)``: a read_committed consumer's bound."""
    def aborted_transactions(self, from_offset: int, upper_bound_offset: int) -> list[tuple[int, int, int, int]]:
        """Aborted transactions ``(producer_id, first_offset, last_offset, last_stable_offset)``
        whose marker is at or after ``from_offset`` and that start below
        ``upper_bound_offset``, in marker order."""
    def ongoing_transactions(self) -> list[tuple[int, int]]:
        """``(first_offset, producer_id)`` of each transaction without a marker, by offset."""
    def unreplicated_transactions(self) -> list[tuple[int, int, int]]:
        """``(first_offset, producer_id, marker_offset)`` of ended transactions whose marker
        is not yet below the high watermark, by first offset."""
    def append_as_follower(self, batch: RecordBatch) -> None:
        """Append a replicated batch with its own offsets and epoch. No producer validation
        (origin REPLICATION). :class:`~epochlab.errors.UnexpectedAppendOffsetError` unless
        ``batch.base_offset == log_end_offset``."""
    def append_batches_as_follower(self, batches: Sequence[RecordBatch]) -> int:
        """Append several replicated batches; all or nothing. Returns the new log end offset."""
    def read(
        self, from_offset: int, *, max_batches: int | None = None, max_offset: int | None = None
    ) -> list[RecordBatch]:
        """Batches whose last offset is >= ``from_offset`` (the first may start before it, as in
        Kafka), at most ``max_batches``, stopping at the first batch whose last offset is >=
        ``max_offset`` (exclusive bound, e.g. the high watermark for a consumer: Kafka reads up
        to the position of the batch holding that offset).
        :class:`~epochlab.errors.OffsetOutOfRangeError` outside ``[log_start_offset,
        log_end_offset]``."""
    def batches(self) -> list[RecordBatch]: ...
    def batch_containing(self, offset: int) -> RecordBatch | None: ...
    def value_at(self, offset: int) -> int | None:
        """The record value at ``offset``, ``None`` if the offset holds no record."""
    def set_time(self, now_ms: int) -> None:
        """The clock a leader's appends are stamped with (LogAppendTime), in ms; -1 for none."""
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record at or after the log start whose
        timestamp is at least ``timestamp`` (``UnifiedLog.fetchOffsetByTimestamp``)."""
    def holes(self) -> list[tuple[int, int]]:
        """``[start, end)`` offset ranges below the log end offset that hold no batch."""
    def truncate_to(self, target_offset: int) -> bool:
        """Kafka's ``truncateTo``: drop every batch whose last offset is >= the target, set the
        log end offset to the target, clamp HW and recovery point, truncate the epoch cache
        from the end and rebuild producer state. A target at or beyond the log end offset only
        truncates the epoch cache at the log end offset (KAFKA-10706). Returns whether data
        was removed."""
    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete everything; log start = log end = HW = recovery point = ``new_offset``; clear
        the epoch cache and producer state."""
    def flush(self, up_to: int | None = None) -> None:
        """Advance the recovery point to ``up_to`` (default: the log end offset)."""
    def drop_unflushed(self) -> int:
        """Crash that loses the page cache: drop every batch not wholly below the recovery
        point (a torn batch is dropped whole); the log end offset becomes the end of the last
        remaining batch, the epoch cache is truncated there and producer state is rebuilt.
        Returns the number of records removed."""
    def update_high_watermark(self, offset: int) -> int:
        """Set HW to ``offset`` clamped into ``[log_start_offset, log_end_offset]`` (may go
        down, as on a follower). Returns the new HW."""
    def maybe_increment_high_watermark(self, offset: int) -> bool:
        """Leader variant: raise HW to ``offset`` (clamped) only if that is larger."""
    def assign_epoch(self, epoch: int, start_offset: int) -> bool:
        """Assign in the epoch cache (what ``makeLeader`` does at the log end offset)."""
    def end_offset_for_epoch(self, requested_epoch: int | None) -> tuple[int, int] | None:
        """The cache's ``end_offset_for`` with this log's end offset."""
    def epoch_for_offset(self, offset: int) -> int | None: ...
    def epoch_cache(self) -> LeaderEpochCache:
        """A copy of the epoch cache."""
    def epoch_entries(self) -> list[tuple[int, int]]: ...
    def epoch_boundaries(self) -> tuple[list[tuple[int, int]], RecordBatch | None]:
        """``([(epoch, base_offset)...], bad)``: the epoch of each batch that starts a new epoch,
        in log order, up to the first batch whose epoch is lower than the one before it;
        ``bad`` is that batch, or ``None`` (one call, no batch copied but the bad one)."""
    def producer_state(self) -> ProducerStateManager:
        """A copy of the producer state."""
    def rebuild_producer_state(self) -> None:
        """Recompute producer state by replaying the log from the log start, ignoring
        producer snapshots (truncation and restarts reload from a snapshot instead)."""
    def take_producer_snapshot(self) -> bool:
        """Kafka's ``ProducerStateManager.takeSnapshot`` at the log end offset (per producer
        its epoch, last batch, coordinator epoch, ongoing transaction's first offset); ``False``
        if the log end offset is not above the newest snapshot."""
    def producer_snapshot_offsets(self) -> list[int]:
        """Offsets of the producer snapshots held, increasing."""
    def reload(self, clean_shutdown: bool) -> None:
        """The log as a restarted broker loads it (``LogLoader.load``): after a clean shutdown
        stray snapshots are removed (all but the newest), after an unclean one every snapshot
        (the segment's recovery deletes them); the log end offset at the data end; producer
        state reloaded from the newest snapshot at or below it, or replayed from the log start."""
    def enable_journal(self) -> None:
        """Record every state change from now on (``take_journal``); behaviour is unchanged."""
    @property
    def journal_enabled(self) -> bool: ...
    def take_journal(self) -> dict[str, list[int]]:
        """Entries since the last call, column by column (``kind``, ``offset``, ``epoch``,
        ``record_count``, ``flags``, ``values``, ``producer_index``, ``producer_id``,
        ``producer_epoch``, ``base_sequence``); see ``docs/trace-format.md``."""
    def copy(self) -> ReplicaLog: ...
    def __len__(self) -> int: ...

@final
class TruncationOutcome:
    """The follower's decision after asking the leader where their logs diverge.

    ``kind`` is one of:

    * ``"truncate"``: truncate to ``offset`` and start fetching (reconciliation done);
    * ``"truncate_and_retry"``: truncate to ``offset`` and ask again (KIP-279 loop);
    * ``"fenced"``: the leader answered FENCED_LEADER_EPOCH; wait for newer metadata;
    * ``"unknown_leader_epoch"``: the leader is behind; retry later;
    * ``"discard"``: the partition's epoch changed while the request was in flight (KIP-320).
    """

    @property
    def kind(self) -> str: ...
    @property
    def offset(self) -> int | None: ...
    @staticmethod
    def truncate(offset: int) -> TruncationOutcome: ...
    @staticmethod
    def truncate_and_retry(offset: int) -> TruncationOutcome: ...
    @staticmethod
    def fenced() -> TruncationOutcome: ...
    @staticmethod
    def unknown_leader_epoch() -> TruncationOutcome: ...
    @staticmethod
    def discard() -> TruncationOutcome: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class FetchCheck:
    """The leader's verdict on a follower fetch carrying ``last_fetched_epoch`` (Fetch v12+).

    ``kind`` is ``"read"`` (serve records from the fetch offset), ``"diverging"`` (answer
    DivergingEpoch ``(epoch, end_offset)``, no records, no follower-state update) or
    ``"offset_out_of_range"``.
    """

    @property
    def kind(self) -> str: ...
    @property
    def diverging_epoch(self) -> tuple[int, int] | None: ...
    @staticmethod
    def read() -> FetchCheck: ...
    @staticmethod
    def diverging(epoch: int, end_offset: int) -> FetchCheck: ...
    @staticmethod
    def offset_out_of_range() -> FetchCheck: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

def truncate_to_high_watermark(high_watermark: int, log_end_offset: int) -> TruncationOutcome:
    """Generation G0 (before KIP-101): a new follower truncates to its local HW."""

def kip101_truncation(
    leader_end_offset: int | None, log_end_offset: int, high_watermark: int
) -> TruncationOutcome:
    """Generation G1 (0.11, OffsetsForLeaderEpoch v0): ``leader_end_offset`` is the leader's
    answer for the follower's latest epoch (``None`` = UNDEFINED -> fall back to the HW)."""

def kip279_truncation(
    leader_answer: tuple[int, int] | None,
    follower: LeaderEpochCache,
    log_end_offset: int,
    high_watermark: int,
) -> TruncationOutcome:
    """Generation G2 (2.0, OffsetsForLeaderEpoch v1+): the iterative search. ``leader_answer``
    is ``(epoch, end_offset)`` or ``None`` (UNDEFINED -> truncate to the HW, the initial fetch
    offset)."""

def kip320_truncation(
    leader_answer: tuple[int, int] | None,
    follower: LeaderEpochCache,
    log_end_offset: int,
    high_watermark: int,
    *,
    request_epoch: int,
    current_epoch: int,
    error: str | None = None,
) -> TruncationOutcome:
    """Generation G3: KIP-279's search fenced by the current leader epoch. ``error`` is the
    leader's answer code: ``None``, ``"fenced_leader_epoch"`` or ``"unknown_leader_epoch"``. An
    answer to a request sent in another epoch than the current one is discarded."""

def diverging_epoch_truncation(
    diverging_epoch: tuple[int, int],
    follower: LeaderEpochCache,
    log_end_offset: int,
    high_watermark: int,
) -> TruncationOutcome:
    """Generation G4 (2.8+, truncate on fetch): apply a DivergingEpoch ``(epoch, end_offset)``
    from a fetch response; always ``"truncate"`` (the next fetch carries the new last fetched
    epoch and the leader answers again if more truncation is needed)."""

def leader_fetch_check(
    leader: LeaderEpochCache,
    leader_log_end_offset: int,
    leader_log_start_offset: int,
    fetch_offset: int,
    last_fetched_epoch: int,
) -> FetchCheck:
    """Leader side of truncate-on-fetch (``Partition.readRecords``)."""

def check_current_leader_epoch(request_epoch: int | None, current_epoch: int) -> None:
    """KIP-320 fencing: raise :class:`~epochlab.errors.FencedLeaderEpochError` if
    ``request_epoch`` is older, :class:`~epochlab.errors.UnknownLeaderEpochError` if newer;
    ``None`` (an old client without the field) always passes."""

def divergence_point(a: ReplicaLog, b: ReplicaLog) -> int | None:
    """Where two logs stop agreeing according to their epoch caches (the offset the
    leader-epoch protocol would truncate to), ``None`` if one is a prefix of the other by
    epochs. O(number of epochs); trusts that equal (epoch, offset) means equal data."""

def first_mismatch(a: ReplicaLog, b: ReplicaLog) -> int | None:
    """The first offset below ``min(a.log_end_offset, b.log_end_offset)`` whose record, batch
    epoch or batch boundaries differ (or is a hole in one log only); ``None`` if the common
    prefix is identical. A full columnar scan: what a checker uses to verify Log Matching."""

@final
class Replica:
    """One partition replica's protocol state machine (leader and follower sides, per protocol
    generation), the Rust port of ``epochlab.sim.replica.Replica``. Methods take and return the
    simulator's message dataclasses (``epochlab.sim.messages``); each call handles one message
    or timer tick. The replica drives :attr:`log`, a :class:`ReplicaLog` shared with Python.
    """

    def __new__(
        cls,
        broker_id: int,
        replicas: Sequence[int],
        generation: int,
        min_insync_replicas: int,
        replica_lag_time_max_ms: int,
    ) -> Replica: ...
    @property
    def log(self) -> ReplicaLog: ...
    @property
    def broker_id(self) -> int: ...
    @property
    def record_diverging_fetch_offset(self) -> bool:
        """KAFKA-13141 (Kafka 2.8.0): the leader takes a diverging fetch's offset as the
        follower's log end offset. Off unless the cluster models that release."""
    @record_diverging_fetch_offset.setter
    def record_diverging_fetch_offset(self, value: bool) -> None: ...
    @property
    def reset_followers_on_skipped_epoch(self) -> bool:
        """The proposed fix of the re-elected leader's stale follower state (``kafka.release``
        ``+skipped-epoch-reset``): a leader re-elected across a skipped epoch resets its followers."""
    @reset_followers_on_skipped_epoch.setter
    def reset_followers_on_skipped_epoch(self, value: bool) -> None: ...
    @property
    def list_offsets_up_to_hw(self) -> bool:
        """ListOffsets by timestamp as before Kafka 1.0.0 (KAFKA-5522): the HW itself may be
        answered, whatever the isolation level."""
    @list_offsets_up_to_hw.setter
    def list_offsets_up_to_hw(self, value: bool) -> None: ...
    @property
    def truncation_halts(self) -> bool:
        """Before Kafka 2.0.1 (KAFKA-7414), unclean leader election disabled: a follower whose log end
        offset is past the leader's halts its broker instead of truncating."""
    @truncation_halts.setter
    def truncation_halts(self, value: bool) -> None: ...
    @property
    def replicas(self) -> tuple[int, ...]: ...
    @property
    def generation(self) -> int: ...
    @property
    def role(self) -> str:
        """``"leader"``, ``"follower"`` or ``"none"``."""
    @property
    def leader_id(self) -> int | None: ...
    @property
    def leader_epoch(self) -> int | None: ...
    @property
    def partition_epoch(self) -> int | None: ...
    @property
    def isr(self) -> tuple[int, ...]: ...
    @property
    def pending_isr(self) -> list[int] | None: ...
    def state_key(self) -> tuple[str, int | None, int | None, list[int] | None, int, int, int, int]:
        """``(role, leader_epoch, partition_epoch, pending_isr)`` and the log's ``state_key()``,
        in one call (the state checker's change detector)."""
    @property
    def maximal_isr(self) -> tuple[int, ...]: ...
    @property
    def leader_epoch_start_offset(self) -> int | None: ...
    @property
    def fetch_state(self) -> str:
        """``"idle"``, ``"truncating"``, ``"fetching"`` or ``"fenced"``."""
    @property
    def fetcher_session(self) -> int: ...
    @property
    def checkpointed_high_watermark(self) -> int: ...
    def take_events(self) -> list[str]: ...
    def apply_leader_and_isr(self, msg: Any, now_ms: int) -> str:
        """``"ignored"``, ``"isr"``, ``"leader"``, ``"follower"`` or ``"follower-same"``."""
    def handle_produce(self, req: Any, now_ms: int) -> Any: ...
    def handle_write_txn_markers(self, req: Any, now_ms: int) -> Any:
        """One WriteTxnMarkers request as leader; a ``WriteTxnMarkersResponse``."""
    def produce_completion(self, required_offset: int) -> tuple[bool, str | None]: ...
    def maybe_increment_high_watermark(self, now_ms: int) -> bool: ...
    def maybe_shrink_isr(self, now_ms: int) -> Any | None: ...
    def pending_alter_partition(self) -> Any | None: ...
    def handle_alter_partition_response(self, resp: Any, now_ms: int) -> None: ...
    def checkpoint_high_watermark(self) -> None: ...
    def flush(self) -> None: ...
    def crash(self, lose_unflushed: bool) -> int: ...
    def clean_shutdown(self) -> None: ...
    def next_request(self) -> Any | None: ...
    def handle_fetch(self, req: Any, now_ms: int, update_state: bool = True) -> tuple[Any, Any | None]: ...
    def handle_offsets_for_leader_epoch(self, req: Any) -> Any: ...
    def handle_consumer_fetch(self, req: Any) -> Any: ...
    def preferred_read_replica(self, fetch_offset: int, client_rack: int) -> int | None:
        """KIP-392 on the leader: the follower in ``client_rack`` to read from, or ``None``."""
    def follower_log_end_offset(self, replica_id: int) -> int | None:
        """The LEO this replica, as leader, last stored for follower ``replica_id``."""
    def handle_fetch_response(self, resp: Any) -> str:
        """``"continue"``, ``"backoff"``, ``"fenced"`` or ``"discard"``."""
    def handle_offsets_for_leader_epoch_response(self, resp: Any) -> str: ...

_TRACE_KINDS: Final[list[str]]
"""Event kind names in ``kind`` code order (``docs/trace-format.md``)."""
_TRACE_INVARIANTS: Final[list[str]]
"""Names of the invariants the replay checks."""

@final
class Replayer:
    """Bulk trace replay with incremental invariant checks (``epochlab.trace.replay`` drives
    it). Feed record batches in order; the state carries over. The GIL is released while a
    batch is replayed; calls on one object are serialised by a lock."""

    def __new__(cls, *, checks: Sequence[str] | None = None, collect: str = "first",
                min_insync_replicas: int = 1, kip101_epoch_cache: bool = False,
                max_violations: int = 10000, eligible_leader_replicas: bool = False,
                wrapper_batches: bool = False) -> Replayer: ...
    def replay_batch(self, batch: Any, first_row: int, *, start: int = 0, stop: int | None = None,
                     pause_kinds: Sequence[str] | None = None) -> tuple[str, int]:
        """``("done", stop)``, ``("paused", i)`` or ``("stopped", i)``; ``TraceError`` for a
        malformed row or column (rows before it were applied), ``TypeError`` for an object
        without ``__arrow_c_array__``."""
    @property
    def rows(self) -> int: ...
    @property
    def violation_count(self) -> int: ...
    def violations(self) -> list[dict[str, Any]]: ...
    def replicas(self) -> list[dict[str, Any]]: ...
    def log(self, partition: int, broker: int) -> ReplicaLog | None: ...
    def true_high_watermark(self, partition: int) -> int | None: ...
    def log_heap_bytes(self) -> int: ...

def _generate_trace(batches: int, *, leader_changes: int = 0, replicas: int = 3, partitions: int = 1,
                   seed: int = 0, max_records: int = 3,
                   crash_every: int | None = None) -> dict[str, Any]:
    """Column buffers of a synthetic trace (``epochlab.trace.generate`` wraps it)."""

def check_trace_batch(batch: Any, first_row: int = 0) -> int:
    """Import ``batch`` through the Arrow C data interface and check its columns; its rows."""

# Kafka's on-disk formats (``src/formats/``), read only. ``data`` is the file's content as
# ``bytes``, ``bytearray`` or ``memoryview``; ``file`` is the name echoed in errors. Values are
# exactly as Kafka wrote them, its ``-1`` sentinels included (a dump, like DumpLogSegments).
# Errors are :class:`epochlab.errors.KafkaFormatError` (``file``, ``offset``, ``reason``),
# also for ``data`` that is not bytes-like.

def parse_segment(data: bytes | bytearray | memoryview, file: str) -> dict[str, Any]:
    """A segment ``.log``: ``{"file", "size", "valid_bytes", "batches", "error"}``.

    Batches (RecordBatch v2, and v0/v1 message sets, one dict per shallow message) are read
    until the end or the first structural problem, which is ``error`` =
    ``{"file", "offset", "reason"}`` with ``offset == valid_bytes`` (the bad batch's start;
    the reason names the exact byte when known); corrupt content never raises. A CRC mismatch
    alone is ``crc_valid: False`` on the batch and the scan goes on. Batch keys: ``position``,
    ``base_offset``, ``last_offset``, ``last_offset_delta``, ``count``, ``base_sequence``,
    ``last_sequence``, ``producer_id``, ``producer_epoch``, ``partition_leader_epoch``,
    ``is_transactional``, ``is_control``, ``delete_horizon_ms``, ``magic``, ``attributes``,
    ``compression``, ``timestamp_type``, ``base_timestamp``, ``max_timestamp``, ``crc``,
    ``crc_valid``, ``size``, ``records`` (``offset``, ``offset_delta``, ``timestamp``, ``key``,
    ``value``, ``headers`` as ``[key, value]`` pairs, ``size``) and ``control`` (``None`` or
    ``{"type", "type_id", "version", "coordinator_epoch"}``).
    """

def parse_leader_epoch_checkpoint(data: bytes | bytearray | memoryview, file: str) -> dict[str, Any]:
    """``{"version": int | None, "entries": [(epoch, start_offset), ...]}``; an empty file has
    version ``None``."""

def parse_offset_checkpoint(data: bytes | bytearray | memoryview, file: str) -> dict[str, Any]:
    """``{"version": int | None, "entries": [(topic, partition, offset), ...]}``."""

def parse_partition_metadata(data: bytes | bytearray | memoryview, file: str) -> dict[str, Any]:
    """``{"version": int, "topic_id": str}``, the topic id in Kafka's base64 form as written."""

def parse_producer_snapshot(data: bytes | bytearray | memoryview, file: str) -> dict[str, Any]:
    """``{"version", "crc", "crc_valid", "entries"}``, each entry a dict with ``producer_id``,
    ``epoch``, ``last_sequence``, ``last_offset``, ``offset_delta``, ``timestamp``,
    ``coordinator_epoch``, ``current_txn_first_offset``."""

def parse_offset_index(data: bytes | bytearray | memoryview, file: str) -> list[tuple[int, int]]:
    """``[(relative_offset, position), ...]`` up to the preallocated all-zero tail."""

def parse_time_index(data: bytes | bytearray | memoryview, file: str) -> list[tuple[int, int]]:
    """``[(timestamp, relative_offset), ...]`` up to the preallocated all-zero tail."""

def parse_txn_index(data: bytes | bytearray | memoryview, file: str) -> list[dict[str, int]]:
    """``[{"version", "producer_id", "first_offset", "last_offset", "last_stable_offset"}, ...]``."""


# -- the simulator's event loop and network (semantics: epochlab.sim.kernel and
# -- epochlab.sim.network, whose pure-Python classes the reference backend runs)

RTO_MIN_MS: Final[int]
RTO_MAX_MS: Final[int]
RECONNECT_MS: Final[int]

@final
class Timer:
    """Handle of a scheduled callback; :meth:`cancel` makes it a no-op."""
    def __new__(cls, time_ms: int, quiet: bool = False) -> Timer: ...
    def cancel(self) -> None: ...
    @property
    def cancelled(self) -> bool: ...
    @property
    def quiet(self) -> bool: ...
    @property
    def time_ms(self) -> int: ...

@final
class Kernel:
    """Virtual time in integer milliseconds and one queue of events (callbacks and messages in
    flight), ordered by ``(time_ms, sequence)``; ``epochlab.sim.kernel.Kernel`` in Rust."""
    def __new__(cls, seed: Any) -> Kernel: ...
    @property
    def seed(self) -> Any: ...
    @property
    def now_ms(self) -> int: ...
    @property
    def last_quiet(self) -> bool: ...
    @property
    def steps(self) -> int: ...
    def rng(self, name: Any) -> Any:
        """The ``random.Random`` of one component, made on first use from the seed and ``name``."""
    def schedule(self, delay_ms: Any, callback: Any, quiet: bool | None = None) -> Timer: ...
    def schedule_at(self, time_ms: Any, callback: Any, quiet: bool | None = None) -> Timer: ...
    def call_as(self, node: Any, callback: Any, *args: Any) -> Any:
        """``callback(*args)`` as an event of ``node``: the timers it schedules are ``node``'s
        (the owner the state checker's ``Watcher`` is told of)."""
    def next_time(self) -> int | None: ...
    def step(self) -> bool: ...
    def run_until(self, time_ms: Any, stop: Any = None, observe: Any = None) -> bool: ...
    def __setattr__(self, name: str, value: Any, /) -> None:
        """Only ``step`` may be set: ``run_until`` then calls it once per event."""

@final
class Network:
    """Message delivery with per-link delays, loss, duplication, reordering and partitions;
    ``epochlab.sim.network.Network`` in Rust, drawing from its own Mersenne Twister seeded
    from ``kernel.rng("network")`` exactly as ``random.Random`` draws."""
    def __new__(cls, kernel: Kernel, default_delay_ms: Sequence[int], controller_delay_ms: Sequence[int]) -> Network: ...
    @property
    def sent(self) -> int: ...
    @property
    def delivered(self) -> int: ...
    @property
    def dropped(self) -> int: ...
    @property
    def held(self) -> int: ...
    def set_alive(self, node: Any, alive: bool) -> None: ...
    def peers(self, node: Any) -> list[Any]: ...
    def is_alive(self, node: Any) -> bool: ...
    def partition(self, groups: Any) -> None: ...
    def heal(self) -> None: ...
    def set_link(self, a: Any, b: Any, delay_ms: Sequence[int] | None = None, drop: float = 0.0,
                 duplicate: float = 0.0, reorder: bool = False) -> bool: ...
    def set_retransmission_backoff(self, on: bool) -> None: ...
    def slow_node(self, node: Any, extra_delay_ms: Any) -> None: ...
    def connected(self, a: Any, b: Any) -> bool: ...
    def usable(self, a: Any, b: Any) -> bool: ...
    def send(self, src: Any, dst: Any, deliver: Any, kind: str = "", coalesce: str | None = None,
             quiet: bool = False) -> None: ...
    def post(self, src: Any, dst: Any, nodes: dict[Any, Any], method: str, msg: Any, kind: str = "",
             coalesce: str | None = None, quiet: bool | None = None) -> bool: ...
    def discard_held(self, src: Any, dst: Any) -> int: ...
    def close_connection(self, a: Any, b: Any) -> None: ...

@final
class ChangeWatch:
    """The state checker's change detector: ``changes(brokers, controller)`` is ``None`` when
    no broker's ``(alive, incarnation, replica.state_key())`` and not the controller's
    ``(leader, leader_epoch, partition_epoch, isr, elr, len(elections))`` moved since the last
    call, else ``(changed broker ids, controller changed)``; ``epochlab.reference.ChangeWatch``
    is its plain statement."""
    def __new__(cls) -> ChangeWatch: ...
    def changes(self, brokers: dict[int, Any], controller: Any) -> tuple[list[int], bool] | None: ...
    def watching(self, brokers: dict[int, Any], controller: Any,
                 then: Callable[[list[int], bool], Any]) -> Watcher:
        """A callable for the kernel's ``observe`` hook: ``changes(brokers, controller)`` and,
        when something moved, ``then(changed, controller_changed)``. As the Rust kernel's
        hook, after an event of a broker (the controller), a message delivered to it or a
        timer one of its events scheduled, only its key is compared, after a message dropped
        or held none (components act on each other only through messages)."""
    def forget(self, b: int) -> None: ...

@final
class Watcher:
    """``ChangeWatch.watching(...)``: call it with no arguments."""
    def __call__(self) -> None: ...

@final
class FetchPlane:
    """The replication traffic, the produce path and the consumer reads of brokers with Rust
    replicas, run without Python frames: the follower's fetcher, the leader's fetch serving,
    the leader's produce handling (client connections, acks, the acks=all purgatory) and the
    consumer fetch serving with its long poll of ``epochlab.sim.broker.Broker``, step for
    step (``Broker.use_plane``; the engines are ``src/sim/fetcher.rs``,
    ``src/sim/produce.rs`` and ``src/sim/reads.rs``, which ``src/bindings/plane.rs``
    drives). A broker id not attached, or an attached object without a broker's attributes,
    is a ``TypeError``."""
    def __new__(cls, kernel: Kernel, network: Network, nodes: dict[Any, Any],
                request_timeout_ms: int, backoff_ms: int, wait_max_ms: int,
                kraft: bool, *, held_reads: bool = False, no_timestamp_lookup: bool = False,
                rack_selector: bool = False) -> FetchPlane: ...
    def attach(self, b: int, broker: Any) -> dict[str, FetchPlaneHandler]:
        """Take over broker ``b``'s traffic; the handlers to set on it, by method name."""
    def start_fetcher(self, b: int) -> None: ...
    def answer_parked_fetches(self, b: int) -> None: ...
    def clear_parked_fetches(self, b: int) -> None: ...
    def abandon_fetcher(self, b: int) -> None: ...
    def stop_fetcher(self, b: int) -> None: ...
    def fetch_timeout(self, b: int, token: int) -> None: ...
    def answers_in_flight(self, b: int, response: Any) -> bool: ...
    def fetch_state(self, b: int) -> tuple[int, Any | None, int]:
        """``(fetch token, the request in flight or None, parked follower fetches)``."""
    def try_complete_delayed(self, b: int) -> None:
        """Every purgatory (produce here, then the broker's markers and consumer reads), then
        the broker's ``_note_state``."""
    def answer_parked_produces(self, b: int, force_error: str | None = None) -> None:
        """Answer the parked produce requests that are done; with ``force_error`` (a Kafka
        error name) every one, with that error."""
    def append_produce(self, b: int, request: Any) -> None:
        """Append a produce request that passed its KIP-890 verification."""
    def answer_produce(self, b: int, request: Any, response: Any | None) -> None:
        """Send a response the broker made and read the connection's next request."""
    def forget_produces(self, b: int) -> None:
        """A crash: the parked produce requests and the open connections are forgotten."""
    def reset_produce_connections(self, b: int) -> None: ...
    def parked_produces(self, b: int) -> int:
        """How many produce requests wait in broker ``b``'s purgatory."""
    def park_marker(self, b: int, request: Any, offset: int, to: str, timeout_ms: int) -> None:
        """A transaction marker written at ``offset`` waits up to ``timeout_ms`` for the HW."""
    def answer_parked_markers(self, b: int, force_error: str | None = None) -> None:
        """Answer the parked transaction markers that are done; with ``force_error`` every one."""
    def clear_markers(self, b: int) -> None:
        """A crash or shutdown: the parked transaction markers are forgotten."""
    def parked_markers(self, b: int) -> int:
        """How many transaction markers wait in broker ``b``'s purgatory."""
    def check_parked_reads(self, b: int) -> None:
        """Answer the parked consumer fetches that have something to read now."""
    def drop_parked_reads(self, b: int) -> None:
        """A crash or shutdown: the parked consumer fetches are forgotten."""
    def parked_reads(self, b: int) -> int:
        """How many consumer fetches wait in broker ``b``'s purgatory."""

@final
class FetchPlaneHandler:
    """One broker's handler of one replication message: ``handler(message, src)``."""
    def __call__(self, message: Any, src: Any) -> None: ...

@final
class FetchPlaneTimer:
    """A timer of a ``FetchPlane`` (the kernel calls it)."""
    def __call__(self) -> None: ...

@final
class StateScan:
    """The passing case of ``epochlab.checks.state.StateChecker``'s per-event checks, for
    clusters of Rust replicas: each method is ``True`` when that part passes (having made the
    bookkeeping writes the Python statement makes) and ``False``, with nothing written, when
    the Python statement must run (it reports). A missing attribute or broker is a
    ``TypeError``."""
    def __new__(cls, epochs_in_batches: bool, strict_min_isr: bool, min_isr: int) -> StateScan: ...
    def replica(self, b: int, broker: Any, leader_hw: dict[tuple[int, int, int], int]) -> bool:
        """``_check_replica(b)`` passes (then ``leader_hw`` is updated)."""
    def log_matching(self, brokers: dict[int, Any], changed: list[int]) -> bool:
        """``_check_log_matching(changed)`` passes."""
    def leaders(self, checker: Any, changed: list[int], moved: bool) -> bool:
        """``_check_leaders(changed, moved)`` passes (then the leadership is noted)."""
    def strong_isr(self, checker: Any, changed: list[int], every: bool) -> bool:
        """The Inv-StrongIsr half of ``_check_isr`` passes."""
    def check(self, checker: Any, changed: list[int], ctrl_changed: bool) -> tuple[int, bool | None] | None:
        """``_check(changed, ctrl_changed)`` in one call: ``None`` when every part passes, else
        ``(stage, moved)``, the part the Python statement goes on from (``_check_from``)."""

@final
class ProtocolCoverage:
    """One run's protocol-state coverage (``epochlab.fuzz.coverage``, ``src/coverage.rs``) over
    a cluster of Rust replicas. A missing attribute, a broker whose replica is not a Rust one,
    or a value of the wrong type is a ``TypeError``."""
    def __new__(cls, min_isr: int) -> ProtocolCoverage: ...
    def observe(self, brokers: dict[int, Any], controller: Any, network: Any, true_hw: int, recovering: Any,
                step: int, now_ms: int) -> bool:
        """Abstract the cluster's state now, at action index ``step`` and simulated time
        ``now_ms`` (``network.usable("controller", id)`` tells a leader cut from the
        controller); ``True`` when a broker's or the cluster's tuple moved."""
    def features(self) -> list[int]:
        """The features reached so far, increasing."""
    def first_steps(self) -> list[int]:
        """The step each feature was first reached at, in ``features()`` order."""
    def first_times(self) -> list[int]:
        """The simulated time (ms) each feature was first reached at, in ``features()``
        order."""
    def first_brokers(self) -> list[tuple[int, int]]:
        """For each feature, in ``features()`` order, the broker whose tuple it is and the
        follower of that broker's stale belief at its first reach (-1: none; both -1 for a
        cluster feature)."""
    @property
    def observations(self) -> int: ...

def _twister_draws(rng: Any, draws: Sequence[tuple[str, int]]) -> list[float]:
    """Draws ``("below", n)`` / ``("random", 0)`` from a twister seeded with ``rng``'s state
    (the test that compares the network's stream with ``random.Random``)."""

def _bootstrap_draws(runs: Sequence[Sequence[int]], qs: Sequence[float], resamples: int, rng: Any) -> list[list[float]]:
    """Per quantile, ``resamples`` pooled percentiles of a bootstrap over runs, drawing run
    indices from a copy of ``rng``'s (a ``random.Random``) state as ``randrange`` does
    (``epochlab.campaigns.aggregate.bootstrap_draws_plain`` is the plain statement)."""
