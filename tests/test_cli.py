"""The epochlab command: exit 0 when expectations hold, 1 when not, 2 for usage/input errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from epochlab.cli import main
from epochlab.scenarios import builtin_names


def test_scenario_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scenario", "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(builtin_names())
    assert any(line.startswith("seed-004-kip101-problem-1") and "004_f57cbb2484371e0c.txt" in line
               for line in out)


def test_scenario_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scenario", "show", "seed-000-leader-epoch-walkthrough"]) == 0
    assert 'name = "seed-000-leader-epoch-walkthrough"' in capsys.readouterr().out


def test_generations_oldest_first(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generations"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [
        "hw-truncation", "kip-101", "kip-279", "kip-320", "diverging-epoch", "strict-min-isr"]
    assert "0.10.2" in lines[0]


def test_run_passes_in_one_generation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["scenario", "run", "seed-004-kip101-problem-1", "--generation", "hw-truncation",
                 "--out", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert code == 0
    assert "all expectations hold" in out and "m1" in out
    assert (tmp_path / "r" / "verdict.json").exists()


def test_run_all_generations_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["scenario", "run", "seed-000-leader-epoch-walkthrough", "--json", "--out",
                 str(tmp_path)])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["passed"] is True
    assert [r["generation"] for r in data["runs"]][0] == "hw-truncation" and len(data["runs"]) == 6
    assert all(Path(r["run_dir"]).is_dir() for r in data["runs"])


FAILING = """
name = "claims-too-much"
description = "expects a loss that does not happen"
[producers.p1]
acks = "all"
[[steps]]
action = "produce"
at_ms = 100
producer = "p1"
values = [1]
[[steps]]
action = "wait"
ms = 1000
[[expect]]
kind = "lost"
values = [1]
"""


def test_run_exit_1_when_an_expectation_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "claims.toml"
    path.write_text(FAILING)
    code = main(["scenario", "run", str(path), "-g", "kip-320", "--json", "--out", str(tmp_path / "o")])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["passed"] is False
    assert data["runs"][0]["checks"][0]["status"] == "failed"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["scenario", "run", "no-such-scenario"], "name"),
        (["scenario", "show", "no-such-scenario"], "no-such-scenario"),
        (["scenario", "run", "seed-000-leader-epoch-walkthrough", "--generation", "kip-999"],
         "--generation"),
        (["scenario", "run"], "NAME_OR_FILE"),
        (["frobnicate"], "invalid choice"),
        ([], "required"),
        (["scenario", "run", "x", "--seed", "many"], "--seed"),
    ],
)
def test_usage_errors_exit_2(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err
    assert len(err.strip().splitlines()) == 1


def test_malformed_file_exit_2_names_file_and_field(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(FAILING.replace('values = [1]\n[[steps]]', 'values = [1]\nbroker = 2\n[[steps]]'))
    assert main(["scenario", "run", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert str(path) in err and "steps[0].broker" in err and "unknown key" in err and len(err.splitlines()) == 1
    assert len(err.splitlines()) == 1


def test_demo_runs_side_by_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "hw-truncation" in out and "strict-min-isr" in out
    assert "final leader log" in out


def test_python_dash_m_and_no_optional_packages(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['rich'] = None; sys.modules['matplotlib'] = None\n"
        "from epochlab.cli import main\n"
        f"sys.exit(main(['scenario', 'run', 'seed-002-rf1-offline', '-g', 'kip-101', '--out', {str(tmp_path)!r}]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "step" in proc.stdout and "all expectations hold" in proc.stdout
    assert not (tmp_path / "timeline.png").exists()
    assert "matplotlib is not installed" in (tmp_path / "report.md").read_text()
    proc = subprocess.run([sys.executable, "-m", "epochlab", "generations"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("hw-truncation")


def test_downtime_log_parsing_and_table(tmp_path) -> None:
    """``epochlab.kafka.runs.downtime``: a node log's lines with their ms timestamps (other shapes
    and a missing file skipped), the summary per phase and seed 002's table with both columns."""
    from epochlab.kafka.runs.downtime import parse_log, summarize, table_markdown

    log = tmp_path / "server.log"
    log.write_text("1795709345057 INFO [org.apache.kafka.controller.ReplicationControlManager] [QuorumController "
                   "id=100] Fencing broker 2 at epoch 15 because its session has timed out.\n"
                   "\tat some.stack.Trace(Trace.java:1)\n"
                   "1795709345126 INFO [state.change.logger] [Broker id=3] Leader t1-0 with topic id Some(x) starts "
                   "at leader epoch 1 from offset 0 with partition epoch 1, high watermark 0\n")
    lines = parse_log(log)
    assert [t for t, *_ in lines] == [1795709345057, 1795709345126]
    assert parse_log(log, since_ms=1795709345100)[0][2] == "state.change.logger"
    assert parse_log(tmp_path / "missing.log") == []
    rows = [{"detection_ms": 2900, "election_ms": 0, "propagation_ms": 40, "producer_recovery_ms": None,
             "consumer_recovery_ms": 4000, "offline_ms": 0},
            {"detection_ms": 2500, "election_ms": 0, "propagation_ms": 36, "producer_recovery_ms": None,
             "consumer_recovery_ms": 3900, "offline_ms": 0}]
    s = summarize(rows)
    assert s["detection_ms"] == {"n": 2, "min": 2500, "p50": 2500, "max": 2900}
    assert s["producer_recovery_ms"] == {"n": 0, "min": None, "p50": None, "max": None}
    table = table_markdown(rows, rows)
    assert "| Detection | 0-6 seconds" in table and "2500 ms (2500-2900)" in table
    assert "not measured (0 of 2)" in table


def test_every_command_has_a_handler_set_by_its_packages_register() -> None:
    """The command convention (docs/architecture.md, "A command"): each package with commands
    registers them, and every leaf command sets ``handler``, the function ``main`` calls."""
    import argparse

    from epochlab.cli import _parser

    def leaves(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], Any]]:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            return [(path, parser)]
        return [leaf for name, child in subs[0].choices.items() for leaf in leaves(child, (*path, name))]

    found = leaves(_parser(), ())
    assert len(found) > 20
    missing = [" ".join(path) for path, parser in found if not callable(parser.get_default("handler"))]
    assert missing == []
    modules = {parser.get_default("handler").__module__ for _path, parser in found}
    assert all(m.endswith(".cli") or m.endswith("_cli") for m in modules), modules
