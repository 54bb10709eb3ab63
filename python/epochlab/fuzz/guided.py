"""The guided engine: a search that keeps the schedules reaching new protocol states and
mutates them whole action by whole action (``docs/fuzzing.md``, "The guided engine").

Coverage is the protocol's (:mod:`epochlab.fuzz.coverage`): the abstract cluster states a run
reached and the moves between them. The search runs in *rounds* of :data:`BATCH`
schedules:

* a *fresh* schedule is a swarm schedule of the run's seed (:mod:`epochlab.fuzz.swarm`: a
  random subset of the profile's fault classes with random weights, a random action mix and
  length), more varied than the random engine's, which are thin in every direction; the
  first round, with nothing to mutate yet, is all fresh;
* the first :data:`INITIAL` runs go in rounds of :data:`OPENING_BATCH`, so the corpus steers
  the search after a few runs; the later rounds hold :data:`BATCH`;
* each schedule of a round is made by one of three *arms* (:data:`ARMS`): a fresh schedule,
  a mutant of a parent picked by energy, a mutant of a parent picked for a rare feature. A
  discounted Thompson-sampling bandit (:mod:`epochlab.fuzz.bandit`) chooses the arm, rewarded
  per run by the new features it reached, each weighted by the smallest coverage family's size
  over its own family's (:meth:`GuidedSearch._weight`; at most 1); its counts change only
  between rounds, like the corpus; and :data:`FOCUS_SHARE` of the schedules are rare-arm
  mutants whatever the bandit says (a floor for depth);
* the rare arm's parents are picked for a rare feature (FairFuzz: a coverage family, then one
  of its features reached by the fewest runs, then an entry that reached it), and their mutants
  are *focused* on the action at which the entry first reached that feature: the operators
  work near it, and ``regrow`` keeps the actions up to it and generates new ones after it
  (go back to the rare state, explore on from there); once the corpus holds a *near-miss*
  state (``coverage.NEAR_MISS``: a leader that believes a follower holds more than its log,
  one HW advance from Inv-StrongIsr), :data:`NEAR_MISS_SHARE` of the rare arm's parents are
  picked for the rarest of those instead, and :data:`POKE_SHARE` of those mutants are pokes
  (:func:`poke`: the parent unchanged up to the moment it first reached the near miss, then
  one or two actions that can move the leader's HW or hold the belief's correction back);
  a protocol violation is a feature of its run too (:func:`finding_feature`, one per
  invariant), and once the corpus holds one, :data:`FINDING_SHARE` of the schedules the
  floor leaves to the bandit are rare-arm mutants of runs that showed one, focused on the
  violation's step, :data:`POKE_SHARE` of them pokes at the violation's time;
* each kind of engine event a run shows (:func:`event_kind`: what the brokers and the
  controller log, numbers aside) is a feature of its run as well, first reached at the action
  the event followed; of the rare arm's parents the near misses leave, :data:`EVENT_SHARE` are
  picked for the rarest event kinds the corpus holds, their mutants focused on the event's
  step, :data:`POKE_SHARE` of them pokes at its time: a bug's mechanism is often such an event
  (a deposed controller's write, a follower taking a misaligned wrapper), reached in many more
  runs than the violation it leads to;
* the energy arm's parents are picked with probability proportional to their *energy*: the
  sum over their features of the family weight over the number of runs that reached the
  feature, damped by
  how often the entry was picked already (AFLFast's power schedules); their mutants change
  anything;
* a mutant applies one to four operators to whole actions: insert freshly generated actions
  (with the entry's swarm of fault classes, sometimes every class of the profile), delete one
  or a block, swap two, re-time one, change a fault's target, delay or drop rate, give a fault
  an end (its duration: the link restored, the partition healed, the broker restarted), repeat
  a block later, splice the entry with another one at a point in time, or draw another run
  seed (the same actions, other network and timing draws);
* after a round its runs are merged in run order: every run that reached a feature no earlier
  run reached joins the corpus; protocol violations go through the same checker, shrinker,
  catalogue match and run directory as the random engine's (:class:`Campaign`);
* the rounds are pipelined: round *i + 1* is drawn from the corpus after round *i - 1*'s
  merge and queued on the workers before round *i* is merged, so the workers run it while the
  driver merges and draws, and no worker waits for the slowest run of a round. The driver only
  draws: a fresh schedule is generated, and a mutant validated, by the worker that runs it
  (:func:`build`).

Every choice comes from ``random.Random`` seeded by the campaign seed and the round, and the
corpus and the bandit's counts change only between rounds, in a fixed order of draws and
merges (draw 0, draw 1, merge 0, draw 2, merge 1, ...), so the runs, the corpus and the
findings are a function of seed, profile and budget alone: the same on one process, ``--jobs
N`` worker processes or a Spark cluster, and the same after a kill and ``--resume``: the
corpus, the round, the bandit's counts and the next round's draw are saved after each whole
round in ``<out>/corpus/`` (a round that a run budget or ``--until-found`` cut short is run
again whole on resuming).
"""

from __future__ import annotations

import bisect
import json
import math
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from epochlab.checks import ALL_INVARIANTS
from epochlab.errors import ScheduleError
from epochlab.fuzz.bandit import Bandit
from epochlab.fuzz.campaign import Campaign, Finding, run_seed
from epochlab.fuzz.coverage import CLUSTER, NEAR_MISS, NEAR_MISS_CODES, feature, is_zombie
from epochlab.fuzz.executor import execute, gc_for_many_runs, worker_pool
from epochlab.fuzz.generator import DELAYS, FuzzProfile, RandomSource, builder_for
from epochlab.fuzz.schedule import Schedule
from epochlab.fuzz.swarm import generate_swarm_schedule
from epochlab.steps import STEPS

__all__ = ["ARMS", "BATCH", "CORPUS_FORMAT", "CORPUS_VERSION", "EVENT_SHARE", "FINDING_SHARE", "FOCUS_SHARE", "INITIAL",
           "NEAR_MISS_SHARE", "event_feature", "event_kind", "event_marks", "finding_feature",
           "OPENING_BATCH", "POKE_SHARE", "Entry",
           "GuidedSearch", "build", "mutate", "poke", "round_size", "round_start"]

