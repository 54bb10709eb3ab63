"""Fetch from follower (KIP-392): configuration by generation, where the consumer reads, and
the three replica backends agreeing. The scenario ``kip-392-fetch-from-follower`` (run by
tests/test_scenarios.py in kip-320, diverging-epoch and strict-min-isr) shows the whole story."""

from __future__ import annotations

import json

import pytest

from epochlab.errors import ConfigError
from epochlab.sim.cluster import Cluster
from epochlab.sim.config import ClusterConfig, ConsumerConfig, ProducerConfig

SELECTOR = {"min.insync.replicas": 2, "broker.startup.ms": [0, 0],
            "replica.selector.class": "RackAwareReplicaSelector"}


@pytest.mark.parametrize("generation", ["hw-truncation", "kip-101", "kip-279"])
def test_generations_before_kafka_2_4_refuse_a_replica_selector(generation: str) -> None:
    with pytest.raises(ConfigError, match="KIP-392"):
        Cluster(ClusterConfig.from_dict(SELECTOR), generation)


def test_bad_settings_are_named() -> None:
    with pytest.raises(ConfigError, match="replica.selector.class"):
        ClusterConfig.from_dict({"replica.selector.class": "LeaderSelector"})
    with pytest.raises(ConfigError, match="client_rack"):
        ConsumerConfig.from_dict({"client.rack": "eu-1"})
    with pytest.raises(ConfigError, match="metadata_max_age_ms"):
        ConsumerConfig.from_dict({"metadata.max.age.ms": 0})


def _run(generation: str, backend: str, selector: bool, rack: int | None) -> tuple[Cluster, list[str]]:
    cfg = dict(SELECTOR) if selector else {k: v for k, v in SELECTOR.items() if k != "replica.selector.class"}
    c = Cluster(ClusterConfig.from_dict(cfg), generation, seed=5, backend=backend)
    p = c.producer("p", ProducerConfig(acks="all"))
    consumer = c.consumer("c", ConsumerConfig(auto_offset_reset="earliest", client_rack=rack))
    c.run_for(200)
    p.send_many([1, 2, 3, 4])
    c.run_for(2000)
    got = consumer.poll()
    assert [v for _, v in got] == [1, 2, 3, 4]
    return c, [e.message for e in c.events]


@pytest.mark.parametrize("generation", ["kip-320", "diverging-epoch", "strict-min-isr"])
def test_the_leader_sends_a_consumer_to_the_follower_in_its_rack(generation: str) -> None:
    c, events = _run(generation, "rust", selector=True, rack=3)
    assert any("leader names replica 3 as preferred read replica" in e for e in events)
    assert c.clients["c"]._preferred is not None and c.clients["c"]._preferred[0] == 3


@pytest.mark.parametrize(("selector", "rack"), [(False, 3), (True, None), (True, 1)])
def test_without_selector_rack_or_with_the_leaders_rack_the_consumer_reads_from_the_leader(
        selector: bool, rack: int | None) -> None:
    c, events = _run("strict-min-isr", "rust", selector=selector, rack=rack)
    assert not any("preferred read replica" in e for e in events)
    assert c.clients["c"]._preferred is None


def test_the_backends_give_the_same_run_with_fetch_from_follower() -> None:
    runs = [_run("diverging-epoch", b, selector=True, rack=2)[0] for b in ("rust", "reference")]
    histories = {r.history_jsonl() for r in runs}
    events = {tuple(e.message for e in r.events) for r in runs}
    assert len(histories) == 1 and len(events) == 1


def test_the_preferred_replica_expires_after_metadata_max_age_and_is_asked_for_again() -> None:
    c = Cluster(ClusterConfig.from_dict(SELECTOR), "strict-min-isr", seed=5)
    p = c.producer("p", ProducerConfig(acks="all"))
    consumer = c.consumer("c", ConsumerConfig(auto_offset_reset="earliest", client_rack=2, metadata_max_age_ms=500))
    c.run_for(200)
    p.send_many([1, 2])
    c.run_for(3000)
    events = [e.message for e in c.events]
    named = [e for e in events if "leader names replica 2" in e]
    expired = [e for e in events if "preferred read replica expired (metadata.max.age.ms)" in e]
    assert len(named) >= 3 and len(expired) >= 2  # named, expired, named again, ...
    assert [v for _, v in consumer.poll()] == [1, 2]


