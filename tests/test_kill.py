"""Writing commands killed part way (SIGKILL, no cleanup) leave the previous output or a
complete new one, never a half-written file or directory under the output's name."""

from __future__ import annotations

import os
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


def _violation(out: Path) -> Path:
    """The campaign's violation directory (not a killed writer's hidden ``.NAME.partial-PID``,
    which the next writer removes)."""
    return next(p for p in sorted((out / "violations").iterdir()) if not p.name.startswith("."))


@pytest.mark.parametrize("cmd", [["scenario", "run", "seed-004-kip101-problem-1", "--generation", "hw-truncation"],
                                 ["fuzz", "-g", "hw-truncation", "--runs", "3", "--seed", "1"]])
def test_run_directories_killed_stay_whole(tmp_path: Path, cmd: list[str]) -> None:
    out = tmp_path / "run"
    full = [*EPOCHLAB, *cmd, "--out", str(out)]
    subprocess.run(full, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    target = out if cmd[0] == "scenario" else _violation(out)
    before = show(target)
    for delay in DELAYS:
        _kill_at(full, delay)
        if cmd[0] == "fuzz":
            target = _violation(out)
        assert show(target).splitlines()[0] == before.splitlines()[0], delay   # whole, readable
        assert (target / "README.md").exists() and (target / "verdict.json").exists()


def test_a_killed_campaign_resumes_with_every_run_exactly_once(tmp_path: Path) -> None:
    """SIGKILL the campaign driver once its first batch is on disk, resume it: every run of
    the campaign is there exactly once (and the JVM the driver started exits with it)."""
    pytest.importorskip("pyspark")
    import json
    import time

    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({"axes": {"generation": ["strict-min-isr"], "acks": ["1", "all"],
                                         "min.insync.replicas": [2], "replication.factor": [3],
                                         "unclean.leader.election.enable": [False],
                                         "enable.idempotence": [False]}}))
    out = tmp_path / "camp"
    cmd = [*EPOCHLAB, "campaign", "--grid", str(grid), "--runs", "60", "--batch-runs", "10",
           "--seed", "4", "--master", "local[1]", "--out", str(out), "--no-shrink", "--no-progress", "--json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if len(list(out.glob("runs/*/batch=*"))) >= 2:   # a batch or more committed
            break
        time.sleep(0.2)
    killed = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    summary = json.loads(done.stdout)["summary"]
    assert summary["runs"] == summary["expected_runs"] == 60
    assert summary["runs_executed"] < 60 or not killed   # the first batches were not run again
    import pyarrow.parquet as pq

    ids = pq.read_table(out / "runs", columns=["run_id"]).column("run_id").to_pylist()
    assert sorted(ids) == list(range(60))
    time.sleep(1)
    jvms = subprocess.run(["pgrep", "-f", str(out)], capture_output=True, text=True).stdout.split()
    assert jvms == [], "a JVM of the killed driver outlived it"


def _children(pid: int) -> set[int]:
    """The live processes whose parent is ``pid`` (from ``/proc``)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("engine", ["random", "guided"])
def test_a_killed_fuzz_leaves_no_worker_running(tmp_path: Path, engine: str) -> None:
    """SIGKILL ``epochlab fuzz --jobs 2`` while its worker processes run: they (and the pool's
    resource tracker) end too, instead of waiting on their task queue for good."""
    import time

    proc = subprocess.Popen([*EPOCHLAB, "fuzz", "--engine", engine, "-g", "hw-truncation", "--runs", "100000",
                             "--seed", "1", "--jobs", "2", "--out", str(tmp_path / "out")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        children: set[int] = set()
        while len(children) < 3 and time.monotonic() < deadline:  # two workers and the tracker
            time.sleep(0.2)
            children = _children(proc.pid)
        assert len(children) >= 3, children
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 20
    while any(_alive(c) for c in children) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [c for c in children if _alive(c)]
    for c in left:  # leave nothing running whatever the outcome
        os.kill(c, signal.SIGKILL)
    assert left == []
