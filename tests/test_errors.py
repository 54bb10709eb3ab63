"""One test per class of ``epochlab.errors``: which call raises it, with which attributes.
Both implementations must raise the very same classes (there is only one hierarchy)."""

from __future__ import annotations

import pickle

import pytest

from epochlab import errors


def test_invalid_argument_error(impl):
    with pytest.raises(errors.InvalidArgumentError) as info:
        impl.ReplicaLog().read(-1)
    e = info.value
    assert (e.argument, e.value) == ("from_offset", -1)
    assert isinstance(e, ValueError) and isinstance(e, errors.EpochlabError)


def test_offset_out_of_range_error(impl):
    log = impl.ReplicaLog(2)
    log.append_as_leader([1, 2], 0)
    with pytest.raises(errors.OffsetOutOfRangeError) as info:
        log.read(5)
    e = info.value
    assert (e.offset, e.log_start_offset, e.log_end_offset) == (5, 2, 4)
    assert isinstance(e, errors.LogError)


def test_unexpected_append_offset_error(impl):
    log = impl.ReplicaLog()
    log.append_as_leader([1, 2, 3], 0)
    with pytest.raises(errors.UnexpectedAppendOffsetError) as info:
        log.append_as_follower(impl.RecordBatch(1, 0, [9]))
    e = info.value
    assert (e.first_offset, e.log_end_offset) == (1, 3)
    assert isinstance(e, errors.LogError)


def test_invalid_record_batch_error(impl):
    with pytest.raises(errors.InvalidRecordBatchError) as info:
        impl.RecordBatch(0, 0, [])
    assert isinstance(info.value, errors.LogError)
    with pytest.raises(errors.InvalidRecordBatchError):
        impl.ReplicaLog().append_as_leader([1], 0, producer_id=1)


def test_out_of_order_sequence_error(impl):
    log = impl.ReplicaLog()
    log.append_as_leader([1, 2], 0, producer_id=3, producer_epoch=1, base_sequence=0)
    with pytest.raises(errors.OutOfOrderSequenceError) as info:
        log.append_as_leader([3], 0, producer_id=3, producer_epoch=1, base_sequence=5)
    e = info.value
    assert (e.producer_id, e.producer_epoch, e.base_sequence, e.expected_sequence) == (3, 1, 5, 2)
    assert isinstance(e, errors.ProducerStateError)


def test_invalid_producer_epoch_error(impl):
    log = impl.ReplicaLog()
    log.append_as_leader([1], 0, producer_id=3, producer_epoch=4, base_sequence=0)
    with pytest.raises(errors.InvalidProducerEpochError) as info:
        log.append_as_leader([2], 0, producer_id=3, producer_epoch=3, base_sequence=1)
    e = info.value
    assert (e.producer_id, e.producer_epoch, e.current_epoch) == (3, 3, 4)
    assert isinstance(e, errors.ProducerStateError)


def test_fenced_leader_epoch_error(impl):
    with pytest.raises(errors.FencedLeaderEpochError) as info:
        impl.check_current_leader_epoch(2, 3)
    assert (info.value.request_epoch, info.value.current_epoch) == (2, 3)
    assert isinstance(info.value, errors.LeaderEpochError)


def test_unknown_leader_epoch_error(impl):
    with pytest.raises(errors.UnknownLeaderEpochError) as info:
        impl.check_current_leader_epoch(4, 3)
    assert (info.value.request_epoch, info.value.current_epoch) == (4, 3)
    assert isinstance(info.value, errors.LeaderEpochError)


def test_corrupt_checkpoint_error(impl):
    with pytest.raises(errors.CorruptCheckpointError) as info:
        impl.LeaderEpochCache.from_checkpoint_text("0\n1\n5 x\n", "cp")
    e = info.value
    assert (e.path, e.line) == ("cp", 3) and isinstance(e.reason, str)
    assert isinstance(e, errors.CheckpointError)


def test_storage_error(impl, tmp_path):
    missing = tmp_path / "missing" / "leader-epoch-checkpoint"
    with pytest.raises(errors.StorageError) as info:
        impl.LeaderEpochCache.read_checkpoint(missing)
    e = info.value
    assert e.path == str(missing) and isinstance(e.reason, str)
    assert isinstance(e, OSError) and isinstance(e, errors.EpochlabError)


def test_errors_survive_pickling(impl):
    with pytest.raises(errors.OffsetOutOfRangeError) as info:
        impl.ReplicaLog().read(1)
    clone = pickle.loads(pickle.dumps(info.value))
    assert type(clone) is errors.OffsetOutOfRangeError
    assert (clone.offset, clone.log_start_offset, clone.log_end_offset) == (1, 0, 0)


def test_kafka_format_error():
    from epochlab import _core

    with pytest.raises(errors.KafkaFormatError) as info:
        _core.parse_leader_epoch_checkpoint(b"0\n1\n5 x\n", "leader-epoch-checkpoint")
    e = info.value
    assert (e.file, e.offset) == ("leader-epoch-checkpoint", 4) and isinstance(e.reason, str)
    assert isinstance(e, ValueError) and isinstance(e, errors.EpochlabError)
    clone = pickle.loads(pickle.dumps(e))
    assert type(clone) is errors.KafkaFormatError and (clone.file, clone.offset) == (e.file, e.offset)
