"""Per-generation behaviour: the two KIP-101 problems of seed 004 and generation flags.

Seed 004 (KIP-101 "Motivation"): in Generation.TRUNCATE_TO_HW the exact interleavings lose a
committed message (problem 1) or leave two replicas with different records at the same
offsets (problem 2); every later generation survives the same schedule.
"""

from __future__ import annotations

import pytest

from epochlab import first_mismatch
from epochlab.sim import Cluster, ClusterConfig, Generation, ProducerConfig

LATER = [g for g in Generation if g != Generation.TRUNCATE_TO_HW]

#: Restart at once: these tests are about a protocol rule around a restart, not the
#: broker's startup time (ClusterConfig.broker_startup_ms, on by default).
INSTANT = (0, 0)


def problem_1(generation: Generation) -> Cluster:
    """B = broker 1 leads, A = broker 2 follows. A fetched m2 (committed on B: acks=all) but
    its HW, and its HW checkpoint, still say 1. A restarts, B fails before A re-fetches, A
    becomes leader."""
    c = Cluster(ClusterConfig(broker_startup_ms=INSTANT, brokers=(1, 2)), generation, seed=4)
    p = c.producer("p", ProducerConfig(acks="all"))
    p.send(1)                       # m1
    assert p.flush(5000)
    c.run_for(5500 - c.now_ms)      # HW checkpoint at 5000 holds HW 1
    p.send(2)                       # m2, acknowledged once A has fetched it
    assert p.flush(5000)
    state = c.state()
    assert state.replicas[1].high_watermark == 2 and state.replicas[2].log_end_offset == 2
    c.crash(2)
    c.restart(2)                    # fast restart: the ZK controller does not notice
    c.crash(1)                      # the leader fails before A fetched again
    c.run_for(10000)
    return c


@pytest.mark.parametrize("generation", [Generation.TRUNCATE_TO_HW])
def test_problem_1_loses_committed_message_in_g0(generation: Generation) -> None:
    c = problem_1(generation)
    assert c.state().leader == 2
    acked = {op.value: op.offset for op in c.history if op.type == "ok" and op.f == "send"}
    assert acked == {1: 0, 2: 1}
    assert c.state().replicas[2].values() == [1]          # m2 lost for good
    assert any("truncate to local HW" in e.message for e in c.events)


@pytest.mark.parametrize("generation", LATER)
def test_problem_1_keeps_committed_message_later(generation: Generation) -> None:
    c = problem_1(generation)
    assert c.state().replicas[2].values() == [1, 2]
    if generation >= Generation.KIP_320:
        # From Kafka 2.2 (KIP-380) and in KRaft, A's new incarnation cannot register while its
        # old session lives (ZooKeeper: the old session's ephemeral /brokers/ids/<id>,
        # KafkaZkClient.registerBroker; KRaft: DuplicateBrokerRegistration), so when B fails
        # the controller elects A's old registration; that session expires too, the partition
        # waits OFFLINE, and A, registered again, is elected: it has both records.
        # Which session expires first depends on the brokers' heartbeat phases (as in Kafka):
        # B's first, and A (old registration, then new) ends as leader; A's first, and A's new
        # incarnation, out of the ISR after its unclean shutdown, waits with the partition
        # offline for B, the last ISR member (Kafka 4.3.1 did that in seed-004-kip101-problem-1).
        ctrl = c.state().controller
        assert ctrl["leader"] in (2, None) and ctrl["unavailable_ms"] > 0
        assert any("registration waits for the old session to expire" in e.message for e in c.events)
        if generation.kraft and ctrl["leader"] == 2:
            # Kafka 4.x: A, registered after its unclean shutdown (so in no ELR), is elected as
            # the last known leader (canElectLastKnownLeader)
            assert any("(last known leader)" in e.message for e in c.events)
    else:
        assert c.state().leader == 2


