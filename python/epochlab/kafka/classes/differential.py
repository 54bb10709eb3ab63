"""Differential testing of the model against Kafka's own classes.

The same operation sequence goes to Kafka's class (through JPype, :mod:`epochlab.kafka.classes.oracle`),
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

Component ``producer-state-manager``: Kafka's ``ProducerStateManager`` alone, on a real
directory, against ``epochlab.ProducerStateManager`` (Rust and twin). Each batch goes through
the calls ``UnifiedLog`` makes for it (``lastEntry``/``findDuplicateBatch`` for a client batch,
``prepareUpdate``, ``ProducerAppendInfo.append``, ``update``, ``updateMapEndOffset``); the model
answers with ``check_leader_append`` and ``update``. Operations: client and replicated batches,
replicated markers, batches without producer id, ``take_snapshot``. Observables: the result,
the map end offset and every producer entry.

Component ``producer-state``: the ``ProducerStateManager`` of Kafka's ``UnifiedLog`` (its
snapshot files in the log directory; every ``prepareUpdate``/``ProducerAppendInfo.append``/
``update``/``updateMapEndOffset``/``takeSnapshot``/``truncateAndReload`` is Kafka's own call
from ``UnifiedLog``) against the producer state of ``epochlab.ReplicaLog`` (Rust and twin).
Operations: idempotent leader appends (origin CLIENT: in order, retries of any of the last six
batches, gaps, new producer epochs at and off sequence 0, fenced epochs), follower appends with
producer fields (origin REPLICATION), plain batches, ``take_snapshot``
(``ProducerStateManager.takeSnapshot``; ``ReplicaLog.take_producer_snapshot`` in the model),
``truncate_to`` (producer state reloaded from the newest snapshot at or below the target),
``reopen`` (Kafka's close, which takes a snapshot, and open; ``take_producer_snapshot`` and
``ReplicaLog.reload`` in the model) and HW updates. Observables: the
replica-log ones plus, per producer id, its epoch, its cached batches ``(first_seq, last_seq,
first_offset, last_offset)`` and its coordinator epoch (``activeProducers``).

Component ``transactions``: the same log with transactional batches and COMMIT/ABORT markers,
written by the leader for the coordinator (``appendAsLeader`` with origin COORDINATOR,
transaction versions 0 and 2) or replicated to a follower. Observables: the producer-state ones
plus the first unstable offset and the LSO as Kafka answers them once its bookkeeping caught up
with its HW (``KafkaUnifiedLog.settled_first_unstable_offset``: after a truncation above the HW
Kafka's raw values lag until the next HW update, which the model, deliberately, does not), the
aborted transactions of the segments' transaction indexes (``collectAbortedTransactions`` from
the log start) and the first undecided offset. The HW also goes back: a transaction whose
marker the HW passed stays forgotten, in Kafka and in the model.

Every difference is a mismatch: nothing is let pass (docs/kafka-oracle.md lists the
disagreements found on the way and how each was fixed).

Operations are generated near the current state (epochs and offsets around the cached ones) so
that the boundary cases dominate; a seed fixes the sequence. Kafka's view after each operation
also decides whether the next one is one a broker would write, without asking Kafka again.
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

__all__ = ["COMPONENTS", "ComponentReport", "Op", "generate_log_ops", "generate_manager_ops", "generate_ops",
           "generate_producer_ops", "generate_txn_ops", "check_keep_data", "run_component", "run_ops", "shrink_ops"]

COMPONENTS = ("leader-epoch-cache", "replica-log", "producer-state-manager", "producer-state", "transactions")

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
    """The Rust core or the twin behind the same operations as the Kafka wrapper; ``rules``
    maps an operation to the cache method of an older generation's rule (``assign`` ->
    ``assign_kip101``, ``epochlab.kafka.classes.legacy.model_rules``)."""

    def __init__(self, module: Any, rules: dict[str, str] | None = None) -> None:
        self.module = module
        self.rules = rules or {}
        self.cache = module.LeaderEpochCache()

    def apply(self, op: Op, kafka_checkpoint: Path) -> Any:
        name, *args = op
        if name == "reload":
            self.cache = self.module.LeaderEpochCache.read_checkpoint(str(kafka_checkpoint))
            return None
        if name == "clear":
            self.cache.clear()
            return None
        result = getattr(self.cache, self.rules.get(name, name))(*args)
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


def _next_sequence(rows: tuple[Any, ...], producer_id: int, producer_epoch: int) -> int:
    """The sequence a producer continues with, by Kafka's view of its entry: its last
    sequence + 1 (wrapping) in the same epoch, else 0."""
    for pid, epoch, batches, _ in rows:
        if pid == producer_id:
            return (batches[-1][1] + 1) % _SEQUENCES if epoch == producer_epoch and batches else 0
    return 0


def _resolve(op: Op, view: tuple[Any, ...] | None, sent: dict[int, list[tuple[int, int]]]) -> Op:
    """``op`` with its relative parts made concrete from Kafka's current view, the same for
    every side. A follower base offset ``None`` is the log end offset, ``-k`` is ``k`` below
    it. A producer sequence ``None`` is the producer's next one, ``-g`` leaves a gap of ``g``,
    ``("retry", j)`` resends the ``j``-th last batch sent for that producer id in this
    sequence (same sequence, same record count; the next sequence when there is none).
    Generators use these because they cannot know which batches were refused or truncated;
    shrinking replays the relative forms. ``sent`` collects what was sent."""
    if view is None:
        return op
    name = op[0]
    if name in ("append_as_follower", "marker_as_follower") and (op[1] is None or op[1] < 0):
        op = (name, max(0, view[1] + (op[1] or 0))) + op[2:]
    rows = view[4] if len(view) > 4 else view[1] if len(view) == 2 else None
    if rows is None:
        return op
    if name in ("append_as_leader", "append_as_follower"):
        at, values_at = (3, 1) if name == "append_as_leader" else (4, 3)
        producer = op[at] if len(op) > at else None
        if producer is None:
            return op
        pid, pepoch, seq = producer
        values = op[values_at]
        seq, values = _concrete_sequence(rows, pid, pepoch, seq, values, sent)
        op = op[:values_at] + (values,) + op[values_at + 1:at] + ((pid, pepoch, seq),) + op[at + 1:]
    elif name == "append":
        seq, values = _concrete_sequence(rows, op[1], op[2], op[3], tuple(range(op[4])), sent)
        op = op[:3] + (seq, len(values)) + op[5:]
    return op


def _concrete_sequence(rows: tuple[Any, ...], pid: int, pepoch: int, seq: Any, values: tuple[int, ...],
                       sent: dict[int, list[tuple[int, int]]]) -> tuple[int, tuple[int, ...]]:
    history = sent.setdefault(pid, [])
    if isinstance(seq, (tuple, list)):  # ("retry", j)
        if len(history) >= seq[1]:
            seq, count = history[-seq[1]]
            values = (values * count)[:count] if values else (0,) * count
        else:
            seq = None
    if seq is None or seq < 0:
        seq = (_next_sequence(rows, pid, pepoch) - (seq or 0)) % _SEQUENCES
    history.append((seq, len(values)))
    del history[:-8]
    return seq, values


def run_ops(ops: Sequence[Op], version: str = DEFAULT_KAFKA_VERSION, directory: Path | None = None,
            stop_at_first: bool = True,
            component: str = "leader-epoch-cache") -> tuple[int, int, dict[str, Any] | None]:
    """Apply ``ops`` to fresh instances of ``component``; returns (ops applied, mismatches,
    first mismatch)."""
    from epochlab.kafka.classes.oracle import KafkaLeaderEpochCache, KafkaProducerStateManager, KafkaUnifiedLog

    kafka: Any
    models: dict[str, Any]
    if component in _LOG_VIEWS:
        view_of = _LOG_VIEWS[component]
        kafka = KafkaUnifiedLog(directory, version)
        models = {"rust": _LogModel(epochlab), "reference": _LogModel(epochlab.reference)}
        kafka_side: Callable[[Op], tuple[Any, Any]] = lambda op: (_apply_kafka_log(kafka, op), view_of(kafka))
        model_side: Callable[[Any, Op], tuple[Any, Any]] = lambda m, op: (m.apply(op), view_of(m))
    elif component == "producer-state-manager":
        kafka = KafkaProducerStateManager(directory, version)
        models = {"rust": _ManagerModel(epochlab), "reference": _ManagerModel(epochlab.reference)}
        kafka_side = lambda op: (_apply_kafka_manager(kafka, op), _manager_view(kafka))
        model_side = lambda m, op: (m.apply(op), _manager_view(m))
    else:
        kafka = KafkaLeaderEpochCache(directory, version)
        models = {"rust": _Model(epochlab), "reference": _Model(epochlab.reference)}
        kafka_side = lambda op: (_apply_kafka(kafka, op), kafka.entries())
        model_side = lambda m, op: (m.apply(op, kafka.path), m.entries())
    mismatches, first, applied = 0, None, 0
    try:
        # Kafka's view after the previous operation (the state does not change in between):
        # it decides what a broker would write without asking Kafka again.
        current = view_of(kafka) if component in _LOG_VIEWS else None
        if component == "producer-state-manager":
            current = _manager_view(kafka)
        sent: dict[int, list[tuple[int, int]]] = {}
        for i, op in enumerate(ops):
            op = _resolve(op, current, sent)
            if current is not None and component in _LOG_VIEWS and not _brokers_would_write(current, op):
                continue  # outside what a broker writes (module doc); shrinking can produce it
            result, view = kafka_side(op)
            if current is not None:
                current = view
            observed = {"kafka": (_plain(result), view)}
            for label, model in models.items():
                observed[label] = _observe(model_side, model, op)
            applied = i + 1
            if not observed["kafka"] == observed["rust"] == observed["reference"]:
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


def _observe(model_side: Callable[[Any, Op], tuple[Any, Any]], model: Any, op: Op) -> tuple[Any, Any]:
    result, view = model_side(model, op)
    return (_plain(result), view)


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


def _next_epoch(rng: random.Random, epoch: int) -> int:
    return epoch + rng.choice((0, 0, 0, 0, 0, 1))


#: Sequence numbers are non-negative Int32s; the next after Int32.MAX is 0.
_SEQUENCES = 2**31


def _client_fault(rng: random.Random, pe: int, seq: Any) -> tuple[int, Any]:
    """What a client batch does wrong, if anything (producer epoch, sequence): a retry of an
    earlier batch (``("retry", k)``), a gap (a negative sequence relative to the next one), a
    new producer epoch at sequence 0 or not, a fenced (older) epoch; else ``(pe, seq)``."""
    kind = rng.randrange(20)
    if kind < 4:
        return pe, ("retry", rng.choice((1, 1, 2, 3, 5, 6)))
    if kind == 4:
        return pe, -rng.choice((1, 2))
    if kind == 5:
        return pe + 1, 0
    if kind == 6:
        return pe + 1, rng.choice((1, 3))
    if kind == 7 and pe > 0:
        return pe - 1, seq
    return pe, seq


def generate_producer_ops(rng: random.Random, n: int) -> list[Op]:
    """``n`` producer-state operations on a log: idempotent leader appends of producers 7, 8
    and 9 (in order, retries of any of the last six batches sent, gaps, new producer epochs
    at and off sequence 0, fenced older epochs) and of producer 10, first seen near the
    largest sequence (an unknown producer id takes any) so that its sequences wrap past
    Int32.MAX to 0, follower appends with producer fields at the log end offset or below it
    (the next sequence, any sequence, a replicated older producer epoch: after a snapshot
    reload the replay's epochs are merged into the snapshot's entry as Kafka merges them),
    plain batches, ``take_snapshot``,
    ``truncate_to``, ``reopen`` and HW updates. Offsets and sequences are relative where
    only Kafka's state knows them (:func:`_resolve`); producer epochs are tracked loosely."""
    ops: list[Op] = []
    leo, epoch = 0, 0
    epochs = {7: 0, 8: 0, 9: 0, 10: 0}
    first_of_10 = True
    for _ in range(n):
        k = rng.randrange(100)
        values = tuple(rng.randrange(1000) for _ in range(rng.choice((1, 1, 2, 3))))
        e = _next_epoch(rng, epoch)
        pid = rng.choice((7, 7, 7, 8, 8, 9, 10))
        pe = epochs[pid]
        seq: Any = None
        if pid == 10 and first_of_10:
            seq, first_of_10 = _SEQUENCES - rng.choice((1, 2, 4)), False
        if k < 50:
            pe, seq = _client_fault(rng, pe, seq)
            ops.append(("append_as_leader", values, e, (pid, pe, seq)))
            epochs[pid] = max(pe, epochs[pid])
            leo += len(values)
        elif k < 62:
            base = None if rng.randrange(10) else -1
            kind = rng.randrange(10)
            if kind < 3 and pe > 0:
                pe, seq = pe - 1, rng.randrange(40)                       # a replicated older epoch
            elif kind == 1:
                seq = rng.randrange(40)                                   # any sequence
            ops.append(("append_as_follower", base, e, values, (pid, pe, seq)))
            epochs[pid] = pe
            leo += len(values)
        elif k < 68:
            ops.append(("append_as_leader", values, e, None))
            leo += len(values)
        elif k < 76:
            ops.append(("take_snapshot",))
        elif k < 86:
            target = max(0, leo - rng.choice((0, 1, 2, 3, 5, 8)))
            ops.append(("truncate_to", target))
            leo = min(leo, target)
        elif k < 91:
            ops.append(("reopen", bool(rng.randrange(2))))
        else:
            ops.append(("update_high_watermark", max(0, leo - rng.choice((0, 1, 3)))))
        epoch = max(epoch, e)
    return ops


