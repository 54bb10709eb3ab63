//! Hand-built byte vectors through every parser, a tiny test-only encoder for v2 batches and
//! legacy messages, and a seeded no-panic mutation loop over all parsers.

use std::io::Write;

use super::*;
use crate::no_panic::Rng;

fn varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        let b = (z & 0x7f) as u8;
        z >>= 7;
        if z == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn nullable(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => varint(out, -1),
        Some(b) => {
            varint(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}

struct Rec<'a> {
    ts_delta: i64,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers: Vec<(&'a [u8], Option<&'a [u8]>)>,
}

fn rec<'a>(key: Option<&'a [u8]>, value: Option<&'a [u8]>) -> Rec<'a> {
    Rec { ts_delta: 0, key, value, headers: vec![] }
}

fn encode_records(records: &[Rec<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let mut body = vec![0u8];
        varint(&mut body, r.ts_delta);
        varint(&mut body, i as i64);
        nullable(&mut body, r.key);
        nullable(&mut body, r.value);
        varint(&mut body, r.headers.len() as i64);
        for (k, v) in &r.headers {
            nullable(&mut body, Some(k));
            nullable(&mut body, *v);
        }
        varint(&mut out, body.len() as i64);
        out.extend_from_slice(&body);
    }
    out
}

struct Batch {
    base_offset: i64,
    epoch: i32,
    attributes: i16,
    base_ts: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    count: i32,
    last_offset_delta: i32,
}

fn batch(count: i32) -> Batch {
    Batch {
        base_offset: 100,
        epoch: 7,
        attributes: 0,
        base_ts: 1_700_000_000_000,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        count,
        last_offset_delta: count - 1,
    }
}

fn compress(codec: Compression, raw: &[u8]) -> Vec<u8> {
    match codec {
        Compression::None => raw.to_vec(),
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(raw).unwrap();
            e.finish().unwrap()
        }
        Compression::Snappy => {
            // xerial framing: header, then [len][raw block] chunks (two, to test the loop).
            let mut out = vec![0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1];
            let (a, b) = raw.split_at(raw.len() / 2);
            for part in [a, b] {
                let c = snap::raw::Encoder::new().compress_vec(part).unwrap();
                out.extend_from_slice(&(c.len() as i32).to_be_bytes());
                out.extend_from_slice(&c);
            }
            out
        }
        Compression::Lz4 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(raw).unwrap();
            e.finish().unwrap()
        }
        Compression::Zstd => ruzstd::encoding::compress_to_vec(raw, ruzstd::encoding::CompressionLevel::Fastest),
    }
}

fn encode_batch(b: &Batch, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&b.base_offset.to_be_bytes());
    out.extend_from_slice(&((49 + payload.len()) as i32).to_be_bytes());
    out.extend_from_slice(&b.epoch.to_be_bytes());
    out.push(2);
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&b.attributes.to_be_bytes());
    out.extend_from_slice(&b.last_offset_delta.to_be_bytes());
    out.extend_from_slice(&b.base_ts.to_be_bytes());
    out.extend_from_slice(&(b.base_ts + 5).to_be_bytes());
    out.extend_from_slice(&b.producer_id.to_be_bytes());
    out.extend_from_slice(&b.producer_epoch.to_be_bytes());
    out.extend_from_slice(&b.base_sequence.to_be_bytes());
    out.extend_from_slice(&b.count.to_be_bytes());
    out.extend_from_slice(payload);
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

fn simple_batch(n: i32) -> Vec<u8> {
    let recs: Vec<Rec<'_>> = (0..n).map(|_| rec(Some(b"k"), Some(b"value"))).collect();
    encode_batch(&batch(n), &encode_records(&recs))
}

fn control_batch(kind: i16, coordinator_epoch: i32) -> Vec<u8> {
    let key = [0u8, 0, (kind >> 8) as u8, kind as u8];
    let mut value = vec![0u8, 0];
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    let b = Batch { attributes: 0x30, producer_id: 9, producer_epoch: 1, ..batch(1) };
    encode_batch(&b, &encode_records(&[rec(Some(&key), Some(&value))]))
}

