//! RecordBatch v2 (magic 2): `DefaultRecordBatch.java` (header layout, attributes, CRC-32C,
//! `RecordIterator`) and `DefaultRecord.java` (`readFrom`: the varint-framed records), with
//! control records per `ControlRecordType.java` and `EndTransactionMarker.java`.
//!
//! Every value is the one on disk, Kafka's sentinels included (`producer_id` -1 for a
//! non-idempotent batch, `base_sequence` -1, ...): this is a dump of the bytes, like Kafka's
//! `DumpLogSegments`, not a domain model (the domain types of [`crate::types`] refuse such
//! values by design).

use super::compression::{decompress, Compression, MAX_DECOMPRESSED_BYTES};
use super::reader::{Fault, Reader};

/// `DefaultRecordBatch.RECORD_BATCH_OVERHEAD`: the 61-byte header, offset and length included.
pub const RECORD_BATCH_OVERHEAD: usize = 61;
/// `Records.LOG_OVERHEAD`: base offset (i64) and batch length (i32).
pub const LOG_OVERHEAD: usize = 12;

const ATTRIBUTES_OFFSET: usize = 21;
const COMPRESSION_CODEC_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_MASK: i16 = 0x08;
const TRANSACTIONAL_FLAG_MASK: i16 = 0x10;
const CONTROL_FLAG_MASK: i16 = 0x20;
const DELETE_HORIZON_FLAG_MASK: i16 = 0x40;
/// The smallest possible record: one byte each for length, attributes, timestamp delta,
/// offset delta, key length, value length and header count.
const MIN_RECORD_BYTES: usize = 7;

/// `TimestampType.java`: what a batch's timestamps mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampType {
    /// Magic 0 messages carry no timestamp.
    NoTimestampType,
    CreateTime,
    LogAppendTime,
}

impl TimestampType {
    /// Kafka's `TimestampType.name`.
    pub fn name(self) -> &'static str {
        match self {
            TimestampType::NoTimestampType => "NoTimestampType",
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        }
    }
}

/// `ControlRecordType.java`: the type in a control record's key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlRecordType {
    Abort,
    Commit,
    LeaderChange,
    SnapshotHeader,
    SnapshotFooter,
    KraftVersion,
    KraftVoters,
    /// A type id this Kafka version does not know (`ControlRecordType.UNKNOWN`).
    Unknown,
}

impl ControlRecordType {
    /// `ControlRecordType.fromTypeId`.
    pub fn from_type_id(type_id: i16) -> Self {
        match type_id {
            0 => ControlRecordType::Abort,
            1 => ControlRecordType::Commit,
            2 => ControlRecordType::LeaderChange,
            3 => ControlRecordType::SnapshotHeader,
            4 => ControlRecordType::SnapshotFooter,
            5 => ControlRecordType::KraftVersion,
            6 => ControlRecordType::KraftVoters,
            _ => ControlRecordType::Unknown,
        }
    }

    /// The Java enum constant's name.
    pub fn name(self) -> &'static str {
        match self {
            ControlRecordType::Abort => "ABORT",
            ControlRecordType::Commit => "COMMIT",
            ControlRecordType::LeaderChange => "LEADER_CHANGE",
            ControlRecordType::SnapshotHeader => "SNAPSHOT_HEADER",
            ControlRecordType::SnapshotFooter => "SNAPSHOT_FOOTER",
            ControlRecordType::KraftVersion => "KRAFT_VERSION",
            ControlRecordType::KraftVoters => "KRAFT_VOTERS",
            ControlRecordType::Unknown => "UNKNOWN",
        }
    }
}

/// The first record of a control batch: its key (`ControlRecordTypeSchema`: version i16,
/// type i16) and, for ABORT and COMMIT, the end-transaction marker value (`EndTxnMarker`:
/// version i16, coordinator epoch i32).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlInfo {
    pub kind: ControlRecordType,
    pub type_id: i16,
    /// The key's schema version as written (Kafka reads versions above 0 as version 0).
    pub version: i16,
    /// `EndTransactionMarker.coordinatorEpoch`, for ABORT and COMMIT only.
    pub coordinator_epoch: Option<i32>,
}

