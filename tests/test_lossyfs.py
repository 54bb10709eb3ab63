"""The lossy filesystem (``epochlab.kafka.live.lossyfs``) on real FUSE mounts: what survives a
power cut is what was fsynced, file by file, with the namespace kept (docs/kafka-run.md, "A
power loss"). Every test mounts, cuts, and unmounts; the fixture checks that no mount and no
daemon is left behind.
"""

from __future__ import annotations

import mmap
import os
import stat
from pathlib import Path

import pytest

from epochlab.errors import ConfigError
from epochlab.kafka.live import lossyfs

if lossyfs.available() is not None:
    pytest.skip(f"the lossy filesystem cannot be mounted here: {lossyfs.available()}", allow_module_level=True)


@pytest.fixture
def disk(tmp_path: Path):
    d = lossyfs.LossyDisk(tmp_path / "disk", tmp_path / "data", tmp_path / "lossyfs.log")
    d.mount()
    try:
        yield d
    finally:
        pid = d.proc.pid if d.proc is not None else None
        d.unmount()
        assert not lossyfs.mounts_under(tmp_path), "a mount survived the teardown"
        assert pid is None or not Path(f"/proc/{pid}").exists(), "the daemon survived the teardown"


def _write(path: Path, data: bytes, fsync: bool, mode: str = "wb") -> None:
    with open(path, mode) as f:
        f.write(data)
        f.flush()
        if fsync:
            os.fsync(f.fileno())


def test_an_fsynced_file_survives_and_an_unsynced_append_is_lost(disk: lossyfs.LossyDisk) -> None:
    seg = disk.mountpoint / "00000000000000000000.log"
    _write(seg, b"m1" * 3000, fsync=True)           # 6000 bytes durable
    _write(seg, b"m2" * 1000, fsync=False, mode="ab")  # appended, never fsynced
    assert seg.stat().st_size == 8000               # visible while the power is on (page cache)
    assert disk.power_cycle() == 1
    assert seg.read_bytes() == b"m1" * 3000


def test_an_unsynced_overwrite_below_the_durable_size_is_undone(disk: lossyfs.LossyDisk) -> None:
    f = disk.mountpoint / "checkpoint"
    _write(f, bytes(range(256)) * 40, fsync=True)   # 10240 bytes: three pages
    with open(f, "r+b") as h:
        h.seek(4090)
        h.write(b"X" * 20)                          # across the first page boundary
    os.truncate(f, 100)                             # and cut, unsynced
    assert f.stat().st_size == 100
    disk.power_cycle()
    assert f.read_bytes() == bytes(range(256)) * 40


def test_a_file_never_fsynced_keeps_its_name_and_loses_its_data(disk: lossyfs.LossyDisk) -> None:
    (disk.mountpoint / "topic-0").mkdir()
    new = disk.mountpoint / "topic-0" / "00000000000000000000.index"
    _write(new, b"entries", fsync=False)
    disk.power_cycle()
    assert new.exists() and new.stat().st_size == 0


def test_fsync_of_one_file_does_not_make_another_durable(disk: lossyfs.LossyDisk) -> None:
    a, b = disk.mountpoint / "a", disk.mountpoint / "b"
    _write(a, b"a", fsync=True)
    _write(b, b"b", fsync=False)
    assert disk.power_cycle() == 1
    assert (a.read_bytes(), b.read_bytes()) == (b"a", b"")


def test_a_checkpoint_written_like_kafka_survives_rename_and_all(disk: lossyfs.LossyDisk) -> None:
    """``CheckpointFile.write``: the temporary file is written and fsynced, moved over the old one
    (``Utils.atomicMoveWithFallback``) and the directory fsynced."""
    target, tmp = disk.mountpoint / "leader-epoch-checkpoint", disk.mountpoint / "leader-epoch-checkpoint.tmp"
    _write(target, b"0\n1\n0 0\n", fsync=True)
    _write(tmp, b"0\n2\n0 0\n1 5\n", fsync=True)
    os.replace(tmp, target)
    dfd = os.open(disk.mountpoint, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert stat.S_ISDIR(os.fstat(dfd).st_mode)
        os.fsync(dfd)
    finally:
        os.close(dfd)
    disk.power_cycle()
    assert target.read_bytes() == b"0\n2\n0 0\n1 5\n"
    assert not tmp.exists()


def test_a_rename_before_the_fsync_keeps_the_name_and_loses_the_data(disk: lossyfs.LossyDisk) -> None:
    """The namespace is durable at once (as in LazyFS); the renamed file's unsynced data is not:
    the empty file after a crash that a write-rename without fsync risks."""
    target, tmp = disk.mountpoint / "state", disk.mountpoint / "state.tmp"
    _write(target, b"old", fsync=True)
    _write(tmp, b"new", fsync=False)
    os.replace(tmp, target)
    disk.power_cycle()
    assert target.read_bytes() == b"" and not tmp.exists()


def test_a_directory_rename_carries_what_its_files_had_not_synced(disk: lossyfs.LossyDisk) -> None:
    """Kafka renames a deleted partition's directory (``LocalLog.renameDir``)."""
    (disk.mountpoint / "t-0").mkdir()
    _write(disk.mountpoint / "t-0" / "seg", b"durable", fsync=True)
    _write(disk.mountpoint / "t-0" / "seg", b"+lost", fsync=False, mode="ab")
    os.rename(disk.mountpoint / "t-0", disk.mountpoint / "t-0.abc-delete")
    disk.power_cycle()
    assert (disk.mountpoint / "t-0.abc-delete" / "seg").read_bytes() == b"durable"


def test_mmap_writes_count_once_msync_made_them_durable(disk: lossyfs.LossyDisk) -> None:
    """Kafka's offset and time indexes are memory-mapped; ``MappedByteBuffer.force`` is an
    ``msync``, which reaches the filesystem as an fsync."""
    idx = disk.mountpoint / "00000000000000000000.index"
    fd = os.open(idx, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, 1 << 16)
        with mmap.mmap(fd, 1 << 16) as m:
            m[0:8] = b"entry--1"
            m.flush()
            m[8:16] = b"entry--2"
    finally:
        os.close(fd)
    disk.power_cycle()
    assert idx.read_bytes()[:16] == b"entry--1" + bytes(8)


def test_after_the_cut_every_change_is_refused_until_the_mount_comes_back(disk: lossyfs.LossyDisk) -> None:
    f = disk.mountpoint / "f"
    _write(f, b"kept", fsync=True)
    assert disk.cut_power() == 0
    with pytest.raises(OSError):
        _write(disk.mountpoint / "g", b"x", fsync=False)
    disk.unmount()
    disk.mount()
    _write(disk.mountpoint / "g", b"x", fsync=False)
    assert f.read_bytes() == b"kept"


def test_sync_makes_everything_durable(disk: lossyfs.LossyDisk) -> None:
    _write(disk.mountpoint / "bootstrap.checkpoint", b"records", fsync=False)
    assert disk.sync() == 1
    disk.power_cycle()
    assert (disk.mountpoint / "bootstrap.checkpoint").read_bytes() == b"records"


def test_a_mount_that_cannot_come_up_is_an_error_naming_its_log(tmp_path: Path) -> None:
    (tmp_path / "data").write_text("a file, not a directory")
    d = lossyfs.LossyDisk(tmp_path / "disk", tmp_path / "data", tmp_path / "lossyfs.log")
    with pytest.raises(ConfigError, match="lossyfs.log|not a directory|File exists"):
        d.mount(timeout_s=5)
    d.unmount()
    assert not lossyfs.mounts_under(tmp_path)
