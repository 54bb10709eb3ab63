"""Differential state machines: the Rust core and the pure-Python reference, driven in lockstep.

Every rule performs the same operation on a ``epochlab._core`` object and on its
``epochlab.reference`` twin and requires the same outcome: an equal result, or an exception of
the same class with the same key attributes (``offset``, ``argument``, ``expected_sequence`` ...;
messages may differ). After every step the machines compare every observable of every object
(offsets, counts, epoch entries, holes, batches field by field, producer state).

When a machine fails, Hypothesis prints the shrunk step sequence, which replays on either module
alone; ``docs/core-semantics.md`` decides which side is wrong.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import epochlab._core as core
import epochlab.reference as reference
from epochlab.errors import EpochlabError

IMPLS: tuple[ModuleType, ModuleType] = (core, reference)

OFFSET_MAX = 2**63 - 1
EPOCH_MAX = 2**31 - 1
SEQUENCE_MAX = 2**31 - 1
PRODUCER_EPOCH_MAX = 2**15 - 1

MACHINE_SETTINGS = settings(
    max_examples=150, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
GIVEN_SETTINGS = settings(max_examples=200, deadline=None)

# The attributes errors.py documents; both sides must agree on every one that either sets.
ERROR_KEYS = (
    "argument", "value", "offset", "log_start_offset", "log_end_offset", "first_offset",
    "producer_id", "producer_epoch", "base_sequence", "expected_sequence", "current_epoch",
    "request_epoch", "path", "line",
)


def batch_fields(batch: Any) -> tuple[Any, ...]:
    """Every public field of a RecordBatch, so batches of the two modules compare as values."""
    return (
        batch.base_offset, batch.last_offset, batch.partition_leader_epoch, batch.producer_id,
        batch.producer_epoch, batch.base_sequence, batch.last_sequence, batch.is_transactional,
        batch.is_control, tuple(batch.records), batch.record_count, len(batch),
    )


def norm(value: Any) -> Any:
    """A module-independent, comparable form of any value the API returns."""
    # bool before int: True == 1, and a method returning 1 where True is due is a difference.
    if isinstance(value, bool) or value is None:
        return ("bool", value) if isinstance(value, bool) else None
    if isinstance(value, (core.RecordBatch, reference.RecordBatch)):
        return ("RecordBatch", batch_fields(value))
    if isinstance(value, (core.LogAppendInfo, reference.LogAppendInfo)):
        return ("LogAppendInfo", value.base_offset, value.last_offset, norm(value.duplicate))
    if isinstance(value, (core.TruncationOutcome, reference.TruncationOutcome)):
        return ("TruncationOutcome", value.kind, value.offset)
    if isinstance(value, (core.FetchCheck, reference.FetchCheck)):
        return ("FetchCheck", value.kind, norm(value.diverging_epoch))
    if isinstance(value, (core.LeaderEpochCache, reference.LeaderEpochCache)):
        return ("LeaderEpochCache", norm(value.entries()))
    if isinstance(value, (core.ProducerStateManager, reference.ProducerStateManager)):
        return ("ProducerStateManager", norm(value.snapshot()))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(norm(item) for item in value))
    if type(value) in (int, str):
        return value
    raise AssertionError(f"unexpected return type {type(value).__name__}: {value!r}")


def outcome(call: Callable[[], Any]) -> tuple[Any, ...]:
    """``("ok", result)`` or ``("raise", class name, key attributes)``. Anything but an
    EpochlabError, TypeError or OverflowError propagates and fails the test."""
    try:
        return ("ok", norm(call()))
    except EpochlabError as err:
        keys = {key: getattr(err, key) for key in ERROR_KEYS if hasattr(err, key)}
        return ("raise", type(err).__name__, keys)
    except (TypeError, OverflowError) as err:
        return ("raise", type(err).__name__, {})


def same(objects: Sequence[Any], operation: Callable[[ModuleType, Any], Any], what: str) -> Any:
    """Run ``operation(module, obj)`` on both sides; fail unless the outcomes are equal.
    Returns the reference outcome."""
    results = [outcome(functools.partial(operation, m, o)) for m, o in zip(IMPLS, objects)]
    assert results[0] == results[1], f"{what}:\n  core      {results[0]}\n  reference {results[1]}"
    return results[1]


def to_module(module: ModuleType, batch: Any) -> Any:
    """The same batch rebuilt in ``module``."""
    return module.RecordBatch(
        batch.base_offset, batch.partition_leader_epoch, list(batch.records),
        producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence, is_transactional=batch.is_transactional,
        is_control=batch.is_control,
    )


def log_observables(log: Any) -> tuple[Any, ...]:
    return (
        log.log_start_offset, log.log_end_offset, log.high_watermark, log.recovery_point,
        log.batch_count, log.record_count, len(log), log.latest_epoch, log.kip101_epoch_cache,
        norm(log.epoch_entries()), norm(log.holes()),
        tuple(batch_fields(b) for b in log.batches()), norm(log.producer_state()),
        norm(log.epoch_cache()),
        # transactions
        log.first_unstable_offset, log.last_stable_offset, norm(log.aborted_transactions(0, 2**63 - 1)),
        norm(log.ongoing_transactions()), norm(log.unreplicated_transactions()),
        tuple((pid, log.producer_state().coordinator_epoch(pid)) for pid in log.producer_state().producer_ids()),
    )


def sequence_span(first_seq: int, last_seq: int) -> int:
    """The record count of a cached batch whose last sequence may have wrapped past MAX."""
    return (last_seq - first_seq) % (SEQUENCE_MAX + 1) + 1


# Small pools so that one producer id meets its own retries, stale epochs and gaps often.
producer_ids = st.sampled_from([0, 1, 7])
producer_epochs = st.sampled_from([0, 0, 1, 2, PRODUCER_EPOCH_MAX])
epochs = st.one_of(st.integers(0, 6), st.sampled_from([EPOCH_MAX]))
record_values = st.one_of(st.integers(0, 1000), st.sampled_from([0, 2**64 - 1]))
records = st.lists(record_values, min_size=1, max_size=4)
# Out of every domain; 2^128 and -2^200 are also beyond a 128-bit conversion.
junk_ints = st.sampled_from([-1, -(2**63), 2**63, 2**64, 2**64 - 1, 2**31, 2**32, 2**15, 2**128,
                             -(2**200)])


class TwoLogs(RuleBasedStateMachine):
    """Two replica logs, each held as a (core, reference) pair; index 0 or 1 picks one."""

    def __init__(self) -> None:
        super().__init__()
        self.logs: list[tuple[Any, Any]] = []

    def make_logs(self, starts: list[int], kip101: bool) -> None:
        self.logs = [tuple(m.ReplicaLog(start, kip101_epoch_cache=kip101) for m in IMPLS)
                     for start in starts]

    def on(self, i: int, operation: Callable[[ModuleType, Any], Any], what: str) -> Any:
        return same(self.logs[i], operation, f"log {i}: {what}")

    def ref(self, i: int) -> Any:
        return self.logs[i][1]

    def offset_near(self, data: st.DataObject, i: int) -> int:
        """An offset around log ``i``: inside it, at its boundaries or just past its end."""
        log = self.ref(i)
        bounds = [log.log_start_offset, log.log_end_offset, log.high_watermark, log.recovery_point]
        for batch in log.batches():
            bounds += [batch.base_offset, batch.last_offset, batch.last_offset + 1]
        return data.draw(st.one_of(
            st.integers(max(0, log.log_start_offset - 2), log.log_end_offset + 3),
            st.sampled_from(bounds),
        ))

    @invariant()
    def observables_agree(self) -> None:
        for i, (c, r) in enumerate(self.logs):
            assert log_observables(c) == log_observables(r), f"log {i} state differs"


class LogMachine(TwoLogs):
    """Every ReplicaLog operation, including the invalid ones, on two logs that feed each
    other's follower appends."""

    @initialize(starts=st.lists(st.sampled_from([0, 0, 0, 3, 100]), min_size=2, max_size=2),
                kip101=st.sampled_from([False, False, False, True]))
    def init(self, starts: list[int], kip101: bool) -> None:
        self.make_logs(starts, kip101)

    @rule(i=st.integers(0, 1), values=records, epoch=epochs)
    def append_as_leader(self, i: int, values: list[int], epoch: int) -> None:
        self.on(i, lambda m, log: log.append_as_leader(values, epoch), "append_as_leader")

    @rule(i=st.integers(0, 1), data=st.data())
    def append_idempotent(self, i: int, data: st.DataObject) -> None:
        pid = data.draw(producer_ids, "producer_id")
        entry = self.ref(i).producer_state().entry(pid)
        choices = [st.tuples(producer_epochs, st.integers(0, 6), st.integers(1, 3)),
                   st.tuples(producer_epochs, st.sampled_from([SEQUENCE_MAX - 1, SEQUENCE_MAX]),
                             st.integers(1, 3))]
        if entry is not None:
            epoch, cached = entry
            nxt = 0 if not cached else (cached[-1][1] + 1) % (SEQUENCE_MAX + 1)
            # the expected next sequence, and retries of cached batches (the duplicate path)
            choices.append(st.tuples(st.just(epoch), st.just(nxt), st.integers(1, 3)))
            choices += [st.just((epoch, first, sequence_span(first, last)))
                        for first, last, _, _ in cached]
            choices.append(st.tuples(st.just(epoch + 1), st.sampled_from([0, 1]), st.integers(1, 2))
                           if epoch < PRODUCER_EPOCH_MAX else st.just((epoch, nxt, 1)))
        producer_epoch, base_sequence, count = data.draw(st.one_of(*choices), "producer fields")
        values = list(range(count))
        leader_epoch = data.draw(epochs, "leader_epoch")
        transactional = data.draw(st.sampled_from([False, False, False, True]), "transactional")
        self.on(i, lambda m, log: log.append_as_leader(
            values, leader_epoch, producer_id=pid, producer_epoch=producer_epoch,
            base_sequence=base_sequence, is_transactional=transactional),
            f"append_as_leader(pid={pid}, epoch={producer_epoch}, seq={base_sequence}, n={count})")

    @rule(i=st.integers(0, 1), data=st.data())
    def write_txn_marker(self, i: int, data: st.DataObject) -> None:
        """A coordinator's COMMIT/ABORT, from the current, an older or a newer producer epoch and
        coordinator epoch, so fencing of both kinds happens."""
        pid = data.draw(producer_ids, "producer_id")
        entry = self.ref(i).producer_state().entry(pid)
        current = entry[0] if entry is not None else 0
        producer_epoch = data.draw(st.sampled_from(sorted({max(current - 1, 0), current,
                                                           min(current + 1, PRODUCER_EPOCH_MAX)})))
        coordinator_epoch = data.draw(st.integers(0, 3), "coordinator_epoch")
        commit = data.draw(st.booleans(), "commit")
        leader_epoch = data.draw(epochs, "leader_epoch")
        self.on(i, lambda m, log: log.append_end_txn_marker(pid, producer_epoch, coordinator_epoch,
                                                            commit, leader_epoch),
                f"append_end_txn_marker(pid={pid}, epoch={producer_epoch}, coord={coordinator_epoch})")

    @rule(i=st.integers(0, 1), data=st.data())
    def probe_aborted(self, i: int, data: st.DataObject) -> None:
        lo, hi = self.offset_near(data, i), self.offset_near(data, i)
        self.on(i, lambda m, log: log.aborted_transactions(lo, hi), "aborted_transactions")

    @rule(i=st.integers(0, 1), epoch=epochs,
          sizes=st.lists(st.integers(0, 4), max_size=6), values=st.lists(record_values, max_size=20),
          exact=st.booleans())
    def append_many_as_leader(self, i: int, epoch: int, sizes: list[int], values: list[int],
                              exact: bool) -> None:
        if exact:  # mostly a well-formed call; otherwise sizes and records rarely match
            sizes = [max(1, s) for s in sizes]
            values = (values * (sum(sizes) + 1))[:sum(sizes)] if values else [5] * sum(sizes)
        self.on(i, lambda m, log: log.append_many_as_leader(epoch, sizes, values),
                f"append_many_as_leader({epoch}, {sizes}, {values})")

    @rule(follower=st.integers(0, 1), data=st.data())
    def replicate_from_other(self, follower: int, data: st.DataObject) -> None:
        """Follower appends of batches read from the other log: at the follower's end offset
        when the leader has it, else at any offset, so overlaps and gaps happen."""
        leader = 1 - follower
        lead = self.ref(leader)
        start = data.draw(st.one_of(st.just(self.ref(follower).log_end_offset),
                                    st.integers(lead.log_start_offset, lead.log_end_offset)))
        max_batches = data.draw(st.one_of(st.none(), st.integers(0, 3)))
        read = self.on(leader, lambda m, log: log.read(start, max_batches=max_batches),
                       f"read({start}, max_batches={max_batches})")
        if read[0] != "ok":
            return
        batches = lead.read(start, max_batches=max_batches)
        if data.draw(st.booleans(), "one at a time"):
            for batch in batches:
                self.on(follower, lambda m, log: log.append_as_follower(to_module(m, batch)),
                        f"append_as_follower({batch!r})")
        else:
            self.on(follower, lambda m, log: log.append_batches_as_follower(
                [to_module(m, b) for b in batches]), f"append_batches_as_follower({batches!r})")

    @rule(i=st.integers(0, 1), data=st.data())
    def append_random_as_follower(self, i: int, data: st.DataObject) -> None:
        leo = self.ref(i).log_end_offset
        specs = data.draw(st.lists(st.tuples(
            st.one_of(st.just(0), st.just(0), st.integers(-2, 2)),  # mostly contiguous
            epochs, records,
            st.one_of(st.none(), st.tuples(producer_ids, producer_epochs, st.integers(0, 6),
                                           st.booleans(), st.sampled_from([None, 0, 1])))),
            min_size=1, max_size=3), "batches")
        batches, base = [], leo
        for delta, epoch, values, producer in specs:
            base = max(0, base + delta)
            kwargs: dict[str, Any] = {}
            if producer is not None:
                pid, pepoch, seq, txn, control = producer
                kwargs = dict(producer_id=pid, producer_epoch=pepoch, base_sequence=seq,
                              is_transactional=txn or control is not None)
                if control is not None:
                    values, kwargs["is_control"] = [control], True
            batches.append((base, epoch, values, kwargs))
            base += len(values)

        def build(m: ModuleType) -> list[Any]:
            return [m.RecordBatch(b, e, v, **kw) for b, e, v, kw in batches]

        if len(batches) == 1:
            self.on(i, lambda m, log: log.append_as_follower(build(m)[0]),
                    f"append_as_follower({batches})")
        else:
            self.on(i, lambda m, log: log.append_batches_as_follower(build(m)),
                    f"append_batches_as_follower({batches})")

    @rule(i=st.integers(0, 1), data=st.data())
    def read(self, i: int, data: st.DataObject) -> None:
        start = self.offset_near(data, i)
        max_batches = data.draw(st.one_of(st.none(), st.integers(0, 4)))
        max_offset = data.draw(st.one_of(st.none(), st.just(self.offset_near(data, i))))
        self.on(i, lambda m, log: log.read(start, max_batches=max_batches, max_offset=max_offset),
                f"read({start}, max_batches={max_batches}, max_offset={max_offset})")

    @rule(i=st.integers(0, 1), data=st.data())
    def probe(self, i: int, data: st.DataObject) -> None:
        offset = self.offset_near(data, i)
        self.on(i, lambda m, log: log.value_at(offset), f"value_at({offset})")
        self.on(i, lambda m, log: log.batch_containing(offset), f"batch_containing({offset})")
        self.on(i, lambda m, log: log.epoch_for_offset(offset), f"epoch_for_offset({offset})")
        requested = data.draw(st.one_of(st.none(), epochs))
        self.on(i, lambda m, log: log.end_offset_for_epoch(requested),
                f"end_offset_for_epoch({requested})")

    @rule(i=st.integers(0, 1), data=st.data())
    def truncate_to(self, i: int, data: st.DataObject) -> None:
        target = data.draw(st.one_of(st.just(self.offset_near(data, i)),
                                     st.sampled_from([0, OFFSET_MAX])), "target")
        self.on(i, lambda m, log: log.truncate_to(target), f"truncate_to({target})")

    @rule(i=st.integers(0, 1), data=st.data())
    def truncate_fully_and_start_at(self, i: int, data: st.DataObject) -> None:
        new_offset = data.draw(st.one_of(st.just(self.offset_near(data, i)),
                                         st.sampled_from([0, OFFSET_MAX - 2, OFFSET_MAX])))
        self.on(i, lambda m, log: log.truncate_fully_and_start_at(new_offset),
                f"truncate_fully_and_start_at({new_offset})")

    @rule(i=st.integers(0, 1), data=st.data())
    def flush(self, i: int, data: st.DataObject) -> None:
        up_to = data.draw(st.one_of(st.none(), st.just(self.offset_near(data, i))), "up_to")
        self.on(i, lambda m, log: log.flush(up_to), f"flush({up_to})")

    @rule(i=st.integers(0, 1))
    def drop_unflushed(self, i: int) -> None:
        self.on(i, lambda m, log: log.drop_unflushed(), "drop_unflushed()")

    @rule(i=st.integers(0, 1), data=st.data())
    def high_watermark(self, i: int, data: st.DataObject) -> None:
        offset = data.draw(st.one_of(st.just(self.offset_near(data, i)), st.just(OFFSET_MAX)))
        if data.draw(st.booleans(), "leader variant"):
            self.on(i, lambda m, log: log.maybe_increment_high_watermark(offset),
                    f"maybe_increment_high_watermark({offset})")
        else:
            self.on(i, lambda m, log: log.update_high_watermark(offset),
                    f"update_high_watermark({offset})")

    @rule(i=st.integers(0, 1), epoch=epochs, data=st.data())
    def assign_epoch(self, i: int, epoch: int, data: st.DataObject) -> None:
        start = self.offset_near(data, i)
        self.on(i, lambda m, log: log.assign_epoch(epoch, start), f"assign_epoch({epoch}, {start})")

    @rule(i=st.integers(0, 1))
    def rebuild_producer_state(self, i: int) -> None:
        self.on(i, lambda m, log: log.rebuild_producer_state(), "rebuild_producer_state()")

    @rule(i=st.integers(0, 1))
    def replace_by_copy(self, i: int) -> None:
        """Continue on a copy, the original being discarded: copy() must carry all state."""
        self.logs[i] = tuple(log.copy() for log in self.logs[i])

    @rule(i=st.integers(0, 1), bad=junk_ints, which=st.integers(0, 9))
    def invalid_argument(self, i: int, bad: int, which: int) -> None:
        """A value outside its domain fails the same way (class, argument name, value)."""
        calls: list[tuple[str, Callable[[ModuleType, Any], Any]]] = [
            ("truncate_to", lambda m, log: log.truncate_to(bad)),
            ("read", lambda m, log: log.read(bad)),
            ("read max_batches", lambda m, log: log.read(log.log_end_offset, max_batches=bad)),
            ("append_as_leader epoch", lambda m, log: log.append_as_leader([1], bad)),
            ("append_as_leader record", lambda m, log: log.append_as_leader([1, bad], 0)),
            ("append idempotent", lambda m, log: log.append_as_leader(
                [1], 0, producer_id=bad, producer_epoch=0, base_sequence=0)),
            ("update_high_watermark", lambda m, log: log.update_high_watermark(bad)),
            ("assign_epoch", lambda m, log: log.assign_epoch(bad, 0)),
            ("flush", lambda m, log: log.flush(bad)),
            ("append_many_as_leader", lambda m, log: log.append_many_as_leader(0, [bad], [1])),
        ]
        name, call = calls[which]
        self.on(i, call, f"{name} with {bad}")