/// One record header (`RecordHeader`): the key is UTF-8 for Kafka but kept as bytes here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordHeaderDump {
    pub key: Vec<u8>,
    pub value: Option<Vec<u8>>,
}

/// One record, as `DefaultRecord.readFrom` (v2) or `LegacyRecord` (v0/v1) sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordDump {
    /// Absolute offset: the batch's base offset plus `offset_delta` (v2), or as computed by
    /// `AbstractLegacyRecordBatch` for v0/v1.
    pub offset: i64,
    pub offset_delta: i32,
    /// Base timestamp plus delta; for a LogAppendTime batch, the batch's max timestamp (as in
    /// Kafka's `RecordIterator`); -1 for magic 0.
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<RecordHeaderDump>,
    /// v2: the record's bytes including its length varint (`DefaultRecord.sizeInBytes`);
    /// v0/v1: the message's bytes after its 12-byte offset and size prefix.
    pub size: u32,
    /// v0/v1 only: the message's own stored CRC-32 and whether it matches
    /// (`AbstractLegacyRecordBatch.checksum` / `isValid`, printed per record by
    /// `DumpLogSegments`); `None` for v2 records, which have no CRC of their own.
    pub legacy_crc: Option<(u32, bool)>,
}

/// One batch of a segment file, every header field as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchDump {
    /// Byte offset of the batch in the file.
    pub position: u64,
    pub base_offset: i64,
    pub last_offset: i64,
    pub last_offset_delta: i32,
    /// The header's record count (v2), or the number of messages (v0/v1).
    pub count: i32,
    pub base_sequence: i32,
    /// `DefaultRecordBatch.lastSequence`: -1 when `base_sequence` is -1, else base sequence
    /// plus last offset delta, wrapping past `i32::MAX` as Kafka's `incrementSequence` does.
    pub last_sequence: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub partition_leader_epoch: i32,
    pub is_transactional: bool,
    pub is_control: bool,
    /// `DefaultRecordBatch.deleteHorizonMs`: the base timestamp when attributes bit 6 is set.
    pub delete_horizon_ms: Option<i64>,
    pub magic: i8,
    pub attributes: i16,
    pub compression: Compression,
    pub timestamp_type: TimestampType,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    /// The stored checksum: CRC-32C (v2) or CRC-32 (v0/v1), unsigned.
    pub crc: u32,
    /// Whether `crc` matches the bytes (`DefaultRecordBatch.isValid`); for v0/v1, the wrapper's
    /// and every inner message's.
    pub crc_valid: bool,
    /// Bytes of the batch including the 12-byte offset and length prefix.
    pub size: u64,
    pub records: Vec<RecordDump>,
    /// Set for a control batch: its first record's key and marker.
    pub control: Option<ControlInfo>,
}

/// `DefaultRecordBatch.incrementSequence`, wrapping exactly as Kafka's `int` arithmetic does.
pub(crate) fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX.wrapping_sub(increment) {
        increment.wrapping_sub(i32::MAX.wrapping_sub(sequence)).wrapping_sub(1)
    } else {
        sequence.wrapping_add(increment)
    }
}

/// Where a fault inside a batch lies: exactly in the file, or inside decompressed data.
fn locate(fault: Fault, file_base: Option<u64>) -> Fault {
    match file_base {
        Some(base) => Fault::new(fault.at, format!("{} (file byte {})", fault.reason, base + fault.at as u64)),
        None => Fault::new(fault.at, format!("{} (byte {} of the decompressed records)", fault.reason, fault.at)),
    }
}

