"""Consumer fetches long poll (``fetch.max.wait.ms``, Kafka's ``DelayedFetch``), a stopping
broker closes its connections, and broker ticks that would find nothing to do are not
scheduled (docs/core-semantics.md, "Consumer fetches long poll")."""

from __future__ import annotations

from typing import Any

import pytest

from epochlab.sim.broker import Broker
from epochlab.sim.cluster import Cluster
from epochlab.sim.config import ClusterConfig, ConsumerConfig, ProducerConfig
from epochlab.sim.messages import ConsumerFetchRequest, ConsumerFetchResponse

CLUSTER = {"min.insync.replicas": 2, "broker.startup.ms": [0, 0]}


def _cluster(consumer: dict[str, Any] | None = None, backend: str = "rust",
             generation: str = "strict-min-isr") -> tuple[Cluster, Any, Any, list[tuple[int, int]]]:
    """A settled 3-broker cluster with producer ``p`` and consumer ``c``; the list collects
    ``(time, broker)`` of every consumer fetch a broker receives."""
    c = Cluster(ClusterConfig.from_dict(CLUSTER), generation, seed=3, backend=backend)
    fetches: list[tuple[int, int]] = []
    for b, broker in c.brokers.items():
        handler = broker.on_consumer_fetch

        def counted(req: ConsumerFetchRequest, src: object, _b: int = b, _h: Any = handler) -> None:
            if req.fetch_offset is not None:
                fetches.append((c.now_ms, _b))
            _h(req, src)
        broker.on_consumer_fetch = counted  # type: ignore[method-assign]
    p = c.producer("p", ProducerConfig(acks="all"))
    consumer = c.consumer("c", ConsumerConfig.from_dict({"auto.offset.reset": "earliest", **(consumer or {})}))
    c.run_for(1000)
    return c, p, consumer, fetches


def _leader(c: Cluster) -> Broker:
    leader = c.controller.leader
    assert leader is not None
    return c.brokers[leader]


@pytest.mark.parametrize("backend", ["rust", "reference"])
def test_an_idle_consumer_sends_one_fetch_per_wait_instead_of_one_per_poll_interval(backend: str) -> None:
    c, _p, _consumer, fetches = _cluster(backend=backend)
    start = len(fetches)
    c.run_for(10_000)
    waiting = len(fetches) - start
    # one fetch per 500 ms wait plus its round trip
    assert 17 <= waiting <= 20, waiting
    c0, _p0, _c0, fetches0 = _cluster({"fetch.max.wait.ms": 0}, backend=backend)
    start = len(fetches0)
    c0.run_for(10_000)
    # answered at once, empty: the fetcher asks again poll_interval_ms after each send
    assert 90 <= len(fetches0) - start <= 100, len(fetches0) - start


def test_a_held_fetch_completes_when_the_hw_passes_its_offset_not_when_the_wait_ends() -> None:
    c, p, consumer, fetches = _cluster()
    n = len(fetches)
    assert c.run_until(lambda _c: len(fetches) > n, 1000)  # a fetch just arrived and waits
    assert _leader(c).has_parked_reads(), "the consumer's fetch waits at the leader"
    sent = c.now_ms
    p.send(7)
    assert c.run_until(lambda _c: bool(consumer._buffer), 2000)
    # produce, replicate to the ISR, HW, answer: a few link delays (1-5 ms), far below the wait
    assert c.now_ms - sent < 60, c.now_ms - sent
    assert [v for _, v in consumer.poll()] == [7]


def test_a_leader_that_steps_down_answers_the_fetch_it_holds_at_once() -> None:
    c, _p, consumer, _fetches = _cluster()
    old = _leader(c)
    assert old.has_parked_reads()
    other = next(b for b in sorted(c.brokers) if b != old.broker_id)
    assert c.elect(other)
    assert c.run_until(lambda _c: old.replica.role != "leader", 2000)
    assert not old.has_parked_reads()  # case A: answered (NOT_LEADER_OR_FOLLOWER or FENCED)
    stepped_down = c.now_ms
    assert c.run_until(lambda _c: consumer._leader == other, 2000)
    assert c.now_ms - stepped_down < 300  # the consumer moved on long before the 500 ms wait


def test_a_cleanly_stopping_broker_resets_the_consumer_connection_it_holds_a_fetch_on() -> None:
    c, _p, consumer, _fetches = _cluster()
    leader = _leader(c)
    assert leader.has_parked_reads() and consumer._pending is not None
    leader.shutdown_cleanly()  # the process exits: SocketServer closes every connection
    stopped = c.now_ms
    assert c.run_until(lambda _c: consumer._pending is None, 1000)
    assert c.now_ms - stopped <= 5  # one link delay, not the 30 s request timeout


@pytest.mark.parametrize(("offset", "hw", "lso", "isolation", "waits"), [
    (3, 3, 3, "read_uncommitted", True),     # nothing past the offset yet
    (5, 3, 3, "read_uncommitted", False),    # case F: above the HW (a new leader catching up)
    (3, 5, 3, "read_committed", True),       # read_committed waits for the LSO
    (3, 5, 5, "read_committed", False),      # the LSO passed the offset: answer at once
])
def test_which_empty_answers_wait(offset: int, hw: int, lso: int, isolation: str, waits: bool) -> None:
    req = ConsumerFetchRequest("c", 1, offset, 0, 500, isolation_level=isolation, max_wait_ms=500)
    resp = ConsumerFetchResponse(1, None, 0, high_watermark=hw, last_stable_offset=lso)
    assert Broker._nothing_to_read(req, resp) is waits


