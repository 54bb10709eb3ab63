"""Contract of RecordBatch, LeaderEpochCache, ProducerStateManager and ReplicaLog, rule by rule
as ``docs/core-semantics.md`` states them, run against both implementations."""

from __future__ import annotations

import pytest

from epochlab.errors import (
    InvalidArgumentError,
    InvalidProducerEpochError,
    InvalidRecordBatchError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    UnexpectedAppendOffsetError,
)

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def producer(pid=7, epoch=0, seq=0):
    return {"producer_id": pid, "producer_epoch": epoch, "base_sequence": seq}


# RecordBatch


def test_record_batch_fields(impl):
    b = impl.RecordBatch(10, 3, [7, 8, 9])
    assert (b.base_offset, b.last_offset, b.partition_leader_epoch) == (10, 12, 3)
    assert b.records == (7, 8, 9)
    assert (b.record_count, len(b)) == (3, 3)
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.last_sequence) == (None,) * 4
    assert (b.is_transactional, b.is_control) == (False, False)


def test_record_batch_is_a_frozen_hashable_value(impl):
    a = impl.RecordBatch(0, 1, [5, 6], **producer())
    b = impl.RecordBatch(0, 1, (5, 6), **producer())
    assert a == b and hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a != impl.RecordBatch(0, 2, [5, 6], **producer())
    assert a != impl.RecordBatch(0, 1, [5, 6], **producer(seq=1))
    assert "RecordBatch" in repr(a)
    with pytest.raises(AttributeError):
        a.base_offset = 3


def test_with_base_offset_moves_the_batch_only(impl):
    b = impl.RecordBatch(0, 4, [1, 2], **producer(seq=9), is_transactional=True)
    moved = b.with_base_offset(100)
    assert (moved.base_offset, moved.last_offset) == (100, 101)
    assert moved == impl.RecordBatch(100, 4, [1, 2], **producer(seq=9), is_transactional=True)
    assert b.base_offset == 0
    with pytest.raises(InvalidRecordBatchError):
        b.with_base_offset(INT64_MAX)


@pytest.mark.parametrize(
    ("base", "n", "last"),
    [(0, 1, 0), (5, 3, 7), (INT32_MAX, 1, INT32_MAX), (INT32_MAX, 2, 0), (INT32_MAX - 1, 4, 1)],
)
def test_last_sequence_wraps_past_int32_max(impl, base, n, last):
    b = impl.RecordBatch(0, 0, list(range(n)), **producer(seq=base))
    assert b.last_sequence == last


def test_last_offset_must_fit(impl):
    # The log end offset after a batch (last offset + 1) must itself be an offset.
    assert impl.RecordBatch(INT64_MAX - 1, 0, [1]).last_offset == INT64_MAX - 1
    with pytest.raises(InvalidRecordBatchError):
        impl.RecordBatch(INT64_MAX, 0, [1])
    with pytest.raises(InvalidRecordBatchError):
        impl.RecordBatch(INT64_MAX - 1, 0, [1, 2])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"records": []},
        {"producer_id": 1},
        {"producer_id": 1, "producer_epoch": 0},
        {"base_sequence": 0},
        {"is_transactional": True},
        {"is_control": True, "records": [1]},
        {"is_control": True, "records": [0, 1], **producer()},
        {"is_control": True, "records": [2**32], **producer()},  # coordinator epoch 2^31
    ],
)
def test_impossible_batches_are_refused(impl, kwargs):
    kwargs = {"records": [1], **kwargs}
    records = kwargs.pop("records")
    with pytest.raises(InvalidRecordBatchError):
        impl.RecordBatch(0, 0, records, **kwargs)


def test_control_batches_carry_one_marker(impl):
    commit = impl.RecordBatch(3, 1, [1], **producer(), is_transactional=True, is_control=True)
    abort = impl.RecordBatch(3, 1, [0], **producer(), is_control=True)
    assert commit.is_control and abort.is_control and commit.records == (1,)


@pytest.mark.parametrize(
    ("args", "kwargs", "argument", "value"),
    [
        ((-1, 0, [1]), {}, "base_offset", -1),
        ((INT64_MAX + 1, 0, [1]), {}, "base_offset", INT64_MAX + 1),
        ((0, -1, [1]), {}, "partition_leader_epoch", -1),
        ((0, INT32_MAX + 1, [1]), {}, "partition_leader_epoch", INT32_MAX + 1),
        ((0, 0, [1, -1]), {}, "records", -1),
        ((0, 0, [2**64]), {}, "records", 2**64),
        ((0, 0, [1]), producer(pid=-1), "producer_id", -1),
        ((0, 0, [1]), producer(pid=INT64_MAX + 1), "producer_id", INT64_MAX + 1),
        ((0, 0, [1]), producer(epoch=32768), "producer_epoch", 32768),
        ((0, 0, [1]), producer(seq=INT32_MAX + 1), "base_sequence", INT32_MAX + 1),
        ((0, 0, [1]), producer(seq=-1), "base_sequence", -1),
    ],
)
def test_record_batch_domains(impl, args, kwargs, argument, value):
    with pytest.raises(InvalidArgumentError) as info:
        impl.RecordBatch(*args, **kwargs)
    assert (info.value.argument, info.value.value) == (argument, value)