def test_a_new_leader_sends_the_consumer_back_to_ask_it() -> None:
    """``maybeValidatePosition``: a new leader or epoch in the metadata clears the preferred
    replica; the new leader names its own choice."""
    c = Cluster(ClusterConfig.from_dict(SELECTOR), "strict-min-isr", seed=5)
    p = c.producer("p", ProducerConfig(acks="all"))
    consumer = c.consumer("c", ConsumerConfig(auto_offset_reset="earliest", client_rack=3))
    c.run_for(200)
    p.send_many([1, 2])
    c.run_for(1000)
    assert consumer._preferred is not None and consumer._preferred[0] == 3
    c.crash(1)
    assert c.run_until(lambda cl: cl.controller.leader not in (None, 1), 30_000)
    p.send_many([3])
    c.run_for(20_000)
    events = [e.message for e in c.events]
    assert any("reads from the leader again (was replica 3)" in e for e in events)
    assert [v for _, v in consumer.poll()] == [1, 2, 3]


@pytest.mark.parametrize("generation", ["kip-320", "strict-min-isr"])
def test_the_documented_fuzz_profile_runs_and_finds_no_protocol_violation(generation: str) -> None:
    """docs/profiles/fetch-from-follower.json (docs/fuzzing.md): a few fuzz runs, consumers
    reading from followers (their histories say so), no protocol violation."""
    from pathlib import Path

    from epochlab.fuzz import execute, generate_schedule
    from epochlab.fuzz.generator import load_profile

    profile = load_profile(Path(__file__).resolve().parents[1] / "docs" / "profiles" / "fetch-from-follower.json")
    sources = set()
    for seed in range(6):
        result = execute(generate_schedule(seed, generation, profile))
        assert result.verdict.ok, result.verdict_json()
        ops = [json.loads(line) for line in result.history_jsonl.splitlines()]
        sources |= {(op["process"], op["value"]) for op in ops if op["f"] == "fetch_from"}
    assert {s for s in sources if s[1] != 1}, sources  # some consumer fetched from a follower


def _consumer_reading_from(replica: int):
    """A consumer of a running cluster whose leader named ``replica`` (a real Consumer; the
    answers below are fed as a broker would send them)."""
    c = Cluster(ClusterConfig.from_dict(SELECTOR), "strict-min-isr", seed=5)
    consumer = c.consumer("c", ConsumerConfig(auto_offset_reset="earliest", client_rack=replica))
    c.run_for(2000)
    assert consumer._preferred is not None and consumer._preferred[0] == replica
    return c, consumer


def _answer(consumer, error: str | None) -> None:
    from epochlab.sim.messages import ConsumerFetchResponse

    consumer._pending = rid = 10_000
    consumer.on_fetch_response(ConsumerFetchResponse(rid, error, 0), 2)


@pytest.mark.parametrize(("error", "cleared", "reset", "leader_forgotten"), [
    ("OFFSET_OUT_OF_RANGE", True, False, False),    # Fetcher: clear it instead of resetting
    ("NOT_LEADER_OR_FOLLOWER", True, False, True),  # requestMetadataUpdate clears it
    ("FENCED_LEADER_EPOCH", True, False, True),
    ("OFFSET_NOT_AVAILABLE", True, False, False),
    ("UNKNOWN_LEADER_EPOCH", False, False, True),   # retried as it is, the replica kept
])
def test_errors_from_the_preferred_replica(error: str, cleared: bool, reset: bool, leader_forgotten: bool) -> None:
    _, consumer = _consumer_reading_from(2)
    position = consumer.position
    _answer(consumer, error)
    assert (consumer._preferred is None) == cleared
    assert (consumer.position is None) == reset and (reset or consumer.position == position)
    assert (consumer._leader is None) == leader_forgotten


def test_offset_out_of_range_from_the_leader_still_resets() -> None:
    c = Cluster(ClusterConfig.from_dict(SELECTOR), "strict-min-isr", seed=5)
    consumer = c.consumer("c", ConsumerConfig(auto_offset_reset="earliest"))
    c.run_for(1000)
    assert consumer._preferred is None and consumer.position is not None
    _answer(consumer, "OFFSET_OUT_OF_RANGE")
    assert consumer.position is None  # auto.offset.reset applies
