"""The exit-code table of ``docs/cli.md``: every command, with a valid, an invalid and a
malformed input, gives 0, 1 or 2, and never a Python traceback on stderr."""

from __future__ import annotations

import fcntl
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from epochlab.cli import main
from test_cli import FAILING as FAILING_SCENARIO

F_SETPIPE_SZ = 1031   # Linux fcntl: set a pipe's capacity
ROOT = Path(__file__).resolve().parents[1]
FINDING = ROOT / "docs" / "kafka-findings" / "kraft-reelected-leader-stale-follower-leo.json"
RESOLVED = ROOT / "docs" / "resolved-findings" / "g5-duplicate-partition-drop.json"



def _files(tmp: Path) -> dict[str, str]:
    (tmp / "failing.toml").write_text(FAILING_SCENARIO)
    (tmp / "malformed.toml").write_text("name = [\n")
    (tmp / "garbage.json").write_bytes(b"\xff\xfe{not json")
    (tmp / "profile-bad.json").write_text('{"actions": "many"}')
    (tmp / "profile-small.json").write_text('{"actions": 20}')
    (tmp / "not-a-file").mkdir()
    (tmp / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    return {"tmp": str(tmp)}


#: (argv template, expected exit code); {tmp} is the test's directory
CASES: list[tuple[list[str], int]] = [
    (["generations"], 0),
    (["scenario", "list"], 0),
    (["scenario", "show", "seed-002-rf1-offline"], 0),
    (["scenario", "show", "no-such-scenario"], 2),
    (["scenario", "run", "seed-002-rf1-offline", "-g", "kip-101", "--out", "{tmp}/ok"], 0),
    (["scenario", "run", "{tmp}/failing.toml", "-g", "kip-320", "--out", "{tmp}/failing"], 1),
    (["scenario", "run", "{tmp}/malformed.toml"], 2),
    (["scenario", "run", "seed-002-rf1-offline", "-g", "kip-999"], 2),
    (["replay", str(RESOLVED)], 0),
    (["replay", str(FINDING), "--out", "{tmp}/replay"], 1),
    (["replay", "{tmp}/garbage.json"], 2),
    (["replay", "{tmp}/no-such.json"], 2),
    (["replay", "{tmp}/not-a-file"], 2),
    (["replay", "{tmp}/deep.json"], 2),
    (["fuzz", "--config", "{tmp}/deep.json"], 2),
    (["replay", str(FINDING), "--out", "/proc/epochlab-cannot-write-here"], 2),
    (["shrink", str(RESOLVED), "--out", "{tmp}/min.json"], 2),
    (["show", "{tmp}/not-a-file"], 2),
    (["fuzz", "-g", "strict-min-isr", "--runs", "2", "--config", "{tmp}/profile-small.json",
      "--out", "{tmp}/fuzz-ok", "--seed", "3"], 0),
    (["fuzz", "-g", "hw-truncation", "--runs", "30", "--until-found", "--out", "{tmp}/fuzz-bad"], 1),
    (["fuzz", "--runs", "-5"], 2),
    (["fuzz", "--seconds", "nan"], 2),
    (["fuzz", "--config", "{tmp}/profile-bad.json"], 2),
    (["fuzz", "--config", "{tmp}/garbage.json"], 2),
    (["fuzz", "-g", "no-such-generation"], 2),
    (["trace", "replay", "{tmp}/no-such.parquet"], 2),
    (["trace", "replay", "{tmp}/garbage.json"], 2),
    (["trace", "export", "{tmp}/not-a-file"], 2),
    (["trace", "generate", "{tmp}/t.parquet", "--batches", "10", "--partitions", "1000000000"], 2),
    (["trace", "generate", "{tmp}/t.parquet", "--batches", "10", "--partitions", "3"], 0),
    (["campaign", "--runs", "-1"], 2),
    (["kafka", "differential", "--ops", "-1"], 2),
    (["kafka", "fuzz", "--runs", "0"], 2),
    (["kafka", "fuzz", "--actions", "x"], 2),
    (["kafka", "stale-follower", "--release", "3.2.0"], 2),
    (["kafka", "stale-follower", "--release", "4.x"], 2),
    (["frobnicate"], 2),
]


@pytest.mark.parametrize(("argv", "code"), CASES, ids=[" ".join(a)[:60] for a, _ in CASES])
def test_exit_code(argv: list[str], code: int, tmp_path: Path,
                   capsys: pytest.CaptureFixture[str]) -> None:
    subst = _files(tmp_path)
    args = [a.format(**subst) for a in argv]
    assert main(args) == code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code == 2:
        assert err.strip(), "exit 2 always says why on stderr"


def test_show_prints_a_replay_run_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "replay"
    assert main(["replay", str(FINDING), "--out", str(out)]) == 1
    capsys.readouterr()
    assert main(["show", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| step |" in text and "VIOLATION Inv-StrongIsr" in text and "INVALID" in text
    readme = (out / "README.md").read_text()
    assert f"epochlab replay {out}" in readme and "is leader in epoch 2 (was leader in epoch 0)" in readme
    # the directory replays itself byte for byte
    assert main(["replay", str(out), "--out", str(tmp_path / "again")]) == 1
    for name in ("history.jsonl", "verdict.json", "steps.md", "schedule.json"):
        assert (out / name).read_bytes() == (tmp_path / "again" / name).read_bytes(), name


def test_show_prints_a_scenario_run_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(["scenario", "run", "seed-002-rf1-offline", "-g", "kip-101", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["show", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| step |" in text and "valid" in text and "scenario.toml" in text
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["valid"] is True and verdict["passed"] is True


def test_version() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0


@pytest.mark.skipif(importlib.util.find_spec("atheris") is not None, reason="atheris is installed")
def test_atheris_engine_without_atheris_says_how_to_install_it(capsys: pytest.CaptureFixture[str],
                                                               tmp_path: Path) -> None:
    assert main(["fuzz", "--engine", "atheris", "--seconds", "2", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert 'pip install "epochlab[fuzz]"' in err and "Traceback" not in err


def _run(args: list[str], stdin_close: Callable[[subprocess.Popen[bytes]], None]) -> tuple[int, bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "epochlab", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None
    fcntl.fcntl(proc.stdout.fileno(), F_SETPIPE_SZ, 4096)   # far less than the output
    stdin_close(proc)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


def test_a_closed_output_pipe_is_not_a_traceback(tmp_path: Path) -> None:
    """``epochlab scenario list | head -1``: the reader goes away after one line."""
    def close_after_one_line(proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        proc.stdout.readline()
        proc.stdout.close()

    code, err = _run(["scenario", "run", "seed-004-kip101-problem-1", "--out", str(tmp_path / "r")],
                     close_after_one_line)
    assert b"Traceback" not in err, err[-3000:]
    assert code in (0, 2), (code, err[-3000:])


def test_a_closed_pipe_inside_the_rich_table_is_the_clis_broken_pipe() -> None:
    """rich turns a closed pipe into ``SystemExit(1)`` (``Console.on_broken_pipe``), which made
    ``epochlab scenario run ... | head -1`` exit 1 (an expectation failure) when the pipe broke
    while the step table was printed; the table lets the BrokenPipeError reach the CLI (exit 2)."""
    import io

    import pytest

    pytest.importorskip("rich")
    from epochlab.report.table import render_terminal, step_rows
    from epochlab.scenarios import load_builtin
    from epochlab.scenarios.runner import run_scenario

    class ClosedPipe(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError

    rows = step_rows(run_scenario(load_builtin("seed-002-rf1-offline"), "kip-101", write=False).records)
    with pytest.raises(BrokenPipeError):
        render_terminal(rows, "t", file=ClosedPipe())
