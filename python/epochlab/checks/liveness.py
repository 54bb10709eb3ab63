"""Liveness after a final healing phase (``PROTOCOL.md`` 4, items 24-25).

The executor stops injecting faults, heals the network, resets every link, restarts every
crashed broker and runs the cluster for a bounded time. Then:

* ``Liveness-Converge``: a leader exists, every replica is alive with the leader's LEO, and the
  controller's ISR holds every replica;
* ``Liveness-Ack``: every send has an outcome (ok, fail or info) once the producers had their
  ``delivery.timeout.ms`` to finish.

Liveness-LSO (26) needs transactions, which the engine does not model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from epochlab.checks.verdict import PROTOCOL, Violation

if TYPE_CHECKING:
    from epochlab.sim.cluster import Cluster

__all__ = ["LIVENESS_INVARIANTS", "check_liveness", "converged", "convergence_gaps"]

LIVENESS_INVARIANTS = ("Liveness-Converge", "Liveness-Ack")


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


def check_liveness(cluster: Cluster, step: int | None, healing_ms: int) -> list[Violation]:
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
    open_sends = {name: c.pending for name, c in sorted(cluster.clients.items())
                  if hasattr(c, "pending") and c.pending}
    if open_sends:
        out.append(Violation("Liveness-Ack", PROTOCOL, step, cluster.now_ms,
                             f"sends without an outcome after healing: {open_sends}",
                             {"pending": open_sends}))
    return out
