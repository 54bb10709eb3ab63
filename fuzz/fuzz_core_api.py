"""Atheris harness for the public API of ``epochlab._core``.

The fuzzer's bytes decode into a sequence of calls. Two kinds are interleaved:

* log operations applied in lockstep to two ``epochlab._core.ReplicaLog`` objects and their
  ``epochlab.reference`` twins, with nearly valid arguments; the outcome (result, or exception
  class and key attributes) and every observable of both logs must be equal on both sides, and
  ``divergence_point`` / ``first_mismatch`` between the two logs must agree;
* calls of any public callable of ``epochlab._core`` with junk arguments (ints far outside every
  domain, ``None``, floats, text, bytes, lists, objects of the wrong class), which may only fail
  with an ``EpochlabError``, ``TypeError`` or ``OverflowError``.

Anything else (a ``PanicException``, a ``SystemError``, a disagreement) raises
:class:`HarnessFailure`, which atheris reports as a crash.

    pip install atheris
    mkdir -p fuzz/corpus/core_api
    python fuzz/fuzz_core_api.py -atheris_runs=100000 fuzz/corpus/core_api

The module imports without atheris (``tests/test_fuzz_harnesses.py`` calls
:func:`test_one_input` directly); bytes are then decoded by :class:`ByteReader`.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from typing import Any


from _atheris import instrumentation  # noqa: E402 - this folder is on sys.path

with instrumentation(__name__ == "__main__"):
    import epochlab._core as core
    import epochlab.reference as reference
    from epochlab.errors import EpochlabError

IMPLS = (core, reference)
ALLOWED = (EpochlabError, TypeError, OverflowError)
MAX_STEPS = 48
ERROR_KEYS = (
    "argument", "value", "offset", "log_start_offset", "log_end_offset", "first_offset",
    "producer_id", "producer_epoch", "base_sequence", "expected_sequence", "current_epoch",
    "request_epoch", "path", "line",
)
EDGES = [0, 1, 2**15 - 1, 2**15, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, 2**63,
         2**64 - 1, 2**64, 2**127, 2**128, -1, -(2**31), -(2**63), -(2**64), -(2**200)]


class HarnessFailure(AssertionError):
    """A crash: an exception outside the allowed set, or core and reference disagree."""


class ByteReader:
    """The subset of ``atheris.FuzzedDataProvider`` the harnesses use, in pure Python, for
    running them without atheris. Exhausted input reads as zeros."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def remaining_bytes(self) -> int:
        return len(self._data) - self._pos

    def _take(self, n: int) -> bytes:
        chunk = self._data[self._pos:self._pos + n]
        self._pos += len(chunk)
        return chunk.ljust(n, b"\0")

    def ConsumeIntInRange(self, low: int, high: int) -> int:  # noqa: N802 - atheris' name
        span = high - low
        if span <= 0:
            return low
        width = (span.bit_length() + 7) // 8
        return low + int.from_bytes(self._take(width), "little") % (span + 1)

    def ConsumeInt(self, size: int) -> int:  # noqa: N802
        return int.from_bytes(self._take(size), "little", signed=True)

    def ConsumeBool(self) -> bool:  # noqa: N802
        return bool(self._take(1)[0] & 1)

    def ConsumeBytes(self, count: int) -> bytes:  # noqa: N802
        chunk = self._data[self._pos:self._pos + count]
        self._pos += len(chunk)
        return chunk

    def ConsumeUnicodeNoSurrogates(self, count: int) -> str:  # noqa: N802
        return "".join(chr(self.ConsumeIntInRange(0, 0xD7FF)) if self.ConsumeBool()
                       else chr(self.ConsumeIntInRange(0, 0x7F)) for _ in range(count))

    def ConsumeFloat(self) -> float:  # noqa: N802
        import struct
        return struct.unpack("<d", self._take(8))[0]

    def PickValueInList(self, values: Sequence[Any]) -> Any:  # noqa: N802
        return values[self.ConsumeIntInRange(0, len(values) - 1)]


def provider(data: bytes) -> Any:
    """atheris' FuzzedDataProvider when atheris is installed, else :class:`ByteReader`."""
    try:
        import atheris
    except ImportError:
        return ByteReader(data)
    return atheris.FuzzedDataProvider(data)


def call_checked(label: str, call: Callable[[], Any],
                 allowed: tuple[type[BaseException], ...] = ALLOWED) -> Any:
    """The result of ``call``, ``None`` after an allowed exception; anything else is a crash."""
    try:
        return call()
    except allowed:
        return None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - PanicException derives from BaseException
        raise HarnessFailure(f"{label}: {type(exc).__module__}.{type(exc).__name__}: {exc}") from exc