def test_incomplete_producer_fields_are_a_bad_batch_whatever_their_values(impl):
    with pytest.raises(InvalidRecordBatchError):
        impl.RecordBatch(0, 0, [1], producer_id=-1)


def test_record_batch_domain_edges_are_accepted(impl):
    b = impl.RecordBatch(0, INT32_MAX, [2**64 - 1, 0], producer_id=INT64_MAX,
                         producer_epoch=32767, base_sequence=INT32_MAX)
    assert b.records == (2**64 - 1, 0)
    assert b.last_sequence == 0


def test_non_int_offsets_are_type_errors(impl):
    with pytest.raises(TypeError):
        impl.RecordBatch("0", 0, [1])
    with pytest.raises(TypeError):
        impl.RecordBatch(0, 1.0, [1])


# LeaderEpochCache


@pytest.mark.parametrize("entries", [[(1, 0), (1, 5)], [(2, 0), (1, 5)],
                                     [(0, 9), (1, 3)], [(-1, 0)], [(0, -1)]])
def test_cache_constructor_requires_increasing_entries(impl, entries):
    with pytest.raises(InvalidArgumentError) as info:
        impl.LeaderEpochCache(entries)
    assert info.value.argument == "entries"


def test_cache_constructor_accepts_epochs_sharing_a_start_offset(impl):
    # What Kafka 0.11's assign rule produces for a leader elected twice without writes.
    assert impl.LeaderEpochCache([(1, 5), (2, 5)]).entries() == [(1, 5), (2, 5)]


def test_cache_accessors(impl):
    c = impl.LeaderEpochCache([(0, 0), (1, 120)])
    assert c.entries() == [(0, 0), (1, 120)]
    assert (c.latest_epoch, c.earliest_epoch, len(c)) == (1, 0, 2)
    empty = impl.LeaderEpochCache()
    assert (empty.latest_epoch, empty.earliest_epoch, len(empty), empty.entries()) == (None, None, 0, [])
    assert c == impl.LeaderEpochCache([(0, 0), (1, 120)]) and c != empty
    c.entries().append((5, 500))
    assert len(c) == 2
    clone = c.copy()
    clone.assign(2, 200)
    assert c.entries() == [(0, 0), (1, 120)]
    c.clear()
    assert c.entries() == [] and clone.latest_epoch == 2


@pytest.mark.parametrize(
    ("entries", "assign", "changed", "after"),
    [
        ([], (0, 0), True, [(0, 0)]),
        # the latest epoch at or after its start: no-op
        ([(0, 0), (2, 5)], (2, 5), False, [(0, 0), (2, 5)]),
        ([(0, 0), (2, 5)], (2, 9), False, [(0, 0), (2, 5)]),
        # the latest epoch at a smaller start replaces it
        ([(0, 0), (2, 5)], (2, 3), True, [(0, 0), (2, 3)]),
        # a lower epoch evicts every trailing entry with a greater-or-equal epoch
        ([(0, 0), (1, 10), (3, 20)], (2, 15), True, [(0, 0), (1, 10), (2, 15)]),
        ([(0, 0), (3, 10)], (2, 20), True, [(0, 0), (2, 20)]),
        # a new epoch at an earlier offset evicts entries starting at or after it
        ([(0, 0), (1, 10)], (2, 5), True, [(0, 0), (2, 5)]),
        ([(0, 0), (1, 10)], (2, 10), True, [(0, 0), (2, 10)]),
        ([(1, 3), (2, 6)], (0, 0), True, [(0, 0)]),
        ([(0, 0), (1, 10)], (2, 11), True, [(0, 0), (1, 10), (2, 11)]),
    ],
)
def test_assign_evicts_conflicting_tail(impl, entries, assign, changed, after):
    c = impl.LeaderEpochCache(entries)
    assert c.assign(*assign) is changed
    assert c.entries() == after


@pytest.mark.parametrize(
    ("entries", "assign", "changed", "after"),
    [
        ([], (3, 7), True, [(3, 7)]),
        ([(0, 0), (3, 10)], (2, 20), False, [(0, 0), (3, 10)]),
        ([(0, 0), (3, 10)], (4, 5), False, [(0, 0), (3, 10)]),
        ([(0, 0), (3, 10)], (3, 4), False, [(0, 0), (3, 10)]),
        ([(0, 0), (3, 10)], (3, 12), False, [(0, 0), (3, 10)]),
        ([(0, 0), (3, 10)], (4, 10), True, [(0, 0), (3, 10), (4, 10)]),
    ],
)
def test_assign_kip101_never_evicts(impl, entries, assign, changed, after):
    c = impl.LeaderEpochCache(entries)
    assert c.assign_kip101(*assign) is changed
    assert c.entries() == after


