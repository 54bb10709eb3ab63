"""Differential testing of the model against Kafka's own classes.

The same operation sequence goes to Kafka's class (through JPype, :mod:`epochlab.kafka.oracle`),
to the Rust core and to the pure-Python twin; after every operation the result and every
observable are compared. A disagreement is shrunk (delta debugging over the sequence, replayed
on fresh instances) to a minimal sequence that still shows it.

Component ``leader-epoch-cache``: Kafka's ``LeaderEpochFileCache`` with its
``LeaderEpochCheckpointFile`` against ``epochlab.LeaderEpochCache`` and
``epochlab.reference.LeaderEpochCache``. Operations: ``assign``, ``end_offset_for`` (epochs
below, between, at and above the known ones, and UNDEFINED), ``truncate_from_end``,
``truncate_from_start``, ``epoch_for_offset``, and ``reload``: Kafka flushes its checkpoint file
and reopens the cache from it, and the model reads that same file with its own checkpoint parser.
Observables after every operation: the operation's result and the full list of entries.

Component ``replica-log``: Kafka's ``UnifiedLog`` on a real directory against
``epochlab.ReplicaLog`` (Rust and twin). Operations: ``append_as_leader`` (plain and idempotent
batches, duplicates, sequence gaps, new producer epochs), ``append_as_follower`` (at the log end
offset, or below it: refused), ``truncate_to``, ``truncate_fully_and_start_at``,
``update_high_watermark``, ``end_offset_for_epoch``, and ``reopen`` (close and open again, after
a clean or an unclean shutdown: Kafka then recovers the segments). Observables after every
operation: the result (offsets or Kafka's error name), log start and end offsets, HW and the
epoch cache. Batches carry non-decreasing epochs, as brokers write them. Deliberate
simplification, not generated: Kafka accepts a follower batch above the
log end offset (offset gaps of compacted topics, ``UnifiedLog.append`` only refuses offsets below
it); the model has no compaction and refuses it.

Operations are generated near the current state (epochs and offsets around the cached ones) so
that the boundary cases dominate; a seed fixes the sequence.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import epochlab
import epochlab.reference
from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION

__all__ = ["COMPONENTS", "ComponentReport", "Op", "generate_log_ops", "generate_ops", "run_component",
           "run_ops", "shrink_ops"]

COMPONENTS = ("leader-epoch-cache", "replica-log")

Op = tuple[Any, ...]  # ("assign", epoch, offset), ("end_offset_for", epoch|None, leo), ...


@dataclass
class ComponentReport:
    """Operations run on one component and the first disagreement, if any."""

    name: str
    ops: int = 0
    mismatches: int = 0
    seconds: float = 0.0
    first: dict[str, Any] | None = None
    minimal: list[Op] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"ops": self.ops, "mismatches": self.mismatches, "seconds": round(self.seconds, 3),
                "ops_per_second": round(self.ops / self.seconds) if self.seconds else None,
                "first": self.first, "minimal": [list(op) for op in self.minimal]}


def generate_ops(rng: random.Random, n: int) -> list[Op]:
    """``n`` epoch-cache operations; the state each refers to is tracked loosely (a guess of
    the latest epoch and offset) so that most operations hit existing entries or their edges."""
    ops: list[Op] = []
    epoch, offset = 0, 0
    for _ in range(n):
        k = rng.randrange(100)
        e = max(0, epoch + rng.choice((-2, -1, 0, 0, 1, 1, 2, 5)))
        o = max(0, offset + rng.choice((-7, -3, -1, 0, 0, 1, 2, 4, 9)))
        if k < 35:
            ops.append(("assign", e, o))
            epoch, offset = max(epoch, e), max(offset, o)
        elif k < 60:
            requested = None if rng.randrange(15) == 0 else (-1 if rng.randrange(15) == 0 else e)
            ops.append(("end_offset_for", requested, offset + rng.choice((0, 0, 1, 5))))
        elif k < 70:
            ops.append(("truncate_from_end", o))
            offset = min(offset, o)
        elif k < 77:
            ops.append(("truncate_from_start", o))
        elif k < 92:
            ops.append(("epoch_for_offset", o))
        elif k < 96:
            ops.append(("reload",))
        else:
            ops.append(("clear",))
            epoch, offset = 0, 0
    return ops


class _Model:
    """The Rust core or the twin behind the same operations as the Kafka wrapper."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self.cache = module.LeaderEpochCache()

    def apply(self, op: Op, kafka_checkpoint: Path) -> Any:
        name, *args = op
        if name == "reload":
            self.cache = self.module.LeaderEpochCache.read_checkpoint(str(kafka_checkpoint))
            return None
        if name == "clear":
            self.cache.clear()
            return None
        result = getattr(self.cache, name)(*args)
        return None if name == "assign" else result  # Kafka's assign answers nothing

    def entries(self) -> list[tuple[int, int]]:
        return [tuple(e) for e in self.cache.entries()]  # type: ignore[misc]