def problem_2(generation: Generation) -> Cluster:
    """Both brokers go down: A (2) first, so B (1) leads alone; B then crashes losing its
    unflushed m2, comes back first, is re-elected and writes m3 at m2's offset; A returns
    with m2 under its checkpointed HW."""
    c = Cluster(ClusterConfig(broker_startup_ms=INSTANT, brokers=(1, 2), flush_interval_ms=30000), generation, seed=5)
    p = c.producer("p", ProducerConfig(acks="all"))
    p.send(1)                       # m1, flushed at 30000
    assert p.flush(5000)
    c.run_for(30500 - c.now_ms)
    p.send(2)                       # m2: committed on both, in the HW checkpoint at 35000
    assert p.flush(5000)
    c.run_for(35500 - c.now_ms)
    c.crash(2)
    c.run_for(7000)
    c.crash(1, lose_unflushed=True)
    c.run_for(7000)
    c.restart(1)
    c.run_for(1000)
    p.send(3)                       # m3 at offset 1 in B's new epoch
    assert p.flush(5000)
    c.restart(2)
    c.run_for(3000)
    return c


def test_problem_2_replicas_diverge_in_g0() -> None:
    c = problem_2(Generation.TRUNCATE_TO_HW)
    state = c.state()
    a, b = state.replicas[2], state.replicas[1]
    assert (b.values(), a.values()) == ([1, 3], [1, 2])
    mismatch = first_mismatch(c.brokers[1].replica.log, c.brokers[2].replica.log)
    assert mismatch == 1 < min(a.high_watermark, b.high_watermark)   # Log Matching broken
    assert 2 in state.controller["isr"]                                # silently back in ISR


@pytest.mark.parametrize("generation", LATER)
def test_problem_2_replicas_agree_later(generation: Generation) -> None:
    c = problem_2(generation)
    state = c.state()
    assert state.replicas[1].values() == state.replicas[2].values() == [1, 3]
    assert first_mismatch(c.brokers[1].replica.log, c.brokers[2].replica.log) is None


def test_generation_flags() -> None:
    assert [g.label for g in Generation] == ["hw-truncation", "kip-101", "kip-279", "kip-320",
                                             "diverging-epoch", "strict-min-isr"]
    assert Generation.parse("2") is Generation.KIP_279
    assert Generation.KIP_101.kip101_epoch_cache and not Generation.KIP_320.kip101_epoch_cache
    assert Generation.TRUNCATE_TO_HW.unclean_default and not Generation.KIP_101.unclean_default
    assert Generation.STRICT_MIN_ISR.strict_min_isr and Generation.DIVERGING_EPOCH.truncate_on_fetch


@pytest.mark.parametrize("generation", [Generation.DIVERGING_EPOCH, Generation.STRICT_MIN_ISR])
def test_strict_min_isr_holds_the_high_watermark(generation: Generation) -> None:
    c = Cluster(ClusterConfig(min_insync_replicas=2), generation, seed=13)
    p = c.producer("p", ProducerConfig(acks="1"))
    c.crash(2)
    c.crash(3)
    c.run_for(8000)
    assert c.state().controller["isr"] == [1]
    p.send(5)
    assert p.flush(5000)
    c.run_for(1000)
    hw = c.state().replicas[1].high_watermark
    assert hw == (0 if generation.strict_min_isr else 1)


@pytest.mark.parametrize("generation", list(Generation))
def test_zombie_leader_writes_in_old_epoch_then_truncates(generation: Generation) -> None:
    c = Cluster(ClusterConfig(broker_startup_ms=INSTANT), generation, seed=14)
    p = c.producer("p", ProducerConfig(acks="1"))
    c.run_for(500)                  # leaders known: no retry reorders the first batches
    p.send_many(range(5))
    assert p.flush(5000)
    c.run_for(6000)                 # every replica has HW 5 checkpointed
    c.partition([[1, "p"], [2, 3, "controller"]])
    p.send_many(range(50, 53))      # accepted by the isolated old leader in epoch 0
    assert p.flush(2000)
    c.run_for(8000)
    assert c.state().leader == 2 and c.state().replicas[1].role == "leader"   # zombie
    assert c.state().replicas[1].leader_epoch == 0
    c.heal()
    c.run_for(5000)
    state = c.state()
    assert state.replicas[1].role == "follower"
    assert state.replicas[1].values() == state.replicas[2].values() == list(range(5))
