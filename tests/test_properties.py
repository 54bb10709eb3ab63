"""Hypothesis properties of the core rules, checked on both implementations."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

PROPERTY_SETTINGS = settings(max_examples=150, deadline=None,
                             suppress_health_check=[HealthCheck.function_scoped_fixture])

epochs = st.integers(0, 12)
offsets = st.integers(0, 60)
cache_ops = st.lists(
    st.one_of(
        st.tuples(st.just("assign"), epochs, offsets),
        st.tuples(st.just("assign_kip101"), epochs, offsets),
        st.tuples(st.just("truncate_from_end"), offsets),
        st.tuples(st.just("truncate_from_start"), offsets),
    ),
    max_size=30,
)


def increasing(entries, *, strict_offsets=True):
    return all(a[0] < b[0] and (a[1] < b[1] if strict_offsets else a[1] <= b[1])
               for a, b in zip(entries, entries[1:]))


@PROPERTY_SETTINGS
@given(ops=cache_ops)
def test_cache_stays_monotone_and_checkpoints_round_trip(impl, ops):
    cache = impl.LeaderEpochCache()
    for name, *args in ops:
        getattr(cache, name)(*args)
        entries = cache.entries()
        # assign_kip101 accepts a start offset equal to the latest one (Kafka 0.11's rule), the
        # only way to two entries with the same start
        assert increasing(entries, strict_offsets=False)
        if increasing(entries):
            text = cache.to_checkpoint_text()
            assert impl.LeaderEpochCache.from_checkpoint_text(text) == cache


@PROPERTY_SETTINGS
@given(ops=cache_ops.map(lambda ops: [op for op in ops if op[0] != "assign_kip101"]))
def test_current_rules_keep_the_cache_strictly_increasing(impl, ops):
    cache = impl.LeaderEpochCache()
    for name, *args in ops:
        getattr(cache, name)(*args)
        assert increasing(cache.entries())
        if name == "assign":
            assert cache.latest_epoch == args[0]


@PROPERTY_SETTINGS
@given(entries=st.lists(st.tuples(epochs, offsets), max_size=8), requested=epochs,
       extra=st.integers(0, 10))
def test_end_offset_generations_agree_where_they_should(impl, entries, requested, extra):
    cache = impl.LeaderEpochCache()
    for e, s in entries:
        cache.assign(e, s)
    leo = (cache.entries()[-1][1] if len(cache) else 0) + extra
    current = cache.end_offset_for(requested, leo)
    kip279 = cache.end_offset_for_kip279(requested, leo)
    kip101 = cache.end_offset_for_kip101(requested, leo)
    # KIP-279 only differs below every known epoch, where 2.1+ echoes the requested epoch
    if kip279 is not None:
        assert current == kip279
        assert kip101 == kip279[1]
    elif current is not None:
        assert current == (requested, cache.entries()[0][1]) and kip101 is None


def forked_logs(draw):
    """A leader and a follower sharing a prefix, then diverging in disjoint epochs, the
    leader's last epoch being the newest (it is the current leader)."""
    prefix = draw(st.lists(st.tuples(st.integers(0, 2), st.integers(1, 3)), max_size=4))
    prefix.sort(key=lambda b: b[0])
    base_epoch = (prefix[-1][0] if prefix else 0) + 1
    later = draw(st.lists(st.booleans(), min_size=1, max_size=5))  # True: a leader epoch
    later[-1] = True
    leader_tail, follower_tail = [], []
    for i, to_leader in enumerate(later):
        size = draw(st.integers(1, 3))
        (leader_tail if to_leader else follower_tail).append((base_epoch + i, size))
    return prefix + leader_tail, prefix + follower_tail


@PROPERTY_SETTINGS
@given(data=st.data())
def test_truncate_on_fetch_converges_to_a_prefix_of_the_leader(impl, log_from, data):
    leader_batches, follower_batches = forked_logs(data.draw)
    leader = log_from(leader_batches)
    follower = log_from(follower_batches)  # same record values, so the shared prefix agrees
    rounds = 0
    while follower.latest_epoch is not None:
        check = impl.leader_fetch_check(leader.epoch_cache(), leader.log_end_offset,
                                        leader.log_start_offset, follower.log_end_offset,
                                        follower.latest_epoch)
        assert check.kind != "offset_out_of_range"
        if check.kind == "read":
            break
        decision = impl.diverging_epoch_truncation(check.diverging_epoch, follower.epoch_cache(),
                                                   follower.log_end_offset, follower.high_watermark)
        assert decision.kind == "truncate" and decision.offset < follower.log_end_offset
        follower.truncate_to(decision.offset)
        rounds += 1
        assert rounds <= len(follower_batches) + 1
    assert follower.log_end_offset <= leader.log_end_offset
    assert follower.holes() == []
    assert impl.first_mismatch(follower, leader) is None
    assert impl.divergence_point(follower, leader) is None


@PROPERTY_SETTINGS
@given(sizes=st.lists(st.integers(1, 4), max_size=6), target=st.integers(0, 30),
       flush_to=st.integers(0, 30))
def test_truncation_and_crash_keep_the_log_consistent(impl, sizes, target, flush_to):
    log = impl.ReplicaLog()
    for i, size in enumerate(sizes):
        log.append_as_leader(list(range(size)), i // 2, producer_id=1, producer_epoch=0,
                             base_sequence=sum(sizes[:i]))
    log.update_high_watermark(log.log_end_offset)
    log.flush(flush_to)
    before = log.copy()
    log.truncate_to(target)
    assert log.high_watermark <= log.log_end_offset
    assert log.recovery_point <= log.log_end_offset
    assert all(s < log.log_end_offset for _, s in log.epoch_entries())
    rebuilt = log.producer_state()
    log.rebuild_producer_state()
    assert log.producer_state() == rebuilt
    assert impl.first_mismatch(log, before) in (None, *[a for a, _ in log.holes()])
    dropped = before.drop_unflushed()
    assert before.holes() == [] and before.log_end_offset == before.recovery_point
    assert dropped == sum(sizes) - before.record_count
