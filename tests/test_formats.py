"""The file formats as pydantic models (``epochlab.formats``, each model beside its vocabulary,
named by ``epochlab.schemas``): every problem at once with its path, bounds that keep runs finite,
and JSON Schemas in ``docs/schemas`` that match the code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from epochlab.cli import main
from epochlab.errors import ConfigError, ScenarioError, ScheduleError
from epochlab.formats import MAX_MS, check
from epochlab.fuzz import FuzzProfile, generate_schedule
from epochlab.scenarios import builtin_names, builtin_text
from epochlab.schemas import FORMATS, json_schema
from epochlab.sim import ClusterConfig, ProducerConfig

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("kind", sorted(FORMATS))
def test_the_schemas_in_docs_are_the_models(kind: str) -> None:
    on_disk = json.loads((ROOT / "docs" / "schemas" / f"{kind}.schema.json").read_text())
    assert on_disk == json_schema(kind), f"regenerate: epochlab schema {kind} > docs/schemas/{kind}.schema.json"


def test_what_epochlab_writes_is_well_formed() -> None:
    import tomllib

    for name in builtin_names():
        assert check(FORMATS["scenario"](), tomllib.loads(builtin_text(name)), name) == []
    for transactions in (False, True):
        profile = FuzzProfile().with_transactions() if transactions else FuzzProfile()
        for seed in range(20):
            assert check(FORMATS["schedule"](), generate_schedule(seed, "strict-min-isr", profile).to_dict(), "s") == []
    assert check(FORMATS["fuzz-profile"](), FuzzProfile().to_dict(), "p") == []
    from epochlab.campaigns.grid import DEFAULT_GRID

    assert check(FORMATS["campaign-grid"](), DEFAULT_GRID, "g") == []


def test_every_problem_is_reported_at_once_with_its_path(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    data = generate_schedule(3, "kip-101").to_dict()
    data["seed"] = -1
    data["actions"][2]["at_ms"] = 10**18
    data["actions"][4]["colour"] = "red"
    data["actions"].append({"at_ms": 5})
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert "4 problems" in err
    for where in ("seed: must be >= 0", "actions[2].at_ms: must be <= 86400000",
                  "actions[4].colour: unknown key", f"actions[{len(data['actions']) - 1}].op: required key op missing"):
        assert where in err, err
    assert "Traceback" not in err
    from epochlab.fuzz import load_schedule

    with pytest.raises(ScheduleError) as info:
        load_schedule(path)
    assert info.value.field == "seed" and len(info.value.problems) == 4


@pytest.mark.parametrize("kind, body, field", [
    ("scenario", 'name = "x"\n[[steps]]\naction = "wait"\nms = 1_000_000_000_000_000_000\n', "steps[0].ms"),
    ("scenario", 'name = "x"\n[[steps]]\naction = "produce"\nproducer = "p"\ncount = 10_000_000\n', "steps[0].count"),
    ("fuzz-profile", '{"healing_ms": 1000000000000000000}', "healing_ms"),
    ("campaign-grid", '{"faults": {"leader-crash": 1000000000000}}', "faults.leader-crash"),
])
def test_huge_times_and_counts_are_refused_not_run(tmp_path: Path, kind: str, body: str, field: str) -> None:
    """A hostile input: a time or count of 10^18 used to run for ever."""
    if kind == "scenario":
        from epochlab.scenarios import loads

        with pytest.raises(ScenarioError) as info:
            loads(body, "x.toml")
    elif kind == "fuzz-profile":
        from epochlab.fuzz.generator import load_profile

        path = tmp_path / "p.json"
        path.write_text(body)
        with pytest.raises(ScheduleError) as info:
            load_profile(path)
    else:
        from epochlab.campaigns.grid import load_grid

        path = tmp_path / "g.json"
        path.write_text(body)
        with pytest.raises(ConfigError) as info:
            load_grid(path)
    assert info.value.field == field


def test_settings_are_bounded_too() -> None:
    with pytest.raises(ConfigError, match="session_timeout_ms|session.timeout.ms"):
        ClusterConfig(session_timeout_ms=MAX_MS + 1)
    with pytest.raises(ConfigError):
        ProducerConfig(retries=2**31)
    assert ClusterConfig(session_timeout_ms=MAX_MS).session_timeout_ms == MAX_MS


def test_schema_command_prints_a_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "schedule"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["$schema"].startswith("https://json-schema.org/") and "actions" in schema["properties"]
    assert main(["schema", "nonsense"]) == 2


@pytest.mark.parametrize("cmd, name, body", [
    (["replay"], "s.json", '{"format": "epochlab-schedule", "version": 2, "generation": "kip-101", "seed": [1]}'),
    (["fuzz", "--runs", "1", "--config"], "p.json", '{"actions": [5]}'),
    (["campaign", "--runs", "1", "--grid"], "g.json", '{"faults": {"leader-crash": [1]}}'),
    (["scenario", "run"], "x.toml", 'name = "x"\nseed = [1]\n'),
])
def test_a_list_where_a_number_belongs_is_exit_2_with_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              cmd: list[str], name: str, body: str) -> None:
    """A hostile input: a list where a scalar belongs ended in an untyped TypeError (exit 1)."""
    path = tmp_path / name
    path.write_text(body)
    assert main([*cmd, str(path)]) == 2
    err = capsys.readouterr().err
    field = {"s.json": "seed", "p.json": "actions", "g.json": "faults.leader-crash", "x.toml": "seed"}[name]
    assert f"{field}: expected an integer" in err and "Traceback" not in err and len(err.splitlines()) == 1