class DivergenceMachine(TwoLogs):
    """Two replicas of one partition that take turns as leader, replicate, crash and truncate,
    so their logs share prefixes and diverge the way Kafka's do; ``divergence_point`` and
    ``first_mismatch`` (both argument orders) must agree between the modules after every step."""

    @initialize(kip101=st.sampled_from([False, False, False, True]),
                start=st.sampled_from([0, 0, 5]))
    def init(self, kip101: bool, start: int) -> None:
        self.make_logs([start, start], kip101)
        self.leader = 0
        self.epoch = 0

    @rule(values=records, batches=st.integers(1, 3))
    def leader_appends(self, values: list[int], batches: int) -> None:
        for _ in range(batches):
            self.on(self.leader, lambda m, log: log.append_as_leader(values, self.epoch),
                    f"append_as_leader({values}, {self.epoch})")

    @rule(bulk=st.lists(st.integers(1, 3), min_size=1, max_size=4))
    def leader_appends_many(self, bulk: list[int]) -> None:
        values = list(range(sum(bulk)))
        self.on(self.leader, lambda m, log: log.append_many_as_leader(self.epoch, bulk, values),
                f"append_many_as_leader({self.epoch}, {bulk})")

    @rule(new_leader=st.integers(0, 1), skip=st.integers(1, 2))
    def elect(self, new_leader: int, skip: int) -> None:
        """A new leader epoch, assigned at the new leader's end offset (``makeLeader``); an
        unclean election when the new leader lags."""
        self.leader, self.epoch = new_leader, self.epoch + skip
        leo = self.ref(new_leader).log_end_offset
        self.on(new_leader, lambda m, log: log.assign_epoch(self.epoch, leo),
                f"assign_epoch({self.epoch}, {leo})")

    @rule(max_batches=st.one_of(st.none(), st.integers(1, 3)))
    def follower_fetches(self, max_batches: int | None) -> None:
        follower = 1 - self.leader
        start = self.ref(follower).log_end_offset
        read = self.on(self.leader, lambda m, log: log.read(start, max_batches=max_batches),
                       f"read({start})")
        if read[0] != "ok":
            return
        batches = self.ref(self.leader).read(start, max_batches=max_batches)
        # The first batch may start before the fetch offset (a hole or a mid-batch truncation on
        # the follower), in which case the follower refuses it: both modules must agree.
        self.on(follower, lambda m, log: log.append_batches_as_follower(
            [to_module(m, b) for b in batches]), f"append_batches_as_follower({batches!r})")

    @rule()
    def follower_reconciles(self) -> None:
        """The follower truncates to where the epoch caches say the logs diverge."""
        follower = 1 - self.leader
        point = same(tuple(zip(*self.logs)), lambda m, logs: m.divergence_point(*logs),
                     "divergence_point")
        if point[0] == "ok" and point[1] is not None:
            self.on(follower, lambda m, log: log.truncate_to(point[1]), f"truncate_to({point[1]})")

    @rule(i=st.integers(0, 1), data=st.data())
    def truncate_to(self, i: int, data: st.DataObject) -> None:
        target = self.offset_near(data, i)
        self.on(i, lambda m, log: log.truncate_to(target), f"truncate_to({target})")

    @rule(i=st.integers(0, 1), data=st.data())
    def crash(self, i: int, data: st.DataObject) -> None:
        up_to = data.draw(st.one_of(st.none(), st.just(self.offset_near(data, i))), "flushed")
        self.on(i, lambda m, log: log.flush(up_to), f"flush({up_to})")
        self.on(i, lambda m, log: log.drop_unflushed(), "drop_unflushed()")

    @rule(i=st.integers(0, 1), data=st.data())
    def raise_high_watermark(self, i: int, data: st.DataObject) -> None:
        offset = self.offset_near(data, i)
        self.on(i, lambda m, log: log.maybe_increment_high_watermark(offset),
                f"maybe_increment_high_watermark({offset})")

    @rule(i=st.integers(0, 1), data=st.data())
    def restart_from(self, i: int, data: st.DataObject) -> None:
        offset = self.offset_near(data, i)
        self.on(i, lambda m, log: log.truncate_fully_and_start_at(offset),
                f"truncate_fully_and_start_at({offset})")

    @invariant()
    def comparisons_agree(self) -> None:
        for name in ("divergence_point", "first_mismatch"):
            for a, b in ((0, 1), (1, 0)):
                same(tuple(zip(*self.logs)),
                     lambda m, logs: getattr(m, name)(logs[a], logs[b]), f"{name}(log {a}, log {b})")