def generate_txn_ops(rng: random.Random, n: int) -> list[Op]:
    """``n`` transaction operations on a log: transactional leader appends of producers 7, 8
    and 9 (their sequences in order, sometimes a gap), non-transactional batches inside a
    transaction, COMMIT/ABORT markers written by the leader for the coordinator (transaction
    versions 0 and 2; current, bumped and older producer epochs; current, newer and older
    coordinator epochs), markers and transactional batches replicated to a follower at its log
    end offset, HW updates (mostly to the log end, sometimes back), ``take_snapshot``,
    ``truncate_to``, ``reopen`` and plain batches."""
    ops: list[Op] = []
    leo, epoch = 0, 0
    producers = {pid: [0, 0] for pid in (7, 8, 9)}  # producer epoch, coordinator epoch
    for _ in range(n):
        k = rng.randrange(100)
        values = tuple(rng.randrange(1000) for _ in range(rng.choice((1, 1, 2))))
        e = _next_epoch(rng, epoch)
        pid = rng.choice((7, 8, 9))
        pe, ce = producers[pid]
        if k < 35:
            transactional = rng.randrange(8) != 0
            seq = -1 if rng.randrange(12) == 0 else None                 # a gap, or in order
            ops.append(("append_as_leader", values, e, (pid, pe, seq), transactional))
            leo += len(values)
        elif k < 50:
            version = rng.choice((0, 2))
            marker_epoch = pe + 1 if version == 2 and rng.randrange(5) else pe - rng.choice((0, 0, 0, 1))
            coordinator = max(0, ce + rng.choice((0, 0, 0, 0, 1, -1)))
            ops.append(("end_txn_marker", pid, max(0, marker_epoch), coordinator, rng.randrange(3) != 0, e, version))
            producers[pid] = [max(pe, marker_epoch), max(ce, coordinator)]
            leo += 1
        elif k < 55:
            ops.append(("marker_as_follower", None, e, pid, pe, ce, rng.randrange(2) == 0))
            leo += 1
        elif k < 60:
            ops.append(("append_as_follower", None, e, values, (pid, pe, None), True))
            leo += len(values)
        elif k < 66:
            ops.append(("append_as_leader", values, e, None))
            leo += len(values)
        elif k < 82:
            # Mostly to the log end; sometimes back (a follower taking a new leader's lower HW):
            # a transaction the HW passed stays forgotten (onHighWatermarkUpdated).
            back = 0 if rng.randrange(4) else rng.choice((1, 2, 4, 8))
            ops.append(("update_high_watermark", max(0, leo - back)))
        elif k < 86:
            ops.append(("take_snapshot",))
        elif k < 94:
            target = max(0, leo - rng.choice((0, 1, 2, 3, 5)))
            ops.append(("truncate_to", target))
            leo = min(leo, target)
        else:
            ops.append(("reopen", bool(rng.randrange(2))))
        epoch = max(epoch, e)
    return ops


