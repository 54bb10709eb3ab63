"""ListOffsets by timestamp (KIP-79): records carry the leader's append time, the log finds the
first offset at or after a time, and the leader bounds the answer by generation and release
(KAFKA-5522, scenario ``kafka-5522-list-offsets-by-time-uncommitted``)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from epochlab import _core
from epochlab.errors import ConfigError, InvalidArgumentError, ScenarioError, ScheduleError
from epochlab.fuzz import execute
from epochlab.fuzz.convert import scenario_to_schedule
from epochlab.fuzz.generator import FAULT_CLASSES, FuzzProfile, generate_schedule
from epochlab.fuzz.schedule import Schedule
from epochlab.generations import Generation
from epochlab.kafka.runs.scenario import unmappable
from epochlab.reference import log as reference_log
from epochlab.scenarios import load_builtin
from epochlab.scenarios.loader import loads as loads_scenario
from epochlab.scenarios.runner import run_scenario
from epochlab.sim.cluster import Cluster
from epochlab.sim.config import ClusterConfig

NAME = "kafka-5522-list-offsets-by-time-uncommitted"
LOGS = [_core.ReplicaLog, reference_log.ReplicaLog]


def _ops(result) -> list[dict]:  # type: ignore[no-untyped-def]
    return [op for op in map(json.loads, result.history_lines) if op["f"] == "list_offsets"]


def _answers(result) -> list[int]:  # type: ignore[no-untyped-def]
    return [op["value"][1] for op in _ops(result) if op["type"] == "ok"]


@pytest.mark.parametrize("generation", [g.label for g in Generation])
def test_the_scenario_holds_in_every_generation(generation: str) -> None:
    result = run_scenario(load_builtin(NAME), generation, write=False)
    assert all(c.passed for c in result.checks), [c.detail for c in result.checks if not c.passed]


@pytest.mark.parametrize("backend", ["rust", "reference"])
@pytest.mark.parametrize(("generation", "release", "answers"), [
    ("hw-truncation", None, [2, 2]),
    ("hw-truncation", "0.10.1", [2, 2]),
    ("kip-101", "0.11.0", [2, 2]),
    ("kip-101", "0.11.0.3", [2, 2]),
    ("kip-101", "1.0.0", [-1, 2]),
    ("kip-101", None, [-1, 2]),
    ("diverging-epoch", None, [-1, 2]),
])
def test_before_1_0_the_high_watermark_itself_is_answered(backend: str, generation: str,
                                                         release: str | None, answers: list[int]) -> None:
    scenario = load_builtin(NAME)
    if release is not None:
        scenario = dataclasses.replace(scenario, cluster={**scenario.cluster, "kafka.release": release})
    result = run_scenario(scenario, generation, write=False, backend=backend)
    assert _answers(result) == answers


def test_before_0_10_1_there_is_no_lookup_by_time() -> None:
    """On both backends (the rust one answers the consumer in ``_core.FetchPlane``), with the
    same run."""
    scenario = load_builtin(NAME)
    scenario = dataclasses.replace(scenario, cluster={**scenario.cluster, "kafka.release": "0.10.0"})
    result = run_scenario(scenario, "hw-truncation", write=False)
    failed = [op for op in _ops(result) if op["type"] == "fail"]
    assert [op["error"] for op in failed] == ["UNSUPPORTED_VERSION"] * 2
    assert _answers(result) == []
    reference = run_scenario(scenario, "hw-truncation", write=False, backend="reference")
    assert (reference.history_lines, reference.events) == (result.history_lines, result.events)


@pytest.mark.parametrize("make", LOGS)
def test_the_log_finds_the_first_record_at_or_after_a_time(make) -> None:  # type: ignore[no-untyped-def]
    log = make(0)
    log.append_as_leader([1], 0)          # no clock set: no timestamp (-1)
    log.set_time(100)
    log.append_as_leader([2, 3], 0)
    log.set_time(250)
    log.append_as_leader([4], 1)
    assert [b.max_timestamp for b in log.read(0)] == [-1, 100, 250]
    assert log.offset_for_timestamp(0) == (1, 100)
    assert log.offset_for_timestamp(100) == (1, 100)
    assert log.offset_for_timestamp(101) == (3, 250)
    assert log.offset_for_timestamp(251) is None
    # a follower copies the stamp with the batch
    follower = make(0)
    follower.append_batches_as_follower(log.read(0))
    assert follower.read(0) == log.read(0)
    assert follower.offset_for_timestamp(101) == (3, 250)
    log.truncate_to(3)
    assert log.offset_for_timestamp(101) is None


@pytest.mark.parametrize("make", LOGS)
@pytest.mark.parametrize("bad", [-2, 2**63, 10**30, "5", None, 1.5])
def test_bad_times_are_refused_the_same_way(make, bad) -> None:  # type: ignore[no-untyped-def]
    log = make(0)
    with pytest.raises((InvalidArgumentError, TypeError)) as got:
        log.set_time(bad)
    with pytest.raises((InvalidArgumentError, TypeError)) as again:
        log.offset_for_timestamp(bad if bad != -2 else -1)
    assert type(got.value) is type(again.value) or bad == -2
    batch_type = _core.RecordBatch if make is _core.ReplicaLog else reference_log.RecordBatch
    with pytest.raises((InvalidArgumentError, TypeError)):
        batch_type(0, 0, [1], max_timestamp=bad)


def test_both_logs_agree_on_a_random_history() -> None:
    import random
    rng = random.Random(7)
    a, b = (make(0) for make in LOGS)
    now = 0
    for step in range(300):
        now += rng.choice((0, 1, 5, 40))
        for log in (a, b):
            log.set_time(now)
        if rng.random() < 0.1 and a.log_end_offset > 0:
            cut = rng.randrange(a.log_end_offset)
            assert a.truncate_to(cut) == b.truncate_to(cut)
        else:
            values = [step] * rng.randint(1, 3)
            a.append_as_leader(values, 0)
            b.append_as_leader(values, 0)
        target = rng.randrange(now + 2)
        assert a.offset_for_timestamp(target) == b.offset_for_timestamp(target), step
    assert [(x.base_offset, x.max_timestamp) for x in a.read(0)] == \
        [(x.base_offset, x.max_timestamp) for x in b.read(0)]


def test_read_committed_lookups_stop_at_the_lso_from_1_0() -> None:
    """An open transaction's record at or after the time is below the HW but above the LSO:
    from 1.0 a read_committed lookup does not answer it; before, only the HW bounded it."""
    answers = {}
    for release in ("0.11.0", "1.0.0"):
        c = Cluster(ClusterConfig.from_dict({"brokers": [1, 2, 3], "kafka.release": release,
                                             "broker.startup.ms": [0, 0]}), "kip-101", seed=3)
        p = c.producer("tx", _producer_config())
        rc = c.consumer("rc", _consumer_config())
        c.run_for(2000)
        p.begin_transaction()
        p.send(11)
        c.run_for(3000)
        leader = c.brokers[c.controller.leader].replica.log
        assert leader.high_watermark == 1 and leader.last_stable_offset == 0
        rc.list_offsets(1000)
        c.run_for(500)
        answers[release] = [op.value[1] for op in c.history if op.f == "list_offsets" and op.type == "ok"]
    assert answers == {"0.11.0": [0], "1.0.0": [-1]}


def _producer_config():  # type: ignore[no-untyped-def]
    from epochlab.sim.config import ProducerConfig
    return ProducerConfig.from_dict({"acks": "all", "transactional.id": "t1"})


def _consumer_config():  # type: ignore[no-untyped-def]
    from epochlab.sim.config import ConsumerConfig
    return ConsumerConfig.from_dict({"isolation.level": "read_committed"})


def test_schedules_and_scenarios_take_a_time_and_refuse_anything_else() -> None:
    profile = FuzzProfile(fault_classes={**FAULT_CLASSES, "list-offsets-time": 40}, swarm=False)
    schedule = generate_schedule(4, "kip-320", profile)
    specs = [a.params["spec"] for a in schedule.actions if a.op == "list_offsets"]
    assert specs and all(isinstance(s, int) and s >= 0 for s in specs)
    assert Schedule.from_json(schedule.to_json()).to_json() == schedule.to_json()
    assert execute(schedule).verdict.protocol_violations == []
    assert FAULT_CLASSES["list-offsets-time"] == 0
    base = schedule.to_dict()
    for bad in (-1, 2**63, True, "now", 1.5):
        data = {**base, "actions": [{"at_ms": 0, "op": "list_offsets", "consumer": "c1", "spec": bad}]}
        with pytest.raises(ScheduleError, match=r"actions\[0\]\.spec"):
            Schedule.from_dict(data)
    text = ('name = "t"\n[consumers.c1]\n[[steps]]\naction = "list_offsets"\nconsumer = "c1"\n'
            'spec = {}\n')
    assert loads_scenario(text.format(123)).steps[0].params["spec"] == 123
    for bad in ("-1", "9223372036854775808", "true", '"soon"'):
        with pytest.raises(ScenarioError, match="spec"):
            loads_scenario(text.format(bad))


def test_the_consumer_refuses_a_bad_spec_from_python() -> None:
    c = Cluster(ClusterConfig.from_dict({"brokers": [1, 2, 3]}), "kip-320", seed=1)
    consumer = c.consumer("c1")
    for bad in (-5, 2**63, True, "soon", 2.0):
        with pytest.raises(ConfigError, match="spec"):
            consumer.list_offsets(bad)  # type: ignore[arg-type]


def test_a_real_cluster_run_refuses_a_lookup_by_time() -> None:
    reasons = unmappable(load_builtin(NAME))
    assert any("ListOffsets by timestamp" in r for r in reasons), reasons
    fuzz_schedule = scenario_to_schedule(load_builtin(NAME), "kip-101")
    assert execute(fuzz_schedule).verdict.protocol_violations == []
