//! The text files of a log directory, read with the rules of Kafka's readers:
//!
//! - `leader-epoch-checkpoint` (`LeaderEpochCheckpointFile.java`, its `Formatter`): version
//!   line, count line, then `epoch startOffset` lines.
//! - `replication-offset-checkpoint`, `recovery-point-offset-checkpoint`,
//!   `log-start-offset-checkpoint`, `cleaner-offset-checkpoint` (`OffsetCheckpointFile.java`):
//!   version, count, then `topic partition offset` lines.
//! - `partition.metadata` (`PartitionMetadataFile.java`, `PartitionMetadataReadBuffer.java`):
//!   `version: 0` then `topic_id: <base64 Uuid>`.
//!
//! Both checkpoint kinds go through `CheckpointFile.CheckpointReadBuffer.read`: an empty file
//! is empty (no version); a file with only the version line is empty; the version must be 0;
//! version and count are Java `Integer.parseInt` (optional sign, no spaces); every further
//! line must split on `\s+` into exactly the expected fields (Java `String.split`: a leading
//! blank makes an empty first field, trailing blanks are dropped); the number of entry lines
//! must equal the count. Lines end at `\n`, `\r` or `\r\n` (`BufferedReader.readLine`); the
//! file must be UTF-8 (`Files.newBufferedReader` fails on malformed input). Java's
//! `parseInt` also accepts non-ASCII Unicode digits; these readers accept ASCII digits only.

use super::reader::Fault;

/// A parsed checkpoint: `version` is `None` for an empty file, which Kafka reads as no entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint<T> {
    pub version: Option<i32>,
    pub entries: Vec<T>,
}

/// One `leader-epoch-checkpoint` line (`EpochEntry`): the epoch and its first offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEntryDump {
    pub epoch: i32,
    pub start_offset: i64,
}

/// One offset-checkpoint line (`TopicPartitionOffset`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicPartitionOffsetDump {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

/// `partition.metadata`: the version as written (Kafka accepts any version >= 0) and the
/// topic id in the base64 form written in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionMetadataDump {
    pub version: i32,
    pub topic_id: String,
}

/// `CheckpointFile.CURRENT_VERSION` of both checkpoint kinds.
const CHECKPOINT_VERSION: i32 = 0;

/// Lines as `BufferedReader.readLine` yields them, each with its byte offset.
fn lines(data: &[u8]) -> Result<Vec<(usize, &str)>, Fault> {
    let text = std::str::from_utf8(data)
        .map_err(|e| Fault::new(e.valid_up_to(), "the file is not valid UTF-8"))?;
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => {
                out.push((start, &text[start..i]));
                i += 1;
                start = i;
            }
            b'\r' => {
                out.push((start, &text[start..i]));
                i += if bytes.get(i + 1) == Some(&b'\n') { 2 } else { 1 };
                start = i;
            }
            _ => i += 1,
        }
    }
    if start < bytes.len() {
        out.push((start, &text[start..]));
    }
    Ok(out)
}

/// Java's `\s` without UNICODE_CHARACTER_CLASS.
fn is_java_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r')
}

/// `Pattern.compile(sep).split(line)` where a separator match is found by `match_at` (the end
/// of a match starting at that byte, if any): a leading non-empty match yields an empty first
/// field, trailing empty fields are removed.
fn java_split(line: &str, match_at: impl Fn(&str, usize) -> Option<usize>) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut field_start, mut i) = (0, 0);
    while i < line.len() {
        match match_at(line, i) {
            Some(end) if end > i => {
                parts.push(&line[field_start..i]);
                field_start = end;
                i = end;
            }
            _ => i += line[i..].chars().next().map_or(1, char::len_utf8),
        }
    }
    if parts.is_empty() {
        return vec![line];
    }
    parts.push(&line[field_start..]);
    while parts.last() == Some(&"") {
        parts.pop();
    }
    parts
}

fn spaces_end(line: &str, i: usize) -> usize {
    line[i..].find(|c: char| !is_java_space(c)).map_or(line.len(), |n| i + n)
}

/// Split on `\s+`.
fn split_whitespace_java(line: &str) -> Vec<&str> {
    java_split(line, |l, i| Some(spaces_end(l, i)))
}

/// Split on `:\s+`.
fn split_colon_space_java(line: &str) -> Vec<&str> {
    java_split(line, |l, i| {
        (l.as_bytes()[i] == b':').then(|| spaces_end(l, i + 1)).filter(|&end| end > i + 1)
    })
}

/// Java `Long.parseLong` / `Integer.parseInt` on ASCII digits, within `[min, max]`.
fn parse_java_int(s: &str, min: i64, max: i64) -> Option<i64> {
    let (negative, digits) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut v: i128 = 0;
    for b in digits.bytes() {
        v = v * 10 + i128::from(b - b'0');
        if v > i128::from(i64::MAX) + 1 {
            return None;
        }
    }
    let v = if negative { -v } else { v };
    (v >= i128::from(min) && v <= i128::from(max)).then_some(v as i64)
}

fn parse_i32(s: &str) -> Option<i32> {
    parse_java_int(s, i64::from(i32::MIN), i64::from(i32::MAX)).map(|v| v as i32)
}

fn parse_i64(s: &str) -> Option<i64> {
    parse_java_int(s, i64::MIN, i64::MAX)
}

fn malformed(at: usize, line: &str) -> Fault {
    Fault::new(at, format!("malformed line {line:?}"))
}