@pytest.mark.parametrize(
    ("requested", "current", "kip279", "kip101"),
    [
        (None, None, None, None),
        (4, (4, 50), (4, 50), 50),  # latest epoch: the log end offset
        (2, (2, 20), (2, 20), 20),
        (3, (2, 20), (2, 20), 20),  # unknown epoch between two: largest lower one
        (1, (1, 10), None, None),  # below every epoch: echo (2.1+) vs UNDEFINED
        (0, (0, 10), None, None),
        (5, None, None, None),  # above every epoch
    ],
)
def test_end_offset_for_three_generations(impl, requested, current, kip279, kip101):
    c = impl.LeaderEpochCache([(2, 10), (4, 20)])
    assert c.end_offset_for(requested, 50) == current
    assert c.end_offset_for_kip279(requested, 50) == kip279
    assert c.end_offset_for_kip101(requested, 50) == kip101


def test_end_offset_for_doc_example(impl):
    c = impl.LeaderEpochCache()
    assert c.assign(0, 0) and c.assign(1, 120)
    assert c.end_offset_for(0, 200) == (0, 120)
    assert c.end_offset_for(1, 200) == (1, 200)


def test_empty_cache_kip101_answers_undefined_with_its_leo(impl):
    # KAFKA-6857: a 0.11 leader with an empty cache answered its LEO to an UNDEFINED request.
    empty = impl.LeaderEpochCache()
    assert empty.end_offset_for_kip101(None, 42) == 42
    assert empty.end_offset_for_kip101(0, 42) is None
    assert empty.end_offset_for(None, 42) is None
    assert empty.end_offset_for(0, 42) is None
    assert empty.end_offset_for_kip279(None, 42) is None
    assert impl.LeaderEpochCache([(0, 0)]).end_offset_for_kip101(None, 42) is None


@pytest.mark.parametrize(("end", "after"), [(100, [(0, 0), (1, 5), (2, 9)]), (9, [(0, 0), (1, 5)]),
                                            (6, [(0, 0), (1, 5)]), (5, [(0, 0)]), (0, [])])
def test_truncate_from_end(impl, end, after):
    c = impl.LeaderEpochCache([(0, 0), (1, 5), (2, 9)])
    c.truncate_from_end(end)
    assert c.entries() == after


@pytest.mark.parametrize(
    ("start", "after"),
    [
        (0, [(0, 0), (1, 5), (2, 9)]),
        (3, [(0, 3), (1, 5), (2, 9)]),
        (5, [(1, 5), (2, 9)]),
        (6, [(1, 6), (2, 9)]),
        (100, [(2, 100)]),
    ],
)
def test_truncate_from_start_reinserts_the_last_dropped_epoch(impl, start, after):
    c = impl.LeaderEpochCache([(0, 0), (1, 5), (2, 9)])
    c.truncate_from_start(start)
    assert c.entries() == after


def test_truncate_from_start_before_every_entry_changes_nothing(impl):
    c = impl.LeaderEpochCache([(3, 10)])
    c.truncate_from_start(5)
    assert c.entries() == [(3, 10)]


@pytest.mark.parametrize(("offset", "epoch"), [(0, None), (4, None), (5, 1), (8, 1), (9, 2), (10**6, 2)])
def test_epoch_for_offset(impl, offset, epoch):
    assert impl.LeaderEpochCache([(1, 5), (2, 9)]).epoch_for_offset(offset) == epoch


def test_undefined_epoch_request_answers_undefined(impl):
    # Kafka answers UNDEFINED_EPOCH_OFFSET to a request for UNDEFINED_EPOCH (-1), whatever the
    # cache holds (LeaderEpochFileCache.endOffsetFor, KAFKA-6857); it is not a bad argument.
    c = impl.LeaderEpochCache([(0, 0), (2, 5)])
    assert c.end_offset_for(-1, 9) is None
    assert c.end_offset_for_kip279(-1, 9) is None
    assert c.end_offset_for_kip101(-1, 9) is None
    assert impl.LeaderEpochCache().end_offset_for(-1, 4) is None
    log = impl.ReplicaLog()
    log.append_as_leader([1, 2], leader_epoch=0)
    assert log.end_offset_for_epoch(-1) is None


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda c: c.assign(-1, 0), "epoch"),
        (lambda c: c.assign(INT32_MAX + 1, 0), "epoch"),
        (lambda c: c.assign(0, -1), "start_offset"),
        (lambda c: c.assign_kip101(0, INT64_MAX + 1), "start_offset"),
        (lambda c: c.end_offset_for(-2, 0), "requested_epoch"),
        (lambda c: c.end_offset_for(0, -1), "log_end_offset"),
        (lambda c: c.end_offset_for_kip279(INT32_MAX + 1, 0), "requested_epoch"),
        (lambda c: c.end_offset_for_kip101(0, -5), "log_end_offset"),
        (lambda c: c.truncate_from_end(-1), "end_offset"),
        (lambda c: c.truncate_from_start(-1), "start_offset"),
        (lambda c: c.epoch_for_offset(-1), "offset"),
    ],
)
def test_cache_domains(impl, call, argument):
    c = impl.LeaderEpochCache([(0, 0)])
    with pytest.raises(InvalidArgumentError) as info:
        call(c)
    assert info.value.argument == argument
    assert c.entries() == [(0, 0)]


# ProducerStateManager


def batch(impl, base, n=1, *, pid=7, epoch=0, seq=0, leader_epoch=0, **kwargs):
    return impl.RecordBatch(base, leader_epoch, list(range(n)), producer_id=pid,
                            producer_epoch=epoch, base_sequence=seq, **kwargs)


