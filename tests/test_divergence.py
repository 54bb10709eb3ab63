"""Truncation decisions per protocol generation, the leader's fetch check, KIP-320 fencing and
log comparison, with the protocol's worked examples (``docs/core-semantics.md``, rule 1.4)."""

from __future__ import annotations

import pytest

from epochlab.errors import FencedLeaderEpochError, InvalidArgumentError, UnknownLeaderEpochError


def outcome(o):
    return (o.kind, o.offset)


def test_truncation_outcome_values(impl):
    T = impl.TruncationOutcome
    assert outcome(T.truncate(3)) == ("truncate", 3)
    assert outcome(T.truncate_and_retry(4)) == ("truncate_and_retry", 4)
    assert outcome(T.fenced()) == ("fenced", None)
    assert outcome(T.unknown_leader_epoch()) == ("unknown_leader_epoch", None)
    assert outcome(T.discard()) == ("discard", None)
    assert T.truncate(3) == T.truncate(3) and hash(T.truncate(3)) == hash(T.truncate(3))
    assert T.truncate(3) != T.truncate_and_retry(3) and T.truncate(3) != T.truncate(4)
    assert len({T.fenced(), T.fenced(), T.discard()}) == 2
    with pytest.raises(InvalidArgumentError):
        T.truncate(-1)


def test_fetch_check_values(impl):
    F = impl.FetchCheck
    assert (F.read().kind, F.read().diverging_epoch) == ("read", None)
    assert (F.diverging(1, 2).kind, F.diverging(1, 2).diverging_epoch) == ("diverging", (1, 2))
    assert F.offset_out_of_range().kind == "offset_out_of_range"
    assert F.diverging(1, 2) == F.diverging(1, 2) and F.diverging(1, 2) != F.diverging(1, 3)
    assert len({F.read(), F.read(), F.offset_out_of_range()}) == 2


def test_protocol_case_e_truncate_on_fetch(impl):
    # rule 1.4(d): follower {1:0, 2:2} LEO 4, leader {1:0, 3:2}.
    follower = impl.LeaderEpochCache([(1, 0), (2, 2)])
    leader = impl.LeaderEpochCache([(1, 0), (3, 2)])
    check = impl.leader_fetch_check(leader, 6, 0, 4, 2)
    assert (check.kind, check.diverging_epoch) == ("diverging", (1, 2))
    decision = impl.diverging_epoch_truncation(check.diverging_epoch, follower, 4, 0)
    assert outcome(decision) == ("truncate", 2)
    # after truncating, the next fetch (offset 2, last epoch 1) reads
    follower.truncate_from_end(2)
    assert impl.leader_fetch_check(leader, 6, 0, 2, follower.latest_epoch) == impl.FetchCheck.read()


def test_case_e_end_to_end_on_logs(impl, log_from):
    follower = log_from([(1, 2), (2, 2)])
    leader = log_from([(1, 2), (3, 4)], first_value=0)
    assert impl.first_mismatch(follower, leader) == 2
    assert impl.divergence_point(follower, leader) == 2
    check = impl.leader_fetch_check(leader.epoch_cache(), leader.log_end_offset,
                                    leader.log_start_offset, follower.log_end_offset,
                                    follower.latest_epoch)
    decision = impl.diverging_epoch_truncation(check.diverging_epoch, follower.epoch_cache(),
                                               follower.log_end_offset, follower.high_watermark)
    assert follower.truncate_to(decision.offset) is True
    assert impl.first_mismatch(follower, leader) is None
    assert impl.divergence_point(follower, leader) is None


@pytest.mark.parametrize(("hw", "leo"), [(0, 0), (3, 7), (7, 7)])
def test_g0_truncates_to_the_high_watermark(impl, hw, leo):
    assert outcome(impl.truncate_to_high_watermark(hw, leo)) == ("truncate", hw)


@pytest.mark.parametrize(("leader_end", "expected"), [(None, 3), (5, 5), (10, 10), (11, 10), (0, 0)])
def test_g1_kip101(impl, leader_end, expected):
    assert outcome(impl.kip101_truncation(leader_end, 10, 3)) == ("truncate", expected)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (None, ("truncate", 3)),  # UNDEFINED: fall back to the high watermark
        ((2, 8), ("truncate", 8)),  # same epoch, leader's end earlier
        ((2, 20), ("truncate", 12)),  # same epoch, ours ends at our LEO
        ((1, 4), ("truncate", 4)),
        ((1, 7), ("truncate", 5)),  # our epoch 1 ends at 5
        ((3, 9), ("truncate", 9)),  # above all our epochs: UNDEFINED, trust the leader
        ((3, 40), ("truncate", 12)),
        ((0, 9), ("truncate", 9)),  # below all our epochs: untracked, trust the leader
        ((0, 40), ("truncate", 12)),
    ],
)
def test_g2_kip279(impl, answer, expected):
    follower = impl.LeaderEpochCache([(1, 0), (2, 5)])
    assert outcome(impl.kip279_truncation(answer, follower, 12, 3)) == expected


