"""How often a bug's mechanism comes without the bug, and how often the guided engine's mutants
of such a run reach the bug: the measurement behind the engine-event features
(``epochlab.fuzz.guided.event_feature``, ``docs/fuzzing.md``, "Engine events").

It executes the first ``--runs`` schedules of the random engine for campaign seed ``--seed``
(run seeds ``run_seed(seed, i)``) and counts the runs that show the catalogued bug's witness
(``epochlab.checks.catalogue.WITNESSES``: the mechanism, an engine event) and the runs that
match the bug. Then, for each run with the witness and no match, it makes ``--mutants``
mutants focused on the action the first witnessing event followed (``guided.mutate`` with that
focus) and as many pokes at the event's time (``guided.poke``), as the rare arm does with an
engine event it targets, runs them, and counts again::

    python benches/guided_mechanism.py --generation kip-101 \\
        --config benches/profiles/off-by-default-steps.json --runs 300 --seed 11 \\
        --bug "KAFKA-6082 (KAFKA-3083)" --mutants 8

Every draw comes from ``random.Random(--seed)``: the counts are a function of the arguments.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from typing import Any

from epochlab.checks.catalogue import BUGS, WITNESSES, match
from epochlab.errors import EpochlabError, ScheduleError
from epochlab.fuzz.campaign import run_seed
from epochlab.fuzz.executor import execute
from epochlab.fuzz.generator import generate_schedule, load_profile
from epochlab.fuzz.guided import event_marks, mutate, poke
from epochlab.fuzz.schedule import Schedule
from epochlab.generations import Generation


def measure(generation: Generation, profile: Any, seed: int, runs: int, bug: str, mutants: int) -> dict[str, Any]:
    shows = WITNESSES[next(b.witness for b in BUGS if b.id == bug)][1]

    def matched(result: Any) -> bool:
        return any(b.id == bug for v in result.verdict.protocol_violations
                   for b in match(generation, v.invariant, result.events))

    counts: Counter[str] = Counter()
    parents = []
    for i in range(runs):
        schedule = generate_schedule(run_seed(seed, i), generation, profile)
        result = execute(schedule)
        hit, witness = matched(result), shows(result.events)
        counts["fresh"] += 1
        counts["fresh witness"] += witness
        counts["fresh match"] += hit
        if witness and not hit:
            first = next(e for e in result.events if shows([e]))
            (_, _, step, at_ms), = event_marks([first], [a.at_ms for a in schedule.actions])
            parents.append((schedule.to_dict(), step, at_ms))
    rng = random.Random(seed)
    for data, step, at_ms in parents:
        for _ in range(mutants):
            for kind in ("mutant", "poke"):
                child = mutate(data, data, rng, profile, step) if kind == "mutant" else poke(data, rng, at_ms)
                try:
                    schedule = Schedule.from_dict(child, "mutant")
                except ScheduleError:  # the validator refused it: the engine runs a fresh one
                    continue
                result = execute(schedule)
                counts[kind] += 1
                counts[f"{kind} witness"] += shows(result.events)
                counts[f"{kind} match"] += matched(result)
    return {"generation": generation.label, "seed": seed, "runs": runs, "bug": bug,
            "witness_runs_without_match": len(parents), "counts": dict(sorted(counts.items()))}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generation", required=True)
    ap.add_argument("--config", help="fuzz profile (JSON)")
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--bug", required=True, help="a catalogued bug with a witness")
    ap.add_argument("--mutants", type=int, default=8, help="mutants and pokes per witnessing run")
    args = ap.parse_args(argv)
    try:
        generation = Generation.parse(args.generation)
        profile = load_profile(args.config)
    except EpochlabError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not any(b.id == args.bug and b.witness for b in BUGS):
        print(f"error: --bug: {args.bug!r} is not a catalogued bug with a witness (one of "
              f"{', '.join(sorted(b.id for b in BUGS if b.witness))})", file=sys.stderr)
        return 2
    if args.runs < 1 or args.mutants < 0:
        print("error: --runs must be at least 1 and --mutants at least 0", file=sys.stderr)
        return 2
    print(json.dumps(measure(generation, profile, args.seed, args.runs, args.bug, args.mutants), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
