"""House rules enforced by machine (docs/architecture.md, style habit 10): the boundaries a reviewer would check."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _non_test_rust(path: Path) -> str:
    # Unit tests live after `#[cfg(test)]`; they may unwrap freely.
    return path.read_text().split("#[cfg(test)]", 1)[0]


def _rust_files() -> list[Path]:
    return sorted((ROOT / "src").rglob("*.rs"))


def test_pyo3_only_in_bindings() -> None:
    offenders = [
        str(p.relative_to(ROOT))
        for p in _rust_files()
        if "bindings" not in p.parts and re.search(r"\bpyo3\b", p.read_text())
    ]
    assert offenders == []


def test_core_has_no_unwrap_on_reachable_paths() -> None:
    offenders = []
    for p in _rust_files():
        if "bindings" in p.parts or p.name == "tests.rs":
            continue
        for n, line in enumerate(_non_test_rust(p).splitlines(), 1):
            if not line.strip().startswith("//") and re.search(r"\.(unwrap|expect)\(", line):
                offenders.append(f"{p.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == []


# Seeded `random.Random(...)` instances are fine; the module-level functions share hidden state.
GLOBAL_RANDOM = r"\brandom\.(random|randint|randrange|choice|choices|shuffle|sample|uniform|gauss|seed|getrandbits)\("


@pytest.mark.parametrize(
    "pattern",
    [r"\btime\.(time|monotonic|perf_counter)\(", GLOBAL_RANDOM, r"^\s*from random import (?!Random$)", r"datetime\.now\("],
)
def test_simulation_code_is_deterministic(pattern: str) -> None:
    sim_dirs = [ROOT / "python" / "epochlab" / d for d in ("sim", "scenarios", "reference")]
    offenders = [
        f"{p.relative_to(ROOT)}:{n}"
        for d in sim_dirs
        if d.exists()
        for p in sorted(d.rglob("*.py"))
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(pattern, line)
    ]
    assert offenders == []


def test_build_outputs_are_ignored() -> None:
    ignore = (ROOT / ".gitignore").read_text().split()
    for entry in ["/target/", "/dist/", "*.so", "*.whl", ".venv/", ".hypothesis/", "__pycache__/"]:
        assert entry in ignore
