"""Two schedule producers that share one action builder: a seeded random walk with swarm
testing, and a decoder from fuzzer bytes.

Both draw every decision through a :class:`Source` as a *bounded choice* (``below(n)``: an
integer in ``[0, n)``). :class:`RandomSource` answers from ``random.Random`` seeded with the run
seed; :class:`ByteSource` answers from the fuzzer's bytes, one byte per choice (two above
256), zeros once they run out. The decoder gives every action a fixed-size record of bytes,
so a mutated byte changes one action and an inserted record inserts one action: small
mutations make small changes.

Swarm testing (Groce et al., ISSTA 2012): each run first switches whole fault classes on or
off (:data:`FAULT_CLASSES`), so that some runs are dense in, say, crashes and controller
delays and have no partitions at all. Weights only say how often an enabled class is picked;
nothing here knows any historical interleaving.

The fuzzing profile (:class:`FuzzProfile`) is the configuration under test: by default three
replicas, ``min.insync.replicas=2``, unclean election disabled (also in G0, whose Kafka default
was enabled), an acks=all producer, sometimes an acks=1 or idempotent one, one consumer reading
from the earliest offset. A ``--config`` JSON file overrides it (``docs/fuzzing.md``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from random import Random
from typing import Any, Mapping

from epochlab.errors import ScheduleError
from epochlab.fuzz.schedule import DEFAULT_HEALING_MS, Action, Schedule
from epochlab.generations import Generation
from epochlab.steps import SWARM_CLASSES

__all__ = ["FAULT_CLASSES", "HEADER_BYTES", "RECORD_BYTES", "TXN_FAULT_CLASSES", "ByteSource",
           "FuzzProfile", "RandomSource", "Source", "decode_schedule", "encode_random_schedule",
           "generate_schedule", "load_profile", "profile_model"]

#: Fault classes and their weight when enabled (how often an action is drawn from them): the
#: step vocabulary's (``epochlab.steps.SWARM_CLASSES``, where each is described; each step
#: names the classes that draw it). :meth:`_Builder._fault` draws each class's actions.
FAULT_CLASSES: dict[str, int] = {c.name: c.weight for c in SWARM_CLASSES}
#: Weights of the transactional fault classes when ``FuzzProfile.transactions`` is on.
TXN_FAULT_CLASSES: dict[str, int] = {c.name: c.transactions_weight for c in SWARM_CLASSES
                                     if c.transactions_weight is not None}
DELAYS = (0, 0, 10, 50, 100, 300, 700, 1500, 3000, 6000)
#: Bytes of a decoded schedule's header (run seed, configuration and swarm choices) and of each
#: action record: wide enough for every choice the random engine makes, so that every random
#: schedule has an exact byte encoding (:func:`encode_random_schedule`).
HEADER_BYTES = 24
RECORD_BYTES = 16


class Source:
    """Bounded choices; subclasses implement :meth:`below`."""

    def below(self, n: int) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def pick(self, items: list[Any] | tuple[Any, ...]) -> Any:
        return items[self.below(len(items))]

    def chance(self, percent: int) -> bool:
        return self.below(100) < percent

    def weighted(self, weights: Mapping[str, int]) -> str:
        names = [k for k in sorted(weights) if weights[k] > 0]
        total = sum(weights[k] for k in names)
        x = self.below(total)
        for k in names:
            x -= weights[k]
            if x < 0:
                return k
        return names[-1]  # pragma: no cover


class RandomSource(Source):
    def __init__(self, seed: int | str) -> None:
        self.rng = Random(f"epochlab-fuzz:{seed}")

    def below(self, n: int) -> int:
        return self.rng.randrange(n) if n > 1 else 0


class _Recorder(Source):
    """Answers from ``inner`` and writes each answer as :class:`ByteSource` reads it back (one
    byte, two above 256), so the recorded bytes decode to the same choices."""

    def __init__(self, inner: Source) -> None:
        self.inner = inner
        self.out = bytearray()

    def below(self, n: int) -> int:
        value = self.inner.below(n)
        if n > 1:
            self.out += value.to_bytes(1 if n <= 256 else 2, "big")
        return value

    def cut(self, size: int, what: str) -> bytes:
        """The bytes since the last cut, zero-padded to ``size``."""
        chunk, self.out = bytes(self.out), bytearray()
        if len(chunk) > size:  # pragma: no cover - the sizes above are chosen to make it fit
            raise AssertionError(f"{what} needs {len(chunk)} bytes, more than {size}")
        return chunk.ljust(size, b"\0")


class ByteSource(Source):
    """Choices from ``data``: one byte each (two if ``n > 256``), 0 past the end."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def below(self, n: int) -> int:
        if n <= 1:
            return 0
        width = 1 if n <= 256 else 2
        chunk = self.data[self.pos:self.pos + width]
        self.pos += width
        return int.from_bytes(chunk.ljust(width, b"\0"), "big") % n

    def record(self, size: int) -> ByteSource:
        """The next ``size`` bytes as a source of their own (zero-padded)."""
        sub = ByteSource(self.data[self.pos:self.pos + size])
        self.pos += size
        return sub

    def remaining(self) -> int:
        return max(0, len(self.data) - self.pos)