#: Schedules per round after the opening; fixed, so the division of work never changes what
#: is run.
BATCH = 40
#: The opening: its runs go in rounds of :data:`OPENING_BATCH`, so the corpus starts to steer
#: the search after the first few runs instead of after a whole round.
INITIAL = 40
OPENING_BATCH = 8
#: The ways to make a schedule the bandit chooses among: a fresh swarm schedule, a mutant of a
#: parent picked by energy, a mutant focused on a rare feature's first step.
ARMS = ("fresh", "energy", "rare")
#: The share of each round's schedules (after the first) that are mutants focused on a rare
#: feature whatever the bandit says: a bandit rewarded for any new feature gives most runs to
#: fresh schedules, which reach new features as often once the corpus has grown, and starves
#: the mutants that go back to a rare state and explore from it (measured: docs/bugs.md).
FOCUS_SHARE = 0.3
#: The share of the rare arm's mutants that target a near-miss state (``coverage.NEAR_MISS``:
#: one step from an invariant violation) when the corpus holds one: a rare state that is next
#: to a violation is worth more of the search than one that is merely rare.
NEAR_MISS_SHARE = 0.5
#: The share of each round's schedules (of those the rare-arm floor leaves to the bandit)
#: that go back to a protocol violation the search found (:func:`finding_feature`) when the
#: corpus holds one: the mutant changes the run near the violation's step. Taken from the
#: bandit's share, not the rare arm's, so the rare states and near misses keep their runs. A
#: run that broke one invariant is where a neighbouring one breaks (in the bug-hunt tables of
#: ``docs/bugs.md`` the first violations of several invariants often come in one run); this
#: is AFL's keeping of every input with a new crash bucket, over invariants instead of stack
#: hashes. What it pays is measured there too (``benches/guided_aims.py``).
FINDING_SHARE = 0.2
#: The share of the rare arm's parents (of those the near misses leave) picked for the rarest
#: engine event the corpus holds (:func:`event_feature`: a kind of event the brokers and the
#: controller log, such as a follower taking a wrapper that does not start at its log end, or
#: a deposed controller writing the partition state) when it holds one, and their mutants
#: focused on the event's step (:data:`POKE_SHARE` of them pokes at its time). A mechanism
#: step of a bug is such an event, reached in many more runs than the bug's violation (measured
#: in ``docs/bugs.md``): going back to the rare ones is how the search gets from the mechanism to
#: its consequence.
EVENT_SHARE = 0.5
#: The share of those whose mutant is a poke (``poke``): the parent unchanged up to the near
#: miss, and an action right after it that can move the leader's HW or hold the belief's
#: correction back.
POKE_SHARE = 0.5
#: The coverage families (the two low bits of a feature, ``epochlab.fuzz.coverage``).
FAMILIES = 4
MAX_ACTIONS = 200
CORPUS_FORMAT = "epochlab-guided-corpus"
#: 3: the state holds the next round's draw (the pipeline); 4: the broker tuple's leader code
#: tells a follower with a fetch in flight; 5: and a follower in the leader's maximal ISR (each
#: changes the features, and so a saved corpus's); 6: a leader cut from the controller, a
#: leader whose HW is below the committed prefix, and an entry keeps the broker and stale
#: follower of each feature's first reach; 7: a run's protocol violations are features of its
#: own (:func:`finding_feature`); 8: so are the kinds of its engine events (:func:`event_feature`)
CORPUS_VERSION = 8
RETIME = (1, 5, 20, 100, 300, 1000, 3000)


@dataclass
class Entry:
    """A corpus entry: a schedule that reached a feature no earlier run had."""

    run: int
    schedule: dict[str, Any]
    features: tuple[int, ...]
    #: the action index at which the run first reached each feature, in ``features`` order
    first_steps: tuple[int, ...] = ()
    picks: int = 0
    #: the simulated time (ms) at which the run first reached each feature, in that order
    first_times: tuple[int, ...] = ()
    #: the broker whose tuple each feature is and the follower of that broker's stale belief
    #: at the first reach (-1: none), in that order
    first_brokers: tuple[tuple[int, int], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "schedule": self.schedule, "features": list(self.features),
                "first_steps": list(self.first_steps), "first_times": list(self.first_times),
                "first_brokers": [list(b) for b in self.first_brokers]}

    def reached_at(self, feature: int) -> tuple[int | None, int | None, tuple[int, int]]:
        """(action index, simulated time, (broker, stale follower)) at which the run first
        reached ``feature``; None and -1 for what the entry does not hold."""
        try:
            i = self.features.index(feature)
        except ValueError:
            return None, None, (-1, -1)
        return (self.first_steps[i] if i < len(self.first_steps) else None,
                self.first_times[i] if i < len(self.first_times) else None,
                self.first_brokers[i] if i < len(self.first_brokers) else (-1, -1))


def finding_feature(invariant: str) -> int:
    """The feature of a run that shows a protocol violation of ``invariant`` (one per
    invariant, in the cluster family): the run joins the corpus like one that reached a new
    state, first reaching the feature at the violation's step, and the rare arm goes back to
    it (:data:`FINDING_SHARE`)."""
    return feature(CLUSTER, b"protocol violation:", invariant.encode())


#: The features of every invariant's protocol violation (:func:`finding_feature`).
FINDINGS = frozenset(finding_feature(i) for i in ALL_INVARIANTS)

#: Engine event kinds that are no protocol step: the network's echo of a fault action.
_NOT_PROTOCOL_EVENTS = frozenset({"network"})
_NUMBER = re.compile(r"-?\d+")
_NUMBERS = re.compile(r"\[#(?:, #)*\]")


def event_kind(event: dict[str, Any]) -> str | None:
    """The kind of an engine event (the brokers' and the controller's log of a run: what
    ``RunResult.events`` holds): its source and message with every number made ``#`` and every
    list of numbers ``[#]``, so two events that differ only in offsets, epochs, broker ids or
    ISR sizes are one kind; ``None`` for the network's echo of a fault action."""
    if event.get("kind") in _NOT_PROTOCOL_EVENTS:
        return None
    text = _NUMBERS.sub("[#]", _NUMBER.sub("#", str(event.get("message", ""))))
    return f"{event.get('kind')}: {text}"


def event_feature(kind: str) -> int:
    """The feature of a run that shows an engine event of ``kind`` (:func:`event_kind`; in
    the cluster family): first reached at the step the event happened in."""
    return feature(CLUSTER, b"engine event:", kind.encode())


def event_marks(events: Sequence[dict[str, Any]], times: Sequence[int]) -> list[tuple[int, str, int, int]]:
    """Each engine event kind of a run once, at its first event: (feature, kind, action index,
    time), the action index that of the last action at or before the event (``times``: the
    actions' ``at_ms``, non-decreasing), 0 before the first."""
    marks: dict[str, tuple[int, str, int, int]] = {}
    for e in events:
        kind = event_kind(e)
        if kind is None or kind in marks:
            continue
        t = int(e.get("time_ms", 0))
        marks[kind] = (event_feature(kind), kind, max(0, bisect.bisect_right(times, t) - 1), t)
    return list(marks.values())


