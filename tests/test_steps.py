"""The step vocabulary (``epochlab.steps``) is the one list of steps: every registered step is
accepted by the schedule validator and the scenario vocabulary, performed by the executor and
the scenario runner on the simulator, drawn by the generator or declared not generated,
described by the schemas, mapped onto a live cluster or given the reason it cannot be, and
known to the shrinker. :func:`gaps` checks one entry against all of them; the last tests show
it failing for entries that lack them.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from epochlab.campaigns import build_schedule, parse_grid
from epochlab.errors import EpochlabError
from epochlab.fuzz import guided
from epochlab.fuzz.executor import execute
from epochlab.fuzz.generator import FAULT_CLASSES, TXN_FAULT_CLASSES, FuzzProfile, RandomSource, builder_for
from epochlab.fuzz.schedule import FAULT_CLASS, OPS, V2_OPS, Schedule
from epochlab.fuzz.shrink import SIMPLIFICATIONS
from epochlab.kafka.runs import driver
from epochlab.kafka.runs import scenario as live_scenario
from epochlab.scenarios import runner
from epochlab.scenarios.loader import from_mapping
from epochlab.scenarios.model import ACTIONS
from epochlab.scenarios.runner import run_scenario
from epochlab.schemas import json_schema
from epochlab.steps import (CAMPAIGN_FAULTS, CLIENT, SCENARIO_ORDER, STEPS, SWARM_CLASSES, Call, Param, Step,
                            Unmapped, schedule_steps)

#: A value of each parameter type, for a step without an ``example``.
SAMPLES: dict[str, Any] = {"broker": 1, "node": 1, "producer": "p1", "consumer": "c1", "groups": [[1]],
                           "int": 0, "pos_int": 1, "bool": False, "fraction": 0.0, "delay": [1, 5],
                           "values": [1], "spec": "latest", "str": "a note", "condition": {"leader": 1}}
PRODUCERS = {"p1": {}, "t1": {"transactional.id": "tx-1", "acks": "all"}}
CONSUMERS = {"c1": {}}


def example(step: Step) -> dict[str, Any]:
    if step.example is not None:
        return json.loads(json.dumps(step.example))
    return {p.name: SAMPLES[p.type] for p in step.params if p.required}


def tiny_schedule(step: Step, version: int) -> dict[str, Any]:
    """A produce, then the step."""
    return {"format": "epochlab-schedule", "version": version, "generation": "strict-min-isr", "seed": 1,
            "healing_ms": 3000, "cluster": {"brokers": [1, 2, 3]}, "producers": PRODUCERS,
            "consumers": CONSUMERS,
            "actions": [{"at_ms": 100, "op": "produce", "producer": "p1", "count": 1},
                        {"at_ms": 200, "op": step.name, **example(step)}]}


def tiny_scenario(step: Step) -> Any:
    """A produce, then the step."""
    return from_mapping({"name": f"step-{step.name}", "generations": ["strict-min-isr"],
                         "cluster": {"brokers": [1, 2, 3]}, "producers": PRODUCERS, "consumers": CONSUMERS,
                         "steps": [{"action": "produce", "producer": "p1", "values": [1]},
                                   {"action": step.name, "after_ms": 100, **example(step)}]}, "<test>")


def _tagged(schema: Mapping[str, Any], key: str) -> dict[str, set[str]]:
    """The members of the tagged union told apart by ``key`` in a JSON Schema: tag -> its
    properties."""
    found: dict[str, set[str]] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            disc = node.get("discriminator")
            if isinstance(disc, dict) and disc.get("propertyName") == key:
                for tag, ref in disc["mapping"].items():
                    found[tag] = set(schema["$defs"][ref.rsplit("/", 1)[1]]["properties"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(schema)
    return found


@functools.cache
def schema_members(kind: str) -> dict[str, set[str]]:
    return _tagged(json_schema(kind), "op" if kind == "schedule" else "action")


@functools.cache
def drawn(swarm_class: str) -> frozenset[str]:
    """The steps the generator's draws of ``swarm_class`` make (:data:`CLIENT`: its client
    operations, in the transactions profile), over many draws."""
    profile = FuzzProfile().with_transactions()
    context = {"cluster": {"brokers": [1, 2, 3]}, "producers": {"p1": {}, "t1": {}}, "consumers": CONSUMERS}
    builder = builder_for(profile, context, {} if swarm_class == CLIENT else {swarm_class: 1})
    src = RandomSource(f"steps-{swarm_class}")
    draws = (builder.action(src) if swarm_class == CLIENT else builder._fault(swarm_class, src)
             for _ in range(600))
    return frozenset(a["op"] for a in draws if a is not None)


# -- the checks -------------------------------------------------------------------------------

def _schedule_validator(step: Step) -> str | None:
    if step.time_only:
        if step.name in OPS:
            return "a time step among the schedule's ops"
        return None
    if OPS.get(step.name) != step.schedule_spec():
        return f"fuzz.schedule.OPS has {OPS.get(step.name)} for its parameters"
    if (step.name in V2_OPS) != (step.version is not None and step.version >= 2):
        return f"fuzz.schedule.V2_OPS disagrees with version {step.version}"
    try:
        Schedule.from_dict(tiny_schedule(step, step.version or 1))
    except EpochlabError as exc:
        return f"the schedule validator refuses it: {exc}"
    if step.version == 2:
        try:
            Schedule.from_dict(tiny_schedule(step, 1))
        except EpochlabError:
            return None
        return "a version-1 schedule accepts it"
    return None


def _scenario_vocabulary(step: Step) -> str | None:
    if ACTIONS.get(step.name) != step.scenario_spec():
        return f"scenarios.model.ACTIONS has {ACTIONS.get(step.name)} for its parameters"
    try:
        tiny_scenario(step)
    except EpochlabError as exc:
        return f"the scenario loader refuses it: {exc}"
    return None


def _scenario_runner(step: Step) -> str | None:
    if step.name not in runner._ACTIONS:
        return "scenarios.runner has no action for it"
    try:
        result = run_scenario(tiny_scenario(step), write=False)
    except EpochlabError as exc:
        return f"the scenario does not load: {exc}"
    record = result.records[-1]
    if record.step is None or record.step.action != step.name or record.error is not None:
        return f"the scenario runner failed it: {record.error}"
    return None


def _executor(step: Step) -> str | None:
    """Run the step in a tiny schedule; its simulator action must be what performs it."""
    if step.time_only:
        return None if step.sim is None else "a time step with a simulator action"
    if step.sim is None:
        return "no simulator action"
    calls: list[Mapping[str, Any]] = []
    sim = step.sim

    def spy(run: Any, params: Mapping[str, Any]) -> Any:
        calls.append(params)
        return sim(run, params)
    saved = STEPS.get(step.name)
    STEPS[step.name] = dataclasses.replace(step, sim=spy)
    schedule = tiny_schedule(step, step.version or 1)
    expected = sum(a["op"] == step.name for a in schedule["actions"])
    try:
        execute(Schedule.from_dict(schedule))
    except Exception as exc:  # noqa: BLE001 - whatever fails is the finding
        return f"the executor cannot run it: {type(exc).__name__}: {exc}"
    finally:
        if saved is None:
            del STEPS[step.name]
        else:
            STEPS[step.name] = saved
    if len(calls) != expected:
        return f"its simulator action ran {len(calls)} times, not {expected}"
    return None


def _generator(step: Step) -> str | None:
    if step.time_only:
        return None if step.drawn_by == () else "a time step drawn by the generator"
    for name in step.drawn_by:  # () declares it not generated
        if name != CLIENT and name not in FAULT_CLASSES:
            return f"{name!r} is no fault class of the generator (fuzz.generator.FAULT_CLASSES)"
        if step.name not in drawn(name):
            return f"the generator's {name!r} draws never make it"
    return None


def _schemas(step: Step) -> str | None:
    schedule = schema_members("schedule").get(step.name)
    if step.time_only and schedule is not None:
        return "a time step in the schedule schema"
    if not step.time_only and schedule != {"op", "at_ms", *step.schedule_spec()}:
        return f"the schedule schema has {schedule}"
    scenario = schema_members("scenario").get(step.name)
    if scenario is None or not {"action", *(p.name for p in step.scenario_spec())} <= scenario:
        return f"the scenario schema has {scenario}"
    return None


def _live(step: Step) -> str | None:
    if isinstance(step.live, Unmapped):
        if not step.live.reason:
            return "unmapped without a reason"
        why = live_scenario.unmappable(tiny_scenario(step))
        if not any(step.live.reason in line for line in why):
            return f"kafka.runs.scenario.unmappable does not give its reason: {why}"
        return None
    if not isinstance(step.live, str) or not step.live:
        return f"no live mapping decision: {step.live!r}"
    if driver.ACTIONS.get(step.name) is not getattr(driver, step.live, None) or step.name not in driver.ACTIONS:
        return f"kafka.runs.driver.ACTIONS does not perform it with {step.live}"
    return None


def _shrinker(step: Step) -> str | None:
    if step.shrinks != (step.name in SIMPLIFICATIONS):
        return (f"shrinks={step.shrinks}, but fuzz.shrink.SIMPLIFICATIONS "
                f"{'has' if step.name in SIMPLIFICATIONS else 'lacks'} it")
    if step.time_only and step.shrinks:
        return "a time step the shrinker simplifies"
    return None


def _fault_class(step: Step) -> str | None:
    if step.time_only:
        return None if step.fault_class is None else "a time step with a fault class"
    if not step.fault_class or FAULT_CLASS.get(step.name) != step.fault_class:
        return f"fuzz.schedule.FAULT_CLASS has {FAULT_CLASS.get(step.name)!r}"
    return None


def _ends(step: Step) -> str | None:
    if (step.name in guided.FAULTS) != (step.ends is not None):
        return "fuzz.guided.FAULTS disagrees with its ends"
    if step.ends is not None:
        fault = {"at_ms": 200, "op": step.name, **example(step)}
        data = tiny_schedule(step, step.version or 1)
        data["actions"] += [{"at_ms": 300, **step.ends(fault, data["cluster"])}]
        try:
            Schedule.from_dict(data)
        except EpochlabError as exc:
            return f"its end is no valid action: {exc}"
    return None


CHECKS: dict[str, Callable[[Step], str | None]] = {
    "schedule validator": _schedule_validator,
    "scenario vocabulary": _scenario_vocabulary,
    "scenario runner": _scenario_runner,
    "executor": _executor,
    "generator": _generator,
    "schemas": _schemas,
    "live": _live,
    "shrinker": _shrinker,
    "fault class": _fault_class,
    "ends": _ends,
}


def gaps(step: Step) -> dict[str, str]:
    """What the layers that read the vocabulary lack for ``step``: check -> problem."""
    out = {}
    for name, check in CHECKS.items():
        problem = check(step)
        if problem is not None:
            out[name] = problem
    return out


# -- every registered step --------------------------------------------------------------------

@pytest.mark.parametrize("name", list(STEPS))
def test_every_layer_knows_the_step(name: str) -> None:
    assert gaps(STEPS[name]) == {}


def test_the_tables_hold_only_registered_steps() -> None:
    schedule = {s.name for s in schedule_steps()}
    assert set(OPS) == schedule and set(FAULT_CLASS) == schedule
    assert set(ACTIONS) == set(STEPS) and set(SCENARIO_ORDER) <= set(STEPS)
    assert set(runner._ACTIONS) == set(STEPS)
    assert set(SIMPLIFICATIONS) <= schedule
    assert set(driver.ACTIONS) == {s.name for s in STEPS.values() if isinstance(s.live, str)}
    assert live_scenario._NO_MAPPING == {s.name: s.live.reason for s in STEPS.values()
                                         if isinstance(s.live, Unmapped)}
    assert set(schema_members("schedule")) == schedule and set(schema_members("scenario")) == set(STEPS)


def test_the_generator_draws_only_what_the_vocabulary_says() -> None:
    assert FAULT_CLASSES == {c.name: c.weight for c in SWARM_CLASSES}
    assert TXN_FAULT_CLASSES == {"coordinator": 2, "txn-delay": 4}
    for swarm_class in [CLIENT, *FAULT_CLASSES]:
        declared = {s.name for s in STEPS.values() if swarm_class in s.drawn_by}
        assert drawn(swarm_class) == declared, swarm_class


def test_campaign_fault_kinds_are_made_of_their_steps() -> None:
    grid = parse_grid({"axes": {"generation": ["strict-min-isr"], "acks": ["all"], "min.insync.replicas": [2],
                                "replication.factor": [3], "unclean.leader.election.enable": [False],
                                "enable.idempotence": [False]}})
    client = {s.name for s in STEPS.values() if CLIENT in s.drawn_by}
    for kind in CAMPAIGN_FAULTS:
        assert set(kind.steps) <= {s.name for s in schedule_steps()}, kind.name
        only = dataclasses.replace(grid, faults={k.name: int(k is kind) for k in CAMPAIGN_FAULTS})
        used = {a.op for seed in range(20) for a in build_schedule(grid.configs[0], seed, only)[0].actions}
        assert used - client == set(kind.steps), kind.name


# -- an incomplete entry fails ----------------------------------------------------------------

def test_a_step_only_registered_is_known_nowhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new entry and nothing else: every layer lacks it, except what it declares itself
    (no simplification, no end)."""
    pause = Step("pause_broker", (Param("broker", "broker", required=True),), fault_class="pause", version=2,
                 sim=Call("pause", ("broker",)), live="pause_broker", drawn_by=("pause",), shrinks=False)
    monkeypatch.setitem(STEPS, "pause_broker", pause)
    assert set(gaps(pause)) == set(CHECKS) - {"shrinker", "ends"}


def test_a_step_with_wrong_declarations_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """A known step whose entry says the wrong thing about the shrinker, the live cluster,
    the generator and its end."""
    crash = STEPS["crash"]
    wrong = dataclasses.replace(crash, shrinks=False, live=Unmapped(""), drawn_by=("crash", "slow"), ends=None)
    monkeypatch.setitem(STEPS, "crash", wrong)
    assert set(gaps(wrong)) == {"shrinker", "live", "generator", "ends"}
    no_live = dataclasses.replace(crash, live="no_such_function")
    assert set(gaps(no_live)) == {"live"}


def test_a_step_the_simulator_cannot_perform_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = dataclasses.replace(STEPS["heal"], sim=Call("no_such_method"))
    monkeypatch.setitem(STEPS, "heal", broken)
    assert set(gaps(broken)) == {"executor", "scenario runner"}