class EpochCacheMachine(RuleBasedStateMachine):
    """A standalone LeaderEpochCache pair: every mutation and every lookup generation."""

    @initialize(entries=st.lists(st.tuples(st.integers(0, 8), st.integers(0, 40)), max_size=4))
    def init(self, entries: list[tuple[int, int]]) -> None:
        # Random entries are often not strictly increasing: both constructors must refuse them
        # alike, and the machine then starts from an empty cache.
        made = same((None, None), lambda m, _: m.LeaderEpochCache(entries),
                    f"LeaderEpochCache({entries})")
        self.caches = tuple(m.LeaderEpochCache(entries if made[0] == "ok" else []) for m in IMPLS)

    def on(self, operation: Callable[[ModuleType, Any], Any], what: str) -> Any:
        return same(self.caches, operation, what)

    @rule(epoch=epochs, start=st.integers(0, 50))
    def assign(self, epoch: int, start: int) -> None:
        self.on(lambda m, c: c.assign(epoch, start), f"assign({epoch}, {start})")

    @rule(epoch=epochs, start=st.integers(0, 50))
    def assign_kip101(self, epoch: int, start: int) -> None:
        self.on(lambda m, c: c.assign_kip101(epoch, start), f"assign_kip101({epoch}, {start})")

    @rule(offset=st.integers(0, 50))
    def truncate_from_end(self, offset: int) -> None:
        self.on(lambda m, c: c.truncate_from_end(offset), f"truncate_from_end({offset})")

    @rule(offset=st.integers(0, 50))
    def truncate_from_start(self, offset: int) -> None:
        self.on(lambda m, c: c.truncate_from_start(offset), f"truncate_from_start({offset})")

    @rule(clear=st.sampled_from([False, False, False, True]))
    def replace_by_copy(self, clear: bool) -> None:
        self.caches = tuple(c.copy() for c in self.caches)
        if clear:
            self.on(lambda m, c: c.clear(), "clear()")

    @rule(requested=st.one_of(st.none(), st.integers(0, 10), junk_ints),
          leo=st.one_of(st.integers(0, 60), junk_ints), offset=st.one_of(st.integers(0, 60), junk_ints))
    def lookups(self, requested: int | None, leo: int, offset: int) -> None:
        for name in ("end_offset_for", "end_offset_for_kip279", "end_offset_for_kip101"):
            self.on(lambda m, c: getattr(c, name)(requested, leo), f"{name}({requested}, {leo})")
        self.on(lambda m, c: c.epoch_for_offset(offset), f"epoch_for_offset({offset})")

    @rule()
    def checkpoint_round_trip(self) -> None:
        text = self.on(lambda m, c: c.to_checkpoint_text(), "to_checkpoint_text()")
        self.on(lambda m, c: m.LeaderEpochCache.from_checkpoint_text(text[1], "cp"),
                "from_checkpoint_text")

    @invariant()
    def observables_agree(self) -> None:
        c, r = self.caches
        assert (c.entries(), len(c), c.latest_epoch, c.earliest_epoch) == \
               (r.entries(), len(r), r.latest_epoch, r.earliest_epoch)
        assert c == c.copy() and r == r.copy()


