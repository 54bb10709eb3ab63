"""Protocol messages exchanged by replicas, brokers, the controller and clients.

Plain frozen dataclasses, one per Kafka request or response the model needs, with Kafka's
error names as strings (``None`` = no error). They carry no behaviour, so
:mod:`epochlab.sim.replica` can be ported 1:1 to Rust. ``session`` fields echo the follower's
fetcher session so a response to an abandoned fetcher is recognised and dropped (Kafka drops
partition data whose fetch state changed while the request was in flight,
``docs/core-semantics.md`` rule 1.4d).
"""

from __future__ import annotations

from typing import TypeVar

from epochlab import RecordBatch
from epochlab.sim.frozen import frozen

__all__ = [
    "MAX_TIMESTAMP",
    "evolve",
    "is_list_spec",
    "AddPartitionsToTxnRequest",
    "AlterPartitionRequest",
    "EndTxnRequest",
    "InitProducerIdRequest",
    "TxnCoordinatorResponse",
    "BrokerHeartbeat",
    "ControlledShutdownRequest",
    "AlterPartitionResponse",
    "ConsumerFetchRequest",
    "ConsumerFetchResponse",
    "FetchRequest",
    "FetchResponse",
    "LeaderAndIsr",
    "OffsetsForLeaderEpochRequest",
    "OffsetsForLeaderEpochResponse",
    "ProduceRequest",
    "ProduceResponse",
    "WriteTxnMarkersRequest",
    "WriteTxnMarkersResponse",
    "RECORD_DATA",
    "RECORD_TRANSACTIONAL",
    "RECORD_ABORT_MARKER",
    "RECORD_COMMIT_MARKER",
]

_Msg = TypeVar("_Msg")


def evolve(msg: _Msg, **changes: object) -> _Msg:
    """A copy of the message ``msg`` with ``changes`` applied: ``dataclasses.replace`` for
    these plain frozen dataclasses (no ``__post_init__``, no slots), without its walk over the
    fields on every call (it is on the fetch path). An unknown field is a ``TypeError``.

    >>> evolve(FetchRequest(1, 0, 5, 2, 1, 0), broker_epoch=3).broker_epoch
    3
    """
    fields = msg.__dict__
    for name in changes:
        if name not in fields:
            raise TypeError(f"{type(msg).__name__} has no field {name!r}")
    copy = object.__new__(type(msg))
    copy.__dict__.update(fields)
    copy.__dict__.update(changes)
    return copy


#: Kinds of the records a consumer fetch returns (last element of each record tuple).
RECORD_DATA = 0
RECORD_TRANSACTIONAL = 1
RECORD_ABORT_MARKER = 2
RECORD_COMMIT_MARKER = 3


@frozen
class FetchRequest:
    """A follower's fetch (1.4d, 1.5). ``current_leader_epoch`` is sent from G3 (KIP-320),
    ``last_fetched_epoch`` from G4 (truncate on fetch); ``None`` = field absent."""

    replica_id: int
    session: int
    fetch_offset: int
    current_leader_epoch: int | None
    last_fetched_epoch: int | None
    log_start_offset: int
    #: The follower's broker epoch (KIP-903, G5: the incarnation that sent the fetch), so the
    #: leader can ignore a fetch from a previous incarnation; ``None`` = not sent (-1 in Kafka).
    broker_epoch: int | None = None


@frozen
class FetchResponse:
    """The leader's answer. ``high_watermark`` is the leader's HW *before* this fetch updated
    the follower's state (1.5), hence the follower's one-round-trip HW lag. On
    ``OFFSET_OUT_OF_RANGE`` the leader's ``log_end_offset`` / ``log_start_offset`` are those a
    real follower would obtain with a ListOffsets round trip (piggybacked: simplification)."""

    request: FetchRequest
    error: str | None
    batches: tuple[RecordBatch, ...] = ()
    high_watermark: int = 0
    log_start_offset: int = 0
    log_end_offset: int = 0
    diverging_epoch: tuple[int, int] | None = None


@frozen
class OffsetsForLeaderEpochRequest:
    """Follower asks where its ``leader_epoch`` ends on the leader (1.4b-d); ``None`` is
    UNDEFINED_EPOCH (empty epoch cache)."""

    replica_id: int
    session: int
    leader_epoch: int | None
    current_leader_epoch: int | None


@frozen
class OffsetsForLeaderEpochResponse:
    """``end_offset`` alone in G1 (v0); ``answer`` = ``(epoch, end_offset)`` from G2 (v1+).
    ``None`` means UNDEFINED_EPOCH_OFFSET."""

    request: OffsetsForLeaderEpochRequest
    error: str | None
    end_offset: int | None = None
    answer: tuple[int, int] | None = None