/// Parses the v2 batch in `bytes` (exactly `LOG_OVERHEAD + batchLength` bytes, starting at
/// file byte `position`). A CRC mismatch is reported in `crc_valid`; any structural problem
/// (header shorter than 61 bytes, unknown codec, decompression failure, a record that
/// overruns or underfills the batch, a record count that does not match, a malformed control
/// record) is an `Err` whose reason names the exact file byte where it has one.
pub(crate) fn parse_v2_batch(bytes: &[u8], position: u64) -> Result<BatchDump, String> {
    if bytes.len() < RECORD_BATCH_OVERHEAD {
        return Err(format!(
            "batch size {} is below the v2 header size {RECORD_BATCH_OVERHEAD}",
            bytes.len()
        ));
    }
    let mut r = Reader::new(bytes);
    let header = (|| -> Result<_, Fault> {
        Ok((
            r.i64("baseOffset")?,
            r.i32("batchLength")?,
            r.i32("partitionLeaderEpoch")?,
            r.i8("magic")?,
            r.u32("crc")?,
            r.i16("attributes")?,
            r.i32("lastOffsetDelta")?,
            r.i64("baseTimestamp")?,
            r.i64("maxTimestamp")?,
            r.i64("producerId")?,
            r.i16("producerEpoch")?,
            r.i32("baseSequence")?,
            r.i32("recordCount")?,
        ))
    })()
    .map_err(|f| f.reason)?;
    let (base_offset, _len, ple, magic, crc, attributes, lod, base_ts, max_ts, pid, pepoch, base_seq, count) = header;
    let crc_valid = crc32c::crc32c(&bytes[ATTRIBUTES_OFFSET..]) == crc;
    let codec_id = (attributes & COMPRESSION_CODEC_MASK) as u8;
    let compression = Compression::from_id(codec_id)
        .ok_or_else(|| format!("unknown compression codec id {codec_id} in attributes {attributes:#06x}"))?;
    let timestamp_type = if attributes & TIMESTAMP_TYPE_MASK == 0 {
        TimestampType::CreateTime
    } else {
        TimestampType::LogAppendTime
    };
    let is_control = attributes & CONTROL_FLAG_MASK != 0;
    let mut batch = BatchDump {
        position,
        base_offset,
        last_offset: base_offset.wrapping_add(lod as i64),
        last_offset_delta: lod,
        count,
        base_sequence: base_seq,
        last_sequence: if base_seq == -1 { -1 } else { increment_sequence(base_seq, lod) },
        producer_id: pid,
        producer_epoch: pepoch,
        partition_leader_epoch: ple,
        is_transactional: attributes & TRANSACTIONAL_FLAG_MASK != 0,
        is_control,
        delete_horizon_ms: (attributes & DELETE_HORIZON_FLAG_MASK != 0).then_some(base_ts),
        magic,
        attributes,
        compression,
        timestamp_type,
        base_timestamp: base_ts,
        max_timestamp: max_ts,
        crc,
        crc_valid,
        size: bytes.len() as u64,
        records: Vec::new(),
        control: None,
    };
    if count < 0 {
        return Err(format!("invalid record count {count} in magic v2 batch"));
    }
    // Kafka's iterator returns no records for a count of 0 without looking at the payload.
    if count == 0 {
        return Ok(batch);
    }
    let payload = &bytes[RECORD_BATCH_OVERHEAD..];
    let payload_base = position + RECORD_BATCH_OVERHEAD as u64;
    let log_append_time = (timestamp_type == TimestampType::LogAppendTime).then_some(max_ts);
    let records = if compression == Compression::None {
        read_records(payload, count, base_offset, base_ts, log_append_time).map_err(|f| locate(f, Some(payload_base)).reason)?
    } else {
        let data = decompress(compression, payload, MAX_DECOMPRESSED_BYTES)
            .map_err(|e| format!("{e} (records start at file byte {payload_base})"))?;
        read_records(&data, count, base_offset, base_ts, log_append_time).map_err(|f| locate(f, None).reason)?
    };
    if is_control {
        if let Some(first) = records.first() {
            batch.control = Some(control_info(first)?);
        }
    }
    batch.records = records;
    Ok(batch)
}

/// `RecordIterator`: exactly `count` records, then nothing left.
fn read_records(
    data: &[u8],
    count: i32,
    base_offset: i64,
    base_ts: i64,
    log_append_time: Option<i64>,
) -> Result<Vec<RecordDump>, Fault> {
    let mut r = Reader::new(data);
    let mut out = Vec::with_capacity((count as usize).min(data.len() / MIN_RECORD_BYTES + 1));
    for i in 0..count {
        let rec = read_record(&mut r, base_offset, base_ts, log_append_time)
            .map_err(|f| Fault::new(f.at, format!("record {i} of {count}: {}", f.reason)))?;
        out.push(rec);
    }
    if r.remaining() != 0 {
        return Err(Fault::new(
            r.pos(),
            format!("incorrect declared batch size: {} bytes remain after the {count} records", r.remaining()),
        ));
    }
    Ok(out)
}

