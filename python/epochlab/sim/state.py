"""Frozen snapshots of the cluster for reports, checkers and tests (``docs/sim-api.md``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ClusterState", "ReplicaState"]


@dataclass(frozen=True)
class ReplicaState:
    """One replica as its broker holds it (on-disk state while the broker is down: the HW
    shown is then the checkpointed one). ``batches``: ``(base_offset, last_offset, epoch,
    values)`` of the data batches; transaction markers (control batches) are listed apart in
    ``markers`` as ``(offset, producer_id, "commit" | "abort")``. ``last_stable_offset`` is
    ``min(first unstable offset, HW)`` (1.12). ``role`` is ``"leader"``, ``"follower"`` or
    ``"offline"`` (down, or no metadata yet)."""

    broker: int
    alive: bool
    role: str
    leader_epoch: int | None
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    epoch_entries: tuple[tuple[int, int], ...]
    batches: tuple[tuple[int, int, int, tuple[int, ...]], ...]
    last_stable_offset: int = 0
    markers: tuple[tuple[int, int, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "broker": self.broker, "alive": self.alive, "role": self.role,
            "leader_epoch": self.leader_epoch, "log_start_offset": self.log_start_offset,
            "log_end_offset": self.log_end_offset, "high_watermark": self.high_watermark,
            "epoch_entries": [list(e) for e in self.epoch_entries],
            "batches": [[b, l, e, list(v)] for b, l, e, v in self.batches],
            "last_stable_offset": self.last_stable_offset,
            "markers": [list(m) for m in self.markers],
        }

    def values(self) -> list[int]:
        """Every record value in offset order."""
        return [v for _, _, _, values in self.batches for v in values]


@dataclass(frozen=True)
class ClusterState:
    """``controller``: ``leader``, ``leader_epoch``, ``isr``, ``partition_epoch``,
    ``offline`` and (additions) ``elr``, ``unavailable_ms`` (total OFFLINE time so far,
    including a current outage). ``replicas`` by broker id in broker order."""

    time_ms: int
    controller: dict[str, Any]
    replicas: dict[int, ReplicaState]

    def to_dict(self) -> dict[str, Any]:
        return {"time_ms": self.time_ms, "controller": dict(self.controller),
                "replicas": {str(b): r.to_dict() for b, r in self.replicas.items()}}

    @property
    def leader(self) -> int | None:
        leader = self.controller.get("leader")
        return leader if isinstance(leader, int) else None