@frozen
class LeaderAndIsr:
    """A controller decision for the partition (1.9): who leads in which epoch, the ISR, the
    partition epoch, the assignment. ``leader is None`` means OFFLINE."""

    leader: int | None
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    #: ``(broker id, broker epoch, in controlled shutdown)`` for every registered, unfenced
    #: broker, in id order: KRaft's (G5) metadata image of the brokers; in G3 and G4 the broker
    #: epochs of KIP-380 (ZooKeeper era, 2.2+); empty before.
    brokers: tuple[tuple[int, int, bool], ...] = ()
    #: Version of that image (the controller's metadata offset): newer images replace older.
    metadata_version: int = 0
    #: The sending controller's epoch; a ZooKeeper-era broker ignores a request of an older
    #: one than it has heard from (STALE_CONTROLLER_EPOCH).
    controller_epoch: int = 1
    #: KRaft (G5): ``(broker id, broker epoch)`` of every registered broker the controller
    #: holds fenced (the image's ``BrokerRegistration.fenced``), in id order: a restarted
    #: broker learns from it that its registration was accepted; empty before G5.
    fenced: tuple[tuple[int, int], ...] = ()


@frozen
class AlterPartitionRequest:
    """Leader proposes ``new_isr`` (KIP-497, 1.7), validated by both epochs."""

    broker_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    #: G5 (KIP-903): the broker epoch of each ``new_isr`` member as the leader saw it in that
    #: follower's fetches, ``None`` where unknown (the leader itself); empty before G5.
    broker_epochs: tuple[int | None, ...] = ()


@frozen
class AlterPartitionResponse:
    """Controller's answer: the committed state on success, an error otherwise
    (``FENCED_LEADER_EPOCH``, ``INVALID_UPDATE_VERSION``, ``INELIGIBLE_REPLICA``,
    ``OPERATION_NOT_ATTEMPTED``)."""

    request: AlterPartitionRequest
    error: str | None
    leader_epoch: int = 0
    partition_epoch: int = 0
    isr: tuple[int, ...] = ()


@frozen
class ProduceRequest:
    """One batch from a producer (``records`` are values). Producer fields present iff the
    producer is idempotent. ``timeout_ms`` bounds the acks=all wait (request.timeout.ms).
    ``is_transactional`` marks a batch written inside a transaction (``docs/core-semantics.md`` rule 1.12);
    ``transactional_id`` travels with it as in Kafka's ProduceRequest, for the broker's KIP-890
    verification (the replica state machine does not read it)."""

    client: str
    request_id: int
    acks: str
    records: tuple[int, ...]
    timeout_ms: int
    producer_id: int | None = None
    producer_epoch: int | None = None
    base_sequence: int | None = None
    is_transactional: bool = False
    transactional_id: str | None = None


@frozen
class ProduceResponse:
    """``base_offset``/``last_offset`` of the (possibly original, if ``duplicate``) append."""

    request_id: int
    error: str | None
    base_offset: int | None = None
    last_offset: int | None = None
    duplicate: bool = False


#: The largest timestamp a ListOffsets may ask for (Kafka's Int64 timestamps, non-negative).
MAX_TIMESTAMP = 2**63 - 1


def is_list_spec(spec: object) -> bool:
    """What a ListOffsets may ask for: ``"latest"``, ``"earliest"`` or a timestamp (an int in
    ``[0, 2^63-1]``; not a bool)."""
    if isinstance(spec, bool):
        return False
    if isinstance(spec, int):
        return 0 <= spec <= MAX_TIMESTAMP
    return spec in ("latest", "earliest")


@frozen
class ConsumerFetchRequest:
    """A consumer fetch. ``fetch_offset=None`` asks for the reset offset instead (ListOffsets:
    ``reset`` is ``"earliest"``, ``"latest"`` (the HW for read_uncommitted) or ``"timestamp"``,
    the first offset whose record's timestamp is at least ``reset_timestamp``).
    ``validate_epoch`` asks for an OffsetsForLeaderEpoch answer (KIP-320 position check)."""

    client: str
    request_id: int
    fetch_offset: int | None
    current_leader_epoch: int | None
    max_records: int
    reset: str = "latest"
    validate_epoch: int | None = None
    isolation_level: str = "read_uncommitted"
    #: the consumer's rack (a broker id; each broker is its own rack) when it sends client
    #: metadata for fetch-from-follower (KIP-392, G3+); ``None``: a leader-only request
    rack: int | None = None
    #: ``fetch.max.wait.ms``: how long the broker may hold a fetch that finds nothing to read
    #: (``DelayedFetch``); 0 for ListOffsets, validation and a consumer that does not wait
    max_wait_ms: int = 0
    #: the target timestamp of a ListOffsets with ``reset="timestamp"`` (ms)
    reset_timestamp: int | None = None


