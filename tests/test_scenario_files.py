"""Malformed scenario files: every error names the file, the field path and what was expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochlab.errors import ScenarioError
from epochlab.scenarios import ScenarioBuilder, load_file, loads

GOOD = """
name = "tiny"
description = "a tiny scenario"
[cluster]
"min.insync.replicas" = 2
[producers.p1]
acks = "all"
[consumers.c1]
[[steps]]
action = "produce"
producer = "p1"
values = [1, 2]
[[steps]]
action = "crash"
broker = 1
after_ms = 10
label = "boom"
[[expect]]
kind = "lost"
values = [2]
generations = ["hw-truncation"]
"""


def _error(text: str, tmp_path: Path) -> ScenarioError:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as info:
        load_file(path)
    err = info.value
    assert err.where == str(path)
    assert str(path) in str(err)
    assert err.field in str(err)
    assert err.expected
    return err


def test_good_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "good.toml"
    path.write_text(GOOD)
    s = load_file(path)
    assert s.name == "tiny"
    assert [st.action for st in s.steps] == ["produce", "crash"]
    assert s.steps[1].params == {"broker": 1, "lose_unflushed": False}
    assert s.steps[1].after_ms == 10 and s.steps[1].label == "boom"
    assert s.expectations[0].generations == ("hw-truncation",)
    assert s.generations[0] == "hw-truncation" and len(s.generations) == 6


@pytest.mark.parametrize(
    ("replace", "by", "field", "expected_part"),
    [
        ('broker = 1\n', 'broker = "one"\n', "steps[1].broker", "an integer"),
        ('broker = 1\n', 'broker = 7\n', "steps[1].broker", "broker id"),
        ('after_ms = 10', 'after_ms = -5', "steps[1].after_ms", ">= 0"),
        ('after_ms = 10', 'after_ms = 1_000_000_000_000', "steps[1].after_ms", "<= 86400000"),
        ('after_ms = 10', 'after_ms = 10\ncolour = "red"', "steps[1].colour", "unknown key"),
        ('action = "crash"', 'action = "explode"', "steps[1].action", "produce"),
        ('broker = 1\nafter_ms', 'after_ms', "steps[1].broker", "required"),
        ('values = [1, 2]\n[[steps]]', 'values = ["a"]\n[[steps]]', "steps[0].values[0]", "an integer"),
        ('producer = "p1"', 'producer = "p9"', "steps[0].producer", "declared"),
        ('kind = "lost"', 'kind = "vanished"', "expect[0].kind", "lost"),
        ('generations = ["hw-truncation"]', 'generations = ["kip-999"]', "expect[0].generations[0]",
         "generation"),
        ('name = "tiny"', 'name = "Tiny Scenario"', "name", "lower-case"),
        ('name = "tiny"\n', '', "name", "required"),
        ('description = "a tiny scenario"', 'description = 3', "description", "string"),
        ('description = "a tiny scenario"', 'colour = "red"', "colour", "unknown key"),
        ('"min.insync.replicas" = 2', '"min.insync.replicas" = "two"', "cluster.min.insync.replicas",
         "integer"),
        ('"min.insync.replicas" = 2', '"min.insync.replica" = 2', "cluster.min.insync.replica", "one of"),
        ('acks = "all"', 'acks = "some"', "producers.p1.acks", '"all"'),
        ('generations = ["hw-truncation"]', 'from_release = "2.0"', "expect[0].from_release", "X.Y.Z"),
        ('generations = ["hw-truncation"]', 'before_release = 201', "expect[0].before_release", "string"),
    ],
)
def test_malformed_field(tmp_path: Path, replace: str, by: str, field: str, expected_part: str) -> None:
    assert replace in GOOD
    err = _error(GOOD.replace(replace, by, 1), tmp_path)
    assert err.field == field
    assert expected_part in err.expected


def test_bad_toml_syntax_names_the_line(tmp_path: Path) -> None:
    err = _error(GOOD + "\n[[steps]\naction = 'x'\n", tmp_path)
    assert err.field.startswith("line ")
    assert err.expected == "valid TOML"


def test_missing_file_is_a_scenario_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError) as info:
        load_file(tmp_path / "absent.toml")
    assert info.value.field == "<file>"


def test_at_and_after_are_exclusive(tmp_path: Path) -> None:
    err = _error(GOOD.replace("after_ms = 10", "after_ms = 10\nat_ms = 3"), tmp_path)
    assert err.field == "steps[1].at_ms"


def test_produce_needs_values_or_count(tmp_path: Path) -> None:
    err = _error(GOOD.replace("values = [1, 2]\n[[steps]]", "count = 2\nvalues = [1]\n[[steps]]"), tmp_path)
    assert err.field == "steps[0].values"
    assert "exactly one" in err.expected


def test_count_uses_fresh_values() -> None:
    s = loads(GOOD.replace("values = [1, 2]\n[[steps]]", "count = 3\n[[steps]]")
              + '[[steps]]\naction = "produce"\nproducer = "p1"\nvalues = [7]\n'
              + '[[steps]]\naction = "produce"\nproducer = "p1"\ncount = 2\n')
    assert s.steps[0].params["values"] == [1, 2, 3]
    assert s.steps[3].params["values"] == [8, 9]


def test_wait_until_condition_keys_checked(tmp_path: Path) -> None:
    text = GOOD + '[[steps]]\naction = "wait_until"\ncondition = { leeder = 2 }\ntimeout_ms = 10\n'
    err = _error(text, tmp_path)
    assert err.field == "steps[2].condition.leeder"
    text = GOOD + '[[steps]]\naction = "wait_until"\ncondition = { leader = 9 }\ntimeout_ms = 10\n'
    assert _error(text, tmp_path).field == "steps[2].condition.leader"


def test_after_step_reference(tmp_path: Path) -> None:
    ok = loads(GOOD + '[[expect]]\nkind = "leader"\nbroker = 2\nafter_step = "boom"\n')
    assert ok.expectations[1].after_step == 1
    err = _error(GOOD + '[[expect]]\nkind = "leader"\nafter_step = "nope"\n', tmp_path)
    assert err.field == "expect[1].after_step"
    err = _error(GOOD + '[[expect]]\nkind = "acked"\nproducer = "p1"\nvalues = [1]\nafter_step = 0\n',
                 tmp_path)
    assert "whole run" in err.expected


def test_generation_plus_suffix() -> None:
    s = loads(GOOD.replace('generations = ["hw-truncation"]', 'generations = ["kip-320+"]'))
    assert s.expectations[0].generations == ("kip-320", "diverging-epoch", "strict-min-isr")


def test_release_bounds_follow_the_runs_release_or_each_generations_newest() -> None:
    """An expectation bounded by release is judged in the runs whose release is in bounds;
    a run without ``kafka.release`` counts as its generation's newest release."""
    s = loads(GOOD.replace('generations = ["hw-truncation"]', 'before_release = "2.0.1"'))
    e = s.expectations[0]
    assert e.before_release == "2.0.1" and e.to_dict()["before_release"] == "2.0.1"
    assert e.applies_to("hw-truncation") and e.applies_to("kip-101")
    assert not e.applies_to("kip-279")  # its newest release, 2.0.1, is not before 2.0.1
    assert e.applies_to("kip-279", (2, 0, 0)) and not e.applies_to("kip-279", (2, 0, 1))
    s = loads(GOOD.replace('generations = ["hw-truncation"]', 'generations = ["kip-279+"]\nfrom_release = "2.0.1"'))
    e = s.expectations[0]
    assert e.applies_to("kip-279") and e.applies_to("strict-min-isr", (4, 3, 1))
    assert not e.applies_to("kip-279", (2, 0, 0)) and not e.applies_to("kip-101")