def idempotent_batch(module: ModuleType, spec: tuple[Any, ...]) -> Any:
    base_offset, pid, epoch, seq, count, txn, control = spec
    if control is not None:
        return module.RecordBatch(base_offset, 0, [control], producer_id=pid, producer_epoch=epoch,
                                  base_sequence=seq, is_transactional=True, is_control=True)
    return module.RecordBatch(base_offset, 0, list(range(count)), producer_id=pid,
                              producer_epoch=epoch, base_sequence=seq, is_transactional=txn)


class ProducerStateMachine(RuleBasedStateMachine):
    """A ProducerStateManager pair fed as a leader feeds it: validate, then record."""

    def __init__(self) -> None:
        super().__init__()
        self.states = (core.ProducerStateManager(), reference.ProducerStateManager())
        self.next_offset = 0

    @rule(data=st.data(), follower=st.booleans())
    def append(self, data: st.DataObject, follower: bool) -> None:
        pid = data.draw(producer_ids, "producer_id")
        entry = self.states[1].entry(pid)
        sequences = [st.integers(0, 7), st.sampled_from([SEQUENCE_MAX - 1, SEQUENCE_MAX])]
        counts = st.integers(1, 3)
        candidates = [st.tuples(producer_epochs, st.one_of(*sequences), counts)]
        if entry is not None:
            epoch, cached = entry
            nxt = 0 if not cached else (cached[-1][1] + 1) % (SEQUENCE_MAX + 1)
            candidates.append(st.tuples(st.just(epoch), st.just(nxt), counts))
            candidates += [st.just((epoch, f, sequence_span(f, last))) for f, last, _, _ in cached]
        epoch, seq, count = data.draw(st.one_of(*candidates), "epoch, sequence, count")
        control = data.draw(st.sampled_from([None, None, None, 0, 1]), "control")
        txn = data.draw(st.booleans(), "transactional")
        spec = (self.next_offset, pid, epoch, seq, 1 if control is not None else count, txn, control)
        checked = same(self.states, lambda m, s: s.check_leader_append(idempotent_batch(m, spec)),
                       f"check_leader_append({spec})")
        # A follower records whatever its leader wrote; a leader only what passed the check.
        if follower or checked == ("ok", None):
            self.next_offset += spec[4]
            same(self.states, lambda m, s: s.update(idempotent_batch(m, spec)), f"update({spec})")

    @rule(pid=st.one_of(producer_ids, junk_ints))
    def entry(self, pid: int) -> None:
        same(self.states, lambda m, s: s.entry(pid), f"entry({pid})")

    @rule(clear=st.booleans())
    def copy_or_clear(self, clear: bool) -> None:
        self.states = tuple(s.copy() for s in self.states)  # type: ignore[assignment]
        if clear:
            same(self.states, lambda m, s: s.clear(), "clear()")

    @invariant()
    def observables_agree(self) -> None:
        c, r = self.states
        assert (norm(c.snapshot()), c.producer_ids(), len(c)) == \
               (norm(r.snapshot()), r.producer_ids(), len(r))


