"""The model against Kafka's own classes (Kafka 4.3.1 from Maven Central, through JPype): the
same operation sequences on Kafka's LeaderEpochFileCache, the Rust core and the twin."""

from __future__ import annotations

import json
import subprocess
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochlab.kafka.differential import generate_ops, run_ops, shrink_ops
from epochlab.kafka.oracle import KafkaLeaderEpochCache

epochs = st.integers(0, 12)
offsets = st.integers(0, 60)
ops = st.lists(st.one_of(
    st.tuples(st.just("assign"), epochs, offsets),
    st.tuples(st.just("end_offset_for"), st.one_of(st.none(), st.just(-1), epochs), offsets),
    st.tuples(st.just("truncate_from_end"), offsets),
    st.tuples(st.just("truncate_from_start"), offsets),
    st.tuples(st.just("epoch_for_offset"), offsets),
    st.tuples(st.just("reload")),
    st.tuples(st.just("clear")),
), max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_epoch_cache_agrees_with_kafka(sequence):
    applied, mismatches, first = run_ops(sequence)
    assert mismatches == 0, first
    assert applied == len(sequence)


def test_a_seeded_run_agrees_with_kafka():
    import random

    sequence = generate_ops(random.Random(7), 1500)
    applied, mismatches, first = run_ops(sequence)
    assert (applied, mismatches) == (1500, 0), first


def test_kafka_answers_in_the_model_vocabulary(tmp_path):
    kafka = KafkaLeaderEpochCache(tmp_path)
    kafka.assign(1, 0)
    kafka.assign(3, 10)
    assert kafka.entries() == [(1, 0), (3, 10)]
    assert kafka.end_offset_for(2, 20) == (1, 10)
    assert kafka.end_offset_for(-1, 20) is None  # UNDEFINED_EPOCH -> UNDEFINED_EPOCH_OFFSET
    assert kafka.end_offset_for(None, 20) is None
    assert kafka.epoch_for_offset(12) == 3
    kafka.truncate_from_end(10)
    assert kafka.reload() == [(1, 0)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n1\n1 0\n"


def test_shrinking_keeps_a_failing_subsequence():
    sequence = [("assign", i, i) for i in range(20)]
    minimal = shrink_ops(sequence, lambda s: ("assign", 7, 7) in s and ("assign", 3, 3) in s)
    assert sorted(minimal) == [("assign", 3, 3), ("assign", 7, 7)]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "epochlab", "kafka", *args],
                          capture_output=True, text=True, check=False)


def test_cli_differential_json_and_exit_codes():
    done = _cli("differential", "--ops", "400", "--seed", "3", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    component = report["components"]["leader-epoch-cache"]
    assert (component["ops"], component["mismatches"], component["first"]) == (400, 0, None)
    assert _cli("differential", "--ops", "0").returncode == 2
    assert _cli("differential", "--component", "nope").returncode == 2


def test_replica_log_agrees_with_kafkas_unified_log():
    import random

    from epochlab.kafka.differential import generate_log_ops

    sequence = generate_log_ops(random.Random(11), 600)
    applied, mismatches, first = run_ops(sequence, component="replica-log")
    assert mismatches == 0, first
    assert applied > 500


log_values = st.lists(st.integers(0, 999), min_size=1, max_size=3).map(tuple)
producers = st.one_of(st.none(), st.tuples(st.sampled_from((7, 8)), st.integers(0, 2), st.integers(0, 8)))
log_ops = st.lists(st.one_of(
    st.tuples(st.just("append_as_leader"), log_values, st.integers(0, 4), producers),
    st.tuples(st.just("append_as_follower"), st.integers(0, 30), st.integers(0, 4), log_values),
    st.tuples(st.just("truncate_to"), st.integers(0, 30)),
    st.tuples(st.just("truncate_fully_and_start_at"), st.integers(0, 30)),
    st.tuples(st.just("update_high_watermark"), st.integers(0, 30)),
    st.tuples(st.just("end_offset_for_epoch"), st.integers(0, 5)),
    st.tuples(st.just("reopen"), st.booleans()),
), max_size=25)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log_ops)
def test_replica_log_agrees_with_kafka_on_any_sequence(sequence):
    applied, mismatches, first = run_ops(sequence, component="replica-log")
    assert mismatches == 0, first


def test_kafka_unified_log_in_the_model_vocabulary(tmp_path):
    from epochlab.kafka.oracle import KafkaUnifiedLog

    log = KafkaUnifiedLog(tmp_path)
    try:
        assert log.append_as_leader((1, 2), 0, None) == (0, 1)
        assert log.append_as_leader((3,), 1, (7, 0, 0)) == (2, 2)
        assert log.append_as_leader((3,), 1, (7, 0, 0)) == (2, 2)      # a duplicate
        assert log.append_as_leader((4,), 1, (7, 0, 5)) == "OUT_OF_ORDER_SEQUENCE_NUMBER"
        assert log.append_as_follower(1, 1, (9,), None) == "UNEXPECTED_APPEND_OFFSET"
        assert log.epoch_entries() == [(0, 0), (1, 2)]
        assert log.end_offset_for_epoch(0) == (0, 2)
        log.reopen(clean=False)
        assert (log.log_end_offset(), log.epoch_entries()) == (3, [(0, 0), (1, 2)])
    finally:
        log.close()
