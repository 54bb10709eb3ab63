"""Transactions in the simulator: coordinator, markers, LSO, read_committed,
fencing, KIP-890, their checker invariants (15, 20, 21, 26) and the fuzzer's transactional menu."""

from __future__ import annotations

import json

import pytest

import epochlab
from epochlab.checks import check_liveness, check_transactions
from epochlab.checks.liveness import hanging_transactions
from epochlab.checks.transactions import read_committed_view, transactions_from_history
from epochlab.fuzz import FuzzProfile, Schedule, execute, generate_schedule
from epochlab.sim import Cluster, ClusterConfig, ConsumerConfig, ProducerConfig

BACKENDS = ("rust", "reference")


def _ops(c: Cluster, process: str) -> list[tuple[str, str, object, str | None]]:
    return [(op.f, op.type, op.value, op.error) for op in c.history
            if op.process == process and op.f != "begin_txn"]


def _zombie_run(backend: str, generation: str) -> Cluster:
    c = Cluster(ClusterConfig(min_insync_replicas=2), generation, seed=3, backend=backend)
    old = c.producer("old", ProducerConfig(acks="all", transactional_id="tx", request_timeout_ms=3000))
    c.consumer("rc", ConsumerConfig(isolation_level="read_committed", auto_offset_reset="earliest"))
    old.begin_transaction(); old.send(10); old.commit_transaction()
    assert old.wait_for_transactions(5000)
    old.begin_transaction(); old.send(11); c.run_for(500)
    c.set_link("old", 1, delay_ms=(1000, 1000))
    old.send(12)
    c.run_for(100)
    new = c.producer("new", ProducerConfig(acks="all", transactional_id="tx"))
    new.begin_transaction(); new.send(20); new.commit_transaction()
    assert new.wait_for_transactions(10000)
    old.commit_transaction()
    c.run_for(10000)
    return c


@pytest.mark.parametrize("generation", ["kip-320", "strict-min-isr"])
def test_a_new_session_fences_the_zombie_with_structured_errors(generation: str) -> None:
    c = _zombie_run("rust", generation)
    ops = _ops(c, "old")
    assert ("send", "fail", 12, "INVALID_PRODUCER_EPOCH") in ops
    assert ("commit_txn", "fail", [11, 12], "INVALID_PRODUCER_EPOCH") in ops
    assert ("commit_txn", "ok", [20], None) in _ops(c, "new")
    polled = [v for op in c.history if op.process == "rc" and op.f == "poll" for _, v in op.value or ()]
    assert polled == []  # nobody polled yet
    log = c.brokers[c.controller.leader].replica.log
    assert sorted(read_committed_view(log).values()) == [10, 20]
    assert log.last_stable_offset == log.high_watermark


def test_transactional_runs_are_identical_on_every_backend() -> None:
    runs = {b: _zombie_run(b, "strict-min-isr") for b in BACKENDS}
    prints = {b: (c.history_jsonl(), json.dumps(c.state().to_dict(), sort_keys=True),
                  [str(e) for e in c.events]) for b, c in runs.items()}
    assert prints["rust"] == prints["reference"]


def _late_write(pre_kip890: bool) -> Cluster:
    """A transactional write delayed past the delivery timeout arrives after the abort."""
    c = Cluster(ClusterConfig(min_insync_replicas=2, transaction_pre_kip890=pre_kip890),
                "strict-min-isr", seed=5)
    t = c.producer("t", ProducerConfig(acks="all", transactional_id="tx", request_timeout_ms=2000,
                                       delivery_timeout_ms=5000))
    t.begin_transaction(); t.send(1); t.flush(5000)
    c.set_link("t", 1, delay_ms=(10000, 10000))
    t.send(2)
    c.run_for(3000)
    c.set_link("t", 1, delay_ms=(1, 5))
    t.commit_transaction()
    assert t.wait_for_transactions(20000)
    c.run_for(15000)
    return c