def _apply_kafka(kafka: Any, op: Op) -> Any:
    name, *args = op
    if name == "reload":
        kafka.reload()
        return None
    if name == "clear":
        kafka.clear()
        return None
    result = getattr(kafka, name)(*args)
    return None if name == "assign" else result


def run_ops(ops: Sequence[Op], version: str = DEFAULT_KAFKA_VERSION, directory: Path | None = None,
            stop_at_first: bool = True, component: str = "leader-epoch-cache"
            ) -> tuple[int, int, dict[str, Any] | None]:
    """Apply ``ops`` to fresh instances of ``component``; returns (ops applied, mismatches,
    first mismatch)."""
    from epochlab.kafka.oracle import KafkaLeaderEpochCache, KafkaUnifiedLog

    kafka: Any
    models: dict[str, Any]
    if component == "replica-log":
        kafka = KafkaUnifiedLog(directory, version)
        models = {"rust": _LogModel(epochlab), "reference": _LogModel(epochlab.reference)}
        kafka_side: Callable[[Op], tuple[Any, Any]] = lambda op: (_apply_kafka_log(kafka, op), _log_view(kafka))
        model_side: Callable[[Any, Op], tuple[Any, Any]] = lambda m, op: (m.apply(op), _log_view(m))
    else:
        kafka = KafkaLeaderEpochCache(directory, version)
        models = {"rust": _Model(epochlab), "reference": _Model(epochlab.reference)}
        kafka_side = lambda op: (_apply_kafka(kafka, op), kafka.entries())
        model_side = lambda m, op: (m.apply(op, kafka.path), m.entries())
    mismatches, first, applied = 0, None, 0
    try:
        for i, op in enumerate(ops):
            if component == "replica-log" and not _brokers_would_write(kafka, op):
                continue  # outside what a broker writes (module doc); shrinking can produce it
            result, view = kafka_side(op)
            observed = {"kafka": (_plain(result), view)}
            for label, model in models.items():
                result, view = model_side(model, op)
                observed[label] = (_plain(result), view)
            applied = i + 1
            if observed["rust"] != observed["kafka"] or observed["reference"] != observed["kafka"]:
                mismatches += 1
                if first is None:
                    first = {"index": i, "op": list(op),
                             "kafka": _describe(observed["kafka"]),
                             "rust": _describe(observed["rust"]),
                             "reference": _describe(observed["reference"])}
                if stop_at_first:
                    break
    finally:
        kafka.close()
    return applied, mismatches, first


