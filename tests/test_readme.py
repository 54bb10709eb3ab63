"""The README's fuzzing walkthrough, run verbatim: every line between the walkthrough markers
is run as written (in an empty directory, with this interpreter's ``epochlab`` first on the
PATH) and must end with the exit code its comment announces."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def walkthrough() -> list[tuple[str, int]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("<!-- walkthrough -->", 1)[1].split("<!-- /walkthrough -->", 1)[0]
    lines = [line for line in block.splitlines() if line.startswith("epochlab ")]
    out = []
    for line in lines:
        code = re.search(r"#.*\bexit (\d)", line)
        out.append((line, int(code.group(1)) if code else 0))
    return out


def test_the_walkthrough_is_there() -> None:
    steps = walkthrough()
    assert len(steps) >= 5
    assert any(code == 1 for _, code in steps) and any(code == 0 for _, code in steps)


def test_the_readme_fuzzing_walkthrough_runs_verbatim(tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    for line, code in walkthrough():
        command = line.split("#", 1)[0].strip()
        proc = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == code, f"{command}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr, command
        for word in shlex.split(command):
            if word.startswith("runs/") and "--out" in command.split(word)[0].split()[-1:]:
                assert (tmp_path / word).exists(), f"{command}: {word} was not written"
    finding = tmp_path / "runs" / "fuzz-g0" / "violations" / "inv-strongisr"
    assert (finding / "README.md").exists() and (finding / "steps.md").exists()
    for name in ("history.jsonl", "verdict.json"):
        assert (finding / name).read_bytes() == (tmp_path / "runs" / "replay-g0" / name).read_bytes()
