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

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from epochlab.fuzz.executor import RunResult, execute
from epochlab.fuzz.schedule import Action, Schedule

__all__ = ["ShrinkResult", "shrink"]


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


def _simpler(action: Action) -> Iterator[Action]:
    p = action.params
    def variant(**changes: Any) -> Action:
        return Action(action.at_ms, action.op, {**p, **changes})
    if action.op == "produce" and p.get("count") not in (None, 1):
        yield variant(count=1)
    if action.op == "produce" and p.get("values") and len(p["values"]) > 1:
        yield variant(values=p["values"][:1])
    if action.op == "crash" and p["lose_unflushed"]:
        yield variant(lose_unflushed=False)
    if action.op == "set_link":
        for key, plain in (("drop", 0.0), ("duplicate", 0.0), ("reorder", False)):
            if p[key] != plain:
                yield variant(**{key: plain})
        if p["delay_ms"] is not None and p["delay_ms"][1] > 5:
            yield variant(delay_ms=(min(p["delay_ms"][0], 1), max(5, p["delay_ms"][1] // 2)))
    if action.op == "slow_follower" and p["extra_delay_ms"] > 0:
        yield variant(extra_delay_ms=p["extra_delay_ms"] // 2)
    if action.op == "partition":
        groups = [list(g) for g in p["groups"]]
        for gi, group in enumerate(groups):
            for node in group:
                smaller = [list(g) for g in groups]
                smaller[gi] = [x for x in group if x != node]
                smaller = [g for g in smaller if g]
                if smaller:
                    yield variant(groups=tuple(tuple(g) for g in smaller))
    if action.op == "elect" and p["unclean"]:
        yield variant(unclean=False)


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
