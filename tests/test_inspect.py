"""``epochlab inspect`` against Kafka itself: directories written by Kafka 4.3.1's own classes
(``UnifiedLog``, ``OffsetCheckpointFile``, ...), read by the Rust parsers, compared with Kafka's
``DumpLogSegments`` and Kafka's checkpoint and snapshot readers; multi-replica forensics
checked against what Kafka's leader answers; damaged files named with their byte offsets."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from epochlab.cli import main
from epochlab.ondisk import Replica, compare_replicas, read_acked, read_log_dir

pytest.importorskip("jpype")

FIXTURES = Path(__file__).parent / "fixtures" / "kafka-4.3.1"


def _jars_or_skip() -> None:
    from epochlab.errors import ConfigError
    from epochlab.kafka.jars import jar_dir

    try:
        jar_dir(resolve=False)
    except ConfigError as exc:
        pytest.skip(f"Kafka's jars are not resolved: {exc.message}")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A broker directory and three diverged replicas, freshly written by Kafka's classes."""
    _jars_or_skip()
    from epochlab.kafka.classes.writer import write_broker_dir, write_diverged_replicas

    root = tmp_path_factory.mktemp("kafka-written")
    write_broker_dir(root / "logdir")
    write_diverged_replicas(root / "replicas")
    return root


@pytest.mark.parametrize("source", ["fresh", "fixture"])
def test_inspect_agrees_with_dump_log_segments(written: Path, source: str) -> None:
    from epochlab.kafka.classes.dumplog import verify_with_kafka

    root = written if source == "fresh" else FIXTURES
    for d in [root / "logdir", *sorted((root / "replicas").iterdir())]:
        view = read_log_dir(d)
        assert not view.all_problems()
        files, disagreements = verify_with_kafka(view)
        assert files >= 4
        assert disagreements == [], "\n".join(map(str, disagreements))


def test_what_the_fixture_holds(written: Path) -> None:
    """The directory exercises what it claims: every codec, v0/v1, markers, txn index."""
    view = read_log_dir(written / "logdir")
    batches = [b for p in view.partitions.values() for b in p.batches()]
    assert {b["compression"] for b in batches} == {"none", "gzip", "snappy", "lz4", "zstd"}
    assert {b["magic"] for b in batches} == {0, 1, 2}
    controls = [b["control"]["type"] for b in batches if b["is_control"]]
    assert controls == ["COMMIT", "ABORT"]
    p0 = view.partitions["epochlab-0"]
    assert len(p0.segments) == 3 and p0.log_start_offset == 4 and p0.high_watermark == p0.log_end_offset == 27
    assert [t["producer_id"] for s in p0.segments for t in s.aborted_txns or []] == [3000]
    assert p0.leader_epoch_checkpoint == [(0, 4), (3, 15)] == p0.epochs_from_batches()  # truncated from the start
    assert p0.topic_id is not None and view.node_id == 1


def test_checkpoints_and_snapshots_agree_with_kafkas_readers(written: Path) -> None:
    from epochlab.kafka.jvm import ensure_jvm

    jpype = ensure_jvm()
    j = jpype.JClass
    file_ = j("java.io.File")
    failure = j("org.apache.kafka.storage.internals.log.LogDirFailureChannel")(1)
    view = read_log_dir(written / "logdir")
    offsets = j("org.apache.kafka.storage.internals.checkpoint.OffsetCheckpointFile")
    for name, entries in view.checkpoints.items():
        kafka = offsets(file_(str(written / "logdir" / name)), failure).read()
        assert {(str(tp.topic()), int(tp.partition()), int(kafka.get(tp))) for tp in kafka.keySet()} == set(entries)
    epochs = j("org.apache.kafka.storage.internals.checkpoint.LeaderEpochCheckpointFile")
    metadata = j("org.apache.kafka.storage.internals.checkpoint.PartitionMetadataFile")
    psm = j("org.apache.kafka.storage.internals.log.ProducerStateManager")
    for p in view.partitions.values():
        kafka_epochs = epochs(file_(str(Path(p.path) / "leader-epoch-checkpoint")), failure).read()
        assert [(int(e.epoch()), int(e.startOffset())) for e in kafka_epochs] == p.leader_epoch_checkpoint
        if p.topic_id is not None:
            meta = metadata(file_(str(Path(p.path) / "partition.metadata")), failure).read()
            assert str(meta.topicId().toString()) == p.topic_id
        for offset, snap in p.producer_snapshots.items():
            kafka_entries = psm.readSnapshot(file_(str(Path(p.path) / f"{offset:020d}.snapshot")))
            ours = [(e["producer_id"], e["epoch"], e["coordinator_epoch"], e["timestamp"])
                    for e in snap["entries"]]
            theirs = [(int(e.producerId()), int(e.producerEpoch()), int(e.coordinatorEpoch()), int(e.lastTimestamp()))
                      for e in kafka_entries]
            assert ours == theirs
            assert [e["last_offset"] for e in snap["entries"]] == [int(e.lastDataOffset()) for e in kafka_entries]
            assert [e["last_sequence"] for e in snap["entries"]] == \
                [int(next(iter(e.batchMetadata())).lastSeq()) for e in kafka_entries]


