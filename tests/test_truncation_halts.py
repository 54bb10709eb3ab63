"""KAFKA-7414: before 2.0.1 / 2.1.0, with unclean leader election disabled, a follower whose
fetch is out of range because the leader's log ends below its own exits its broker instead of
truncating (``ReplicaFetcherThread.handleOffsetOutOfRange``). Scenario
``kafka-7414-follower-halts-instead-of-truncating``."""

from __future__ import annotations

import dataclasses

import pytest

from epochlab.checks import catalogue
from epochlab.fuzz import execute
from epochlab.fuzz.convert import scenario_to_schedule
from epochlab.generations import Generation
from epochlab.scenarios import load_builtin
from epochlab.scenarios.runner import run_scenario
from epochlab.sim.cluster import Cluster
from epochlab.sim.config import ClusterConfig

NAME = "kafka-7414-follower-halts-instead-of-truncating"
HALT = "broker 2: halts: log truncation is not allowed (the leader's log end offset 0 is below ours, 3"


@pytest.mark.parametrize("generation", [g.label for g in Generation])
def test_the_scenario_holds_in_every_generation(generation: str) -> None:
    result = run_scenario(load_builtin(NAME), generation, write=False)
    assert all(c.passed for c in result.checks), [c.detail for c in result.checks if not c.passed]
    halts = [e for e in result.events if HALT in e]
    assert bool(halts) == (generation in ("hw-truncation", "kip-101"))
    if halts:  # it exits again after the operator's restart
        assert len(halts) == 2


@pytest.mark.parametrize("backend", ["rust", "reference"])
def test_the_backends_halt_alike(backend: str) -> None:
    result = run_scenario(load_builtin(NAME), "kip-101", write=False, backend=backend)
    assert all(c.passed for c in result.checks)
    assert result.history_lines == run_scenario(load_builtin(NAME), "kip-101", write=False).history_lines
    assert any("broker 2 exits: log truncation is not allowed" in e for e in result.events)


def test_kip_279_halts_only_with_release_2_0_0() -> None:
    scenario = load_builtin(NAME)
    old = dataclasses.replace(scenario, cluster={**scenario.cluster, "kafka.release": "2.0.0"})
    result = run_scenario(old, "kip-279", write=False)
    assert any(HALT in e for e in result.events)
    run = execute(scenario_to_schedule(old, "kip-279"))
    assert {v.invariant for v in run.verdict.protocol_violations} == {"Liveness-Converge"}
    assert "KAFKA-7414 (KAFKA-3410)" in [b.id for b in catalogue.match("kip-279", "Liveness-Converge", run.events)]
    default = execute(scenario_to_schedule(scenario, "kip-279"))
    assert not default.verdict.protocol_violations
    # the expectations bounded by release: 2.0.0's are the halting ones, and they hold
    judged = {c.description for c in result.checks}
    assert all(c.passed for c in result.checks), [c.detail for c in result.checks if not c.passed]
    assert "after every restart it exits again: the ISR stays [1]" in judged
    assert "from 2.0.1 broker 2 truncates, catches up and rejoins the ISR" not in judged
    fixed = dataclasses.replace(scenario, cluster={**scenario.cluster, "kafka.release": "2.0.1"})
    judged = {c.description for c in run_scenario(fixed, "kip-279", write=False).checks}
    assert "from 2.0.1 broker 2 truncates, catches up and rejoins the ISR" in judged
    assert "after every restart it exits again: the ISR stays [1]" not in judged


@pytest.mark.parametrize("generation", ["hw-truncation", "kip-101"])
def test_with_unclean_election_enabled_the_follower_truncates(generation: str) -> None:
    scenario = load_builtin(NAME)
    unclean = dataclasses.replace(scenario, cluster={**scenario.cluster,
                                                     "unclean.leader.election.enable": True})
    result = run_scenario(unclean, generation, write=False)
    assert not any("halts" in e for e in result.events)
    assert any("broker 2: truncated 3 -> 0 (OFFSET_OUT_OF_RANGE: leader LEO below ours)" in e
               for e in result.events)


def test_the_flag_follows_generation_release_and_unclean_setting() -> None:
    def halts(generation: str, **cluster: object) -> bool:
        c = Cluster(ClusterConfig.from_dict({"brokers": [1, 2], **cluster}), generation)
        return c.brokers[1].replica.truncation_halts

    assert not halts("hw-truncation")  # 0.10's default: unclean election enabled
    assert halts("hw-truncation", **{"unclean.leader.election.enable": False})
    assert halts("kip-101")
    assert not halts("kip-101", **{"unclean.leader.election.enable": True})
    assert not halts("kip-279") and halts("kip-279", **{"kafka.release": "2.0.0"})
    assert not any(halts(g) for g in ("kip-320", "diverging-epoch", "strict-min-isr"))


def test_the_checker_finds_liveness_converge_and_names_kafka_7414() -> None:
    run = execute(scenario_to_schedule(load_builtin(NAME), "kip-101"))
    found = {v.invariant for v in run.verdict.protocol_violations}
    assert found == {"Liveness-Converge"}, found
    names = [b.id for b in catalogue.match("kip-101", "Liveness-Converge", run.events)]
    assert "KAFKA-7414 (KAFKA-3410)" in names
    fixed = execute(scenario_to_schedule(load_builtin(NAME), "kip-320"))
    assert not fixed.verdict.protocol_violations
