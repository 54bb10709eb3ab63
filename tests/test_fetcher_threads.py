"""A follower's start on a fetcher thread that already runs (``ClusterConfig.established``).

A live cluster that serves run after run holds the earlier runs' partitions, led by every
broker, so each broker has a fetcher thread to each other broker, blocked in a long poll for
those partitions. A partition that changes leader is added to the new leader's thread
(``AbstractFetcherThread.addPartitions``) and goes out with that thread's next fetch, when its
poll ends: up to ``replica.fetch.wait.max.ms`` later. A restarted broker makes its threads
anew and fetches at once; so does every follower of a cluster started with the run."""

from __future__ import annotations

import pytest

from epochlab.sim.cluster import Cluster
from epochlab.sim.config import ClusterConfig


def _cluster(established: bool, seed: int, backend: str = "rust") -> Cluster:
    return Cluster(ClusterConfig.from_dict({"brokers": [1, 2, 3], "established": established}),
                   "strict-min-isr", seed=seed, backend=backend)


def _first_fetch_after_election(c: Cluster) -> int:
    """Broker 3 follows broker 1, then (after broker 1's controlled shutdown) broker 2: the
    milliseconds from its becoming broker 2's follower to its first request to broker 2."""
    c.run_for(3000)
    c.controlled_shutdown(1)
    assert c.run_until(lambda c: c.brokers[3].replica.leader_id == 2, 5000)
    became = c.now_ms
    assert c.run_until(lambda c: c.brokers[3].fetch_state()[1] is not None, 5000)
    return c.now_ms - became


def test_an_established_follower_joins_the_new_leaders_thread_at_its_next_poll() -> None:
    wait_max = ClusterConfig().replica_fetch_wait_max_ms
    waits = [_first_fetch_after_election(_cluster(True, seed)) for seed in range(1, 13)]
    assert all(0 <= w <= wait_max for w in waits), waits
    assert len(set(waits)) > 6 and max(waits) > wait_max // 2, waits  # a phase of its own per seed


def test_a_follower_of_a_cluster_started_with_the_run_fetches_at_once() -> None:
    assert {_first_fetch_after_election(_cluster(False, seed)) for seed in range(1, 7)} == {0}


def test_a_restarted_broker_makes_its_threads_anew_and_fetches_at_once() -> None:
    c = _cluster(True, 4)
    c.run_for(2000)
    c.crash(3)
    c.run_for(500)
    c.restart(3)
    assert c.run_until(lambda c: c.brokers[3].alive and c.brokers[3].replica.role == "follower", 20000)
    became = c.now_ms
    assert c.run_until(lambda c: c.brokers[3].fetch_state()[1] is not None, 5000)
    assert c.now_ms == became


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_both_backends_give_the_same_run(seed: int) -> None:
    runs = []
    for backend in ("rust", "reference"):
        c = _cluster(True, seed, backend)
        p = c.producer("p1")
        c.run_for(2000)
        p.send(1)
        c.controlled_shutdown(1)
        c.run_for(100)
        p.send(2)
        c.run_for(3000)
        c.restart(1)
        c.run_for(8000)
        c.crash(2)
        c.run_for(8000)
        runs.append((c.history_jsonl(), c.events, c.state()))
    assert runs[0] == runs[1]


def test_at_the_runs_start_the_wait_is_shortened_by_the_partitions_lead() -> None:
    """The live harness makes the run's topic before the run's clock begins, so the followers
    took the partition on their threads ``ESTABLISHED_PARTITION_LEAD_MS`` earlier: their first
    fetch comes at most ``replica_fetch_wait_max_ms`` minus that after time 0, often at once."""
    from epochlab.sim.broker import ESTABLISHED_PARTITION_LEAD_MS

    latest = ClusterConfig().replica_fetch_wait_max_ms - ESTABLISHED_PARTITION_LEAD_MS
    firsts = []
    for seed in range(1, 17):
        c = _cluster(True, seed)
        assert c.run_until(lambda c: c.brokers[2].fetch_state()[1] is not None, 2000)
        firsts.append(c.now_ms)
    assert max(firsts) <= latest + 20 and max(firsts) > 50, firsts  # a link delay or two on top
    assert min(firsts) < 20, firsts


def test_a_broker_that_led_from_the_start_waits_the_full_phase_when_it_follows() -> None:
    """The lead is the topic's, made before the run: broker 1, leader at the start, took the
    partition on no fetcher thread then, so when it follows broker 2 after a controlled
    shutdown its wait is a whole phase, not one shortened by the lead."""
    from epochlab.sim.broker import ESTABLISHED_PARTITION_LEAD_MS

    waits = []
    for seed in range(1, 13):
        c = _cluster(True, seed)
        c.run_for(3000)
        c.controlled_shutdown(1)
        assert c.run_until(lambda c: c.brokers[1].replica.leader_id == 2, 5000)
        became = c.now_ms
        assert c.run_until(lambda c: c.brokers[1].fetch_state()[1] is not None, 5000)
        waits.append(c.now_ms - became)
    wait_max = ClusterConfig().replica_fetch_wait_max_ms
    assert all(0 <= w <= wait_max for w in waits), waits
    assert max(waits) > wait_max - ESTABLISHED_PARTITION_LEAD_MS, waits
