"""KAFKA-13141 (Kafka 2.8.0): a leader took a diverging fetch's offset as the follower's log end
offset. The model has it only with ``kafka.release`` 2.8.0 in diverging-epoch (scenario
``kafka-13141-diverging-fetch-joins-isr``); 2.8.1 and every default run have the fix."""

from __future__ import annotations

import dataclasses

import pytest

from epochlab.checks import catalogue
from epochlab.errors import ConfigError
from epochlab.fuzz import execute
from epochlab.fuzz.convert import scenario_to_schedule
from epochlab.scenarios import load_builtin
from epochlab.scenarios.runner import run_scenario
from epochlab.sim.cluster import Cluster
from epochlab.sim.config import ClusterConfig

NAME = "kafka-13141-diverging-fetch-joins-isr"


def _scenario(release: str | None):  # type: ignore[no-untyped-def]
    scenario = load_builtin(NAME)
    cluster = {k: v for k, v in scenario.cluster.items() if k != "kafka.release"}
    if release is not None:
        cluster["kafka.release"] = release
    return dataclasses.replace(scenario, cluster=cluster)


@pytest.mark.parametrize("backend", ["rust", "reference"])
def test_kafka_2_8_0_elects_a_deposed_leader_put_back_into_the_isr_by_its_diverging_fetch(backend: str) -> None:
    result = run_scenario(_scenario("2.8.0"), "diverging-epoch", write=False, backend=backend)
    assert all(c.passed for c in result.checks), [c.detail for c in result.checks if not c.passed]
    assert any("diverging fetch offset 4 as its log end offset (KAFKA-13141)" in e for e in result.events)


@pytest.mark.parametrize("release", ["2.8.1", "3.6.2", None])
def test_from_2_8_1_the_diverging_fetch_leaves_the_follower_out_and_nothing_is_lost(release: str | None) -> None:
    result = run_scenario(_scenario(release), "diverging-epoch", write=False)
    failed = {c.description for c in result.checks if not c.passed}
    # broker 1 is back in the ISR only after it truncated and fetched 4 and 5, so the election
    # that follows the crash of broker 2 loses nothing
    assert failed == {"the acknowledged 4 and 5 are lost"}, failed
    assert not any("KAFKA-13141" in e for e in result.events)
    schedule = scenario_to_schedule(_scenario(release), "diverging-epoch")
    assert execute(schedule).verdict.protocol_violations == []


def test_the_fuzz_checker_names_the_bug_only_when_the_run_shows_its_mechanism() -> None:
    run = execute(scenario_to_schedule(_scenario("2.8.0"), "diverging-epoch"))
    found = {v.invariant for v in run.verdict.protocol_violations}
    assert {"Inv-StrongIsr", "Inv-Durability", "Inv-LeaderCompleteness", "lost-write"} <= found
    for invariant in found:
        assert "KAFKA-13141" in catalogue.describe_match("diverging-epoch", invariant, run.events)
    # the same signature without the mechanism in the events: not this bug
    assert all(b.id != "KAFKA-13141" for b in catalogue.match("diverging-epoch", "Inv-Durability", []))


@pytest.mark.parametrize(("generation", "release", "ok"), [
    ("diverging-epoch", "2.8.0", True), ("diverging-epoch", "3.6.2", True),
    ("diverging-epoch", "3.7.0", False), ("strict-min-isr", "2.8.0", False),
    ("strict-min-isr", "4.3.1", True), ("kip-320", "2.7.2", True), ("hw-truncation", "0.10.2", None),
])
def test_kafka_release_must_be_one_of_the_generations(generation: str, release: str, ok: bool | None) -> None:
    if ok is None:  # not "X.Y.Z"
        with pytest.raises(ConfigError, match="kafka_release"):
            ClusterConfig.from_dict({"kafka.release": release + "x"})
        return
    config = ClusterConfig.from_dict({"kafka.release": release})
    if ok:
        Cluster(config, generation)
    else:
        with pytest.raises(ConfigError, match="kafka.release"):
            Cluster(config, generation)


@pytest.mark.parametrize("bad", ["2.8", "2.8.0.1", "v2.8.0", 280, "2.8.x", ""])
def test_malformed_releases_are_named(bad: object) -> None:
    with pytest.raises(ConfigError, match="kafka_release"):
        ClusterConfig.from_dict({"kafka.release": bad})


def test_a_scenario_for_one_release_runs_only_on_a_cluster_of_that_release() -> None:
    from epochlab.kafka.runs.scenario import unmappable

    assert any("kafka.release 2.8.0" in why for why in unmappable(load_builtin(NAME)))
    assert any("--kafka-version 2.8.0" in why for why in unmappable(load_builtin(NAME), version="3.6.2"))
    assert not any("kafka.release" in why for why in unmappable(load_builtin(NAME), version="2.8.0"))
    assert not any("kafka.release" in why for why in unmappable(_scenario(None)))
    patched = dataclasses.replace(load_builtin(NAME), cluster={**load_builtin(NAME).cluster,
                                                               "kafka.release": "4.3.1+skipped-epoch-reset"})
    assert any("proposed fix" in why for why in unmappable(patched, version="4.3.1"))


def test_the_fuzzers_shortest_finding_is_kafka_13141_and_gone_with_the_fix() -> None:
    """Found by ``epochlab fuzz -g diverging-epoch`` with ``kafka.release`` 2.8.0, seed 1,
    run 3, shrunk to 3 actions: leader 3 of epoch 1 writes m1 to follower 2; a preferred
    election makes broker 1 (empty log) leader of epoch 2; the producer's retry lands there, and
    the followers' diverging fetches at offset 1 count as their log end: the HW covers offset 0
    while they still hold epoch 1's m1 there."""
    from pathlib import Path

    from epochlab.fuzz.schedule import load_schedule

    schedule = load_schedule(Path(__file__).parent / "fixtures" / "schedules"
                             / "g4-kafka-13141-diverging-fetch-offset-taken-as-leo.json")
    assert schedule.cluster["kafka.release"] == "2.8.0" and len(schedule.actions) == 3
    run = execute(schedule)
    assert [v.invariant for v in run.verdict.protocol_violations] == ["Inv-StrongIsr"]
    assert [b.id for b in catalogue.match("diverging-epoch", "Inv-StrongIsr", run.events)] == ["KAFKA-13141"]
    fixed = dataclasses.replace(schedule, cluster={**schedule.cluster, "kafka.release": "2.8.1"})
    assert execute(fixed).verdict.ok
