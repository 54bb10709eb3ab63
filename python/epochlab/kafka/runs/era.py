"""What a live run of an older release needs: its generation, and the steps its era cannot take.

A cluster of release V runs V's own replication code, so ``--compare`` runs the model in the
generation V belongs to (:func:`live_generation`: ``epochlab.generations``' release ranges,
e.g. 0.11.0.0 -> ``kip-101``, 2.7.2 -> ``kip-320``, 3.6.2 -> ``diverging-epoch``, 4.3.1 ->
``strict-min-isr``). :func:`era_refusals` lists the steps a ZooKeeper-mode cluster of V cannot
take, each with the reason; ``epochlab kafka run`` refuses them before any broker starts
(exit 2).

In ZooKeeper mode (:mod:`epochlab.kafka.live.zookeeper`):

* ``elect`` (a chosen broker) is refused: the harness reorders the replicas with
  ``AlterPartitionReassignments`` sent to the controllers through ``bootstrap.controllers``
  (KIP-919, KRaft 3.7+). A ZooKeeper-mode cluster has no controller listener; the ZooKeeper-era
  path (``kafka-reassign-partitions``, ``Admin.alterPartitionReassignments`` from 2.4, KIP-455)
  goes through ``KafkaController.onPartitionReassignment``, which is not mapped here.
* ``elect_preferred`` needs the ``ElectLeaders`` request (KIP-460, Kafka 2.2; the controller
  broker answers it in ``KafkaController.electLeaders``): before 2.2 the path was the
  ``/admin/preferred_replica_election`` znode, not mapped.
* fetch from follower (``replica.selector.class``, KIP-392) exists from 2.4.
"""

from __future__ import annotations

from epochlab.generations import Generation
from epochlab.kafka.live.zookeeper import release_tuple
from epochlab.scenarios.model import Scenario
from epochlab.sim.config import ClusterConfig

__all__ = ["ELECT_LEADERS_FROM", "FETCH_FROM_FOLLOWER_FROM", "era_refusals", "live_generation"]

#: ElectLeaders (KIP-460) is served from Kafka 2.2.
ELECT_LEADERS_FROM = (2, 2)
#: ``replica.selector.class`` (KIP-392) from Kafka 2.4.
FETCH_FROM_FOLLOWER_FROM = (2, 4)


def live_generation(version: str) -> Generation:
    """The protocol generation Kafka ``version`` belongs to (:meth:`Generation.covers_release`)."""
    release = tuple(int(p) for p in version.split("."))
    for g in Generation:
        if g.covers_release(release):
            return g
    raise AssertionError(f"no generation covers {version}")  # the ranges cover 0.8 onwards


def era_refusals(scenario: Scenario, version: str, mode: str) -> list[str]:
    """Why ``scenario`` cannot run on a ``mode`` cluster of Kafka ``version`` (empty: it can);
    only the ZooKeeper era adds reasons to :func:`epochlab.kafka.runs.scenario.unmappable`'s."""
    if mode != "zk":
        return []
    why = []
    release = release_tuple(version)
    for step in scenario.steps:
        where = f"step {step.index + 1} ({step.describe()})"
        if step.action == "elect":
            why.append(f"{where}: electing a chosen broker reorders the replicas at the controllers "
                       "(bootstrap.controllers, KIP-919, KRaft 3.7+); a ZooKeeper-mode cluster has no "
                       "controller listener, and its reassignment path (KafkaController."
                       "onPartitionReassignment) is not mapped")
        elif step.action == "elect_preferred" and release < ELECT_LEADERS_FROM:
            why.append(f"{where}: the ElectLeaders request exists from Kafka 2.2 (KIP-460); Kafka "
                       f"{version} elects the preferred leader through the /admin/preferred_replica_election "
                       "znode, which is not mapped")
    cfg = ClusterConfig.from_dict(scenario.cluster, f"{scenario.where}: cluster")
    if cfg.replica_selector_class is not None and release < FETCH_FROM_FOLLOWER_FROM:
        why.append(f"fetch from follower (replica.selector.class, KIP-392) exists from Kafka 2.4; this "
                   f"cluster runs {version}")
    return why