def test_pre_kip890_a_late_write_hangs_the_partition_then_joins_the_next_transaction() -> None:
    c = _late_write(pre_kip890=True)
    log = c.brokers[1].replica.log
    assert ("abort_txn", "ok", [1, 2], None) in _ops(c, "t")
    assert hanging_transactions(c) == [(2, log.ongoing_transactions()[0][1])]
    assert log.last_stable_offset < log.high_watermark
    assert [v.invariant for v in check_liveness(c, None, 0)] == ["Liveness-LSO"]
    t = c.clients["t"]
    t.begin_transaction(); t.send(3); t.commit_transaction()  # type: ignore[union-attr]
    assert t.wait_for_transactions(20000)  # type: ignore[union-attr]
    c.run_for(2000)
    assert sorted(read_committed_view(log).values()) == [2, 3]   # the aborted 2 is committed
    found = check_transactions([op.to_dict() for op in c.history], log,
                               {b: c.brokers[b].replica.log for b in c.brokers}, set(),
                               lambda _t: None, lambda _t: None, c.now_ms)
    assert [v.invariant for v in found] == ["Inv-TxnAtomicity"]


def test_kip890_verification_rejects_the_late_write() -> None:
    c = _late_write(pre_kip890=False)
    log = c.brokers[1].replica.log
    assert hanging_transactions(c) == [] and log.last_stable_offset == log.high_watermark
    assert 2 not in [v for b in log.batches() if not b.is_control for v in b.records]
    assert any("transaction verification rejects" in e.message or "INVALID_PRODUCER_EPOCH" in e.message
               for e in c.events)


def test_coordinator_restart_resumes_markers_with_a_new_coordinator_epoch() -> None:
    c = Cluster(ClusterConfig(min_insync_replicas=2), "strict-min-isr", seed=9)
    t = c.producer("t", ProducerConfig(acks="all", transactional_id="tx"))
    t.begin_transaction(); t.send(1); t.flush(5000)
    c.set_link("coordinator", 1, delay_ms=(3000, 3000))
    t.commit_transaction()
    c.run_until(lambda cl: cl.coordinator.ongoing() and cl.coordinator.log["tx"].state == "PrepareCommit", 5000)
    c.run_for(50)
    c.crash_coordinator()
    c.set_link("coordinator", 1, delay_ms=(1, 5))
    c.run_for(1000)
    c.restart_coordinator()
    c.run_for(10000)
    log = c.brokers[1].replica.log
    markers = [b for b in log.batches() if b.is_control]
    # the new coordinator's marker lands first; the old incarnation's delayed one is fenced
    assert [(m.control_type, m.coordinator_epoch) for m in markers] == [("commit", 1)]
    assert any("TRANSACTION_COORDINATOR_FENCED" in e.message for e in c.events)
    assert c.coordinator.log["tx"].state == "CompleteCommit"
    assert log.last_stable_offset == log.high_watermark
    assert not [v for v in check_transactions([op.to_dict() for op in c.history], log,
                                              {b: c.brokers[b].replica.log for b in c.brokers},
                                              set(), lambda _t: None, lambda _t: None, c.now_ms)]


def test_transaction_timeout_aborts_and_fences() -> None:
    c = Cluster(ClusterConfig(transaction_abort_timed_out_transaction_cleanup_interval_ms=500),
                "strict-min-isr", seed=2)
    t = c.producer("t", ProducerConfig(acks="all", transactional_id="tx", transaction_timeout_ms=2000))
    t.begin_transaction(); t.send(1); t.flush(5000)
    c.run_for(4000)
    t.commit_transaction()
    assert t.wait_for_transactions(5000)
    assert ("commit_txn", "fail", [1], "PRODUCER_FENCED") in _ops(c, "t")
    assert read_committed_view(c.brokers[1].replica.log) == {}


# -- checker: violating and non-violating states -----------------------------------------------

def _op(i: int, process: str, type_: str, f: str, value: object = None, error: str | None = None,
        offset: int | None = None) -> dict[str, object]:
    return {"index": i, "time_ms": i, "process": process, "type": type_, "f": f, "value": value,
            "offset": offset, "error": error, "acks": None}