@dataclass(frozen=True)
class FuzzProfile:
    """The configuration under test and the shape of generated schedules."""

    cluster: dict[str, Any] = field(default_factory=lambda: {
        "brokers": [1, 2, 3], "min.insync.replicas": 2, "unclean.leader.election.enable": False})
    producers: dict[str, dict[str, Any]] = field(default_factory=lambda: {
        "p1": {"acks": "all", "request.timeout.ms": 3000, "delivery.timeout.ms": 15000}})
    consumers: dict[str, dict[str, Any]] = field(default_factory=lambda: {
        "c1": {"auto.offset.reset": "earliest"}})
    actions: int = 100
    healing_ms: int = DEFAULT_HEALING_MS
    fault_classes: dict[str, int] = field(default_factory=lambda: dict(FAULT_CLASSES))
    swarm: bool = True
    vary_config: bool = True
    transactions: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "producers": self.producers, "consumers": self.consumers,
                "actions": self.actions, "healing_ms": self.healing_ms,
                "fault_classes": self.fault_classes, "swarm": self.swarm,
                "vary_config": self.vary_config, "transactions": self.transactions}

    def with_transactions(self, pre_kip890: bool | None = None) -> FuzzProfile:
        """This profile with transactions on (and the pre-KIP-890 cluster setting if given)."""
        cluster = dict(self.cluster)
        if pre_kip890 is not None:
            cluster["transaction.pre_kip890"] = pre_kip890
        classes = dict(self.fault_classes)
        for name, weight in TXN_FAULT_CLASSES.items():
            classes[name] = classes.get(name) or weight
        return replace(self, cluster=cluster, fault_classes=classes, transactions=True)


def load_profile(path: str | Path | None) -> FuzzProfile:
    """Read a ``--config`` JSON file: any of :class:`FuzzProfile`'s fields; ``cluster``,
    ``producers`` and ``consumers`` replace the defaults, ``fault_classes`` is merged."""
    base = FuzzProfile()
    if path is None:
        return base
    where = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        reason = "JSON nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise ScheduleError(f"{where}: cannot read fuzz configuration: {reason}", where=where,
                            field="", expected="a JSON object", got=type(exc).__name__) from None
    if not isinstance(data, dict):
        raise ScheduleError(f"{where}: expected a JSON object", where=where, field="",
                            expected="a JSON object", got=type(data).__name__)
    from epochlab.formats import validate

    validate(profile_model(), data, where, ScheduleError)  # structure, types, bounds: all at once
    known = set(base.to_dict())
    for key in data:
        if key not in known:
            raise ScheduleError(f"{where}: unknown key {key!r}", where=where, field=key,
                                expected="one of " + ", ".join(sorted(known)), got=repr(key))
    _check_profile_scalars(data, where)
    fault_data = data.get("fault_classes", {})
    if not isinstance(fault_data, dict):
        raise ScheduleError(f"{where}: fault_classes: expected an object of weights", where=where,
                            field="fault_classes", expected="an object", got=type(fault_data).__name__)
    classes = dict(base.fault_classes)
    for name, weight in dict(fault_data).items():
        if name not in FAULT_CLASSES or not isinstance(weight, int) or weight < 0:
            raise ScheduleError(f"{where}: fault_classes.{name}: expected a known class with an "
                                "integer weight >= 0", where=where, field=f"fault_classes.{name}",
                                expected=", ".join(sorted(FAULT_CLASSES)), got=repr(weight))
        classes[name] = weight
    out = replace(base, **{k: v for k, v in data.items() if k != "fault_classes"},
                  fault_classes=classes)
    if out.transactions:
        out = out.with_transactions()
    # validate the configs through a trivial schedule
    Schedule.from_dict(_skeleton(Generation.STRICT_MIN_ISR, 0, out, out.cluster, out.producers, []), where)
    return out