def generate_manager_ops(rng: random.Random, n: int) -> list[Op]:
    """``n`` operations on a bare producer-state manager: client batches of producers 7, 8 and
    10 (in order, retries of the last six sent, gaps, new producer epochs at and off sequence
    0, fenced epochs, producer 10 wrapping past Int32.MAX), replicated batches (any epoch, any
    sequence), replicated COMMIT/ABORT markers (current, older and newer producer and
    coordinator epochs), batches without producer id and ``take_snapshot``."""
    ops: list[Op] = []
    producers = {7: [0, 0], 8: [0, 0], 10: [0, 0]}  # producer epoch, coordinator epoch
    first_of_10 = True
    for _ in range(n):
        k = rng.randrange(100)
        count = rng.choice((1, 1, 2, 3))
        pid = rng.choice((7, 7, 8, 10))
        pe, ce = producers[pid]
        seq: Any = None
        if pid == 10 and first_of_10:
            seq, first_of_10 = _SEQUENCES - rng.choice((1, 2, 4)), False
        if k < 60:
            pe, seq = _client_fault(rng, pe, seq)
            ops.append(("append", pid, pe, seq, count, "client"))
            producers[pid][0] = max(pe, producers[pid][0])
        elif k < 75:
            if rng.randrange(5) == 0:
                pe = max(0, pe + rng.choice((-1, 1)))
            if rng.randrange(5) == 0:
                seq = rng.randrange(12)
            ops.append(("append", pid, pe, seq, count, "replication"))
            producers[pid][0] = pe
        elif k < 87:
            me = max(0, pe + rng.choice((0, 0, 0, 1, -1)))
            mc = max(0, ce + rng.choice((0, 0, 1, -1)))
            ops.append(("marker", pid, me, mc, rng.randrange(2) == 0))
            producers[pid] = [me, mc]
        elif k < 96:
            ops.append(("skip", count))
        else:
            ops.append(("take_snapshot",))
    return ops