fn legacy_message(offset: i64, magic: u8, attributes: u8, ts: i64, key: Option<&[u8]>, value: Option<&[u8]>) -> Vec<u8> {
    let mut body = vec![magic, attributes];
    if magic == 1 {
        body.extend_from_slice(&ts.to_be_bytes());
    }
    for part in [key, value] {
        match part {
            None => body.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(p) => {
                body.extend_from_slice(&(p.len() as i32).to_be_bytes());
                body.extend_from_slice(p);
            }
        }
    }
    let mut msg = crc32fast::hash(&body).to_be_bytes().to_vec();
    msg.extend_from_slice(&body);
    let mut out = offset.to_be_bytes().to_vec();
    out.extend_from_slice(&(msg.len() as i32).to_be_bytes());
    out.extend_from_slice(&msg);
    out
}

#[test]
fn v2_batch_round_trips_every_field() {
    let recs = vec![
        Rec { ts_delta: 0, key: Some(b"a"), value: Some(b"one"), headers: vec![(b"h", Some(b"v")), (b"n", None)] },
        Rec { ts_delta: 3, key: None, value: None, headers: vec![] },
    ];
    let b = Batch { producer_id: 42, producer_epoch: 3, base_sequence: i32::MAX, attributes: 0x10, ..batch(2) };
    let bytes = encode_batch(&b, &encode_records(&recs));
    let dump = parse_segment(&bytes, "00.log");
    assert_eq!(dump.error, None);
    assert_eq!((dump.size, dump.valid_bytes), (bytes.len() as u64, bytes.len() as u64));
    let got = &dump.batches[0];
    assert_eq!((got.base_offset, got.last_offset, got.count, got.partition_leader_epoch), (100, 101, 2, 7));
    assert_eq!((got.producer_id, got.producer_epoch, got.base_sequence), (42, 3, i32::MAX));
    assert_eq!(got.last_sequence, 0, "Kafka's incrementSequence wraps past Int32.MAX to 0");
    assert!(got.is_transactional && !got.is_control && got.crc_valid);
    assert_eq!((got.compression, got.timestamp_type, got.delete_horizon_ms), (Compression::None, TimestampType::CreateTime, None));
    assert_eq!(got.size, bytes.len() as u64);
    let r = &got.records;
    assert_eq!((r[0].offset, r[0].key.as_deref(), r[0].value.as_deref()), (100, Some(&b"a"[..]), Some(&b"one"[..])));
    assert_eq!(r[0].headers[0], RecordHeaderDump { key: b"h".to_vec(), value: Some(b"v".to_vec()) });
    assert_eq!(r[0].headers[1].value, None);
    assert_eq!((r[1].offset, r[1].offset_delta, r[1].timestamp, r[1].key.clone()), (101, 1, 1_700_000_000_003, None));
    assert_eq!(r.iter().map(|x| x.size as usize).sum::<usize>(), bytes.len() - 61);
}

#[test]
fn log_append_time_and_delete_horizon() {
    let b = Batch { attributes: 0x48, ..batch(1) };
    let bytes = encode_batch(&b, &encode_records(&[Rec { ts_delta: 9, ..rec(None, Some(b"x")) }]));
    let got = &parse_segment(&bytes, "f").batches[0];
    assert_eq!(got.timestamp_type, TimestampType::LogAppendTime);
    assert_eq!(got.records[0].timestamp, got.max_timestamp);
    assert_eq!(got.delete_horizon_ms, Some(got.base_timestamp));
}

