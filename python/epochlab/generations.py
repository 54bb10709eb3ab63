"""Protocol generations: which historical Kafka replication behaviour the simulator runs.

One :class:`Generation` value selects the follower-truncation rule and the behaviour flags that
changed with it (``docs/core-semantics.md`` rules 1.2, 1.4, 1.6, 1.7, 1.9):

====  =================  ===============  ===================================================
 G    name               Kafka            follower truncation
====  =================  ===============  ===================================================
 0    hw-truncation      <= 0.10.2        truncate to the local (possibly stale) HW (1.4a)
 1    kip-101            0.11 - 1.1       OffsetsForLeaderEpoch v0, offset only (1.4b)
 2    kip-279            2.0              OffsetsForLeaderEpoch v1, iterative search (1.4c)
 3    kip-320            2.1 - 2.7        as G2, fenced by the current leader epoch (1.4d)
 4    diverging-epoch    2.8 - 3.6        truncate on fetch: DivergingEpoch (1.4d)
 5    strict-min-isr     3.7+ (KRaft)     as G4; HW needs ``|ISR| >= minISR`` (1.6), ELR
====  =================  ===============  ===================================================

>>> Generation.parse("kip-320").fences_current_epoch
True
>>> Generation.parse(0).label
'hw-truncation'
"""

from __future__ import annotations

import enum

from epochlab.errors import ConfigError

__all__ = ["Generation"]

_LABELS = {
    0: ("hw-truncation", "0.10.2 and before"),
    1: ("kip-101", "0.11 - 1.1"),
    2: ("kip-279", "2.0"),
    3: ("kip-320", "2.1 - 2.7"),
    4: ("diverging-epoch", "2.8 - 3.6"),
    5: ("strict-min-isr", "3.7+"),
}


#: generation -> (first release, first release after it) as version tuples; ``None``: no end
_RELEASES: dict[int, tuple[tuple[int, ...], tuple[int, ...] | None]] = {
    0: ((0, 8, 0), (0, 11, 0)),
    1: ((0, 11, 0), (2, 0, 0)),
    2: ((2, 0, 0), (2, 1, 0)),
    3: ((2, 1, 0), (2, 8, 0)),
    4: ((2, 8, 0), (3, 7, 0)),
    5: ((3, 7, 0), None),
}


def parse_release(text: object) -> tuple[int, ...] | None:
    """A Kafka release ``"X.Y.Z"`` (before 1.0 ``"0.X.Y.Z"``) as a version tuple, ``(2, 8, 0)``;
    ``None`` when ``text`` is not one."""
    parts = text.split(".") if isinstance(text, str) else []
    if not (len(parts) == 3 or (len(parts) == 4 and parts[0] == "0")):
        return None
    if not all(p.isdigit() and p.isascii() and len(p) <= 4 for p in parts):
        return None
    return tuple(int(p) for p in parts)


