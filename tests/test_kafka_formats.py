"""Kafka's on-disk formats through ``epochlab._core.parse_*``, on byte strings built here.

The builders below write what Kafka writes (``DefaultRecordBatch.writeHeader``,
``DefaultRecord.writeTo``, ``ProducerStateManager.writeSnapshot``, ...); the differential test
against files written by a real broker lives elsewhere.
"""

from __future__ import annotations

import gzip
import struct

import pytest

from epochlab import _core
from epochlab.errors import EpochlabError, KafkaFormatError


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def varint(v: int) -> bytes:
    z = (v << 1) ^ (v >> 63)
    z &= (1 << 64) - 1
    out = bytearray()
    while True:
        if z < 0x80:
            out.append(z)
            return bytes(out)
        out.append((z & 0x7F) | 0x80)
        z >>= 7


def nullable(b: bytes | None) -> bytes:
    return varint(-1) if b is None else varint(len(b)) + b


def records(items: list[tuple[bytes | None, bytes | None, list[tuple[bytes, bytes | None]]]]) -> bytes:
    out = b""
    for i, (key, value, headers) in enumerate(items):
        body = b"\x00" + varint(i) + varint(i) + nullable(key) + nullable(value) + varint(len(headers))
        for hk, hv in headers:
            body += nullable(hk) + nullable(hv)
        out += varint(len(body)) + body
    return out


def batch(payload: bytes, count: int, *, base_offset: int = 0, attributes: int = 0, producer_id: int = -1,
          producer_epoch: int = -1, base_sequence: int = -1, epoch: int = 0, base_ts: int = 1000) -> bytes:
    after_crc = struct.pack(">hiqqqhii", attributes, count - 1, base_ts, base_ts + count - 1, producer_id,
                            producer_epoch, base_sequence, count) + payload
    head = struct.pack(">qiib", base_offset, 49 + len(payload), epoch, 2)
    return head + struct.pack(">I", crc32c(after_crc)) + after_crc


def test_segment_of_plain_and_gzip_batches():
    plain = batch(records([(b"k", b"v", [("h".encode(), b"x")]), (None, None, [])]), 2, producer_id=5,
                  producer_epoch=0, base_sequence=0, epoch=3)
    raw = records([(None, b"a" * 100, [])] * 3)
    zipped = batch(gzip.compress(raw), 3, base_offset=2, attributes=1)
    dump = _core.parse_segment(plain + zipped, "00000000000000000000.log")
    assert dump["error"] is None and dump["valid_bytes"] == dump["size"] == len(plain + zipped)
    first, second = dump["batches"]
    assert (first["position"], first["base_offset"], first["last_offset"], first["count"]) == (0, 0, 1, 2)
    assert (first["producer_id"], first["last_sequence"], first["partition_leader_epoch"]) == (5, 1, 3)
    assert (first["compression"], first["timestamp_type"], first["crc_valid"]) == ("none", "CreateTime", True)
    assert first["crc"] == struct.unpack(">I", plain[17:21])[0]
    assert first["records"][0] == {"offset": 0, "offset_delta": 0, "timestamp": 1000, "key": b"k", "value": b"v",
                                   "headers": [["h", b"x"]], "size": first["records"][0]["size"]}
    assert first["records"][1]["key"] is None and first["control"] is None
    assert second["position"] == len(plain) and second["compression"] == "gzip"
    assert [r["offset"] for r in second["records"]] == [2, 3, 4]
    assert second["producer_id"] == -1 and second["delete_horizon_ms"] is None


def test_segment_control_batch():
    key, value = struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 17)
    data = batch(records([(key, value, [])]), 1, attributes=0x30, producer_id=9, producer_epoch=2)
    (b,) = _core.parse_segment(data, "t.log")["batches"]
    assert b["is_control"] and b["is_transactional"]
    assert b["control"] == {"type": "COMMIT", "type_id": 1, "version": 0, "coordinator_epoch": 17}


def test_segment_bad_crc_is_flagged_not_fatal():
    good = batch(records([(None, b"value", [])]), 1)
    bad = bytearray(good)
    bad[-2] ^= 0xFF  # inside the value
    dump = _core.parse_segment(bytes(bad) + good, "crc.log")
    assert dump["error"] is None
    assert [b["crc_valid"] for b in dump["batches"]] == [False, True]


def test_segment_truncated_tail_reports_offset():
    good = batch(records([(None, b"v", [])]), 1)
    data = good + good[:30]
    dump = _core.parse_segment(bytearray(data), "seg.log")
    assert len(dump["batches"]) == 1 and dump["valid_bytes"] == len(good)
    err = dump["error"]
    assert (err["file"], err["offset"]) == ("seg.log", len(good)) and "truncated" in err["reason"]


def test_segment_absurd_length_and_memoryview():
    data = bytearray(batch(records([(None, b"v", [])]), 1))
    data[8:12] = struct.pack(">i", 2**31 - 1)
    dump = _core.parse_segment(memoryview(bytes(data)), "x.log")
    assert dump["batches"] == [] and dump["error"]["offset"] == 0


