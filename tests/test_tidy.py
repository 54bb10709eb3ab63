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


# The Rust core's layers, lowest first (docs/architecture.md, "The Rust core"): a module uses
# only modules of lower layers, so the module graph has no cycle. `no_panic` is test code.
RUST_LAYERS = [
    {"error", "generation"},
    {"types", "formats", "stats"},
    {"txn"},
    {"batch"},
    {"epoch", "producer_state"},
    {"log"},
    {"divergence", "invariants", "coverage"},
    {"replica", "replay"},
    {"sim"},
    {"bindings"},
]


def _rust_uses(paths: list[Path], prefix: str) -> set[str]:
    """The modules named `<prefix>::<module>` in the code (not the tests, not comments)."""
    found: set[str] = set()
    for p in paths:
        if p.name == "tests.rs":
            continue
        code = "\n".join(line for line in _non_test_rust(p).splitlines() if not line.strip().startswith("//"))
        found.update(re.findall(rf"\b{prefix}::(\w+)", code))
    return found


def test_rust_modules_use_only_lower_layers() -> None:
    layer = {m: i for i, group in enumerate(RUST_LAYERS) for m in group}
    src = ROOT / "src"
    modules = sorted({p.relative_to(src).parts[0].removesuffix(".rs") for p in _rust_files()} - {"lib", "no_panic"})
    unplaced = [m for m in modules if m not in layer]
    assert unplaced == [], "place each new module in RUST_LAYERS"
    upward = []
    for m in modules:
        paths = sorted((src / m).rglob("*.rs")) if (src / m).is_dir() else [src / f"{m}.rs"]
        for used in sorted(_rust_uses(paths, "crate") - {m}):
            if used in layer and layer[used] >= layer[m]:
                upward.append(f"{m} -> {used}")
    assert upward == []


def test_rust_bindings_form_no_cycle() -> None:
    files = sorted((ROOT / "src" / "bindings").glob("*.rs"))
    uses = {p.stem: _rust_uses([p], "super") - {p.stem} for p in files if p.stem != "mod"}

    def reaches(a: str, b: str) -> bool:
        seen, todo = set(), [a]
        while todo:
            for n in uses.get(todo.pop(), ()):
                if n == b:
                    return True
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        return False

    cycles = sorted(f"{a} <-> {b}" for a in uses for b in uses[a] if a < b and reaches(b, a))
    assert cycles == []


def test_every_file_that_starts_a_live_cluster_runs_in_the_live_group() -> None:
    """``scripts/test`` runs the suite on every core; the files that start Kafka, ZooKeeper or
    Spark standalone clusters must be in ``conftest.LIVE_CLUSTER_FILES`` so that they run one
    at a time (its comment says why). A new such file not listed there fails here."""
    from conftest import LIVE_CLUSTER_FILES

    starts = re.compile(r"LocalCluster\(|started_cluster\(|running_cluster\(|standalone_cluster\(|ZooKeeper\(|"
                        r"\"kafka\", \"run\"|\[\"up\"")
    starting = {p.name for p in (ROOT / "tests").glob("test_*.py") if starts.search(p.read_text())}
    assert starting - LIVE_CLUSTER_FILES == set()
    assert LIVE_CLUSTER_FILES <= {p.name for p in (ROOT / "tests").glob("test_*.py")}


def test_the_work_units_of_the_parallel_suite() -> None:
    """What ``scripts/test``'s workers take whole (``conftest.work_unit``): every live-cluster
    test one unit, a file with module-scoped fixtures one unit, any other test alone."""
    from conftest import work_unit

    module_fixtures = {"tests/test_inspect.py"}.__contains__
    assert work_unit("tests/test_kafka_run.py::test_x[a]", module_fixtures) == "live-cluster"
    assert work_unit("tests/test_kraft_skip_epoch.py::test_y", module_fixtures) == "live-cluster"
    assert work_unit("tests/test_inspect.py::test_z", module_fixtures) == "tests/test_inspect.py"
    assert work_unit("tests/test_errors.py::test_w[1]", module_fixtures) == "tests/test_errors.py::test_w[1]"
