//! The messages one replica handles or produces, with Kafka's error names.
//!
//! Fields mirror `epochlab.sim.messages` (the Python dataclasses the simulator carries over
//! its network); the bindings convert between the two.

use crate::log::{ProducerFields, RecordBatch};
use crate::types::{BrokerId, LeaderEpoch, Offset, ProducerEpoch, ProducerId};

/// Kafka error codes a replica answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KafkaError {
    NotLeaderOrFollower,
    FencedLeaderEpoch,
    UnknownLeaderEpoch,
    OffsetOutOfRange,
    NotEnoughReplicas,
    NotEnoughReplicasAfterAppend,
    InvalidProducerEpoch,
    OutOfOrderSequenceNumber,
    InvalidTxnState,
    TransactionCoordinatorFenced,
    /// KIP-207: ListOffsets(latest) while the new leader's HW is below its epoch start offset.
    OffsetNotAvailable,
    /// A request that waited in a purgatory past its timeout (`DelayedProduce.onExpiration`).
    RequestTimedOut,
    /// A request the broker's release does not know (a ListOffsets by timestamp before 0.10.1).
    UnsupportedVersion,
}

impl KafkaError {
    /// Every error, in declaration order.
    pub const ALL: [KafkaError; 13] = [
        KafkaError::NotLeaderOrFollower, KafkaError::FencedLeaderEpoch, KafkaError::UnknownLeaderEpoch,
        KafkaError::OffsetOutOfRange, KafkaError::NotEnoughReplicas, KafkaError::NotEnoughReplicasAfterAppend,
        KafkaError::InvalidProducerEpoch, KafkaError::OutOfOrderSequenceNumber, KafkaError::InvalidTxnState,
        KafkaError::TransactionCoordinatorFenced, KafkaError::OffsetNotAvailable, KafkaError::RequestTimedOut,
        KafkaError::UnsupportedVersion,
    ];

    /// The error Kafka names `name`.
    pub fn named(name: &str) -> Option<KafkaError> {
        KafkaError::ALL.into_iter().find(|e| e.name() == name)
    }

    /// Kafka's name of the error (`Errors.java`).
    pub fn name(self) -> &'static str {
        match self {
            KafkaError::NotLeaderOrFollower => "NOT_LEADER_OR_FOLLOWER",
            KafkaError::FencedLeaderEpoch => "FENCED_LEADER_EPOCH",
            KafkaError::UnknownLeaderEpoch => "UNKNOWN_LEADER_EPOCH",
            KafkaError::OffsetOutOfRange => "OFFSET_OUT_OF_RANGE",
            KafkaError::NotEnoughReplicas => "NOT_ENOUGH_REPLICAS",
            KafkaError::NotEnoughReplicasAfterAppend => "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
            KafkaError::InvalidProducerEpoch => "INVALID_PRODUCER_EPOCH",
            KafkaError::OutOfOrderSequenceNumber => "OUT_OF_ORDER_SEQUENCE_NUMBER",
            KafkaError::InvalidTxnState => "INVALID_TXN_STATE",
            KafkaError::TransactionCoordinatorFenced => "TRANSACTION_COORDINATOR_FENCED",
            KafkaError::OffsetNotAvailable => "OFFSET_NOT_AVAILABLE",
            KafkaError::RequestTimedOut => "REQUEST_TIMED_OUT",
            KafkaError::UnsupportedVersion => "UNSUPPORTED_VERSION",
        }
    }
}

/// A follower's fetch (1.4d, 1.5). `current_leader_epoch` from G3, `last_fetched_epoch` from G4.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchRequest {
    pub replica_id: BrokerId,
    pub session: u64,
    pub fetch_offset: Offset,
    pub current_leader_epoch: Option<LeaderEpoch>,
    pub last_fetched_epoch: Option<LeaderEpoch>,
    pub log_start_offset: Offset,
    /// KIP-903 (G5): the incarnation of the follower's broker that sent the fetch.
    pub broker_epoch: Option<u64>,
}

/// The leader's answer; `high_watermark` is the HW from before this fetch's state update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchResponse {
    pub error: Option<KafkaError>,
    pub batches: Vec<RecordBatch>,
    pub high_watermark: Offset,
    pub log_start_offset: Offset,
    pub log_end_offset: Offset,
    pub diverging_epoch: Option<(LeaderEpoch, Offset)>,
}

/// OffsetsForLeaderEpoch for the follower's latest epoch (`None` = UNDEFINED).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetsForLeaderEpochRequest {
    pub replica_id: BrokerId,
    pub session: u64,
    pub leader_epoch: Option<LeaderEpoch>,
    pub current_leader_epoch: Option<LeaderEpoch>,
}

/// `end_offset` alone in G0/G1 (v0); `answer` from G2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetsForLeaderEpochResponse {
    pub error: Option<KafkaError>,
    pub end_offset: Option<Offset>,
    pub answer: Option<(LeaderEpoch, Offset)>,
}

/// A controller decision; `leader: None` is OFFLINE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderAndIsr {
    pub leader: Option<BrokerId>,
    pub leader_epoch: LeaderEpoch,
    pub isr: Vec<BrokerId>,
    pub partition_epoch: u32,
    pub replicas: Vec<BrokerId>,
    /// G5 metadata image: (broker, broker epoch, in controlled shutdown) of every registered,
    /// unfenced broker; empty before G5.
    pub brokers: Vec<BrokerMetadata>,
    /// Version of that image; a newer one replaces an older one.
    pub metadata_version: u64,
}

