"""What a run is seen as, whoever ran it: step records, normalised snapshots and a sampled
timeline. The simulator's scenario runner and schedule executor, the live-Kafka runs and the
reports (step tables, timelines, run directories) all read and write these types, so they live
below every one of them and import nothing of epochlab.

:func:`snapshot_from` turns an ``epochlab.sim.ClusterState`` (or its ``to_dict()`` form, or a
hand-written dict in tests) into a :class:`Snapshot`, the one shape the expectations and the
report read. :class:`Observer` is called after every engine event while a run advances
virtual time; it keeps only what expectations need over the whole run: every ``(offset,
value)`` each replica ever held, the unavailability intervals and the leader's high watermark
over time. A :class:`StepRecord` is one row of a step table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

__all__ = ["Observer", "ReplicaView", "Snapshot", "StepRecord", "snapshot_from"]

Batch = tuple[int, int, int, tuple[int, ...]]


@dataclass(frozen=True)
class ReplicaView:
    """One replica's log and offsets. ``batches`` are ``(base_offset, last_offset, epoch,
    values)``; offsets of a batch's records are ``base_offset + i``."""

    broker: int
    alive: bool
    role: str
    leader_epoch: int | None
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    batches: tuple[Batch, ...]
    last_stable_offset: int = 0

    def records(self) -> list[tuple[int, int, int]]:
        """``(offset, epoch, value)`` for every record, in offset order."""
        return [(base + i, epoch, v) for base, _last, epoch, values in self.batches
                for i, v in enumerate(values)]

    def values(self) -> list[int]:
        return [v for _o, _e, v in self.records()]

    def readable(self) -> dict[int, tuple[int, int]]:
        """``offset -> (epoch, value)`` as a reader finds them: the first record at each offset
        in log order (a v0/v1 follower log can hold an offset twice, KAFKA-3919; Kafka's
        offset lookup finds the first wrapper holding it)."""
        out: dict[int, tuple[int, int]] = {}
        for o, e, v in self.records():
            out.setdefault(o, (e, v))
        return out

    def value_at(self) -> dict[int, int]:
        return {o: v for o, (_e, v) in self.readable().items()}


@dataclass(frozen=True)
class Snapshot:
    """The cluster at one instant: the controller's view and every replica, in broker order."""

    time_ms: int
    leader: int | None
    leader_epoch: int | None
    isr: tuple[int, ...]
    offline: bool
    replicas: tuple[ReplicaView, ...]

    def replica(self, broker: int) -> ReplicaView | None:
        for r in self.replicas:
            if r.broker == broker:
                return r
        return None

    def leader_replica(self) -> ReplicaView | None:
        """The controller's leader, whether or not it is alive; ``None`` when there is none."""
        if self.leader is None or self.offline:
            return None
        return self.replica(self.leader)

    def available(self) -> bool:
        """A live broker leads (in the controller's view) and acts as leader."""
        r = self.leader_replica()
        return r is not None and r.alive and r.role == "leader"

    def reference_values(self) -> set[int]:
        """Values that survive: the leader's log, or every replica's when there is no leader."""
        r = self.leader_replica()
        if r is not None:
            return set(r.values())
        return {v for rep in self.replicas for v in rep.values()}


@dataclass
class StepRecord:
    """One row of the step table: the step (``None`` for the initial state), when it ran, what
    it returned, and the state at the end of its interval (just before the next step).

    A step is anything with ``describe()`` and ``to_dict()``: a scenario's ``Step``, a
    schedule's ``Action``, the executor's healing phase, a live run's step."""

    step: Any
    executed_at_ms: int
    outcome: str = ""
    error: str | None = None
    snapshot: Snapshot | None = None


