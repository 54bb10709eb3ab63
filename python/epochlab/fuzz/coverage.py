"""Protocol-state coverage: what a guided search counts as new ground (``docs/fuzzing.md``,
"The guided engine").

After every engine event that changed a replica or the controller (the moments the state
checker looks), each broker is reduced to eight small codes:

* alive or not, its role in its own view (none, follower, leader),
* how far its leader epoch lags the controller's (0, 1, 2 or more; no epoch),
* whether the controller names it leader, and keeps it in the ISR or the ELR,
* whether it misses part of the committed prefix (LEO below ``trueHW``), whether its high
  watermark is above it,
* for a live leader: its ISR below ``min.insync.replicas`` or not, and whether it believes
  some follower holds more than that follower's log does (the re-elected KRaft leader's
  stale follower state; a follower that lost its unflushed tail in a crash aside), whether
  that follower has a fetch in flight that would correct the belief, whether it is in
  the leader's maximal ISR (where the belief counts in the next HW advance), and whether the
  leader cannot hear the controller (it leads on whatever the controller decides, and an
  election naming it again reaches it in one metadata delta, so it keeps such a belief as a
  re-elected leader), and whether its HW is below the committed prefix (a new leader that has
  not learned the HW yet: KAFKA-2334's window);

and the cluster to eight more (leaders alive, the controller's ISR and ELR sizes and whether
it has no leader, live brokers and how many miss committed data, the worst leader code, the
largest epoch lag of a leader). A run's *features* are the tuples it reached and the moves
between consecutive tuples of one broker and of the cluster, as FNV-1a hashes with the family
in the two low bits. No feature names a broker, and none is the product of every broker's
tuple (that product keeps growing with every run instead of saturating: measured in
``docs/fuzzing.md``).

The abstraction is computed in Rust (``epochlab._core.ProtocolCoverage`` over
``src/coverage.rs``) for clusters of Rust replicas; :class:`Coverage` here is its Python twin,
byte for byte the same numbers (a test compares them), used with the reference backend.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import epochlab._core as core

__all__ = ["BROKER", "BROKER_MOVE", "CLUSTER", "CLUSTER_MOVE", "CODE_RANGES", "Coverage", "NEAR_MISS",
           "NEAR_MISS_CODES", "RunCoverage", "attach", "broker_codes", "broker_tuple_codes", "broker_tuples",
           "feature", "fnv1a", "global_codes", "is_zombie", "stale_beliefs", "stale_follower"]

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MASK = (1 << 64) - 1
ROLES = {"none": 0, "follower": 1, "leader": 2}


def fnv1a(value: int, data: bytes) -> int:
    for byte in data:
        value = ((value ^ byte) * FNV_PRIME) & MASK
    return value


def stale_beliefs(view: dict[str, Any], b: dict[str, Any]) -> list[tuple[int, int]]:
    """The followers ``b`` (a leader) believes hold more than their logs do, each with its
    leader-code bits, in ``b["followers"]`` order (``src/coverage.rs``, ``stale_beliefs``)."""
    leos = {x["id"]: x["log_end_offset"] for x in view["brokers"]}
    recovering = {x["id"] for x in view["brokers"] if x["recovering"]}
    idle = {x["id"] for x in view["brokers"] if x["fetch_idle"]}
    return [(f, 4 | (8 if f in idle else 0) | (16 if f in b["maximal_isr"] else 0))
            for f, known in b["followers"]
            if known is not None and f in leos and known > leos[f] and f not in recovering]


def stale_follower(view: dict[str, Any], b: dict[str, Any]) -> int | None:
    """The follower of a live leader's most telling stale belief: the most bits, the first of
    equals (``src/coverage.rs``, ``stale_follower``)."""
    if not (b["alive"] and b["role"] == 2):
        return None
    best: tuple[int, int] | None = None
    for f, bits in stale_beliefs(view, b):
        if best is None or bits > best[1]:
            best = (f, bits)
    return None if best is None else best[0]


def broker_codes(view: dict[str, Any], b: dict[str, Any]) -> bytes:
    """One broker's eight codes (``src/coverage.rs``, ``broker_codes``)."""
    epoch = b["leader_epoch"]
    lag = 3 if epoch is None else min(max(view["controller_epoch"] - epoch, 0), 2)
    member = 1 if b["id"] in view["controller_isr"] else 2 if b["id"] in view["controller_elr"] else 0
    leader = 0
    if b["alive"] and b["role"] == 2:
        leader = 1 if b["isr_len"] < view["min_isr"] else 2
        for _, bits in stale_beliefs(view, b):
            leader |= bits
        if b["controller_cut"]:  # it cannot hear the controller
            leader |= 32
        if b["high_watermark"] < view["true_hw"]:  # it tells less than is committed
            leader |= 64
    return bytes((int(b["alive"]), min(b["role"], 2), lag, int(view["controller_leader"] == b["id"]),
                  member, int(b["log_end_offset"] < view["true_hw"]),
                  int(b["high_watermark"] > view["true_hw"]), leader))