def test_g2_retry_when_the_follower_lacks_the_epoch_in_the_middle(impl):
    follower = impl.LeaderEpochCache([(1, 0), (3, 5), (5, 9)])
    assert outcome(impl.kip279_truncation((4, 7), follower, 12, 0)) == ("truncate_and_retry", 9)
    assert outcome(impl.diverging_epoch_truncation((4, 7), follower, 12, 0)) == ("truncate", 9)


def test_g3_uses_current_lookup_below_every_epoch(impl):
    follower = impl.LeaderEpochCache([(2, 5), (4, 9)])
    kwargs = {"request_epoch": 6, "current_epoch": 6}
    # KIP-279's follower lookup is UNDEFINED below every epoch; 2.1+ echoes the epoch
    assert outcome(impl.kip279_truncation((1, 7), follower, 12, 0)) == ("truncate", 7)
    assert outcome(impl.kip320_truncation((1, 7), follower, 12, 0, **kwargs)) == ("truncate", 5)
    assert outcome(impl.diverging_epoch_truncation((1, 7), follower, 12, 0)) == ("truncate", 5)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"request_epoch": 5, "current_epoch": 6}, ("discard", None)),
        ({"request_epoch": 7, "current_epoch": 6, "error": "fenced_leader_epoch"}, ("discard", None)),
        ({"request_epoch": 6, "current_epoch": 6, "error": "fenced_leader_epoch"}, ("fenced", None)),
        ({"request_epoch": 6, "current_epoch": 6, "error": "unknown_leader_epoch"},
         ("unknown_leader_epoch", None)),
        ({"request_epoch": 6, "current_epoch": 6}, ("truncate", 8)),
        ({"request_epoch": 6, "current_epoch": 6, "error": None}, ("truncate", 8)),
    ],
)
def test_g3_kip320_fencing(impl, kwargs, expected):
    follower = impl.LeaderEpochCache([(1, 0), (2, 5)])
    assert outcome(impl.kip320_truncation((2, 8), follower, 12, 3, **kwargs)) == expected


def test_g3_undefined_answer_and_retry(impl):
    follower = impl.LeaderEpochCache([(1, 0), (2, 5)])
    kwargs = {"request_epoch": 3, "current_epoch": 3}
    assert outcome(impl.kip320_truncation(None, follower, 12, 3, **kwargs)) == ("truncate", 3)
    assert outcome(impl.kip320_truncation((3, 9), follower, 12, 3, **kwargs)) == ("truncate", 9)
    gap = impl.LeaderEpochCache([(1, 0), (3, 5)])  # lacks epoch 2: its epoch 1 ends at 5
    assert outcome(impl.kip320_truncation((2, 9), gap, 12, 3, **kwargs)) == ("truncate_and_retry", 5)


def test_g3_unknown_error_string_is_invalid(impl):
    follower = impl.LeaderEpochCache([(1, 0)])
    with pytest.raises(InvalidArgumentError) as info:
        impl.kip320_truncation((1, 2), follower, 4, 0, request_epoch=1, current_epoch=1,
                               error="not_leader")
    assert info.value.argument == "error"
    # a bad argument is refused even when the answer would be discarded
    with pytest.raises(InvalidArgumentError) as info:
        impl.kip320_truncation((1, 2), follower, 4, 0, request_epoch=1, current_epoch=2,
                               error="not_leader")
    assert info.value.argument == "error"


@pytest.mark.parametrize(
    ("answer", "expected"),
    [((2, 8), 8), ((2, 20), 12), ((1, 4), 4), ((3, 9), 9), ((0, 9), 0), ((0, 0), 0)],
)
def test_g4_never_retries(impl, answer, expected):
    follower = impl.LeaderEpochCache([(1, 0), (2, 5)])
    assert outcome(impl.diverging_epoch_truncation(answer, follower, 12, 3)) == ("truncate", expected)


