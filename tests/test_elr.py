"""KIP-966 as Kafka 4.x has it: eligible leader replicas, and the election of the last known
leader once the ISR and the ELR are both empty (``PartitionChangeBuilder``)."""

from __future__ import annotations

from epochlab.checks.state import StateChecker
from epochlab.sim import Cluster, ClusterConfig, Generation, ProducerConfig


def elr_cluster(seed: int = 1) -> Cluster:
    config = ClusterConfig(min_insync_replicas=2, eligible_leader_replicas_enable=True)
    return Cluster(config, Generation.STRICT_MIN_ISR, seed=seed)


def everyone_down_then_back(lossy_leader: bool) -> tuple[Cluster, StateChecker]:
    c = elr_cluster()
    checker = StateChecker(c)
    p = c.producer("p", ProducerConfig(acks="all", enable_idempotence=True))
    p.send_many([1, 2, 3])
    p.flush(10_000)
    c.crash(3, lose_unflushed=True)
    c.run_for(15_000)                 # fenced: ISR [1, 2]
    c.crash(2, lose_unflushed=True)
    c.run_for(15_000)                 # ISR [1] < min ISR: ELR [2]
    if lossy_leader:
        checker.note_lossy_crash(1)
    c.crash(1, lose_unflushed=lossy_leader)
    c.run_for(15_000)                 # leaderless; ELR [1, 2]; last known leader 1
    assert c.controller.leader is None
    assert c.controller.last_known_leader == 1
    c.restart(2)                      # unclean shutdown: leaves the ELR
    c.run_for(5_000)
    assert c.controller.leader is None
    c.restart(1)                      # leaves the ELR too: ISR and ELR empty
    c.run_for(5_000)
    checker.observe()
    return c, checker


def test_the_last_known_leader_is_elected_when_isr_and_elr_are_empty() -> None:
    c, _ = everyone_down_then_back(lossy_leader=False)
    ctrl = c.controller
    assert ctrl.leader == 1
    elected = [e.message for e in c.events if "(last known leader)" in e.message]
    assert len(elected) == 1 and "leader 1 " in elected[0] and "ISR [1] " in elected[0]
    assert "(UNCLEAN)" in elected[0]                # Kafka marks it unclean: RECOVERING
    assert ctrl.elr == ()
    assert ctrl.last_known_leader is None           # cleared once there is a leader again
    assert ctrl.leader_epoch in ctrl.last_known_epochs


def test_electing_the_last_known_leader_allows_loss_only_after_its_unclean_shutdown() -> None:
    _, checker = everyone_down_then_back(lossy_leader=False)
    assert checker.allowance() is None                # it had every committed record
    _, checker = everyone_down_then_back(lossy_leader=True)
    reason = checker.allowance()
    assert reason is not None and "last known leader" in reason


def test_without_elr_no_last_known_leader_is_kept() -> None:
    config = ClusterConfig(min_insync_replicas=2, eligible_leader_replicas_enable=False)
    c = Cluster(config, Generation.STRICT_MIN_ISR, seed=1)
    c.crash(1)
    c.run_for(15_000)
    assert c.controller.last_known_leader is None
