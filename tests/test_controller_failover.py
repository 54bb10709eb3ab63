"""The controller-failover step: a new controller one controller epoch up, the old one's
requests fenced by that epoch, and before 2.1 the deposed controller's unfenced write
(KAFKA-6082, scenario ``kafka-6082-zombie-controller-write``)."""

from __future__ import annotations

import dataclasses

import pytest

from epochlab.checks import catalogue
from epochlab.fuzz import execute
from epochlab.fuzz.convert import scenario_to_schedule
from epochlab.fuzz.generator import FAULT_CLASSES, FuzzProfile, generate_schedule
from epochlab.fuzz.schedule import Schedule
from epochlab.generations import Generation
from epochlab.kafka.runs.scenario import unmappable
from epochlab.scenarios import load_builtin
from epochlab.scenarios.runner import run_scenario
from epochlab.sim.cluster import Cluster
from epochlab.sim.config import ClusterConfig

NAME = "kafka-6082-zombie-controller-write"
ALL = [g.label for g in Generation]
OLD = ["hw-truncation", "kip-101", "kip-279"]


@pytest.mark.parametrize("generation", ALL)
def test_the_scenario_holds_in_every_generation(generation: str) -> None:
    result = run_scenario(load_builtin(NAME), generation, write=False)
    assert all(c.passed for c in result.checks), [c.detail for c in result.checks if not c.passed]
    zombie = any("deposed controller (controller epoch 1) handles broker 2's failure" in e
                 for e in result.events)
    assert zombie == (generation in OLD)


@pytest.mark.parametrize("backend", ["rust", "reference"])
def test_before_2_1_the_leader_refuses_the_zombie_request_and_keeps_its_old_epoch(backend: str) -> None:
    result = run_scenario(load_builtin(NAME), "kip-279", write=False, backend=backend)
    assert all(c.passed for c in result.checks)
    assert any("broker 1 ignores a LeaderAndIsr of controller epoch 1 (epoch 1): "
               "STALE_CONTROLLER_EPOCH, it has heard from controller epoch 2" in e for e in result.events)
    # leader 1 never leaves epoch 0: no role change after the first
    assert [e.split(": ", 1)[1] for e in result.events if ": broker 1 is leader" in e] == \
        ["broker 1 is leader in epoch 0 (was none in epoch None), ISR [1, 2, 3], LEO 0"]


def test_without_the_failover_the_old_generations_converge() -> None:
    scenario = load_builtin(NAME)
    steps = tuple(dataclasses.replace(s, action="note", params={"text": "no failover"})
                  if s.action == "controller_failover" else s for s in scenario.steps)
    result = run_scenario(dataclasses.replace(scenario, steps=steps), "kip-279", write=False)
    failed = {c.description for c in result.checks if not c.passed}
    assert failed == {"ZooKeeper's ISR keeps the zombie's write: broker 2 never gets back into it"}


def test_the_fuzz_checker_finds_liveness_converge_and_names_kafka_6082() -> None:
    run = execute(scenario_to_schedule(load_builtin(NAME), "kip-279"))
    found = {v.invariant for v in run.verdict.protocol_violations}
    assert found == {"Liveness-Converge"}, found
    assert "KAFKA-6082" in catalogue.describe_match("kip-279", "Liveness-Converge", run.events)
    assert execute(scenario_to_schedule(load_builtin(NAME), "kip-320")).verdict.protocol_violations == []
    # the signature without the mechanism is not this bug
    assert all(not b.id.startswith("KAFKA-6082") for b in catalogue.match("kip-279", "Liveness-Converge", []))


def _cluster(generation: str, **config: object) -> Cluster:
    return Cluster(ClusterConfig.from_dict({"brokers": [1, 2, 3], **config}), generation, seed=5)


@pytest.mark.parametrize("generation", ["kip-101", "kip-320", "diverging-epoch"])
def test_a_request_of_the_old_controller_is_refused_once_the_new_one_was_heard(generation: str) -> None:
    c = _cluster(generation)
    c.run_for(3000)
    old = c.controller.state()
    assert old.controller_epoch == 1
    c.controller.failover()
    c.run_for(1000)
    b3 = c.brokers[3]
    assert b3.controller_epoch == 2
    # a LeaderAndIsr of controller epoch 1 with a newer leader epoch arrives late
    late = dataclasses.replace(old, leader=3, leader_epoch=old.leader_epoch + 5)
    b3.on_leader_and_isr(late, "controller")
    assert b3.replica.role == "follower" and b3.replica.leader_epoch == old.leader_epoch
    assert any("broker 3 ignores a LeaderAndIsr of controller epoch 1" in e.message for e in c.events)
    # the same decision from the current controller is taken
    b3.on_leader_and_isr(dataclasses.replace(late, controller_epoch=2), "controller")
    assert b3.replica.role == "leader"


def test_a_restarted_broker_has_heard_no_controller_yet() -> None:
    c = _cluster("kip-279")
    c.run_for(3000)
    c.controller.failover()
    c.run_for(1000)
    assert c.brokers[2].controller_epoch == 2
    c.crash(2)
    c.restart(2)
    assert c.run_until(lambda c: c.brokers[2].alive, 10000)
    assert c.brokers[2].controller_epoch == 0
    c.run_for(c.config.session_timeout_ms + 1000)  # it registers once its old session expired
    assert c.brokers[2].controller_epoch == 2