def batch_fields(batch: Any) -> tuple[Any, ...]:
    return (batch.base_offset, batch.last_offset, batch.partition_leader_epoch, batch.producer_id,
            batch.producer_epoch, batch.base_sequence, batch.last_sequence,
            batch.is_transactional, batch.is_control, tuple(batch.records))


def norm(value: Any) -> Any:
    """A module-independent comparable form of a return value."""
    if isinstance(value, bool) or value is None:
        return ("bool", value) if isinstance(value, bool) else None
    if isinstance(value, (core.RecordBatch, reference.RecordBatch)):
        return ("RecordBatch", batch_fields(value))
    if isinstance(value, (core.LogAppendInfo, reference.LogAppendInfo)):
        return ("LogAppendInfo", value.base_offset, value.last_offset, value.duplicate)
    if isinstance(value, (list, tuple)):
        return tuple(norm(item) for item in value)
    return value


def outcome(call: Callable[[], Any], label: str) -> tuple[Any, ...]:
    try:
        return ("ok", norm(call()))
    except EpochlabError as err:
        return ("raise", type(err).__name__,
                {key: getattr(err, key) for key in ERROR_KEYS if hasattr(err, key)})
    except (TypeError, OverflowError) as err:
        return ("raise", type(err).__name__, {})
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001
        raise HarnessFailure(f"{label}: {type(exc).__module__}.{type(exc).__name__}: {exc}") from exc


def observables(log: Any) -> tuple[Any, ...]:
    return (log.log_start_offset, log.log_end_offset, log.high_watermark, log.recovery_point,
            log.batch_count, log.record_count, log.latest_epoch, norm(log.epoch_entries()),
            norm(log.holes()), norm(log.batches()), norm(log.producer_state().snapshot()))


def agree(pair: Sequence[Any], operation: Callable[[Any, Any], Any], label: str) -> tuple[Any, ...]:
    """Run ``operation(module, obj)`` on both sides and require equal outcomes."""
    results = [outcome(functools.partial(operation, m, o), label) for m, o in zip(IMPLS, pair)]
    if results[0] != results[1]:
        raise HarnessFailure(f"{label}: core {results[0]} != reference {results[1]}")
    return results[1]


class Decoder:
    """Turns fuzzer bytes into argument values."""

    def __init__(self, fdp: Any) -> None:
        self.fdp = fdp

    def int_near(self, anchor: int, spread: int = 4) -> int:
        """Mostly near ``anchor``, sometimes at a domain edge."""
        if self.fdp.ConsumeIntInRange(0, 15) == 0:
            return self.fdp.PickValueInList(EDGES)
        return max(0, anchor + self.fdp.ConsumeIntInRange(-spread, spread))

    def small(self, high: int) -> int:
        return self.fdp.ConsumeIntInRange(0, high)

    def records(self) -> list[int]:
        return [self.fdp.PickValueInList([0, 1, 7, 2**64 - 1]) if self.fdp.ConsumeBool()
                else self.small(100) for _ in range(1 + self.small(3))]

    def junk(self, depth: int = 0) -> Any:
        kind = self.small(11)
        if kind == 0:
            return self.fdp.PickValueInList(EDGES)
        if kind == 1:
            return self.fdp.ConsumeInt(self.small(20))
        if kind == 2:
            return None
        if kind == 3:
            return self.fdp.ConsumeFloat()
        if kind == 4:
            return self.fdp.ConsumeUnicodeNoSurrogates(self.small(6))
        if kind == 5:
            return self.fdp.ConsumeBytes(self.small(6))
        if kind == 6 and depth < 2:
            return [self.junk(depth + 1) for _ in range(self.small(3))]
        if kind == 7 and depth < 2:
            return (self.junk(depth + 1), self.junk(depth + 1))
        if kind == 8:
            return self.fdp.PickValueInList([
                core.RecordBatch(0, 0, [1]), reference.RecordBatch(0, 0, [1]), core.ReplicaLog(),
                reference.ReplicaLog(), core.LeaderEpochCache([(0, 0)]),
                core.ProducerStateManager(), core.TruncationOutcome.fenced(), object(), True,
                "fenced_leader_epoch", [core.RecordBatch(0, 0, [1])]])
        return self.small(40)


