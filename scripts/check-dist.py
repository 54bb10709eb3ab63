"""Checks what scripts/build-wheels left in a dist directory, with tools rather than by reading
names: `auditwheel show --json` (the platform tag the wheel's binary is consistent with, its
external libraries), `abi3audit --strict` (every CPython symbol the extension uses is in the
stable ABI of the floor it claims), `twine check` (the metadata PyPI would render), each wheel's
WHEEL and METADATA files and its extension's ELF header, and the sdist's PKG-INFO and files.
Then it prints each file's size and, for an x86_64 wheel on an x86_64 machine, the time of
`import epochlab` in a fresh virtualenv with that wheel installed.

    python scripts/check-dist.py DIST --version V --arch x86_64 [aarch64] [--sdist]

Run with the interpreter of the build tools' virtualenv (target/wheel-tools). Exit 0 when every
check holds, 1 when one fails (each failure is printed), 2 for a missing file or tool.
"""

from __future__ import annotations

import argparse
import email.parser
import json
import platform
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

FLOOR = "3.11"  # the abi3 floor: pyo3's abi3-py311 feature, requires-python >=3.11
PLATFORM = {"x86_64": "manylinux_2_17_x86_64", "aarch64": "manylinux_2_17_aarch64"}
ELF_MACHINE = {"x86_64": 0x3E, "aarch64": 0xB7}
TOOLS = Path(sys.executable).parent


def wheel_name(version: str, arch: str) -> str:
    return f"epochlab-{version}-cp311-abi3-manylinux2014_{arch}.manylinux_2_17_{arch}.whl"


def run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def check_wheel(path: Path, version: str, arch: str) -> list[str]:
    problems = []
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        dist_info = f"epochlab-{version}.dist-info"
        wheel = email.parser.Parser().parsestr(zf.read(f"{dist_info}/WHEEL").decode())
        meta = email.parser.Parser().parsestr(zf.read(f"{dist_info}/METADATA").decode())
        so = [n for n in names if n.startswith("epochlab/_core") and n.endswith(".so")]
        elf = zf.read(so[0])[:20] if len(so) == 1 else b""
    tags = set(wheel.get_all("Tag") or [])
    want = {f"cp311-abi3-manylinux2014_{arch}", f"cp311-abi3-manylinux_2_17_{arch}"}
    if tags != want:
        problems.append(f"WHEEL tags {sorted(tags)}, expected {sorted(want)}")
    if wheel.get("Root-Is-Purelib", "").strip().lower() != "false":
        problems.append("WHEEL says Root-Is-Purelib is not false")
    if meta.get("Version") != version:
        problems.append(f"METADATA Version {meta.get('Version')}, expected {version} (Cargo.toml)")
    if meta.get("Requires-Python") != f">={FLOOR}":
        problems.append(f"METADATA Requires-Python {meta.get('Requires-Python')}, expected >={FLOOR}")
    if len(so) != 1 or so[0] != "epochlab/_core.abi3.so":
        problems.append(f"expected one extension epochlab/_core.abi3.so, found {so}")
    elif elf[:4] != b"\x7fELF" or int.from_bytes(elf[18:20], "little") != ELF_MACHINE[arch]:
        problems.append(f"{so[0]} is not an ELF file for {arch}")
    for name in ("epochlab/__init__.py", "epochlab/cli.py", "epochlab/py.typed", "epochlab/_core.pyi"):
        if name not in names:
            problems.append(f"{name} is missing")

    audit = run(str(TOOLS / "auditwheel"), "show", "--json", str(path))
    if audit.returncode != 0:
        problems.append(f"auditwheel show failed: {audit.stderr.strip()[-500:]}")
    else:
        report = json.loads(audit.stdout)
        if report["overall_tag"] != PLATFORM[arch] or report["sym_tag"] != PLATFORM[arch]:
            problems.append(f"auditwheel: consistent with {report['overall_tag']}, expected {PLATFORM[arch]}")
        if report["external_libs"] or report["unsupported_isa"] or report["pure"]:
            problems.append(f"auditwheel: external libraries {report['external_libs']}, "
                            f"unsupported ISA {report['unsupported_isa']}, pure {report['pure']}")
        symbols = {lib: sorted(v) for lib, v in report["versioned_symbols"].items()}
        print(f"  auditwheel show: {report['overall_tag']}; versioned symbols {symbols}; "
              f"external libraries: none")

    abi3 = run(str(TOOLS / "abi3audit"), "--strict", "--report", "--assume-minimum-abi3", FLOOR, str(path))
    try:
        results = [ext["result"] for spec in json.loads(abi3.stdout)["specs"].values() for ext in spec["wheel"]]
    except (ValueError, KeyError):
        results = []
    if abi3.returncode != 0 or not results:
        problems.append(f"abi3audit failed (exit {abi3.returncode}): {abi3.stdout[-300:]} {abi3.stderr[-300:]}")
    else:
        for r in results:
            if not (r["is_abi3"] and r["is_abi3_baseline_compatible"]) or r["non_abi3_symbols"]:
                problems.append(f"abi3audit: {r}")
        print(f"  abi3audit --strict: abi3, computed floor {results[0]['computed']}, "
              f"no non-abi3 symbols")
    return problems


