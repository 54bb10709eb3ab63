//! Message sets of magic 0 and 1 (Kafka before 0.11): `LegacyRecord.java` (one message: crc
//! u32 CRC-32 over magic..end, magic i8, attributes i8, timestamp i64 for v1 only, key and
//! value as i32-length nullable bytes) and `AbstractLegacyRecordBatch.java` (a compressed
//! *wrapper* message whose value is an inner message set; `DeepRecordsIterator` computes v1
//! absolute offsets from the wrapper's offset).
//!
//! A shallow message becomes one [`BatchDump`] whose `records` are itself (uncompressed) or
//! its inner messages (compressed). Fields v0/v1 lack are Kafka's defaults for legacy batches
//! (`producer_id` -1, `producer_epoch` -1, sequences -1, `partition_leader_epoch` -1).

use super::compression::{decompress, Compression, MAX_DECOMPRESSED_BYTES};
use super::reader::{Fault, Reader};
use super::record_batch::{BatchDump, RecordDump, TimestampType, LOG_OVERHEAD};

/// `LegacyRecord.RECORD_OVERHEAD_V0`: crc, magic, attributes, key and value lengths.
pub const RECORD_OVERHEAD_V0: usize = 14;
/// `LegacyRecord.RECORD_OVERHEAD_V1`: v0 plus the timestamp.
pub const RECORD_OVERHEAD_V1: usize = 22;
const COMPRESSION_CODEC_MASK: i8 = 0x07;
const TIMESTAMP_TYPE_MASK: i8 = 0x08;

/// One legacy message's fields.
struct Message {
    crc: u32,
    crc_valid: bool,
    magic: i8,
    attributes: i8,
    timestamp: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
}

impl Message {
    fn timestamp_type(&self) -> TimestampType {
        if self.magic == 0 {
            TimestampType::NoTimestampType
        } else if self.attributes & TIMESTAMP_TYPE_MASK == 0 {
            TimestampType::CreateTime
        } else {
            TimestampType::LogAppendTime
        }
    }
}

/// `LegacyRecord`: `body` is the message after its offset and size prefix.
fn parse_message(body: &[u8]) -> Result<Message, Fault> {
    let mut r = Reader::new(body);
    let crc = r.u32("crc")?;
    let magic = r.i8("magic")?;
    if magic != 0 && magic != 1 {
        return Err(Fault::new(4, format!("unknown magic {magic} in a legacy message")));
    }
    let overhead = if magic == 0 { RECORD_OVERHEAD_V0 } else { RECORD_OVERHEAD_V1 };
    if body.len() < overhead {
        return Err(Fault::new(0, format!("message size {} is below the v{magic} minimum {overhead}", body.len())));
    }
    let attributes = r.i8("attributes")?;
    let timestamp = if magic == 0 { -1 } else { r.i64("timestamp")? };
    let key = i32_bytes(&mut r, "key")?;
    let value = i32_bytes(&mut r, "value")?;
    if r.remaining() != 0 {
        return Err(Fault::new(r.pos(), format!("{} bytes after the message value", r.remaining())));
    }
    Ok(Message {
        crc,
        crc_valid: crc32fast::hash(&body[4..]) == crc,
        magic,
        attributes,
        timestamp,
        key,
        value,
    })
}

fn i32_bytes(r: &mut Reader<'_>, what: &str) -> Result<Option<Vec<u8>>, Fault> {
    let at = r.pos();
    let len = r.i32(what)?;
    if len < 0 {
        return Ok(None);
    }
    if len as usize > r.remaining() {
        return Err(Fault::new(at, format!("{what} length {len} exceeds the {} bytes remaining", r.remaining())));
    }
    Ok(Some(r.take(len as usize, what)?.to_vec()))
}

