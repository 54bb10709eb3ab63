"""How often the guided engine's runs reach the broker state behind the re-elected KRaft
leader: a live leader that believes a follower holds more than that follower's log does (the
broker coverage tuple's leader code with bit 4, ``epochlab.fuzz.coverage.broker_codes``).
An analysis of a search, not part of it: it tells reaching that state apart from going on
from it to a lost write.

    python benches/guided_stale_leader_reach.py --runs 3000 --seed 1

Prints the runs that reached such a tuple, by the arm that made their schedule, the first
such run, the runs that reached each of those tuples, the runs that reached one whose
follower had no fetch in flight to correct the belief (bit 8), and the runs that reached one
whose HW can advance on the belief: the leader the controller names in its epoch, with an ISR
of min.insync.replicas or more, and that follower in its maximal ISR (bit 16).
"""

from __future__ import annotations

import argparse
import collections
from typing import Any

from epochlab.fuzz.coverage import broker_tuples
from epochlab.fuzz.guided import GuidedSearch
from epochlab.generations import Generation

#: every broker tuple whose leader code has bit 4 (``broker_codes``)
STALE_LEADER = broker_tuples(4)
#: those whose leader code has bit 8 too: that follower has no fetch in flight
IDLE = broker_tuples(4 | 8)
#: those of the leader the controller names in its epoch, with an ISR of min.insync.replicas
#: or more, about a follower of its maximal ISR (bit 16): the ones whose HW can advance on the
#: belief
CURRENT = broker_tuples(4 | 16, current_leader=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--generation", default="strict-min-isr")
    args = parser.parse_args()
    search = GuidedSearch(Generation.parse(args.generation), seed=args.seed, seconds=None, runs=args.runs)
    by_arm: collections.Counter[str] = collections.Counter()
    first: list[int] = []
    idle: list[int] = []
    near: list[int] = []
    merge = search._merge

    def counted(run: int, data: dict[str, Any], features: list[int], *rest: Any) -> None:
        if STALE_LEADER.intersection(features):
            by_arm[data["origin"]["arm"]] += 1
            first.append(run)
        if IDLE.intersection(features):
            idle.append(run)
        if CURRENT.intersection(features):
            near.append(run)
        merge(run, data, features, *rest)

    search._merge = counted  # type: ignore[method-assign]
    search.run()
    reached = sorted(search.hits[f] for f in STALE_LEADER.intersection(search.hits))
    print(f"{args.generation} seed {args.seed}, {args.runs} runs: {sum(by_arm.values())} runs reached a "
          f"stale-follower leader tuple (by arm: {dict(sorted(by_arm.items()))}), first at run "
          f"{first[0] if first else None}; {len(reached)} such tuples, runs per tuple {reached}; "
          f"{len(idle)} runs with that follower fetching nothing (first at run {idle[0] if idle else None}); "
          f"{len(near)} runs reached one of the controller's current leader about a follower of its maximal ISR "
          f"(first at run {near[0] if near else None}); {len(search.findings)} findings")


if __name__ == "__main__":
    main()
