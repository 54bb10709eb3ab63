"""Schedules: the JSON format, validation errors that name the field, the three producers
(random with swarm testing, fuzzer bytes, scenario files), and byte-identical replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from epochlab.errors import ScenarioError, ScheduleError
from epochlab.fuzz import Schedule, decode_schedule, execute, generate_schedule, load_schedule
from epochlab.fuzz.convert import scenario_to_schedule
from epochlab.fuzz.campaign import run_seed
from epochlab.fuzz.generator import (
    HEADER_BYTES,
    RECORD_BYTES,
    FuzzProfile,
    encode_random_schedule,
    load_profile,
)
from epochlab.fuzz.schedule import OPS, V2_OPS
from epochlab.scenarios import load_builtin


def _base(**changes: object) -> dict:
    data = {"format": "epochlab-schedule", "version": 1, "generation": "kip-320", "seed": 3,
            "cluster": {"min.insync.replicas": 2}, "producers": {"p1": {"acks": "all"}},
            "consumers": {"c1": {"auto.offset.reset": "earliest"}},
            "actions": [{"at_ms": 100, "op": "produce", "producer": "p1", "count": 2},
                        {"at_ms": 300, "op": "crash", "broker": 1, "lose_unflushed": True},
                        {"at_ms": 900, "op": "restart", "broker": 1},
                        {"at_ms": 950, "op": "consume", "consumer": "c1"}]}
    data.update(changes)
    return data


def test_round_trip_is_canonical() -> None:
    s = Schedule.from_dict(_base())
    again = Schedule.from_json(s.to_json())
    assert again == s and again.to_json() == s.to_json()
    assert json.loads(s.to_json())["format"] == "epochlab-schedule"
    assert list(json.loads(s.to_json())) == sorted(json.loads(s.to_json()))


def test_the_configurations_validation_built_are_the_ones_a_run_uses() -> None:
    """``Schedule.configs``: what validation built (the engine's own configuration classes)
    is what the executor runs with, equal to building them again; not part of the schedule
    (equality, JSON), and gone from a copy with other fields, which the executor then builds
    from the copy's own settings."""
    import dataclasses

    from epochlab.fuzz.executor import Run
    from epochlab.sim.config import ClusterConfig, ConsumerConfig, ProducerConfig

    s = Schedule.from_dict(_base())
    assert s.configs == {"cluster": ClusterConfig.from_dict(s.cluster, "cluster"),
                         "producers.p1": ProducerConfig.from_dict(s.producers["p1"], "producers.p1"),
                         "consumers.c1": ConsumerConfig.from_dict(s.consumers["c1"], "consumers.c1")}
    run = Run(s, None)
    assert run.config is s.configs["cluster"]
    assert run.producers["p1"].config is s.configs["producers.p1"]
    copy = dataclasses.replace(s, cluster={"min.insync.replicas": 1})
    assert copy.configs is None and copy != s and "configs" not in s.to_dict()
    assert Run(copy, None).config.min_insync_replicas == 1
    assert execute(copy).verdict_json() == execute(Schedule.from_dict(copy.to_dict())).verdict_json()


@pytest.mark.parametrize("change, field", [
    ({"format": "other"}, "format"),
    ({"version": 3}, "version"),
    ({"generation": "kip-999"}, "generation"),
    ({"seed": -1}, "seed"),
    ({"bogus": 1}, "bogus"),
    ({"cluster": {"min.insync.replicas": "two"}}, "cluster.min.insync.replicas"),
    ({"actions": {"at_ms": 1}}, "actions"),
    ({"actions": [{"at_ms": 5, "op": "explode"}]}, "actions[0].op"),
    ({"actions": [{"at_ms": 5, "op": "crash"}]}, "actions[0].broker"),
    ({"actions": [{"at_ms": 5, "op": "crash", "broker": 9}]}, "actions[0].broker"),
    ({"actions": [{"at_ms": 5, "op": "crash", "broker": 1, "when": 2}]}, "actions[0].when"),
    ({"actions": [{"at_ms": 5, "op": "heal"}, {"at_ms": 4, "op": "heal"}]}, "actions[1].at_ms"),
    ({"actions": [{"at_ms": 5, "op": "produce", "producer": "nobody", "count": 1}]}, "actions[0].producer"),
    ({"actions": [{"at_ms": 5, "op": "produce", "producer": "p1"}]}, "actions[0].count"),
    ({"actions": [{"at_ms": 5, "op": "set_link", "a": 1, "b": 2, "drop": 1.5}]}, "actions[0].drop"),
    ({"actions": [{"at_ms": 5, "op": "partition", "groups": [[1, "ghost"]]}]}, "actions[0].groups[0][1]"),
])
def test_malformed_schedule_names_the_field(change: dict, field: str) -> None:
    with pytest.raises(ScheduleError) as err:
        Schedule.from_dict(_base(**change), "s.json")
    assert err.value.field == field
    assert err.value.where == "s.json"
    assert isinstance(err.value, ScenarioError)


def test_malformed_file_gives_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"format": "epochlab-schedule", "version": 1,', encoding="utf-8")
    with pytest.raises(ScheduleError) as err:
        load_schedule(path)
    assert "line 1" in err.value.field and str(path) in str(err.value)
    with pytest.raises(ScheduleError):
        load_schedule(tmp_path / "missing.json")


def test_cli_reports_a_malformed_schedule_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from epochlab.cli import main

    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_base(actions=[{"at_ms": 1, "op": "crash", "broker": "x"}])))
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "actions[0].broker" in err and len(err.splitlines()) == 1