/// `DefaultRecord.readFrom(ByteBuffer, ...)`.
fn read_record(r: &mut Reader<'_>, base_offset: i64, base_ts: i64, log_append_time: Option<i64>) -> Result<RecordDump, Fault> {
    let start = r.pos();
    let body_len = r.varint("record length")?;
    if body_len < 0 || body_len as usize > r.remaining() {
        return Err(Fault::new(start, format!("record length {body_len} exceeds the {} bytes remaining", r.remaining())));
    }
    let body_start = r.pos();
    let body = r.take(body_len as usize, "record")?;
    let at = |f: Fault| Fault::new(body_start + f.at, f.reason);
    let mut b = Reader::new(body);
    let _attributes = b.i8("record attributes").map_err(at)?;
    let ts_delta = b.varlong("timestampDelta").map_err(at)?;
    let offset_delta = b.varint("offsetDelta").map_err(at)?;
    let key = b.varint_bytes("key").map_err(at)?.map(<[u8]>::to_vec);
    let value = b.varint_bytes("value").map_err(at)?.map(<[u8]>::to_vec);
    let headers_at = b.pos();
    let n_headers = b.varint("header count").map_err(at)?;
    if n_headers < 0 || n_headers as usize > b.remaining() {
        return Err(at(Fault::new(headers_at, format!("invalid number of record headers {n_headers}"))));
    }
    let mut headers = Vec::with_capacity(n_headers as usize);
    for _ in 0..n_headers {
        let key_at = b.pos();
        let hkey = b.varint_bytes("header key").map_err(at)?;
        let Some(hkey) = hkey else {
            return Err(at(Fault::new(key_at, "invalid negative header key size")));
        };
        let hvalue = b.varint_bytes("header value").map_err(at)?;
        headers.push(RecordHeaderDump { key: hkey.to_vec(), value: hvalue.map(<[u8]>::to_vec) });
    }
    if b.remaining() != 0 {
        return Err(at(Fault::new(
            b.pos(),
            format!("invalid record size: expected {body_len} bytes in record payload, read {}", b.pos()),
        )));
    }
    Ok(RecordDump {
        offset: base_offset.wrapping_add(offset_delta as i64),
        offset_delta,
        timestamp: log_append_time.unwrap_or(base_ts.wrapping_add(ts_delta)),
        key,
        value,
        headers,
        size: (r.pos() - start) as u32,
        legacy_crc: None,
    })
}

/// `ControlRecordType.parseTypeId` and `EndTransactionMarker.deserializeValue`.
fn control_info(record: &RecordDump) -> Result<ControlInfo, String> {
    let key = record.key.as_deref().unwrap_or(&[]);
    if key.len() < 4 {
        return Err(format!("control record key has {} bytes, at least 4 needed", key.len()));
    }
    let version = i16::from_be_bytes([key[0], key[1]]);
    if version < 0 {
        return Err(format!("invalid control record key version {version}"));
    }
    let type_id = i16::from_be_bytes([key[2], key[3]]);
    let kind = ControlRecordType::from_type_id(type_id);
    let coordinator_epoch = match kind {
        ControlRecordType::Abort | ControlRecordType::Commit => {
            let value = record.value.as_deref().unwrap_or(&[]);
            if value.len() < 6 {
                return Err(format!("end transaction marker value has {} bytes, at least 6 needed", value.len()));
            }
            let marker_version = i16::from_be_bytes([value[0], value[1]]);
            if marker_version < 0 {
                return Err(format!("invalid end transaction marker version {marker_version}"));
            }
            Some(i32::from_be_bytes([value[2], value[3], value[4], value[5]]))
        }
        _ => None,
    };
    Ok(ControlInfo { kind, type_id, version, coordinator_epoch })
}
