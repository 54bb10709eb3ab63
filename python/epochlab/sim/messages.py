"""Protocol messages exchanged by replicas, brokers, the controller and clients.

Plain frozen dataclasses, one per Kafka request or response the model needs, with Kafka's
error names as strings (``None`` = no error). They carry no behaviour, so
:mod:`epochlab.sim.replica` can be ported 1:1 to Rust. ``session`` fields echo the follower's
fetcher session so a response to an abandoned fetcher is recognised and dropped (Kafka drops
partition data whose fetch state changed while the request was in flight, ``PROTOCOL.md``
1.4d).
"""

from __future__ import annotations

from dataclasses import dataclass

from epochlab import RecordBatch

__all__ = [
    "AlterPartitionRequest",
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
]


@dataclass(frozen=True)
class FetchRequest:
    """A follower's fetch (1.4d, 1.5). ``current_leader_epoch`` is sent from G3 (KIP-320),
    ``last_fetched_epoch`` from G4 (truncate on fetch); ``None`` = field absent."""

    replica_id: int
    session: int
    fetch_offset: int
    current_leader_epoch: int | None
    last_fetched_epoch: int | None
    log_start_offset: int


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class OffsetsForLeaderEpochRequest:
    """Follower asks where its ``leader_epoch`` ends on the leader (1.4b-d); ``None`` is
    UNDEFINED_EPOCH (empty epoch cache)."""

    replica_id: int
    session: int
    leader_epoch: int | None
    current_leader_epoch: int | None


@dataclass(frozen=True)
class OffsetsForLeaderEpochResponse:
    """``end_offset`` alone in G1 (v0); ``answer`` = ``(epoch, end_offset)`` from G2 (v1+).
    ``None`` means UNDEFINED_EPOCH_OFFSET."""

    request: OffsetsForLeaderEpochRequest
    error: str | None
    end_offset: int | None = None
    answer: tuple[int, int] | None = None


@dataclass(frozen=True)
class LeaderAndIsr:
    """A controller decision for the partition (1.9): who leads in which epoch, the ISR, the
    partition epoch, the assignment. ``leader is None`` means OFFLINE."""

    leader: int | None
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]


@dataclass(frozen=True)
class AlterPartitionRequest:
    """Leader proposes ``new_isr`` (KIP-497, 1.7), validated by both epochs."""

    broker_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]


@dataclass(frozen=True)
class AlterPartitionResponse:
    """Controller's answer: the committed state on success, an error otherwise
    (``FENCED_LEADER_EPOCH``, ``INVALID_UPDATE_VERSION``, ``INELIGIBLE_REPLICA``)."""

    request: AlterPartitionRequest
    error: str | None
    leader_epoch: int = 0
    partition_epoch: int = 0
    isr: tuple[int, ...] = ()


@dataclass(frozen=True)
class ProduceRequest:
    """One batch from a producer (``records`` are values). Producer fields present iff the
    producer is idempotent. ``timeout_ms`` bounds the acks=all wait (request.timeout.ms)."""

    client: str
    request_id: int
    acks: str
    records: tuple[int, ...]
    timeout_ms: int
    producer_id: int | None = None
    producer_epoch: int | None = None
    base_sequence: int | None = None


@dataclass(frozen=True)
class ProduceResponse:
    """``base_offset``/``last_offset`` of the (possibly original, if ``duplicate``) append."""

    request_id: int
    error: str | None
    base_offset: int | None = None
    last_offset: int | None = None
    duplicate: bool = False


@dataclass(frozen=True)
class ConsumerFetchRequest:
    """A consumer fetch. ``fetch_offset=None`` asks for the reset offset instead (ListOffsets:
    ``reset`` is ``"earliest"`` or ``"latest"``; latest is the HW for read_uncommitted).
    ``validate_epoch`` asks for an OffsetsForLeaderEpoch answer (KIP-320 position check)."""

    client: str
    request_id: int
    fetch_offset: int | None
    current_leader_epoch: int | None
    max_records: int
    reset: str = "latest"
    validate_epoch: int | None = None


@dataclass(frozen=True)
class ConsumerFetchResponse:
    """``records`` are ``(offset, value, batch_epoch)`` below the HW. ``reset_offset`` answers
    a ListOffsets; ``epoch_end`` answers a validation (capped at the HW, ``None`` if
    UNDEFINED)."""

    request_id: int
    error: str | None
    leader_epoch: int | None = None
    records: tuple[tuple[int, int, int], ...] = ()
    high_watermark: int = 0
    reset_offset: int | None = None
    epoch_end: tuple[int, int] | None = None


@dataclass(frozen=True)
class BrokerHeartbeat:
    """Broker liveness (KRaft heartbeat / ZK session). A new ``incarnation`` is a restart;
    ``clean_shutdown`` is the on-disk clean-shutdown marker of the previous run (KIP-966)."""

    broker_id: int
    incarnation: int
    clean_shutdown: bool


@dataclass(frozen=True)
class ControlledShutdownRequest:
    """Broker asks the controller to move leadership away before it stops (1.9)."""

    broker_id: int
    incarnation: int