#[test]
fn every_codec_decompresses() {
    let recs: Vec<Rec<'_>> = (0..50).map(|_| rec(Some(b"key"), Some(b"a value that compresses well well well"))).collect();
    let raw = encode_records(&recs);
    for (id, codec) in [(1, Compression::Gzip), (2, Compression::Snappy), (3, Compression::Lz4), (4, Compression::Zstd)] {
        let b = Batch { attributes: id, ..batch(50) };
        let mut bytes = encode_batch(&b, &compress(codec, &raw));
        bytes.extend(simple_batch(1));
        let dump = parse_segment(&bytes, "c.log");
        assert_eq!(dump.error, None, "{codec:?}");
        assert_eq!(dump.batches.len(), 2);
        assert_eq!(dump.batches[0].compression, codec);
        assert_eq!(dump.batches[0].records.len(), 50);
        assert_eq!(dump.batches[0].records[49].offset, 149);
    }
}

#[test]
fn raw_snappy_without_xerial_header_is_accepted() {
    let raw = encode_records(&[rec(None, Some(b"v"))]);
    let c = snap::raw::Encoder::new().compress_vec(&raw).unwrap();
    let bytes = encode_batch(&Batch { attributes: 2, ..batch(1) }, &c);
    assert_eq!(parse_segment(&bytes, "f").batches.len(), 1);
}

#[test]
fn corrupt_compressed_payload_stops_with_error() {
    let bytes = encode_batch(&Batch { attributes: 1, ..batch(1) }, b"not gzip at all");
    let dump = parse_segment(&bytes, "g.log");
    let Some(FormatError::Malformed { offset, reason, .. }) = dump.error else { panic!() };
    assert_eq!(offset, 0);
    assert!(reason.contains("gzip"), "{reason}");
    let bytes = encode_batch(&Batch { attributes: 5, ..batch(1) }, b"");
    assert!(parse_segment(&bytes, "g").error.is_some(), "unknown codec 5");
}

#[test]
fn decompression_is_capped() {
    let zeros = vec![0u8; MAX_DECOMPRESSED_BYTES + 10];
    let c = compress(Compression::Zstd, &zeros);
    let bytes = encode_batch(&Batch { attributes: 4, ..batch(1) }, &c);
    let dump = parse_segment(&bytes, "bomb.log");
    let Some(FormatError::Malformed { reason, .. }) = dump.error else { panic!() };
    assert!(reason.contains("more than"), "{reason}");
}

#[test]
fn control_batches() {
    let mut bytes = control_batch(1, 5);
    bytes.extend(control_batch(0, 6));
    bytes.extend(control_batch(2, 0));
    bytes.extend(control_batch(99, 0));
    let dump = parse_segment(&bytes, "t.log");
    assert_eq!(dump.error, None);
    let kinds: Vec<_> = dump.batches.iter().map(|b| b.control.clone().unwrap()).collect();
    assert_eq!(kinds[0], ControlInfo { kind: ControlRecordType::Commit, type_id: 1, version: 0, coordinator_epoch: Some(5) });
    assert_eq!((kinds[1].kind, kinds[1].coordinator_epoch), (ControlRecordType::Abort, Some(6)));
    assert_eq!((kinds[2].kind, kinds[2].coordinator_epoch), (ControlRecordType::LeaderChange, None));
    assert_eq!((kinds[3].kind, kinds[3].type_id), (ControlRecordType::Unknown, 99));
    assert!(dump.batches[0].is_control && dump.batches[0].is_transactional);
}

#[test]
fn malformed_control_key_stops() {
    let b = Batch { attributes: 0x20, ..batch(1) };
    let bytes = encode_batch(&b, &encode_records(&[rec(Some(b"\x00"), None)]));
    let dump = parse_segment(&bytes, "c");
    assert!(dump.batches.is_empty() && dump.error.is_some());
}

#[test]
fn bad_crc_is_reported_and_parsing_continues() {
    let mut bytes = simple_batch(2);
    let n = bytes.len();
    bytes[n - 2] ^= 0x01; // the last value byte (the last byte is the header count)
    bytes.extend(simple_batch(1));
    let dump = parse_segment(&bytes, "crc.log");
    assert_eq!(dump.error, None);
    assert_eq!(dump.batches.len(), 2);
    assert!(!dump.batches[0].crc_valid && dump.batches[1].crc_valid);
}

