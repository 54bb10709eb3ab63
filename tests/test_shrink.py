"""Shrinking keeps the same violation and never makes a schedule longer."""

from __future__ import annotations

import pytest

from epochlab.fuzz import execute, generate_schedule
from epochlab.fuzz.convert import scenario_to_schedule
from epochlab.fuzz.schedule import Action
from epochlab.fuzz.shrink import shrink
from epochlab.scenarios import load_builtin


@pytest.fixture(scope="module")
def lossy_schedule():  # type: ignore[no-untyped-def]
    """A random hw-truncation schedule that loses committed data (a protocol violation: the
    seed-004 scenario's loss now comes from an unclean election, which the configuration
    allows), padded with irrelevant actions."""
    base = generate_schedule(44, "hw-truncation")
    noise = [Action(a.at_ms, "set_link", {"a": "controller", "b": 1, "delay_ms": None, "drop": 0.0,
                                          "duplicate": 0.0, "reorder": True}) for a in base.actions[:3]]
    actions = sorted([*base.actions, *noise], key=lambda a: a.at_ms)
    return base.with_actions(actions)


def test_shrink_preserves_the_violation_and_never_grows(lossy_schedule) -> None:  # type: ignore[no-untyped-def]
    before = execute(lossy_schedule).verdict
    target = before.first("Inv-Durability")
    assert target is not None
    res = shrink(lossy_schedule, "inv-durability", max_runs=150)
    assert len(res.schedule.actions) <= len(lossy_schedule.actions)
    assert len(res.schedule.actions) < len(lossy_schedule.actions)
    again = execute(res.schedule)
    assert again.verdict.first("inv-durability") is not None
    assert res.signature == "inv-durability"


def test_shrink_of_a_clean_schedule_is_refused() -> None:
    clean = scenario_to_schedule(load_builtin("seed-004-kip101-problem-1"), "strict-min-isr")
    assert execute(clean).verdict.ok
    with pytest.raises(ValueError):
        shrink(clean, max_runs=5)


def test_shrink_budget_returns_a_valid_schedule(lossy_schedule) -> None:  # type: ignore[no-untyped-def]
    res = shrink(lossy_schedule, "inv-durability", max_runs=3)
    assert res.runs <= 3
    assert len(res.schedule.actions) <= len(lossy_schedule.actions)
    assert execute(res.schedule).verdict.first("inv-durability") is not None