def snapshot_from(state: Any) -> Snapshot:
    """Accept a ClusterState, its ``to_dict()`` form, or a JSON round trip of it. A
    ClusterState is read through its attributes, without a round trip through dicts."""
    data = state
    controller = _get(data, "controller", {}) or {}
    replicas_raw = _get(data, "replicas", {})
    items: Iterable[Any] = replicas_raw.values() if isinstance(replicas_raw, Mapping) else replicas_raw
    replicas = sorted((_replica(r) for r in items), key=lambda r: r.broker)
    leader = _get(controller, "leader")
    return Snapshot(
        time_ms=int(_get(data, "time_ms", 0)),
        leader=None if leader is None else int(leader),
        leader_epoch=_get(controller, "leader_epoch"),
        isr=tuple(int(b) for b in (_get(controller, "isr", ()) or ())),
        offline=bool(_get(controller, "offline", leader is None)),
        replicas=tuple(replicas),
    )


def _replica(r: Any) -> ReplicaView:
    return ReplicaView(
        broker=int(_get(r, "broker")),
        alive=bool(_get(r, "alive", True)),
        role=str(_get(r, "role", "follower")),
        leader_epoch=_get(r, "leader_epoch"),
        log_start_offset=int(_get(r, "log_start_offset", 0) or 0),
        log_end_offset=int(_get(r, "log_end_offset", 0) or 0),
        high_watermark=int(_get(r, "high_watermark", 0) or 0),
        batches=tuple(_batch(b) for b in (_get(r, "batches", ()) or ())),
        last_stable_offset=int(_get(r, "last_stable_offset", _get(r, "high_watermark", 0)) or 0),
    )


def _batch(b: Any) -> Batch:
    # Snapshots are taken after every engine event: the engine's own tuples take the fast path
    # (an ABC isinstance check per batch per event used to dominate a scenario's run time).
    if type(b) is tuple and type(b[3]) is tuple:
        return b  # type: ignore[return-value]
    if isinstance(b, Mapping):
        base, last = int(b["base_offset"]), int(b["last_offset"])
        epoch, values = b.get("epoch", b.get("partition_leader_epoch")), b.get("values", b.get("records"))
    else:
        base, last, epoch, values = b[0], b[1], b[2], b[3]
    return (int(base), int(last), int(epoch), tuple(int(v) for v in values))


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if type(obj) is dict or isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


@dataclass
class Observer:
    """Sampled facts over a whole run. Call :meth:`sample` with a snapshot after each event."""

    held: dict[int, set[tuple[int, int]]] = field(default_factory=dict)
    unavailable: list[list[int]] = field(default_factory=list)   # [start, end) in ms
    leader_hw: list[tuple[int, int]] = field(default_factory=list)  # (time, max HW so far)
    samples: int = 0
    _down_since: int | None = None
    _seen: dict[int, tuple[Batch, ...]] = field(default_factory=dict)
    _last_time: int = 0

    def sample(self, snap: Snapshot) -> None:
        self.samples += 1
        self._last_time = snap.time_ms
        for r in snap.replicas:
            # A replica's log rarely changes between two events: skip logs already seen.
            if self._seen.get(r.broker) is not r.batches and self._seen.get(r.broker) != r.batches:
                self.held.setdefault(r.broker, set()).update((o, v) for o, _e, v in r.records())
                self._seen[r.broker] = r.batches
        if snap.available():
            if self._down_since is not None:
                self.unavailable.append([self._down_since, snap.time_ms])
                self._down_since = None
            hw = snap.leader_replica().high_watermark  # type: ignore[union-attr]
            if not self.leader_hw or hw > self.leader_hw[-1][1]:
                self.leader_hw.append((snap.time_ms, hw))
        elif self._down_since is None:
            self._down_since = snap.time_ms

    def intervals(self) -> list[list[int]]:
        """Unavailability intervals, the open one closed at the last sample."""
        out = [list(i) for i in self.unavailable]
        if self._down_since is not None:
            out.append([self._down_since, self._last_time])
        return out

    def hw_at(self, time_ms: int) -> int:
        """The highest leader HW sampled at or before ``time_ms`` (0 before any)."""
        hw = 0
        for t, h in self.leader_hw:
            if t > time_ms:
                break
            hw = h
        return hw
