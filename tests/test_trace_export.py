"""Simulation runs exported as traces replay to the same final state and the same verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow")

from epochlab import trace  # noqa: E402
from epochlab.generations import Generation  # noqa: E402
from epochlab.fuzz.rerun import export_run_dir  # noqa: E402
from epochlab.trace import recording_traces  # noqa: E402

# The invariants both the simulator's state checker and the replay evaluate.
COMMON = {"Inv-HW-bounds", "Inv-LogMatching", "Inv-Durability", "Inv-OffsetMonotone"}


def _same_final_state(cluster: Any, report: Any) -> None:
    state = cluster.state()
    seen = set()
    for r in report.replicas:
        if r["broker"] not in state.replicas:  # a broker not hosting the partition
            assert r["batch_count"] == 0
            continue
        sim = state.replicas[r["broker"]]
        seen.add(r["broker"])
        assert (r["log_start_offset"], r["log_end_offset"], r["high_watermark"],
                [tuple(e) for e in r["epoch_entries"]]) == (
            sim.log_start_offset, sim.log_end_offset, sim.high_watermark,
            [tuple(e) for e in sim.epoch_entries]), r["broker"]
        log = report.replayer.log(r["partition"], r["broker"])
        assert [(b.base_offset, b.last_offset, b.partition_leader_epoch, tuple(b.records))
                for b in log.batches()] == [(b[0], b[1], b[2], tuple(b[3])) for b in sim.batches]
    assert seen == set(state.replicas)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("generation", [g.label for g in Generation])
def test_fuzz_runs_replay_to_the_same_state_and_verdict(seed: int, generation: str) -> None:
    from epochlab.fuzz import execute, generate_schedule

    with recording_traces() as clusters:
        result = execute(generate_schedule(seed, generation))
    cluster = clusters[-1]
    report = trace.replay(trace.export_cluster(cluster))
    _same_final_state(cluster, report)
    sim = {(v.invariant, v.verdict) for v in result.verdict.violations if v.invariant in COMMON}
    replayed = {(v["invariant"], v["verdict"]) for v in report.violations if v["invariant"] in COMMON}
    assert replayed == sim
    assert not [v for v in report.violations if v["invariant"] == "trace-consistency"]


@pytest.mark.parametrize("name", ["seed-004-kip101-problem-1", "seed-004-kip101-problem-2",
                                  "seed-002-rf1-power-loss", "seed-003-out-of-sync-replica-becomes-leader"])
def test_scenarios_replay_to_the_same_state(name: str) -> None:
    from epochlab.scenarios import load_builtin
    from epochlab.scenarios.runner import run_scenario

    scenario = load_builtin(name)
    for generation in scenario.generations:
        with recording_traces() as clusters:
            run_scenario(scenario, generation, write=False)
        report = trace.replay(trace.export_cluster(clusters[-1]))
        _same_final_state(clusters[-1], report)
    # seed 004's first KIP-101 problem: committed data lost in the hw-truncation generation only;
    # A registers only after its session expired, out of the ISR, so its election is unclean
    # (0.10's default allows it) and the replay classifies the loss as allowed
    if name == "seed-004-kip101-problem-1":
        with recording_traces() as clusters:
            run_scenario(scenario, "hw-truncation", write=False)
        report = trace.replay(trace.export_cluster(clusters[-1]))
        assert report.protocol_violations == []
        assert [(x["invariant"], x["verdict"]) for x in report.violations] == [
            ("Inv-Durability", "allowed-by-configuration")]


def test_recording_does_not_change_the_run() -> None:
    from epochlab.fuzz import execute, generate_schedule

    schedule = generate_schedule(3, "kip-101")
    plain = execute(schedule)
    with recording_traces():
        recorded = execute(schedule)
    assert recorded.history_jsonl == plain.history_jsonl
    assert recorded.verdict_json() == plain.verdict_json()


def test_export_run_dir_and_cli(tmp_path: Path) -> None:
    from epochlab.cli import main

    run_dir = tmp_path / "run"
    assert main(["scenario", "run", "seed-004-kip101-problem-1", "-g", "hw-truncation",
                 "--out", str(run_dir), "--json"]) in (0, 1)
    out = tmp_path / "t.parquet"
    assert main(["trace", "export", str(run_dir), "-o", str(out)]) == 0
    # seed 004's loss comes from an unclean election here (allowed by 0.10's default): exit 0
    assert main(["trace", "replay", str(out)]) == 0
    table, result = export_run_dir(run_dir)
    assert table.num_rows == trace.read_trace(out).num_rows and result.generation == "hw-truncation"


def test_export_a_replay_run_directory(tmp_path: Path) -> None:
    """A replay's run directory (schedule.json) exports the schedule's run."""
    from epochlab.cli import main

    finding = Path(__file__).resolve().parents[1] / "docs" / "kafka-findings" / \
        "kraft-reelected-leader-stale-follower-leo.json"
    run_dir = tmp_path / "replay"
    assert main(["replay", str(finding), "--out", str(run_dir)]) == 1
    table, result = export_run_dir(run_dir, tmp_path / "t.parquet")
    assert table.num_rows > 0 and result.seed == 28 and result.generation == "strict-min-isr"
    assert main(["trace", "export", str(run_dir), "-o", str(tmp_path / "u.parquet")]) == 0


def test_export_uses_the_run_directorys_own_scenario_not_a_builtin_of_that_name(tmp_path: Path) -> None:
    """A user's scenario that has a built-in's name: the export reruns the user's scenario."""
    from epochlab.scenarios import builtin_text, load_file
    from epochlab.scenarios.runner import run_scenario

    text = builtin_text("seed-002-rf1-offline").replace("count = 10", "count = 3")
    user = tmp_path / "mine.toml"
    user.write_text(text)
    run_scenario(load_file(user), "kip-101", out_dir=tmp_path / "run")
    table, _ = export_run_dir(tmp_path / "run")
    builtin_table, _ = export_run_dir(_builtin_run(tmp_path))
    assert table.num_rows != builtin_table.num_rows


def _builtin_run(tmp_path: Path) -> Path:
    from epochlab.scenarios import load_builtin
    from epochlab.scenarios.runner import run_scenario

    run_scenario(load_builtin("seed-002-rf1-offline"), "kip-101", out_dir=tmp_path / "builtin")
    return tmp_path / "builtin"