def test_unknown_producer_accepts_any_sequence(impl):
    psm = impl.ProducerStateManager()
    assert psm.check_leader_append(batch(impl, 0, seq=42)) is None
    assert psm.check_leader_append(impl.RecordBatch(0, 0, [1])) is None
    psm.update(impl.RecordBatch(0, 0, [1]))
    assert len(psm) == 0 and psm.producer_ids() == []
    assert psm.entry(7) is None


def test_producer_entry_shapes(impl):
    psm = impl.ProducerStateManager()
    psm.update(batch(impl, 0, 3, pid=9, epoch=2, seq=0))
    psm.update(batch(impl, 3, 2, pid=9, epoch=2, seq=3))
    psm.update(batch(impl, 5, 1, pid=4, epoch=0, seq=0))
    assert psm.entry(9) == (2, [(0, 2, 0, 2), (3, 4, 3, 4)])
    assert psm.producer_ids() == [4, 9]
    assert psm.snapshot() == [(4, 0, [(0, 0, 5, 5)]), (9, 2, [(0, 2, 0, 2), (3, 4, 3, 4)])]
    assert len(psm) == 2
    clone = psm.copy()
    assert clone == psm
    clone.update(batch(impl, 6, 1, pid=4, epoch=0, seq=1))
    assert clone != psm and psm.entry(4) == (0, [(0, 0, 5, 5)])
    psm.entry(9)[1].clear()
    assert len(psm.entry(9)[1]) == 2
    psm.clear()
    assert len(psm) == 0 and psm.snapshot() == []


def test_duplicate_returns_original_offsets_without_state_change(impl):
    psm = impl.ProducerStateManager()
    psm.update(batch(impl, 10, 3, seq=0))
    psm.update(batch(impl, 13, 2, seq=3))
    before = psm.snapshot()
    assert psm.check_leader_append(batch(impl, 50, 3, seq=0)) == (10, 12)
    assert psm.check_leader_append(batch(impl, 50, 2, seq=3)) == (13, 14)
    assert psm.check_leader_append(batch(impl, 50, 1, seq=5)) is None
    assert psm.snapshot() == before


def test_duplicate_needs_the_same_sequence_range(impl):
    psm = impl.ProducerStateManager()
    psm.update(batch(impl, 0, 3, seq=0))
    # same first sequence, different last sequence: not a duplicate, and out of order
    with pytest.raises(OutOfOrderSequenceError) as info:
        psm.check_leader_append(batch(impl, 3, 2, seq=0))
    assert info.value.expected_sequence == 3


def test_older_producer_epoch_is_fenced(impl):
    psm = impl.ProducerStateManager()
    psm.update(batch(impl, 0, epoch=3, seq=0))
    with pytest.raises(InvalidProducerEpochError) as info:
        psm.check_leader_append(batch(impl, 1, epoch=2, seq=1))
    e = info.value
    assert (e.producer_id, e.producer_epoch, e.current_epoch) == (7, 2, 3)
    # even a batch that would be a duplicate in the older epoch
    with pytest.raises(InvalidProducerEpochError):
        psm.check_leader_append(batch(impl, 1, epoch=2, seq=0))


def test_epoch_bump_must_restart_at_sequence_zero(impl):
    psm = impl.ProducerStateManager()
    psm.update(batch(impl, 0, 2, epoch=1, seq=0))
    assert psm.check_leader_append(batch(impl, 2, epoch=2, seq=0)) is None
    with pytest.raises(OutOfOrderSequenceError) as info:
        psm.check_leader_append(batch(impl, 2, epoch=2, seq=2))
    e = info.value
    assert (e.producer_id, e.producer_epoch, e.base_sequence, e.expected_sequence) == (7, 2, 2, 0)


def test_out_of_order_names_the_expected_sequence(impl):
    psm = impl.ProducerStateManager()
    psm.update(batch(impl, 0, 3, seq=0))
    assert psm.check_leader_append(batch(impl, 3, seq=3)) is None
    for wrong in (1, 4, 100):
        with pytest.raises(OutOfOrderSequenceError) as info:
            psm.check_leader_append(batch(impl, 3, seq=wrong))
        assert (info.value.base_sequence, info.value.expected_sequence) == (wrong, 3)


def test_known_producer_without_batches_expects_zero(impl):
    psm = impl.ProducerStateManager()
    psm.update(batch(impl, 0, epoch=1, seq=0, is_control=True))
    assert psm.entry(7) == (1, [])
    assert psm.check_leader_append(batch(impl, 1, epoch=1, seq=0)) is None
    with pytest.raises(OutOfOrderSequenceError) as info:
        psm.check_leader_append(batch(impl, 1, epoch=1, seq=1))
    assert info.value.expected_sequence == 0


def test_sequence_wraps_to_zero(impl):
    psm = impl.ProducerStateManager()
    psm.update(batch(impl, 0, 2, seq=INT32_MAX - 1))
    assert psm.entry(7) == (0, [(INT32_MAX - 1, INT32_MAX, 0, 1)])
    assert psm.check_leader_append(batch(impl, 2, 3, seq=0)) is None
    with pytest.raises(OutOfOrderSequenceError) as info:
        psm.check_leader_append(batch(impl, 2, seq=INT32_MAX))
    assert info.value.expected_sequence == 0