def _history(outcome: str, polled: list[list[int]]) -> list[dict[str, object]]:
    end = "commit_txn" if outcome == "commit" else "abort_txn"
    return [_op(0, "t", "invoke", "begin_txn"), _op(1, "t", "ok", "begin_txn", 1),
            _op(2, "t", "invoke", "send", 5), _op(3, "t", "invoke", "send", 6),
            _op(4, "t", "invoke", end, [5, 6]), _op(5, "t", "ok", end, [5, 6]),
            _op(6, "rc", "invoke", "poll"), _op(7, "rc", "ok", "poll", polled)]


def _txn_log(core: object, commit: bool, extra_commit: bool = False) -> object:
    log = core.ReplicaLog()  # type: ignore[attr-defined]
    log.append_as_leader([5], 0, producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    log.append_as_leader([6], 0, producer_id=7, producer_epoch=0, base_sequence=1, is_transactional=True)
    log.append_end_txn_marker(7, 0, 0, commit, 0)
    if extra_commit:
        log.append_as_leader([8], 0, producer_id=7, producer_epoch=0, base_sequence=2, is_transactional=True)
        log.append_end_txn_marker(7, 0, 0, True, 0)
    log.update_high_watermark(log.log_end_offset)
    return log


def _check(history: list[dict[str, object]], log: object) -> list[str]:
    return [v.invariant for v in check_transactions(history, log, {1: log}, {"rc"},
                                                    lambda _t: None, lambda _t: None, 100)]


@pytest.mark.parametrize("core", [epochlab, epochlab.reference])
def test_checker_accepts_committed_and_aborted_transactions(core: object) -> None:
    assert _check(_history("commit", [[0, 5], [1, 6]]), _txn_log(core, True)) == []
    assert _check(_history("abort", []), _txn_log(core, False)) == []


@pytest.mark.parametrize("core", [epochlab, epochlab.reference])
def test_checker_flags_aborted_reads_and_broken_atomicity(core: object) -> None:
    # 15: a read_committed consumer got data of an aborted transaction
    assert "Inv-ReadCommittedOnly" in _check(_history("abort", [[0, 5]]), _txn_log(core, False))
    # 21: the client aborted, yet the log committed its writes (they moved into another txn)
    assert "Inv-TxnAtomicity" in _check(_history("abort", []), _txn_log(core, True))


@pytest.mark.parametrize("core", [epochlab, epochlab.reference])
def test_checker_flags_an_older_producer_epoch_after_a_bump(core: object) -> None:
    log = core.ReplicaLog()  # type: ignore[attr-defined]
    log.append_as_follower(core.RecordBatch(0, 0, [1], producer_id=7, producer_epoch=2,  # type: ignore[attr-defined]
                                            base_sequence=0, is_transactional=True))
    log.append_as_follower(core.RecordBatch(1, 0, [2], producer_id=7, producer_epoch=1,  # type: ignore[attr-defined]
                                            base_sequence=0, is_transactional=True))
    found = check_transactions([], None, {1: log}, set(), lambda _t: None, lambda _t: None, 0)
    assert [v.invariant for v in found] == ["Inv-ProducerFencing"]
    assert check_transactions([], None, {1: _txn_log(core, True)}, set(), lambda _t: None,
                              lambda _t: None, 0) == []


def test_transactions_from_history_follows_commit_failures_into_aborts() -> None:
    history = [_op(0, "t", "ok", "begin_txn", 1), _op(1, "t", "invoke", "send", 5),
               _op(2, "t", "invoke", "commit_txn", [5]),
               _op(3, "t", "fail", "commit_txn", [5], "TRANSACTION_ABORTABLE"),
               _op(4, "t", "invoke", "abort_txn", [5]), _op(5, "t", "ok", "abort_txn", [5])]
    history += [_op(6, "t", "ok", "begin_txn", 2), _op(7, "t", "info", "restart"),
                _op(8, "t", "ok", "begin_txn", 3), _op(9, "t", "invoke", "send", 6),
                _op(10, "t", "invoke", "commit_txn", [6]), _op(11, "t", "ok", "commit_txn", [6])]
    first, empty, last = transactions_from_history(history)
    assert (first.values, first.outcome) == ([5], "aborted")
    assert (empty.values, empty.outcome) == ([], "not-committed")
    assert (last.values, last.outcome) == ([6], "committed")


def test_an_end_with_no_transaction_open_ends_nothing() -> None:
    """A commit called while the previous transaction's abort is still under way finds nothing
    open and is refused at once; its refusal is not the answer of the transaction being
    aborted, and the abort's answer, coming later, is not the next transaction's. A guided
    search found the false alarm this was (Inv-TxnAtomicity and Inv-ReadCommittedOnly on a
    committed value): the six calls of ``g5-txn-commit-with-nothing-open.json``, no fault."""
    history = [_op(0, "t", "ok", "begin_txn", 1), _op(1, "t", "invoke", "abort_txn", []),
               _op(2, "t", "invoke", "commit_txn", []), _op(3, "t", "fail", "commit_txn", [], "INVALID_TXN_STATE"),
               _op(4, "t", "ok", "begin_txn", 2), _op(5, "t", "invoke", "send", 1),
               _op(6, "t", "invoke", "commit_txn", [1]), _op(7, "t", "ok", "abort_txn", []),
               _op(8, "t", "ok", "commit_txn", [1])]
    aborted, committed = transactions_from_history(history)
    assert (aborted.values, aborted.outcome) == ([], "aborted")
    assert (committed.values, committed.outcome) == ([1], "committed")
    from pathlib import Path

    from epochlab.fuzz.schedule import load_schedule

    schedule = load_schedule(Path(__file__).parent / "fixtures" / "schedules" / "g5-txn-commit-with-nothing-open.json")
    for backend in BACKENDS:
        run = execute(schedule, backend=backend)
        assert run.verdict.ok, run.verdict.protocol_violations
        assert [(op.f, op.type, op.error) for op in run.history
                if op.process == "t1" and op.f.endswith("_txn") and op.f != "begin_txn"] == [
            ("abort_txn", "invoke", None), ("commit_txn", "invoke", None), ("commit_txn", "fail", "INVALID_TXN_STATE"),
            ("commit_txn", "invoke", None), ("abort_txn", "ok", None), ("commit_txn", "ok", None)]


def test_a_commit_fenced_after_the_coordinator_took_it_has_an_unknown_outcome() -> None:
    """A guided-search finding, shrunk to 8 actions (``g5-txn-commit-fenced-after-the-coordinator-took-it.json``):
    t1's EndTxn(COMMIT) waits out a partition and times out on the client; the coordinator
    takes it when the partition heals (PrepareCommit, epoch bumped) and answers a request the
    client gave up; every retry is told CONCURRENT_TRANSACTIONS while the marker waits for the
    ISR. t2, the same ``transactional.id``, then bumps the epoch again, and t1's next retry is
    PRODUCER_FENCED: ``TransactionCoordinator.handleEndTransaction`` recognises a retry only
    by the epoch one below the current one. The transaction committed; the client cannot tell,
    so its history says ``info``, not ``fail``, and the checker counts it as maybe committed.
    The history said ``fail`` before, and the checker called the committed value a write that
    moved into another transaction (Inv-TxnAtomicity, Inv-ReadCommittedOnly): a false alarm."""
    from pathlib import Path

    from epochlab.fuzz.schedule import load_schedule

    schedule = load_schedule(Path(__file__).parent / "fixtures" / "schedules"
                             / "g5-txn-commit-fenced-after-the-coordinator-took-it.json")
    for backend in BACKENDS:
        run = execute(schedule, backend=backend)
        assert run.verdict.ok, run.verdict.protocol_violations
        ends = [(op.type, op.error) for op in run.history if op.process == "t1" and op.f == "commit_txn"]
        assert ends == [("invoke", None), ("info", "PRODUCER_FENCED")]
        final = run.final_state
        leader = final["replicas"][str(final["controller"]["leader"])]
        # it did commit: t1's value at offset 0, a COMMIT marker right after it, below the LSO
        assert leader["batches"][0][3] == [1] and leader["markers"][0][0::2] == [1, "commit"]
        assert leader["last_stable_offset"] > 1


def test_a_committed_read_whose_marker_a_permitted_loss_took_is_allowed() -> None:
    """A random-engine finding with eligible leader replicas off, shrunk to 11 actions
    (``g5-txn-committed-read-then-its-marker-lost.json``): t1 commits value 1 (offset 0, its
    COMMIT marker at 1) and rc reads it; the last ISR member then crashes losing its unflushed
    tail, the marker with it, and is elected again (KIP-966's problem, allowed with ELR off).
    t1's next transaction times out and the coordinator's ABORT marker lands at offset 1, so
    the final log marks the committed value aborted. Judged on that log, the read is allowed
    by the same loss as the rest of the run; the checker had called it a protocol violation
    because it took the allowance at the time of the read, before the crash."""
    from pathlib import Path

    from epochlab.fuzz.schedule import load_schedule

    schedule = load_schedule(Path(__file__).parent / "fixtures" / "schedules"
                             / "g5-txn-committed-read-then-its-marker-lost.json")
    for backend in BACKENDS:
        run = execute(schedule, backend=backend)
        assert run.verdict.ok, run.verdict.protocol_violations
        read = [v for v in run.verdict.allowed if v.invariant == "Inv-ReadCommittedOnly"]
        assert len(read) == 1 and "eligible leader replicas are off" in (read[0].reason or "")
        commits = [op for op in run.history if op.process == "t1" and op.f == "commit_txn"]
        crash = next(e for e in run.events if e["kind"] == "crash" and "lost 2 unflushed" in e["message"])
        assert [op.type for op in commits] == ["invoke", "ok"] and read[0].time_ms < crash["time_ms"]
        final = run.final_state
        leader = final["replicas"][str(final["controller"]["leader"])]
        # the committed value at offset 0, then an ABORT marker of the same producer
        assert leader["batches"][0][3] == [1] and leader["markers"][0][0::2] == [1, "abort"]


def test_liveness_lso_holds_after_a_clean_transaction() -> None:
    c = Cluster(ClusterConfig(), "strict-min-isr", seed=1)
    t = c.producer("t", ProducerConfig(acks="all", transactional_id="tx"))
    t.begin_transaction(); t.send(1); t.commit_transaction()
    assert t.wait_for_transactions(5000)
    c.run_for(1000)
    assert [v.invariant for v in check_liveness(c, None, 0)] == []


# -- fuzzer ----------------------------------------------------------------------------------

TXN_SIGNATURES = {"inv-txnatomicity", "inv-readcommittedonly", "liveness-lso", "inv-producerfencing"}


def test_transactional_schedules_are_version_2_and_version_1_still_reads() -> None:
    schedule = generate_schedule(4, "strict-min-isr", FuzzProfile(actions=30).with_transactions())
    data = schedule.to_dict()
    assert data["version"] == 2 and "rc" in data["consumers"]
    assert Schedule.from_json(schedule.to_json()).to_json() == schedule.to_json()
    plain = generate_schedule(4, "strict-min-isr", FuzzProfile(actions=30))
    assert plain.to_dict()["version"] == 1
    assert Schedule.from_dict({**plain.to_dict(), "version": 1}).to_json() == plain.to_json()
    with pytest.raises(epochlab.errors.ScheduleError):
        Schedule.from_dict({**data, "version": 1})


def test_modern_transactions_fuzz_clean_on_a_few_seeds() -> None:
    profile = FuzzProfile(actions=60).with_transactions()
    for seed in range(6):
        result = execute(generate_schedule(seed, "strict-min-isr", profile))
        assert not set(result.verdict.signatures()) & TXN_SIGNATURES, result.verdict.to_json()


def test_pre_kip890_fuzzing_finds_a_transactional_violation_within_a_small_budget() -> None:
    profile = FuzzProfile().with_transactions(pre_kip890=True)
    found = []
    for seed in PRE_KIP890_SEEDS:
        result = execute(generate_schedule(seed, "strict-min-isr", profile))
        found += sorted(set(result.verdict.signatures()) & TXN_SIGNATURES)
    assert found


#: Seeds where the pre-KIP-890 profile finds a violation (see docs/fuzzing.md, "Transactions").
PRE_KIP890_SEEDS = (163,)