def _replicas(root: Path) -> list[Replica]:
    views = [read_log_dir(d) for d in sorted((root / "replicas").iterdir())]
    return [Replica.of(f"broker-{v.node_id}", v.partitions["epochlab-0"]) for v in views]


def test_forensics_of_diverged_replicas_matches_kafkas_leader(written: Path) -> None:
    """Broker 1 holds 5-7 from epoch 1 that nobody else has; broker 2 leads epoch 2. Kafka's
    leader answers endOffsetForEpoch(1) = (1, 5): broker 1 truncates to 5, as predicted."""
    from epochlab.kafka.classes.oracle import KafkaUnifiedLog

    replicas = _replicas(written)
    report = compare_replicas(replicas)
    assert report.leader == "broker-2"
    assert report.first_divergence[("broker-1", "broker-2")] == 5
    assert report.first_divergence[("broker-2", "broker-3")] is None
    rejoin = {j.replica: j for j in report.rejoins}
    assert rejoin["broker-1"].kept_below == 5
    assert [o for o, _ in rejoin["broker-1"].truncated] == [5, 6, 7]
    assert rejoin["broker-3"].steps == [] and rejoin["broker-3"].truncated == []
    copy = written / "leader-copy"
    shutil.copytree(written / "replicas" / "broker-2", copy / "x")
    leader = KafkaUnifiedLog(copy)
    try:
        shutil.rmtree(leader.log_dir)
        shutil.copytree(copy / "x" / "epochlab-0", leader.log_dir)
        leader.reopen(clean=True)
        assert leader.end_offset_for_epoch(1) == (1, 5)
    finally:
        leader.close()
    assert [(r["start"], r["end"], r["agree"]) for r in report.ranges] == [(0, 5, True), (5, 8, False), (8, 9, False)]


def test_acknowledged_records_that_survive_nowhere(written: Path, tmp_path: Path) -> None:
    history = tmp_path / "acked.jsonl"
    history.write_text("\n".join(json.dumps(x) for x in [
        {"value": "e1-0"}, {"value": "e1-5", "offset": 5}, {"value": "e1-7"}, {"value": "e2-8"},
        {"value": "e2-5", "offset": 5}]) + "\n")
    report = compare_replicas(_replicas(written), acked=read_acked(history))
    assert report.acked_checked == 5
    assert [(a["value"], a["held_now_by"]) for a in report.acked_lost] == [("e1-5", ["broker-1"]), ("e1-7", ["broker-1"])]
    dirs = [str(d) for d in sorted((written / "replicas").iterdir())]
    assert main(["inspect", *dirs, "--acked", str(history)]) == 1


