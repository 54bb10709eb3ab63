"""One version, written once: Cargo.toml's ``version`` (pyproject.toml declares it dynamic, and
maturin copies it into the package's metadata, which ``epochlab --version`` prints). One abi3
floor, stated alike by the metadata, the Rust build, the release checks and the README. The
docs name the wheel the release build (scripts/build-wheels) makes."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import epochlab
import epochlab._core
import epochlab.reference

ROOT = Path(__file__).resolve().parents[1]
CARGO = tomllib.loads((ROOT / "Cargo.toml").read_text())
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
VERSION = CARGO["package"]["version"]


def release_wheel(arch: str) -> str:
    return f"epochlab-{VERSION}-cp311-abi3-manylinux2014_{arch}.manylinux_2_17_{arch}.whl"


def test_the_version_is_written_once() -> None:
    assert "version" not in PROJECT and "version" in PROJECT["dynamic"]
    written = [p for p in ("python/epochlab/__init__.py", "python/epochlab/cli.py",
                           "python/epochlab/reference/_build.py")
               if re.search(r"""__version__\s*=\s*["']\d""", (ROOT / p).read_text())]
    assert written == []


def test_every_version_is_the_metadata_version() -> None:
    assert importlib.metadata.version("epochlab") == VERSION
    assert epochlab.__version__ == epochlab._core.__version__ == epochlab.reference.__version__ == VERSION
    assert f"epochlab {VERSION} (" in epochlab.BUILD
    assert f"epochlab.reference {VERSION} (" in epochlab.reference.BUILD


def test_the_command_prints_the_version() -> None:
    proc = subprocess.run([sys.executable, "-m", "epochlab", "--version"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stdout == f"epochlab {VERSION}\n", proc.stdout + proc.stderr


def test_the_abi3_floor_is_stated_alike() -> None:
    assert PROJECT["requires-python"] == ">=3.11"
    assert "abi3-py311" in CARGO["dependencies"]["pyo3"]["features"]
    minors = sorted(int(c.rsplit(".", 1)[1]) for c in PROJECT["classifiers"]
                    if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c))
    assert minors and minors[0] == 11
    assert 'FLOOR = "3.11"' in (ROOT / "scripts" / "check-dist.py").read_text()
    assert "FLOOR = (3, 11)" in (ROOT / "tests" / "test_release_install.py").read_text()
    assert "Python 3.11 or newer" in (ROOT / "README.md").read_text()


def test_the_docs_name_the_release_wheels() -> None:
    readme = (ROOT / "README.md").read_text()
    campaigns = (ROOT / "docs" / "campaigns.md").read_text()
    assert release_wheel("x86_64") in readme and "scripts/build-wheels" in readme
    assert release_wheel("x86_64") in campaigns and release_wheel("aarch64") in campaigns
    for text in (readme, campaigns):
        assert not re.search(r"manylinux_2_(?!17(?!\d))\d+", text), "a wheel name the local build happened to get"
    assert release_wheel("x86_64") in (ROOT / "tests" / "test_release_install.py").read_text().replace(
        "{VERSION}", VERSION)