# -- mutation ------------------------------------------------------------------------------

def _down_and_open(actions: list[dict[str, Any]]) -> tuple[set[int], set[str]]:
    """Brokers down and transactions open after ``actions`` (what the generator tracks)."""
    down: set[int] = set()
    open_txn: set[str] = set()
    for a in actions:
        op = a["op"]
        if op in ("crash", "controlled_shutdown"):
            down.add(a["broker"])
        elif op == "restart":
            down.discard(a["broker"])
        elif op == "begin_transaction":
            open_txn.add(a["producer"])
        elif op in ("commit_transaction", "abort_transaction", "restart_producer"):
            open_txn.discard(a.get("producer", ""))
    return down, open_txn


def _classes(schedule: dict[str, Any], profile: FuzzProfile, rng: random.Random) -> dict[str, int]:
    """The entry's swarm of fault classes (its origin), or one time in five every class of
    the profile."""
    enabled = {k: w for k, w in sorted(profile.fault_classes.items()) if w > 0}
    swarm = schedule.get("origin", {}).get("fault_classes")
    if not swarm or rng.random() < 0.2:
        return enabled
    return {k: enabled.get(k, 1) for k in swarm}


def _insert(actions: list[dict[str, Any]], schedule: dict[str, Any], profile: FuzzProfile,
            rng: random.Random, focus: int | None = None) -> None:
    at = rng.randrange(len(actions) + 1) if focus is None else \
        min(len(actions), focus + 1 + rng.randrange(4))
    prefix = actions[:at]
    builder = builder_for(profile, schedule, _classes(schedule, profile, rng))
    builder.down, builder.in_txn = _down_and_open(prefix)
    builder.now = prefix[-1]["at_ms"] if prefix else 0
    src = RandomSource(rng.getrandbits(31))
    new = [a for a in (builder.action(src) for _ in range(1 + rng.randrange(3))) if a is not None]
    actions[at:at] = new


