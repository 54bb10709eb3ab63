"""A broker that stops leading completes its purgatories in Kafka's order, and an ISR change
answers no parked fetch (docs/core-semantics.md, "A broker that stops leading completes its
purgatories in Kafka's order")."""

from __future__ import annotations

from typing import Any

import pytest

from epochlab.sim.broker import Broker
from epochlab.sim.cluster import Cluster
from epochlab.sim.config import ClusterConfig, ProducerConfig

CLUSTER = {"min.insync.replicas": 2, "broker.startup.ms": [0, 0]}


def _stuck_produce(generation: str, backend: str) -> tuple[Cluster, Broker, int, int]:
    """A settled cluster whose leader holds an acks=all produce (one ISR follower is cut off
    from it) and the other follower's fetch, parked for want of data: (cluster, leader, the
    follower that fetches, the one cut off)."""
    c = Cluster(ClusterConfig.from_dict(CLUSTER), generation, seed=3, backend=backend)
    p = c.producer("p", ProducerConfig(acks="all"))
    c.run_for(1000)
    leader = c.brokers[c.controller.leader]
    fetching, cut = (b for b in sorted(c.brokers) if b != leader.broker_id)
    c.set_link(leader.broker_id, cut, drop=1.0)
    p.send(1)
    assert c.run_until(lambda _c: leader.has_parked_produces() and leader.fetch_state()[2] > 0, 2000)
    assert cut in leader.replica.isr  # within replica.lag.time.max.ms: still in the ISR
    return c, leader, fetching, cut


@pytest.mark.parametrize(("generation", "order"), [
    # ReplicaManager.makeFollowers: the purgatories, then addFetcherForPartitions
    ("diverging-epoch", ["on_produce_response", "on_fetch_response", "fetch request"]),
    # ReplicaManager.applyLocalFollowersDelta: addFetcherForPartitions, then the purgatories
    ("strict-min-isr", ["fetch request", "on_produce_response", "on_fetch_response"]),
])
def test_a_deposed_leader_fails_its_produces_then_answers_its_fetches(generation: str, order: list[str]) -> None:
    c, leader, fetching, _cut = _stuck_produce(generation, "reference")
    posted: list[str] = []
    network = leader.ctx.network
    post = network.post

    def recorded(src: Any, dst: Any, nodes: Any, method: str, *args: Any, **kwargs: Any) -> bool:
        if src == leader.broker_id:
            posted.append("fetch request" if method in ("on_fetch", "on_offsets_for_leader_epoch") else method)
        return post(src, dst, nodes, method, *args, **kwargs)

    network.post = recorded  # the all-Python network of the reference backend
    assert c.elect(fetching)
    assert c.run_until(lambda _c: leader.replica.role == "follower", 2000)
    network.post = post
    assert posted[:3] == order, posted
    assert not leader.has_parked_produces() and leader.fetch_state()[2] == 0


@pytest.mark.parametrize("backend", ["rust", "reference"])
def test_an_isr_change_on_the_leader_answers_no_parked_fetch(backend: str) -> None:
    """``Partition.makeLeader`` in the same epoch moves the HW and tries the purgatories; a
    follower fetch waits for data (``DelayedFetch.tryComplete`` reads the log end), so it
    stays parked. Before the rule the model answered it, empty, at every ISR change."""
    c, leader, _fetching, cut = _stuck_produce("strict-min-isr", backend)
    epoch = leader.replica.leader_epoch
    seen: list[tuple[int, int]] = []  # parked fetches before and after each same-epoch state
    apply = leader.on_leader_and_isr

    def observed(msg: Any, src: object) -> None:
        before = leader.fetch_state()[2]
        apply(msg, src)
        if msg.leader_epoch == epoch and leader.replica.role == "leader":
            seen.append((before, leader.fetch_state()[2]))

    leader.on_leader_and_isr = observed  # type: ignore[method-assign]
    assert c.run_until(lambda _c: cut not in leader.replica.isr and bool(seen), 60_000)  # the ISR shrinks
    assert leader.replica.leader_epoch == epoch and leader.replica.role == "leader"
    assert not leader.has_parked_produces()  # the HW passed m1: acknowledged
    assert any(before > 0 for before, _ in seen), seen
    assert all(after == before for before, after in seen), seen  # the long poll still waits
