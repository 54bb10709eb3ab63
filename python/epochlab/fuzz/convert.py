"""Scenario files to schedules: the third producer of schedules (``docs/architecture.md``).

A scenario's steps are timed relative to each other (``after_ms``) and some take time
(``wait``, ``wait_until``, ``flush``), so the conversion runs the scenario once with the
scenario runner and takes the virtual time at which each step actually ran. Steps that only
pass time (``wait``, ``wait_until``, ``flush``, ``note``) become nothing: the next action's
``at_ms`` carries their effect. Expectations are not part of a schedule; the checker's
invariants judge the converted run instead. Actions run at the same millisecond as in the
scenario run; events due in that same millisecond may run before the action instead of after
it, so a converted schedule reproduces the scenario to the millisecond, not always to the event.
"""

from __future__ import annotations

from typing import Any

from epochlab.fuzz.schedule import OPS, Schedule
from epochlab.generations import Generation
from epochlab.steps import time_steps

__all__ = ["scenario_to_schedule"]

#: The steps that only pass time: the scenario-only time steps of ``epochlab.steps``. Every
#: other step has the same name and parameters in both formats.
_TIME_ONLY = {s.name for s in time_steps()}


def scenario_to_schedule(scenario: Any, generation: Generation | str | int | None = None,
                         seed: int | None = None, healing_ms: int = 60000) -> Schedule:
    """The schedule of ``scenario`` (an ``epochlab.scenarios.Scenario``) in ``generation``
    (default: the scenario's first)."""
    from epochlab.scenarios.runner import run_scenario

    gen = Generation.parse(generation if generation is not None else scenario.generations[0])
    seed = scenario.seed if seed is None else seed
    result = run_scenario(scenario, gen.label, seed=seed, write=False)
    actions: list[dict[str, Any]] = []
    for record in result.records[1:]:
        step = record.step
        if step is None or step.action in _TIME_ONLY:
            continue
        op = step.action
        params = {k: v for k, v in dict(step.params).items() if k in OPS[op] and v is not None}
        for key, value in list(params.items()):
            if isinstance(value, tuple):
                params[key] = [list(v) if isinstance(v, tuple) else v for v in value]
        actions.append({"at_ms": record.executed_at_ms, "op": op, **params})
    return Schedule.from_dict({
        "format": "epochlab-schedule", "version": 2, "generation": gen.label, "seed": seed,
        "healing_ms": healing_ms, "cluster": dict(scenario.cluster),
        "producers": {k: dict(v) for k, v in scenario.producers.items()},
        "consumers": {k: dict(v) for k, v in scenario.consumers.items()},
        "actions": actions, "origin": {"engine": "scenario", "scenario": scenario.name}},
        f"scenario {scenario.name}")