def test_only_five_batches_are_retained(impl):
    psm = impl.ProducerStateManager()
    for i in range(6):
        psm.update(batch(impl, i * 2, 2, seq=i * 2))
    cached = psm.entry(7)[1]
    assert [meta[0] for meta in cached] == [2, 4, 6, 8, 10]
    # the 6th-oldest retry is no longer recognised: it is out of order
    with pytest.raises(OutOfOrderSequenceError) as info:
        psm.check_leader_append(batch(impl, 99, 2, seq=0))
    assert info.value.expected_sequence == 12
    assert psm.check_leader_append(batch(impl, 99, 2, seq=2)) == (2, 3)


def test_update_follows_even_an_epoch_regression(impl):
    psm = impl.ProducerStateManager()
    psm.update(batch(impl, 0, 2, epoch=5, seq=0))
    psm.update(batch(impl, 2, 1, epoch=3, seq=9))
    assert psm.entry(7) == (3, [(9, 9, 2, 2)])


def test_control_batch_changes_epoch_but_caches_nothing(impl):
    psm = impl.ProducerStateManager()
    psm.update(batch(impl, 0, 2, epoch=0, seq=0, is_transactional=True))
    psm.update(batch(impl, 2, 1, epoch=0, seq=0, is_transactional=True, is_control=True))
    assert psm.entry(7) == (0, [(0, 1, 0, 1)])
    psm.update(batch(impl, 3, 1, epoch=1, seq=0, is_control=True))
    assert psm.entry(7) == (1, [])


def test_producer_state_domains_and_types(impl):
    psm = impl.ProducerStateManager()
    with pytest.raises(InvalidArgumentError) as info:
        psm.entry(-1)
    assert info.value.argument == "producer_id"
    with pytest.raises(TypeError):
        psm.update((0, 0, [1]))


# ReplicaLog


def test_new_log(impl):
    log = impl.ReplicaLog(5)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.recovery_point) == (5, 5, 5, 5)
    assert (log.batch_count, log.record_count, log.latest_epoch, len(log)) == (0, 0, None, 0)
    assert log.kip101_epoch_cache is False
    assert impl.ReplicaLog(kip101_epoch_cache=True).kip101_epoch_cache is True
    assert log.batches() == [] and log.holes() == [] and log.epoch_entries() == []


def test_append_as_leader_assigns_offsets_and_epoch(impl):
    log = impl.ReplicaLog()
    info = log.append_as_leader([1, 2, 3], 0)
    assert (info.base_offset, info.last_offset, info.duplicate) == (0, 2, False)
    info = log.append_as_leader([4], 2)
    assert (info.base_offset, info.last_offset, info.duplicate) == (3, 3, False)
    assert log.log_end_offset == 4 and log.batch_count == 2 and log.record_count == 4
    assert len(log) == 2
    assert log.batches() == [impl.RecordBatch(0, 0, [1, 2, 3]), impl.RecordBatch(3, 2, [4])]
    assert log.epoch_entries() == [(0, 0), (2, 3)] and log.latest_epoch == 2
    assert log.high_watermark == 0  # appending never moves the high watermark


def test_append_as_leader_deduplicates_retries(impl):
    log = impl.ReplicaLog()
    first = log.append_as_leader([1, 2], 0, **producer(seq=0))
    log.append_as_leader([3], 0, **producer(seq=2))
    retry = log.append_as_leader([1, 2], 1, **producer(seq=0))
    assert (retry.base_offset, retry.last_offset, retry.duplicate) == (0, 1, True)
    assert (first.base_offset, first.last_offset) == (0, 1)
    # Kafka assigns the batch's epoch at the log end offset before it recognises the duplicate
    # (UnifiedLog.append: maybeAssignEpochStartOffset, then analyzeAndValidateProducerState;
    # found by the differential test against Kafka 4.3.1's UnifiedLog).
    assert log.log_end_offset == 3 and log.epoch_entries() == [(0, 0), (1, 3)]
    assert log.producer_state().entry(7) == (0, [(0, 1, 0, 1), (2, 2, 2, 2)])


def test_refused_leader_append_changes_nothing_but_the_epoch_cache(impl):
    # The epoch is assigned before producer state is validated (UnifiedLog.append), so a
    # refused batch of a new epoch still enters the cache at the log end offset; a batch
    # refused earlier (empty, bad arguments) changes nothing at all.
    log = impl.ReplicaLog()
    log.append_as_leader([1], 0, **producer(epoch=2, seq=0))
    before = (log.batches(), log.log_end_offset, log.producer_state().snapshot())
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader([2], 1, **producer(epoch=2, seq=5))
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader([2], 1, **producer(epoch=1, seq=1))
    with pytest.raises(InvalidRecordBatchError):
        log.append_as_leader([], 1)
    with pytest.raises(InvalidArgumentError) as info:
        log.append_as_leader([1], -1)
    assert info.value.argument == "leader_epoch"
    assert (log.batches(), log.log_end_offset, log.producer_state().snapshot()) == before
    assert log.epoch_entries() == [(0, 0), (1, 1)]


