"""The release build installed as a user installs it (``bash scripts/build-wheels --check``).

The x86_64 manylinux2014 wheel goes into a fresh virtualenv on every CPython >= 3.11 this machine
has, with no Rust toolchain on PATH (no cargo, rustc or rustup; their variables unset), and
from it run ``epochlab --version``, the README's Python example (each print against the value
its comment states) and the README's fuzzing walkthrough, every line verbatim with the exit code
the README states (tests/test_readme.py's reading of the block). On the interpreter running
these tests the wheel goes in with the ``spark`` extra and a short campaign runs too. The sdist
is built with pip into another fresh virtualenv where cargo is present, and works. When the
release build made the aarch64 wheel too, that wheel runs the same example and walkthrough on
Debian's arm64 CPython 3.11 under qemu-user (``EPOCHLAB_AARCH64_SYSROOT``).

These tests need the release build: ``EPOCHLAB_DIST`` names its directory. Without it they are
skipped, saying so, in an ordinary test run; ``scripts/build-wheels --check`` sets it together
with ``EPOCHLAB_RELEASE_CHECK=1``, under which a missing build, a missing file or a missing
prerequisite fails instead. ``EPOCHLAB_PYTHONS`` (paths separated by ``:``) replaces the
search for interpreters.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from test_readme import walkthrough

ROOT = Path(__file__).resolve().parents[1]
VERSION = tomllib.loads((ROOT / "Cargo.toml").read_text())["package"]["version"]
WHEEL = f"epochlab-{VERSION}-cp311-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
SDIST = f"epochlab-{VERSION}.tar.gz"
FLOOR = (3, 11)
DIST = os.environ.get("EPOCHLAB_DIST", "")
REQUIRED = os.environ.get("EPOCHLAB_RELEASE_CHECK") == "1"
RUST_TOOLS = ("cargo", "rustc", "rustup")

pytestmark = pytest.mark.release


def _base_python() -> str:
    """The interpreter this test run's virtualenv was made from (the default ``python3``)."""
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def _probe(exe: str) -> tuple[str, tuple[int, ...]] | None:
    code = ("import json, sys, ensurepip, venv; print(json.dumps([sys.implementation.name, "
            "sys.abiflags, sys.version_info[:3], sys.executable]))")
    try:
        proc = subprocess.run([exe, "-I", "-c", code], capture_output=True, text=True, timeout=30)
        name, abiflags, version, executable = json.loads(proc.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None  # not runnable, or no venv/ensurepip
    if proc.returncode != 0 or name != "cpython" or "t" in abiflags:
        return None  # free-threaded builds have no abi3 before 3.15
    return os.path.realpath(executable), tuple(version)


def interpreters() -> list[tuple[str, str]]:
    """Every CPython >= 3.11 with venv on this machine, as (id, path), the default one first."""
    if not DIST:
        return []
    if os.environ.get("EPOCHLAB_PYTHONS"):
        candidates = os.environ["EPOCHLAB_PYTHONS"].split(os.pathsep)
    else:
        candidates = [_base_python()]
        for d in os.environ.get("PATH", "").split(os.pathsep) + ["/usr/bin", "/usr/local/bin"]:
            if d.rstrip("/").endswith("shims"):  # pyenv's: its versions are listed below
                continue
            candidates += sorted(glob.glob(os.path.join(d, "python3.[0-9]*")))
        pyenv = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
        candidates += sorted(glob.glob(os.path.join(pyenv, "versions", "*", "bin", "python3")))
    found: dict[str, tuple[int, ...]] = {}
    for exe in candidates:
        if not re.fullmatch(r"python3(\.\d+)?", os.path.basename(exe)) or not os.access(exe, os.X_OK):
            continue
        probed = _probe(exe)
        if probed and probed[1] >= FLOOR and probed[0] not in found:
            found[probed[0]] = probed[1]
    out, seen = [], set()
    for path, version in found.items():
        label = "cpython-" + ".".join(map(str, version))
        while label in seen:
            label += "+"
        seen.add(label)
        out.append((label, path))
    return out


INTERPRETERS = interpreters()


def _need_dist(name: str) -> Path:
    if not DIST:
        if REQUIRED:
            pytest.fail("EPOCHLAB_RELEASE_CHECK=1 but EPOCHLAB_DIST is not set")
        pytest.skip("no release build given (EPOCHLAB_DIST): bash scripts/build-wheels --arch x86_64 --check")
    path = Path(DIST) / name
    if not path.is_file():
        pytest.fail(f"{path} was not built (scripts/build-wheels leaves it there)")
    return path


def _env(venv: Path, *, rust: bool) -> dict[str, str]:
    """The environment of a user's shell with ``venv`` activated; without Rust unless ``rust``."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "CARGO_TARGET_DIR")
           and not k.startswith("EPOCHLAB_")}
    dirs = [d for d in env.get("PATH", "").split(os.pathsep) if d]
    if not rust:
        env = {k: v for k, v in env.items() if not k.startswith(("CARGO", "RUSTUP", "RUSTC", "RUSTFLAGS"))}
        dirs = [d for d in dirs if not any(os.path.exists(os.path.join(d, t)) for t in RUST_TOOLS)]
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *dirs])
    env["VIRTUAL_ENV"] = str(venv)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    if not rust:
        present = {t: shutil.which(t, path=env["PATH"]) for t in RUST_TOOLS}
        assert not any(present.values()), f"Rust still reachable: {present}"
    return env


def _run(cmd: list[str] | str, env: dict[str, str], cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          shell=isinstance(cmd, str))


def _venv(python: str, where: Path) -> Path:
    proc = subprocess.run([python, "-m", "venv", str(where)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return where


def _readme_python() -> list[tuple[str, str]]:
    """The README's Python example as code, and the values its print lines' comments state."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## Using the core from Python", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    expected = [line.split("#", 1)[1].split(":", 1)[0].strip()
                for line in block.splitlines() if line.startswith("print(") and "#" in line]
    return [(block, e) for e in expected]


def _check_installed(python: list[str], site: Path, env: dict[str, str], work: Path) -> str:
    """``--version`` from the metadata; the extension loaded from ``site``; the README's example.
    Returns the core's build string."""
    proc = _run(["epochlab", "--version"], env, work)
    assert proc.returncode == 0 and proc.stdout.strip() == f"epochlab {VERSION}", proc.stdout + proc.stderr
    probe = ("import importlib.metadata as m, epochlab, epochlab._core as c; "
             "print(m.version('epochlab'), epochlab.__version__, c.__file__); print(epochlab.BUILD)")
    proc = _run([*python, "-c", probe], env, work)
    assert proc.returncode == 0, proc.stderr
    first, build = proc.stdout.splitlines()
    meta, core_version, core_file = first.split()
    assert meta == core_version == VERSION
    assert Path(core_file).resolve().is_relative_to(site.resolve()), core_file
    example = _readme_python()
    assert len(example) >= 3
    proc = _run([*python, "-c", example[0][0]], env, work)
    assert proc.returncode == 0, proc.stderr
    printed = proc.stdout.splitlines()
    assert len(printed) == len(example)
    for line, (_, want) in zip(printed, example):
        assert want in line, (line, want)
    return build


def _walkthrough(env: dict[str, str], work: Path) -> None:
    """The README's walkthrough, verbatim, with the exit codes it states (as tests/test_readme.py)."""
    for line, code in walkthrough():
        command = line.split("#", 1)[0].strip()
        proc = _run(command, env, work)
        assert proc.returncode == code, f"{command}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr, command
        out = re.search(r"--out (\S+)", command)
        if out:
            assert (work / out.group(1)).exists(), f"{command}: {out.group(1)} was not written"
    finding = work / "runs" / "fuzz-g0" / "violations" / "inv-strongisr"
    for name in ("history.jsonl", "verdict.json"):
        assert (finding / name).read_bytes() == (work / "runs" / "replay-g0" / name).read_bytes()


@pytest.mark.parametrize("python", [p for _, p in INTERPRETERS] or ["none"],
                         ids=[i for i, _ in INTERPRETERS] or ["no-release-build"])
def test_the_wheel_works_without_rust(python: str, tmp_path: Path) -> None:
    wheel = _need_dist(WHEEL)
    default = python == _base_python()
    venv = _venv(python, tmp_path / "venv")
    env = _env(venv, rust=False)
    work = tmp_path / "work"
    work.mkdir()
    spec = f"{wheel}[spark]" if default else str(wheel)
    proc = _run(["python", "-m", "pip", "install", "--only-binary", "epochlab", spec], env, work, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Building wheel for epochlab" not in proc.stdout
    assert "(release, x86_64-linux)" in _check_installed([str(venv / "bin" / "python")], venv, env, work)
    _walkthrough(env, work)

    if default:  # the main job's command, short: local Spark, 40 runs of the default grid
        proc = _run(["epochlab", "campaign", "--runs", "40", "--master", "local[2]", "--out", "runs/campaign",
                     "--no-progress", "--json"], env, work, timeout=1800)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        summary = json.loads(proc.stdout)["summary"]
        assert summary["runs"] == summary["runs_executed"] == 40 and summary["errors"] == 0
        assert (work / "runs" / "campaign" / "report.md").read_text().strip()
        assert list((work / "runs" / "campaign" / "runs").rglob("*.parquet"))


def test_a_cpython_was_found() -> None:
    _need_dist(WHEEL)
    assert INTERPRETERS, "no CPython >= 3.11 with venv found"
    assert _base_python() in [p for _, p in INTERPRETERS]


def test_the_sdist_builds_where_cargo_is(tmp_path: Path) -> None:
    sdist = _need_dist(SDIST)
    venv = _venv(_base_python(), tmp_path / "venv")
    env = _env(venv, rust=True)
    if shutil.which("cargo", path=env["PATH"]) is None:
        pytest.fail("cargo is not on PATH: building the sdist needs Rust")
    work = tmp_path / "work"
    work.mkdir()
    # no cache: a wheel pip built from this sdist before must not stand in for this build
    proc = _run(["python", "-m", "pip", "install", "--no-cache-dir", str(sdist)], env, work, timeout=3600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Building wheel for epochlab" in proc.stdout, proc.stdout[-2000:]
    _check_installed([str(venv / "bin" / "python")], venv, env, work)
    proc = _run(["epochlab", "scenario", "run", "seed-004-kip101-problem-1", "--out", "run"], env, work)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (work / "run").is_dir()


def test_the_aarch64_wheel_under_emulation(tmp_path: Path) -> None:
    """The aarch64 wheel with its dependencies for that platform, on Debian's arm64 CPython 3.11
    under qemu-user (``EPOCHLAB_AARCH64_SYSROOT``, which scripts/build-wheels --check prepares
    when it built that wheel): ``--version``, the README's example and the walkthrough, on one
    core."""
    _need_dist(WHEEL)
    sysroot = os.environ.get("EPOCHLAB_AARCH64_SYSROOT", "")
    wheel = Path(DIST) / WHEEL.replace("x86_64", "aarch64")
    if not wheel.is_file():
        pytest.skip(f"no aarch64 wheel in {DIST} (built with --arch x86_64)")
    if not sysroot:
        pytest.fail("an aarch64 wheel but no EPOCHLAB_AARCH64_SYSROOT to run it (scripts/build-wheels --check sets it)")
    root = Path(sysroot)
    qemu, python = root / "usr" / "bin" / "qemu-aarch64-static", root / "usr" / "bin" / "python3.11"
    site, bindir, work = tmp_path / "site", tmp_path / "bin", tmp_path / "work"
    bindir.mkdir()
    work.mkdir()
    env = _env(tmp_path / "no-venv", rust=False)
    del env["VIRTUAL_ENV"]
    proc = _run([sys.executable, "-m", "pip", "install", "--target", str(site), "--platform", "manylinux2014_aarch64",
                 "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311",
                 "--only-binary", ":all:", str(wheel)], env, work, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # one core (taskset): qemu-user without binfmt_misc cannot start the aarch64 worker processes
    # of a process pool, so the fuzzer must take its serial path, as on a one-core machine
    taskset = shutil.which("taskset")
    assert taskset, "taskset (util-linux) is needed to pin the emulated interpreter to one core"
    emulated = [taskset, "-c", "0", str(qemu), "-L", str(root), str(python)]
    (bindir / "epochlab").write_text("#!/bin/sh\nexec " + " ".join(emulated) + ' -m epochlab "$@"\n')
    (bindir / "epochlab").chmod(0o755)
    env["PATH"] = os.pathsep.join([str(bindir), env["PATH"]])
    env["PYTHONPATH"] = str(site)
    assert "(release, aarch64-linux)" in _check_installed(emulated, site, env, work)
    _walkthrough(env, work)
