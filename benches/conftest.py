"""Collects ``bench_*.py`` and prints, after the run, how the Rust core compares with the
pure-Python reference on the same work.

Each benchmark calls the ``record_ratio`` fixture with its group, its implementation
(``"rust"``, ``"reference"`` or ``"copy"``, a plain copy of the same data as a floor) and the
number of operations one round performs, so that workloads of different sizes compare per
operation. ``pytest_terminal_summary`` prints one line per group; with ``EPOCHLAB_BENCH_OUT`` set,
the same table is also written as JSON (to that path, or to ``benches/results.json`` when the
value is ``1``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

RESULTS: dict[str, dict[str, dict[str, float]]] = {}
MEMORY: dict[str, dict[str, float | str]] = {}


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    """``python -m pytest benches`` collects ``bench_*.py``; a file named on the command line is
    collected by pytest itself, so it is skipped here to avoid collecting it twice."""
    if (file_path.suffix == ".py" and file_path.name.startswith("bench_")
            and not parent.session.isinitpath(file_path)):
        return pytest.Module.from_parent(parent, path=file_path)
    return None


@pytest.fixture
def record_ratio() -> Callable[..., None]:
    def record(benchmark: Any, group: str, impl: str, *, ops: int = 1) -> None:
        stats = getattr(benchmark, "stats", None)
        if stats is None:  # --benchmark-disable: nothing was timed
            return
        timing = stats.stats
        RESULTS.setdefault(group, {})[impl] = {
            "ops_per_round": ops,
            "rounds": timing.rounds,
            "min_s_per_op": timing.min / ops,
            "mean_s_per_op": timing.mean / ops,
        }

    return record


@pytest.fixture
def record_memory() -> Callable[[str, dict[str, float | str]], None]:
    def record(impl: str, figures: dict[str, float | str]) -> None:
        MEMORY[impl] = figures

    return record


def _seconds(value: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def ratio_lines() -> list[str]:
    lines = [f"{'group':<46} {'rust/op':>10} {'reference/op':>13} {'copy/op':>10}  ratio (mean)"]
    for group, impls in RESULTS.items():
        rust, ref, copy = (impls.get(k) for k in ("rust", "reference", "copy"))
        if not (rust or ref or copy):  # a group of its own parts, e.g. import vs replay
            parts = list(impls.items())
            text = "; ".join(f"{name} {_seconds(x['mean_s_per_op'])}/op" for name, x in parts)
            if len(parts) == 2:
                text += f"; {parts[0][0]} / {parts[1][0]}: " \
                        f"{parts[0][1]['mean_s_per_op'] / parts[1][1]['mean_s_per_op']:.2f}"
            lines.append(f"{group:<46} {text}")
            continue
        cells = [_seconds(x["mean_s_per_op"]) if x else "-" for x in (rust, ref, copy)]
        ratio = ""
        if rust and ref:
            ratio = f"rust vs reference: {ref['mean_s_per_op'] / rust['mean_s_per_op']:.0f}x"
            if ref["rounds"] == 1:
                ratio += " (reference: 1 round)"
        if rust and copy:
            ratio += f"{'; ' if ratio else ''}rust / plain copy: " \
                     f"{rust['mean_s_per_op'] / copy['mean_s_per_op']:.1f}x"
        lines.append(f"{group:<46} {cells[0]:>10} {cells[1]:>13} {cells[2]:>10}  {ratio}")
    for impl, figures in MEMORY.items():
        lines.append(f"memory {impl}: " + ", ".join(f"{k} {v}" for k, v in figures.items()))
    return lines


@pytest.hookimpl(trylast=True)  # after pytest-benchmark's own tables
def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not RESULTS and not MEMORY:
        return
    terminalreporter.section("epochlab: rust core vs pure-Python reference")
    for line in ratio_lines():
        terminalreporter.write_line(line)
    out = os.environ.get("EPOCHLAB_BENCH_OUT")
    if out:
        path = Path(__file__).with_name("results.json") if out == "1" else Path(out)
        path.write_text(json.dumps({"timings": RESULTS, "memory": MEMORY}, indent=2) + "\n")
        terminalreporter.write_line(f"written to {path}")