def test_g4_with_an_empty_follower_cache(impl):
    empty = impl.LeaderEpochCache()
    assert outcome(impl.diverging_epoch_truncation((3, 9), empty, 12, 0)) == ("truncate", 9)


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda m, c: m.truncate_to_high_watermark(5, 4), "high_watermark"),
        (lambda m, c: m.truncate_to_high_watermark(-1, 4), "high_watermark"),
        (lambda m, c: m.truncate_to_high_watermark(0, -1), "log_end_offset"),
        (lambda m, c: m.kip101_truncation(None, 4, 5), "high_watermark"),
        (lambda m, c: m.kip101_truncation(-1, 4, 0), "leader_end_offset"),
        (lambda m, c: m.kip279_truncation((1, 2), c, 4, 5), "high_watermark"),
        (lambda m, c: m.kip279_truncation((-1, 2), c, 4, 0), "leader_answer"),
        (lambda m, c: m.kip279_truncation((1, -2), c, 4, 0), "leader_answer"),
        (lambda m, c: m.kip320_truncation((1, 2), c, 4, 5, request_epoch=1, current_epoch=1),
         "high_watermark"),
        (lambda m, c: m.kip320_truncation((1, 2), c, 4, 0, request_epoch=-1, current_epoch=1),
         "request_epoch"),
        (lambda m, c: m.kip320_truncation((1, 2), c, 4, 0, request_epoch=1, current_epoch=2**31),
         "current_epoch"),
        (lambda m, c: m.diverging_epoch_truncation((1, 2), c, 4, 5), "high_watermark"),
        (lambda m, c: m.diverging_epoch_truncation((2**31, 2), c, 4, 0), "diverging_epoch"),
        (lambda m, c: m.leader_fetch_check(c, -1, 0, 0, 0), "leader_log_end_offset"),
        (lambda m, c: m.leader_fetch_check(c, 4, -1, 0, 0), "leader_log_start_offset"),
        (lambda m, c: m.leader_fetch_check(c, 4, 0, -1, 0), "fetch_offset"),
        (lambda m, c: m.leader_fetch_check(c, 4, 0, 0, -1), "last_fetched_epoch"),
        (lambda m, c: m.check_current_leader_epoch(-1, 0), "request_epoch"),
        (lambda m, c: m.check_current_leader_epoch(0, 2**31), "current_epoch"),
    ],
)
def test_divergence_domains(impl, call, argument):
    cache = impl.LeaderEpochCache([(1, 0)])
    with pytest.raises(InvalidArgumentError) as info:
        call(impl, cache)
    assert info.value.argument == argument


def test_caches_and_logs_must_be_of_the_same_implementation_type(impl):
    with pytest.raises(TypeError):
        impl.kip279_truncation((1, 2), [(1, 0)], 4, 0)
    with pytest.raises(TypeError):
        impl.first_mismatch(impl.ReplicaLog(), "log")


@pytest.mark.parametrize(
    ("fetch_offset", "last_epoch", "kind", "diverging"),
    [
        (6, 3, "read", None),  # caught up in the latest epoch
        (4, 3, "read", None),
        (2, 1, "read", None),  # epoch 1 ends at 2: a follower at its end reads on
        (1, 1, "read", None),
        (4, 2, "diverging", (1, 2)),  # unknown epoch 2: the leader's epoch 1 ends at 2
        (3, 1, "diverging", (1, 2)),  # beyond the end of epoch 1
        (7, 3, "diverging", (3, 6)),  # ahead of the leader in its own epoch
        (4, 4, "offset_out_of_range", None),  # an epoch the leader has not reached
        (1, 0, "diverging", (0, 0)),  # below every epoch: echoed with the first start offset
        (0, 0, "read", None),
    ],
)
def test_leader_fetch_check(impl, fetch_offset, last_epoch, kind, diverging):
    leader = impl.LeaderEpochCache([(1, 0), (3, 2)])
    check = impl.leader_fetch_check(leader, 6, 0, fetch_offset, last_epoch)
    assert (check.kind, check.diverging_epoch) == (kind, diverging)


def test_leader_fetch_check_below_log_start(impl):
    leader = impl.LeaderEpochCache([(1, 5), (3, 8)])
    assert impl.leader_fetch_check(leader, 10, 5, 4, 3).kind == "offset_out_of_range"
    assert impl.leader_fetch_check(leader, 10, 5, 5, 3).kind == "read"
    # the out-of-range check on the log start precedes the divergence check
    assert impl.leader_fetch_check(leader, 10, 5, 4, 1).kind == "offset_out_of_range"
    assert impl.leader_fetch_check(impl.LeaderEpochCache(), 10, 0, 4, 1).kind == "offset_out_of_range"


