//! Errors, one enum per operation family, each message carrying the numbers involved.
//!
//! Everything here is something a *caller* can cause (a bad argument, an append the protocol
//! refuses, a corrupt file). Broken internal invariants are panics, not errors.

use std::fmt;

/// An argument outside its domain or inconsistent with another argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgumentError {
    /// `value` is outside `domain`.
    OutOfDomain { argument: &'static str, value: i128, domain: &'static str },
    /// `value` is in its domain but not acceptable here (`reason` says why).
    Invalid { argument: &'static str, value: i128, reason: String },
    /// A text argument (a name or code) that is not one of the accepted values.
    InvalidText { argument: &'static str, value: String, reason: String },
}

/// A partition-log operation was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogError {
    /// Kafka's OFFSET_OUT_OF_RANGE.
    OffsetOutOfRange { offset: u64, log_start_offset: u64, log_end_offset: u64 },
    /// A replicated batch that does not start at the log end offset.
    UnexpectedAppendOffset { first_offset: u64, log_end_offset: u64 },
    /// Message format v0/v1: a replicated wrapper whose own (last) offset is below the log end
    /// offset or not above the previous wrapper's (Kafka 0.10 `Log.append`, "Out of order
    /// offsets").
    OutOfOrderOffsets { offset: u64, log_end_offset: u64 },
    /// A batch that cannot exist.
    InvalidRecordBatch { reason: String },
}

/// The leader refused an idempotent or transactional append.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProducerStateError {
    /// Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER.
    OutOfOrderSequence { producer_id: u64, producer_epoch: u16, base_sequence: u32, expected_sequence: u32 },
    /// Kafka's INVALID_PRODUCER_EPOCH (PRODUCER_FENCED before 2.7).
    InvalidProducerEpoch { producer_id: u64, producer_epoch: u16, current_epoch: u16 },
    /// Kafka's INVALID_TXN_STATE: a non-transactional write while the producer's transaction
    /// is open on this partition.
    InvalidTxnState { producer_id: u64, transaction_first_offset: u64 },
    /// Kafka's TRANSACTION_COORDINATOR_FENCED: a marker from an older coordinator epoch.
    TransactionCoordinatorFenced { producer_id: u64, coordinator_epoch: u32, current_coordinator_epoch: u32 },
}

/// KIP-320 current-leader-epoch check failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FencingError {
    /// Kafka's FENCED_LEADER_EPOCH: the request's epoch is older than the replica's.
    FencedLeaderEpoch { request_epoch: u32, current_epoch: u32 },
    /// Kafka's UNKNOWN_LEADER_EPOCH: the request's epoch is newer than the replica's.
    UnknownLeaderEpoch { request_epoch: u32, current_epoch: u32 },
}

/// A checkpoint file could not be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckpointError {
    /// Malformed content; `line` is 1-based.
    Corrupt { path: Option<String>, line: usize, reason: String },
    /// The file system refused.
    Io { path: String, reason: String },
}

/// A trace (`docs/trace-format.md`) that cannot be replayed: a malformed row or column.
/// `row` is the 0-based index of the first row that cannot be used (for a column-level
/// problem, the first row of the chunk).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceError {
    Malformed { row: u64, reason: String },
}

/// A Kafka on-disk file (`src/formats/`) that does not parse: a segment, checkpoint, index,
/// `partition.metadata` or producer-state snapshot. `file` is the name the caller gave (never
/// opened by the core); `offset` is the 0-based byte position in it of the first byte that
/// could not be used (for a segment, the start of the bad batch: see [`crate::formats`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FormatError {
    Malformed { file: String, offset: u64, reason: String },
}

/// Any error of the core, for callers that mix operation families.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    Argument(ArgumentError),
    Log(LogError),
    ProducerState(ProducerStateError),
    Fencing(FencingError),
    Checkpoint(CheckpointError),
    Trace(TraceError),
    Format(FormatError),
}

macro_rules! into_error {
    ($($family:ident => $variant:ident),*) => {$(
        impl From<$family> for Error {
            fn from(e: $family) -> Self { Error::$variant(e) }
        }
    )*};
}
into_error!(ArgumentError => Argument, LogError => Log, ProducerStateError => ProducerState,
            FencingError => Fencing, CheckpointError => Checkpoint, TraceError => Trace,
            FormatError => Format);