class _ManagerModel:
    """``ProducerStateManager`` of the Rust core or the twin, with batches placed at its own
    end offset as the Kafka wrapper places them at the map end offset."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self.state = module.ProducerStateManager()
        self.end = 0

    def apply(self, op: Op) -> Any:
        from epochlab.errors import EpochlabError

        name, *args = op
        if name == "skip":
            self.end += args[0]
            return None
        if name == "take_snapshot":
            return None  # no snapshot files in the model
        if name == "marker":
            pid, pepoch, coordinator_epoch, commit = args
            batch = self.module.RecordBatch(self.end, 0, [_marker_value(coordinator_epoch, commit)], producer_id=pid,
                                            producer_epoch=pepoch, base_sequence=0, is_transactional=True,
                                            is_control=True)
        else:
            pid, pepoch, seq, count, origin = args
            batch = self.module.RecordBatch(self.end, 0, list(range(count)), producer_id=pid, producer_epoch=pepoch,
                                            base_sequence=seq)
            if origin == "client":
                try:
                    duplicate = self.state.check_leader_append(batch)
                except EpochlabError as exc:
                    return _MODEL_ERRORS.get(type(exc).__name__, type(exc).__name__)
                if duplicate is not None:
                    return tuple(duplicate)
        self.state.update(batch)
        self.end = batch.last_offset + 1
        return None


def _apply_kafka_manager(kafka: Any, op: Op) -> Any:
    name, *args = op
    if name == "skip":
        kafka.skip(args[0])
        return None
    if name == "take_snapshot":
        kafka.take_snapshot()
        return None
    if name == "marker":
        return kafka.append_marker(*args)
    return kafka.append(*args)


def _manager_view(manager: Any) -> tuple[Any, ...]:
    """The end offset and every producer entry (``producer-state-manager``)."""
    if isinstance(manager, _ManagerModel):
        state = manager.state
        rows = tuple((pid, epoch, tuple(tuple(b) for b in batches), state.coordinator_epoch(pid))
                     for pid, epoch, batches in state.snapshot())
        return (manager.end, rows)
    return (manager.map_end_offset(), manager.entries())


_MODEL_ERRORS = {
    "OutOfOrderSequenceError": "OUT_OF_ORDER_SEQUENCE_NUMBER",
    "InvalidProducerEpochError": "INVALID_PRODUCER_EPOCH",
    "UnexpectedAppendOffsetError": "UNEXPECTED_APPEND_OFFSET",
    "InvalidTxnStateError": "INVALID_TXN_STATE",
    "TransactionCoordinatorFencedError": "TRANSACTION_COORDINATOR_FENCED",
}


def _marker_value(coordinator_epoch: int, commit: bool) -> int:
    """A control record's value in the model: ``coordinator_epoch << 1 | commit``."""
    return coordinator_epoch << 1 | int(commit)