/// Parses the shallow message in `bytes` (prefix included) at file byte `position`.
pub(crate) fn parse_legacy_batch(bytes: &[u8], position: u64) -> Result<BatchDump, String> {
    let body_base = position + LOG_OVERHEAD as u64;
    let at_file = |f: Fault| format!("{} (file byte {})", f.reason, body_base + f.at as u64);
    let mut r = Reader::new(bytes);
    let offset = r.i64("offset").map_err(|f| f.reason)?;
    let _size = r.i32("size").map_err(|f| f.reason)?;
    let body = &bytes[LOG_OVERHEAD.min(bytes.len())..];
    let outer = parse_message(body).map_err(at_file)?;
    let codec_id = (outer.attributes & COMPRESSION_CODEC_MASK) as u8;
    let compression = match Compression::from_id(codec_id) {
        Some(Compression::Zstd) | None => {
            return Err(format!("invalid compression codec id {codec_id} for a magic {} message", outer.magic))
        }
        Some(c) => c,
    };
    let timestamp_type = outer.timestamp_type();
    let mut crc_valid = outer.crc_valid;
    let records = if compression == Compression::None {
        vec![RecordDump {
            offset,
            offset_delta: 0,
            timestamp: outer.timestamp,
            key: outer.key.clone(),
            value: outer.value.clone(),
            headers: Vec::new(),
            size: body.len() as u32,
            legacy_crc: Some((outer.crc, outer.crc_valid)),
        }]
    } else {
        let Some(value) = outer.value.as_deref() else {
            return Err(format!("compressed message set with a null value (magic {})", outer.magic));
        };
        let data = decompress(compression, value, MAX_DECOMPRESSED_BYTES)
            .map_err(|e| format!("{e} (wrapper message at file byte {position})"))?;
        let (inner, inner_valid) = inner_records(&data, &outer, offset)
            .map_err(|f| format!("{} (byte {} of the decompressed inner messages)", f.reason, f.at))?;
        crc_valid &= inner_valid;
        inner
    };
    let (first, last) = match (records.first(), records.last()) {
        (Some(f), Some(l)) => (f.offset, l.offset),
        _ => (offset, offset),
    };
    Ok(BatchDump {
        position,
        base_offset: first,
        last_offset: offset,
        last_offset_delta: last.wrapping_sub(first) as i32,
        count: records.len() as i32,
        base_sequence: -1,
        last_sequence: -1,
        producer_id: -1,
        producer_epoch: -1,
        partition_leader_epoch: -1,
        is_transactional: false,
        is_control: false,
        delete_horizon_ms: None,
        magic: outer.magic,
        attributes: outer.attributes as i16,
        compression,
        timestamp_type,
        base_timestamp: outer.timestamp,
        max_timestamp: outer.timestamp,
        crc: outer.crc,
        crc_valid,
        size: bytes.len() as u64,
        records,
        control: None,
    })
}

/// `DeepRecordsIterator`: the inner message set of a compressed wrapper. As Kafka's
/// `DataLogInputStream`, a torn inner message at the very end ends the set quietly. Returns the
/// records and whether every inner CRC is valid.
fn inner_records(data: &[u8], outer: &Message, wrapper_offset: i64) -> Result<(Vec<RecordDump>, bool), Fault> {
    let mut r = Reader::new(data);
    let mut out: Vec<RecordDump> = Vec::new();
    let mut all_valid = true;
    while r.remaining() >= LOG_OVERHEAD {
        let at = r.pos();
        let inner_offset = r.i64("inner offset")?;
        let size = r.i32("inner size")?;
        if size < RECORD_OVERHEAD_V0 as i32 {
            return Err(Fault::new(at, format!("inner message size {size} is below the minimum {RECORD_OVERHEAD_V0}")));
        }
        if size as usize > r.remaining() {
            break;
        }
        let body_at = r.pos();
        let body = r.take(size as usize, "inner message")?;
        let m = parse_message(body).map_err(|f| Fault::new(body_at + f.at, f.reason))?;
        if m.attributes & COMPRESSION_CODEC_MASK != 0 {
            return Err(Fault::new(at, "inner messages must not be compressed"));
        }
        all_valid &= m.crc_valid;
        let legacy_crc = Some((m.crc, m.crc_valid));
        let timestamp = if m.magic == 1 && outer.timestamp_type() == TimestampType::LogAppendTime {
            outer.timestamp
        } else {
            m.timestamp
        };
        out.push(RecordDump {
            offset: inner_offset,
            offset_delta: 0,
            timestamp,
            key: m.key,
            value: m.value,
            headers: Vec::new(),
            size: size as u32,
            legacy_crc,
        });
    }
    let Some(last_inner) = out.last().map(|rec| rec.offset) else {
        return Err(Fault::new(0, "compressed message set with no inner messages"));
    };
    if outer.magic == 1 {
        // Inner v1 offsets are relative; a wrapper offset of 0 (some librdkafka versions) means
        // "relative to 0", exactly as Kafka reads it.
        let base = if wrapper_offset == 0 {
            0
        } else if wrapper_offset < last_inner {
            return Err(Fault::new(
                0,
                format!("wrapper offset {wrapper_offset} is less than the last inner offset {last_inner}"),
            ));
        } else {
            wrapper_offset - last_inner
        };
        for rec in &mut out {
            rec.offset = base.wrapping_add(rec.offset);
        }
    }
    let first = out.first().map_or(0, |rec| rec.offset);
    for rec in &mut out {
        rec.offset_delta = rec.offset.wrapping_sub(first) as i32;
    }
    Ok((out, all_valid))
}