TestLogMachine = LogMachine.TestCase
TestLogMachine.settings = MACHINE_SETTINGS
TestDivergenceMachine = DivergenceMachine.TestCase
TestDivergenceMachine.settings = MACHINE_SETTINGS
TestEpochCacheMachine = EpochCacheMachine.TestCase
TestEpochCacheMachine.settings = MACHINE_SETTINGS
TestProducerStateMachine = ProducerStateMachine.TestCase
TestProducerStateMachine.settings = MACHINE_SETTINGS


@st.composite
def cache_entries(draw: st.DrawFn) -> list[tuple[int, int]]:
    """Valid cache entries: strictly increasing epochs and start offsets."""
    epochs_ = sorted(set(draw(st.lists(st.integers(0, 12), max_size=6))))
    starts = sorted(set(draw(st.lists(st.integers(0, 60), min_size=len(epochs_),
                                      max_size=len(epochs_) + 3))))[:len(epochs_)]
    return list(zip(epochs_[:len(starts)], starts))


def both_caches(entries: list[tuple[int, int]]) -> tuple[Any, Any]:
    return tuple(m.LeaderEpochCache(entries) for m in IMPLS)  # type: ignore[return-value]


def positions(draw: Callable[..., Any], entries: list[tuple[int, int]]) -> tuple[int, int]:
    """A log end offset at or past the last entry and a high watermark at most that."""
    leo = (entries[-1][1] if entries else 0) + draw(st.integers(0, 10))
    return leo, draw(st.integers(0, leo))