class _LogModel:
    """``ReplicaLog`` of the Rust core or the twin behind the log operations of every
    log-based component (``replica-log``, ``producer-state``, ``transactions``)."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self.log = module.ReplicaLog()

    def apply(self, op: Op) -> Any:
        from epochlab.errors import EpochlabError

        name, *args = op
        log = self.log
        try:
            if name == "append_as_leader":
                values, epoch, producer, *txn = args
                fields = _producer_fields(producer)
                info = log.append_as_leader(list(values), epoch, is_transactional=bool(txn and txn[0]), **fields)
                return (info.base_offset, info.last_offset)
            if name == "append_as_follower":
                base, epoch, values, *rest = args
                producer, transactional = _follower_producer(rest)
                log.append_as_follower(self.module.RecordBatch(base, epoch, list(values),
                                                               is_transactional=transactional,
                                                               **_producer_fields(producer)))
                return None
            if name == "end_txn_marker":
                pid, pepoch, coordinator_epoch, commit, epoch, version = args
                info = log.append_end_txn_marker(pid, pepoch, coordinator_epoch, commit, epoch, version)
                return (info.base_offset, info.last_offset)
            if name == "marker_as_follower":
                base, epoch, pid, pepoch, coordinator_epoch, commit = args
                log.append_as_follower(self.module.RecordBatch(
                    base, epoch, [_marker_value(coordinator_epoch, commit)], producer_id=pid, producer_epoch=pepoch,
                    base_sequence=0, is_transactional=True, is_control=True))
                return None
            if name == "take_snapshot":
                log.take_producer_snapshot()  # ProducerStateManager.takeSnapshot
                return None
            if name == "end_offset_for_epoch":
                return log.end_offset_for_epoch(args[0])
            if name == "reopen":  # Kafka's close (flush, snapshot at the LEO) and LogLoader.load
                log.flush()
                log.take_producer_snapshot()
                log.reload(bool(args[0]))  # unclean: recovery deletes every snapshot
                return None
            return getattr(log, name)(*args)
        except EpochlabError as exc:
            return _MODEL_ERRORS.get(type(exc).__name__, type(exc).__name__)


def _producer_fields(producer: tuple[int, int, int] | None) -> dict[str, int]:
    """``(pid, epoch, sequence)`` as the model's keyword arguments."""
    return {} if producer is None else dict(zip(("producer_id", "producer_epoch", "base_sequence"), producer))


