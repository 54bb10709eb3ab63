"""The hand-written `_core.pyi` is the Python contract; mypy's stubtest proves the module matches."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ALLOWLIST = Path(__file__).resolve().parents[1] / ".mypy-stubtest-allowlist"


def test_core_stub_matches_the_extension() -> None:
    cmd = [sys.executable, "-m", "mypy.stubtest", "epochlab._core", "--allowlist", str(ALLOWLIST)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
