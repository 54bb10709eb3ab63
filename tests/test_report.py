"""The step table and report rendering, from ClusterState-like dicts (no simulator needed)."""

from __future__ import annotations

import io
import sys
from dataclasses import dataclass
from typing import Any

import pytest

from epochlab.report import format_log, picture, render_terminal, step_rows, table_markdown, table_text
from epochlab.scenarios.model import Step
from epochlab.observe import Observer, snapshot_from


def _replica(broker: int, batches: list, hw: int, alive: bool = True, role: str = "follower") -> dict:
    leo = batches[-1][1] + 1 if batches else 0
    return {"broker": broker, "alive": alive, "role": role, "leader_epoch": 0, "log_start_offset": 0,
            "log_end_offset": leo, "high_watermark": hw, "epoch_entries": [],
            "batches": [[b, last, e, list(v)] for b, last, e, v in batches]}


def _state(t: int, leader: int | None, epoch: int, replicas: list[dict], isr=(1, 2, 3)) -> dict:
    return {"time_ms": t,
            "controller": {"leader": leader, "leader_epoch": epoch, "isr": list(isr),
                           "partition_epoch": 0, "offline": leader is None},
            "replicas": {str(r["broker"]): r for r in replicas}}


@dataclass
class Rec:
    step: Step | None
    executed_at_ms: int
    outcome: str = ""
    error: str | None = None
    snapshot: Any = None


def seed000_records() -> list[Rec]:
    """Seed 000: A writes M1-M3, B has M1-M2, C has M1; A crashes, B leads epoch 1, M4, A truncates M3."""
    s1 = _state(3000, 1, 0, [
        _replica(1, [(0, 0, 0, [1]), (1, 1, 0, [2]), (2, 2, 0, [3])], 1, role="leader"),
        _replica(2, [(0, 0, 0, [1]), (1, 1, 0, [2])], 1),
        _replica(3, [(0, 0, 0, [1])], 1)])
    s2 = _state(10000, 2, 1, [
        _replica(1, [(0, 0, 0, [1]), (1, 1, 0, [2]), (2, 2, 0, [3])], 1, alive=False, role="offline"),
        _replica(2, [(0, 0, 0, [1]), (1, 1, 0, [2]), (2, 2, 1, [4])], 3, role="leader"),
        _replica(3, [(0, 0, 0, [1]), (1, 1, 0, [2]), (2, 2, 1, [4])], 3)], isr=(2, 3))
    s3 = _state(14000, 2, 1, [
        _replica(1, [(0, 0, 0, [1]), (1, 1, 0, [2]), (2, 2, 1, [4])], 3),
        _replica(2, [(0, 0, 0, [1]), (1, 1, 0, [2]), (2, 2, 1, [4])], 3, role="leader"),
        _replica(3, [(0, 0, 0, [1]), (1, 1, 0, [2]), (2, 2, 1, [4])], 3)])
    crash = Step(0, "crash", {"broker": 1, "lose_unflushed": False})
    restart = Step(1, "restart", {"broker": 1})
    return [Rec(None, 0, snapshot=snapshot_from(s1)), Rec(crash, 3000, snapshot=snapshot_from(s2)),
            Rec(restart, 10000, "", snapshot=snapshot_from(s3))]


def test_format_log_runs_hw_and_epochs() -> None:
    snap = snapshot_from(_state(0, 1, 0, [
        _replica(1, [(0, 9, 0, list(range(1, 11))), (10, 11, 0, [11, 12]), (12, 12, 1, [20])], 11)]))
    assert format_log(snap.replica(1)) == "[m1..m11 | m12 e1:m20] (13/11)"
    empty = snapshot_from(_state(0, 1, 0, [_replica(1, [], 0)]))
    assert format_log(empty.replica(1)) == "[|] (0/0)"
    down = snapshot_from(_state(0, 1, 0, [_replica(1, [(0, 1, 0, [1, 2])], 2, alive=False)]))
    assert format_log(down.replica(1)) == "down [m1 m2 |] (2/2)"


def test_step_rows_show_truncation_and_loss() -> None:
    rows = step_rows(seed000_records())
    assert [r.leader for r in rows] == ["1", "2", "2"]
    assert [r.epoch for r in rows] == ["0", "1", "1"]
    assert rows[0].logs[0] == (1, "[m1 | m2 m3] (3/1)")
    assert rows[1].lost == "m3"            # the new leader's log lacks M3
    assert rows[2].truncated == "1: m3"    # A deletes M3 when it returns
    assert rows[2].logs[0][1] == "[m1 m2 e1:m4 |] (3/3)"
    assert "crash(broker=1, lose_unflushed=false)" in rows[1].action


def test_markdown_escapes_hw_bar() -> None:
    md = table_markdown(step_rows(seed000_records()))
    lines = md.splitlines()
    assert lines[0].startswith("| step | t (ms) | action | leader | epoch | ISR |")
    assert "[m1 \\| m2 m3] (3/1)" in md
    assert all(line.count(" | ") >= 8 for line in lines if not line.startswith("|---"))


def test_plain_text_without_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rich", None)
    monkeypatch.setitem(sys.modules, "rich.console", None)
    monkeypatch.setitem(sys.modules, "rich.table", None)
    out = io.StringIO()
    rows = step_rows(seed000_records())
    render_terminal(rows, title="seed 000", file=out)
    text = out.getvalue()
    assert text.startswith("seed 000\n")
    assert "[m1 | m2 m3] (3/1)" in text
    assert text.endswith(table_text(rows))


def test_rich_table_when_installed() -> None:
    pytest.importorskip("rich")
    out = io.StringIO()
    render_terminal(step_rows(seed000_records()), title="seed 000", file=out)
    assert "m1" in out.getvalue() and "seed 000" in out.getvalue()


def test_picture_skipped_without_matplotlib(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    note = picture.save_timeline(seed000_records(), tmp_path / "timeline.png")
    assert "matplotlib is not installed" in note
    assert not (tmp_path / "timeline.png").exists()


def test_picture_with_matplotlib(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    note = picture.save_timeline(seed000_records(), tmp_path / "timeline.png", title="seed 000")
    assert note == "![timeline](timeline.png)"
    assert (tmp_path / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_observer_unavailability_and_held_records() -> None:
    obs = Observer()
    for rec in seed000_records():
        obs.sample(rec.snapshot)
    assert obs.intervals() == []       # every sample had a live acting leader
    down = snapshot_from(_state(5000, 1, 0, [_replica(1, [], 0, alive=False, role="offline")]))
    up = snapshot_from(_state(11000, 2, 1, [_replica(2, [], 0, role="leader")]))
    obs.sample(down)
    obs.sample(up)
    assert obs.intervals() == [[5000, 11000]]
    assert (2, 3) in obs.held[1]
    assert obs.hw_at(3000) == 1 and obs.hw_at(10000) == 3
