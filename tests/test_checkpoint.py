"""The ``leader-epoch-checkpoint`` text and file: round trips, atomic writes and every way the
text can be malformed, with the exact (1-based) line reported."""

from __future__ import annotations

import os
import pathlib

import pytest

from epochlab.errors import CorruptCheckpointError, StorageError


def test_checkpoint_text_format(impl):
    c = impl.LeaderEpochCache([(0, 0), (1, 120)])
    assert c.to_checkpoint_text() == "0\n2\n0 0\n1 120\n"
    assert impl.LeaderEpochCache().to_checkpoint_text() == "0\n0\n"


@pytest.mark.parametrize("entries", [[], [(0, 0)], [(0, 0), (1, 120), (5, 121)],
                                     [(2**31 - 1, 2**63 - 1)]])
def test_checkpoint_text_round_trip(impl, entries):
    c = impl.LeaderEpochCache(entries)
    assert impl.LeaderEpochCache.from_checkpoint_text(c.to_checkpoint_text()) == c


@pytest.mark.parametrize("text", ["0\n1\n3 7", "0\n1\n3   7\n", "0\n1\n 3\t7 \n", "0\n1\n3 7\r\n"])
def test_checkpoint_parsing_is_tolerant_of_whitespace_in_entries(impl, text):
    assert impl.LeaderEpochCache.from_checkpoint_text(text).entries() == [(3, 7)]