def test_append_as_leader_transactional(impl):
    log = impl.ReplicaLog()
    log.append_as_leader([5, 6], 0, **producer(), is_transactional=True)
    assert log.batches()[0].is_transactional
    with pytest.raises(InvalidRecordBatchError):
        log.append_as_leader([5], 0, is_transactional=True)


def test_append_many_as_leader(impl):
    log = impl.ReplicaLog()
    assert log.append_many_as_leader(3, [2, 3, 1], [10, 11, 12, 13, 14, 15]) == 6
    assert [(b.base_offset, b.last_offset, b.records) for b in log.batches()] == [
        (0, 1, (10, 11)), (2, 4, (12, 13, 14)), (5, 5, (15,))]
    assert log.epoch_entries() == [(3, 0)]
    assert log.append_many_as_leader(4, [], []) == 6


@pytest.mark.parametrize(("sizes", "records", "argument"),
                         [([2, 2], [1, 2, 3], "batch_sizes"), ([2, 0, 1], [1, 2, 3], "batch_sizes"),
                          ([1], [-1], "records"), ([2**32], [1], "batch_sizes")])
def test_append_many_as_leader_is_all_or_nothing(impl, sizes, records, argument):
    log = impl.ReplicaLog()
    log.append_as_leader([0], 0)
    with pytest.raises(InvalidArgumentError) as info:
        log.append_many_as_leader(1, sizes, records)
    assert info.value.argument == argument
    assert log.log_end_offset == 1 and log.batch_count == 1 and log.epoch_entries() == [(0, 0)]


def test_append_as_follower_keeps_offsets_and_epochs(impl):
    log = impl.ReplicaLog(10)
    log.append_as_follower(impl.RecordBatch(10, 4, [1, 2]))
    log.append_as_follower(impl.RecordBatch(12, 6, [3]))
    assert log.log_end_offset == 13 and log.epoch_entries() == [(4, 10), (6, 12)]
    with pytest.raises(UnexpectedAppendOffsetError) as info:
        log.append_as_follower(impl.RecordBatch(12, 6, [3]))
    assert (info.value.first_offset, info.value.log_end_offset) == (12, 13)
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(impl.RecordBatch(14, 6, [3]))  # a gap is refused too
    assert log.log_end_offset == 13


def test_follower_appends_skip_producer_checks(impl):
    log = impl.ReplicaLog()
    log.append_as_follower(batch(impl, 0, 2, epoch=3, seq=0))
    log.append_as_follower(batch(impl, 2, 1, epoch=3, seq=17))  # out of order: accepted
    log.append_as_follower(batch(impl, 3, 1, epoch=1, seq=4))  # older producer epoch: accepted
    assert log.log_end_offset == 4
    assert log.producer_state().entry(7) == (1, [(4, 4, 3, 3)])


def test_append_batches_as_follower_is_all_or_nothing(impl):
    log = impl.ReplicaLog()
    chain = [impl.RecordBatch(0, 1, [1, 2]), impl.RecordBatch(2, 1, [3]), impl.RecordBatch(3, 2, [4])]
    assert log.append_batches_as_follower(chain) == 4
    assert log.epoch_entries() == [(1, 0), (2, 3)]
    broken = [impl.RecordBatch(4, 2, [5]), impl.RecordBatch(6, 2, [6])]
    with pytest.raises(UnexpectedAppendOffsetError) as info:
        log.append_batches_as_follower(broken)
    assert info.value.first_offset == 6
    assert log.log_end_offset == 4 and log.batch_count == 3
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_batches_as_follower([impl.RecordBatch(5, 2, [5])])
    assert log.append_batches_as_follower([]) == 4


def test_kip101_log_ignores_a_lower_epoch_where_the_current_rule_evicts(impl, log_from):
    old = log_from([(0, 2), (2, 2)], kip101_epoch_cache=True)
    new = log_from([(0, 2), (2, 2)])
    for log in (old, new):
        log.append_as_follower(impl.RecordBatch(4, 1, [9]))
    assert old.epoch_entries() == [(0, 0), (2, 2)]
    assert new.epoch_entries() == [(0, 0), (1, 4)]
    assert old.assign_epoch(1, 5) is False and old.assign_epoch(3, 5) is True
    assert new.assign_epoch(3, 5) is True


def test_read(impl, log_from):
    log = log_from([(0, 3), (0, 2), (1, 4)])  # batches [0,2] [3,4] [5,8]
    bases = lambda batches: [b.base_offset for b in batches]  # noqa: E731
    assert bases(log.read(0)) == [0, 3, 5]
    assert bases(log.read(4)) == [3, 5]  # the first batch may start before from_offset
    assert bases(log.read(3, max_batches=1)) == [3]
    assert bases(log.read(0, max_batches=0)) == []
    assert bases(log.read(0, max_offset=5)) == [0, 3]
    assert bases(log.read(0, max_offset=4)) == [0]  # the straddling batch [3,4] is excluded
    assert bases(log.read(0, max_offset=9)) == [0, 3, 5]
    assert bases(log.read(0, max_offset=0)) == []
    assert log.read(9) == []