def _follower_producer(rest: list[Any]) -> tuple[Any, bool]:
    """The optional producer fields and transactional flag of an ``append_as_follower`` op."""
    return (rest[0] if rest else None), (bool(rest[1]) if len(rest) > 1 else False)


def _apply_kafka_log(kafka: Any, op: Op) -> Any:
    name, *args = op
    if name == "append_as_leader":
        values, epoch, producer, *txn = args
        return kafka.append_as_leader(values, epoch, producer, bool(txn and txn[0]))
    if name == "append_as_follower":
        base, epoch, values, *rest = args
        producer, transactional = _follower_producer(rest)
        return kafka.append_as_follower(base, epoch, values, producer, transactional)
    if name == "end_txn_marker":
        return kafka.append_end_txn_marker(*args)
    if name == "marker_as_follower":
        return kafka.append_marker_as_follower(*args)
    if name == "take_snapshot":
        kafka.take_snapshot()
        return None
    if name == "reopen":
        kafka.reopen(clean=args[0])
        return None
    return getattr(kafka, name)(*args)


def _brokers_would_write(view: tuple[Any, ...], op: Op) -> bool:
    """Whether a broker could issue ``op`` now, judged on Kafka's current view (log start,
    log end, HW, epoch entries, ...): a follower batch above the log end offset (an offset gap
    of a compacted topic) and a batch of an epoch below the cache's latest are not."""
    leo, entries = view[1], view[3]
    latest = entries[-1][0] if entries else -1
    name = op[0]
    if name == "append_as_follower" or name == "marker_as_follower":
        return op[1] <= leo and op[2] >= latest
    if name == "append_as_leader":
        return op[2] >= latest
    if name == "end_txn_marker":
        return op[5] >= latest
    return True


