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
from epochlab.sim.config import ClusterConfig, ProducerConfig


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


#: campaign seeds whose broker 2 drew a first fetch that reached leader 1 before it led
REFUSED_SEEDS = (83, 93)


def test_a_first_fetch_that_came_before_the_leader_waits_the_fetch_backoff() -> None:
    """The brokers apply the topic's creation each at its own pace; a follower's thread whose
    fetch reached the leader before the leader had made itself leader was refused
    (UNKNOWN_LEADER_EPOCH) and holds the partition back ``replica_fetch_backoff_ms``. Seen
    live: a follower that copied nothing for the first 0.8-1 s of a run. Most seeds' first
    fetch is not refused (the leader is later than a follower by 17 ms on average, the thread's
    poll ends anywhere in 500 ms); these seeds' is."""
    from epochlab.sim.broker import ESTABLISHED_PARTITION_LEAD_MS, FIRST_LEADER_LAG_MS

    config = ClusterConfig()
    earliest = config.replica_fetch_backoff_ms - ESTABLISHED_PARTITION_LEAD_MS
    latest = earliest + max(FIRST_LEADER_LAG_MS) + 20
    for seed in REFUSED_SEEDS:
        c = _cluster(True, seed)
        assert c.run_until(lambda c: c.brokers[2].fetch_state()[1] is not None, 3000)
        assert earliest <= c.now_ms <= latest, (seed, c.now_ms)
    ordinary = []
    for seed in range(1, 41):
        if seed in REFUSED_SEEDS:
            continue
        c = _cluster(True, seed)
        assert c.run_until(lambda c: c.brokers[2].fetch_state()[1] is not None, 3000)
        ordinary.append(c.now_ms)
    assert max(ordinary) < earliest, ordinary


@pytest.mark.parametrize("backend", ["rust", "reference"])
def test_a_refused_first_fetch_holds_the_first_acknowledgement_back(backend: str) -> None:
    """acks=all with broker 2 in the ISR: while broker 2 waits out its backoff the leader's HW
    stays below m1, though broker 3 has copied it; once broker 2 fetches, m1 is acknowledged."""
    c = _cluster(True, REFUSED_SEEDS[0], backend)
    p = c.producer("p1", ProducerConfig(acks="all"))
    c.run_for(50)
    p.send(1)
    c.run_for(600)
    assert c.brokers[3].replica.log.log_end_offset == 1
    assert c.brokers[2].replica.log.log_end_offset == 0
    assert c.brokers[1].replica.log.high_watermark == 0
    assert not [op for op in c.history if op.f == "send" and op.type == "ok"]
    c.run_for(1000)
    assert c.brokers[2].replica.log.log_end_offset == 1
    assert [op.value for op in c.history if op.f == "send" and op.type == "ok"] == [1]


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


def _first_fetches(config: ClusterConfig, seed: int) -> dict[int, int]:
    """The ms of each follower's first fetch request of the run."""
    c = Cluster(config, "strict-min-isr", seed=seed)
    firsts: dict[int, int] = {}

    def seen(c: Cluster) -> bool:
        for b in (2, 3):
            if b not in firsts and c.brokers[b].fetch_state()[1] is not None:
                firsts[b] = c.now_ms
        return len(firsts) == 2
    assert c.run_until(seen, 3000)
    return firsts


def test_a_runs_measured_first_roles_decide_the_refusal() -> None:
    """Given each broker's first role on the run's clock (``first_role_ms``, a live run's own),
    follower 2, which took the partition 70 ms before its leader, was refused when its
    thread's poll ended within those 70 ms (a seventh of the 500 ms a poll can take) and
    fetches a backoff later; follower 3, which took it after the leader, never was. Each
    follower's start is its own: 170 ms and 90 ms before time 0."""
    measured = ClusterConfig.from_dict({"brokers": [1, 2, 3], "established": True,
                                        "first_role_ms": {"1": -100, "2": -170, "3": -90}})
    backoff, poll = measured.replica_fetch_backoff_ms, measured.replica_fetch_wait_max_ms
    runs = [_first_fetches(measured, seed) for seed in range(1, 61)]
    late2 = [r[2] for r in runs if r[2] >= backoff - 170]
    assert 3 <= len(late2) <= 20, runs
    assert all(backoff - 170 <= t <= backoff - 170 + 70 + 20 for t in late2), late2
    assert max(r[2] for r in runs if r[2] < backoff - 170) <= poll - 170 + 20, runs
    assert max(r[3] for r in runs) <= poll - 90 + 20, runs


def test_first_role_ms_is_checked() -> None:
    from epochlab.errors import ConfigError

    assert ClusterConfig.from_dict({"first_role_ms": {"1": -5, 2: 7}}).first_role_ms == ((1, -5), (2, 7))
    assert ClusterConfig.from_dict({"first_role_ms": [[3, 0]]}).first_role_ms == ((3, 0),)
    for bad in ({"4": 1}, {"x": 1}, {"1": 1.5}, {"1": True}, 7, [[1, 2, 3]]):
        with pytest.raises(ConfigError, match="first.role.ms|first_role_ms"):
            ClusterConfig.from_dict({"first_role_ms": bad})
    # a leader that took its role an age after its followers: they wait, no loop per backoff
    c = Cluster(ClusterConfig.from_dict({"established": True, "first_role_ms": {"1": 10**15, "2": -100, "3": -90}}),
                "strict-min-isr", seed=1)
    c.run_for(5000)
    assert c.brokers[2].fetch_state()[1] is None and c.brokers[3].fetch_state()[1] is None