#: profile fields that are numbers: (lowest, highest) accepted
PROFILE_BOUNDS = {"actions": (1, 10_000), "healing_ms": (1_000, 3_600_000)}


@cache
def profile_model() -> Any:
    """The pydantic model of a fuzz profile file (``docs/schemas/fuzz-profile.schema.json``),
    its numbers bounded by :data:`PROFILE_BOUNDS`."""
    from typing import Annotated

    from pydantic import Field, StrictBool, StrictInt, create_model

    from epochlab.formats import Name, Settings, Strict

    (a_lo, a_hi), (h_lo, h_hi) = PROFILE_BOUNDS["actions"], PROFILE_BOUNDS["healing_ms"]
    return create_model(
        "FuzzProfile", __base__=Strict,
        __doc__="An epochlab fuzz profile (epochlab fuzz --config FILE; docs/fuzzing.md).",
        cluster=(Settings | None, None),
        producers=(dict[Name, Settings] | None, None),
        consumers=(dict[Name, Settings] | None, None),
        actions=(Annotated[StrictInt, Field(ge=a_lo, le=a_hi)] | None, None),
        healing_ms=(Annotated[StrictInt, Field(ge=h_lo, le=h_hi)] | None, None),
        fault_classes=(dict[Name, Annotated[StrictInt, Field(ge=0, le=1000)]] | None, None),
        swarm=(StrictBool | None, None),
        vary_config=(StrictBool | None, None),
        transactions=(StrictBool | None, None),
    )


def _check_profile_scalars(data: dict[str, Any], where: str) -> None:
    """Types and bounds of the profile's scalar fields, before anything uses them."""
    for key, (lo, hi) in PROFILE_BOUNDS.items():
        if key not in data:
            continue
        value = data[key]
        if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
            raise ScheduleError(f"{where}: {key}: expected an integer from {lo} to {hi}, got "
                                f"{json.dumps(value)}", where=where, field=key,
                                expected=f"an integer in [{lo}, {hi}]", got=repr(value))
    for key in ("swarm", "vary_config", "transactions"):
        if key in data and not isinstance(data[key], bool):
            raise ScheduleError(f"{where}: {key}: expected true or false, got {json.dumps(data[key])}",
                                where=where, field=key, expected="a boolean", got=repr(data[key]))
    for key in ("cluster", "producers", "consumers"):
        if key in data and not isinstance(data[key], dict):
            raise ScheduleError(f"{where}: {key}: expected an object, got {type(data[key]).__name__}",
                                where=where, field=key, expected="an object",
                                got=type(data[key]).__name__)


def _skeleton(generation: Generation, seed: int, profile: FuzzProfile, cluster: dict[str, Any],
              producers: dict[str, Any], actions: list[dict[str, Any]],
              origin: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"format": "epochlab-schedule", "version": 2, "generation": generation.label,
            "seed": seed, "healing_ms": profile.healing_ms, "cluster": cluster,
            "producers": producers, "consumers": _consumers(profile), "actions": actions,
            "origin": origin or {}}