def _log_view(log: Any) -> tuple[Any, ...]:
    """Log start, log end, HW and the epoch cache (``replica-log``)."""
    if isinstance(log, _LogModel):
        m = log.log
        return (m.log_start_offset, m.log_end_offset, m.high_watermark, tuple(tuple(e) for e in m.epoch_entries()))
    return (log.log_start_offset(), log.log_end_offset(), log.high_watermark(), tuple(log.epoch_entries()))


def _producer_rows(log: Any) -> tuple[Any, ...]:
    """Per producer id: epoch, cached batches (first_seq, last_seq, base, last), coordinator epoch."""
    if isinstance(log, _LogModel):
        state = log.log.producer_state()
        return tuple((pid, epoch, tuple(tuple(b) for b in batches), state.coordinator_epoch(pid))
                     for pid, epoch, batches in state.snapshot())
    return log.producer_entries()


def _producer_view(log: Any) -> tuple[Any, ...]:
    """``replica-log``'s view plus every producer entry (``producer-state``)."""
    return _log_view(log) + (_producer_rows(log),)


def _txn_view(log: Any) -> tuple[Any, ...]:
    """``producer-state``'s view plus the first unstable offset, the LSO, every aborted
    transaction from the log start on, and the first unstable offset counting only
    transactions with data (Kafka's own is that; on the model's side it is recomputed from
    its ongoing and unreplicated transactions), and
    the first undecided offset (the first ongoing transaction's first offset)."""
    if isinstance(log, _LogModel):
        m = log.log
        with_data = [first for first, _ in m.ongoing_transactions()]
        with_data += [first for first, _, marker in m.unreplicated_transactions() if first != marker]
        ongoing = min((first for first, _ in m.ongoing_transactions()), default=None)
        txns = (m.first_unstable_offset, m.last_stable_offset,
                tuple(tuple(t) for t in m.aborted_transactions(m.log_start_offset, m.log_end_offset + 1)),
                min(with_data, default=None), ongoing)
    else:
        # Settled: as Kafka answers once its bookkeeping caught up with its HW (a deliberate
        # simplification, docs/kafka-oracle.md: the model keeps no stale state).
        first_unstable = log.settled_first_unstable_offset()
        txns = (first_unstable, log.settled_last_stable_offset(),
                tuple(log.aborted_transactions(log.log_start_offset(), log.log_end_offset() + 1)), first_unstable,
                log.first_undecided_offset())
    return _producer_view(log) + txns