answers = st.one_of(st.none(), st.tuples(st.integers(0, 14), st.integers(0, 80)))


@GIVEN_SETTINGS
@given(data=st.data(), follower=cache_entries(), answer=answers)
def test_truncation_generations_agree(data: st.DataObject, follower: list[tuple[int, int]],
                                      answer: tuple[int, int] | None) -> None:
    caches = both_caches(follower)
    leo, hw = positions(data.draw, follower)
    # Now and then an invalid position pair (HW above LEO) that both must refuse alike.
    if data.draw(st.integers(0, 9)) == 0:
        hw = leo + 1
    same(caches, lambda m, c: m.truncate_to_high_watermark(hw, leo), "truncate_to_high_watermark")
    leader_end = None if answer is None else answer[1]
    same(caches, lambda m, c: m.kip101_truncation(leader_end, leo, hw), "kip101_truncation")
    same(caches, lambda m, c: m.kip279_truncation(answer, c, leo, hw), "kip279_truncation")
    request, current = data.draw(st.integers(0, 4)), data.draw(st.integers(0, 4))
    error = data.draw(st.sampled_from([None, None, "fenced_leader_epoch", "unknown_leader_epoch",
                                       "bogus"]))
    same(caches, lambda m, c: m.kip320_truncation(answer, c, leo, hw, request_epoch=request,
                                                  current_epoch=current, error=error),
         f"kip320_truncation(request={request}, current={current}, error={error})")
    if answer is not None:
        same(caches, lambda m, c: m.diverging_epoch_truncation(answer, c, leo, hw),
             "diverging_epoch_truncation")
    request_or_none = data.draw(st.one_of(st.none(), st.integers(0, 4)))
    same(caches, lambda m, c: m.check_current_leader_epoch(request_or_none, current),
         f"check_current_leader_epoch({request_or_none}, {current})")