class _Builder:
    """Turns choices into actions, tracking which brokers are down so restarts make sense."""

    def __init__(self, profile: FuzzProfile, brokers: list[int], producers: list[str],
                 consumers: list[str], classes: dict[str, int]) -> None:
        self.profile = profile
        self.brokers = brokers
        self.producers = producers
        self.consumers = consumers
        self.classes = classes
        self.down: set[int] = set()
        self.now = 0
        self.txn_producers = [p for p in producers if p in TXN_PRODUCERS] if profile.transactions else []
        self.in_txn: set[str] = set()

    def action(self, src: Source) -> dict[str, Any] | None:
        self.now += src.pick(DELAYS)
        kind = src.below(100)
        if kind < 45 and self.producers:
            producer = src.pick(self.producers)
            if producer in self.txn_producers:
                return self._txn(producer, src)
            return self._at(op="produce", producer=producer, count=1 + src.below(3))
        if kind < 55 and self.consumers:
            consumer = src.pick(self.consumers)
            return self._at(op="commit" if src.chance(20) else "consume", consumer=consumer)
        if not self.classes:
            return None
        return self._fault(src.weighted(self.classes), src)

    def _at(self, **params: Any) -> dict[str, Any]:
        return {"at_ms": self.now, **params}

    def _txn(self, producer: str, src: Source) -> dict[str, Any]:
        """Begin when no transaction is open; else mostly sends, sometimes commit or abort."""
        if producer not in self.in_txn:
            self.in_txn.add(producer)
            return self._at(op="begin_transaction", producer=producer)
        choice = src.below(10)
        if choice < 6:
            return self._at(op="produce", producer=producer, count=1 + src.below(3))
        self.in_txn.discard(producer)
        return self._at(op="commit_transaction" if choice < 9 else "abort_transaction", producer=producer)

    def _fault(self, cls: str, src: Source) -> dict[str, Any]:
        b = src.pick(self.brokers)
        if cls in ("crash", "lossy-crash"):
            if self.down and src.chance(60):
                b = src.pick(sorted(self.down))
                self.down.discard(b)
                return self._at(op="restart", broker=b)
            self.down.add(b)
            return self._at(op="crash", broker=b, lose_unflushed=cls == "lossy-crash")
        if cls == "partition":
            choice = src.below(3)
            if choice == 0:
                return self._at(op="heal")
            if choice == 1:
                return self._at(op="isolate", broker=b)
            nodes: list[Any] = [*self.brokers, "controller", *self.producers, *self.consumers]
            side = [n for n in nodes if src.chance(50)]
            return self._at(op="partition", groups=[side] if side else [[b]])
        if cls in ("controller-link", "broker-link"):
            other: Any = "controller" if cls == "controller-link" else src.pick(
                [x for x in self.brokers if x != b] or ["controller"])
            hi = src.pick((5, 50, 500, 2000, 8000))
            # The controller channel is one ordered, reliable connection in every Kafka
            # version (epochlab.sim.network): delays and lost connections only.
            return self._at(op="set_link", a=other, b=b, delay_ms=[src.below(hi + 1) // 4, hi],
                            drop=src.pick((0.0, 0.0, 0.1, 0.3, 1.0)), duplicate=0.0,
                            reorder=other != "controller" and src.chance(50))
        if cls == "slow":
            return self._at(op="slow_follower", broker=b, extra_delay_ms=src.pick((0, 200, 2000, 10000)))
        if cls == "election":
            if src.chance(40):
                return self._at(op="elect_preferred")
            return self._at(op="elect", broker=b, unclean=False)
        if cls == "unclean":
            return self._at(op="elect", broker=b, unclean=True)
        if cls == "shutdown":
            self.down.add(b)
            return self._at(op="controlled_shutdown", broker=b)
        if cls == "client-restart":
            if self.consumers and src.chance(50):
                return self._at(op=src.pick(("restart_consumer", "crash_consumer")),
                                consumer=src.pick(self.consumers))
            if self.producers:
                producer = src.pick(self.producers)
                self.in_txn.discard(producer)
                return self._at(op="restart_producer", producer=producer)
            return self._at(op="heal")
        if cls == "coordinator":
            return self._at(op="crash_coordinator" if src.chance(50) else "restart_coordinator")
        if cls == "list-offsets":
            if not self.consumers:
                return self._at(op="heal")
            return self._at(op="list_offsets", consumer=src.pick(self.consumers),
                            spec="latest" if src.chance(80) else "earliest")
        if cls == "list-offsets-time":
            if not self.consumers:
                return self._at(op="heal")
            # a moment up to 20 s back: the lookup lands on recent appends
            return self._at(op="list_offsets", consumer=src.pick(self.consumers),
                            spec=max(0, self.now - src.pick((0, 50, 300, 1000, 5000, 20000))))
        if cls == "controller-failover":
            return self._at(op="controller_failover")
        if cls == "txn-delay":
            hi = src.pick((5000, 20000, 40000))
            if self.txn_producers and src.chance(85):
                return self._at(op="set_link", a=src.pick(self.txn_producers), b=b,
                                delay_ms=[hi // 2, hi], drop=0.0, duplicate=0.0,
                                reorder=src.chance(30))
            return self._at(op="set_link", a="coordinator", b=b, delay_ms=[hi // 2, hi],
                            drop=0.0, duplicate=0.0, reorder=src.chance(30))
        raise AssertionError(cls)  # pragma: no cover


def _configure(src: Source, profile: FuzzProfile) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per-run configuration variation (timing knobs only; the guarantees stay the same)."""
    cluster = dict(profile.cluster)
    producers = {k: dict(v) for k, v in profile.producers.items()}
    if not profile.vary_config:
        return cluster, producers
    cluster.setdefault("replica.lag.time.max.ms", src.pick((1000, 3000, 10000, 30000)))
    cluster.setdefault("high.watermark.checkpoint.interval.ms", src.pick((500, 1000, 5000)))
    flush = src.pick((None, 200, 1000, 5000))
    if flush is not None:
        cluster.setdefault("flush.interval.ms", flush)
    if src.chance(30) and "p2" not in producers:
        producers["p2"] = {"acks": "1", "request.timeout.ms": 3000, "delivery.timeout.ms": 15000}
    if src.chance(30) and "p3" not in producers:
        producers["p3"] = {"acks": "all", "enable.idempotence": True, "request.timeout.ms": 3000,
                           "delivery.timeout.ms": 15000}
    return cluster, producers


def _configure_transactions(src: Source, profile: FuzzProfile, cluster: dict[str, Any],
                            producers: dict[str, Any]) -> None:
    if not profile.transactions:
        return
    shared = src.chance(30)
    for name in TXN_PRODUCERS:
        tid = "tx-1" if shared or name == "t1" else "tx-2"
        producers.setdefault(name, {"acks": "all", "transactional.id": tid,
                                    "request.timeout.ms": 3000, "delivery.timeout.ms": 10000,
                                    "transaction.timeout.ms": 10000})
    cluster.setdefault("transaction.abort.timed.out.transaction.cleanup.interval.ms", 2000)


TXN_PRODUCERS = ("t1", "t2")


def _consumers(profile: FuzzProfile) -> dict[str, Any]:
    consumers = {k: dict(v) for k, v in profile.consumers.items()}
    if profile.transactions:
        consumers.setdefault("rc", {"auto.offset.reset": "earliest",
                                    "isolation.level": "read_committed"})
    return consumers


def _swarm(src: Source, profile: FuzzProfile) -> dict[str, int]:
    enabled = {k: w for k, w in sorted(profile.fault_classes.items()) if w > 0}
    if not profile.swarm or not enabled:
        return enabled
    chosen = {k: w for k, w in enabled.items() if src.chance(50)}
    return chosen or {src.pick(sorted(enabled)): 1}


def _finish(generation: Generation, seed: int, profile: FuzzProfile, cluster: dict[str, Any],
            producers: dict[str, Any], actions: list[dict[str, Any]],
            origin: dict[str, Any]) -> Schedule:
    return Schedule.from_dict(_skeleton(generation, seed, profile, cluster, producers, actions, origin))


def builder_for(profile: FuzzProfile, schedule: Mapping[str, Any], classes: dict[str, int]) -> _Builder:
    """The generator's action builder for an existing schedule (a schedule dict: its brokers,
    producers and consumers) with fault classes ``classes``: what the guided engine inserts
    with."""
    return _Builder(profile, list(schedule["cluster"].get("brokers", [1, 2, 3])),
                    sorted(schedule["producers"]), sorted(schedule["consumers"]), classes)


def generate_schedule(seed: int, generation: Generation | str | int,
                      profile: FuzzProfile | None = None) -> Schedule:
    """A random schedule of ``profile.actions`` actions for ``seed`` (swarm testing on)."""
    profile = profile or FuzzProfile()
    generation = Generation.parse(generation)
    src = RandomSource(seed)
    cluster, producers = _configure(src, profile)
    _configure_transactions(src, profile, cluster, producers)
    classes = _swarm(src, profile)
    builder = _Builder(profile, list(cluster.get("brokers", [1, 2, 3])), sorted(producers),
                       sorted(_consumers(profile)), classes)
    actions = [a for a in (builder.action(src) for _ in range(profile.actions)) if a is not None]
    return _finish(generation, seed, profile, cluster, producers, actions,
                   {"engine": "random", "seed": seed, "fault_classes": sorted(classes)})


def decode_schedule(data: bytes, generation: Generation | str | int,
                    profile: FuzzProfile | None = None, max_actions: int = 200) -> Schedule:
    """A schedule from fuzzer bytes: a :data:`HEADER_BYTES`-byte header (run seed, configuration
    and swarm choices), then one :data:`RECORD_BYTES`-byte record per action (at most
    ``max_actions``)."""
    profile = profile or FuzzProfile()
    generation = Generation.parse(generation)
    src = ByteSource(data)
    header = src.record(HEADER_BYTES)
    seed = header.below(32768) * 65536 + header.below(65536)
    cluster, producers = _configure(header, profile)
    _configure_transactions(header, profile, cluster, producers)
    classes = _swarm(header, profile)
    builder = _Builder(profile, list(cluster.get("brokers", [1, 2, 3])), sorted(producers),
                       sorted(_consumers(profile)), classes)
    actions: list[dict[str, Any]] = []
    while src.remaining() > 0 and len(actions) < max_actions:
        action = builder.action(src.record(RECORD_BYTES))
        if action is not None:
            actions.append(action)
    return _finish(generation, seed, profile, cluster, producers, actions,
                   {"engine": "bytes", "fault_classes": sorted(classes)})


def encode_random_schedule(seed: int, profile: FuzzProfile | None = None) -> bytes:
    """The fuzzer bytes that :func:`decode_schedule` turns into the schedule
    ``generate_schedule(seed, ...)`` makes (same run seed, configuration and actions; only the
    ``origin`` differs): the random engine's choices, recorded. The atheris engine starts its
    corpus with these, so its first runs are the random engine's (``epochlab.fuzz.harness``)."""
    profile = profile or FuzzProfile()
    if not 0 <= seed < 2**31:
        raise ValueError(f"seed {seed} is outside 0..2^31-1")
    rec = _Recorder(RandomSource(seed))
    rec.out += (seed >> 16).to_bytes(2, "big") + (seed & 0xFFFF).to_bytes(2, "big")
    cluster, producers = _configure(rec, profile)
    _configure_transactions(rec, profile, cluster, producers)
    classes = _swarm(rec, profile)
    parts = [rec.cut(HEADER_BYTES, "the header")]
    builder = _Builder(profile, list(cluster.get("brokers", [1, 2, 3])), sorted(producers),
                       sorted(_consumers(profile)), classes)
    for i in range(profile.actions):
        builder.action(rec)
        parts.append(rec.cut(RECORD_BYTES, f"action {i}"))
    return b"".join(parts)