def check_sdist(path: Path, version: str) -> list[str]:
    problems = []
    top = f"epochlab-{version}"
    with tarfile.open(path) as tf:
        names = set(tf.getnames())
        info = tf.extractfile(f"{top}/PKG-INFO")
        meta = email.parser.Parser().parsestr(info.read().decode()) if info else None
    for name in ("PKG-INFO", "pyproject.toml", "Cargo.toml", "Cargo.lock", "README.md",
                 "src/lib.rs", "src/bindings/mod.rs", "python/epochlab/__init__.py"):
        if f"{top}/{name}" not in names:
            problems.append(f"sdist: {name} is missing")
    built = sorted(n for n in names if n.endswith((".so", ".whl")) or "/target/" in n)
    if built:
        problems.append(f"sdist: build outputs inside: {built[:5]}")
    if meta is None or meta.get("Version") != version or meta.get("Requires-Python") != f">={FLOOR}":
        problems.append(f"sdist: PKG-INFO Version/Requires-Python {meta and meta.get('Version')}, "
                        f"{meta and meta.get('Requires-Python')}")
    print(f"  {len(names)} files")
    return problems


def import_time(wheel: Path) -> str:
    """`import epochlab` in a fresh virtualenv with the wheel and its dependencies (from PyPI)."""
    with tempfile.TemporaryDirectory(prefix="epochlab-import-") as tmp:
        venv = Path(tmp) / "venv"
        base = Path(getattr(sys, "_base_executable", sys.executable))
        made = run(str(base), "-m", "venv", str(venv))
        python = venv / "bin" / "python"
        pip = run(str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel))
        if made.returncode or pip.returncode:
            return f"not measured: the install failed: {made.stderr[-300:]} {pip.stderr[-300:]}"
        cumulative, core, wall = [], [], []
        for _ in range(7):
            proc = run(str(python), "-X", "importtime", "-c", "import epochlab")
            for line in proc.stderr.splitlines():  # "import time: self | cumulative | name"
                found = re.match(r"import time:\s*(\d+) \|\s*(\d+) \|\s*(\S+)$", line)
                if found and found[3] == "epochlab":
                    cumulative.append(int(found[2]))
                if found and found[3] == "epochlab._core":
                    core.append(int(found[1]))
            timed = run(str(python), "-c", "import time; t = time.perf_counter(); import epochlab; "
                        "print(time.perf_counter() - t)")
            wall.append(float(timed.stdout))
        version = run(str(python), "-c", "import platform; print(platform.python_version())").stdout.strip()
    return (f"{statistics.median(cumulative) / 1000:.1f} ms cumulative by -X importtime "
            f"(of which the extension module epochlab._core {statistics.median(core) / 1000:.1f} ms), "
            f"{statistics.median(wall) * 1000:.1f} ms measured around the import statement; "
            f"medians of 7 fresh processes, CPython {version}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("dist", type=Path)
    parser.add_argument("--version", required=True)
    parser.add_argument("--arch", nargs="+", choices=sorted(PLATFORM), required=True)
    parser.add_argument("--sdist", action="store_true")
    args = parser.parse_args()
    for tool in ("auditwheel", "abi3audit", "twine"):
        if not (TOOLS / tool).exists():
            print(f"check-dist: {tool} is not installed beside {sys.executable}", file=sys.stderr)
            return 2
    files = [args.dist / wheel_name(args.version, arch) for arch in args.arch]
    if args.sdist:
        files.append(args.dist / f"epochlab-{args.version}.tar.gz")
    missing = [str(f) for f in files if not f.exists()]
    others = sorted(str(p) for p in args.dist.glob("epochlab-*") if p not in files)
    if missing:
        print(f"check-dist: not built: {missing}; in {args.dist}: {others}", file=sys.stderr)
        return 2
    problems: list[str] = []
    if others:
        problems.append(f"unexpected files beside the release: {others}")
    for arch, path in zip(args.arch, files):
        print(f"{path.name}")
        problems += [f"{path.name}: {p}" for p in check_wheel(path, args.version, arch)]
    if args.sdist:
        print(files[-1].name)
        problems += check_sdist(files[-1], args.version)
    twine = run(str(TOOLS / "twine"), "check", "--strict", *map(str, files))
    if twine.returncode != 0:
        problems.append(f"twine check --strict: {twine.stdout[-800:]} {twine.stderr[-300:]}")
    else:
        print(f"twine check --strict: {len(files)} files PASSED")
    print("sizes:")
    for path in files:
        print(f"  {path.name}: {path.stat().st_size:,} bytes ({path.stat().st_size / 2**20:.2f} MiB)")
    if "x86_64" in args.arch and platform.machine() == "x86_64":
        print(f"import epochlab: {import_time(files[args.arch.index('x86_64')])}")
    for p in problems:
        print(f"FAILED: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