JUNK_CALLABLES: dict[str, int] = {
    "RecordBatch": 3, "ReplicaLog": 1, "LeaderEpochCache": 1, "truncate_to_high_watermark": 2,
    "kip101_truncation": 3, "kip279_truncation": 4, "kip320_truncation": 4,
    "diverging_epoch_truncation": 4, "leader_fetch_check": 5, "check_current_leader_epoch": 2,
    "divergence_point": 2, "first_mismatch": 2, "TruncationOutcome.truncate": 1,
    "FetchCheck.diverging": 2, "LeaderEpochCache.from_checkpoint_text": 2,
}
JUNK_METHODS: dict[str, dict[str, int]] = {
    "log": {"append_as_leader": 2, "append_many_as_leader": 3, "append_as_follower": 1,
            "append_batches_as_follower": 1, "read": 1, "batch_containing": 1, "value_at": 1,
            "truncate_to": 1, "truncate_fully_and_start_at": 1, "flush": 1,
            "update_high_watermark": 1, "maybe_increment_high_watermark": 1, "assign_epoch": 2,
            "end_offset_for_epoch": 1, "epoch_for_offset": 1},
    "cache": {"assign": 2, "assign_kip101": 2, "end_offset_for": 2, "end_offset_for_kip279": 2,
              "end_offset_for_kip101": 2, "truncate_from_end": 1, "truncate_from_start": 1,
              "epoch_for_offset": 1},
    "producers": {"check_leader_append": 1, "update": 1, "entry": 1},
    "batch": {"with_base_offset": 1},
}
KEYWORDS = ["producer_id", "producer_epoch", "base_sequence", "is_transactional", "is_control",
            "kip101_epoch_cache", "max_batches", "max_offset", "request_epoch",
            "current_epoch", "error", "bogus"]