class Generation(enum.IntEnum):
    """A protocol generation; ordered, so ``g >= Generation.KIP_320`` reads as "G3 or later"."""

    TRUNCATE_TO_HW = 0
    KIP_101 = 1
    KIP_279 = 2
    KIP_320 = 3
    DIVERGING_EPOCH = 4
    STRICT_MIN_ISR = 5

    @property
    def label(self) -> str:
        """The generation's name, e.g. ``"kip-101"``."""
        return _LABELS[int(self)][0]

    @property
    def kafka_versions(self) -> str:
        """The Apache Kafka releases that behave this way."""
        return _LABELS[int(self)][1]

    def covers_release(self, release: tuple[int, ...]) -> bool:
        """Whether Kafka ``release`` (a version tuple such as ``(2, 8, 0)``) is one of this
        generation's releases (:attr:`kafka_versions`)."""
        first, after = _RELEASES[int(self)]
        return first <= release and (after is None or release < after)

    def precedes(self, release: tuple[int, ...]) -> bool:
        """Whether every release of this generation comes before Kafka ``release``: so the
        model without a ``kafka.release``, which follows each generation's newest release,
        counts as a release before ``release``."""
        after = _RELEASES[int(self)][1]
        return after is not None and after <= release

    @classmethod
    def parse(cls, value: object) -> Generation:
        """A generation from its label (``"kip-279"``), its enum name (``"KIP_279"``) or its
        number (``2`` or ``"2"``); :class:`~epochlab.errors.ConfigError` otherwise."""
        if isinstance(value, Generation):
            return value
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 5:
            return cls(value)
        if isinstance(value, str):
            text = value.strip()
            for number, (label, _) in _LABELS.items():
                if text.lower() in (label, cls(number).name.lower(), str(number), f"g{number}"):
                    return cls(number)
        raise ConfigError(
            f"unknown protocol generation {value!r}",
            where="generation",
            field="generation",
            expected=", ".join(label for label, _ in _LABELS.values()) + " or 0-5",
            got=repr(value),
        )

    @property
    def kip101_epoch_cache(self) -> bool:
        """G1, G2: the epoch cache appends without eviction (before KAFKA-7415, 1.2)."""
        return self in (Generation.KIP_101, Generation.KIP_279)

    @property
    def wrapper_batches(self) -> bool:
        """G0: message format v0/v1 (v2 came with 0.11, KIP-98), batches are compressed wrapper
        messages and a follower checks only a wrapper's own, last, offset (0.10.2
        ``Log.append``), so it can take one whose inner offsets start below its log end offset
        (KAFKA-3919; KIP-101 fixed it for v2 in 0.11.0.0)."""
        return self is Generation.TRUNCATE_TO_HW

    @property
    def leader_assigns_epoch(self) -> bool:
        """G3+: ``makeLeader`` assigns ``(epoch, LEO)`` in the cache (KAFKA-7415, 1.2 rule 2)."""
        return self >= Generation.KIP_320

    @property
    def uses_epoch_cache(self) -> bool:
        """G1+: followers reconcile with the leader's epoch cache instead of their HW (1.4)."""
        return self >= Generation.KIP_101

    @property
    def fences_current_epoch(self) -> bool:
        """G3+: Fetch and OffsetsForLeaderEpoch carry the current leader epoch (KIP-320, 1.4d)."""
        return self >= Generation.KIP_320

    @property
    def isr_requires_leso(self) -> bool:
        """G3+: a follower joins the ISR only with LEO >= LESO (KAFKA-7128, 1.7)."""
        return self >= Generation.KIP_320

    @property
    def truncate_on_fetch(self) -> bool:
        """G4+: the leader answers DivergingEpoch in fetch responses (KAFKA-10554, 1.4d)."""
        return self >= Generation.DIVERGING_EPOCH

    @property
    def strict_min_isr(self) -> bool:
        """G5: the leader HW advances only while ``|ISR| >= minISR`` (KAFKA-15583, 1.6)."""
        return self == Generation.STRICT_MIN_ISR

    @property
    def kraft(self) -> bool:
        """G5: KRaft controller semantics (broker epochs fence a restarted broker, ISR shrink
        does not bump the leader epoch, ELR available), 1.9 / 1.10. G0-G4 model the ZK era."""
        return self == Generation.STRICT_MIN_ISR

    @property
    def broker_epochs(self) -> bool:
        """G3+: a restarted broker has a new broker epoch and registers only after its old
        session expired (ZooKeeper 2.2+, KIP-380; KRaft registration), 1.10."""
        return self >= Generation.KIP_320

    @property
    def client_exponential_backoff(self) -> bool:
        """G5: clients back off exponentially with jitter, retries and metadata requests alike
        (KIP-580, KAFKA-9800, Java clients 3.7.0+; :mod:`epochlab.sim.backoff`); before, every
        wait is ``retry.backoff.ms``."""
        return self == Generation.STRICT_MIN_ISR

    @property
    def elr_default(self) -> bool:
        """Default of eligible leader replicas (KIP-966): on in the latest generation, as a
        cluster formatted by Kafka 4.1+ has it (``EligibleLeaderReplicasVersion.ELRV_1``
        bootstraps with metadata version 4.1-IV0 and later, ``LATEST_PRODUCTION``); the
        ZooKeeper-era generations have no ELR."""
        return self.kraft

    @property
    def unclean_default(self) -> bool:
        """Default of ``unclean.leader.election.enable``: true up to 0.10.2, false after (1.9)."""
        return self == Generation.TRUNCATE_TO_HW