def global_codes(view: dict[str, Any], tuples: list[bytes]) -> bytes:
    """The cluster-wide codes (``src/coverage.rs``, ``global_codes``)."""
    live = [t for t in tuples if t[0] == 1]
    leaders = [t for t in tuples if t[7] != 0]
    return bytes((min(len(leaders), 3), min(len(view["controller_isr"]), 255),
                  min(len(view["controller_elr"]), 255), int(view["controller_leader"] is None),
                  min(len(live), 255), min(sum(1 for t in live if t[5] == 1), 255),
                  max((t[7] for t in leaders), default=0), max((t[2] for t in leaders), default=3)))


BROKER, BROKER_MOVE, CLUSTER, CLUSTER_MOVE = 0, 1, 2, 3


def feature(family: int, *parts: bytes) -> int:
    value = fnv1a(FNV_OFFSET, bytes((family,)))
    for part in parts:
        value = fnv1a(value, part)
    return (value & ~3 & MASK) | family


class Coverage:
    """The Python twin of ``_core.ProtocolCoverage`` (``observe``, ``features``,
    ``observations``), for clusters whose replicas are Python ones."""

    def __init__(self, min_isr: int) -> None:
        self.min_isr = min_isr
        self.brokers: dict[int, bytes] = {}
        self.cluster: bytes | None = None
        # feature -> the step, simulated time (ms), broker and stale follower (-1: none) of
        # its first reach
        self.seen: dict[int, tuple[int, int, int, int]] = {}
        self.observations = 0

    def _reach(self, feature_: int, at: tuple[int, int, int, int]) -> None:
        self.seen.setdefault(feature_, at)

    def observe(self, brokers: dict[int, Any], controller: Any, network: Any, true_hw: int, recovering: Any,
                step: int, now_ms: int) -> bool:
        self.observations += 1
        at = (step, now_ms, -1, -1)
        views = []
        for b, broker in brokers.items():
            r, log = broker.replica, broker.replica.log
            views.append({"id": b, "alive": bool(broker.alive), "role": ROLES[r.role],
                          "leader_epoch": r.leader_epoch, "log_end_offset": log.log_end_offset,
                          "high_watermark": log.high_watermark, "isr_len": len(r.isr),
                          "maximal_isr": tuple(r.maximal_isr),
                          "followers": [(f, s.log_end_offset) for f, s in sorted(r.followers.items())],
                          "recovering": b in recovering, "fetch_idle": broker.fetch_state()[1] is None,
                          "controller_cut": bool(broker.alive) and r.role == "leader"
                          and not network.usable("controller", b)})
        view = {"brokers": views, "controller_leader": controller.leader,
                "controller_epoch": controller.leader_epoch, "controller_isr": tuple(controller.isr),
                "controller_elr": tuple(controller.elr), "true_hw": true_hw, "min_isr": self.min_isr}
        tuples = [broker_codes(view, v) for v in views]
        moved = False
        for v, t in zip(views, tuples):
            before = self.brokers.get(v["id"])
            self.brokers[v["id"]] = t
            if before != t:
                moved = True
                follower = stale_follower(view, v) if t[7] & 4 else None
                who = (step, now_ms, v["id"], -1 if follower is None else follower)
                self._reach(feature(BROKER, t), who)
                if before is not None:
                    self._reach(feature(BROKER_MOVE, before, t), who)
        g = global_codes(view, tuples)
        if g != self.cluster:
            moved = True
            self._reach(feature(CLUSTER, g), at)
            if self.cluster is not None:
                self._reach(feature(CLUSTER_MOVE, self.cluster, g), at)
            self.cluster = g
        return moved

    def features(self) -> list[int]:
        return sorted(self.seen)

    def first_steps(self) -> list[int]:
        return [self.seen[f][0] for f in sorted(self.seen)]

    def first_times(self) -> list[int]:
        return [self.seen[f][1] for f in sorted(self.seen)]

    def first_brokers(self) -> list[tuple[int, int]]:
        return [self.seen[f][2:] for f in sorted(self.seen)]


