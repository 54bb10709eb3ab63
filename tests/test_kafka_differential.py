"""The model against Kafka's own classes (Kafka 4.3.1 from Maven Central, through JPype): the
same operation sequences on Kafka's LeaderEpochFileCache, the Rust core and the twin."""

from __future__ import annotations

import json
import subprocess
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochlab.kafka.classes.differential import (COMPONENTS, check_keep_data, generate_ops, run_component, run_ops,
                                                 shrink_ops)
from epochlab.kafka.classes.oracle import KafkaLeaderEpochCache

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
    done = _cli("differential", "--ops", "400", "--seed", "3", "--component", "leader-epoch-cache", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    component = report["components"]["leader-epoch-cache"]
    assert (component["ops"], component["mismatches"], component["first"]) == (400, 0, None)
    assert _cli("differential", "--ops", "0").returncode == 2
    # producer-state agrees since the snapshot bugs were fixed (it exited 1 with them).
    done = _cli("differential", "--ops", "300", "--seed", "1", "--component", "producer-state", "--json")
    component = json.loads(done.stdout)["components"]["producer-state"]
    assert done.returncode == 0 and (component["mismatches"], component["minimal"]) == (0, []), done.stdout
    assert _cli("differential", "--component", "nope").returncode == 2


def test_replica_log_agrees_with_kafkas_unified_log():
    import random

    from epochlab.kafka.classes.differential import generate_log_ops

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
    from epochlab.kafka.classes.oracle import KafkaUnifiedLog

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


def test_replica_log_runs_faster_than_a_disk():
    """Kafka's files go to memory where the machine has it (/dev/shm): same code, no fsync wait."""
    from epochlab.kafka.classes.oracle import scratch_directory

    directory = scratch_directory()
    try:
        assert directory.is_dir()
    finally:
        directory.rmdir()


# -- producer-state: UnifiedLog's ProducerStateManager against ReplicaLog's producer state --------

def test_producer_state_agrees_with_kafka():
    import random

    from epochlab.kafka.classes.differential import generate_producer_ops

    sequence = generate_producer_ops(random.Random(5), 800)
    applied, mismatches, first = run_ops(sequence, component="producer-state")
    assert mismatches == 0, first
    assert applied > 700


def test_producer_state_compares_every_entry(tmp_path):
    from epochlab.kafka.classes.oracle import KafkaUnifiedLog

    log = KafkaUnifiedLog(tmp_path)
    try:
        assert log.append_as_leader((1, 2), 0, (7, 0, 0)) == (0, 1)
        assert log.append_as_leader((3,), 0, (7, 0, 2)) == (2, 2)
        assert log.append_as_leader((4,), 0, (7, 0, 0)) == "OUT_OF_ORDER_SEQUENCE_NUMBER"  # retry, wrong length
        assert log.append_as_leader((4,), 0, (7, 1, 3)) == "OUT_OF_ORDER_SEQUENCE_NUMBER"  # new epoch, not 0
        assert log.append_as_leader((4,), 0, (8, 0, 9)) == (3, 3)                          # unknown: any sequence
        assert log.producer_entries() == ((7, 0, ((0, 1, 0, 1), (2, 2, 2, 2)), None), (8, 0, ((9, 9, 3, 3),), None))
        log.take_snapshot()
        assert (tmp_path / "epochlab-0" / "00000000000000000004.snapshot").exists()
    finally:
        log.close()


#: Kafka's snapshot keeps each producer's last batch; so does the model's since the fix.
SNAPSHOT_LAST_BATCH = [("append_as_leader", (1,), 0, (7, 0, 0)), ("append_as_leader", (2,), 0, (7, 0, 1)),
                       ("reopen", True), ("append_as_leader", (1,), 0, (7, 0, 0))]


def test_a_restart_reloads_the_last_batch_only_as_in_kafka():
    """Was KNOWN_MODEL_BUGS["snapshot-last-batch"]: after ``reopen`` both keep the snapshot's
    last batch only, so the retry of the first batch is OUT_OF_ORDER_SEQUENCE_NUMBER in both."""
    import epochlab

    applied, mismatches, first = run_ops(SNAPSHOT_LAST_BATCH, component="producer-state")
    assert (applied, mismatches) == (4, 0), first
    log = epochlab.ReplicaLog()
    log.append_as_leader([1], 0, producer_id=7, producer_epoch=0, base_sequence=0)
    log.append_as_leader([2], 0, producer_id=7, producer_epoch=0, base_sequence=1)
    log.take_producer_snapshot()
    log.reload(True)
    import pytest

    with pytest.raises(epochlab.errors.OutOfOrderSequenceError):
        log.append_as_leader([1], 0, producer_id=7, producer_epoch=0, base_sequence=0)


#: A rebuild from a snapshot merges the replay into the snapshot's entries: producer 7's epoch
#: goes 1 (snapshot) -> 2 -> 1 (a replicated older epoch) before the truncation's target.
EPOCH_MERGE = [("append_as_leader", (1,), 0, (7, 0, None)), ("append_as_leader", (1,), 0, (7, 1, 0)),
               ("take_snapshot",), ("append_as_leader", (1,), 0, (7, 2, 0)),
               ("append_as_follower", None, 0, (1,), (7, 1, 5)), ("append_as_leader", (1,), 0, None),
               ("truncate_to", 4), ("append_as_leader", (2,), 0, (7, 1, 1))]


def test_a_rebuild_merges_the_replay_into_the_snapshot_as_in_kafka():
    """Was KNOWN_MODEL_BUGS["snapshot-epoch-merge"]: Kafka replays the log after the snapshot
    into one ProducerAppendInfo per producer and merges it (UnifiedLog.loadProducersFromRecords,
    ProducerStateEntry.update): the final epoch equals the snapshot's, so the snapshot's epoch-1
    batch stays before the replayed one, and a retry of it is a duplicate."""
    import epochlab

    applied, mismatches, first = run_ops(EPOCH_MERGE, component="producer-state")
    assert (applied, mismatches) == (len(EPOCH_MERGE), 0), first
    for module in (epochlab, epochlab.reference):
        log = module.ReplicaLog()
        log.append_as_leader([1], 0, producer_id=7, producer_epoch=0, base_sequence=0)
        log.append_as_leader([1], 0, producer_id=7, producer_epoch=1, base_sequence=0)
        log.take_producer_snapshot()
        log.append_as_leader([1], 0, producer_id=7, producer_epoch=2, base_sequence=0)
        log.append_as_follower(module.RecordBatch(3, 0, [1], producer_id=7, producer_epoch=1, base_sequence=5))
        log.append_as_leader([1], 0)
        log.truncate_to(4)
        assert [(b[2], b[3]) for b in log.producer_state().entry(7)[1]] == [(1, 1), (3, 3)], module


def test_an_unclean_restart_replays_the_log_then_loads_its_snapshot_as_in_kafka():
    """After an unclean shutdown LogLoader.recoverSegment deletes every snapshot, replays the
    whole segment and snapshots it at the end; the broker's manager loads that snapshot: one
    batch per producer, whatever older snapshot existed."""
    sequence = [("append_as_leader", (1,), 0, (7, 0, 0)), ("take_snapshot",),
                ("append_as_leader", (2,), 0, (7, 0, 1)), ("append_as_leader", (3,), 0, (7, 0, 2)),
                ("truncate_to", 2), ("reopen", False), ("append_as_leader", (2,), 0, (7, 0, 1)),
                ("append_as_leader", (1,), 0, (7, 0, 0))]
    applied, mismatches, first = run_ops(sequence, component="producer-state")
    assert (applied, mismatches) == (len(sequence), 0), first


def test_a_refused_marker_still_assigns_its_leader_epoch_as_in_kafka():
    """Was KNOWN_MODEL_BUGS["refused-marker-epoch"]: UnifiedLog.append assigns the batch's
    leader epoch before it validates the producer, so a fenced marker moves the epoch cache."""
    import pytest

    import epochlab

    sequence = [("append_as_leader", (1,), 0, (7, 1, 0), True), ("end_txn_marker", 7, 0, 0, True, 3, 0)]
    applied, mismatches, first = run_ops(sequence, component="transactions")
    assert (applied, mismatches) == (2, 0), first
    for module in (epochlab, epochlab.reference):
        log = module.ReplicaLog()
        log.append_as_leader([1], 0, producer_id=7, producer_epoch=1, base_sequence=0, is_transactional=True)
        with pytest.raises(epochlab.errors.InvalidProducerEpochError):
            log.append_end_txn_marker(7, 0, 0, True, 3)
        assert [tuple(e) for e in log.epoch_entries()] == [(0, 0), (3, 1)], module


def test_a_planted_disagreement_is_caught(monkeypatch):
    """A model that forgets the cached batches of producer 7 on every append disagrees at once."""
    from epochlab.kafka.classes import differential

    real = differential._producer_rows

    def forgetful(log):
        rows = real(log)
        if isinstance(log, differential._LogModel):
            rows = tuple((pid, epoch, batches[-1:] if pid == 7 else batches, c) for pid, epoch, batches, c in rows)
        return rows

    monkeypatch.setattr(differential, "_producer_rows", forgetful)
    sequence = [("append_as_leader", (1,), 0, (7, 0, 0)), ("append_as_leader", (2,), 0, (7, 0, 1))]
    applied, mismatches, first = run_ops(sequence, component="producer-state")
    assert (mismatches, first["index"]) == (1, 1)


# -- transactions: LSO, first unstable offset, aborted transactions -------------------------------

def test_transactions_agree_with_kafka():
    import random

    from epochlab.kafka.classes.differential import generate_txn_ops

    sequence = generate_txn_ops(random.Random(9), 800)
    applied, mismatches, first = run_ops(sequence, component="transactions")
    assert mismatches == 0, first
    assert applied > 600


def test_kafka_transactions_in_the_model_vocabulary(tmp_path):
    from epochlab.kafka.classes.oracle import KafkaUnifiedLog

    log = KafkaUnifiedLog(tmp_path)
    try:
        assert log.append_as_leader((1,), 0, (7, 0, 0), transactional=True) == (0, 0)
        assert log.append_as_leader((2,), 0, (8, 0, 0), transactional=True) == (1, 1)
        assert log.append_as_leader((3,), 0, (7, 0, 1)) == "INVALID_TXN_STATE"
        assert log.append_end_txn_marker(7, 0, 3, False, 0) == (2, 2)
        assert log.append_end_txn_marker(7, 0, 2, True, 0) == "TRANSACTION_COORDINATOR_FENCED"
        assert (log.producer_first_unstable_offset(), log.first_undecided_offset()) == (0, 1)
        assert log.update_high_watermark(3) == 3
        assert (log.producer_first_unstable_offset(), log.last_stable_offset()) == (1, 1)
        assert log.aborted_transactions(0, 10) == [(7, 0, 2, 1)]
        assert log.producer_entries()[0] == (7, 0, ((0, 0, 0, 0),), 3)
    finally:
        log.close()


def test_an_empty_transaction_marker_ends_nothing_as_in_kafka():
    """Found by this differential and fixed in both implementations: a marker of a producer
    with no transaction ongoing is no unstable offset and no aborted entry
    (``ProducerAppendInfo.appendEndTxnMarker``)."""
    sequence = [("end_txn_marker", 7, 1, 1, False, 0, 2), ("end_txn_marker", 7, 1, 1, True, 0, 2)]
    applied, mismatches, first = run_ops(sequence, component="transactions")
    assert (applied, mismatches) == (2, 0), first


def test_a_restart_forgets_unreplicated_transactions_as_in_kafka():
    """Was KNOWN_MODEL_BUGS["snapshot-forgets-unreplicated"]: the snapshot ``reopen`` reloads
    holds no ended transaction, in Kafka and in the model."""
    sequence = [("append_as_leader", (1,), 0, (7, 0, 0), True), ("end_txn_marker", 7, 0, 1, True, 0, 0),
                ("reopen", True)]
    applied, mismatches, first = run_ops(sequence, component="transactions")
    assert (applied, mismatches) == (3, 0), first


def test_a_transaction_the_hw_passed_stays_forgotten_when_the_hw_goes_back():
    """ProducerStateManager.onHighWatermarkUpdated forgets an ended transaction once the HW
    passes its marker; a HW going back (a follower taking a new leader's lower HW) does not
    make it unstable again, in Kafka and in both models."""
    import epochlab

    sequence = [("append_as_leader", (1,), 0, (7, 0, 0), True), ("end_txn_marker", 7, 0, 0, True, 0, 0),
                ("append_as_leader", (2,), 0, None), ("update_high_watermark", 3), ("update_high_watermark", 1)]
    applied, mismatches, first = run_ops(sequence, component="transactions")
    assert (applied, mismatches) == (len(sequence), 0), first
    for module in (epochlab, epochlab.reference):
        log = module.ReplicaLog()
        log.append_as_leader([1], 0, producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
        log.append_end_txn_marker(7, 0, 0, True, 0)
        log.append_as_leader([2], 0)
        log.update_high_watermark(1)
        assert log.first_unstable_offset == 0, module
        log.update_high_watermark(3)
        log.update_high_watermark(1)
        assert (log.first_unstable_offset, log.last_stable_offset) == (None, 1), module


producer_fields = st.tuples(st.sampled_from((7, 8)), st.integers(0, 2), st.integers(0, 8))
producer_ops = st.lists(st.one_of(
    st.tuples(st.just("append_as_leader"), log_values, st.integers(0, 2), st.one_of(st.none(), producer_fields)),
    st.tuples(st.just("append_as_follower"), st.integers(0, 20), st.integers(0, 2), log_values, producer_fields),
    st.tuples(st.just("take_snapshot")),
    st.tuples(st.just("truncate_to"), st.integers(0, 20)),
    st.tuples(st.just("reopen"), st.booleans()),
), max_size=20)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(producer_ops)
def test_producer_state_agrees_with_kafka_on_any_sequence(sequence):
    applied, mismatches, first = run_ops(sequence, component="producer-state")
    assert mismatches == 0, first


txn_ops = st.lists(st.one_of(
    st.tuples(st.just("append_as_leader"), log_values, st.just(0), producer_fields, st.booleans()),
    st.tuples(st.just("end_txn_marker"), st.sampled_from((7, 8)), st.integers(0, 2), st.integers(0, 2),
              st.booleans(), st.just(0), st.sampled_from((0, 2))),
    st.tuples(st.just("update_high_watermark"), st.integers(0, 20)),
    st.tuples(st.just("truncate_to"), st.integers(0, 20)),
    st.tuples(st.just("reopen"), st.booleans()),
), max_size=20)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(txn_ops)
def test_transactions_agree_with_kafka_on_any_sequence(sequence):
    applied, mismatches, first = run_ops(sequence, component="transactions")
    assert mismatches == 0, first


# -- producer-state-manager: Kafka's bare ProducerStateManager against epochlab.ProducerStateManager --

def test_the_bare_producer_state_manager_agrees_with_kafka():
    import random

    from epochlab.kafka.classes.differential import generate_manager_ops

    sequence = generate_manager_ops(random.Random(4), 1500)
    applied, mismatches, first = run_ops(sequence, component="producer-state-manager")
    assert (applied, mismatches) == (1500, 0), first


def test_kafka_producer_state_manager_in_the_model_vocabulary(tmp_path):
    from epochlab.kafka.classes.oracle import KafkaProducerStateManager

    kafka = KafkaProducerStateManager(tmp_path)
    try:
        assert kafka.append(7, 0, 0, 2, "client") is None
        assert kafka.append(7, 0, 0, 2, "client") == (0, 1)                          # findDuplicateBatch
        assert kafka.append(7, 0, 5, 1, "client") == "OUT_OF_ORDER_SEQUENCE_NUMBER"
        assert kafka.append(7, 1, 3, 1, "client") == "OUT_OF_ORDER_SEQUENCE_NUMBER"  # new epoch, not 0
        assert kafka.append(9, 0, 2**31 - 1, 2, "client") is None                     # wraps to 0
        assert kafka.append(9, 0, 1, 1, "client") is None
        assert kafka.append(7, 0, 9, 1, "replication") is None                         # unchecked
        kafka.skip(3)
        assert kafka.append_marker(7, 1, 4, True) is None
        assert kafka.entries() == ((7, 1, (), 4), (9, 0, ((2**31 - 1, 0, 2, 3), (1, 1, 4, 4)), None))
        assert kafka.map_end_offset() == 10
    finally:
        kafka.close()


manager_ops = st.lists(st.one_of(
    st.tuples(st.just("append"), st.sampled_from((7, 8)), st.integers(0, 2), st.integers(0, 8), st.integers(1, 3),
              st.sampled_from(("client", "replication"))),
    st.tuples(st.just("marker"), st.sampled_from((7, 8)), st.integers(0, 2), st.integers(0, 2), st.booleans()),
    st.tuples(st.just("skip"), st.integers(1, 3)),
), max_size=30)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(manager_ops)
def test_the_bare_producer_state_manager_agrees_on_any_sequence(sequence):
    applied, mismatches, first = run_ops(sequence, component="producer-state-manager")
    assert mismatches == 0, first


def test_relative_offsets_and_sequences_resolve_from_kafkas_view():
    from epochlab.kafka.classes.differential import _resolve

    view = (0, 12, 10, ((0, 0),), ((7, 0, ((0, 1, 8, 9),), None),))
    sent: dict[int, list[tuple[int, int]]] = {}
    assert _resolve(("append_as_follower", None, 0, (1,), (7, 0, None)), view, sent) == \
        ("append_as_follower", 12, 0, (1,), (7, 0, 2))
    assert _resolve(("append_as_leader", (1,), 0, (7, 0, -2)), view, sent) == ("append_as_leader", (1,), 0, (7, 0, 4))
    assert _resolve(("append_as_leader", (5,), 0, (7, 0, ("retry", 2))), view, sent) == \
        ("append_as_leader", (5,), 0, (7, 0, 2))
    assert _resolve(("append_as_leader", (1,), 0, (7, 1, None)), view, sent)[3] == (7, 1, 0)   # new epoch


#: The files of a partition directory ``DumpLogSegments`` reads (``--verify-with-kafka``).
_DUMPED = {".log", ".index", ".timeindex", ".txnindex", ".snapshot"}


def _checkpoint_entries(path):
    """The entries of a leader-epoch-checkpoint file read by hand (CheckpointFile: the
    version line, the count line, then one "epoch offset" line per entry)."""
    version, count, *lines = path.read_text().splitlines()
    assert version == "0" and int(count) == len(lines)
    return [[int(e), int(o)] for e, o in (line.split() for line in lines)]


def test_kept_data_of_every_component_reads_back_with_inspect(tmp_path):
    """``--keep-data DIR`` keeps what Kafka's classes wrote for every component, each sequence
    in a log directory holding partition ``epochlab-0`` as a broker's would, and ``epochlab
    inspect --verify-with-kafka`` reads every kept sequence as Kafka's own DumpLogSegments does:
    the same batches, records, index entries, producer snapshots and aborted transactions, the
    epoch checkpoint as the file says, one snapshot per snapshot file."""
    keep = tmp_path / "kept"
    done = subprocess.run([sys.executable, "-m", "epochlab", "kafka", "differential", "--ops", "2500", "--seed", "5",
                           "--json", "--keep-data", str(keep)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    components = json.loads(done.stdout)["components"]
    assert set(components) == set(COMPONENTS)
    assert all(c["mismatches"] == 0 for c in components.values()), components
    for name in COMPONENTS:
        sequences = sorted((keep / name).iterdir())
        assert [s.name for s in sequences] == ["sequence-00000", "sequence-00001"], name  # chunks of 2000
        for log_dir in sequences:
            part = log_dir / "epochlab-0"
            shown = subprocess.run([sys.executable, "-m", "epochlab", "inspect", str(log_dir), "--json",
                                    "--verify-with-kafka"], capture_output=True, text=True, timeout=300)
            assert shown.returncode == 0, (name, log_dir.name, shown.stderr[-2000:])
            data = json.loads(shown.stdout)
            [directory] = data["log_dirs"]
            partition = directory["partitions"]["epochlab-0"]
            where = (name, log_dir.name)
            assert data["problems"] == [] and directory["problems"] == [] and partition["problems"] == [], where
            assert partition["other_files"] == [], where
            [verified] = data["verify_with_kafka"]
            dumped = [f for f in part.iterdir() if f.suffix in _DUMPED]
            assert verified["disagreements"] == [] and verified["files"] == len(dumped), (where, verified)
            assert bool(dumped) == (name != "leader-epoch-cache"), where  # the cache writes its checkpoint only
            checkpoint = part / "leader-epoch-checkpoint"
            expected = _checkpoint_entries(checkpoint) if checkpoint.exists() else None
            assert partition["leader_epoch_checkpoint"] == expected, where
            snapshots = sorted(int(f.stem) for f in part.glob("*.snapshot"))
            assert sorted(int(k) for k in partition["producer_snapshots"]) == snapshots, where
            assert all(s["crc_valid"] for s in partition["producer_snapshots"].values()), where
            if name == "leader-epoch-cache":
                assert expected, where  # the cache's only file
                assert not partition["segments"] and not snapshots, where
            elif name == "producer-state-manager":
                assert snapshots and not partition["segments"], where
                # the manager appends data batches of producers: its snapshots name them
                assert any(s["entries"] for s in partition["producer_snapshots"].values()), where
            else:
                segments = partition["segments"]
                assert segments and partition["log_end_offset"] > 0, where
                if name == "transactions":  # the aborted transactions of the .txnindex
                    assert any(seg["aborted_txns"] for seg in segments), where


def test_kept_data_directory_of_an_earlier_run_is_refused(tmp_path):
    """A ``--keep-data`` directory already holding a component's files is refused up front
    (exit 2, naming it): Kafka's classes would load them as their own state
    (ProducerStateManager.loadSnapshots), which gave mismatches, or NoSuchFileException on a
    snapshot file already deleted. Nothing in it is touched."""
    keep = tmp_path / "kept"
    old = keep / "producer-state-manager" / "sequence-00000" / "epochlab-0" / "00000000000000000001.snapshot"
    old.parent.mkdir(parents=True)
    old.write_bytes(b"from an earlier run")
    for extra in ([], ["--generation", "kip-101"]):
        component = "leader-epoch-cache" if extra else "producer-state-manager"
        if extra:
            (keep / component).mkdir()
            (keep / component / "sequence-00000").mkdir()
        done = subprocess.run([sys.executable, "-m", "epochlab", "kafka", "differential", "--ops", "50", *extra,
                               "--keep-data", str(keep)], capture_output=True, text=True, timeout=300)
        assert done.returncode == 2, done.stderr
        assert f"{keep / component} already holds files of an earlier run" in done.stderr
    assert old.read_bytes() == b"from an earlier run"
    # an absent or empty directory, or another component's, is accepted
    check_keep_data(tmp_path / "absent", COMPONENTS)
    check_keep_data(keep, ["replica-log", "transactions"])
    import pytest

    from epochlab.errors import ConfigError

    with pytest.raises(ConfigError, match="producer-state-manager already holds"):
        run_component("producer-state-manager", 10, 1, keep_data=keep)

