"""Shrinking: delta debugging on schedules (Zeller and Hildebrandt's ddmin, simplified).

A candidate is kept only if running it still gives a *protocol violation of the same
invariant* (same signature). Passes, repeated until none makes progress or the run budget is
spent:

1. drop chunks of actions (halves, quarters, ... down to single actions);
2. simplify parameters: ``count`` to 1, lossy crashes to plain crashes, link faults to plain
   delays without loss, duplication or reordering, shorter slow-follower delays, partitions to
   fewer nodes;
3. drop clients no action uses, and pull actions earlier (halve the gap to the previous one).

The result is never longer than the input (only removals and simplifications), and it is the
input itself when nothing smaller fails the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from epochlab.fuzz.executor import RunResult, execute
from epochlab.fuzz.schedule import Action, Schedule

__all__ = ["SIMPLIFICATIONS", "ShrinkResult", "shrink"]


@dataclass
class ShrinkResult:
    schedule: Schedule
    result: RunResult
    runs: int
    signature: str


class _Budget(Exception):
    pass


def shrink(schedule: Schedule, signature: str | None = None, *, backend: str | None = None,
           max_runs: int = 400, stop: Callable[[], bool] = lambda: False,
           on_run: Callable[[int, int], None] = lambda _runs, _actions: None) -> ShrinkResult:
    """The smallest schedule found that still violates ``signature`` (default: the first
    protocol violation of ``schedule``). Raises ``ValueError`` if ``schedule`` does not violate
    it. ``stop()`` is polled between runs (the campaign's time budget); ``on_run(runs, actions)``
    follows each run with the size of the smallest schedule so far (progress bars)."""
    first = execute(schedule, backend=backend)
    if signature is None:
        v = first.verdict.first()
        if v is None:
            raise ValueError("the schedule violates no invariant: nothing to shrink")
        signature = v.signature
    if first.verdict.first(signature) is None:
        raise ValueError(f"the schedule does not violate {signature}")
    state = {"best": schedule, "result": first, "runs": 1}

    def fails(candidate: Schedule) -> bool:
        if state["runs"] >= max_runs or stop():
            raise _Budget
        state["runs"] += 1
        res = execute(candidate, backend=backend)
        kept = res.verdict.first(signature) is not None
        if kept:
            state["best"], state["result"] = candidate, res
        on_run(state["runs"], len(state["best"].actions))
        return kept

    try:
        progress = True
        while progress:
            progress = _drop_chunks(state, fails)
            progress = _simplify(state, fails) or progress
            progress = _drop_clients(state, fails) or progress
            progress = _compress_time(state, fails) or progress
    except _Budget:
        pass
    best: Schedule = state["best"]
    best = best.with_actions(best.actions, shrunk_from=len(schedule.actions))
    return ShrinkResult(best, state["result"], state["runs"], signature)


def _drop_chunks(state: dict[str, Any], fails: Callable[[Schedule], bool]) -> bool:
    progress = False
    actions = list(state["best"].actions)
    size = max(1, len(actions) // 2)
    while size >= 1 and actions:
        i = 0
        while i < len(actions):
            candidate = actions[:i] + actions[i + size:]
            if fails(state["best"].with_actions(candidate)):
                actions = candidate
                progress = True
            else:
                i += size
        size //= 2
    return progress


def _simpler_produce(p: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    if p.get("count") not in (None, 1):
        yield {"count": 1}
    if p.get("values") and len(p["values"]) > 1:
        yield {"values": p["values"][:1]}


def _simpler_crash(p: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    if p["lose_unflushed"]:
        yield {"lose_unflushed": False}


def _simpler_set_link(p: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for key, plain in (("drop", 0.0), ("duplicate", 0.0), ("reorder", False)):
        if p[key] != plain:
            yield {key: plain}
    if p["delay_ms"] is not None and p["delay_ms"][1] > 5:
        yield {"delay_ms": (min(p["delay_ms"][0], 1), max(5, p["delay_ms"][1] // 2))}


def _simpler_slow_follower(p: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    if p["extra_delay_ms"] > 0:
        yield {"extra_delay_ms": p["extra_delay_ms"] // 2}


def _simpler_partition(p: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    groups = [list(g) for g in p["groups"]]
    for gi, group in enumerate(groups):
        for node in group:
            smaller = [list(g) for g in groups]
            smaller[gi] = [x for x in group if x != node]
            smaller = [g for g in smaller if g]
            if smaller:
                yield {"groups": tuple(tuple(g) for g in smaller)}


def _simpler_elect(p: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    if p["unclean"]:
        yield {"unclean": False}


#: step -> the simpler parameters to try for an action of it, in order (each a change of the
#: action's parameters). A step without an entry has nothing that can be smaller: its
#: ``epochlab.steps`` entry says ``shrinks=False`` (``tests/test_steps.py`` holds the two
#: equal).
SIMPLIFICATIONS: dict[str, Callable[[Mapping[str, Any]], Iterator[dict[str, Any]]]] = {
    "produce": _simpler_produce,
    "crash": _simpler_crash,
    "set_link": _simpler_set_link,
    "slow_follower": _simpler_slow_follower,
    "partition": _simpler_partition,
    "elect": _simpler_elect,
}


def _simpler(action: Action) -> Iterator[Action]:
    simplify = SIMPLIFICATIONS.get(action.op)
    if simplify is None:
        return
    for changes in simplify(action.params):
        yield Action(action.at_ms, action.op, {**action.params, **changes})


def _simplify(state: dict[str, Any], fails: Callable[[Schedule], bool]) -> bool:
    progress = False
    i = 0
    while i < len(state["best"].actions):
        for simpler in _simpler(state["best"].actions[i]):
            actions = list(state["best"].actions)
            actions[i] = simpler
            if fails(state["best"].with_actions(actions)):
                progress = True
                break
        else:
            i += 1
    return progress


def _drop_clients(state: dict[str, Any], fails: Callable[[Schedule], bool]) -> bool:
    best: Schedule = state["best"]
    used = {a.params.get(k) for a in best.actions for k in ("producer", "consumer")}
    progress = False
    for table in ("producers", "consumers"):
        for name in sorted(getattr(best, table)):
            best = state["best"]
            if name in used or name not in getattr(best, table):
                continue
            nodes = {n for a in best.actions for n in (a.params.get("a"), a.params.get("b"))}
            nodes |= {n for a in best.actions for g in a.params.get("groups") or () for n in g}
            if name in nodes:
                continue
            clients = {k: v for k, v in getattr(best, table).items() if k != name}
            candidate = Schedule(best.generation, best.seed, best.cluster,
                                 clients if table == "producers" else best.producers,
                                 clients if table == "consumers" else best.consumers,
                                 best.actions, best.healing_ms, best.origin)
            progress = fails(candidate) or progress
    return progress


def _compress_time(state: dict[str, Any], fails: Callable[[Schedule], bool]) -> bool:
    progress = False
    i = 0
    while i < len(state["best"].actions):
        actions = list(state["best"].actions)
        previous = actions[i - 1].at_ms if i > 0 else 0
        gap = actions[i].at_ms - previous
        if gap >= 2:
            shift = gap // 2
            moved = [a if j < i else Action(a.at_ms - shift, a.op, a.params)
                     for j, a in enumerate(actions)]
            if fails(state["best"].with_actions(moved)):
                progress = True
                continue
        i += 1
    return progress
