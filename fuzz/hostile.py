"""The long hostile-input campaign, without atheris: a seeded loop that feeds random
inputs to the three harnesses of this folder and counts what happened.

* ``formats`` (``fuzz_formats.py``): every file format, valid files damaged by mutations;
* ``core_api`` (``fuzz_core_api.py``): call sequences on the Rust extension's Python API with
  the pure-Python reference as the oracle, junk arguments included;
* ``checkpoint`` (``fuzz_checkpoint.py``): leader-epoch-checkpoint text and raw bytes.

An input passes when the harness returns (the call was accepted, or refused with an epochlab
error, and core and reference agreed). A :class:`HarnessFailure` or any other exception is a
crash: the input is written to ``--artifacts`` and counted, and the loop goes on. A hang shows as
a run that never ends (the per-harness seconds are printed).

    python fuzz/hostile.py --runs 1000000 --seed 1
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzz_checkpoint  # noqa: E402
import fuzz_core_api  # noqa: E402
import fuzz_formats  # noqa: E402

HARNESSES = {"formats": fuzz_formats.test_one_input, "core_api": fuzz_core_api.test_one_input,
             "checkpoint": fuzz_checkpoint.test_one_input}
#: share of the runs per harness (formats are the slowest and the widest)
SHARE = {"formats": 0.5, "core_api": 0.3, "checkpoint": 0.2}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--artifacts", default="fuzz/artifacts")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    report: dict[str, dict[str, float]] = {}
    crashes = 0
    for name, run in HARNESSES.items():
        n = int(args.runs * SHARE[name])
        start = time.monotonic()
        failed = 0
        for _ in range(n):
            data = rng.randbytes(rng.choice((4, 16, 64, 256, 1024)))
            try:
                run(data)
            except Exception:  # noqa: BLE001 - every escape is a crash to keep
                failed += 1
                out = Path(args.artifacts)
                out.mkdir(parents=True, exist_ok=True)
                digest = hashlib.sha1(data).hexdigest()
                (out / f"{name}-{digest}").write_bytes(data)
                (out / f"{name}-{digest}.txt").write_text(traceback.format_exc())
        crashes += failed
        report[name] = {"inputs": n, "crashes": failed, "seconds": round(time.monotonic() - start, 1)}
        print(json.dumps({name: report[name]}), flush=True)
    print(json.dumps({"runs": sum(int(r["inputs"]) for r in report.values()), "seed": args.seed,
                      "crashes": crashes, "harnesses": report}, indent=1))
    return 1 if crashes else 0


if __name__ == "__main__":
    raise SystemExit(main())