def test_random_generator_is_deterministic_and_swarms() -> None:
    a, b = generate_schedule(5, "kip-101"), generate_schedule(5, "kip-101")
    assert a.to_json() == b.to_json()
    assert len(a.actions) == FuzzProfile().actions
    swarms = {tuple(generate_schedule(s, 0).origin["fault_classes"]) for s in range(12)}
    assert len(swarms) > 3  # whole fault classes switched on and off per run
    ops = {a.op for s in range(30) for a in generate_schedule(s, 0).actions}
    assert {"produce", "crash", "restart", "set_link", "partition"} <= ops


def test_generated_schedules_cover_the_fault_menu() -> None:
    profile = FuzzProfile(fault_classes={**FuzzProfile().fault_classes, "unclean": 1, "list-offsets": 1,
                                         "controller-failover": 1})
    ops = {a.op for s in range(60) for a in generate_schedule(s, 2, profile).actions}
    assert ops == set(OPS) - V2_OPS | {"list_offsets", "controller_failover"}
    txn = profile.with_transactions()
    ops |= {a.op for s in range(60) for a in generate_schedule(s, 2, txn).actions}
    assert ops == set(OPS)
    lossy = any(a.params.get("lose_unflushed") for s in range(20) for a in generate_schedule(s, 1).actions)
    links = [a.params for s in range(40) for a in generate_schedule(s, 1).actions if a.op == "set_link"]
    # broker links may reorder; the controller channel is one ordered, reliable connection
    assert any(p.get("reorder") and "controller" not in (p.get("a"), p.get("b")) for p in links)
    assert not any((p.get("reorder") or p.get("duplicate")) and "controller" in (p.get("a"), p.get("b"))
                   for p in links)
    assert lossy


def test_byte_decoder_small_mutations_make_small_changes() -> None:
    data = bytes(range(7, 250, 3)) * 4
    s = decode_schedule(data, "kip-279")
    assert s.to_json() == decode_schedule(data, "kip-279").to_json()
    mutated = bytearray(data)
    mutated[HEADER_BYTES + RECORD_BYTES * 5 + 1] ^= 0x55  # one byte inside the sixth action's record
    t = decode_schedule(bytes(mutated), "kip-279")
    assert len(t.actions) == len(s.actions)
    differing = [i for i, (x, y) in enumerate(zip(s.actions, t.actions)) if x.to_dict() != y.to_dict()]
    assert differing and all(i >= 5 for i in differing)
    assert decode_schedule(b"", "kip-279").actions == ()


@pytest.mark.parametrize("transactions", [False, True])
def test_every_random_schedule_has_an_exact_byte_encoding(transactions: bool) -> None:
    """The atheris engine's corpus starts with the random engine's schedules: the decoder
    must turn their encodings into the very same runs (seed, configuration, actions)."""
    profile = FuzzProfile().with_transactions() if transactions else FuzzProfile()
    for run in range(150):
        seed = run_seed(11, run)
        data = encode_random_schedule(seed, profile)
        assert len(data) == HEADER_BYTES + RECORD_BYTES * profile.actions
        for generation in ("hw-truncation", "strict-min-isr"):
            made = generate_schedule(seed, generation, profile).to_dict()
            decoded = decode_schedule(data, generation, profile).to_dict()
            assert made.pop("origin")["engine"] == "random"
            assert decoded.pop("origin")["engine"] == "bytes"
            assert decoded == made


def test_scenario_file_becomes_a_schedule() -> None:
    s = scenario_to_schedule(load_builtin("seed-004-kip101-problem-1"), "hw-truncation")
    assert s.origin["scenario"] == "seed-004-kip101-problem-1"
    assert [a.op for a in s.actions].count("crash") >= 1
    Schedule.from_json(s.to_json())


def test_replay_is_byte_identical(tmp_path: Path) -> None:
    s = generate_schedule(11, "kip-320", FuzzProfile(actions=40))
    path = s.save(tmp_path / "s.json")
    one, two = execute(load_schedule(path)), execute(load_schedule(path))
    assert one.history_jsonl == two.history_jsonl
    assert one.verdict_json() == two.verdict_json()


def test_profile_file_errors_name_the_key(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"actions": 10, "colour": "red"}))
    with pytest.raises(ScheduleError) as err:
        load_profile(path)
    assert err.value.field == "colour"
    path.write_text(json.dumps({"actions": 10, "fault_classes": {"unclean": 2}}))
    assert load_profile(path).fault_classes["unclean"] == 2
