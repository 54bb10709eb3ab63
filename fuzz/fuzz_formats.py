"""Hostile inputs for every file format epochlab reads: scenario TOML, fuzz schedule
JSON, fuzz profile JSON, campaign grid TOML/JSON, leader-epoch checkpoint text and Parquet
trace files.

Each input starts from a valid file of its format and is damaged by a few mutations the
fuzzer's bytes choose: flipped, inserted or deleted bytes, a number replaced by an extreme one
(``10**18``, ``-1``, ``2**63``, ``1e308``, ``NaN``), a value replaced by one of another type
(list, table, string, ``true``), deep nesting, truncation, invalid UTF-8. The loader must
either accept the input or raise an :class:`epochlab.errors.EpochlabError` subclass; anything
else (``TypeError``, ``KeyError``, ``RecursionError``, ``UnicodeDecodeError``, a
``PanicException``, a hang caught by libFuzzer's ``-timeout``) is a crash
(:class:`HarnessFailure`).

With atheris (coverage-guided)::

    python fuzz/fuzz_formats.py -atheris_runs=1000000 fuzz/corpus/formats

Without it, a seeded loop over random bytes (the long hostile-input campaign,
``fuzz/hostile.py``, runs it; ``--runs`` inputs, a count per format at the end)::

    python fuzz/fuzz_formats.py --runs 1000000 --seed 1
"""

from __future__ import annotations

import atexit
import json
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _atheris import instrumentation  # noqa: E402 - this folder is on sys.path

with instrumentation(__name__ == "__main__" and "--runs" not in sys.argv):
    from epochlab.errors import EpochlabError
    from epochlab.fuzz.generator import FuzzProfile, generate_schedule

from fuzz_core_api import HarnessFailure  # noqa: E402


EXTREMES = [b"1000000000000000000", b"-1", b"9223372036854775808", b"1e308", b"NaN", b"-0",
            b"18446744073709551616", b"2147483648", b"0", b"\"1\"", b"true", b"[]", b"{}",
            b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
            b"\"\xff\xfe\"", b"null", b"\"\"", b"1.5", b"inf"]


def _valid_inputs() -> dict[str, bytes]:
    from epochlab.scenarios import builtin_text

    profile = FuzzProfile(actions=8)
    return {
        "scenario": builtin_text("seed-004-kip101-problem-1").encode(),
        "schedule": generate_schedule(7, "strict-min-isr", FuzzProfile(actions=12).with_transactions()).to_json().encode(),
        "profile": json.dumps(profile.to_dict()).encode(),
        "grid-toml": b'[axes]\nacks = ["1", "all"]\n"min.insync.replicas" = [1, 2]\ngeneration = ["strict-min-isr"]\n'
                     b'[faults]\n"leader-crash" = 2\n[cluster]\n"session.timeout.ms" = 6000\n',
        "grid-json": json.dumps({"axes": {"acks": ["all"], "replication.factor": [3]},
                                 "faults": {"follower-lag": 1}}).encode(),
        "checkpoint": b"0\n3\n0 0\n2 15\n5 40\n",
        "trace-parquet": _parquet_trace(),
    }


def _parquet_trace() -> bytes:
    from epochlab import trace

    path = trace.write_trace(trace.generate(40, leader_changes=3, seed=5, crash_every=4),
                             _DIR / "valid.parquet", row_group_rows=16)
    return path.read_bytes()


VALID: dict[str, bytes] = {}
FORMATS = ["scenario", "schedule", "profile", "grid-toml", "grid-json", "checkpoint", "trace-parquet"]
_DIR = Path(tempfile.mkdtemp(prefix="epochlab-fuzz-formats-"))
atexit.register(shutil.rmtree, _DIR, True)   # the files each input is written to


