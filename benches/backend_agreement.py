"""Do the simulator's backends agree on the fuzzer's own schedules?

The simulator has a product backend (``rust``: the Rust replicas, log, kernel, network, fetch
plane, change watch and incremental checks) and an all-Python oracle (``reference``: the
Python replica over the pure-Python log, the Python kernel and network, the brokers' own
fetcher, the plain checker). ``tests/test_backends_differential.py``
holds them to the same runs on the built-in scenarios and on short hypothesis-drawn action
lists; this script does the same on the random engine's schedules, which are longer and use
every fault class of a profile (link delays, loss, duplication, controller failovers,
transactions, consumer groups...), over every generation.

For each generation and each run number ``i`` of ``--runs``, the schedule is the random
engine's run ``i`` of campaign ``--seed`` (``epochlab.fuzz.campaign.run_seed``,
``epochlab.fuzz.generator.generate_schedule``); it runs on every backend named and the
*fingerprint* is compared: the history (every client operation), the verdict (every invariant
and its outcome), the final state, every engine event and the end time. Any difference is a
porting bug of one backend; the first schedules that differ are written to ``--out`` (replay
them with ``epochlab replay FILE --backend B``) and the exit code is 1.

    python benches/backend_agreement.py --runs 200 --seed 1 --json
    python benches/backend_agreement.py --runs 200 --seed 1 --transactions --out /tmp/diffs

Exit 0 when every run agrees, 1 when one differs, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from epochlab.fuzz.campaign import run_seed
from epochlab.fuzz.executor import execute
from epochlab.fuzz.generator import FuzzProfile, generate_schedule
from epochlab.generations import Generation

BACKENDS = ("rust", "reference")


def fingerprint(schedule: Any, backend: str) -> tuple[str, bool]:
    """A hash of everything the run did on ``backend`` and whether it broke an invariant."""
    result = execute(schedule, backend=backend)
    blob = json.dumps({"history": result.history_jsonl, "verdict": result.verdict_json(),
                       "state": result.final_state, "events": result.events, "end_ms": result.end_ms},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest(), not result.verdict.ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100, help="schedules per generation (default 100)")
    parser.add_argument("--seed", type=int, default=1, help="the random engine's campaign seed (default 1)")
    parser.add_argument("--generations", nargs="+", default=[g.label for g in Generation],
                        help="generations to run (default: all)")
    parser.add_argument("--backends", nargs="+", default=["rust", "reference"], choices=BACKENDS,
                        help="backends to compare (default: rust reference)")
    parser.add_argument("--transactions", action="store_true", help="the profile with transactions on")
    parser.add_argument("--out", type=Path, default=None, help="directory for the schedules that differ")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs: expected a positive integer")
    if len(args.backends) < 2:
        parser.error("--backends: name at least two")
    try:
        generations = [Generation.parse(g) for g in args.generations]
    except Exception as exc:  # a typed ConfigError naming the generation
        parser.error(f"--generations: {exc}")
    profile = FuzzProfile().with_transactions() if args.transactions else FuzzProfile()
    started = time.monotonic()
    per_generation: dict[str, dict[str, Any]] = {}
    differing: list[dict[str, Any]] = []
    for generation in generations:
        agree = violations = 0
        for run in range(args.runs):
            seed = run_seed(args.seed, run)
            schedule = generate_schedule(seed, generation, profile)
            prints = [fingerprint(schedule, b) for b in args.backends]
            if all(p == prints[0] for p in prints[1:]):
                agree += 1
                violations += prints[0][1]
                continue
            entry = {"generation": generation.label, "run": run, "run_seed": seed,
                     "fingerprints": {b: p[0][:16] for b, p in zip(args.backends, prints)}}
            if args.out is not None:
                args.out.mkdir(parents=True, exist_ok=True)
                path = args.out / f"{generation.label}-run{run:05d}.json"
                path.write_text(json.dumps(schedule.to_dict(), indent=1, sort_keys=True) + "\n")
                entry["schedule"] = str(path)
            differing.append(entry)
        per_generation[generation.label] = {"runs": args.runs, "agree": agree,
                                            "violating_runs": violations}
    summary = {"seed": args.seed, "runs_per_generation": args.runs, "backends": args.backends,
               "transactions": args.transactions, "generations": per_generation,
               "differing": differing, "seconds": round(time.monotonic() - started, 1)}
    if args.json:
        print(json.dumps(summary, indent=1, sort_keys=True))
    else:
        for name, row in per_generation.items():
            print(f"{name:16} {row['agree']}/{row['runs']} agree ({row['violating_runs']} with a violation)")
        for entry in differing:
            print(f"DIFFERS {entry['generation']} run {entry['run']} (seed {entry['run_seed']}) "
                  f"{entry.get('schedule', '')}")
        print(f"{summary['seconds']} s")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