@pytest.mark.parametrize("offset", [4, 13])
def test_read_out_of_range(impl, log_from, offset):
    log = log_from([(0, 3)], log_start_offset=5)
    with pytest.raises(OffsetOutOfRangeError) as info:
        log.read(offset)
    e = info.value
    assert (e.offset, e.log_start_offset, e.log_end_offset) == (offset, 5, 8)


def test_batch_lookup(impl, log_from):
    log = log_from([(0, 3), (1, 2)], first_value=100)
    assert log.batch_containing(4) == impl.RecordBatch(3, 1, [103, 104])
    assert log.batch_containing(5) is None
    assert [log.value_at(o) for o in range(6)] == [100, 101, 102, 103, 104, None]


def test_truncate_to_a_batch_boundary(impl, log_from):
    log = log_from([(0, 2), (1, 2), (2, 2)])
    log.update_high_watermark(5)
    log.flush()
    assert log.truncate_to(4) is True
    assert (log.log_end_offset, log.high_watermark, log.recovery_point) == (4, 4, 4)
    assert log.epoch_entries() == [(0, 0), (1, 2)]
    assert log.holes() == [] and log.batch_count == 2


def test_mid_batch_truncation_leaves_a_hole(impl, log_from):
    log = log_from([(0, 2), (1, 3)])  # [0,1] [2,4]
    assert log.truncate_to(3) is True
    assert log.log_end_offset == 3 and log.batch_count == 1
    assert log.holes() == [(2, 3)]
    assert log.value_at(2) is None and log.batch_containing(2) is None
    assert log.epoch_entries() == [(0, 0), (1, 2)]  # the entry starts below the target
    assert [b.base_offset for b in log.read(2)] == []
    log.append_as_follower(impl.RecordBatch(3, 1, [7]))
    assert log.holes() == [(2, 3)]


def test_truncate_at_or_beyond_leo_only_trims_the_epoch_cache(impl, log_from):
    log = log_from([(0, 2)])
    assert log.assign_epoch(3, 2) is True  # makeLeader: an epoch with no data yet
    assert log.truncate_to(5) is False
    assert log.epoch_entries() == [(0, 0)]  # KAFKA-10706
    assert log.log_end_offset == 2 and log.batch_count == 1
    assert log.truncate_to(2) is False


def test_truncate_below_log_start_starts_over(impl, log_from):
    log = log_from([(0, 3)], log_start_offset=10)
    assert log.truncate_to(4) is True
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.recovery_point) == (4, 4, 4, 4)
    assert log.batch_count == 0 and log.epoch_entries() == []


def test_truncation_rebuilds_producer_state(impl):
    log = impl.ReplicaLog()
    log.append_as_leader([1], 0, **producer(seq=0))
    log.append_as_leader([2], 0, **producer(seq=1))
    log.append_as_leader([3], 0, **producer(pid=8, seq=0))
    log.truncate_to(1)
    assert log.producer_state().snapshot() == [(7, 0, [(0, 0, 0, 0)])]
    # the retried batch is appended again rather than deduplicated
    info = log.append_as_leader([2], 0, **producer(seq=1))
    assert (info.base_offset, info.duplicate) == (1, False)


def test_truncate_fully_and_start_at(impl, log_from):
    log = log_from([(0, 3)])
    log.append_as_leader([1], 0, **producer())
    log.truncate_fully_and_start_at(50)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.recovery_point) == (50, 50, 50, 50)
    assert log.batch_count == 0 and log.epoch_entries() == [] and len(log.producer_state()) == 0


def test_flush(impl, log_from):
    log = log_from([(0, 5)])
    log.flush(2)
    assert log.recovery_point == 2
    log.flush(1)
    assert log.recovery_point == 2  # never backwards
    log.flush(0)
    assert log.recovery_point == 2
    log.flush(99)
    assert log.recovery_point == 5  # never past the log end
    log.append_as_leader([1], 0)
    log.flush()
    assert log.recovery_point == 6


def test_drop_unflushed_drops_a_torn_batch_whole(impl, log_from):
    log = log_from([(0, 3), (1, 3), (2, 2)])  # [0,2] [3,5] [6,7]
    log.update_high_watermark(8)
    log.flush(4)
    assert log.drop_unflushed() == 5
    assert (log.log_end_offset, log.recovery_point, log.high_watermark) == (3, 3, 3)
    assert log.epoch_entries() == [(0, 0)] and log.batch_count == 1


def test_drop_unflushed_of_an_unflushed_log(impl, log_from):
    log = log_from([(0, 3)], log_start_offset=4)
    assert log.drop_unflushed() == 3
    assert (log.log_end_offset, log.recovery_point, log.batch_count) == (4, 4, 0)
    log = log_from([(0, 3)])
    log.flush()
    assert log.drop_unflushed() == 0 and log.log_end_offset == 3


def test_drop_unflushed_rebuilds_producer_state(impl):
    log = impl.ReplicaLog()
    log.append_as_leader([1], 0, **producer(seq=0))
    log.flush()
    log.append_as_leader([2], 0, **producer(seq=1))
    assert log.drop_unflushed() == 1
    assert log.producer_state().entry(7) == (0, [(0, 0, 0, 0)])