impl fmt::Display for ArgumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgumentError::OutOfDomain { argument, value, domain } => {
                write!(f, "argument '{argument}' = {value} is outside its domain {domain}")
            }
            ArgumentError::Invalid { argument, value, reason } => {
                write!(f, "argument '{argument}' = {value} is invalid: {reason}")
            }
            ArgumentError::InvalidText { argument, value, reason } => {
                write!(f, "argument '{argument}' = {value:?} is invalid: {reason}")
            }
        }
    }
}

impl fmt::Display for LogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogError::OffsetOutOfRange { offset, log_start_offset, log_end_offset } => write!(
                f,
                "offset {offset} is out of range [{log_start_offset}, {log_end_offset}]"
            ),
            LogError::UnexpectedAppendOffset { first_offset, log_end_offset } => write!(
                f,
                "replicated batch starts at offset {first_offset} but the log end offset is {log_end_offset}"
            ),
            LogError::OutOfOrderOffsets { offset, log_end_offset } => write!(
                f,
                "replicated wrapper's offset {offset} is below the log end offset {log_end_offset} (out of order offsets)"
            ),
            LogError::InvalidRecordBatch { reason } => write!(f, "invalid record batch: {reason}"),
        }
    }
}

impl fmt::Display for ProducerStateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProducerStateError::OutOfOrderSequence { producer_id, producer_epoch, base_sequence, expected_sequence } => write!(
                f,
                "out of order sequence for producer {producer_id} epoch {producer_epoch}: got {base_sequence}, expected {expected_sequence}"
            ),
            ProducerStateError::InvalidProducerEpoch { producer_id, producer_epoch, current_epoch } => write!(
                f,
                "producer {producer_id} epoch {producer_epoch} is older than the current epoch {current_epoch} (fenced)"
            ),
            ProducerStateError::InvalidTxnState { producer_id, transaction_first_offset } => write!(
                f,
                "non-transactional write from producer {producer_id} while its transaction from offset {transaction_first_offset} is open"
            ),
            ProducerStateError::TransactionCoordinatorFenced { producer_id, coordinator_epoch, current_coordinator_epoch } => write!(
                f,
                "marker for producer {producer_id} from coordinator epoch {coordinator_epoch}, older than {current_coordinator_epoch}"
            ),
        }
    }
}

impl fmt::Display for FencingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FencingError::FencedLeaderEpoch { request_epoch, current_epoch } => write!(
                f,
                "request leader epoch {request_epoch} is older than the current leader epoch {current_epoch}"
            ),
            FencingError::UnknownLeaderEpoch { request_epoch, current_epoch } => write!(
                f,
                "request leader epoch {request_epoch} is newer than the current leader epoch {current_epoch}"
            ),
        }
    }
}

impl fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckpointError::Corrupt { path, line, reason } => match path {
                Some(p) => write!(f, "corrupt checkpoint {p}, line {line}: {reason}"),
                None => write!(f, "corrupt checkpoint, line {line}: {reason}"),
            },
            CheckpointError::Io { path, reason } => write!(f, "checkpoint {path}: {reason}"),
        }
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceError::Malformed { row, reason } => write!(f, "trace row {row}: {reason}"),
        }
    }
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Malformed { file, offset, reason } => write!(f, "{file}: at byte {offset}: {reason}"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Argument(e) => e.fmt(f),
            Error::Log(e) => e.fmt(f),
            Error::ProducerState(e) => e.fmt(f),
            Error::Fencing(e) => e.fmt(f),
            Error::Checkpoint(e) => e.fmt(f),
            Error::Trace(e) => e.fmt(f),
            Error::Format(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ArgumentError {}
impl std::error::Error for LogError {}
impl std::error::Error for ProducerStateError {}
impl std::error::Error for FencingError {}
impl std::error::Error for CheckpointError {}
impl std::error::Error for TraceError {}
impl std::error::Error for FormatError {}
impl std::error::Error for Error {}