#: Observables of each log-based component, after every operation.
_LOG_VIEWS: dict[str, Callable[[Any], tuple[Any, ...]]] = {
    "replica-log": _log_view,
    "producer-state": _producer_view,
    "transactions": _txn_view,
}

#: Operation generator of each component.
_GENERATORS: dict[str, Callable[[random.Random, int], list[Op]]] = {
    "leader-epoch-cache": generate_ops,
    "replica-log": generate_log_ops,
    "producer-state-manager": generate_manager_ops,
    "producer-state": generate_producer_ops,
    "transactions": generate_txn_ops,
}


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


def check_keep_data(keep_data: Path, components: Sequence[str]) -> None:
    """Refuse a ``--keep-data`` directory that already holds files of one of ``components``:
    each sequence must start on an empty partition directory. Kafka's classes read what they
    find there as their own state: ``ProducerStateManager``'s constructor calls
    ``loadSnapshots``, which takes every ``*.snapshot`` file ``listSnapshotFiles`` lists in the
    log directory, and ``truncateAndReload``/``removeAndDeleteSnapshot`` later delete those
    files (``Files.deleteIfExists`` on the one it tracks, ``SnapshotFile.renameToDelete``);
    ``UnifiedLog`` and ``LeaderEpochFileCache`` likewise load the segments and the checkpoint
    left there. A directory kept by an earlier run (or filled by a run still going) then gives
    mismatches the operations did not cause, or ``NoSuchFileException`` on a snapshot file
    another run already deleted. Raises :class:`~epochlab.errors.ConfigError` naming the
    directory."""
    from epochlab.errors import ConfigError

    if keep_data.exists() and not keep_data.is_dir():
        raise ConfigError(f"--keep-data {keep_data}: not a directory", where="--keep-data", field="keep_data",
                          expected="an empty or absent directory", got=str(keep_data))
    for name in components:
        kept = keep_data / name
        if kept.is_dir() and any(kept.iterdir()):
            raise ConfigError(f"--keep-data {keep_data}: {kept} already holds files of an earlier run; Kafka's "
                              f"classes would load them as their own state (ProducerStateManager.loadSnapshots, "
                              f"the log's segments, the epoch checkpoint): choose a new or empty directory",
                              where="--keep-data", field="keep_data", expected="an empty or absent directory",
                              got=str(kept))


def run_component(name: str, ops: int, seed: int, version: str = DEFAULT_KAFKA_VERSION,
                  keep_data: Path | None = None, chunk: int = 2000,
                  progress: Callable[[int], None] | None = None) -> ComponentReport:
    """Run ``ops`` generated operations (in sequences of ``chunk``, each on fresh instances)
    and shrink the first disagreement."""
    if name not in COMPONENTS:
        from epochlab.errors import ConfigError

        raise ConfigError(f"unknown component {name!r}", where="--component", field="component",
                          expected=" | ".join(COMPONENTS), got=name)
    if keep_data is not None:
        check_keep_data(keep_data, [name])
    report = ComponentReport(name)
    rng = random.Random(seed)
    start = time.monotonic()
    sequence = 0
    while report.ops < ops:
        batch = _GENERATORS[name](rng, min(chunk, ops - report.ops))
        directory = None if keep_data is None else keep_data / name / f"sequence-{sequence:05d}"
        if directory is not None and name in ("leader-epoch-cache", "producer-state-manager"):
            # the checkpoint or the producer snapshots where a broker keeps them, in its
            # partition's directory, so that `epochlab inspect DIR` reads them as Kafka's files
            directory = directory / "epochlab-0"
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