def test_cli_json_and_trace_round_trip(written: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pyarrow")
    dirs = [str(d) for d in sorted((written / "replicas").iterdir())]
    out = tmp_path / "replicas.parquet"
    assert main(["inspect", *dirs, "--json", "--trace", str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [d["name"] for d in doc["log_dirs"]] == ["broker-1", "broker-2", "broker-3"]
    (f,) = doc["forensics"]
    assert f["leader"] == "broker-2" and f["rejoin"][0]["kept_below"] == 5
    from epochlab.trace import replay

    report = replay(str(out))
    assert report.verdict == "ok", report
    assert main(["trace", "replay", str(out)]) == 0


def test_text_view_uses_dump_log_segments_words(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(FIXTURES / "logdir"), "--records", "--payload", "--partition", "epochlab-0"]) == 0
    text = capsys.readouterr().out
    assert "Log directory" in text and "(node 1)" in text
    assert "baseOffset: 20 lastOffset: 20 count: 1" in text and "endTxnMarker: COMMIT coordinatorEpoch: 5" in text
    assert "| offset: 0 CreateTime: 1764000000001 keySize: 2 valueSize: 6 sequence: -1 headerKeys: [h1,h2] key: k0 " \
           "payload: none-0" in text
    assert ".txnindex: version: 0 producerId: 3000 firstOffset: 21 lastOffset: 25 lastStableOffset: 26" in text
    assert "epochlab-1" not in text


# -- damaged files: typed problems naming the file and the byte offset, exit 2 -------------

def _copy_logdir(tmp_path: Path) -> Path:
    dst = tmp_path / "logdir"
    shutil.copytree(FIXTURES / "logdir", dst)
    return dst


def _segment(d: Path) -> Path:
    return d / "epochlab-0" / "00000000000000000015.log"


def test_bit_flip_is_a_crc_problem_at_the_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _copy_logdir(tmp_path)
    seg = _segment(d)
    data = bytearray(seg.read_bytes())
    data[70] ^= 0x10  # inside the first (uncompressed) batch's first record value
    seg.write_bytes(bytes(data))
    assert main(["inspect", str(d)]) == 2
    captured = capsys.readouterr()
    assert f"{seg} at byte 0" in captured.out and "CRC" in captured.out
    assert "isvalid: false" in captured.out


def test_cut_segment_keeps_the_batches_before(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _copy_logdir(tmp_path)
    seg = _segment(d)
    seg.write_bytes(seg.read_bytes()[:200])  # batches at 0 and 91 whole, the one at 182 cut
    view = read_log_dir(d)
    s = next(s for s in view.partitions["epochlab-0"].segments if s.file == str(seg))
    assert [b["base_offset"] for b in s.batches] == [15, 17]
    assert s.valid_bytes == 182 and s.error is not None and s.error.offset == 182
    assert main(["inspect", str(d)]) == 2
    assert f"{seg} at byte 182" in capsys.readouterr().err


def test_absurd_length_neither_allocates_nor_hangs(tmp_path: Path) -> None:
    """batchLength = 2^31-1 in the first batch, parsed under a 1 GiB address-space limit."""
    d = _copy_logdir(tmp_path)
    seg = _segment(d)
    data = bytearray(seg.read_bytes())
    data[8:12] = b"\x7f\xff\xff\xff"
    seg.write_bytes(bytes(data))
    script = textwrap.dedent(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from epochlab import _core
        dump = _core.parse_segment(open({str(seg)!r}, 'rb').read(), 'seg')
        print(dump['error']['offset'], len(dump['batches']))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "0"]


def test_damaged_checkpoint_and_snapshot_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _copy_logdir(tmp_path)
    (d / "epochlab-1" / "leader-epoch-checkpoint").write_text("0\n2\n2 0\n")
    snap = d / "epochlab-0" / "00000000000000000027.snapshot"
    data = bytearray(snap.read_bytes())
    data[-1] ^= 0xFF
    snap.write_bytes(bytes(data))
    view = read_log_dir(d)
    named = {Path(p.file).name for p in view.all_problems()}
    assert named == {"leader-epoch-checkpoint", snap.name}
    assert view.partitions["epochlab-1"].leader_epoch_checkpoint is None
    assert view.partitions["epochlab-1"].leader_epochs() == [(2, 0)]  # rebuilt from the batches
    assert main(["inspect", str(d)]) == 2


@pytest.mark.parametrize("line, why", [
    ("not json", "not JSON"), ("[1]", "expected an object"), ('{"key": "k"}', 'needs "value"'),
    ('{"value": 5}', "must be text"), ('{"value_hex": "zz"}', "not hexadecimal"),
    ('{"value": "a", "offset": -1}', "offset must be"),
])
def test_bad_history_file_is_exit_2_naming_the_line(tmp_path: Path, line: str, why: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    history = tmp_path / "acked.jsonl"
    history.write_text('{"value": "ok"}\n' + line + "\n")
    assert main(["inspect", str(FIXTURES / "logdir"), "--acked", str(history)]) == 2
    err = capsys.readouterr().err
    assert f"{history}:2" in err and why in err


def test_not_a_kafka_directory_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(tmp_path / "missing")]) == 2
    assert "not a directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["inspect", str(tmp_path / "empty")]) == 2
    assert "no Kafka partition directories" in capsys.readouterr().err


def test_hostile_files_are_problems_not_hangs(tmp_path: Path) -> None:
    """A FIFO under a checkpoint's name (reading it would block), a sparse 3 GiB segment (no
    Kafka segment exceeds 2^31-1 bytes), random bytes as a segment, a bad topic id."""
    import os

    part = tmp_path / "t-0"
    part.mkdir()
    os.mkfifo(part / "leader-epoch-checkpoint")
    with open(part / "00000000000000000000.log", "wb") as f:
        f.truncate(3 << 30)
    (part / "00000000000000000100.log").write_bytes(bytes(range(256)) * 20)
    (part / "partition.metadata").write_text("version: 0\ntopic_id: !!!\n")
    view = read_log_dir(tmp_path)
    reasons = {Path(p.file).name: (p.offset, p.reason) for p in view.all_problems()}
    assert reasons["leader-epoch-checkpoint"] == (None, "not a regular file")
    assert "larger than any Kafka file" in reasons["00000000000000000000.log"][1]
    assert reasons["00000000000000000100.log"][0] == 0
    assert reasons["partition.metadata"][0] is not None and "topic id" in reasons["partition.metadata"][1]
    assert main(["inspect", str(tmp_path)]) == 2