#: The ranges of the eight broker codes (:func:`broker_codes`).
CODE_RANGES = (2, 3, 4, 2, 3, 2, 2, 128)


def broker_tuple_codes(leader_bits: int, current_leader: bool = False) -> dict[int, tuple[int, ...]]:
    """The features of every broker tuple whose leader code has all of ``leader_bits``, each
    with its codes; with ``current_leader``, only those of the leader the controller names, in
    the controller's epoch, with an ISR at ``min.insync.replicas`` or more (a leader whose HW
    may advance)."""
    import itertools

    leader_codes = [c for c in range(CODE_RANGES[7]) if c & leader_bits == leader_bits]
    return {feature(BROKER, bytes(t)): t for t in itertools.product(*map(range, CODE_RANGES[:7]), leader_codes)
            if not current_leader or (t[3] == 1 and t[2] == 0 and t[7] & 3 == 2)}


def broker_tuples(leader_bits: int, current_leader: bool = False) -> frozenset[int]:
    """The features of :func:`broker_tuple_codes`."""
    return frozenset(broker_tuple_codes(leader_bits, current_leader))


@functools.cache
def _near_misses() -> tuple[dict[int, tuple[int, ...]], frozenset[int]]:
    """``NEAR_MISS_CODES`` and ``NEAR_MISS`` (:func:`__getattr__`), made once, when first asked
    for: the 36,864 broker tuples behind them took 83 ms at every import of the fuzzer, which
    only the guided engine needs (``docs/measurements.md``, "The fuzz loop")."""
    codes = broker_tuple_codes(4)
    return codes, frozenset(codes)


def __getattr__(name: str) -> Any:
    """The near misses' features, made on first use (:func:`_near_misses`):

    * ``NEAR_MISS_CODES``: each feature with its codes, the broker tuples one step from a
      violation of Inv-StrongIsr: a live leader that believes a follower holds more than that
      follower's log does (leader code bit 4; the next HW advance that counts the belief
      commits records an ISR member lacks), whether or not that follower has a fetch in flight
      that would correct it (bit 8) and whether or not it is in the leader's maximal ISR (bit
      16). Zombie leaders count (the controller has moved on): the KRaft finding's leader holds
      the belief as a zombie and is then re-elected, so the narrower set of
      :func:`broker_tuples` with ``current_leader`` misses the way there (measured in
      ``docs/measurements.md``, "The guided engine"). The guided engine's rare arm targets them
      in half its mutants once its corpus holds one (``epochlab.fuzz.guided``).
    * ``NEAR_MISS``: those features as a set.
    """
    if name == "NEAR_MISS_CODES":
        return _near_misses()[0]
    if name == "NEAR_MISS":
        return _near_misses()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def is_zombie(codes: tuple[int, ...]) -> bool:
    """Whether a leader's broker tuple is a zombie's: the controller names another leader, or
    the leader's epoch lags the controller's."""
    return codes[3] == 0 or codes[2] != 0


class RunCoverage:
    """One run's coverage, fed by the state checker after each check (its ``listeners``);
    ``step()`` gives the run's current action index."""

    def __init__(self, cluster: Any, checker: Any, step: Callable[[], int], twin: bool = False) -> None:
        replica = next(iter(cluster.brokers.values())).replica
        self.checker = checker
        self.step = step
        rust = isinstance(replica, core.Replica) and not twin
        self.impl: Any = core.ProtocolCoverage(checker.min_isr) if rust else Coverage(checker.min_isr)
        self._cluster = cluster
        self._brokers = cluster.brokers
        self._controller = cluster.controller
        self._network = cluster.network
        checker.listeners.append(self.observe)

    def observe(self) -> None:
        checker = self.checker
        self.impl.observe(self._brokers, self._controller, self._network, checker.true_hw, checker.recovering,
                          self.step(), self._cluster.now_ms)

    def features(self) -> tuple[list[int], list[int], list[int], list[tuple[int, int]]]:
        """The features, the step each was first reached at, the simulated time (ms), and the
        broker and stale follower (-1: none)."""
        return (list(self.impl.features()), list(self.impl.first_steps()), list(self.impl.first_times()),
                [tuple(who) for who in self.impl.first_brokers()])


def attach(run: Any, twin: bool = False) -> Callable[[], tuple[list[int], list[int], list[int], list[tuple[int, int]]]]:
    """Coverage for an executor run (``epochlab.fuzz.executor``): returns its getter of
    ``(features, first steps, first times, first brokers)``."""
    return RunCoverage(run.cluster, run.checker, lambda: run.step, twin).features
