"""Transactions in the core (docs/core-semantics.md rule 1.12, "Transactions"), checked
on the Rust core and the pure-Python reference alike: ongoing / unreplicated transactions, the
last stable offset, the aborted index, marker fencing and INVALID_TXN_STATE."""

from __future__ import annotations

import pytest

from epochlab.errors import InvalidProducerEpochError, InvalidTxnStateError, TransactionCoordinatorFencedError


def txn(log, pid, seq, values, epoch=0):
    return log.append_as_leader(values, 0, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                is_transactional=True)


def test_read_committed_bound_follows_open_and_unreplicated_transactions(impl):
    log = impl.ReplicaLog()
    log.append_as_leader([1], 0)                       # 0
    txn(log, 7, 0, [10, 11])                           # 1..2  producer 7
    txn(log, 8, 0, [20])                               # 3     producer 8
    log.update_high_watermark(4)
    assert (log.first_unstable_offset, log.last_stable_offset) == (1, 1)
    assert log.ongoing_transactions() == [(1, 7), (3, 8)]
    marker = log.append_end_txn_marker(7, 0, 0, False, 0)  # ABORT at 4
    assert (marker.base_offset, log.batches()[-1].control_type, log.batches()[-1].coordinator_epoch) == (4, "abort", 0)
    assert log.aborted_transactions(0, 100) == [(7, 1, 4, 3)]
    assert log.unreplicated_transactions() == [(1, 7, 4)]
    assert log.last_stable_offset == 1                 # the ABORT marker is not replicated yet
    log.append_end_txn_marker(8, 0, 0, True, 0)        # COMMIT at 5
    log.update_high_watermark(6)
    assert (log.first_unstable_offset, log.last_stable_offset) == (None, 6)
    assert log.aborted_transactions(5, 6) == []        # the abort ended before offset 5
    assert log.aborted_transactions(2, 3) == [(7, 1, 4, 3)]


def test_truncating_a_marker_reopens_the_transaction(impl):
    log = impl.ReplicaLog()
    txn(log, 7, 0, [1])
    log.append_end_txn_marker(7, 0, 0, True, 0)
    log.update_high_watermark(2)
    assert log.first_unstable_offset is None
    log.truncate_to(1)
    assert log.ongoing_transactions() == [(0, 7)]
    assert log.last_stable_offset == 0


def test_markers_are_fenced_by_producer_and_coordinator_epochs(impl):
    log = impl.ReplicaLog()
    txn(log, 7, 0, [1])
    log.append_end_txn_marker(7, 0, 5, True, 0)
    assert log.producer_state().coordinator_epoch(7) == 5
    with pytest.raises(TransactionCoordinatorFencedError) as info:
        log.append_end_txn_marker(7, 0, 4, False, 0)
    assert (info.value.coordinator_epoch, info.value.current_coordinator_epoch) == (4, 5)
    txn(log, 7, 0, [2], epoch=1)                       # the producer restarted: epoch 1
    with pytest.raises(InvalidProducerEpochError) as fenced:
        log.append_end_txn_marker(7, 0, 5, True, 0)
    assert fenced.value.current_epoch == 1


def test_non_transactional_write_inside_an_open_transaction_is_refused(impl):
    log = impl.ReplicaLog()
    txn(log, 7, 0, [1, 2])
    with pytest.raises(InvalidTxnStateError) as info:
        log.append_as_leader([3], 0, producer_id=7, producer_epoch=0, base_sequence=2)
    assert (info.value.producer_id, info.value.transaction_first_offset) == (7, 0)
    assert log.log_end_offset == 2


def test_followers_derive_the_same_transaction_state(impl):
    leader, follower = impl.ReplicaLog(), impl.ReplicaLog()
    txn(leader, 7, 0, [1])
    leader.append_end_txn_marker(7, 0, 2, False, 0)
    txn(leader, 8, 0, [2])
    follower.append_batches_as_follower(leader.batches())
    for log in (leader, follower):
        log.update_high_watermark(3)
    assert follower.aborted_transactions(0, 10) == leader.aborted_transactions(0, 10)
    assert follower.ongoing_transactions() == leader.ongoing_transactions() == [(2, 8)]
    assert follower.producer_state().coordinator_epoch(7) == 2


def test_transaction_version_2_fences_a_late_marker_with_the_current_epoch(impl):
    """Kafka 4.2+ (`ProducerAppendInfo.checkProducerEpoch`, KAFKA-19446 / KAFKA-19999): with
    transaction version 2 the coordinator bumps the epoch before writing markers, so a marker
    whose epoch equals the producer's is a late one of the previous transaction and is fenced
    while a transaction is ongoing; with nothing ongoing it is a retry and is written again.
    The legacy rule (versions 0 and 1, and Kafka 4.0 / 4.1 for every version) takes it."""
    log = impl.ReplicaLog()
    txn(log, 7, 0, [1])                                   # transaction 1, epoch 0: offset 0
    log.append_end_txn_marker(7, 1, 0, True, 0, transaction_version=2)   # COMMIT, bumped: 1
    retry = log.append_end_txn_marker(7, 1, 0, True, 0, transaction_version=2)
    assert retry.base_offset == 2 and log.ongoing_transactions() == []
    txn(log, 7, 0, [2], epoch=1)                          # transaction 2, epoch 1: offset 3
    with pytest.raises(InvalidProducerEpochError) as late:
        log.append_end_txn_marker(7, 1, 0, True, 0, transaction_version=2)
    assert (late.value.producer_epoch, late.value.current_epoch) == (1, 1)
    assert log.ongoing_transactions() == [(3, 7)]
    log.append_end_txn_marker(7, 2, 0, False, 0, transaction_version=2)  # its own ABORT
    assert log.aborted_transactions(0, 100) == [(7, 3, 4, 5)]
    legacy = impl.ReplicaLog()
    txn(legacy, 7, 0, [1], epoch=1)
    legacy.append_end_txn_marker(7, 1, 0, True, 0)        # an equal epoch ends it
    assert legacy.ongoing_transactions() == []


@pytest.mark.parametrize("version", [-1, 3, 2**70])
def test_transaction_version_outside_0_to_2_is_refused(impl, version):
    from epochlab.errors import InvalidArgumentError
    log = impl.ReplicaLog()
    with pytest.raises(InvalidArgumentError, match="transaction_version"):
        log.append_end_txn_marker(7, 0, 0, True, 0, transaction_version=version)
