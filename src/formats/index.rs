//! The per-segment index files (`AbstractIndex.java` and subclasses; all big-endian):
//!
//! - `.index` (`OffsetIndex.java`): 8-byte entries, relative offset i32 then file position i32.
//! - `.timeindex` (`TimeIndex.java`): 12-byte entries, timestamp i64 then relative offset i32.
//! - `.txnindex` (`TransactionIndex.java`, `AbortedTxn.java`): 34-byte aborted transactions.
//!
//! Kafka preallocates an active segment's offset and time index (`segment.index.bytes`, zeros)
//! and trims it on a clean roll or shutdown; a file left untrimmed (a crash, a copy of a live
//! segment) ends with zero entries. Kafka's mmap reader would count those as entries; these
//! readers stop at the first all-zero entry after entry 0 (entry 0 may legitimately be zero:
//! relative offset 0 at position 0, or timestamp 0), and require every byte after it to be zero.
//! So the result is the entries Kafka appended. Values are as written; relative offsets are
//! not added to the segment's base offset (the caller knows it from the file name).

use super::reader::{Fault, Reader};

const OFFSET_ENTRY_BYTES: usize = 8;
const TIME_ENTRY_BYTES: usize = 12;
/// `AbortedTxn.TOTAL_SIZE`.
pub const ABORTED_TXN_BYTES: usize = 34;

/// One `.timeindex` entry (`TimestampOffset` before the base offset is added).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeIndexEntry {
    pub timestamp: i64,
    pub relative_offset: i32,
}

/// One `.index` entry (`OffsetPosition` before the base offset is added).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetIndexEntry {
    pub relative_offset: i32,
    pub position: i32,
}

/// One `.txnindex` entry (`AbortedTxn`), as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxnDump {
    pub version: i16,
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

/// The entries of an index with `entry_bytes`-sized entries up to the preallocated zero tail.
/// Errors: a length not a multiple of the entry size (`sanityCheck`'s `CorruptIndexException`),
/// non-zero bytes after the zero tail began.
fn entries<'a>(data: &'a [u8], entry_bytes: usize, kind: &str) -> Result<&'a [u8], Fault> {
    if !data.len().is_multiple_of(entry_bytes) {
        let whole = data.len() - data.len() % entry_bytes;
        return Err(Fault::new(
            whole,
            format!("{kind} file size {} is not a multiple of the entry size {entry_bytes}", data.len()),
        ));
    }
    let tail = data
        .chunks_exact(entry_bytes)
        .enumerate()
        .skip(1)
        .find(|(_, e)| e.iter().all(|&b| b == 0))
        .map_or(data.len(), |(i, _)| i * entry_bytes);
    if let Some(n) = data[tail..].iter().position(|&b| b != 0) {
        return Err(Fault::new(
            tail + n,
            format!("non-zero byte after the zero entry at byte {tail} that ends the {kind}"),
        ));
    }
    Ok(&data[..tail])
}

/// Parses an offset index (`.index`).
pub(crate) fn parse_offset_index(data: &[u8]) -> Result<Vec<OffsetIndexEntry>, Fault> {
    let used = entries(data, OFFSET_ENTRY_BYTES, "offset index")?;
    let mut r = Reader::new(used);
    let mut out = Vec::with_capacity(used.len() / OFFSET_ENTRY_BYTES);
    while r.remaining() > 0 {
        out.push(OffsetIndexEntry { relative_offset: r.i32("relative offset")?, position: r.i32("position")? });
    }
    Ok(out)
}

/// Parses a time index (`.timeindex`).
pub(crate) fn parse_time_index(data: &[u8]) -> Result<Vec<TimeIndexEntry>, Fault> {
    let used = entries(data, TIME_ENTRY_BYTES, "time index")?;
    let mut r = Reader::new(used);
    let mut out = Vec::with_capacity(used.len() / TIME_ENTRY_BYTES);
    while r.remaining() > 0 {
        out.push(TimeIndexEntry { timestamp: r.i64("timestamp")?, relative_offset: r.i32("relative offset")? });
    }
    Ok(out)
}

/// Parses a transaction index (`.txnindex`): 34-byte `AbortedTxn`s, not preallocated.
///
/// Errors: a torn last entry (Kafka's iterator silently ignores fewer than 34 trailing bytes;
/// here it is reported, since only a torn write makes it), and Kafka's "Unexpected aborted
/// transaction version". Kafka's `AbortedTxn.version()` reads one *byte* (`buffer.get`) of the
/// i16 written by `putShort`, i.e. the high byte, as a signed byte, and refuses it only when it
/// is above 0; this reader applies exactly that rule and reports the full i16 as written.
pub(crate) fn parse_txn_index(data: &[u8]) -> Result<Vec<AbortedTxnDump>, Fault> {
    let whole = data.len() - data.len() % ABORTED_TXN_BYTES;
    if whole != data.len() {
        return Err(Fault::new(
            whole,
            format!("torn aborted transaction: {} bytes after the last whole 34-byte entry", data.len() - whole),
        ));
    }
    let mut out = Vec::with_capacity(data.len() / ABORTED_TXN_BYTES);
    for (i, entry) in data.chunks_exact(ABORTED_TXN_BYTES).enumerate() {
        let at = i * ABORTED_TXN_BYTES;
        if (entry[0] as i8) > 0 {
            return Err(Fault::new(at, format!("unexpected aborted transaction version byte {}, current version is 0", entry[0])));
        }
        let mut r = Reader::new(entry);
        let parsed = (|| -> Result<AbortedTxnDump, Fault> {
            Ok(AbortedTxnDump {
                version: r.i16("version")?,
                producer_id: r.i64("producer_id")?,
                first_offset: r.i64("first_offset")?,
                last_offset: r.i64("last_offset")?,
                last_stable_offset: r.i64("last_stable_offset")?,
            })
        })()
        .map_err(|f| Fault::new(at + f.at, f.reason))?;
        out.push(parsed);
    }
    Ok(out)
}
