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
of min.insync.replicas or more, and that follower in its maximal ISR (bit 16); and the runs
that reached each step of the finding's way (bit 32, a leader cut from the controller): a
leader cut off, a zombie cut off in the controller's ISR, such a zombie holding a stale belief.

    python benches/guided_stale_leader_reach.py --runs 3000 --seed 1 --episodes

tells, besides, why the near misses seldom become the lost write: each run that reached one
is replayed on the reference backend, and every *episode* of such a belief (a leader, a
follower, from the first check that shows it to the first that does not) is classified by
what stood between it and a HW advance past the follower's log.
Each episode is counted once, by the first of these that held all the while it lasted (in this
order):

* ``zombie``: the controller named another leader or a newer epoch all along;
* ``outside ISR``: the follower was never in the leader's maximal ISR (its belief counts in no
  HW advance, ``Partition.maybeIncrementLeaderHW``);
* ``ISR below min``: the leader's committed ISR stayed below ``min.insync.replicas`` (no HW
  advance in strict-min-isr, KIP-966);
* ``member down``: another member of the maximal ISR was dead all along (its log end holds the
  HW);
* ``race``: none of those; the episode ended (the belief corrected, the leader gone) before a
  HW advance past the follower's log.

The counts are printed with how the episodes ended.
"""

from __future__ import annotations

import argparse
import collections
from typing import Any

from epochlab.fuzz.coverage import broker_tuple_codes, broker_tuples, is_zombie
from epochlab.fuzz.executor import Run
from epochlab.fuzz.guided import GuidedSearch
from epochlab.fuzz.schedule import Schedule
from epochlab.generations import Generation

#: every broker tuple whose leader code has bit 4 (``broker_codes``)
STALE_LEADER = broker_tuples(4)
#: those whose leader code has bit 8 too: that follower has no fetch in flight
IDLE = broker_tuples(4 | 8)
#: those of the leader the controller names in its epoch, with an ISR of min.insync.replicas
#: or more, about a follower of its maximal ISR (bit 16): the ones whose HW can advance on the
#: belief
CURRENT = broker_tuples(4 | 16, current_leader=True)
#: the steps of the finding's way (bit 32: a leader cut from the controller): a leader cut off,
#: a zombie cut off in the controller's ISR, and such a zombie holding a stale belief
CUT = broker_tuples(32)
CUT_ZOMBIE = frozenset(f for f, c in broker_tuple_codes(32).items() if is_zombie(c) and c[4] == 1)
CUT_ZOMBIE_STALE = frozenset(f for f, c in broker_tuple_codes(4 | 32).items() if is_zombie(c) and c[4] == 1)


KINDS = ("zombie", "outside ISR", "ISR below min", "member down", "race")


def episodes(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The near-miss episodes of one schedule's run (reference backend), each with the set
    of obstacles that held at every check of it and how it ended."""
    schedule = Schedule.from_dict(data, "near-miss")
    run = Run(schedule, "reference")
    c, checker = run.cluster, run.checker
    open_: dict[tuple[int, int], dict[str, Any]] = {}
    done: list[dict[str, Any]] = []

    def observe() -> None:
        leos = {b: br.replica.log.log_end_offset for b, br in c.brokers.items()}
        seen = set()
        for leader, broker in c.brokers.items():
            r = broker.replica
            if not (broker.alive and r.role == "leader"):
                continue
            for f, state in r.followers.items():
                known = state.log_end_offset
                if known is None or f not in leos or known <= leos[f] or f in checker.recovering:
                    continue
                seen.add((leader, f))
                held = set()
                if c.controller.leader != leader or c.controller.leader_epoch != r.leader_epoch:
                    held.add("zombie")
                if f not in r.maximal_isr:
                    held.add("outside ISR")
                if len(r.isr) < checker.min_isr:
                    held.add("ISR below min")
                if any(not c.brokers[m].alive for m in r.maximal_isr if m not in (leader, f)):
                    held.add("member down")
                e = open_.setdefault((leader, f), {"held": set(KINDS[:-1])})
                e["held"] &= held
        for key in [k for k in open_ if k not in seen]:
            leader, f = key
            e = open_.pop(key)
            broker = c.brokers[leader]
            e["end"] = ("leader down" if not broker.alive else "leader deposed" if broker.replica.role != "leader"
                        else "corrected")
            done.append(e)

    checker.listeners.append(observe)
    checker.observe()
    for index, action in enumerate(schedule.actions):
        run.advance_to(action.at_ms)
        run.step = index
        run.apply(action)
        checker.observe()
    run.healing()
    for e in open_.values():
        e["end"] = "open at the end"
        done.append(e)
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--generation", default="strict-min-isr")
    parser.add_argument("--episodes", action="store_true",
                        help="replay the runs that reached a near miss and classify its episodes")
    args = parser.parse_args()
    search = GuidedSearch(Generation.parse(args.generation), seed=args.seed, seconds=None, runs=args.runs)
    by_arm: collections.Counter[str] = collections.Counter()
    first: list[int] = []
    idle: list[int] = []
    near: list[int] = []
    steps: dict[str, list[int]] = {"cut": [], "cut zombie in ISR": [], "cut zombie in ISR with a stale belief": []}
    reached_data: list[dict[str, Any]] = []
    merge = search._merge

    def counted(run: int, data: dict[str, Any], features: list[int], *rest: Any) -> None:
        if STALE_LEADER.intersection(features):
            by_arm[data["origin"]["arm"]] += 1
            first.append(run)
            if args.episodes:
                reached_data.append(data)
        if IDLE.intersection(features):
            idle.append(run)
        if CURRENT.intersection(features):
            near.append(run)
        for name, tuples in zip(steps, (CUT, CUT_ZOMBIE, CUT_ZOMBIE_STALE)):
            if tuples.intersection(features):
                steps[name].append(run)
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
    print("runs reaching the finding's way: " + "; ".join(
        f"{name} {len(runs)} (first at run {runs[0] if runs else None})" for name, runs in steps.items()))
    if args.episodes:
        kinds: collections.Counter[str] = collections.Counter()
        ends: collections.Counter[str] = collections.Counter()
        for data in reached_data:
            for e in episodes(data):
                kinds[next(k for k in KINDS if k in e["held"] or k == "race")] += 1
                ends[e["end"]] += 1
        print(f"{sum(kinds.values())} episodes: " + ", ".join(f"{k} {kinds[k]}" for k in KINDS)
              + "; ended: " + ", ".join(f"{k} {n}" for k, n in sorted(ends.items())))


if __name__ == "__main__":
    main()
