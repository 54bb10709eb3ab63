//! Producer-state snapshots, `<offset>.snapshot`: `ProducerStateManager.readSnapshot` /
//! `writeSnapshot` with the generated `ProducerSnapshot` schema (`message/ProducerSnapshot.json`
//! in kafka-storage, valid version 1 only, not flexible): version i16, crc u32 (CRC-32C of every
//! byte after the crc, to the end of the file), then the producer entries as an i32 count
//! followed by 46-byte entries.

use super::reader::{Fault, Reader};

/// `ProducerSnapshot.LOWEST_SUPPORTED_VERSION` = `HIGHEST_SUPPORTED_VERSION`.
pub const PRODUCER_SNAPSHOT_VERSION: i16 = 1;
/// `ProducerStateManager.PRODUCER_ENTRIES_OFFSET`: the CRC covers bytes from here on.
const PRODUCER_ENTRIES_OFFSET: usize = 6;
const ENTRY_BYTES: usize = 46;

/// One `ProducerSnapshot.ProducerEntry`, fields in schema order, as written (`-1` sentinels
/// included: `current_txn_first_offset` is -1 when no transaction is open, `last_offset` -1
/// when the producer has no retained batch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerEntryDump {
    pub producer_id: i64,
    pub epoch: i16,
    pub last_sequence: i32,
    pub last_offset: i64,
    pub offset_delta: i32,
    pub timestamp: i64,
    pub coordinator_epoch: i32,
    pub current_txn_first_offset: i64,
}

/// A snapshot file. Kafka refuses a snapshot whose CRC does not match
/// (`CorruptSnapshotException`); here the mismatch is reported in `crc_valid` so the entries
/// can still be inspected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerSnapshotDump {
    pub version: i16,
    pub crc: u32,
    pub crc_valid: bool,
    pub entries: Vec<ProducerEntryDump>,
}

/// Parses a snapshot. Errors (Kafka's "Snapshot failed schema validation"): fewer than 10
/// bytes, a version other than 1, a negative entry count or one larger than the bytes left
/// (the generated reader's check), a torn entry. Bytes after the last entry are accepted, as
/// the generated reader does not look at them (they are covered by the CRC).
pub(crate) fn parse_producer_snapshot(data: &[u8]) -> Result<ProducerSnapshotDump, Fault> {
    let mut r = Reader::new(data);
    let version = r.i16("version")?;
    if version != PRODUCER_SNAPSHOT_VERSION {
        return Err(Fault::new(0, format!("unknown snapshot version {version}, expected {PRODUCER_SNAPSHOT_VERSION}")));
    }
    let crc = r.u32("crc")?;
    let count_at = r.pos();
    let count = r.i32("producer entry count")?;
    if count < 0 {
        return Err(Fault::new(count_at, format!("producer entry count {count} is negative (null array)")));
    }
    if count as usize > r.remaining() {
        return Err(Fault::new(
            count_at,
            format!("producer entry count {count} exceeds the {} bytes remaining", r.remaining()),
        ));
    }
    let mut entries = Vec::with_capacity((count as usize).min(r.remaining() / ENTRY_BYTES));
    for i in 0..count {
        let entry_at = r.pos();
        let entry = (|| -> Result<ProducerEntryDump, Fault> {
            Ok(ProducerEntryDump {
                producer_id: r.i64("producer_id")?,
                epoch: r.i16("epoch")?,
                last_sequence: r.i32("last_sequence")?,
                last_offset: r.i64("last_offset")?,
                offset_delta: r.i32("offset_delta")?,
                timestamp: r.i64("timestamp")?,
                coordinator_epoch: r.i32("coordinator_epoch")?,
                current_txn_first_offset: r.i64("current_txn_first_offset")?,
            })
        })()
        .map_err(|f| Fault::new(entry_at, format!("producer entry {i} of {count}: {} (byte {})", f.reason, f.at)))?;
        entries.push(entry);
    }
    let crc_valid = crc32c::crc32c(&data[PRODUCER_ENTRIES_OFFSET..]) == crc;
    Ok(ProducerSnapshotDump { version, crc, crc_valid, entries })
}