def _plain(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _describe(observed: tuple[Any, Any]) -> dict[str, Any]:
    result, view = observed
    return {"result": list(result) if isinstance(result, tuple) else result,
            "state": repr(view)}


def generate_log_ops(rng: random.Random, n: int) -> list[Op]:
    """``n`` replica-log operations around a loosely tracked state: the log end offset, the
    latest epoch, and per producer id its epoch and next sequence."""
    ops: list[Op] = []
    leo, epoch = 0, 0
    producers = {7: [0, 0], 8: [0, 0]}
    for _ in range(n):
        k = rng.randrange(100)
        values = tuple(rng.randrange(1000) for _ in range(rng.choice((1, 1, 2, 3))))
        # Batches carry non-decreasing epochs, as a broker writes them: a leader appends in its
        # own epoch, which only grows, and a follower copies the leader's batches after it
        # truncated away what diverged. (Kafka's UnifiedLog accepts a lower epoch too, and its
        # unclean-shutdown recovery then keeps only epochs above the latest: LogSegment.recover.)
        e = epoch + rng.choice((0, 0, 0, 1))
        if k < 45:
            producer = None
            if rng.randrange(2):
                pid = rng.choice((7, 8))
                pe, seq = producers[pid]
                kind = rng.randrange(10)
                if kind == 0:
                    pe, seq = pe + 1, 0                      # a new producer epoch
                elif kind == 1:
                    seq = max(0, seq - len(values))          # a retry (maybe a duplicate)
                elif kind == 2:
                    seq += rng.choice((1, 2))                # a gap
                producer = (pid, pe, seq)
                if kind != 1:
                    producers[pid] = [max(pe, producers[pid][0]), seq + len(values)]
            ops.append(("append_as_leader", values, e, producer))
            leo += len(values)
            epoch = max(epoch, e)
        elif k < 60:
            base = leo if rng.randrange(8) else max(0, leo - rng.choice((1, 2)))
            ops.append(("append_as_follower", base, e, values))
            if base == leo:
                leo += len(values)
                epoch = max(epoch, e)
        elif k < 70:
            target = max(0, leo - rng.choice((0, 1, 2, 3, 5)))
            ops.append(("truncate_to", target))
            leo = min(leo, target)
            epoch = max(0, epoch - rng.choice((0, 1)))  # the truncated tail may have held it
        elif k < 73:
            start = leo + rng.choice((0, 3))
            ops.append(("truncate_fully_and_start_at", start))
            leo = start
        elif k < 82:
            ops.append(("update_high_watermark", max(0, leo - rng.choice((0, 1, 3)))))
        elif k < 95:
            ops.append(("end_offset_for_epoch", max(0, epoch + rng.choice((-2, -1, 0, 1)))))
        else:
            ops.append(("reopen", bool(rng.randrange(2))))
    return ops


_MODEL_ERRORS = {
    "OutOfOrderSequenceError": "OUT_OF_ORDER_SEQUENCE_NUMBER",
    "InvalidProducerEpochError": "INVALID_PRODUCER_EPOCH",
    "UnexpectedAppendOffsetError": "UNEXPECTED_APPEND_OFFSET",
    "InvalidTxnStateError": "INVALID_TXN_STATE",
}


class _LogModel:
    """``ReplicaLog`` of the Rust core or the twin behind the replica-log operations."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self.log = module.ReplicaLog()

    def apply(self, op: Op) -> Any:
        from epochlab.errors import EpochlabError

        name, *args = op
        log = self.log
        try:
            if name == "append_as_leader":
                values, epoch, producer = args
                fields = {} if producer is None else dict(zip(("producer_id", "producer_epoch", "base_sequence"), producer))
                info = log.append_as_leader(list(values), epoch, **fields)
                return (info.base_offset, info.last_offset)
            if name == "append_as_follower":
                base, epoch, values = args
                log.append_as_follower(self.module.RecordBatch(base, epoch, list(values)))
                return None
            if name == "end_offset_for_epoch":
                return log.end_offset_for_epoch(args[0])
            if name == "reopen":  # what the simulator's broker restart does (Replica.crash)
                from epochlab.sim.replica import reload_log

                log.flush()
                reload_log(log)
                log.rebuild_producer_state()
                return None
            return getattr(log, name)(*args)
        except EpochlabError as exc:
            return _MODEL_ERRORS.get(type(exc).__name__, type(exc).__name__)


def _apply_kafka_log(kafka: Any, op: Op) -> Any:
    name, *args = op
    if name == "append_as_leader":
        values, epoch, producer = args
        return kafka.append_as_leader(values, epoch, producer)
    if name == "append_as_follower":
        base, epoch, values = args
        return kafka.append_as_follower(base, epoch, values, None)
    if name == "reopen":
        kafka.reopen(clean=args[0])
        return None
    return getattr(kafka, name)(*args)


def _brokers_would_write(kafka: Any, op: Op) -> bool:
    """Whether a broker could issue ``op`` now: a follower batch above the log end offset (an
    offset gap of a compacted topic) and a batch of an epoch below the cache's latest are not."""
    latest = max((e for e, _ in kafka.epoch_entries()), default=-1)
    if op[0] == "append_as_follower":
        return op[1] <= kafka.log_end_offset() and op[2] >= latest
    if op[0] == "append_as_leader":
        return op[2] >= latest
    return True


def _log_view(log: Any) -> tuple[int, int, int, tuple[tuple[int, int], ...]]:
    if hasattr(log, "log"):  # a model
        m = log.log
        return (m.log_start_offset, m.log_end_offset, m.high_watermark, tuple(tuple(e) for e in m.epoch_entries()))
    return (log.log_start_offset(), log.log_end_offset(), log.high_watermark(), tuple(log.epoch_entries()))


def shrink_ops(ops: list[Op], fails: Callable[[list[Op]], bool]) -> list[Op]:
    """Delta debugging (ddmin) over the sequence: the shortest sub-sequence found that still
    ``fails``."""
    n = 2
    while len(ops) >= 2:
        chunk = max(1, len(ops) // n)
        reduced = False
        for start in range(0, len(ops), chunk):
            candidate = ops[:start] + ops[start + chunk:]
            if candidate and fails(candidate):
                ops, n, reduced = candidate, max(n - 1, 2), True
                break
        if not reduced:
            if chunk == 1:
                break
            n = min(len(ops), n * 2)
    return ops


def run_component(name: str, ops: int, seed: int, version: str = DEFAULT_KAFKA_VERSION,
                  keep_data: Path | None = None, chunk: int = 2000,
                  progress: Callable[[int], None] | None = None) -> ComponentReport:
    """Run ``ops`` generated operations (in sequences of ``chunk``, each on fresh instances)
    and shrink the first disagreement."""
    if name not in COMPONENTS:
        from epochlab.errors import ConfigError

        raise ConfigError(f"unknown component {name!r}", where="--component", field="component",
                          expected=" | ".join(COMPONENTS), got=name)
    report = ComponentReport(name)
    rng = random.Random(seed)
    start = time.monotonic()
    sequence = 0
    while report.ops < ops:
        generate = generate_log_ops if name == "replica-log" else generate_ops
        batch = generate(rng, min(chunk, ops - report.ops))
        directory = None if keep_data is None else keep_data / name / f"sequence-{sequence:05d}"
        applied, mismatches, first = run_ops(batch, version, directory, stop_at_first=True, component=name)
        report.ops += applied
        report.mismatches += mismatches
        sequence += 1
        if first is not None and report.first is None:
            report.first = first
            failing = batch[: first["index"] + 1]
            report.minimal = shrink_ops(failing, lambda candidate: run_ops(
                candidate, version, component=name)[1] > 0)
            break
        if progress is not None:
            progress(report.ops)
    report.seconds = time.monotonic() - start
    return report