def test_high_watermark_is_clamped(impl, log_from):
    log = log_from([(0, 5)], log_start_offset=2)  # [2, 7)
    assert log.update_high_watermark(100) == 7
    assert log.update_high_watermark(4) == 4  # a follower's HW may go down
    assert log.update_high_watermark(0) == 2
    assert log.maybe_increment_high_watermark(5) is True and log.high_watermark == 5
    assert log.maybe_increment_high_watermark(3) is False and log.high_watermark == 5
    assert log.maybe_increment_high_watermark(5) is False
    assert log.maybe_increment_high_watermark(70) is True and log.high_watermark == 7


def test_epoch_queries_use_the_log_end(impl, log_from):
    log = log_from([(0, 2), (2, 3)])
    assert log.end_offset_for_epoch(2) == (2, 5)
    assert log.end_offset_for_epoch(1) == (0, 2)
    assert log.end_offset_for_epoch(None) is None
    assert log.epoch_for_offset(3) == 2
    assert log.assign_epoch(4, 5) is True
    assert log.end_offset_for_epoch(2) == (2, 5) and log.latest_epoch == 4


def test_accessors_return_independent_copies(impl, log_from):
    log = log_from([(0, 2)])
    log.append_as_leader([1], 1, **producer())
    cache, state, clone = log.epoch_cache(), log.producer_state(), log.copy()
    cache.assign(9, 100)
    state.clear()
    clone.append_as_leader([2], 5)
    clone.update_high_watermark(4)
    assert log.epoch_entries() == [(0, 0), (1, 2)]
    assert len(log.producer_state()) == 1
    assert log.log_end_offset == 3 and log.high_watermark == 0
    assert clone.log_end_offset == 4 and clone.epoch_entries() == [(0, 0), (1, 2), (5, 3)]
    assert log.epoch_cache() == impl.LeaderEpochCache([(0, 0), (1, 2)])


def test_rebuild_producer_state_replays_the_log(impl):
    log = impl.ReplicaLog()
    log.append_as_leader([1], 0, **producer(seq=0))
    log.append_as_leader([2, 3], 0, **producer(seq=1))
    expected = log.producer_state()
    log.rebuild_producer_state()
    assert log.producer_state() == expected


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda log: log.read(-1), "from_offset"),
        (lambda log: log.read(0, max_batches=-1), "max_batches"),
        (lambda log: log.read(0, max_batches=2**32), "max_batches"),
        (lambda log: log.read(0, max_offset=-1), "max_offset"),
        (lambda log: log.truncate_to(-1), "target_offset"),
        (lambda log: log.truncate_fully_and_start_at(INT64_MAX + 1), "new_offset"),
        (lambda log: log.flush(-1), "up_to"),
        (lambda log: log.update_high_watermark(-1), "offset"),
        (lambda log: log.maybe_increment_high_watermark(-1), "offset"),
        (lambda log: log.assign_epoch(-1, 0), "epoch"),
        (lambda log: log.assign_epoch(0, -1), "start_offset"),
        (lambda log: log.end_offset_for_epoch(INT32_MAX + 1), "requested_epoch"),
        (lambda log: log.epoch_for_offset(-1), "offset"),
        (lambda log: log.batch_containing(-1), "offset"),
        (lambda log: log.value_at(-1), "offset"),
        (lambda log: log.append_as_leader([1], 0, **producer(epoch=-1)), "producer_epoch"),
    ],
)
def test_log_domains(impl, log_from, call, argument):
    log = log_from([(0, 2)])
    with pytest.raises(InvalidArgumentError) as info:
        call(log)
    assert info.value.argument == argument
    assert log.log_end_offset == 2 and log.epoch_entries() == [(0, 0)]


def test_log_constructor_domain(impl):
    with pytest.raises(InvalidArgumentError) as info:
        impl.ReplicaLog(-1)
    assert (info.value.argument, info.value.value) == ("log_start_offset", -1)


def test_bulk_append_assigns_epochs_like_single_appends_under_the_kip101_rule(impl):
    # Found by the stateful differential test: 0.11's rule refuses (e, 0) after (0, 1) but
    # accepts (e, 1) at the second batch, so the bulk path must assign batch by batch.
    bulk, single = (impl.ReplicaLog(kip101_epoch_cache=True) for _ in range(2))
    for log in (bulk, single):
        log.assign_epoch(0, 1)
    bulk.append_many_as_leader(7, [1, 1], [5, 5])
    single.append_as_leader([5], 7)
    single.append_as_leader([5], 7)
    assert bulk.epoch_entries() == single.epoch_entries() == [(0, 1), (7, 1)]


def test_bulk_append_replaces_a_later_start_of_its_own_epoch(impl):
    # Found by the stateful differential test: (e, 1) is in the cache, the bulk append starts
    # at 0 in epoch e: like a single append it must move the entry to (e, 0).
    log = impl.ReplicaLog()
    log.assign_epoch(9, 1)
    log.append_many_as_leader(9, [1], [5])
    assert log.epoch_entries() == [(9, 0)]
