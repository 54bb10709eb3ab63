"""The Java producer's re-bootstrap (``ProducerConfig.metadata_recovery_strategy``,
``epochlab.sim.producer``'s module doc): with every broker down the 4.x Java client forgets the
topic's partitions, and a send waits for metadata (up to ``max.block.ms``) before its record
enters the accumulator, where its delivery timeout starts. Measured on Kafka 4.3.1 here: an
``epochlab kafka fuzz`` run whose record, sent with every broker shut down, was acknowledged
past its delivery timeout (docs/measurements.md)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from epochlab.errors import ConfigError
from epochlab.generations import Generation
from epochlab.kafka.live.java_clients import java_producer_settings
from epochlab.kafka.runs.compare import java_rebootstraps, model_scenario
from epochlab.scenarios import load_builtin
from epochlab.scenarios.loader import load_file
from epochlab.scenarios.runner import run_scenario
from epochlab.sim import Cluster, ClusterConfig, ProducerConfig

REBOOTSTRAP = "re-bootstraps and forgets the topic's partitions"


def _all_down(strategy: str | None, sends: list[tuple[int, int]], restart_at_ms: int,
              max_block_ms: int = 60_000, seed: int = 1) -> Cluster:
    """m1 acknowledged, every broker crashed at 2 s, then each ``(at_ms, value)`` of ``sends``
    sent with a 15 s delivery timeout, and every broker restarted at ``restart_at_ms``."""
    c = Cluster(ClusterConfig(min_insync_replicas=1, broker_startup_ms=(0, 0)), Generation.STRICT_MIN_ISR, seed=seed)
    p = c.producer("p", ProducerConfig(acks="all", request_timeout_ms=3000, delivery_timeout_ms=15_000,
                                       max_block_ms=max_block_ms, metadata_recovery_strategy=strategy))
    c.run_for(1000)
    p.send(1)
    c.run_for(1000)
    for b in (1, 2, 3):
        c.crash(b)
    for at_ms, value in sends:
        c.run_for(at_ms - c.now_ms)
        p.send(value)
    c.run_for(restart_at_ms - c.now_ms)
    for b in (1, 2, 3):
        c.restart(b)
    c.run_for(60_000)
    return c


def _outcomes(c: Cluster) -> dict[int, tuple[str, int, str | None]]:
    return {op.value: (op.type, op.time_ms, op.error) for op in c.history
            if op.f == "send" and op.type != "invoke"}


def _rebootstraps(c: Cluster) -> list[int]:
    return [e.time_ms for e in c.events if REBOOTSTRAP in e.message]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_send_long_into_an_outage_waits_for_metadata_then_for_its_delivery_timeout(seed: int) -> None:
    plain = _outcomes(_all_down(None, [(22_000, 2)], restart_at_ms=40_000, seed=seed))
    assert plain[2] == ("fail", 37_000, "DELIVERY_TIMEOUT")  # queued at 22 s, expired 15 s later
    c = _all_down("rebootstrap", [(22_000, 2)], restart_at_ms=40_000, seed=seed)
    outcome = _outcomes(c)
    # the record entered the accumulator only once a broker was back and named the topic:
    # acknowledged past its delivery timeout from the send
    assert outcome[2][0] == "ok" and outcome[2][1] > 40_000
    assert _rebootstraps(c) == [22_000]  # looked at when the send came
    assert outcome[1] == plain[1]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_records_sent_in_an_outage_bring_the_rebootstrap_to_the_end_of_their_round(seed: int) -> None:
    """m2 comes 50 ms into the outage, in the metadata updater's first round (about 100 ms):
    the client still knows the topic, so m2 enters the accumulator and expires; the sender's
    refused attempt ends that round in a re-bootstrap, so m3, 2 s later, waits for metadata
    and is acknowledged after the restart."""
    c = _all_down("rebootstrap", [(2050, 2), (4000, 3)], restart_at_ms=30_000, seed=seed)
    outcome = _outcomes(c)
    assert outcome[2] == ("fail", 17_050, "DELIVERY_TIMEOUT")
    assert outcome[3][0] == "ok" and outcome[3][1] > 30_000
    assert len(_rebootstraps(c)) == 1


@pytest.mark.parametrize("seed", [1, 2])
def test_a_send_early_in_an_idle_outage_goes_to_the_accumulator_as_without_the_rule(seed: int) -> None:
    """The first four rounds cannot end in a re-bootstrap (the metadata backoff of each,
    100 ms x 2**k, outlasts the reconnect backoff, 50 ms x 2**k, jitter and all), so a send
    300 ms into the outage goes to the accumulator as it would without the rule; its round
    then ends in a re-bootstrap (seen by the producer's next metadata attempt)."""
    plain = _all_down(None, [(2300, 2)], restart_at_ms=30_000, seed=seed)
    c = _all_down("rebootstrap", [(2300, 2)], restart_at_ms=30_000, seed=seed)
    assert _outcomes(c) == _outcomes(plain)
    [rebootstrap] = _rebootstraps(c)
    assert 2300 < rebootstrap <= 4300  # the round ends by about 3.3 s, looked at within 1 s


def test_an_idle_outage_rebootstraps_after_two_seconds_or_more() -> None:
    """The draw of an idle outage's rounds: at least about 2 s (the four rounds that cannot
    end in a re-bootstrap and the fifth), a few seconds in the middle (the client of the
    measured run re-bootstrapped 3.7 s after the last broker went, with a send 0.4 s before)."""
    delays = []
    for seed in range(1, 101):
        c = Cluster(ClusterConfig(min_insync_replicas=1), Generation.STRICT_MIN_ISR, seed=seed)
        p = c.producer("p", ProducerConfig(metadata_recovery_strategy="rebootstrap"))
        c.run_for(1000)
        for b in (1, 2, 3):
            c.crash(b)
        delays.append(p._rebootstrap_at(1000) - 1000)
    delays.sort()
    assert delays[0] >= 2000
    assert 2500 <= delays[50] <= 6000


def test_sends_waiting_for_metadata_fail_after_max_block_ms_one_after_another() -> None:
    """The application's sending thread is held by the first: the second send's wait starts
    when the first gives up."""
    sends = [(22_000, 2), (22_000, 3), (22_000, 4)]
    outcome = _outcomes(_all_down("rebootstrap", sends, restart_at_ms=60_000, max_block_ms=10_000))
    assert outcome[2] == ("fail", 32_000, "REQUEST_TIMED_OUT")
    assert outcome[3] == ("fail", 42_000, "REQUEST_TIMED_OUT")
    assert outcome[4] == ("fail", 52_000, "REQUEST_TIMED_OUT")
    immediate = _outcomes(_all_down("rebootstrap", [(22_000, 2)], restart_at_ms=40_000, max_block_ms=0))
    assert immediate[2] == ("fail", 22_000, "REQUEST_TIMED_OUT")


@pytest.mark.parametrize("seed", [1, 2])
def test_with_a_broker_up_the_rule_changes_nothing(seed: int) -> None:
    """Two brokers down, one up: the producer has a broker to ask, so it keeps the topic; the
    run is the same event for event with and without the rule."""
    def run(strategy: str | None) -> str:
        c = Cluster(ClusterConfig(min_insync_replicas=1, broker_startup_ms=(0, 0)), Generation.STRICT_MIN_ISR,
                    seed=seed)
        p = c.producer("p", ProducerConfig(acks="all", request_timeout_ms=3000, delivery_timeout_ms=15_000,
                                           metadata_recovery_strategy=strategy))
        c.run_for(1000)
        p.send(1)
        c.run_for(1000)
        c.crash(1)
        c.crash(2)
        c.run_for(10_000)
        p.send(2)
        c.run_for(30_000)
        assert _rebootstraps(c) == []
        return c.history_jsonl()

    assert run("rebootstrap") == run(None) == run("none")


def test_the_strategy_is_a_java_client_setting() -> None:
    with pytest.raises(ConfigError, match="metadata_recovery_strategy"):
        ProducerConfig(metadata_recovery_strategy="always")
    with pytest.raises(ConfigError, match="metadata_recovery_strategy"):
        ProducerConfig(metadata_recovery_strategy="rebootstrap", socket_timeout_ms=5000)
    with pytest.raises(ConfigError, match="metadata_recovery_strategy"):
        ProducerConfig.from_dict({"metadata.recovery.strategy": ["rebootstrap"]})
    assert ProducerConfig(metadata_recovery_strategy="none", socket_timeout_ms=5000)


def test_the_model_of_a_java_run_rebootstraps_as_its_release_does() -> None:
    assert java_rebootstraps(None) and java_rebootstraps("4.0.0") and java_rebootstraps("4.3.1")
    assert not java_rebootstraps("3.9.1") and not java_rebootstraps("2.8.2") and not java_rebootstraps("0.11.0.3")
    scenario = load_builtin("seed-002-mid-replication-retry-duplicates")
    name = next(iter(scenario.producers))
    java, replaced = model_scenario(scenario, {}, client="java", release="4.3.1")
    assert java.producers[name]["metadata.recovery.strategy"] == "rebootstrap"
    assert replaced[f"producer {name}: metadata_recovery_strategy"] == [None, "rebootstrap"]
    old, replaced = model_scenario(scenario, {}, client="java", release="2.8.2")
    assert "metadata.recovery.strategy" not in old.producers[name]
    assert f"producer {name}: metadata_recovery_strategy" not in replaced
    librdkafka, _ = model_scenario(scenario, {}, client="librdkafka")
    assert "metadata.recovery.strategy" not in librdkafka.producers[name]
    # a scenario's own value: the Java run keeps it, the librdkafka run's model goes without
    own = {**scenario.producers[name], "metadata.recovery.strategy": "none"}
    named = type(scenario)(**{**scenario.__dict__, "producers": {name: own}})
    java, _ = model_scenario(named, {}, client="java")
    assert java.producers[name]["metadata.recovery.strategy"] == "none"
    librdkafka, replaced = model_scenario(named, {}, client="librdkafka")
    assert "metadata.recovery.strategy" not in librdkafka.producers[name]
    assert replaced[f"producer {name}: metadata_recovery_strategy"] == ["none", None]


def test_the_live_java_producer_gets_the_strategy_only_when_the_scenario_names_it() -> None:
    assert "metadata.recovery.strategy" not in java_producer_settings(ProducerConfig(), "b:9092", "p")
    settings = java_producer_settings(ProducerConfig(metadata_recovery_strategy="none"), "b:9092", "p")
    assert settings["metadata.recovery.strategy"] == "none"


FIXTURE = Path(__file__).parent / "fixtures" / "scenarios" / "java-rebootstrap-with-every-broker-down.toml"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_live_rebootstrap_scenario_needs_the_rule(seed: int) -> None:
    """The scenario the live test runs with Kafka's Java producer: its expectation (m2
    acknowledged after the brokers return) holds in the model of a 4.x Java run, which
    re-bootstraps, and fails without the rule (m2 expires in the accumulator)."""
    scenario = dataclasses.replace(load_file(FIXTURE), seed=seed)
    java, replaced = model_scenario(scenario, {}, client="java", release="4.3.1")
    assert replaced["producer p1: metadata_recovery_strategy"] == [None, "rebootstrap"]
    assert run_scenario(java, "strict-min-isr", write=False).passed
    plain = dataclasses.replace(java, producers={"p1": {**java.producers["p1"], "metadata.recovery.strategy": "none"}})
    assert not run_scenario(plain, "strict-min-isr", write=False).passed


@pytest.mark.parametrize("backend", ["reference", "rust"])
def test_a_send_of_an_aborted_transaction_stops_waiting_for_metadata(backend: str) -> None:
    """An aborted transaction's send that waited for the topic's metadata fails with the
    transaction and leaves the wait: the next transaction's send waits its own max_block_ms
    from its send, not behind the aborted one's."""
    c = Cluster(ClusterConfig(min_insync_replicas=1, broker_startup_ms=(0, 0)), Generation.STRICT_MIN_ISR,
                seed=1, backend=backend)
    p = c.producer("p", ProducerConfig(acks="all", transactional_id="t", request_timeout_ms=3000,
                                       delivery_timeout_ms=15_000, max_block_ms=10_000,
                                       metadata_recovery_strategy="rebootstrap"))
    c.run_for(1000)
    p.begin_transaction()
    p.send(1)
    p.commit_transaction()
    c.run_for(2000)
    for b in (1, 2, 3):
        c.crash(b)
    c.run_for(20_000)  # every broker down long since: re-bootstrapped at the next send
    p.begin_transaction()
    p.send(2)
    c.run_for(1000)
    p.abort_transaction()
    c.run_for(1000)
    assert p.pending == 0
    p.begin_transaction()
    p.send(3)
    c.run_for(30_000)
    outcome = _outcomes(c)
    assert outcome[2] == ("fail", 24_000, "TRANSACTION_ABORTED")
    assert outcome[3] == ("fail", 35_000, "REQUEST_TIMED_OUT")
