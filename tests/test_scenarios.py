"""Built-in scenarios: they parse, and they run with every expectation holding in every
generation they list (the acceptance bar); run directories; determinism."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from epochlab.scenarios import ScenarioBuilder, builtin_names, load_builtin
from epochlab.scenarios.runner import run_scenario

SEEDS = Path(__file__).resolve().parents[1] / "python" / "epochlab" / "scenarios" / "builtin"
CASES = [(n, g) for n in builtin_names() for g in load_builtin(n).generations]


def test_every_seed_document_has_builtins() -> None:
    sources = {load_builtin(n).source for n in builtin_names()}
    for seed in ("000", "001", "002", "003", "004"):
        assert any(s and f"/{seed}_" in s for s in sources), seed
    assert len(builtin_names()) >= 15


@pytest.mark.parametrize("name", builtin_names())
def test_builtin_parses(name: str) -> None:
    s = load_builtin(name)
    assert s.name == name
    # a seed document's scenario, one that shows a catalogued historical bug, or a finding shown on Kafka
    assert s.description and s.source and s.source.startswith(("seeds/", "docs/bugs.md", "docs/kafka-findings/"))
    assert s.steps and s.expectations


@pytest.mark.parametrize(("name", "generation"), CASES, ids=[f"{n}-{g}" for n, g in CASES])
def test_builtin_expectations_hold(name: str, generation: str) -> None:
    result = run_scenario(load_builtin(name), generation, write=False)
    failed = [f"{c.status}: {c.description}: {c.detail}" for c in result.checks if not c.passed]
    assert failed == []
    assert result.checks


def test_seed_004_outcome_differs_by_generation() -> None:
    s = load_builtin("seed-004-kip101-problem-1")
    old = run_scenario(s, "hw-truncation", write=False)
    new = run_scenario(s, "strict-min-isr", write=False)
    assert 2 not in old.final.leader_replica().values()
    assert 2 in new.final.leader_replica().values()


def test_run_directory_contents(tmp_path: Path) -> None:
    s = load_builtin("seed-000-leader-epoch-walkthrough")
    result = run_scenario(s, "kip-320", out_dir=tmp_path / "run")
    run = tmp_path / "run"
    names = {p.name for p in run.iterdir()}
    assert {"config.json", "steps.json", "scenario.toml", "history.jsonl", "state.json",
            "steps.md", "verdict.json", "report.md", "README.md", "events.txt"} <= names
    assert "schedule.json" not in names   # the name of the replayable fuzz format only
    for name in ("config.json", "steps.json", "state.json", "verdict.json"):
        text = (run / name).read_text()
        assert text.endswith("\n")
        data = json.loads(text)
        assert text == json.dumps(data, sort_keys=True, indent=2) + "\n"
    config = json.loads((run / "config.json").read_text())
    import epochlab

    assert config["build"] == epochlab.BUILD and config["generation"] == "kip-320"
    assert config["seed"] == 1 and config["cluster"]["brokers"] == [1, 2, 3]
    schedule = json.loads((run / "steps.json").read_text())
    assert [st["action"] for st in schedule] == [st.action for st in s.steps]
    assert all("executed_at_ms" in st for st in schedule)
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["passed"] is True and len(verdict["checks"]) == len(result.checks)
    assert verdict["valid"] is True
    assert (run / "scenario.toml").read_text() == s.text
    assert "epochlab scenario run" in (run / "README.md").read_text()
    lines = (run / "history.jsonl").read_text().splitlines()
    assert lines and all(json.loads(line)["process"] for line in lines)
    report = (run / "report.md").read_text()
    assert "## Steps" in report and "## Verdict" in report and s.source in report
    assert "| step |" in (run / "steps.md").read_text()
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "timeline.png" not in names and "matplotlib is not installed" in report
    else:
        assert "timeline.png" in names and "![timeline](timeline.png)" in report


def test_default_run_dir_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_scenario(load_builtin("seed-002-rf1-offline"), "kip-101", seed=7)
    assert result.run_dir == Path("runs") / "seed-002-rf1-offline-kip-101-seed7"
    assert (tmp_path / result.run_dir / "verdict.json").exists()


@pytest.mark.parametrize("name", ["seed-002-split-brain", "seed-001-idempotence-across-failover"])
def test_history_is_byte_identical_for_the_same_seed(tmp_path: Path, name: str) -> None:
    s = load_builtin(name)
    run_scenario(s, "diverging-epoch", seed=3, out_dir=tmp_path / "a")
    run_scenario(s, "diverging-epoch", seed=3, out_dir=tmp_path / "b")
    for f in ("history.jsonl", "state.json", "steps.json", "verdict.json", "steps.md"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f


def test_failing_expectation_is_reported_not_hidden() -> None:
    b = ScenarioBuilder("wrong-claim", description="claims a loss that does not happen")
    b.producer("p1", acks="all").step("produce", at_ms=100, producer="p1", values=[1, 2])
    b.step("wait", ms=1000).expect("lost", values=[2])
    result = run_scenario(b.build(), "kip-320", write=False)
    assert not result.passed
    assert result.checks[0].status == "failed" and "still in leader" in result.checks[0].detail


def test_engine_gap_fails_the_step_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    from epochlab.sim import Cluster

    def missing(self):  # stands for an engine feature that is not implemented yet
        raise NotImplementedError("preferred election")

    monkeypatch.setattr(Cluster, "elect_preferred_leader", missing)
    b = ScenarioBuilder("gap").step("elect_preferred", at_ms=100).step("wait", ms=100)
    result = run_scenario(b.build(), "kip-320", write=False)
    assert not result.passed
    (check,) = [c for c in result.checks if c.kind == "step"]
    assert check.status == "unsupported" and "preferred election" in check.detail
