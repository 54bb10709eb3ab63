//! Kafka's `leader-epoch-checkpoint` text format and its atomic write.
//!
//! ```text
//! 0          <- format version (only 0 exists)
//! 2          <- number of entries
//! 0 0        <- "<epoch> <start_offset>", whitespace separated
//! 1 120
//! ```

use std::fs;
use std::io::Write;
use std::path::Path;

use super::{EpochEntry, LeaderEpochCache};
use crate::error::CheckpointError;
use crate::types::{LeaderEpoch, Offset};

/// The only checkpoint format version Kafka has.
pub const CHECKPOINT_VERSION: u32 = 0;

/// The checkpoint text of `cache`.
pub fn format(cache: &LeaderEpochCache) -> String {
    let mut out = format!("{CHECKPOINT_VERSION}\n{}\n", cache.len());
    for e in cache.entries() {
        out.push_str(&format!("{} {}\n", e.epoch, e.start_offset));
    }
    out
}

/// Java's `\s` minus the line terminators: what separates the two fields of an entry line.
fn is_field_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\x0b' | '\x0c')
}

/// One or more ASCII digits, nothing else (no sign, no spaces, no underscores).
fn digits<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses checkpoint text. Lines end with `\n` (a `\r` before it is dropped, so CRLF files
/// read); the version line is exactly `0`; the count and both fields of each entry are ASCII
/// digits; entries have strictly increasing epochs and non-decreasing start offsets. Errors
/// name the 1-based line; `path` is only used in errors.
pub fn parse(text: &str, path: Option<&str>) -> Result<LeaderEpochCache, CheckpointError> {
    let corrupt = |line: usize, reason: String| CheckpointError::Corrupt { path: path.map(str::to_owned), line, reason };
    let mut lines: Vec<&str> = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    // Kafka's CheckpointFile reads an empty file, or a version line alone, as no entries
    // (`CheckpointReadBuffer.read`); it creates such an empty file for every new partition.
    match lines.first() {
        None => return Ok(LeaderEpochCache::default()),
        Some(v) if *v != "0" => return Err(corrupt(1, format!("unsupported version {v:?}, expected 0"))),
        Some(_) => {}
    }
    let count: usize = match lines.get(1) {
        None => return Ok(LeaderEpochCache::default()),
        // Kafka reads the count as an Int.
        Some(c) => digits::<usize>(c)
            .filter(|n| *n <= i32::MAX as usize)
            .ok_or_else(|| corrupt(2, format!("entry count {c:?} is not an integer in 0..=2^31-1")))?,
    };
    let mut entries: Vec<EpochEntry> = Vec::with_capacity(count.min(1 << 20));
    for i in 0..count {
        let n = i + 3;
        let Some(line) = lines.get(i + 2) else {
            return Err(corrupt(n, format!("expected {count} entries, found {i}")));
        };
        entries.push(parse_entry(line, entries.last()).map_err(|reason| corrupt(n, reason))?);
    }
    if lines.len() > count + 2 {
        return Err(corrupt(count + 3, "expected end of file".into()));
    }
    Ok(LeaderEpochCache { entries })
}

fn parse_entry(line: &str, previous: Option<&EpochEntry>) -> Result<EpochEntry, String> {
    let fields: Vec<&str> = line.split(is_field_space).filter(|f| !f.is_empty()).collect();
    if fields.len() != 2 {
        return Err(format!("expected \"<epoch> <start_offset>\", got {line:?}"));
    }
    let epoch = digits::<u32>(fields[0]).filter(|e| *e <= LeaderEpoch::MAX)
        .ok_or_else(|| format!("epoch {:?} is not an integer in 0..=2^31-1", fields[0]))?;
    let start = digits::<u64>(fields[1]).filter(|s| *s <= Offset::MAX)
        .ok_or_else(|| format!("start offset {:?} is not an integer in 0..=2^63-1", fields[1]))?;
    let entry = EpochEntry { epoch: LeaderEpoch(epoch), start_offset: Offset(start) };
    if let Some(prev) = previous {
        if entry.epoch <= prev.epoch || entry.start_offset < prev.start_offset {
            return Err(format!("entry ({epoch}, {start}) does not follow ({}, {})", prev.epoch, prev.start_offset));
        }
    }
    Ok(entry)
}

fn io_error(path: &Path, e: std::io::Error) -> CheckpointError {
    CheckpointError::Io { path: path.display().to_string(), reason: e.to_string() }
}

/// Writes `cache` to `path` atomically: `<path>.tmp`, fsync, rename, fsync the directory, so a
/// crash leaves either the old or the new file, never a torn one.
pub fn write(cache: &LeaderEpochCache, path: &Path) -> Result<(), CheckpointError> {
    if path.as_os_str().is_empty() {
        return Err(CheckpointError::Io { path: String::new(), reason: "empty path".into() });
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = Path::new(&tmp);
    let written = write_and_rename(cache, tmp, path);
    if written.is_err() {
        // Leave no half-written temporary behind.
        let _ = fs::remove_file(tmp);
    }
    // Errors name the checkpoint being written, whichever step failed.
    written.map_err(|e| io_error(path, e))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if let Ok(d) = fs::File::open(dir) {
        // Directory fsync makes the rename durable; some file systems refuse it, which is
        // harmless for a model.
        let _ = d.sync_all();
    }
    Ok(())
}

fn write_and_rename(cache: &LeaderEpochCache, tmp: &Path, path: &Path) -> std::io::Result<()> {
    let mut f = fs::File::create(tmp)?;
    f.write_all(format(cache).as_bytes())?;
    f.sync_all()?;
    drop(f);
    fs::rename(tmp, path)
}

/// Reads and parses the checkpoint at `path`. Bytes that are not UTF-8 are corrupt content,
/// reported at the line where they start.
pub fn read(path: &Path) -> Result<LeaderEpochCache, CheckpointError> {
    let bytes = fs::read(path).map_err(|e| io_error(path, e))?;
    let shown = path.display().to_string();
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()].iter().filter(|b| **b == b'\n').count() + 1;
        CheckpointError::Corrupt { path: Some(shown.clone()), line, reason: "invalid UTF-8".into() }
    })?;
    parse(text, Some(&shown))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_text_and_file() {
        let mut c = LeaderEpochCache::new();
        c.assign(LeaderEpoch(0), Offset(0));
        c.assign(LeaderEpoch(1), Offset(120));
        assert_eq!(format(&c), "0\n2\n0 0\n1 120\n");
        assert_eq!(parse(&format(&c), None).unwrap(), c);
        let dir = std::env::temp_dir().join(format!("epochlab-ckpt-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("leader-epoch-checkpoint");
        write(&c, &p).unwrap();
        assert_eq!(read(&p).unwrap(), c);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn corrupt_files_name_the_line() {
        let line = |t: &str| match parse(t, None) {
            Err(CheckpointError::Corrupt { line, .. }) => line,
            other => panic!("expected corrupt, got {other:?}"),
        };
        assert_eq!(line("1\n0\n"), 1);
        assert_eq!(line("0\nx\n"), 2);
        assert_eq!(line("0\n2\n0 0\n"), 4);
        assert_eq!(line("0\n1\n0 0\n1 5\n"), 4);
        assert_eq!(line("0\n2\n0 5\n1 4\n"), 4);
        assert_eq!(line("0\n+1\n0 5\n"), 2);
        assert_eq!(line(" 0\n0\n"), 1);
        assert!(parse("0\r\n2\r\n0 5\r\n1 5\r\n", None).is_ok());
        assert_eq!(line("0\n1\n-1 0\n"), 3);
        assert!(parse("", None).is_ok_and(|c| c.is_empty()), "Kafka reads an empty file as no entries");
    }
}