def _retarget(action: dict[str, Any], brokers: list[int], rng: random.Random) -> None:
    if "broker" in action:
        action["broker"] = rng.choice(brokers)
    elif action["op"] == "set_link":
        hi = rng.choice((5, 50, 500, 2000, 8000))
        action["delay_ms"] = [rng.randrange(hi + 1) // 4, hi]
        if action["a"] != "controller" and action["a"] != "coordinator":
            action["drop"] = rng.choice((0.0, 0.0, 0.1, 0.3, 1.0))
        elif action["a"] == "controller":
            action["drop"] = rng.choice((0.0, 1.0))
        if isinstance(action["b"], int):
            action["b"] = rng.choice(brokers)
    elif action["op"] == "slow_follower":
        action["extra_delay_ms"] = rng.choice((0, 200, 2000, 10000))
    elif action["op"] == "produce":
        action["count"] = 1 + rng.randrange(3)
        action.pop("values", None)


def _fits(action: dict[str, Any], schedule: dict[str, Any]) -> bool:
    """Whether ``action`` names only clients ``schedule`` declares (a splice partner's swarm
    may have other producers)."""
    clients = {*schedule["producers"], *schedule["consumers"]}
    named = [action.get("producer"), action.get("consumer"), action.get("a"), action.get("b"),
             *(n for g in action.get("groups") or () for n in g)]
    known = {*schedule["cluster"].get("brokers", [1, 2, 3]), "controller", "coordinator", *clients}
    return all(n is None or n in known for n in named)


def _index(n: int, rng: random.Random, focus: int | None, before: int = 2, after: int = 6) -> int:
    """An action index below ``n``: anywhere, or near ``focus`` (``before`` actions before it
    to ``after`` after it) when given."""
    if focus is None:
        return rng.randrange(n)
    lo, hi = max(0, focus - before), min(n - 1, focus + after)
    return rng.randint(lo, hi) if lo <= hi else rng.randrange(n)


def _regrow(actions: list[dict[str, Any]], schedule: dict[str, Any], profile: FuzzProfile,
            rng: random.Random, focus: int) -> None:
    """Keep the actions up to a little after ``focus`` and generate new ones after them: go
    back to the state the entry reached there and explore on from it."""
    keep = max(0, min(len(actions), focus + 1 + rng.randrange(3)))
    del actions[keep:]
    builder = builder_for(profile, schedule, _classes(schedule, profile, rng))
    builder.down, builder.in_txn = _down_and_open(actions)
    builder.now = actions[-1]["at_ms"] if actions else 0
    src = RandomSource(rng.getrandbits(31))
    count = 1 + rng.randrange(max(1, profile.actions // 4))
    actions.extend(a for a in (builder.action(src) for _ in range(count)) if a is not None)


#: Fault actions that last until an action ends them (``epochlab.steps``: the steps with
#: ``ends``); a fault's duration is where its end stands.
FAULTS = tuple(s.name for s in STEPS.values() if s.ends is not None)
END_AFTER_MS = (1, 20, 100, 500, 2000, 6000)


def _end_of(fault: dict[str, Any], cluster: dict[str, Any]) -> dict[str, Any]:
    """The action that ends ``fault`` (its step's ``ends``) in a schedule whose cluster
    settings are ``cluster``."""
    ends = STEPS[fault["op"]].ends
    assert ends is not None, fault["op"]
    return ends(fault, cluster)


def _end_fault(actions: list[dict[str, Any]], schedule: dict[str, Any], rng: random.Random,
               focus: int | None) -> bool:
    """Give a fault an end (a duration): the link restored, the partition healed, the broker
    restarted, some time after the fault, or with ``focus`` after that action (one of the
    last three faults before it). False when there is no fault to end."""
    if focus is not None:  # earlier operators may have shortened the schedule
        focus = min(focus, len(actions) - 1)
    limit = len(actions) if focus is None else focus + 1
    faults = [i for i in range(limit) if actions[i]["op"] in FAULTS]
    if not faults:
        return False
    i = rng.choice(faults if focus is None else faults[-3:])
    start = actions[i]["at_ms"] if focus is None or focus < 0 else max(actions[i]["at_ms"], actions[focus]["at_ms"])
    end = {"at_ms": start + rng.choice(END_AFTER_MS), **_end_of(actions[i], schedule["cluster"])}
    where = next((k for k, a in enumerate(actions) if a["at_ms"] > end["at_ms"]), len(actions))
    actions.insert(where, end)
    return True


#: How long after a near miss a poke acts (``poke``).
POKE_AFTER_MS = (1, 5, 20, 100, 300, 1000)


def _cut_from_controller(prefix: list[dict[str, Any]], broker: int) -> dict[str, Any] | None:
    """The last action of ``prefix`` that cuts ``broker`` from the controller (a partition,
    the broker isolated, or the controller's link to it cut with ``drop`` 1), if any."""
    for a in reversed(prefix):
        if a["op"] == "partition" or (a["op"] == "isolate" and a["broker"] == broker) or \
                (a["op"] == "set_link" and {a["a"], a["b"]} == {"controller", broker} and a["drop"] >= 1.0):
            return a
    return None


def poke(parent: dict[str, Any], rng: random.Random, at_ms: int, leader: int = -1, follower: int = -1,
         zombie: bool = False, cut: bool = False) -> dict[str, Any]:
    """A mutant of a parent that reached a near miss (``coverage.NEAR_MISS``) at simulated time
    ``at_ms``: the parent unchanged (its seed and every action, so the run goes through the same
    near miss), plus one or two actions right after that moment. A near miss is a race between
    the HW advance that counts the stale belief and the stale follower's next fetch, which
    corrects it. Kafka moves a leader's HW
    (``Partition.maybeIncrementLeaderHW``) when it appends (``appendRecordsToLeader``), when a
    follower's fetch updates its state (``updateFollowerFetchState``) and when its ISR
    changes; so a poke hastens the advance with a produce (an append, on a producer's
    connection), the end of the faults (``heal``: a follower kept away fetches again) or the
    end of one fault that stands at that moment (a link restored, a broker restarted), or
    holds the correction back by isolating a broker or slowing its fetches: two times in three
    the stale ``follower`` when the coverage named it (``Entry.first_brokers``), else any
    broker. In a parent whose consumers ask ListOffsets (the list-offsets step), a poke may
    also ask what a client is told at that moment (``ask``: the latest offset, by one of those
    consumers): Kafka answers it from the leader's HW (``Partition.fetchOffsetForTimestamp``),
    which a new leader's followers learn one fetch late. An election names the belief's
    holder ``leader`` two times in three when known; for a ``zombie`` (the controller has
    moved on: ``coverage.is_zombie``) an election is twice as likely, since its belief counts
    only once it leads again, and a re-elected leader that learns of its new epoch in one
    metadata delta keeps its followers' state
    (``Partition.makeLeader`` with ``isNewLeader`` false: ``docs/kafka-findings/``). When the
    holder is ``cut`` from the controller (leader code bit 32) that is what a *re-election*
    does, half the pokes then: the controller elects it while the cut holds, and the cut
    ends a moment later (the fault that cut it ended, or the partition healed), so the
    election reaches it in one delta with the epochs it missed."""
    child = json.loads(json.dumps(parent))
    actions: list[dict[str, Any]] = child["actions"]
    brokers = list(child["cluster"].get("brokers", [1, 2, 3]))
    t = at_ms
    names = []
    # the consumers that ask ListOffsets in the parent (the list-offsets step of its profile)
    askers = sorted({a["consumer"] for a in actions if a["op"] == "list_offsets"})

    def target(known: int) -> int:
        return known if known in brokers and rng.random() < 2 / 3 else rng.choice(brokers)

    if cut and leader in brokers and rng.random() < 0.5:
        t += rng.choice(POKE_AFTER_MS)
        cutting = _cut_from_controller([a for a in actions if a["at_ms"] <= t], leader)
        restore = {"op": "heal"} if cutting is None or cutting["op"] == "partition" else \
            _end_of(cutting, child["cluster"])
        names.append("poke-reelect")
        for step in ({"op": "elect", "broker": leader, "unclean": False}, restore):
            where = next((k for k, a in enumerate(actions) if a["at_ms"] > t), len(actions))
            actions.insert(where, {"at_ms": t, **step})
            t += rng.choice(POKE_AFTER_MS)
    for _ in range(0 if names else 1 + (rng.random() < 0.5)):
        t += rng.choice(POKE_AFTER_MS)
        prefix = [a for a in actions if a["at_ms"] <= t]
        down, open_txn = _down_and_open(prefix)
        producers = [p for p, c in sorted(child["producers"].items())
                     if not c.get("transactional.id") or p in open_txn]
        # the faults that may still stand (a crashed broker only while it is down)
        standing = [a for a in prefix if a["op"] in FAULTS and a["op"] != "partition"
                    and (a["op"] != "crash" or a["broker"] in down)]
        menu = ["heal", "isolate", "slow", "elect"] + (["elect"] if zombie else []) + \
            (["produce", "produce"] if producers else []) + (["end"] if standing else []) + \
            (["ask"] if askers else [])
        kind = rng.choice(menu)
        if kind == "ask":
            action = {"op": "list_offsets", "consumer": rng.choice(askers), "spec": "latest"}
        elif kind == "produce":
            action = {"op": "produce", "producer": rng.choice(producers), "count": 1 + rng.randrange(3)}
        elif kind == "end":
            action = _end_of(rng.choice(standing[-3:]), child["cluster"])
        elif kind == "isolate":
            action = {"op": "isolate", "broker": target(follower)}
        elif kind == "elect":
            action = {"op": "elect", "broker": leader, "unclean": False} \
                if leader in brokers and rng.random() < 2 / 3 else \
                {"op": "elect_preferred"} if rng.random() < 0.5 else \
                {"op": "elect", "broker": rng.choice(brokers), "unclean": False}
        elif kind == "slow":
            action = {"op": "slow_follower", "broker": target(follower),
                      "extra_delay_ms": rng.choice((2000, 10000))}
        else:
            action = {"op": "heal"}
        names.append(f"poke-{kind}")
        where = next((k for k, a in enumerate(actions) if a["at_ms"] > t), len(actions))
        actions.insert(where, {"at_ms": t, **action})
    del actions[MAX_ACTIONS:]
    child["origin"] = {"engine": "guided", "operators": names,
                       "fault_classes": parent.get("origin", {}).get("fault_classes")}
    return child


def mutate(parent: dict[str, Any], other: dict[str, Any] | None, rng: random.Random,
           profile: FuzzProfile, focus: int | None = None) -> dict[str, Any]:
    """A mutant of the schedule ``parent`` (a schedule dict; ``other`` for splicing): one to
    four whole-action operators (module doc). With ``focus`` (the action index at which the
    parent first reached the rare feature it was picked for) the operators work near that
    action, and one more, ``regrow``, keeps the actions up to it and generates the rest anew.
    The result is a schedule dict with sorted times, at most :data:`MAX_ACTIONS` actions."""
    child = json.loads(json.dumps(parent))
    actions: list[dict[str, Any]] = child["actions"]
    brokers = list(child["cluster"].get("brokers", [1, 2, 3]))
    if focus is not None:
        focus = max(-1, min(focus, len(actions) - 1))
    operators = []
    for _ in range(1 + min(3, int(-math.log2(1.0 - rng.random())))):
        menu = ("insert", "insert", "delete", "delete-block", "swap", "retime", "retarget",
                "retarget", "repeat", "splice", "reseed", "end-fault") + (
                    ("regrow", "regrow", "regrow", "end-fault", "end-fault") if focus is not None else ())
        op = rng.choice(menu)
        if op in ("delete", "delete-block", "swap", "retime", "retarget", "repeat") and not actions:
            op = "insert"
        operators.append(op)
        if op == "insert":
            _insert(actions, child, profile, rng, focus)
        elif op == "end-fault":
            if not _end_fault(actions, child, rng, focus):
                _insert(actions, child, profile, rng, focus)
        elif op == "regrow":
            _regrow(actions, child, profile, rng, focus if focus is not None else -1)
        elif op == "delete":
            del actions[_index(len(actions), rng, focus, 0)]
        elif op == "delete-block":
            i = _index(len(actions), rng, focus, 0)
            del actions[i:i + 1 + rng.randrange(8)]
        elif op == "swap":
            i, j = _index(len(actions), rng, focus), _index(len(actions), rng, focus)
            ti, tj = actions[i]["at_ms"], actions[j]["at_ms"]
            actions[i], actions[j] = actions[j], actions[i]
            actions[i]["at_ms"], actions[j]["at_ms"] = ti, tj
        elif op == "retime":
            a = actions[_index(len(actions), rng, focus)]
            a["at_ms"] = max(0, a["at_ms"] + rng.choice((-1, 1)) * rng.choice(RETIME))
        elif op == "retarget":
            _retarget(actions[_index(len(actions), rng, focus)], brokers, rng)
        elif op == "repeat":
            i = _index(len(actions), rng, focus)
            block = json.loads(json.dumps(actions[i:i + 1 + rng.randrange(4)]))
            shift = rng.choice(DELAYS[2:]) + (actions[-1]["at_ms"] - block[0]["at_ms"]
                                             if rng.random() < 0.5 else 0)
            for a in block:
                a["at_ms"] += shift
            actions.extend(block)
        elif op == "splice" and other is not None and other["actions"]:
            cut = rng.choice(other["actions"])["at_ms"]
            if focus is not None and 0 <= focus < len(actions):
                cut = max(cut, actions[focus]["at_ms"] + 1)  # keep the way to the rare state
            actions[:] = [a for a in actions if a["at_ms"] < cut] + \
                json.loads(json.dumps([a for a in other["actions"]
                                       if a["at_ms"] >= cut and _fits(a, child)]))
        else:  # reseed (and a splice without a partner)
            child["seed"] = rng.randrange(2**31)
        actions.sort(key=lambda a: a["at_ms"])  # stable: equal times keep their order
        del actions[MAX_ACTIONS:]
    child["origin"] = {"engine": "guided", "operators": operators,
                       "fault_classes": parent.get("origin", {}).get("fault_classes")}
    return child


# -- running a round -----------------------------------------------------------------------

Outcome = tuple[dict[str, Any], Any, list[int], list[int], list[int], list[tuple[int, int]],
                list[dict[str, Any]] | None, list[tuple[int, str, int, int]]]
#: What a worker needs to build a round's schedules: campaign seed, generation label, profile,
#: backend.
Task = tuple[int, str, FuzzProfile, str | None]


#: The aims whose mutants are pokes :data:`POKE_SHARE` of the time, and the poke's aim.
POKED = {"finding": "finding poke", "near miss": "poke", "rare event": "event poke"}


def _aimed(targets: list[tuple[int, list[Entry]]], rng: random.Random) -> tuple[int, Entry, int | None, int | None, tuple[int, int]]:
    """A target feature of ``targets`` (feature, the entries holding it), an entry holding it,
    and where the entry first reached it (:meth:`Entry.reached_at`)."""
    target, holders = targets[rng.randrange(len(targets))]
    parent = holders[rng.randrange(len(holders))]
    return (target, parent, *parent.reached_at(target))


def _fresh(task: Task, run: int, arm: str) -> dict[str, Any]:
    """The fresh swarm schedule of run ``run`` (its run seed), its origin naming ``arm`` (a
    mutant's, when it stands in for a mutant the validator refused) and its aim, ``fresh``."""
    seed, generation, profile, _backend = task
    child = generate_swarm_schedule(run_seed(seed, run), generation, profile).to_dict()
    child["origin"]["arm"] = arm
    child["origin"]["aim"] = "fresh"
    return child


def build(task: Task, spec: tuple[int, str, dict[str, Any] | None]) -> tuple[dict[str, Any], Schedule]:
    """The schedule of a round's ``spec`` = (run, arm, mutant or None): a fresh swarm schedule
    for None, else the mutant, or the fresh schedule of the run when the validator refuses the
    mutant. Built where the run executes (a worker), so the driver only draws the mutants. (A
    mutant may move a transactional producer's send out of its transactions: the simulated
    producer refuses that send, as Kafka's clients do.)"""
    run, arm, data = spec
    if data is not None:
        try:
            return data, Schedule.from_dict(data, "guided")
        except ScheduleError:  # a mutant the validator refuses: a fresh schedule instead
            pass
    data = _fresh(task, run, arm)
    return data, Schedule.from_dict(data, "guided")


def _run_children(task: Task, specs: list[tuple[int, str, dict[str, Any] | None]]) -> list[Outcome]:
    """A worker's share of a round: each schedule (:func:`build`), its verdict, features,
    first steps, and (with a protocol violation) its events for the catalogue's witnesses."""
    backend = task[3]
    out: list[Outcome] = []
    with gc_for_many_runs():
        for spec in specs:
            data, schedule = build(task, spec)
            result = execute(schedule, backend=backend, coverage=True)
            events = result.events if result.verdict.protocol_violations else None
            marks = event_marks(result.events, [a.at_ms for a in schedule.actions])
            out.append((data, result.verdict, result.features or [], result.first_steps or [],
                        result.first_times or [], result.first_brokers or [], events, marks))
    return out


def round_size(first: int) -> int:
    """The number of runs of the round that starts at run ``first``: :data:`OPENING_BATCH`
    during the opening (runs below :data:`INITIAL`), :data:`BATCH` after it."""
    return OPENING_BATCH if first < INITIAL else BATCH


def round_start(index: int) -> int:
    """The first run of round ``index`` (rounds of :func:`round_size`)."""
    opening = INITIAL // OPENING_BATCH
    if index <= opening:
        return index * OPENING_BATCH
    return INITIAL + (index - opening) * BATCH


def _pieces(items: list[Any], parts: int) -> list[list[Any]]:
    size = max(1, math.ceil(len(items) / parts))
    return [items[i:i + size] for i in range(0, len(items), size)]


Spec = tuple[int, str, "dict[str, Any] | None"]


@dataclass
class GuidedSearch(Campaign):
    """The guided engine's campaign (:class:`Campaign`'s budget, findings, jobs and Spark
    master); :meth:`run` spends the budget and returns the findings."""

    engine = "guided"
    #: continue from ``<out>/corpus/`` when it holds a saved search of the same settings
    resume: bool = False
    corpus: list[Entry] = field(default_factory=list)
    #: feature -> runs that reached it
    hits: dict[int, int] = field(default_factory=dict)
    #: (runs, distinct features) after every round: the new-states-over-runs curve
    curve: list[tuple[int, int]] = field(default_factory=list)
    #: every protocol violation on the way: (run, invariant, run seed, message, events)
    on_violation: Any = None
    #: asked after every run: stop the search (the bug hunt, once every bug is matched)
    should_stop: Any = None
    #: the engine event features reached so far and their kinds (:func:`event_feature`)
    event_kinds: dict[int, str] = field(default_factory=dict)
    #: how the runs are shared among :data:`ARMS` (:mod:`epochlab.fuzz.bandit`)
    bandit: Bandit = field(default_factory=lambda: Bandit(ARMS))
    _saved_findings: list[dict[str, Any]] = field(default_factory=list)
    #: the next round to merge
    _round: int = 0
    #: the round after it, drawn before that merge (the pipeline: module doc)
    _next: list[Spec] | None = None
    _new_entries: list[Entry] = field(default_factory=list)
    #: distinct features per family (``feature & 3``), the denominators of rarity
    _family: list[int] = field(default_factory=lambda: [0] * FAMILIES)

    # -- the loop ----------------------------------------------------------------------------
    def _task(self) -> Task:
        return (self.seed, self.generation.label, self.profile, self.backend)

    def _budgeted(self, index: int, specs: list[Spec]) -> list[Spec]:
        """The specs of round ``index`` the run budget allows."""
        first = round_start(index)
        return specs if self.runs is None else specs[:max(0, self.runs - first)]

    def _run(self) -> list[Finding]:
        start = time.monotonic()
        deadline = None if self.seconds is None else start + self.seconds
        if self.resume and self.out is not None:
            self._load()
        executor = self._executor()
        try:
            current = self._next if self._next is not None else self._children(self._round)
            running = executor.submit(self._budgeted(self._round, current))
            stop = False
            while not stop and self._more(self.total_runs, deadline):
                first, size = round_start(self._round), round_size(round_start(self._round))
                # draw the next round now, from the corpus of the rounds merged so far, and
                # hand it to the workers before waiting for this one: they never idle between
                # rounds, and the draw depends on the merge order alone (module doc)
                self._next = self._children(self._round + 1)
                queued = executor.submit(self._budgeted(self._round + 1, self._next)) \
                    if self._more(first + size, deadline) else None
                for i, (data, verdict, features, steps, times, brokers, events, marks) in enumerate(running.result()):
                    run = first + i
                    found = sorted({v.invariant: v for v in verdict.protocol_violations}.items())
                    for f, kind, _, _ in marks:
                        self.event_kinds.setdefault(f, kind)
                    self._merge(run, data, [*features, *(finding_feature(k) for k, _ in found),
                                            *(f for f, _, _, _ in marks)],
                                [*steps, *(len(data["actions"]) if v.step is None else v.step for _, v in found),
                                 *(step for _, _, step, _ in marks)],
                                [*times, *(v.time_ms for _, v in found), *(t for _, _, _, t in marks)],
                                [*brokers, *((-1, -1) for _ in found), *((-1, -1) for _ in marks)])
                    for v in verdict.allowed:
                        self.allowed[v.invariant] = self.allowed.get(v.invariant, 0) + 1
                    for v in verdict.protocol_violations:
                        if self.on_violation is not None:
                            self.on_violation(run, v, data, events)
                        if v.signature not in self.findings and v.signature not in self._saved_signatures():
                            schedule = Schedule.from_dict(data, "guided")
                            self._found(v, run, schedule.seed, schedule, time.monotonic() - start, deadline)
                    self.total_runs = run + 1
                    self.tick(run + 1, time.monotonic() - start)
                    if (self.until_found and self.findings) or (self.should_stop is not None and self.should_stop()):
                        stop = True
                        break
                self.curve.append((self.total_runs, len(self.hits)))
                if self.total_runs != first + size:
                    break  # a round cut short by the budget or a stop: saved up to the last whole one
                self._round += 1
                self.bandit.end_round()
                if self.out is not None:
                    self._save()
                if queued is None:
                    break
                running = queued
        finally:
            executor.close()
        self.elapsed = time.monotonic() - start
        if self.out is not None:
            self.write_summary()
        return list(self.findings.values())

    def _children(self, index: int) -> list[Spec]:
        """The specs of round ``index`` (:func:`build` makes their schedules): a function of
        the campaign seed, the round and the state after the merges so far (module doc). The
        whole round is drawn whatever the budget, so a search a budget cut and resumed draws
        what an uncut one does."""
        first = round_start(index)
        rng = random.Random(f"epochlab-guided:{self.seed}:{index}")
        weights = self._energies()
        total = sum(weights)
        rare = self._rare_holders()
        near = self._near_miss_holders()
        found = self._finding_holders()
        events = self._event_holders()
        allowed = ("fresh", "energy", "rare") if rare else ("fresh", "energy")
        specs: list[Spec] = []
        for run in range(first, first + round_size(first)):
            to_finding = False
            if not self.corpus:
                arm = "fresh"
            elif rare and rng.random() < FOCUS_SHARE:
                arm = "rare"
            elif found and rng.random() < FINDING_SHARE:
                arm, to_finding = "rare", True
            else:
                arm = self.bandit.choose(rng, allowed)
            if arm == "fresh":
                specs.append((run, arm, None))
                continue
            focus = poke_at = None
            poke_who: tuple[int, int, bool, bool] = (-1, -1, False, False)
            if arm == "rare":
                if to_finding:
                    target, parent, focus, at_ms, who = _aimed(found, rng)
                    aim, poke_who = "finding", (*who, False, False)
                elif near and rng.random() < NEAR_MISS_SHARE:
                    target, parent, focus, at_ms, who = _aimed(near, rng)
                    codes = NEAR_MISS_CODES[target]
                    aim, poke_who = "near miss", (*who, is_zombie(codes), bool(codes[7] & 32))
                elif events and rng.random() < EVENT_SHARE:
                    target, parent, focus, at_ms, _who = _aimed(events, rng)
                    aim = "rare event"
                else:
                    aim = "rare state"  # a family first, then a feature of it
                    target, parent, focus, _at, _who = _aimed(rare[rng.randrange(len(rare))], rng)
                if aim in POKED and rng.random() < POKE_SHARE:
                    aim, poke_at = POKED[aim], at_ms
            else:
                aim = "energy"
                parent = self._pick(weights, total, rng)
            other = self.corpus[rng.randrange(len(self.corpus))]
            parent.picks += 1
            child = poke(parent.schedule, rng, poke_at, *poke_who) if poke_at is not None else \
                mutate(parent.schedule, other.schedule, rng, self.profile, focus)
            child["origin"]["parent_run"] = parent.run
            child["origin"]["arm"] = arm
            child["origin"]["aim"] = aim  # what the parent was picked for
            specs.append((run, arm, child))
        return specs

    def _weight(self, feature: int) -> float:
        """How much a feature of its family counts: the size of the smallest family over the
        size of its own (a new broker tuple among a hundred counts more than one more cluster
        move among a thousand; Entropic, Böhme, Manès, Cha, ESEC/FSE 2020, weighs a feature
        by its information in the same spirit)."""
        sizes = [n for n in self._family if n]
        return min(sizes) / self._family[feature & 3] if sizes and self._family[feature & 3] else 1.0

    def _energies(self) -> list[float]:
        """Each entry's energy: over its features, one over the runs that reached the feature
        times the feature's family weight (:meth:`_weight`), damped by the square root of the
        times the entry was picked (AFLFast's power schedules)."""
        weight = [self._weight(family) for family in range(FAMILIES)]
        # each feature's share once per round, then a sum of lookups per entry (the same
        # terms in the same order as a sum of quotients: the same floats, a fifth of the time)
        share = {f: weight[f & 3] / n for f, n in self.hits.items()}
        return [sum(map(share.__getitem__, e.features)) / math.sqrt(1 + e.picks) for e in self.corpus]

    def _rare_holders(self) -> list[list[tuple[int, list[Entry]]]]:
        """The rarest features (reached by at most the smallest power of two at or above the
        fewest runs any feature was reached by) with the corpus entries reaching them, in
        feature order, grouped by family (FairFuzz's rare-branch targeting, over protocol
        states; a family is picked first, so a rare state of a small family, such as a broker
        tuple, is as likely a target as one of the thousands of rare cluster moves)."""
        if not self.hits:
            return []
        cutoff = 1 << (min(self.hits.values()) - 1).bit_length()
        rare = {f for f, n in self.hits.items() if n <= cutoff}
        holders: dict[int, list[Entry]] = {}
        for entry in self.corpus:
            for f in rare.intersection(entry.features):
                holders.setdefault(f, []).append(entry)
        families: list[list[tuple[int, list[Entry]]]] = [[] for _ in range(FAMILIES)]
        for f, entries in sorted(holders.items()):
            families[f & 3].append((f, entries))
        return [family for family in families if family]

    def _near_miss_holders(self) -> list[tuple[int, list[Entry]]]:
        """The near-miss states the corpus reached (``coverage.NEAR_MISS``), the rarest of
        them (:meth:`_rarest_holders`)."""
        return self._rarest_holders({f: n for f, n in self.hits.items() if f in NEAR_MISS})

    def _event_holders(self) -> list[tuple[int, list[Entry]]]:
        """The engine event kinds the corpus holds (:func:`event_feature`), the rarest of
        them (:meth:`_rarest_holders`)."""
        return self._rarest_holders({f: self.hits[f] for f in self.event_kinds if f in self.hits})

    def _rarest_holders(self, reached: dict[int, int]) -> list[tuple[int, list[Entry]]]:
        """Of the features ``reached`` (feature -> runs), those reached by at most twice the
        runs of the rarest one, with the entries reaching each, in feature order."""
        if not reached:
            return []
        cutoff = 2 * min(reached.values())
        targets = {f for f, n in reached.items() if n <= cutoff}
        holders: dict[int, list[Entry]] = {}
        for entry in self.corpus:
            for f in targets.intersection(entry.features):
                holders.setdefault(f, []).append(entry)
        return sorted(holders.items(), key=lambda h: h[0])

    def _finding_holders(self) -> list[tuple[int, list[Entry]]]:
        """The protocol violations the corpus holds (:func:`finding_feature`: one feature per
        invariant) with the entries showing each, in feature order."""
        holders: dict[int, list[Entry]] = {}
        for entry in self.corpus:
            for f in FINDINGS.intersection(entry.features):
                holders.setdefault(f, []).append(entry)
        return sorted(holders.items(), key=lambda h: h[0])

    def _pick(self, weights: list[float], total: float, rng: random.Random) -> Entry:
        x = rng.random() * total
        for entry, w in zip(self.corpus, weights):
            x -= w
            if x < 0:
                return entry
        return self.corpus[-1]

    def _merge(self, run: int, data: dict[str, Any], features: list[int], steps: list[int],
               times: Sequence[int] = (), brokers: Sequence[tuple[int, int]] = ()) -> None:
        fresh = [f for f in features if f not in self.hits]
        # the reward: the new features, each by its family weight before this run, at most 1
        reward = min(1.0, sum(self._weight(f) for f in fresh))
        for f in features:
            self.hits[f] = self.hits.get(f, 0) + 1
        for f in fresh:
            self._family[f & 3] += 1
        new = bool(fresh)
        if new:
            entry = Entry(run, data, tuple(features), tuple(steps), first_times=tuple(times),
                          first_brokers=tuple(tuple(b) for b in brokers))
            self.corpus.append(entry)
            self._new_entries.append(entry)
        arm = data.get("origin", {}).get("arm")
        if arm in self.bandit.arms:
            self.bandit.reward(arm, reward)

    def _executor(self) -> Any:
        task = self._task()
        if self.master is not None:
            return _SparkRounds(self.master, task)
        if self.jobs > 1:
            return _PoolRounds(self.jobs, task)
        return _InlineRounds(task)

    # -- the saved corpus --------------------------------------------------------------------
    def _settings(self) -> dict[str, Any]:
        return {"generation": self.generation.label, "seed": self.seed,
                "profile": self.profile.to_dict(), "batch": BATCH, "initial": INITIAL,
                "opening_batch": OPENING_BATCH, "arms": list(ARMS),
                "discount": self.bandit.discount, "floor": self.bandit.floor,
                "focus_share": FOCUS_SHARE, "reward": "family-weighted"}

    def _save(self) -> None:
        assert self.out is not None
        folder = self.out / "corpus"
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "inputs.jsonl", "a", encoding="utf-8") as f:
            for e in self._new_entries:
                f.write(json.dumps(e.to_dict(), sort_keys=True) + "\n")
        self._new_entries = []
        state = {"format": CORPUS_FORMAT, "version": CORPUS_VERSION, **self._settings(),
                 "runs": self.total_runs, "round": self._round, "bandit": self.bandit.to_dict(),
                 "next": [list(spec) for spec in self._next or ()],
                 "picks": {str(e.run): e.picks for e in self.corpus if e.picks},
                 "hits": {str(k): v for k, v in sorted(self.hits.items())},
                 "event_kinds": {str(k): v for k, v in sorted(self.event_kinds.items())},
                 "curve": self.curve, "allowed": self.allowed,
                 "findings": self._saved_findings + [f.to_dict() for f in self.findings.values()]}
        tmp = folder / "state.json.tmp"
        tmp.write_text(json.dumps(state, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(folder / "state.json")

    def _load(self) -> None:
        assert self.out is not None
        folder = self.out / "corpus"
        path = folder / "state.json"
        if not path.exists():
            return
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
            if state.get("format") != CORPUS_FORMAT or state.get("version") != CORPUS_VERSION:
                raise ValueError(f"not an epochlab guided corpus of version {CORPUS_VERSION}")
            settings = {k: state.get(k) for k in self._settings()}
            if settings != json.loads(json.dumps(self._settings())):
                differ = [k for k in settings if settings[k] != json.loads(json.dumps(self._settings()))[k]]
                raise ScheduleError(f"{path}: saved with other settings ({', '.join(differ)}); "
                                    "resume with the same generation, seed and profile, or use another --out")
            runs = int(state["runs"])
            picks = {int(k): int(v) for k, v in state.get("picks", {}).items()}
            corpus = []
            with open(folder / "inputs.jsonl", encoding="utf-8") as f:
                for line in f:
                    d = json.loads(line)
                    if d["run"] < runs:  # entries of a round whose state was never saved go
                        corpus.append(Entry(int(d["run"]), d["schedule"], tuple(d["features"]),
                                            tuple(d["first_steps"]), picks.get(int(d["run"]), 0),
                                            tuple(d["first_times"]),
                                            tuple((int(b), int(f)) for b, f in d["first_brokers"])))
            hits = {int(k): int(v) for k, v in state["hits"].items()}
            event_kinds = {int(k): str(v) for k, v in state["event_kinds"].items()}
            pending: list[Spec] = [(int(run), str(arm), data) for run, arm, data in state["next"]]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ScheduleError(f"{path}: cannot resume the guided search: {e}") from e
        # rewrite the inputs without the entries of an unsaved round
        with open(folder / "inputs.jsonl", "w", encoding="utf-8") as f:
            for entry in corpus:
                f.write(json.dumps(entry.to_dict(), sort_keys=True) + "\n")
        self.corpus, self.hits, self.total_runs = corpus, hits, runs
        self.event_kinds = event_kinds
        self._family = [sum(1 for f in hits if f & 3 == family) for family in range(FAMILIES)]
        self._round = int(state["round"])
        self._next = pending
        self.bandit.load(state.get("bandit", {}))
        self.curve = [tuple(x) for x in state.get("curve", [])]  # type: ignore[misc]
        self.allowed = dict(state.get("allowed", {}))
        self._saved_findings = list(state.get("findings", []))
        self.progress(f"resumed after {runs} runs: {len(corpus)} corpus entries, "
                      f"{len(hits)} features, {len(self._saved_findings)} findings")

    def _saved_signatures(self) -> set[str]:
        return {f["signature"] for f in self._saved_findings}

    def summary(self, deployment: bool = True) -> dict[str, Any]:
        out = super().summary()
        out["violations"] = self._saved_findings + out["violations"]
        out["corpus"] = {"entries": len(self.corpus), "features": len(self.hits),
                         "rounds": self._round, "batch": BATCH,
                         "arms": {a: round(self.bandit.mean(a), 4) for a in self.bandit.arms}}
        return out if deployment else self._without_deployment(out)


class _Done:
    """A round already run, or run when asked (:class:`_InlineRounds`)."""

    def __init__(self, compute: Any) -> None:
        self.compute = compute

    def result(self) -> list[Outcome]:
        return self.compute()


class _InlineRounds:
    """A round's schedules in this process, run when their results are asked for."""

    def __init__(self, task: Task) -> None:
        self.task = task

    def submit(self, specs: list[Spec]) -> _Done:
        return _Done(lambda: _run_children(self.task, specs))

    def close(self) -> None:
        pass


class _PoolRounds:
    """A round's schedules on ``jobs`` worker processes (spawned), in pieces queued as soon as
    the round is drawn; results in run order."""

    def __init__(self, jobs: int, task: Task) -> None:
        self.jobs, self.task = jobs, task
        self.pool = worker_pool(jobs)

    def submit(self, specs: list[Spec]) -> _Done:
        futures = [self.pool.submit(_run_children, self.task, piece)
                   for piece in _pieces(specs, 2 * self.jobs)]
        return _Done(lambda: [o for f in futures for o in f.result()])

    def close(self) -> None:
        self.pool.shutdown(cancel_futures=True)


class _SparkRounds:
    """A round's schedules as tasks of a Spark master, gathered in run order on the driver;
    a round's job starts when its results are asked for."""

    def __init__(self, master: str, task: Task) -> None:
        from epochlab.spark import build_session

        self.task = task
        self.spark = build_session(master, app_name="epochlab-guided")
        self.parallelism = max(1, self.spark.sparkContext.defaultParallelism)

    def submit(self, specs: list[Spec]) -> _Done:
        task = self.task
        pieces = _pieces(specs, 2 * self.parallelism)

        def collect() -> list[Outcome]:
            if not pieces:
                return []
            results = self.spark.sparkContext.parallelize(pieces, len(pieces)).map(
                lambda piece: _run_children(task, piece)).collect()
            return [o for piece in results for o in piece]
        return _Done(collect)

    def close(self) -> None:
        self.spark.stop()