def test_answers_with_records_errors_redirects_or_for_listoffsets_never_wait() -> None:
    req = ConsumerFetchRequest("c", 1, 3, 0, 500, max_wait_ms=500)
    empty = ConsumerFetchResponse(1, None, 0, high_watermark=3, last_stable_offset=3)
    assert Broker._nothing_to_read(req, empty)
    assert not Broker._nothing_to_read(req, ConsumerFetchResponse(1, "FENCED_LEADER_EPOCH"))
    assert not Broker._nothing_to_read(req, ConsumerFetchResponse(
        1, None, 0, records=((3, 9, 0, None, 0),), high_watermark=4, last_stable_offset=4))
    assert not Broker._nothing_to_read(req, ConsumerFetchResponse(
        1, None, 0, high_watermark=3, last_stable_offset=3, preferred_read_replica=2))
    listing = ConsumerFetchRequest("c", 1, None, 0, 0)
    assert not Broker._nothing_to_read(listing, empty)


def test_idle_broker_ticks_are_not_scheduled_and_resume_with_work() -> None:
    c, p, _consumer, _fetches = _cluster()
    c.run_for(10_000)
    leader = _leader(c)
    for b, broker in c.brokers.items():
        # ISR expiration only on the leader; the checkpoint only while the HW moves
        assert ("isr" in broker._ticks) is (b == leader.broker_id), (b, broker._ticks)
        assert "checkpoint" not in broker._ticks
    p.send(1)
    c.run_until(lambda _c: all(b.replica.log.high_watermark == 1 for b in c.brokers.values()), 2000)
    assert all("checkpoint" in b._ticks for b in c.brokers.values())
    c.run_for(c.config.high_watermark_checkpoint_interval_ms)
    for broker in c.brokers.values():
        assert "checkpoint" not in broker._ticks
        assert broker.replica.checkpointed_high_watermark == 1


def _fff(generation: str) -> tuple[Cluster, Any, Any, Broker]:
    """A consumer in a follower's rack reading from it (KIP-392), a fetch of it waiting there."""
    cfg = {**CLUSTER, "replica.selector.class": "RackAwareReplicaSelector"}
    c = Cluster(ClusterConfig.from_dict(cfg), generation, seed=3)
    p = c.producer("p", ProducerConfig(acks="all"))
    c.run_for(500)
    rack = next(b for b in sorted(c.brokers) if b != _leader(c).broker_id)
    consumer = c.consumer("c", ConsumerConfig(auto_offset_reset="earliest", client_rack=rack))
    p.send(1)
    assert c.run_until(lambda _c: bool(consumer._buffer), 3000)
    consumer.poll()
    follower = c.brokers[rack]
    assert consumer._preferred is not None and consumer._preferred[0] == rack
    c.run_for(20)
    return c, p, consumer, follower


@pytest.mark.parametrize("generation", ["diverging-epoch", "strict-min-isr"])
def test_a_fetch_held_by_a_preferred_read_replica_completes_when_its_own_hw_moves(generation: str) -> None:
    """KIP-392: the follower serving a consumer holds its fetch like a leader would, and its
    fetcher completes it as soon as it moved the follower's HW
    (``ReplicaFetcherThread.completeDelayedFetchRequests``, KAFKA-14334, 3.3.2 / 3.4.0). The
    follower itself learns the new HW a fetch late: its fetch held at the leader completes on
    new data, not on a HW change (KAFKA-9952, 2.6.0), so up to ``replica.fetch.wait.max.ms``."""
    c, p, consumer, follower = _fff(generation)
    assert follower.has_parked_reads(), "the fetch waits at the follower"
    p.send(2)
    assert c.run_until(lambda _c: follower.replica.log.high_watermark == 2, 2000)
    moved = c.now_ms
    assert c.run_until(lambda _c: bool(consumer._buffer), 2000)
    assert c.now_ms - moved <= 5, c.now_ms - moved  # one link delay
    assert [v for _, v in consumer.poll()] == [2]


def test_before_kafka_3_4_a_read_held_by_a_follower_waits_out_its_time() -> None:
    """kip-320 (2.4-2.7): nothing completes a consumer fetch held by a follower but the end of
    its wait (before KAFKA-14334), and the leader's redirect waits too (before KAFKA-13767)."""
    c, p, consumer, follower = _fff("kip-320")
    assert not follower.has_parked_reads()  # held by its timer alone
    p.send(2)
    assert c.run_until(lambda _c: follower.replica.log.high_watermark == 2, 2000)
    moved = c.now_ms
    assert c.run_until(lambda _c: bool(consumer._buffer), 2000)
    assert c.now_ms - moved > 5, "answered by the end of the wait, not by the HW moving"
    assert [v for _, v in consumer.poll()] == [2]