/// `CheckpointReadBuffer.read` with an entry formatter.
fn read_checkpoint<T>(data: &[u8], entry: impl Fn(&str) -> Option<T>) -> Result<Checkpoint<T>, Fault> {
    let lines = lines(data)?;
    let mut it = lines.into_iter();
    let Some((at, line)) = it.next() else {
        return Ok(Checkpoint { version: None, entries: Vec::new() });
    };
    let version = parse_i32(line).ok_or_else(|| malformed(at, line))?;
    if version != CHECKPOINT_VERSION {
        return Err(Fault::new(at, format!("unrecognised version {version}, expected version {CHECKPOINT_VERSION}")));
    }
    let Some((count_at, count_line)) = it.next() else {
        return Ok(Checkpoint { version: Some(version), entries: Vec::new() });
    };
    let expected = parse_i32(count_line).ok_or_else(|| malformed(count_at, count_line))?;
    if expected < 0 {
        return Err(Fault::new(count_at, format!("negative entry count {expected}")));
    }
    let mut entries = Vec::new();
    for (at, line) in it {
        entries.push(entry(line).ok_or_else(|| malformed(at, line))?);
    }
    if entries.len() != expected as usize {
        return Err(Fault::new(
            count_at,
            format!("expected {expected} entries but found {}", entries.len()),
        ));
    }
    Ok(Checkpoint { version: Some(version), entries })
}

/// Parses a `leader-epoch-checkpoint` (`LeaderEpochCheckpointFile.Formatter.fromString`: two
/// fields, `Integer.parseInt` epoch and `Long.parseLong` start offset, any values).
pub(crate) fn parse_leader_epoch_checkpoint(data: &[u8]) -> Result<Checkpoint<EpochEntryDump>, Fault> {
    read_checkpoint(data, |line| match split_whitespace_java(line)[..] {
        [epoch, offset] => Some(EpochEntryDump { epoch: parse_i32(epoch)?, start_offset: parse_i64(offset)? }),
        _ => None,
    })
}

/// Parses an offset checkpoint (`OffsetCheckpointFile.Formatter.fromString`: three fields,
/// the topic as written, `Integer.parseInt` partition, `Long.parseLong` offset).
pub(crate) fn parse_offset_checkpoint(data: &[u8]) -> Result<Checkpoint<TopicPartitionOffsetDump>, Fault> {
    read_checkpoint(data, |line| match split_whitespace_java(line)[..] {
        [topic, partition, offset] => Some(TopicPartitionOffsetDump {
            topic: topic.to_string(),
            partition: parse_i32(partition)?,
            offset: parse_i64(offset)?,
        }),
        _ => None,
    })
}

/// Parses `partition.metadata` (`PartitionMetadataReadBuffer.read`): line 1 splits on `:\s+`
/// into two fields (the first is not checked) with an `Integer.parseInt` version >= 0; line 2
/// likewise with a topic id that `Uuid.fromString` accepts (at most 24 characters of URL-safe
/// base64 decoding to 16 bytes) and that is not the zero Uuid. Later lines are ignored.
pub(crate) fn parse_partition_metadata(data: &[u8]) -> Result<PartitionMetadataDump, Fault> {
    let lines = lines(data)?;
    let Some(&(at, line)) = lines.first() else {
        return Err(Fault::new(0, "empty partition metadata file"));
    };
    let version = match split_colon_space_java(line)[..] {
        [_, v] => parse_i32(v).ok_or_else(|| malformed(at, line))?,
        _ => return Err(malformed(at, line)),
    };
    if version < 0 {
        return Err(Fault::new(at, format!("unrecognized version of partition metadata file: {version}")));
    }
    let Some(&(at, line)) = lines.get(1) else {
        return Err(Fault::new(data.len(), "missing topic_id line"));
    };
    let topic_id = match split_colon_space_java(line)[..] {
        [_, id] => id,
        _ => return Err(malformed(at, line)),
    };
    let uuid = decode_uuid(topic_id).ok_or_else(|| Fault::new(at, format!("invalid base64 topic id {topic_id:?}")))?;
    if uuid == [0u8; 16] {
        return Err(Fault::new(at, "invalid topic ID (the zero Uuid)"));
    }
    Ok(PartitionMetadataDump { version, topic_id: topic_id.to_string() })
}

/// `Uuid.fromString`: `Base64.getUrlDecoder()` output must be 16 bytes, so 22 characters, or
/// 24 ending in `==`. As Java's decoder, the unused low bits of the last character are ignored.
fn decode_uuid(s: &str) -> Option<[u8; 16]> {
    let body = match s.len() {
        22 => s,
        24 => s.strip_suffix("==")?,
        _ => return None,
    };
    let mut sextets = [0u8; 22];
    for (slot, c) in sextets.iter_mut().zip(body.bytes()) {
        *slot = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
    }
    // Five 4-character units make 15 bytes; the last 2 characters make the 16th byte.
    let mut out = [0u8; 16];
    for (unit, chunk) in sextets.chunks(4).enumerate() {
        let v = chunk.iter().fold(0u32, |acc, &x| (acc << 6) | u32::from(x)) << (6 * (4 - chunk.len() as u32));
        let bytes = v.to_be_bytes();
        let n = if chunk.len() == 4 { 3 } else { 1 };
        out[unit * 3..unit * 3 + n].copy_from_slice(&bytes[1..1 + n]);
    }
    Some(out)
}
