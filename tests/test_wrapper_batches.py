"""Message format v0/v1 compressed wrappers (the model's G0): a follower checks only a
wrapper's own, last, offset, so a wrapper whose inner offsets start below its log end offset is
taken whole and the log holds those offsets twice (KAFKA-3919); a truncation inside a wrapper
removes it whole and leaves a hole. Scenario ``kafka-3919-wrapper-below-log-end``."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import epochlab
import epochlab.reference as reference
from epochlab.checks import catalogue
from epochlab.errors import UnexpectedAppendOffsetError
from epochlab.fuzz import execute
from epochlab.fuzz.generator import FuzzProfile, generate_schedule
from epochlab.fuzz.rerun import export_run_dir
from epochlab.fuzz.schedule import Schedule
from epochlab.generations import Generation
from epochlab.scenarios import load_builtin
from epochlab.scenarios.runner import run_scenario
from epochlab.trace.reference import reference_replay
from epochlab.trace.replay import replay

ROOT = Path(__file__).resolve().parents[1]
NAME = "kafka-3919-wrapper-below-log-end"
CORES = [epochlab, reference]
HOLE = ROOT / "tests" / "fixtures" / "schedules" / "g0-wrapper-truncation-hole.json"


def _leader_log(core, sizes_and_epochs):
    log = core.ReplicaLog()
    value = 100
    for size, epoch in sizes_and_epochs:
        log.append_as_leader(list(range(value, value + size)), epoch)
        value += size
    return log


@pytest.mark.parametrize("core", CORES, ids=["rust", "reference"])
def test_a_wrapper_below_the_log_end_is_taken_whole_and_the_first_copy_is_what_readers_find(core) -> None:
    follower = core.ReplicaLog(wrapper_batches=True)
    follower.append_as_leader([1, 2, 3], 0)
    follower.append_as_leader([4, 5, 6, 7, 8], 0)
    leader = _leader_log(core, [(3, 0), (7, 1)])  # offsets 0-2, then 3-9 in epoch 1
    batches = leader.read(8)
    assert [(b.base_offset, b.last_offset) for b in batches] == [(3, 9)]
    assert follower.append_batches_as_follower(batches) == 10
    assert [list(b.records) for b in follower.batches()] == [[1, 2, 3], [4, 5, 6, 7, 8], list(range(103, 110))]
    assert follower.value_at(5) == 6  # the first wrapper holding offset 5
    assert follower.value_at(8) == 108
    assert follower.batch_containing(7).last_offset == 7
    assert [b.last_offset for b in follower.read(4)] == [7, 9]
    assert follower.holes() == []
    # a truncation drops every wrapper whose last offset reaches the target
    assert follower.truncate_to(8)
    assert [b.last_offset for b in follower.batches()] == [2, 7]
    assert follower.log_end_offset == 8


@pytest.mark.parametrize("core", CORES, ids=["rust", "reference"])
def test_the_wrapper_check_refuses_a_wrapper_ending_below_the_log_end(core) -> None:
    follower = core.ReplicaLog(wrapper_batches=True)
    follower.append_as_leader([1, 2, 3, 4], 0)
    stale = _leader_log(core, [(2, 0)]).read(0)
    with pytest.raises(UnexpectedAppendOffsetError) as info:
        follower.append_batches_as_follower(stale)
    assert (info.value.first_offset, info.value.log_end_offset) == (1, 4)
    assert "out of order offsets" in str(info.value)
    assert follower.log_end_offset == 4 and follower.batch_count == 1  # nothing appended


@pytest.mark.parametrize("core", CORES, ids=["rust", "reference"])
def test_a_wrapper_past_the_log_end_leaves_a_gap_and_v2_refuses_both(core) -> None:
    source = _leader_log(core, [(3, 0), (3, 0)])
    follower = core.ReplicaLog(wrapper_batches=True)
    follower.append_as_leader([1], 0)  # LEO 1; the source's second wrapper starts at 3
    follower.append_batches_as_follower(source.read(3))
    assert follower.log_end_offset == 6 and follower.holes() == [(1, 3)]
    v2 = core.ReplicaLog()
    v2.append_as_leader([1], 0)
    with pytest.raises(UnexpectedAppendOffsetError):
        v2.append_batches_as_follower(source.read(3))
    with pytest.raises(UnexpectedAppendOffsetError):
        v2.append_batches_as_follower(source.read(0))


@pytest.mark.parametrize("core", CORES, ids=["rust", "reference"])
def test_the_flag_is_a_bool_and_survives_a_copy(core) -> None:
    with pytest.raises(TypeError):
        core.ReplicaLog(wrapper_batches="yes")
    log = core.ReplicaLog(wrapper_batches=True)
    assert log.wrapper_batches and log.copy().wrapper_batches
    assert not core.ReplicaLog().wrapper_batches


def test_only_g0_has_wrappers() -> None:
    assert [g.label for g in Generation if g.wrapper_batches] == ["hw-truncation"]


def _snapshot(log) -> tuple:
    return ([(b.base_offset, tuple(b.records), b.partition_leader_epoch) for b in log.batches()],
            log.log_end_offset, log.holes(),
            [log.value_at(o) for o in range(log.log_end_offset + 1)])


def test_rust_and_reference_agree_on_random_wrapper_histories() -> None:
    """Random leader appends, wrapper fetches between two replicas that lead in turn, and
    truncations: both logs the same after every step, in both cores."""
    rng = random.Random(3919)
    for trial in range(60):
        logs = {core: [core.ReplicaLog(wrapper_batches=True) for _ in range(2)] for core in CORES}
        epoch, value = 0, 0
        for _step in range(40):
            op = rng.choice(("append", "append", "fetch", "fetch", "truncate", "lead"))
            leader = epoch % 2
            size, cut = rng.randint(1, 5), rng.random()
            results = []
            for core in CORES:
                a, b = logs[core][leader], logs[core][1 - leader]
                try:
                    if op == "append":
                        a.append_as_leader(list(range(value, value + size)), epoch)
                    elif op == "fetch":
                        b.append_batches_as_follower(a.read(min(b.log_end_offset, a.log_end_offset)))
                    elif op == "truncate":
                        b.truncate_to(int(cut * (b.log_end_offset + 1)))
                    results.append("ok")
                except UnexpectedAppendOffsetError as exc:
                    results.append(str(exc))
            if op == "append":
                value += 10
            if op == "lead":
                epoch += 1
            assert results[0] == results[1], (trial, op, results)
            for i in range(2):
                assert _snapshot(logs[epochlab][i]) == _snapshot(logs[reference][i]), (trial, op, i)
            assert epochlab.first_mismatch(*logs[epochlab]) == reference.first_mismatch(*logs[reference])


@pytest.mark.parametrize("generation", [g.label for g in Generation])
def test_the_scenario_holds_in_every_generation(generation: str) -> None:
    result = run_scenario(load_builtin(NAME), generation, write=False)
    assert all(c.passed for c in result.checks), [c.detail for c in result.checks if not c.passed]
    twice = any("are now twice in the log" in e for e in result.events)
    assert twice == (generation == "hw-truncation")


@pytest.mark.parametrize("backend", ["rust", "reference"])
def test_the_three_backends_give_the_same_g0_run(backend: str) -> None:
    result = run_scenario(load_builtin(NAME), "hw-truncation", write=False, backend=backend)
    assert all(c.passed for c in result.checks)
    assert result.history_lines == run_scenario(load_builtin(NAME), "hw-truncation",
                                                write=False).history_lines


def test_a_trace_of_the_g0_run_replays_in_both_replayers(tmp_path: Path) -> None:
    run_scenario(load_builtin(NAME), "hw-truncation", out_dir=tmp_path / "run")
    export_run_dir(tmp_path / "run", tmp_path / "t.parquet")
    table = pq.read_table(tmp_path / "t.parquet")
    assert table.schema.metadata[b"epochlab.wrapper_batches"] == b"True"
    fast, slow = replay(table), reference_replay(table)
    found = [(v["invariant"], v["message"]) for v in fast.violations]
    assert found == [(v["invariant"], v["message"]) for v in slow.violations]
    assert {i for i, _ in found} == {"Inv-Durability", "Inv-LogMatching"}
    # without the metadata the overlapping append is inconsistent with a v2 log
    meta = {k: v for k, v in table.schema.metadata.items() if k != b"epochlab.wrapper_batches"}
    v2 = table.replace_schema_metadata(meta)
    assert any(v["invariant"] == "trace-consistency" for v in replay(v2, collect="all").violations)
    assert any(v["invariant"] == "trace-consistency"
               for v in reference_replay(v2, collect="all").violations)


@pytest.mark.parametrize("backend", ["rust", "reference"])
def test_a_fuzz_finding_with_a_hole_names_kafka_3919(backend: str) -> None:
    """A random-engine finding of the bug-hunt benchmark (wrapper-batches profile, campaign
    seed 5, run seed 1738095671), shrunk to 7 actions: a truncation to the HW lands inside a
    two-record wrapper, and the follower then takes the whole wrapper again. It replaces an
    earlier finding (run seed 684166407) whose schedule shows no hole at any run seed from 0
    to 3,000 since the Java client's newest-first retries."""
    schedule = Schedule.from_json(HOLE.read_text())
    run = execute(schedule, backend=backend)
    found = {v.invariant for v in run.verdict.protocol_violations}
    assert "Inv-OffsetMonotone" in found, found
    messages = [e["message"] for e in run.events]
    assert any("batch [0, 1] held it and went whole, offsets 0-0 are a hole" in m for m in messages)
    assert any("took wrapper [0, 1] at log end offset 1: offsets 0-0 are now twice" in m for m in messages)
    assert [b.id for b in catalogue.match("hw-truncation", "Inv-OffsetMonotone", run.events)] == ["KAFKA-3919"]
    # the same signature without the mechanism matches nothing
    assert catalogue.match("hw-truncation", "Inv-OffsetMonotone", []) == []


def test_default_fuzz_runs_write_one_record_batches_so_g0_defaults_have_no_wrappers() -> None:
    run = execute(generate_schedule(7, "hw-truncation", FuzzProfile()))
    assert not any("took wrapper" in e["message"] or "went whole" in e["message"] for e in run.events)


def test_the_bench_profile_is_valid_and_makes_wrappers() -> None:
    profile = json.loads((ROOT / "benches" / "profiles" / "wrapper-batches.json").read_text())
    assert all(p["batch_size_records"] > 1 for p in profile["producers"].values())
    schedule = generate_schedule(5, "hw-truncation", FuzzProfile(producers=profile["producers"],
                                                                  cluster=profile["cluster"]))
    assert schedule.producers["p1"]["batch_size_records"] == 4
