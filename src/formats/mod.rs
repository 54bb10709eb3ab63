//! Kafka's on-disk formats, read only: the files a broker (4.x, and older releases where the
//! format is the same) keeps in a partition directory. Each parser takes the file's bytes and
//! the name to report (`file`, never opened here) and follows the Kafka 4.3.1 class cited in
//! its module: a dump of what is written, Kafka's `-1` sentinels included, as
//! `kafka-dump-log.sh` (`DumpLogSegments`) prints it.
//!
//! | file | parser | Kafka |
//! |---|---|---|
//! | `<offset>.log` | [`parse_segment`] | `DefaultRecordBatch`, `DefaultRecord`, `LegacyRecord` |
//! | `leader-epoch-checkpoint` | [`parse_leader_epoch_checkpoint`] | `LeaderEpochCheckpointFile` |
//! | `*-offset-checkpoint` | [`parse_offset_checkpoint`] | `OffsetCheckpointFile` |
//! | `partition.metadata` | [`parse_partition_metadata`] | `PartitionMetadataReadBuffer` |
//! | `<offset>.snapshot` | [`parse_producer_snapshot`] | `ProducerStateManager.readSnapshot` |
//! | `<offset>.index` | [`parse_offset_index`] | `OffsetIndex` |
//! | `<offset>.timeindex` | [`parse_time_index`] | `TimeIndex` |
//! | `<offset>.txnindex` | [`parse_txn_index`] | `TransactionIndex`, `AbortedTxn` |
//!
//! Errors are [`FormatError::Malformed`] with the byte offset of the first unusable byte.
//! A segment is the exception: its parser never fails, it returns the batches read before the
//! first problem together with that problem ([`SegmentDump::error`]), since a torn tail is a
//! normal state of a crashed broker's last segment.
//!
//! No parser panics or loops on any input, and none allocates more than a small multiple of
//! its input, except decompression, capped at [`MAX_DECOMPRESSED_BYTES`] per batch.
//!
//! ```
//! use epochlab::formats::parse_offset_checkpoint;
//! let cp = parse_offset_checkpoint(b"0\n1\ntopic-a 3 42\n", "replication-offset-checkpoint").unwrap();
//! assert_eq!((cp.entries[0].partition, cp.entries[0].offset), (3, 42));
//! ```

mod checkpoint;
mod compression;
mod index;
mod legacy;
mod producer_snapshot;
mod reader;
mod record_batch;
mod segment;

#[cfg(test)]
mod tests;

pub use checkpoint::{Checkpoint, EpochEntryDump, PartitionMetadataDump, TopicPartitionOffsetDump};
pub use compression::{Compression, MAX_DECOMPRESSED_BYTES};
pub use index::{AbortedTxnDump, OffsetIndexEntry, TimeIndexEntry};
pub use producer_snapshot::{ProducerEntryDump, ProducerSnapshotDump};
pub use record_batch::{BatchDump, ControlInfo, ControlRecordType, RecordDump, RecordHeaderDump, TimestampType};
pub use segment::{parse_segment, SegmentDump};

use crate::error::FormatError;
use reader::Fault;

fn in_file<T>(file: &str, result: Result<T, Fault>) -> Result<T, FormatError> {
    result.map_err(|f| FormatError::Malformed { file: file.to_string(), offset: f.at as u64, reason: f.reason })
}

/// Parses a `leader-epoch-checkpoint` (rules in `checkpoint.rs`, after Kafka's
/// `CheckpointFile.CheckpointReadBuffer`). An empty file has `version: None` and no entries.
pub fn parse_leader_epoch_checkpoint(data: &[u8], file: &str) -> Result<Checkpoint<EpochEntryDump>, FormatError> {
    in_file(file, checkpoint::parse_leader_epoch_checkpoint(data))
}

/// Parses a `replication-offset-checkpoint`, `recovery-point-offset-checkpoint`,
/// `log-start-offset-checkpoint` or `cleaner-offset-checkpoint`.
pub fn parse_offset_checkpoint(data: &[u8], file: &str) -> Result<Checkpoint<TopicPartitionOffsetDump>, FormatError> {
    in_file(file, checkpoint::parse_offset_checkpoint(data))
}

/// Parses `partition.metadata`.
pub fn parse_partition_metadata(data: &[u8], file: &str) -> Result<PartitionMetadataDump, FormatError> {
    in_file(file, checkpoint::parse_partition_metadata(data))
}

/// Parses a producer-state `<offset>.snapshot`; a CRC mismatch is `crc_valid: false`, not an error.
pub fn parse_producer_snapshot(data: &[u8], file: &str) -> Result<ProducerSnapshotDump, FormatError> {
    in_file(file, producer_snapshot::parse_producer_snapshot(data))
}

/// Parses an offset index up to its preallocated zero tail.
pub fn parse_offset_index(data: &[u8], file: &str) -> Result<Vec<OffsetIndexEntry>, FormatError> {
    in_file(file, index::parse_offset_index(data))
}

/// Parses a time index up to its preallocated zero tail.
pub fn parse_time_index(data: &[u8], file: &str) -> Result<Vec<TimeIndexEntry>, FormatError> {
    in_file(file, index::parse_time_index(data))
}

/// Parses a transaction index.
pub fn parse_txn_index(data: &[u8], file: &str) -> Result<Vec<AbortedTxnDump>, FormatError> {
    in_file(file, index::parse_txn_index(data))
}
