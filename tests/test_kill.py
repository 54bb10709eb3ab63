"""Writing commands killed part way (SIGKILL, no cleanup) leave the previous output or a
complete new one, never a half-written file or directory under the output's name (issue 16)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from epochlab.report.rundir import show

EPOCHLAB = [sys.executable, "-m", "epochlab"]
#: kill points, seconds after start: before, during and after the writing part
DELAYS = (0.3, 0.6, 0.9, 1.2, 1.6, 2.2)


def _kill_at(cmd: list[str], delay: float) -> int | None:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
    return proc.wait()


def test_trace_generate_killed_leaves_a_whole_trace(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    from epochlab import trace

    out = tmp_path / "t.parquet"
    subprocess.run([*EPOCHLAB, "trace", "generate", str(out), "--batches", "2000", "--seed", "1"], check=True)
    previous = trace.read_trace(out).num_rows
    for delay in DELAYS:
        _kill_at([*EPOCHLAB, "trace", "generate", str(out), "--batches", "600000", "--seed", "2"], delay)
        rows = trace.read_trace(out).num_rows          # readable: the old trace or the new one
        assert rows == previous or rows > 1_000_000, (delay, rows)
        previous = rows
    # the temporary files of killed writers are removed by the next writer
    subprocess.run([*EPOCHLAB, "trace", "generate", str(out), "--batches", "100", "--seed", "3"], check=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]


@pytest.mark.parametrize("cmd", [["scenario", "run", "seed-004-kip101-problem-1", "--generation", "hw-truncation"],
                                 ["fuzz", "-g", "hw-truncation", "--runs", "3", "--seed", "1"]])
def test_run_directories_killed_stay_whole(tmp_path: Path, cmd: list[str]) -> None:
    out = tmp_path / "run"
    full = [*EPOCHLAB, *cmd, "--out", str(out)]
    subprocess.run(full, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    target = out if cmd[0] == "scenario" else next((out / "violations").iterdir())
    before = show(target)
    for delay in DELAYS:
        _kill_at(full, delay)
        if cmd[0] == "fuzz":
            target = next((out / "violations").iterdir())
        assert show(target).splitlines()[0] == before.splitlines()[0], delay   # whole, readable
        assert (target / "README.md").exists() and (target / "verdict.json").exists()