def test_partition_groups_validated(tmp_path: Path) -> None:
    text = GOOD + '[[steps]]\naction = "partition"\ngroups = [[1, "p1"], [1, 2]]\n'
    err = _error(text, tmp_path)
    assert err.field == "steps[2].groups[1][0]"
    text = GOOD + '[[steps]]\naction = "partition"\ngroups = [[1, "nobody"]]\n'
    assert _error(text, tmp_path).field == "steps[2].groups[0][1]"


def test_duplicate_label_rejected(tmp_path: Path) -> None:
    text = GOOD + '[[steps]]\naction = "heal"\nlabel = "boom"\n'
    assert _error(text, tmp_path).field == "steps[2].label"


def test_wrong_table_shapes(tmp_path: Path) -> None:
    assert _error('name = "x"\nsteps = 3\n', tmp_path).field == "steps"
    assert _error('name = "x"\ncluster = 3\n', tmp_path).field == "cluster"
    assert _error('name = "x"\nexpect = [1]\n', tmp_path).field == "expect[0]"
    assert _error('name = "x"\n[[steps]]\nbroker = 1\n', tmp_path).field == "steps[0].action"


def test_python_builder_validates_like_files() -> None:
    b = ScenarioBuilder("py", description="built in Python")
    b.producer("p1", acks="all").step("produce", producer="p1", count=2).step("crash", broker=4)
    with pytest.raises(ScenarioError) as info:
        b.build()
    assert info.value.where == "<python>"
    assert info.value.field == "steps[1].broker"
    ok = ScenarioBuilder("py").producer("p1").step("produce", producer="p1", values=[5])
    ok.expect("present", values=[5], generations=["kip-101+"])
    s = ok.build()
    assert s.steps[0].params["values"] == [5]
    assert s.expectations[0].generations[0] == "kip-101"


def test_parameter_names_do_not_shadow_reserved_keys() -> None:
    from epochlab.scenarios.loader import _EXPECT_KEYS, _STEP_KEYS
    from epochlab.scenarios.model import ACTIONS, EXPECTATIONS

    for spec in ACTIONS.values():
        assert not {p.name for p in spec} & set(_STEP_KEYS)
    for spec in EXPECTATIONS.values():
        assert not {p.name for p in spec} & set(_EXPECT_KEYS)