@GIVEN_SETTINGS
@given(data=st.data(), leader=cache_entries(), follower=cache_entries())
def test_leader_answers_and_fetch_checks_agree(data: st.DataObject, leader: list[tuple[int, int]],
                                               follower: list[tuple[int, int]]) -> None:
    """The leader answers for the follower's latest epoch; the follower acts on that answer,
    and the leader checks the follower's next fetch."""
    leaders, followers = both_caches(leader), both_caches(follower)
    leader_leo, _ = positions(data.draw, leader)
    leo, hw = positions(data.draw, follower)
    log_start = data.draw(st.integers(0, leader_leo + 2))
    latest = followers[1].latest_epoch
    answer = same(leaders, lambda m, c: c.end_offset_for(latest, leader_leo), "end_offset_for")[1]
    answer = None if answer is None else answer[1]
    pairs = tuple(zip(leaders, followers))
    same(pairs, lambda m, p: m.kip279_truncation(answer, p[1], leo, hw), "kip279_truncation")
    if answer is not None:
        same(pairs, lambda m, p: m.diverging_epoch_truncation(answer, p[1], leo, hw),
             "diverging_epoch_truncation")
    fetch_offset = data.draw(st.one_of(st.just(leo), st.integers(0, max(leo, leader_leo) + 3)))
    last_fetched = data.draw(st.one_of(st.just(latest if latest is not None else 0),
                                       st.integers(0, 14)))
    same(leaders, lambda m, c: m.leader_fetch_check(c, leader_leo, log_start, fetch_offset,
                                                    last_fetched),
         f"leader_fetch_check({leader_leo}, {log_start}, {fetch_offset}, {last_fetched})")


@pytest.mark.parametrize("probe", range(3))
def test_norm_tells_the_modules_apart_only_by_value(probe: int) -> None:
    """Guard against a vacuous comparison: different values normalise differently."""
    batches = [m.RecordBatch(probe, 1, [probe, 2]) for m in IMPLS]
    assert norm(batches[0]) == norm(batches[1])
    assert norm(batches[0]) != norm(core.RecordBatch(probe, 2, [probe, 2]))
    assert norm(True) != norm(1)
