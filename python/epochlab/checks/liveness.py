"""Liveness after a final healing phase (``docs/invariants.md`` 24-25).

The executor stops injecting faults, heals the network, resets every link, restarts every
crashed broker and runs the cluster for a bounded time. Then:

* ``Liveness-Converge``: a leader exists, every replica is alive with the leader's LEO, and the
  controller's ISR holds every replica;
* ``Liveness-Ack``: every send has an outcome (ok, fail or info) once the producers had their
  ``delivery.timeout.ms`` to finish.

* ``Liveness-LSO``: once the transaction coordinator has no transaction in progress (producers
  stopped; open transactions were aborted by ``transaction.timeout.ms``), the leader's last
  stable offset equals its HW: no transaction is left hanging on the partition (a data batch
  that opened a transaction the coordinator does not know about, ``docs/invariants.md`` 26).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from epochlab.checks.verdict import ALLOWED, PROTOCOL, Violation

if TYPE_CHECKING:
    from epochlab.sim.cluster import Cluster

__all__ = ["LIVENESS_INVARIANTS", "check_liveness", "converged", "convergence_gaps",
           "hanging_transactions", "lso_settled"]

LIVENESS_INVARIANTS = ("Liveness-Converge", "Liveness-Ack", "Liveness-LSO")


def hanging_transactions(cluster: Cluster) -> list[tuple[int, int]]:
    """``(first_offset, producer_id)`` of the transactions open on the acting leader's log
    while the coordinator has none in progress (empty while it still has some)."""
    leader = cluster.controller.leader
    coordinator = getattr(cluster, "coordinator", None)
    if leader is None or coordinator is None or coordinator.ongoing():
        return []
    broker = cluster.brokers[leader]
    if not broker.alive or broker.replica.role != "leader":
        return []
    return [tuple(t) for t in broker.replica.log.ongoing_transactions()]  # type: ignore[misc]


def lso_settled(cluster: Cluster) -> bool:
    """No transaction in progress at the coordinator and LSO = HW on the leader."""
    leader = cluster.controller.leader
    coordinator = getattr(cluster, "coordinator", None)
    if coordinator is not None and coordinator.ongoing():
        return False
    if leader is None:
        return True
    log = cluster.brokers[leader].replica.log
    return bool(log.last_stable_offset == log.high_watermark)


def convergence_gaps(cluster: Cluster) -> list[str]:
    """What still keeps the partition from having converged (empty when it has)."""
    ctrl = cluster.controller
    replicas = list(cluster.config.replicas or ())
    if ctrl.leader is None:
        return ["no leader"]
    lead = cluster.brokers[ctrl.leader]
    if not lead.alive or lead.replica.role != "leader":
        return [f"leader {ctrl.leader} is not acting as leader"]
    leo = lead.replica.log.log_end_offset
    gaps = []
    for b in replicas:
        broker = cluster.brokers[b]
        if not broker.alive:
            gaps.append(f"broker {b} is down")
        elif broker.replica.log.log_end_offset != leo:
            gaps.append(f"broker {b} has LEO {broker.replica.log.log_end_offset}, leader {leo}")
    missing = [b for b in replicas if b not in ctrl.isr]
    if missing:
        gaps.append(f"brokers {missing} are not in the ISR {list(ctrl.isr)}")
    return gaps


def converged(cluster: Cluster) -> bool:
    return not convergence_gaps(cluster)


def check_liveness(cluster: Cluster, step: int | None, healing_ms: int,
                   allowance: str | None = None) -> list[Violation]:
    """The liveness invariants after healing. ``allowance`` is why the configuration permits
    loss in this run (the state checker's): a hanging transaction is then allowed too, since
    the loss can have taken the marker that closed it (Liveness-LSO after a lossy crash)."""
    out = []
    gaps = convergence_gaps(cluster)
    if gaps:
        details: dict[str, Any] = {
            "gaps": gaps, "leader": cluster.controller.leader, "isr": list(cluster.controller.isr),
            "log_end_offsets": {str(b): cluster.brokers[b].replica.log.log_end_offset
                                for b in cluster.config.replicas or ()}}
        out.append(Violation("Liveness-Converge", PROTOCOL, step, cluster.now_ms,
                             f"not converged {healing_ms} ms after faults stopped: "
                             + "; ".join(gaps), details))
    hanging = hanging_transactions(cluster)
    if hanging:
        log = cluster.brokers[cluster.controller.leader].replica.log  # type: ignore[index]
        first, pid = hanging[0]
        out.append(Violation("Liveness-LSO", ALLOWED if allowance else PROTOCOL, step, cluster.now_ms,
                             f"hanging transaction: producer {pid}'s transaction open at offset "
                             f"{first} on leader {cluster.controller.leader} though the "
                             "coordinator has no transaction in progress; LSO "
                             f"{log.last_stable_offset} < HW {log.high_watermark}",
                             {"leader": cluster.controller.leader, "producer_id": pid,
                              "first_offset": first, "last_stable_offset": log.last_stable_offset,
                              "high_watermark": log.high_watermark,
                              "ongoing": [list(t) for t in hanging]}, allowance))
    open_sends = {name: c.pending for name, c in sorted(cluster.clients.items())
                  if hasattr(c, "pending") and c.pending}
    if open_sends:
        out.append(Violation("Liveness-Ack", PROTOCOL, step, cluster.now_ms,
                             f"sends without an outcome after healing: {open_sends}",
                             {"pending": open_sends}))
    return out