#[test]
fn truncated_tail_keeps_good_batches() {
    let first = simple_batch(2);
    let mut bytes = first.clone();
    bytes.extend(&simple_batch(3)[..40]);
    let dump = parse_segment(&bytes, "00000.log");
    assert_eq!(dump.batches.len(), 1);
    assert_eq!(dump.valid_bytes, first.len() as u64);
    let Some(FormatError::Malformed { file, offset, reason }) = dump.error else { panic!() };
    assert_eq!((file.as_str(), offset), ("00000.log", first.len() as u64));
    assert!(reason.contains("truncated"), "{reason}");
    // Shorter than the header up to the magic.
    let mut bytes = first.clone();
    bytes.extend([0u8; 5]);
    assert_eq!(parse_segment(&bytes, "f").error.map(|e| matches!(e, FormatError::Malformed { offset, .. } if offset == first.len() as u64)), Some(true));
}

#[test]
fn absurd_lengths_fail_without_allocating() {
    for length in [i32::MAX, -1, 0, 13, 48] {
        let mut bytes = simple_batch(1);
        bytes[8..12].copy_from_slice(&length.to_be_bytes());
        let dump = parse_segment(&bytes, "f");
        assert!(dump.error.is_some() && dump.batches.is_empty(), "length {length}");
    }
    // A record count far beyond the bytes, a record length beyond the batch.
    let mut b = simple_batch(1);
    b[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    assert!(parse_segment(&b, "f").error.is_some());
    let mut b = simple_batch(1);
    b[61] = 0x7e; // zig-zag 63: longer than the record
    let e = parse_segment(&b, "f").error.unwrap();
    assert!(e.to_string().contains("file byte 61"), "{e}");
    // Records not matching recordCount: fewer and more.
    for count in [0i32, 2] {
        let recs = encode_records(&[rec(None, Some(b"x"))]);
        let bytes = encode_batch(&Batch { count, ..batch(1) }, &recs);
        assert_eq!(parse_segment(&bytes, "f").error.is_some(), count == 2, "count {count}");
    }
    let recs = encode_records(&[rec(None, Some(b"x")), rec(None, Some(b"y"))]);
    assert!(parse_segment(&encode_batch(&batch(1), &recs), "f").error.is_some());
}

#[test]
fn unknown_magic_stops() {
    let mut b = simple_batch(1);
    b[16] = 3;
    let e = parse_segment(&b, "f").error.unwrap();
    assert!(e.to_string().contains("unknown magic 3"), "{e}");
}

#[test]
fn varint_overflow_is_an_error() {
    let mut r = reader::Reader::new(&[0xff, 0xff, 0xff, 0xff, 0x80, 0x01]);
    assert!(r.varint("x").is_err());
    let mut r = reader::Reader::new(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    assert_eq!(r.varint("x"), Ok(i32::MIN));
    let ten = [0xffu8; 10];
    assert!(reader::Reader::new(&ten).varlong("x").is_err());
    let mut max = vec![0xfeu8];
    max.extend([0xff; 8]);
    max.push(0x01);
    assert_eq!(reader::Reader::new(&max).varlong("x"), Ok(i64::MAX));
    // In a record: the offset delta varint runs five continuation bytes.
    let mut body = vec![0u8, 0];
    body.extend([0xff; 5]);
    let mut payload = Vec::new();
    varint(&mut payload, body.len() as i64);
    payload.extend(&body);
    let e = parse_segment(&encode_batch(&batch(1), &payload), "f").error.unwrap();
    assert!(e.to_string().contains("varint is too long"), "{e}");
}

#[test]
fn empty_segment_is_fine() {
    let dump = parse_segment(b"", "e.log");
    assert_eq!((dump.batches.len(), dump.valid_bytes, dump.error), (0, 0, None));
}

#[test]
fn legacy_v0_and_v1_messages() {
    let mut bytes = legacy_message(0, 0, 0, 0, Some(b"k"), Some(b"v0"));
    bytes.extend(legacy_message(1, 1, 0, 1234, None, Some(b"v1")));
    let dump = parse_segment(&bytes, "old.log");
    assert_eq!(dump.error, None);
    let (a, b) = (&dump.batches[0], &dump.batches[1]);
    assert_eq!((a.magic, a.timestamp_type, a.records[0].timestamp, a.crc_valid), (0, TimestampType::NoTimestampType, -1, true));
    assert_eq!((b.magic, b.base_offset, b.records[0].timestamp, b.producer_id), (1, 1, 1234, -1));
    assert_eq!(b.records[0].value.as_deref(), Some(&b"v1"[..]));
}

#[test]
fn legacy_compressed_wrapper_v1_uses_relative_offsets() {
    let mut inner = legacy_message(0, 1, 0, 10, None, Some(b"a"));
    inner.extend(legacy_message(1, 1, 0, 11, None, Some(b"b")));
    inner.extend(legacy_message(2, 1, 0, 12, None, Some(b"c")));
    let wrapper = legacy_message(52, 1, 1 | 0x08, 99, None, Some(&compress(Compression::Gzip, &inner)));
    let dump = parse_segment(&wrapper, "w.log");
    assert_eq!(dump.error, None);
    let b = &dump.batches[0];
    assert_eq!((b.base_offset, b.last_offset, b.count, b.compression), (50, 52, 3, Compression::Gzip));
    assert_eq!(b.records.iter().map(|r| (r.offset, r.timestamp)).collect::<Vec<_>>(), vec![(50, 99), (51, 99), (52, 99)]);
    // An inner message whose CRC does not match makes the whole shallow entry invalid.
    let mut bad_inner = inner.clone();
    let n = bad_inner.len();
    bad_inner[n - 1] ^= 1;
    let wrapper = legacy_message(52, 1, 1, 99, None, Some(&compress(Compression::Gzip, &bad_inner)));
    let dump = parse_segment(&wrapper, "w.log");
    assert_eq!((dump.error, dump.batches[0].crc_valid), (None, false));
}

#[test]
fn leader_epoch_checkpoint_reads_and_refuses_like_kafka() {
    let cp = parse_leader_epoch_checkpoint(b"0\n2\n0 0\n3 150\n", "lec").unwrap();
    assert_eq!(cp.version, Some(0));
    assert_eq!(cp.entries, vec![EpochEntryDump { epoch: 0, start_offset: 0 }, EpochEntryDump { epoch: 3, start_offset: 150 }]);
    assert_eq!(parse_leader_epoch_checkpoint(b"", "e").unwrap().version, None);
    assert_eq!(parse_leader_epoch_checkpoint(b"0\n", "e").unwrap().entries, vec![]);
    assert_eq!(parse_leader_epoch_checkpoint(b"0\r\n1\r\n1\t5  \r\n", "e").unwrap().entries.len(), 1);
    let bad: &[(&[u8], u64)] = &[
        (b"1\n0\n", 0),              // wrong version
        (b"x\n0\n", 0),              // version not a number
        (b" 0\n0\n", 0),             // parseInt refuses spaces
        (b"0\nx\n", 2),              // bad count
        (b"0\n-1\n", 2),             // negative count
        (b"0\n2\n1 5\n", 2),         // too few entries
        (b"0\n0\n1 5\n", 2),         // too many entries
        (b"0\n1\n1\n", 4),           // one field
        (b"0\n1\n1 2 3\n", 4),       // three fields
        (b"0\n1\n 1 2\n", 4),        // leading blank: Java split yields an empty first field
        (b"0\n1\n\n", 4),            // empty line
        (b"0\n1\n2147483648 0\n", 4), // epoch beyond Int32
        (b"0\n1\n1 9223372036854775808\n", 4), // offset beyond Int64
        (b"0\n1\n1 0x10\n", 4),
        (b"0\n1\n1 \xff\n", 6),      // not UTF-8
    ];
    for (input, offset) in bad {
        match parse_leader_epoch_checkpoint(input, "leader-epoch-checkpoint") {
            Err(FormatError::Malformed { file, offset: got, .. }) => {
                assert_eq!((file.as_str(), got), ("leader-epoch-checkpoint", *offset), "{:?}", String::from_utf8_lossy(input))
            }
            Ok(v) => panic!("accepted {:?}: {v:?}", String::from_utf8_lossy(input)),
        }
    }
    assert_eq!(parse_leader_epoch_checkpoint(b"+0\n1\n-1 -5\n", "e").unwrap().entries[0].start_offset, -5);
}

#[test]
fn offset_checkpoint_reads_and_refuses_like_kafka() {
    let cp = parse_offset_checkpoint(b"0\n2\nt 0 5\n__consumer_offsets 49 100\n", "r").unwrap();
    assert_eq!(cp.entries[1], TopicPartitionOffsetDump { topic: "__consumer_offsets".into(), partition: 49, offset: 100 });
    for bad in [&b"0\n1\nt 0\n"[..], b"0\n1\nt x 5\n", b"0\n1\nt 0 5 6\n", b"0\n2\nt 0 5\n", b"1\n0\n"] {
        assert!(parse_offset_checkpoint(bad, "r").is_err(), "{:?}", String::from_utf8_lossy(bad));
    }
}

#[test]
fn partition_metadata() {
    let id = "AAAAAAAAAAAAAAAAAAAAAQ"; // Uuid(0, 1)
    let pm = parse_partition_metadata(format!("version: 0\ntopic_id: {id}").as_bytes(), "pm").unwrap();
    assert_eq!((pm.version, pm.topic_id.as_str()), (0, id));
    assert!(parse_partition_metadata(format!("version: 0\ntopic_id: {id}==\n").as_bytes(), "pm").is_ok());
    let bad = [
        String::new(),
        "version: 0".into(),
        "version:0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ".into(),
        "version: -1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ".into(),
        "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA".into(), // zero Uuid
        "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAA+Q".into(), // not URL-safe
        "version: 0\ntopic_id: AAAA".into(),
        "version: 0\ntopic_id: a: b".into(),
    ];
    for b in bad {
        assert!(parse_partition_metadata(b.as_bytes(), "pm").is_err(), "{b:?}");
    }
    let e = parse_partition_metadata(b"version: 0\ntopic_id: zz", "p").unwrap_err();
    assert!(matches!(e, FormatError::Malformed { offset: 11, .. }), "{e:?}");
}

fn snapshot(entries: &[[i64; 8]]) -> Vec<u8> {
    let mut out = vec![0, 1, 0, 0, 0, 0];
    out.extend_from_slice(&(entries.len() as i32).to_be_bytes());
    for e in entries {
        out.extend_from_slice(&e[0].to_be_bytes());
        out.extend_from_slice(&(e[1] as i16).to_be_bytes());
        out.extend_from_slice(&(e[2] as i32).to_be_bytes());
        out.extend_from_slice(&e[3].to_be_bytes());
        out.extend_from_slice(&(e[4] as i32).to_be_bytes());
        out.extend_from_slice(&e[5].to_be_bytes());
        out.extend_from_slice(&(e[6] as i32).to_be_bytes());
        out.extend_from_slice(&e[7].to_be_bytes());
    }
    let crc = crc32c::crc32c(&out[6..]);
    out[2..6].copy_from_slice(&crc.to_be_bytes());
    out
}

#[test]
fn producer_snapshot() {
    let bytes = snapshot(&[[1000, 2, 9, 55, 3, 1_700_000_000_000, -1, -1], [1001, 0, 0, 60, 0, 5, 4, 58]]);
    let s = parse_producer_snapshot(&bytes, "00.snapshot").unwrap();
    assert_eq!((s.version, s.crc_valid, s.entries.len()), (1, true, 2));
    assert_eq!(s.entries[0], ProducerEntryDump {
        producer_id: 1000, epoch: 2, last_sequence: 9, last_offset: 55, offset_delta: 3,
        timestamp: 1_700_000_000_000, coordinator_epoch: -1, current_txn_first_offset: -1,
    });
    let mut bad = bytes.clone();
    bad[20] ^= 1;
    assert!(!parse_producer_snapshot(&bad, "s").unwrap().crc_valid);
    let mut v = bytes.clone();
    v[1] = 2;
    assert!(parse_producer_snapshot(&v, "s").is_err());
    let mut n = bytes.clone();
    n[6..10].copy_from_slice(&i32::MAX.to_be_bytes());
    assert!(matches!(parse_producer_snapshot(&n, "s"), Err(FormatError::Malformed { offset: 6, .. })));
    assert!(parse_producer_snapshot(&bytes[..bytes.len() - 1], "s").is_err());
    assert!(parse_producer_snapshot(&bytes[..5], "s").is_err());
    assert_eq!(parse_producer_snapshot(&snapshot(&[]), "s").unwrap().entries, vec![]);
}

#[test]
fn offset_and_time_index_stop_at_the_preallocated_zeros() {
    let mut idx = Vec::new();
    for (rel, pos) in [(0i32, 0i32), (10, 4096), (20, 8192)] {
        idx.extend(rel.to_be_bytes());
        idx.extend(pos.to_be_bytes());
    }
    idx.extend([0u8; 80]);
    let got = parse_offset_index(&idx, "0.index").unwrap();
    assert_eq!(got.len(), 3);
    assert_eq!(got[2], OffsetIndexEntry { relative_offset: 20, position: 8192 });
    assert_eq!(parse_offset_index(&[0; 16], "z").unwrap().len(), 1, "entry 0 may be all zero");
    assert_eq!(parse_offset_index(b"", "z").unwrap().len(), 0);
    assert!(matches!(parse_offset_index(&idx[..20], "i"), Err(FormatError::Malformed { offset: 16, .. })));
    let mut junk = idx.clone();
    junk[50] = 1;
    assert!(matches!(parse_offset_index(&junk, "i"), Err(FormatError::Malformed { offset: 50, .. })));

    let mut t = Vec::new();
    for (ts, rel) in [(5i64, 0i32), (9, 3)] {
        t.extend(ts.to_be_bytes());
        t.extend(rel.to_be_bytes());
    }
    t.extend([0u8; 24]);
    assert_eq!(parse_time_index(&t, "0.timeindex").unwrap(), vec![
        TimeIndexEntry { timestamp: 5, relative_offset: 0 },
        TimeIndexEntry { timestamp: 9, relative_offset: 3 },
    ]);
    assert!(parse_time_index(&t[..13], "t").is_err());
}

fn aborted(version: i16, pid: i64) -> Vec<u8> {
    let mut out = version.to_be_bytes().to_vec();
    for v in [pid, 10, 20, 15] {
        out.extend(v.to_be_bytes());
    }
    out
}

#[test]
fn txn_index() {
    let mut bytes = aborted(0, 7);
    bytes.extend(aborted(0, 8));
    let got = parse_txn_index(&bytes, "0.txnindex").unwrap();
    assert_eq!(got[1], AbortedTxnDump { version: 0, producer_id: 8, first_offset: 10, last_offset: 20, last_stable_offset: 15 });
    assert!(matches!(parse_txn_index(&bytes[..40], "t"), Err(FormatError::Malformed { offset: 34, .. })));
    let mut v = aborted(0, 1);
    v.extend(aborted(0x0100, 2));
    assert!(matches!(parse_txn_index(&v, "t"), Err(FormatError::Malformed { offset: 34, .. })));
    // Kafka reads only the high byte of the version: 0x0001 and 0xff00 pass its check.
    assert_eq!(parse_txn_index(&aborted(1, 1), "t").unwrap()[0].version, 1);
    assert_eq!(parse_txn_index(&aborted(-256, 1), "t").unwrap()[0].version, -256);
}

/// `0..n` from the shared test generator.
fn below(r: &mut Rng, n: usize) -> usize {
    r.below(n as u64) as usize
}

fn mutate(r: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + below(r, 4) {
        let at = below(r, v.len() + 1);
        match below(r, 6) {
            0 if !v.is_empty() => {
                let i = at.min(v.len() - 1);
                v[i] ^= 1 << below(r, 8);
            }
            1 => v.truncate(at),
            2 => {
                let n = below(r, 8);
                let bytes: Vec<u8> = (0..n).map(|_| r.next() as u8).collect();
                v.splice(at..at, bytes);
            }
            3 | 4 if v.len() >= at + 4 => {
                let word = [i32::MAX, -1, i32::MIN, 0, 1 << 20][below(r, 5)];
                v[at..at + 4].copy_from_slice(&word.to_be_bytes());
            }
            _ if !v.is_empty() => {
                let i = at.min(v.len() - 1);
                v[i] = [0x00, 0x7f, 0x80, 0xff][below(r, 4)];
            }
            _ => {}
        }
    }
    v
}

/// Every parser on a few thousand seeded mutations of valid inputs: never a panic, and a
/// segment's error offset is always its `valid_bytes`.
#[test]
fn no_parser_panics_on_mutated_inputs() {
    let mut segment = simple_batch(3);
    for (id, codec) in [(1, Compression::Gzip), (2, Compression::Snappy), (3, Compression::Lz4), (4, Compression::Zstd)] {
        let raw = encode_records(&[rec(Some(b"k"), Some(b"vvvvvvvv")), rec(None, None)]);
        segment.extend(encode_batch(&Batch { attributes: id, ..batch(2) }, &compress(codec, &raw)));
    }
    segment.extend(control_batch(1, 3));
    let mut inner = legacy_message(0, 1, 0, 1, None, Some(b"a"));
    inner.extend(legacy_message(1, 1, 0, 2, None, Some(b"b")));
    let legacy = legacy_message(9, 1, 1, 3, None, Some(&compress(Compression::Gzip, &inner)));
    let seeds: Vec<Vec<u8>> = vec![
        segment,
        legacy,
        b"0\n2\n0 0\n3 150\n".to_vec(),
        b"0\n1\ntopic 0 5\n".to_vec(),
        b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n".to_vec(),
        snapshot(&[[1, 2, 3, 4, 5, 6, 7, 8]]),
        [0u8, 0, 0, 1, 0, 0, 0x10, 0].repeat(4),
        aborted(0, 3),
    ];
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut rng = Rng::new(0x5EED_F0F0_1234_5678);
    for step in 0..4000 {
        let seed = &seeds[step % seeds.len()];
        let input = mutate(&mut rng, seed);
        let outcome = std::panic::catch_unwind(|| {
            let dump = parse_segment(&input, "m");
            if let Some(FormatError::Malformed { offset, .. }) = &dump.error {
                assert_eq!(*offset, dump.valid_bytes);
            }
            let _ = parse_leader_epoch_checkpoint(&input, "m");
            let _ = parse_offset_checkpoint(&input, "m");
            let _ = parse_partition_metadata(&input, "m");
            let _ = parse_producer_snapshot(&input, "m");
            let _ = parse_offset_index(&input, "m");
            let _ = parse_time_index(&input, "m");
            let _ = parse_txn_index(&input, "m");
        });
        if outcome.is_err() {
            std::panic::set_hook(hook);
            panic!("a parser panicked at step {step} on {input:?}");
        }
    }
    std::panic::set_hook(hook);
}
