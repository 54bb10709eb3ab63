//! A segment `.log` file: batches back to back, read as `FileLogInputStream.nextBatch` does
//! (base offset i64, batch length i32, then the magic at byte 16 picks the format).

use super::legacy::{parse_legacy_batch, RECORD_OVERHEAD_V0};
use super::record_batch::{parse_v2_batch, BatchDump, LOG_OVERHEAD};
use crate::error::FormatError;

/// `Records.HEADER_SIZE_UP_TO_MAGIC`: base offset, length, partition leader epoch, magic.
const HEADER_SIZE_UP_TO_MAGIC: usize = 17;
const MAGIC_OFFSET: usize = 16;

/// What a segment file holds, up to its first problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentDump {
    /// Bytes in the file.
    pub size: u64,
    /// Bytes up to the end of the last good batch: `[0, valid_bytes)` is what Kafka's recovery
    /// (`LogSegment.recover`) would keep.
    pub valid_bytes: u64,
    /// The batches of `[0, valid_bytes)`, in file order.
    pub batches: Vec<BatchDump>,
    /// The first problem, if any; its `offset` is the start of the batch that could not be
    /// read, which is always `valid_bytes` (the reason names the exact byte when there is one).
    pub error: Option<FormatError>,
}

/// Reads every batch of the segment `data` until the end or the first structural problem.
///
/// Stops at: a tail shorter than the 17 bytes up to the magic or shorter than the batch
/// length says (a torn write), a batch length below the 14-byte legacy minimum (Kafka's
/// `CorruptRecordException`) or the 49-byte v2 minimum, an unknown magic, an unknown codec,
/// a decompression failure or more than 64 MiB of output, a malformed varint, a record that
/// overruns its batch or leaves bytes over, a record count that does not match, a malformed
/// control record. A CRC mismatch alone does not stop the scan: the batch is kept with
/// `crc_valid == false`, as `DumpLogSegments` prints `isValid: false` and goes on.
///
/// An empty file is an empty segment without error. Never panics; allocates at most the
/// input's size plus 64 MiB per batch.
pub fn parse_segment(data: &[u8], file: &str) -> SegmentDump {
    let mut batches = Vec::new();
    let mut pos = 0usize;
    let error = loop {
        if pos == data.len() {
            break None;
        }
        match next_batch(data, pos) {
            Ok(batch) => {
                pos += batch.size as usize;
                batches.push(batch);
            }
            Err(reason) => {
                break Some(FormatError::Malformed { file: file.to_string(), offset: pos as u64, reason })
            }
        }
    };
    SegmentDump { size: data.len() as u64, valid_bytes: pos as u64, batches, error }
}

fn next_batch(data: &[u8], pos: usize) -> Result<BatchDump, String> {
    let rest = &data[pos..];
    if rest.len() < HEADER_SIZE_UP_TO_MAGIC {
        return Err(format!(
            "truncated batch: {} bytes left, fewer than the {HEADER_SIZE_UP_TO_MAGIC}-byte header up to the magic",
            rest.len()
        ));
    }
    let length = i32::from_be_bytes([rest[8], rest[9], rest[10], rest[11]]);
    if length < RECORD_OVERHEAD_V0 as i32 {
        return Err(format!("batch length {length} is smaller than the minimum record overhead {RECORD_OVERHEAD_V0}"));
    }
    let total = LOG_OVERHEAD + length as usize;
    if total > rest.len() {
        return Err(format!(
            "truncated batch: its length {length} needs {total} bytes with the 12-byte prefix, only {} left",
            rest.len()
        ));
    }
    let bytes = &rest[..total];
    match rest[MAGIC_OFFSET] as i8 {
        0 | 1 => parse_legacy_batch(bytes, pos as u64),
        2 => parse_v2_batch(bytes, pos as u64),
        magic => Err(format!("unknown magic {magic}")),
    }
}