def mutate(data: bytes, choices: Callable[[int], int]) -> bytes:
    """A few mutations of ``data``, each picked by ``choices(n)`` (an int in ``[0, n)``)."""
    out = bytearray(data)
    for _ in range(1 + choices(4)):
        at = choices(len(out) + 1) if out else 0
        kind = choices(8)
        if kind == 0 and out:
            out[min(at, len(out) - 1)] ^= 1 << choices(8)
        elif kind == 1:
            out[at:at] = bytes([choices(256)])
        elif kind == 2 and out:
            del out[at:at + 1 + choices(8)]
        elif kind == 3:
            # replace the number under or after `at` by an extreme value
            start = at
            while start < len(out) and not (48 <= out[start] <= 57):
                start += 1
            end = start
            while end < len(out) and (48 <= out[end] <= 57 or out[end] in b"._"):
                end += 1
            out[start:end] = EXTREMES[choices(len(EXTREMES))]
        elif kind == 4:
            out[at:at] = EXTREMES[choices(len(EXTREMES))]
        elif kind == 5:
            del out[at:]
        elif kind == 6:
            depth = 1 + choices(4) * 400
            out[at:at] = b"[" * depth + b"]" * depth
        else:
            out[at:at] = b"\xff\xc3("
    return bytes(out)


def load(fmt: str, data: bytes) -> None:
    """Read ``data`` as ``fmt`` the way the CLI does (from a file)."""
    suffix = {"scenario": ".toml", "grid-toml": ".toml", "trace-parquet": ".parquet",
              "checkpoint": ""}.get(fmt, ".json")
    path = _DIR / f"input{suffix}"
    path.write_bytes(data)
    if fmt == "scenario":
        from epochlab.scenarios import load_file

        load_file(path)
    elif fmt == "schedule":
        from epochlab.fuzz import load_schedule

        load_schedule(path)
    elif fmt == "profile":
        from epochlab.fuzz.generator import load_profile

        load_profile(path)
    elif fmt in ("grid-toml", "grid-json"):
        from epochlab.campaigns.grid import load_grid

        load_grid(path)
    elif fmt == "checkpoint":
        import epochlab._core as core

        core.LeaderEpochCache.read_checkpoint(str(path))
    else:
        from epochlab import trace

        report = trace.replay(path)   # a damaged part ends the replay with report.error
        if report.error is not None and not isinstance(report.error, EpochlabError):
            raise HarnessFailure(f"trace: report.error is {type(report.error).__name__}")


def check_one(fmt: str, data: bytes) -> str:
    """``"ok"`` or ``"refused"``; any other outcome raises :class:`HarnessFailure`."""
    try:
        load(fmt, data)
    except EpochlabError:
        return "refused"
    except Exception as exc:  # noqa: BLE001 - that is the finding
        raise HarnessFailure(f"{fmt}: {type(exc).__name__}: {exc!s:.300} on input {data[:200]!r}") from exc
    return "ok"


def test_one_input(data: bytes) -> None:
    if not VALID:
        VALID.update(_valid_inputs())
    if len(data) < 2:
        return
    fmt = FORMATS[data[0] % len(FORMATS)]
    rng = random.Random(data[1:])
    check_one(fmt, mutate(VALID[fmt], lambda n: rng.randrange(n) if n > 1 else 0))


def campaign(runs: int, seed: int) -> Counter[tuple[str, str]]:
    """The plain loop: ``runs`` inputs, formats in turn, mutations from ``random.Random(seed)``."""
    VALID.update(_valid_inputs())
    rng = random.Random(seed)
    counts: Counter[tuple[str, str]] = Counter()
    for i in range(runs):
        fmt = FORMATS[i % len(FORMATS)]
        counts[(fmt, check_one(fmt, mutate(VALID[fmt], lambda n: rng.randrange(n) if n > 1 else 0)))] += 1
    return counts


def main() -> None:
    if "--runs" in sys.argv:
        runs = int(sys.argv[sys.argv.index("--runs") + 1])
        seed = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else 0
        start = time.monotonic()
        counts = campaign(runs, seed)
        print(json.dumps({"runs": runs, "seed": seed, "seconds": round(time.monotonic() - start, 1),
                          "crashes": 0, "by_format": {f"{f} {o}": n for (f, o), n in sorted(counts.items())}},
                         indent=1))
        return
    import atheris

    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
