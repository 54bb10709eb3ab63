#!/usr/bin/env python3
"""Re-measure the runs-to-first-violation table of ``docs/fuzzing.md``.

For each generation and campaign seed, the random engine runs generated 100-action schedules
(default profile) until the first protocol violation (no shrinking) and reports which invariant
it was, after how many runs and seconds. Prints one markdown row per generation:

    python scripts/fuzz-table.py --generations hw-truncation kip-101 kip-279 --seeds 1 2 3 4 5

The wall clock is used for the figures only; the runs themselves are deterministic.
"""

from __future__ import annotations

import argparse
import statistics

from epochlab.fuzz.campaign import Campaign
from epochlab.fuzz.generator import FuzzProfile
from epochlab.generations import Generation


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", nargs="+", default=["hw-truncation", "kip-101", "kip-279"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    parser.add_argument("--seconds", type=float, default=300.0, help="budget per seed")
    args = parser.parse_args()
    print("| generation | first violation per seed | runs to first | median runs | seconds | median s |")
    print("|---|---|---|---|---|---|")
    for label in args.generations:
        generation = Generation.parse(label)
        runs, seconds, names = [], [], []
        for seed in args.seeds:
            campaign = Campaign(generation, FuzzProfile(), seed=seed, seconds=args.seconds,
                                until_found=True)
            findings = campaign.run()
            if findings:
                first = min(findings, key=lambda f: f.run)
                runs.append(first.run + 1)
                seconds.append(round(first.seconds, 1))
                names.append(first.violation.invariant)
            else:
                runs.append(None)
                seconds.append(None)
                names.append(f"none in {campaign.total_runs} runs")
        found_runs = [r for r in runs if r is not None]
        found_s = [s for s in seconds if s is not None]
        median_runs = statistics.median(found_runs) if found_runs else "-"
        median_s = statistics.median(found_s) if found_s else "-"
        print(f"| {generation.label} | {', '.join(names)} | {', '.join(str(r) for r in runs)} | "
              f"{median_runs} | {', '.join(str(s) for s in seconds)} | {median_s} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