@frozen
class ConsumerFetchResponse:
    """``records`` are ``(offset, value, batch_epoch, producer_id, kind)`` below the HW
    (read_uncommitted) or the LSO (read_committed), control records included so the consumer
    can step over them; ``kind`` is one of ``RECORD_DATA``, ``RECORD_TRANSACTIONAL``,
    ``RECORD_ABORT_MARKER``, ``RECORD_COMMIT_MARKER``; ``producer_id`` is ``None`` for a batch
    without producer fields. ``aborted_transactions`` lists ``(producer_id, first_offset)`` of
    the aborted transactions overlapping the returned range (read_committed only), as Kafka's
    FetchResponse does. ``reset_offset`` answers a ListOffsets (latest = the HW, or the LSO for
    read_committed); ``epoch_end`` answers a validation (capped at the HW, ``None`` if
    UNDEFINED)."""

    request_id: int
    error: str | None
    leader_epoch: int | None = None
    records: tuple[tuple[int, int, int, int | None, int], ...] = ()
    high_watermark: int = 0
    reset_offset: int | None = None
    epoch_end: tuple[int, int] | None = None
    last_stable_offset: int = 0
    aborted_transactions: tuple[tuple[int, int], ...] = ()
    #: KIP-392: the leader names the follower this consumer should read from (no records then)
    preferred_read_replica: int | None = None


@frozen
class WriteTxnMarkersRequest:
    """The transaction coordinator asks the partition leader to write one COMMIT or ABORT
    marker (Kafka's WriteTxnMarkers, one marker per request here; origin COORDINATOR, acks=all:
    answered once the marker is below the HW). ``transactional_id`` is for the coordinator's
    own bookkeeping; the replica does not read it. ``transaction_version`` (2 with KIP-890
    part 2) decides the marker-epoch rule (WriteTxnMarkers v2 carries it)."""

    request_id: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    transactional_id: str = ""
    transaction_version: int = 0


@frozen
class WriteTxnMarkersResponse:
    """``offset`` of the appended marker on success; errors NOT_LEADER_OR_FOLLOWER,
    NOT_ENOUGH_REPLICAS(_AFTER_APPEND), INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED,
    REQUEST_TIMED_OUT."""

    request_id: int
    error: str | None
    offset: int | None = None


@frozen
class ClientDisconnect:
    """A client closed its connection to a broker at ``closed_ms`` (the Java client, or
    librdkafka, on a request timeout); the broker's side learns it when the FIN arrives."""

    client: str
    closed_ms: int


@frozen
class BrokerHeartbeat:
    """Broker liveness (KRaft heartbeat / ZK session). A new ``incarnation`` is a restart;
    ``clean_shutdown`` is the on-disk clean-shutdown marker of the previous run (KIP-966);
    ``want_fence`` (KRaft): the broker has not finished starting and asks to stay fenced
    (``BrokerHeartbeatRequest.wantFence``, true until ``setReadyToUnfence``)."""

    broker_id: int
    incarnation: int
    clean_shutdown: bool
    want_fence: bool = False


@frozen
class ControlledShutdownRequest:
    """Broker asks the controller to move leadership away before it stops (1.9)."""

    broker_id: int
    incarnation: int


# -- transaction coordinator traffic (Python only: the coordinator is not part of the replica
#    state machine) ---------------------------------------------------------------------------

@frozen
class InitProducerIdRequest:
    """InitProducerId for ``transactional_id`` (1.12): a producer id and a bumped epoch."""

    client: str
    request_id: int
    transactional_id: str
    transaction_timeout_ms: int


@frozen
class AddPartitionsToTxnRequest:
    """AddPartitionsToTxn from a producer; with ``verify_only`` (KIP-890) from a partition
    leader asking whether ``partition`` is part of the producer's ongoing transaction."""

    client: str
    request_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partition: str
    verify_only: bool = False


@frozen
class EndTxnRequest:
    """EndTxn: commit (``commit=True``) or abort the producer's ongoing transaction."""

    client: str
    request_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool


@frozen
class TxnCoordinatorResponse:
    """The coordinator's answer to any of the three requests above. ``producer_epoch`` is the
    producer's epoch after the request (InitProducerId; EndTxn with KIP-890's epoch bump)."""

    request_id: int
    error: str | None
    producer_id: int | None = None
    producer_epoch: int | None = None