def test_zookeeper_failover_sends_every_live_replica_its_state_and_fences_held_requests() -> None:
    c = _cluster("kip-279")
    c.run_for(3000)
    c.partition([[1, 2, 3], ["controller"]])
    c.controller.elect(2)   # held on the cut links: the old controller's channel
    c.run_for(500)
    c.controller.failover()  # its queues go with it; the new one sends the current state
    c.heal()
    c.run_for(2500)
    assert {b.controller_epoch for b in c.brokers.values()} == {2}
    assert c.brokers[2].replica.role == "leader"
    assert not any("STALE_CONTROLLER_EPOCH" in e.message for e in c.events)


def test_kraft_failover_starts_every_session_afresh() -> None:
    c = _cluster("strict-min-isr")
    c.run_for(5000)
    timeout = c.config.session_timeout_ms
    before = timeout - c.config.heartbeat_interval_ms - 100  # its session has not expired yet
    c.crash(3)
    c.run_for(before)
    assert c.controller.live[3]
    c.controller.failover()
    c.run_for(timeout - 100)   # past the moment its old session would have expired
    assert c.controller.live[3], "the new active controller gave broker 3 a whole session"
    # Kafka 4.0+: the new controller's periodic check first runs a period after it took over,
    # so it finds the session over at the check a period after the session's end
    period = timeout // 8
    c.run_for(100 + period - 1)
    assert c.controller.live[3]
    c.run_for(2)
    assert not c.controller.live[3]


def test_the_fault_class_is_off_by_default_and_draws_the_step_when_enabled() -> None:
    assert FAULT_CLASSES["controller-failover"] == 0
    for seed in range(20):
        assert all(a.op != "controller_failover" for a in generate_schedule(seed, "kip-279").actions)
    profile = FuzzProfile(fault_classes={**FAULT_CLASSES, "controller-failover": 50}, swarm=False)
    schedule = generate_schedule(3, "kip-320", profile)
    failovers = sum(a.op == "controller_failover" for a in schedule.actions)
    assert failovers > 0
    again = Schedule.from_json(schedule.to_json())
    assert again.to_json() == schedule.to_json() and again.version == 2
    run = execute(schedule)
    assert sum("controller failover:" in e["message"] for e in run.events) == failovers
    assert run.verdict.protocol_violations == []


def test_a_real_cluster_run_refuses_the_step_with_the_reason() -> None:
    reasons = unmappable(load_builtin(NAME))
    assert any("controller_failover" in r and "controller quorum" in r for r in reasons), reasons


def test_the_deposed_controller_aborts_once_the_new_one_wrote_the_partition_state() -> None:
    """The leader's session expired and the old controller had not handled it: the new one
    elects at failover (its write carries controller epoch 2), and the deposed one, reading
    ZooKeeper, aborts ("went through a soft failure") instead of electing again."""
    c = _cluster("kip-279", heartbeat_interval_ms=100, controller_delay_ms=[400, 400])
    c.run_for(3000)
    c.crash(1)
    assert c.run_until(lambda c: 1 in c.controller._expiring, 10000)
    c.controller.failover()
    assert c.controller.leader == 2 and c.controller.state_controller_epoch == 2
    c.run_for(1000)
    messages = [e.message for e in c.events]
    assert "deposed controller (controller epoch 1) aborts handling broker 1's failure: the " \
           "partition state was written by controller epoch 2 (a soft failure)" in messages
    assert not any("writes the partition state" in m for m in messages)
    assert c.controller.leader == 2 and c.controller.leader_epoch == 1
    assert {b.controller_epoch for b in c.brokers.values() if b.alive} == {2}


def test_the_checker_sees_a_leader_hw_rise_in_the_event_that_stops_it() -> None:
    """Bug-hunt finding (hw-truncation, off-by-default steps profile, run seed 1605743167):
    a deposed controller's write made broker 3 the only ISR member; the ControlledShutdown
    answer carrying that state let broker 3 raise its HW, answer a consumer and stop, all in
    one event. Observing only after events, the checker never saw that HW and called the read
    uncommitted (Inv-ReadCommittedOnly); it now looks before a broker stops. The schedule's
    run seed is the first from 0 whose run needs the look on the current model (3): later
    rules (the client-connection rules ``Broker.on_client_disconnect`` and ``Producer._poll``,
    the Java client's newest-first retries, a parked fetch's completion updating no follower
    state, Kafka's order of the purgatories when a broker stops leading, a producer asking for
    metadata when a broker closes its connection) moved the original run (seed 1605743167, kept
    as the origin)."""
    import json
    from pathlib import Path

    from epochlab.fuzz.executor import Run

    path = Path(__file__).parents[1] / "docs" / "resolved-findings" / "g0-shutdown-leader-hw-seen-before-it-stops.json"
    schedule = Schedule.from_json(path.read_text())
    assert execute(schedule).verdict.protocol_violations == []
    # without the look before the stop, the false alarm comes back
    run = Run(schedule, None)
    assert run.cluster.recorder.stop_watchers == [run.checker.observe]
    run.cluster.recorder.stop_watchers.clear()
    run.checker.observe()
    for index, action in enumerate(schedule.actions):
        run.advance_to(action.at_ms)
        run.step = index
        run.apply(action)
        run.checker.observe()
    run.healing()
    found = {v.invariant for v in run.verdict().protocol_violations}
    assert "Inv-ReadCommittedOnly" in found, json.dumps(sorted(found))