/// One registered, unfenced broker in the KRaft metadata image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BrokerMetadata {
    pub broker_id: BrokerId,
    pub broker_epoch: u64,
    pub shutting_down: bool,
}

/// The leader's ISR proposal (KIP-497).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlterPartitionRequest {
    pub broker_id: BrokerId,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: u32,
    pub new_isr: Vec<BrokerId>,
    /// G5 (KIP-903): each member's broker epoch as seen in its fetches; empty before G5.
    pub broker_epochs: Vec<Option<u64>>,
}

/// Why the controller refused an AlterPartition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlterPartitionError {
    FencedLeaderEpoch,
    InvalidUpdateVersion,
    /// The request was not applied and the partition epoch is right: back to the committed ISR.
    IneligibleReplica,
    OperationNotAttempted,
}

impl AlterPartitionError {
    /// Kafka's name of the error.
    pub fn name(self) -> &'static str {
        match self {
            AlterPartitionError::FencedLeaderEpoch => "FENCED_LEADER_EPOCH",
            AlterPartitionError::InvalidUpdateVersion => "INVALID_UPDATE_VERSION",
            AlterPartitionError::IneligibleReplica => "INELIGIBLE_REPLICA",
            AlterPartitionError::OperationNotAttempted => "OPERATION_NOT_ATTEMPTED",
        }
    }

    /// The error named `name`, if it is one an AlterPartition answer carries.
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::FencedLeaderEpoch, Self::InvalidUpdateVersion, Self::IneligibleReplica, Self::OperationNotAttempted]
            .into_iter()
            .find(|e| e.name() == name)
    }
}

/// The controller's answer to an AlterPartition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlterPartitionResponse {
    pub request: AlterPartitionRequest,
    pub error: Option<AlterPartitionError>,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: u32,
    pub isr: Vec<BrokerId>,
}

/// Acknowledgement level of a produce request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acks {
    None,
    Leader,
    All,
}

/// One client batch to append as leader; `is_transactional` for a write inside a
/// transaction (1.12).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProduceRequest {
    pub client: String,
    pub acks: Acks,
    pub records: Vec<u64>,
    pub producer: Option<ProducerFields>,
    pub is_transactional: bool,
}

/// One COMMIT or ABORT marker to write as leader (WriteTxnMarkers, origin COORDINATOR).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteTxnMarkersRequest {
    pub producer_id: ProducerId,
    pub producer_epoch: ProducerEpoch,
    pub coordinator_epoch: u32,
    pub commit: bool,
    /// The transaction version the coordinator writes with (0, 1, or 2 with KIP-890 part 2):
    /// decides the marker-epoch rule ([`crate::log::ReplicaLog::append_end_txn_marker`]).
    pub transaction_version: u8,
}

/// The marker's offset on success.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteTxnMarkersResponse {
    pub error: Option<KafkaError>,
    pub offset: Option<Offset>,
}

/// The append's outcome; offsets are the original ones for a duplicate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProduceResponse {
    pub error: Option<KafkaError>,
    pub base_offset: Option<Offset>,
    pub last_offset: Option<Offset>,
    pub duplicate: bool,
}

impl ProduceResponse {
    pub(crate) fn error(e: KafkaError) -> Self {
        Self { error: Some(e), base_offset: None, last_offset: None, duplicate: false }
    }
}

/// What a ListOffsets asks for: the earliest or the latest offset, or the first offset whose
/// record's timestamp is at least the given one (KIP-79, ListOffsets v1, 0.10.1+).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetReset {
    Earliest,
    Latest,
    Timestamp(i64),
}

/// A consumer's isolation.level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IsolationLevel {
    /// Read up to the high watermark.
    ReadUncommitted,
    /// Read up to the last stable offset, with the aborted transactions of the range.
    ReadCommitted,
}

/// A consumer fetch, position reset or position validation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerFetchRequest {
    pub fetch_offset: Option<Offset>,
    pub current_leader_epoch: Option<LeaderEpoch>,
    pub max_records: usize,
    pub reset: OffsetReset,
    pub validate_epoch: Option<LeaderEpoch>,
    pub isolation_level: IsolationLevel,
    /// The consumer's rack (a broker id: each broker is its own rack) when it sends client
    /// metadata (KIP-392, G3+): a follower may then serve the fetch.
    pub client_rack: Option<BrokerId>,
}

/// What a consumer record is (the last element of a fetched record).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    Data = 0,
    Transactional = 1,
    AbortMarker = 2,
    CommitMarker = 3,
}

/// One fetched record: offset, value, batch epoch, producer id, kind.
pub type ConsumerRecord = (u64, u64, u32, Option<u64>, RecordKind);

/// Records below the HW (read_uncommitted) or the LSO (read_committed), control records
/// included; `aborted_transactions` are `(producer id, first offset)` (read_committed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerFetchResponse {
    pub error: Option<KafkaError>,
    pub leader_epoch: Option<LeaderEpoch>,
    pub records: Vec<ConsumerRecord>,
    pub high_watermark: Offset,
    pub reset_offset: Option<Offset>,
    pub epoch_end: Option<(LeaderEpoch, Offset)>,
    pub last_stable_offset: Offset,
    pub aborted_transactions: Vec<(u64, u64)>,
}
