"""How often each kind of guided-engine schedule matches a catalogued bug: runs and matching
runs per *aim* (what the schedule's parent was picked for, ``origin["aim"]``: a fresh swarm
schedule, an energy pick, a rare state, a near miss, a poke, a protocol violation found
earlier), and the first run of each.

The bug-hunt benchmark (``benches/bench_bughunt.py``) counts the runs to a bug's *first*
match; this counts every match, so it shows which schedules find a bug at what rate, before
and after the first match::

    python benches/guided_aims.py --generation kip-101 \\
        --config benches/profiles/off-by-default-steps.json --runs 1500 --seed 11 \\
        --bugs "KAFKA-2334" "KAFKA-6082 (KAFKA-3083)"

With ``--generators`` it runs no search: it executes the first ``--runs`` schedules of the
random engine (``generate_schedule``) and of the guided engine's fresh arm
(``generate_swarm_schedule``) for each campaign seed (run seeds ``run_seed(seed, i)``, as the
engines draw them) and counts the matching runs of each, the rate a search starts from.

A match is the catalogue's (``epochlab.checks.catalogue.match``, witnesses checked on the
run's events), as in the benchmark. The search is ``GuidedSearch`` itself, unchanged; the
script only watches its merges and violations.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from typing import Any

from epochlab.checks.catalogue import BUGS, match
from epochlab.errors import EpochlabError
from epochlab.fuzz.generator import FuzzProfile, load_profile
from epochlab.fuzz.guided import GuidedSearch
from epochlab.generations import Generation


def aim_of(data: dict[str, Any]) -> str:
    return str(data.get("origin", {}).get("aim", "fresh"))


def measure(generation: Generation, profile: FuzzProfile, seed: int, runs: int,
            bugs: list[str]) -> dict[str, Any]:
    """Runs per aim and, per bug, the matching runs per aim (1-based run numbers)."""
    counts: Counter[str] = Counter()
    hits: dict[str, dict[str, list[int]]] = {b: defaultdict(list) for b in bugs}

    def noted(run: int, v: Any, data: dict[str, Any], events: Any) -> None:
        for bug in match(generation, v.invariant, events or []):
            if bug.id in hits and run + 1 not in hits[bug.id][aim_of(data)]:
                hits[bug.id][aim_of(data)].append(run + 1)

    search = GuidedSearch(generation, profile, seed=seed, seconds=None, runs=runs, on_violation=noted)
    merge = search._merge

    def counted(run: int, data: dict[str, Any], *rest: Any) -> None:
        counts[aim_of(data)] += 1
        merge(run, data, *rest)

    search._merge = counted  # type: ignore[method-assign]
    search.run()
    return {"generation": generation.label, "seed": seed, "runs": search.total_runs,
            "per_aim": dict(sorted(counts.items())),
            "bugs": {b: {aim: {"matching_runs": len(r), "rate": round(len(r) / counts[aim], 4),
                               "first": min(r)} for aim, r in sorted(h.items())}
                     for b, h in hits.items()}}


def generators(generation: Generation, profile: FuzzProfile, seed: int, runs: int,
               bugs: list[str]) -> dict[str, Any]:
    """Matching runs (1-based) per bug among the first ``runs`` schedules of each generator."""
    from epochlab.fuzz.campaign import run_seed
    from epochlab.fuzz.executor import execute, gc_for_many_runs
    from epochlab.fuzz.generator import generate_schedule
    from epochlab.fuzz.swarm import generate_swarm_schedule

    out: dict[str, Any] = {"generation": generation.label, "seed": seed, "runs": runs}
    for name, make in (("random", generate_schedule), ("swarm", generate_swarm_schedule)):
        found: dict[str, list[int]] = {b: [] for b in bugs}
        with gc_for_many_runs():
            for i in range(runs):
                result = execute(make(run_seed(seed, i), generation, profile))
                matched = {b.id for v in result.verdict.protocol_violations
                           for b in match(generation, v.invariant, result.events)}
                for b in bugs:
                    if b in matched:
                        found[b].append(i + 1)
        out[name] = {b: {"matching_runs": len(r), "first": r[0] if r else None} for b, r in found.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--generation", required=True)
    parser.add_argument("--config", help="a fuzz profile file (default: the default profile)")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--seed", type=int, nargs="+", default=[11])
    parser.add_argument("--bugs", nargs="+", required=True, help="catalogued bug ids")
    parser.add_argument("--generators", action="store_true",
                        help="no search: the first --runs schedules of each generator")
    args = parser.parse_args(argv)
    known = {b.id for b in BUGS}
    unknown = [b for b in args.bugs if b not in known]
    if unknown or args.runs < 1:
        print(f"guided_aims: unknown bug ids {unknown} (known: {sorted(known)})" if unknown
              else "guided_aims: --runs must be at least 1", file=sys.stderr)
        return 2
    try:
        generation = Generation.parse(args.generation)
        profile = load_profile(args.config) if args.config else FuzzProfile()
    except EpochlabError as e:
        print(f"guided_aims: {e}", file=sys.stderr)
        return 2
    for seed in args.seed:
        how = generators if args.generators else measure
        print(json.dumps(how(generation, profile, seed, args.runs, args.bugs)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