def test_segment_legacy_v1_message():
    body = struct.pack(">bbq", 1, 0, 55) + struct.pack(">i", -1) + struct.pack(">i", 2) + b"hi"
    import zlib
    msg = struct.pack(">I", zlib.crc32(body)) + body
    data = struct.pack(">qi", 7, len(msg)) + msg
    (b,) = _core.parse_segment(data, "old.log")["batches"]
    assert (b["magic"], b["base_offset"], b["crc_valid"], b["timestamp_type"]) == (1, 7, True, "CreateTime")
    assert b["records"][0]["value"] == b"hi" and b["records"][0]["timestamp"] == 55


def test_segment_refuses_non_bytes():
    with pytest.raises(KafkaFormatError) as info:
        _core.parse_segment("not bytes", "s.log")  # type: ignore[arg-type]
    assert (info.value.file, info.value.offset) == ("s.log", 0)


def test_leader_epoch_checkpoint():
    assert _core.parse_leader_epoch_checkpoint(b"0\n2\n0 0\n4 120\n", "lec") == {
        "version": 0, "entries": [(0, 0), (4, 120)]}
    assert _core.parse_leader_epoch_checkpoint(b"", "lec") == {"version": None, "entries": []}
    with pytest.raises(KafkaFormatError) as info:
        _core.parse_leader_epoch_checkpoint(b"0\n2\n0 0\n", "leader-epoch-checkpoint")
    assert (info.value.file, info.value.offset) == ("leader-epoch-checkpoint", 2)
    with pytest.raises(KafkaFormatError) as info:
        _core.parse_leader_epoch_checkpoint(b"0\n1\n0 zero\n", "lec")
    assert info.value.offset == 4 and "malformed" in info.value.reason


@pytest.mark.parametrize("bad", [b"1\n0\n", b"0\n-1\n", b"0\n1\n1 2 3\n", b"0\n1\n 1 2\n", b"0\n1\n\xff\n"])
def test_leader_epoch_checkpoint_malformations(bad):
    with pytest.raises(KafkaFormatError):
        _core.parse_leader_epoch_checkpoint(bad, "lec")


def test_offset_checkpoint():
    got = _core.parse_offset_checkpoint(b"0\n2\nfoo 0 10\nbar-baz 12 7\n", "replication-offset-checkpoint")
    assert got == {"version": 0, "entries": [("foo", 0, 10), ("bar-baz", 12, 7)]}
    with pytest.raises(KafkaFormatError) as info:
        _core.parse_offset_checkpoint(b"0\n1\nfoo 0\n", "recovery-point-offset-checkpoint")
    assert (info.value.file, info.value.offset) == ("recovery-point-offset-checkpoint", 4)


def test_partition_metadata():
    got = _core.parse_partition_metadata(b"version: 0\ntopic_id: 8ldVdXbnQkWZXp46QoGmGg", "partition.metadata")
    assert got == {"version": 0, "topic_id": "8ldVdXbnQkWZXp46QoGmGg"}
    for bad in [b"", b"version: 0\n", b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", b"version:0\ntopic_id: x"]:
        with pytest.raises(KafkaFormatError):
            _core.parse_partition_metadata(bad, "partition.metadata")


def snapshot(entries: list[tuple[int, int, int, int, int, int, int, int]]) -> bytes:
    body = struct.pack(">i", len(entries)) + b"".join(struct.pack(">qhiqiqiq", *e) for e in entries)
    return struct.pack(">hI", 1, crc32c(body)) + body


def test_producer_snapshot():
    data = snapshot([(1000, 1, 4, 99, 2, 1_700_000_000_000, -1, -1)])
    got = _core.parse_producer_snapshot(data, "00000000000000000100.snapshot")
    assert got["version"] == 1 and got["crc_valid"] and got["crc"] == struct.unpack(">I", data[2:6])[0]
    assert got["entries"] == [{"producer_id": 1000, "epoch": 1, "last_sequence": 4, "last_offset": 99,
                               "offset_delta": 2, "timestamp": 1_700_000_000_000, "coordinator_epoch": -1,
                               "current_txn_first_offset": -1}]
    flipped = bytearray(data)
    flipped[-1] ^= 1
    assert _core.parse_producer_snapshot(bytes(flipped), "s")["crc_valid"] is False
    with pytest.raises(KafkaFormatError) as info:
        _core.parse_producer_snapshot(data[:20], "s.snapshot")
    assert info.value.file == "s.snapshot" and info.value.offset == 10


def test_indexes():
    idx = struct.pack(">iiii", 0, 0, 5, 4096) + bytes(32)
    assert _core.parse_offset_index(idx, "0.index") == [(0, 0), (5, 4096)]
    assert _core.parse_time_index(struct.pack(">qi", 77, 3) + bytes(12), "0.timeindex") == [(77, 3)]
    with pytest.raises(KafkaFormatError) as info:
        _core.parse_offset_index(idx + b"\x00", "0.index")
    assert info.value.offset == len(idx)
    txn = struct.pack(">hqqqq", 0, 7, 10, 20, 15)
    assert _core.parse_txn_index(txn, "0.txnindex") == [
        {"version": 0, "producer_id": 7, "first_offset": 10, "last_offset": 20, "last_stable_offset": 15}]
    with pytest.raises(KafkaFormatError) as info:
        _core.parse_txn_index(txn + txn[:3], "0.txnindex")
    assert info.value.offset == 34
    assert isinstance(info.value, EpochlabError) and isinstance(info.value, ValueError)
