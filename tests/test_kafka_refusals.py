"""A live run that needs what this machine lacks is refused before any broker starts (exit 2,
naming the missing tool and the command that installs it), never run with failing steps."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


def _refusal(tmp_path: Path, scenario: str, tools: tuple[str, ...]) -> list[str]:
    """``epochlab kafka run SCENARIO --compare`` with only ``tools`` on PATH: exit 2, not
    runnable, no cluster directory made (no broker started); the reasons given."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in tools:
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "epochlab", "kafka", "run", scenario,
                           "--compare", "--json", "--out", str(out)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PATH": str(bin_dir)})
    assert done.returncode == 2, done.stderr[-2000:]
    payload: dict[str, Any] = json.loads(done.stdout)
    assert payload["runnable"] is False
    assert not out.with_name(out.name + ".cluster").exists()  # no broker was started
    return payload["why"]


def test_a_live_run_without_nft_is_refused_before_any_broker_starts(tmp_path: Path) -> None:
    """On a machine without nftables a scenario with link faults is refused up front (exit 2,
    the reason naming the command that installs it), never run with failing steps."""
    if os.geteuid() != 0:
        pytest.skip("the refusal names nft only for root (without root the namespaces are missing first)")
    why = _refusal(tmp_path, "seed-000-leader-epoch-walkthrough", ("ip", "nsenter", "java", "setpriv"))
    assert any("nft" in w and "scripts/kafka-net-setup" in w for w in why), why


def test_a_power_loss_without_fuse_is_refused_before_any_broker_starts(tmp_path: Path) -> None:
    """Without fusermount3 a scenario with a lossy crash is refused up front (exit 2, naming
    scripts/kafka-fuse-setup), never run on a disk that keeps everything."""
    why = _refusal(tmp_path, "seed-002-rf1-power-loss", ("ip", "nsenter", "java", "setpriv", "nft"))
    assert any("fusermount3" in w and "scripts/kafka-fuse-setup" in w for w in why), why