def test_leader_fetch_check_beyond_the_log_end_within_an_epoch(impl):
    # A cache entry starting past the log end (not reachable through ReplicaLog) is the only
    # way an epoch can end beyond the leader's LEO; the fetch is then out of range.
    leader = impl.LeaderEpochCache([(1, 0), (3, 10)])
    assert impl.leader_fetch_check(leader, 6, 0, 8, 1).kind == "offset_out_of_range"
    assert impl.leader_fetch_check(leader, 6, 0, 6, 1).kind == "read"


def test_check_current_leader_epoch(impl):
    assert impl.check_current_leader_epoch(None, 5) is None
    assert impl.check_current_leader_epoch(5, 5) is None
    with pytest.raises(FencedLeaderEpochError) as fenced:
        impl.check_current_leader_epoch(4, 5)
    assert (fenced.value.request_epoch, fenced.value.current_epoch) == (4, 5)
    with pytest.raises(UnknownLeaderEpochError) as unknown:
        impl.check_current_leader_epoch(6, 5)
    assert (unknown.value.request_epoch, unknown.value.current_epoch) == (6, 5)


@pytest.mark.parametrize(
    ("a", "b", "a_start", "b_start", "expected"),
    [
        ([(0, 4)], [(0, 4)], 0, 0, None),  # identical
        ([(0, 4)], [(0, 4), (1, 2)], 0, 0, None),  # a is a prefix of b
        ([(0, 2), (1, 2)], [(0, 2), (2, 3)], 0, 0, 2),  # fork after epoch 0
        ([(0, 2), (1, 2)], [(0, 3), (2, 3)], 0, 0, 2),  # epoch 0 ends earlier in a
        ([(1, 3)], [(2, 3)], 0, 0, 0),  # nothing shared
        ([(0, 2), (1, 3), (3, 1)], [(0, 2), (1, 3), (2, 4)], 0, 0, 5),
        ([(0, 3)], [(1, 3)], 3, 0, None),  # no common offsets: a = [3,6), b = [0,3)
        ([(0, 2), (1, 2)], [(2, 3)], 0, 3, 3),  # nothing shared: the later log start
        ([], [(0, 3)], 0, 0, None),  # an empty log is a prefix of anything
    ],
)
def test_divergence_point(impl, log_from, a, b, a_start, b_start, expected):
    log_a = log_from(a, log_start_offset=a_start)
    log_b = log_from(b, log_start_offset=b_start)
    assert impl.divergence_point(log_a, log_b) == expected
    assert impl.divergence_point(log_b, log_a) == expected


def test_divergence_point_trusts_epochs_first_mismatch_checks_data(impl, log_from):
    a = log_from([(0, 3)])
    b = log_from([(0, 3)], first_value=100)
    assert impl.divergence_point(a, b) is None
    assert impl.first_mismatch(a, b) == 0


@pytest.mark.parametrize(
    ("b_batches", "expected"),
    [
        ([(0, 2), (0, 3)], None),
        ([(0, 2), (0, 3), (1, 4)], None),  # only the common prefix is compared
        ([(0, 2), (1, 3)], 2),  # a batch epoch differs
        ([(0, 5)], 0),  # batch boundaries differ
        ([(0, 2), (0, 2)], 2),  # the second batches end differently
        ([(0, 2)], None),  # b shorter, identical prefix
    ],
)
def test_first_mismatch(impl, log_from, b_batches, expected):
    a = log_from([(0, 2), (0, 3)])
    b = log_from(b_batches)
    assert impl.first_mismatch(a, b) == expected
    assert impl.first_mismatch(b, a) == expected


def test_first_mismatch_sees_a_hole_in_one_log(impl, log_from):
    a = log_from([(0, 2), (0, 3)])  # [0,1] [2,4]
    b = a.copy()
    assert impl.first_mismatch(a, b) is None
    a.truncate_to(3)  # a: [0,1] hole [2,3)
    assert impl.first_mismatch(a, b) == 2
    b.truncate_to(3)
    assert impl.first_mismatch(a, b) is None  # the same hole in both


def test_first_mismatch_starts_at_the_later_log_start(impl, log_from):
    a = log_from([(0, 3)], log_start_offset=0)
    b = log_from([(0, 3)], log_start_offset=0, first_value=50)
    b.truncate_fully_and_start_at(3)
    b.append_as_follower(impl.RecordBatch(3, 0, [7]))
    assert impl.first_mismatch(a, b) is None  # no common offsets