class Session:
    """State of one input: two log pairs, and core objects for junk calls."""

    def __init__(self, fdp: Any) -> None:
        self.fdp = fdp
        self.d = Decoder(fdp)
        kip101 = fdp.ConsumeIntInRange(0, 3) == 0
        self.logs = [tuple(m.ReplicaLog(kip101_epoch_cache=kip101) for m in IMPLS)
                     for _ in range(2)]
        self.junk_targets = {"cache": core.LeaderEpochCache([(0, 0), (2, 5)]),
                             "producers": core.ProducerStateManager(),
                             "batch": core.RecordBatch(3, 1, [1, 2], producer_id=1,
                                                       producer_epoch=0, base_sequence=0)}

    def ref(self, i: int) -> Any:
        return self.logs[i][1]

    def on(self, i: int, operation: Callable[[Any, Any], Any], label: str) -> tuple[Any, ...]:
        return agree(self.logs[i], operation, f"log {i}: {label}")

    def log_step(self) -> None:
        d, i = self.d, self.d.small(1)
        leo = self.ref(i).log_end_offset
        op = d.small(12)
        if op == 0:
            values, epoch = d.records(), d.int_near(2, 2)
            self.on(i, lambda m, log: log.append_as_leader(values, epoch),
                    f"append_as_leader({values}, {epoch})")
        elif op == 1:
            pid, pepoch, seq = d.small(2), d.small(2), d.int_near(1, 2)
            values, txn = d.records(), d.fdp.ConsumeBool()
            self.on(i, lambda m, log: log.append_as_leader(
                values, 1, producer_id=pid, producer_epoch=pepoch, base_sequence=seq,
                is_transactional=txn), f"append_as_leader({values}, pid={pid}, "
                f"epoch={pepoch}, seq={seq}, txn={txn})")
        elif op == 2:
            sizes = [d.int_near(1, 1) for _ in range(d.small(4))]
            values = list(range(sum(s for s in sizes if 0 <= s < 10) + d.small(1)))
            epoch = d.int_near(2, 2)
            self.on(i, lambda m, log: log.append_many_as_leader(epoch, sizes, values),
                    f"append_many_as_leader({epoch}, {sizes}, {len(values)} records)")
        elif op == 3:
            self.replicate(i)
        elif op == 4:
            base, epoch, values = d.int_near(leo, 2), d.int_near(2, 2), d.records()
            self.on(i, lambda m, log: log.append_as_follower(m.RecordBatch(base, epoch, values)),
                    f"append_as_follower(RecordBatch({base}, {epoch}, {values}))")
        elif op == 5:
            start, max_batches, max_offset = d.int_near(leo), d.small(3), d.int_near(leo)
            self.on(i, lambda m, log: log.read(start, max_batches=max_batches,
                                               max_offset=max_offset),
                    f"read({start}, max_batches={max_batches}, max_offset={max_offset})")
        elif op == 6:
            target = d.int_near(max(0, leo - 3))
            self.on(i, lambda m, log: log.truncate_to(target), f"truncate_to({target})")
        elif op == 7:
            offset = d.int_near(leo)
            self.on(i, lambda m, log: log.truncate_fully_and_start_at(offset),
                    f"truncate_fully_and_start_at({offset})")
        elif op == 8:
            up_to = None if d.fdp.ConsumeBool() else d.int_near(leo)
            self.on(i, lambda m, log: log.flush(up_to), f"flush({up_to})")
            if d.fdp.ConsumeBool():
                self.on(i, lambda m, log: log.drop_unflushed(), "drop_unflushed()")
        elif op == 9:
            hw = d.int_near(leo)
            name = d.fdp.PickValueInList(["update_high_watermark", "maybe_increment_high_watermark"])
            self.on(i, lambda m, log: getattr(log, name)(hw), f"{name}({hw})")
        elif op == 10:
            epoch, start = d.int_near(3, 3), d.int_near(leo)
            self.on(i, lambda m, log: log.assign_epoch(epoch, start),
                    f"assign_epoch({epoch}, {start})")
        elif op == 11:
            offset, epoch = d.int_near(leo), d.int_near(2, 3)
            self.on(i, lambda m, log: log.value_at(offset), f"value_at({offset})")
            self.on(i, lambda m, log: log.epoch_for_offset(offset), f"epoch_for_offset({offset})")
            self.on(i, lambda m, log: log.end_offset_for_epoch(epoch),
                    f"end_offset_for_epoch({epoch})")
        else:
            self.logs[i] = tuple(log.copy() for log in self.logs[i])

    def replicate(self, follower: int) -> None:
        leader = self.ref(1 - follower)
        start = self.ref(follower).log_end_offset
        if not (leader.log_start_offset <= start <= leader.log_end_offset):
            start = leader.log_start_offset
        batches = leader.read(start, max_batches=1 + self.d.small(2))
        self.on(follower, lambda m, log: log.append_batches_as_follower(
            [m.RecordBatch(b.base_offset, b.partition_leader_epoch, list(b.records),
                           producer_id=b.producer_id, producer_epoch=b.producer_epoch,
                           base_sequence=b.base_sequence, is_transactional=b.is_transactional,
                           is_control=b.is_control) for b in batches]),
            f"append_batches_as_follower(read from {start})")

    def junk_step(self) -> None:
        d = self.d
        if d.fdp.ConsumeBool():
            name = d.fdp.PickValueInList(sorted(JUNK_CALLABLES))
            arity = JUNK_CALLABLES[name]
            target: Any = core
            for part in name.split("."):
                target = getattr(target, part)
        else:
            owner = d.fdp.PickValueInList(sorted(JUNK_METHODS))
            name = d.fdp.PickValueInList(sorted(JUNK_METHODS[owner]))
            arity = JUNK_METHODS[owner][name]
            # A copy: a junk call that succeeds must not make the core log differ from its twin.
            obj = self.logs[d.small(1)][0].copy() if owner == "log" else self.junk_targets[owner]
            target = getattr(obj, name)
        count = max(0, arity + d.fdp.PickValueInList([0, 0, 0, 0, -1, 1]))
        args = [d.junk() if d.fdp.ConsumeBool() else d.small(20) for _ in range(count)]
        kwargs = {d.fdp.PickValueInList(KEYWORDS): d.junk() for _ in range(d.small(2))}
        result = call_checked(f"{name}(*{args!r}, **{kwargs!r})", lambda: target(*args, **kwargs))
        if result is not None:
            call_checked(f"repr of the result of {name}", lambda: repr(result), allowed=())

    def check(self) -> None:
        for i, (c, r) in enumerate(self.logs):
            seen = [call_checked(f"observables of log {i}", functools.partial(observables, log),
                                 allowed=()) for log in (c, r)]
            if seen[0] != seen[1]:
                raise HarnessFailure(f"log {i} state: core {seen[0]} != reference {seen[1]}")
        pair = tuple(zip(*self.logs))
        for name in ("divergence_point", "first_mismatch"):
            for a, b in ((0, 1), (1, 0)):
                agree(pair, lambda m, logs: getattr(m, name)(logs[a], logs[b]),
                      f"{name}(log {a}, log {b})")


def test_one_input(data: bytes) -> None:
    fdp = provider(data)
    session = Session(fdp)
    for _ in range(MAX_STEPS):
        if fdp.remaining_bytes() == 0:
            break
        if fdp.ConsumeIntInRange(0, 3) == 0:
            session.junk_step()
        else:
            session.log_step()
        session.check()


def main() -> None:
    import atheris

    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
