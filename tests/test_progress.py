"""Progress bars of the long commands: drawn on a terminal, absent from pipes and JSON."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from epochlab.cli import main


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_fuzz_and_shrink_draw_a_bar_on_a_terminal_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    code = main(["fuzz", "-g", "hw-truncation", "--runs", "4", "--seed", "1", "--out", str(tmp_path / "f")])
    drawn = terminal.getvalue()
    assert code == 1 and "fuzz" in drawn and "/4" in drawn and "found" in drawn
    schedule = next((tmp_path / "f" / "violations").glob("*/original.json"))
    terminal.seek(0), terminal.truncate()
    assert main(["shrink", str(schedule), "--max-runs", "20", "--out", str(tmp_path / "min.json")]) == 0
    assert "shrink" in terminal.getvalue() and "actions" in terminal.getvalue()
    capsys.readouterr()
    # --json: nothing but the JSON, even on a terminal
    terminal.seek(0), terminal.truncate()
    main(["fuzz", "-g", "hw-truncation", "--runs", "2", "--seed", "1", "--json", "--out", str(tmp_path / "g")])
    assert terminal.getvalue() == ""
    json.loads(capsys.readouterr().out)


def test_no_bar_in_a_pipe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["fuzz", "-g", "strict-min-isr", "--runs", "2", "--seed", "1", "--out", str(tmp_path / "f")])
    captured = capsys.readouterr()
    assert "\x1b[" not in captured.err and "\x1b[" not in captured.out