def test_checkpoint_file_round_trip(impl, tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    c = impl.LeaderEpochCache([(0, 0), (3, 40), (4, 41)])
    c.write_checkpoint(path)
    assert path.read_text() == "0\n3\n0 0\n3 40\n4 41\n"
    assert impl.LeaderEpochCache.read_checkpoint(path) == c
    assert impl.LeaderEpochCache.read_checkpoint(str(path)).entries() == c.entries()
    # overwriting replaces the content and leaves no temporary file behind
    impl.LeaderEpochCache([(7, 9)]).write_checkpoint(str(path))
    assert impl.LeaderEpochCache.read_checkpoint(path).entries() == [(7, 9)]
    assert sorted(os.listdir(tmp_path)) == ["leader-epoch-checkpoint"]


def test_write_checkpoint_replaces_a_stale_temporary_file(impl, tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    pathlib.Path(str(path) + ".tmp").write_text("garbage from a crash\n")
    impl.LeaderEpochCache([(1, 1)]).write_checkpoint(path)
    assert path.read_text() == "0\n1\n1 1\n"
    assert not pathlib.Path(str(path) + ".tmp").exists()


MALFORMED = [
    # (text, line, what is wrong)
    ("1\n0\n", 1, "bad version"),
    ("00\n0\n", 1, "version not exactly 0"),
    ("x\n", 1, "non-integer version"),
    ("0\n-1\n", 2, "negative count"),
    ("0\ntwo\n", 2, "non-integer count"),
    ("0\n1.0\n", 2, "non-integer count"),
    ("0\n\n", 2, "empty count"),
    ("0\n2\n0 0\n", 4, "missing entry line"),
    ("0\n1\n", 3, "missing first entry"),
    ("0\n0\n0 0\n", 3, "extra line"),
    ("0\n1\n0 0\n\n", 4, "extra empty line"),
    ("0\n1\n0 0\n1 5\n", 4, "extra entry"),
    ("0\n1\n0\n", 3, "one field"),
    ("0\n1\n0 0 0\n", 3, "three fields"),
    ("0\n1\n\n", 3, "empty entry"),
    ("0\n1\na 0\n", 3, "non-integer epoch"),
    ("0\n1\n0 1.5\n", 3, "non-integer offset"),
    ("0\n2\n0 0\n1 x\n", 4, "non-integer offset on line 4"),
    ("0\n1\n-1 0\n", 3, "negative epoch"),
    ("0\n1\n0 -5\n", 3, "negative offset"),
    ("0\n1\n2147483648 0\n", 3, "epoch beyond Int32.MAX"),
    ("0\n1\n0 9223372036854775808\n", 3, "offset beyond Int64.MAX"),
    ("0\n2\n1 0\n1 5\n", 4, "repeated epoch"),
    ("0\n2\n2 0\n1 5\n", 4, "decreasing epoch"),
    ("0\n2\n1 5\n2 4\n", 4, "decreasing start offset"),
    ("0\n+1\n1 5\n", 2, "signed count"),
    (" 0\n0\n", 1, "padded version"),
    ("0\n1\n1 1_0\n", 3, "underscore in a number"),
    ("0\n3\n1 0\n2 9\n3 4\n", 5, "decreasing start offset"),
]


@pytest.mark.parametrize("text", ["", "0\n", "0"])
def test_an_empty_checkpoint_or_a_version_alone_reads_as_no_entries(impl, text):
    # Kafka creates an empty leader-epoch-checkpoint for every new partition and its reader
    # (CheckpointFile.CheckpointReadBuffer.read) answers no entries for it.
    assert impl.LeaderEpochCache.from_checkpoint_text(text).entries() == []


@pytest.mark.parametrize(("text", "line", "what"), MALFORMED, ids=[m[2] for m in MALFORMED])
def test_malformed_checkpoint_text_names_the_line(impl, text, line, what):
    with pytest.raises(CorruptCheckpointError) as info:
        impl.LeaderEpochCache.from_checkpoint_text(text, "/data/p-0/leader-epoch-checkpoint")
    e = info.value
    assert (e.line, e.path) == (line, "/data/p-0/leader-epoch-checkpoint"), what
    assert isinstance(e.reason, str) and e.reason


def test_unsupported_version_is_the_reason(impl):
    with pytest.raises(CorruptCheckpointError) as info:
        impl.LeaderEpochCache.from_checkpoint_text("1\n0\n")
    assert "unsupported version" in info.value.reason
    assert info.value.path is None and info.value.line == 1


@pytest.mark.parametrize(("text", "line"), [(m[0], m[1]) for m in MALFORMED if m[0]])
def test_malformed_checkpoint_file_names_path_and_line(impl, tmp_path, text, line):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(text)
    with pytest.raises(CorruptCheckpointError) as info:
        impl.LeaderEpochCache.read_checkpoint(path)
    assert (info.value.path, info.value.line) == (str(path), line)


def test_read_missing_checkpoint_is_a_storage_error(impl, tmp_path):
    path = tmp_path / "absent"
    with pytest.raises(StorageError) as info:
        impl.LeaderEpochCache.read_checkpoint(path)
    assert info.value.path == str(path)
    assert isinstance(info.value.reason, str) and info.value.reason
    assert isinstance(info.value, OSError)


def test_write_into_a_missing_directory_is_a_storage_error(impl, tmp_path):
    path = tmp_path / "no-such-dir" / "leader-epoch-checkpoint"
    with pytest.raises(StorageError) as info:
        impl.LeaderEpochCache([(0, 0)]).write_checkpoint(path)
    assert info.value.path == str(path)
    assert not path.parent.exists()


def test_kip101_caches_with_a_shared_start_offset_round_trip(impl, tmp_path):
    # Kafka 0.11's assign rule records two epochs at one offset when a leader is elected twice
    # with no write in between; such a cache must survive its own checkpoint.
    cache = impl.LeaderEpochCache()
    assert cache.assign_kip101(1, 5) and cache.assign_kip101(2, 5)
    path = tmp_path / "leader-epoch-checkpoint"
    cache.write_checkpoint(path)
    assert impl.LeaderEpochCache.read_checkpoint(path).entries() == [(1, 5), (2, 5)]


def test_crlf_checkpoints_read_like_kafka(impl):
    text = "0\r\n2\r\n0 0\r\n1 120\r\n"
    assert impl.LeaderEpochCache.from_checkpoint_text(text).entries() == [(0, 0), (1, 120)]


def test_failed_write_leaves_no_temporary_file(impl, tmp_path):
    target = tmp_path / "is-a-directory"
    target.mkdir()
    with pytest.raises(StorageError) as info:
        impl.LeaderEpochCache([(0, 0)]).write_checkpoint(target)
    assert info.value.path == str(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["is-a-directory"]


def test_empty_checkpoint_path_is_a_storage_error(impl):
    with pytest.raises(StorageError):
        impl.LeaderEpochCache().write_checkpoint("")
