"""The fuzzing engines end to end, on small budgets: the random campaign and its artifacts,
the atheris harness (without atheris), and the CLI's ``fuzz`` / ``replay`` / ``shrink``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from epochlab.cli import main
from epochlab.fuzz import FuzzProfile, execute, generate_schedule, load_schedule
from epochlab.fuzz.campaign import Campaign, run_seed
from epochlab.fuzz.generator import HEADER_BYTES, RECORD_BYTES
from epochlab.fuzz.harness import ScheduleHarness, ViolationFound, seed_corpus
from epochlab.generations import Generation

ROOT = Path(__file__).resolve().parents[1]
SMALL = FuzzProfile(actions=40)


def test_run_seeds_are_stable_and_distinct() -> None:
    assert run_seed(0, 0) == run_seed(0, 0)
    assert len({run_seed(7, i) for i in range(100)}) == 100


def test_campaign_finds_committed_loss_in_hw_truncation(tmp_path: Path) -> None:
    campaign = Campaign(Generation.TRUNCATE_TO_HW, seed=4, seconds=None, runs=6, out=tmp_path,
                        shrink_runs=40, until_found=True)
    findings = campaign.run()
    assert findings, "hw-truncation loses committed data within a few runs"
    f = findings[0]
    d = tmp_path / "violations" / f.violation.signature
    for name in ("schedule.json", "original.json", "verdict.json", "README.md", "steps.md",
                 "history.jsonl", "config.json"):
        assert (d / name).exists()
    readme = (d / "README.md").read_text()
    assert "epochlab replay" in readme and "build" in readme and "seed" in readme
    assert f"VIOLATION {f.violation.invariant}" in (d / "steps.md").read_text()
    assert main(["show", str(d)]) == 0
    minimal = load_schedule(d / "schedule.json")
    assert len(minimal.actions) <= len(load_schedule(d / "original.json").actions)
    assert execute(minimal).verdict.first(f.violation.signature) is not None
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["violations"][0]["runs_to_first"] >= 1


def test_latest_generation_short_campaign_is_clean() -> None:
    campaign = Campaign(Generation.STRICT_MIN_ISR, SMALL, seed=3, seconds=None, runs=4)
    campaign.run()
    assert campaign.findings == {}


def test_harness_writes_findings_before_raising(tmp_path: Path) -> None:
    harness = ScheduleHarness("strict-min-isr", tmp_path)
    for i in range(6):
        harness.test_one_input(bytes((i * 37 + j * 11) % 256 for j in range(HEADER_BYTES + RECORD_BYTES * 30)))
    assert harness.runs == 6
    # The seed corpus is the random engine's schedules, byte-encoded: the harness finds what the
    # random engine finds, at the same run (hw-truncation, campaign seed 1: run 3).
    (tmp_path / "corpus").mkdir()
    assert len(seed_corpus(tmp_path / "corpus", 1, FuzzProfile(), count=8)) == 8
    stop = ScheduleHarness("hw-truncation", tmp_path / "g0", stop_on_violation=True)
    with pytest.raises(ViolationFound):
        for path in sorted((tmp_path / "corpus").iterdir()):
            stop.test_one_input(path.read_bytes())
    random_first = Campaign(Generation.TRUNCATE_TO_HW, FuzzProfile(), seed=1, seconds=None, runs=8,
                            out=tmp_path / "r", shrink_runs=0, until_found=True)
    random_first.run()
    first = min(f.run + 1 for f in random_first.findings.values())
    assert stop.runs == first
    found = list((tmp_path / "g0" / "violations").glob("*/original.json"))
    assert found, "the finding is on disk before the exception"


def test_harness_crash_keeps_the_schedule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import epochlab.fuzz.harness as harness_module

    def boom(schedule, backend=None):  # type: ignore[no-untyped-def]
        raise RuntimeError("simulated harness crash")

    monkeypatch.setattr(harness_module, "execute", boom)
    harness = ScheduleHarness("kip-320", tmp_path)
    with pytest.raises(RuntimeError):
        harness.test_one_input(b"\x01\x02\x03" * 20)
    assert list((tmp_path / "crashes").glob("*.json")) and list((tmp_path / "crashes").glob("*.txt"))


def test_fuzz_script_imports_without_atheris() -> None:
    sys.path.insert(0, str(ROOT / "fuzz"))
    try:
        import fuzz_schedules
    finally:
        sys.path.pop(0)
    assert callable(fuzz_schedules.test_one_input)


def test_cli_fuzz_replay_shrink(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "fz"
    code = main(["fuzz", "--generation", "hw-truncation", "--runs", "6", "--seed", "4",
                 "--out", str(out), "--json", "--until-found"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 1 and summary["violations"]
    path = summary["violations"][0]["schedule"]
    assert main(["replay", path, "--json"]) == 1
    first = capsys.readouterr().out
    assert main(["replay", path, "--json"]) == 1
    assert capsys.readouterr().out == first  # byte-identical replay
    assert json.loads(first)["build"]
    original = str(Path(path).with_name("original.json"))
    assert main(["shrink", original, "--out", str(tmp_path / "min.json"), "--max-runs", "20"]) == 0
    assert "minimal schedule" in capsys.readouterr().out
    clean = generate_schedule(1, "strict-min-isr", SMALL).save(tmp_path / "clean.json")
    assert main(["replay", str(clean)]) == 0


def test_a_run_budget_alone_is_not_cut_by_a_default_time_budget(capsys: pytest.CaptureFixture[str],
                                                                   tmp_path: Path) -> None:
    """`--runs N` runs N (the 60 s default applies only when no budget is given)."""
    from epochlab.fuzz.cli import register
    import argparse

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["fuzz", "--runs", "3"])
    assert args.seconds is None
    assert main(["fuzz", "-g", "strict-min-isr", "--runs", "3", "--json", "--out", str(tmp_path)]) in (0, 1)
    assert json.loads(capsys.readouterr().out)["runs"] == 3


def test_two_jobs_find_what_one_finds_in_the_same_runs(tmp_path) -> None:
    """``jobs=2``: the runs in two worker processes, taken back in run order: the same
    findings (first run, seed, message, minimal schedule), allowed counts and run count as one
    process, for a run budget and for ``until_found``."""
    from epochlab.fuzz.campaign import CHUNK_RUNS

    def summary(jobs: int, **kw):  # type: ignore[no-untyped-def]
        out = tmp_path / f"jobs{jobs}-{len(kw)}"
        c = Campaign(Generation.KIP_279, seed=2, seconds=None, out=out, jobs=jobs, **kw)
        c.run()
        s = c.summary(deployment=False)
        minimal = {v["invariant"]: (out / "violations").joinpath(Path(v["schedule"]).parent.name,
                                                                 "schedule.json").read_text()
                   for v in s["violations"]}
        return json.dumps(s, sort_keys=True), minimal

    budget = 2 * CHUNK_RUNS + 7  # chunks and a partial one
    assert summary(1, runs=budget) == summary(2, runs=budget)
    one, _ = summary(1, runs=400, until_found=True)
    two, _ = summary(2, runs=400, until_found=True)
    assert one == two and '"runs_to_first"' in one


def test_a_spark_master_finds_what_one_process_finds(tmp_path) -> None:
    """``master="local[2]"``: the same chunks as Spark tasks, gathered on the driver: the same
    summary (findings, minimal schedules, allowed counts, runs) as one process."""
    pytest.importorskip("pyspark")

    def summary(**kw):  # type: ignore[no-untyped-def]
        out = tmp_path / f"out-{len(kw)}"
        c = Campaign(Generation.KIP_279, seed=2, seconds=None, runs=45, out=out, **kw)
        c.run()
        return json.dumps(c.summary(deployment=False), sort_keys=True)

    one = summary()
    assert '"runs": 45' in one
    assert summary(master="local[2]") == one
