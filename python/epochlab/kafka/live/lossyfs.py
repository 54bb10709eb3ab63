"""A filesystem that forgets every write not yet fsynced: a power loss under a broker's log directory.

The contract is Jepsen's LazyFS (dsrhaslab/lazyfs, its README: "clear-cache" drops the data
not yet synced; ``fsync``/``fdatasync`` persist a file's data), here as a FUSE passthrough
filesystem (libfuse 3 through ``mfusepy``) over a backing directory, the "disk":

* Every operation goes to the backing directory at once, so reads, ``mmap`` and ``sendfile``
  see what the broker wrote, as they would through a page cache.
* Per file, what the last ``fsync``/``fdatasync`` made durable is remembered: the file's size
  then, and the original 4 KiB pages below that size that were overwritten or truncated away
  since. Data written past that size needs nothing saved (it is cut off).
* ``fsync``/``fdatasync`` of a file (``FileChannel.force``, ``MappedByteBuffer.force`` ->
  ``msync``) fsyncs the backing file and forgets what was saved: its current contents are
  durable.
* **Power cut** (:meth:`LossyDisk.cut_power`): every file goes back to its contents and size
  as of its last fsync (a file created and never fsynced: empty), and from then on the filesystem refuses every change with EIO (the disk is gone):
  what the kernel writes back afterwards (a killed process's dirty ``mmap`` pages, written on
  unmount) is lost too. The mount is then unmounted and mounted afresh (by the same daemon,
  :meth:`LossyDisk.power_cycle`, 30-40 ms), which also drops the
  kernel's page cache for it, and the broker restarts on what a disk would hold.

What is lost, and what is not (decided here, as LazyFS does it):

* Lost: file data and file size changes (writes, ``ftruncate``, ``O_TRUNC``) since the file's
  last ``fsync``/``fdatasync``. This is the worst case ext4 with ``data=ordered`` allows for
  data that was not fsynced: ext4 writes a file's dirty pages back on its own timer (30 s) and
  commits the journal every 5 s, so some of it may survive there; nothing of it is promised.
* Kept: the namespace. ``create``, ``mkdir``, ``rename``, ``unlink`` and ``rmdir`` are durable
  at once, as in LazyFS, which keeps only file data in its cache and passes metadata
  operations to the underlying filesystem. ext4 journals them and commits within 5 s (or at
  any ``fsync`` on the filesystem, which commits the whole running transaction), so a real
  crash can additionally lose a create or a rename from its last seconds that no ``fsync`` of
  the file or its directory followed; that loss is not reproduced. A file renamed before its
  data was fsynced keeps its new name and loses its data (the empty file after a crash that
  ext4's ``auto_da_alloc`` exists to avoid): Kafka's checkpoint files are fsynced before their
  rename (``Utils.atomicMoveWithFallback``, see ``docs/kafka-run.md``), so they never show it.

The daemon runs as ``python -m epochlab.kafka.live.lossyfs BACKING MOUNTPOINT CONTROL``,
``CONTROL`` an abstract unix socket name answering ``cut-power``, ``power-cycle``, ``sync``
and ``status``; :class:`LossyDisk` starts, controls and stops it. The debug log of every
error answered and every fsync: ``EPOCHLAB_LOSSYFS_DEBUG=1`` in the daemon's environment.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from epochlab.errors import ConfigError

__all__ = ["FSTYPE", "PAGE_BYTES", "SETUP", "LossyDisk", "LossyOperations", "available", "main", "mounts_under",
           "unmount_all"]

_log = logging.getLogger("epochlab.lossyfs")
#: The granularity of what is saved before an overwrite (the kernel's page size).
PAGE_BYTES = 4096
#: The type ``/proc/self/mounts`` shows for a mount of this filesystem.
FSTYPE = "fuse.lossyfs"
#: The script that installs what this filesystem needs (fuse3 from apt, mfusepy from PyPI).
SETUP = "bash scripts/kafka-fuse-setup"


def available() -> str | None:
    """``None`` when a lossy filesystem can be mounted here, else why not, naming what installs
    the missing part: ``/dev/fuse``, ``fusermount3`` (Debian ``fuse3``), libfuse 3 and the
    ``mfusepy`` bindings."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing (the kernel's FUSE module is not loaded or not available here)"
    if shutil.which("fusermount3") is None:
        return f"fusermount3 is not installed (Debian package fuse3): run `{SETUP}`"
    try:
        import mfusepy  # noqa: F401  (loads libfuse 3 on import)
    except (ImportError, OSError, EnvironmentError) as exc:
        return f"the FUSE bindings do not load ({exc}): run `{SETUP}`"
    return None


@dataclass
class _Durable:
    """What a file's last fsync made durable, to go back to: its size then and the original
    content of each page below that size changed since (page index -> bytes)."""

    size: int
    pages: dict[int, bytes] = field(default_factory=dict)


class LossyOperations:
    """The passthrough operations (mfusepy's ``Operations`` protocol) with the bookkeeping of
    unsynced changes. Paths are the mount's (``/a/b``), files are keyed by them, and a rename
    moves the key. One lock guards the bookkeeping; the I/O of different files runs in
    libfuse's threads."""

    use_ns = True

    def __init__(self, backing: str) -> None:
        self.root = os.path.realpath(backing)
        self.mutex = threading.Lock()
        self.durable: dict[str, _Durable] = {}
        self.powered = True

    # -- bookkeeping --------------------------------------------------------------------------
    def _full(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def _live(self) -> None:
        if not self.powered:
            raise OSError(errno.EIO, "lossyfs: the power is cut")

    def _save(self, path: str, fd: int, start: int, end: int) -> None:
        """Before bytes ``[start, end)`` of ``path`` change: save the pages of that range that
        lie below the durable size and were not saved since the last fsync."""
        rec = self.durable.get(path)
        if rec is None:
            rec = self.durable[path] = _Durable(os.fstat(fd).st_size)
        for page in range(start // PAGE_BYTES, (min(end, rec.size) + PAGE_BYTES - 1) // PAGE_BYTES):
            if page not in rec.pages:
                rec.pages[page] = os.pread(fd, PAGE_BYTES, page * PAGE_BYTES)

    def cut_power(self) -> int:
        """Every file back to its last fsync; later changes refused. Returns the number of
        files that were changed back."""
        with self.mutex:
            self.powered = False
            reverted = 0
            for path, rec in self.durable.items():
                try:
                    fd = os.open(self._full(path), os.O_WRONLY)
                except FileNotFoundError:
                    continue
                try:
                    os.ftruncate(fd, rec.size)
                    for page, data in rec.pages.items():
                        os.pwrite(fd, data[: max(0, rec.size - page * PAGE_BYTES)], page * PAGE_BYTES)
                finally:
                    os.close(fd)
                _log.debug("cut: %s back to %d bytes, %d pages restored", path, rec.size, len(rec.pages))
                reverted += 1
            self.durable.clear()
            return reverted

    def sync(self) -> int:
        """``sync(1)``: every file's changes made durable. Returns the number of files."""
        with self.mutex:
            self._live()
            synced = 0
            for path in self.durable:
                try:
                    fd = os.open(self._full(path), os.O_RDONLY)
                except FileNotFoundError:
                    continue
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                synced += 1
            self.durable.clear()
            return synced

    def _move(self, old: str, new: str) -> None:
        prefix = old.rstrip("/") + "/"
        for key in [k for k in self.durable if k == new or k.startswith(new.rstrip("/") + "/")]:
            del self.durable[key]
        for key in [k for k in self.durable if k == old or k.startswith(prefix)]:
            self.durable[new + key[len(old):]] = self.durable.pop(key)

    # -- files ------------------------------------------------------------------------------
    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        # fh 0: no handle of ours (a directory: there is no opendir here, libfuse passes 0)
        st = os.fstat(fh) if fh else os.lstat(self._full(path))
        out = {k: getattr(st, k) for k in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_ino",
                                          "st_blocks", "st_blksize")}
        out.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        return out

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._full(path), amode):
            raise OSError(errno.EACCES, "access denied")
        return 0

    def open(self, path: str, flags: int) -> int:
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC):
            self._live()
        fd = os.open(self._full(path), _backing_flags(flags))
        if flags & os.O_TRUNC:
            with self.mutex:
                self._save(path, fd, 0, os.fstat(fd).st_size)
                os.ftruncate(fd, 0)
        return fd

    def create(self, path: str, mode: int, flags: int = os.O_WRONLY) -> int:
        self._live()
        with self.mutex:
            fd = os.open(self._full(path), _backing_flags(flags) | os.O_CREAT, mode)
            self._save(path, fd, 0, 0)  # a new file's durable size is 0
        return fd

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return os.pread(fh, size, offset)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        with self.mutex:
            self._live()
            self._save(path, fh, offset, offset + len(data))
            return os.pwrite(fh, data, offset)

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        fd = fh if fh else os.open(self._full(path), os.O_RDWR)  # read: pages saved first
        try:
            with self.mutex:
                self._live()
                size = os.fstat(fd).st_size
                self._save(path, fd, min(size, length), max(size, length))
                os.ftruncate(fd, length)
        finally:
            if not fh:
                os.close(fd)
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        with self.mutex:
            self._live()
            (os.fdatasync if datasync else os.fsync)(fh)
            rec = self.durable.pop(path, None)
            _log.debug("fsync %s (%s)", path, "had unsynced changes" if rec else "clean")
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0

    def release(self, path: str, fh: int) -> int:
        os.close(fh)
        return 0

    def fallocate(self, path: str, mode: int, offset: int, size: int, fh: int) -> int:
        raise OSError(errno.EOPNOTSUPP, "fallocate is not supported")

    # -- names (durable at once, see the module docs) -------------------------------------------
    def rename(self, old: str, new: str) -> int:
        with self.mutex:
            self._live()
            os.rename(self._full(old), self._full(new))
            self._move(old, new)
        return 0

    def unlink(self, path: str) -> int:
        with self.mutex:
            self._live()
            os.unlink(self._full(path))
            self.durable.pop(path, None)
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        self._live()
        os.mkdir(self._full(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        self._live()
        os.rmdir(self._full(path))
        return 0

    def symlink(self, target: str, source: str) -> int:
        self._live()
        os.symlink(source, self._full(target))
        return 0

    def readlink(self, path: str) -> str:
        return os.readlink(self._full(path))

    def chmod(self, path: str, mode: int) -> int:
        self._live()
        os.chmod(self._full(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        self._live()
        os.chown(self._full(path), uid, gid)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        self._live()
        os.utime(self._full(path), ns=times) if times else os.utime(self._full(path))
        return 0

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._full(path))]

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        self._live()
        fd = os.open(self._full(path), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        sv = os.statvfs(self._full(path))
        return {k: getattr(sv, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                                           "f_files", "f_flag", "f_frsize", "f_namemax")}


def _backing_flags(flags: int) -> int:
    """The backing file's open flags for a mount's open: read-write where the caller writes
    (the original pages are read before an overwrite), without ``O_TRUNC`` (done here, after
    saving) and ``O_APPEND`` (the kernel already gives appends their offset)."""
    if flags & os.O_ACCMODE == os.O_WRONLY:
        flags = (flags & ~os.O_ACCMODE) | os.O_RDWR
    return flags & ~(os.O_TRUNC | os.O_APPEND)


@dataclass
class _Daemon:
    """The daemon's state: the operations of the current mount, and whether the next unmount
    is a power cycle (mount again at once, with every file as the cut left it)."""

    ops: LossyOperations
    remount: bool = False


def _serve_control(daemon: _Daemon, name: str) -> None:
    """Answer one-line commands on the abstract unix socket ``name``: ``cut-power`` ->
    ``reverted N`` (the next unmount ends the daemon); ``power-cycle`` -> ``reverted N`` (the
    same cut; the next unmount is followed by a fresh mount in this process); ``sync`` ->
    ``synced N``; ``status`` -> ``powered N`` or ``cut N`` (N files with unsynced changes)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind("\0" + name)
    server.listen(4)
    while True:
        conn, _ = server.accept()
        with conn:
            command = conn.recv(64).decode(errors="replace").strip()
            ops = daemon.ops
            if command in ("cut-power", "power-cycle"):
                daemon.remount = command == "power-cycle"
                reply = f"reverted {ops.cut_power()}"
            elif command == "sync":
                try:
                    reply = f"synced {ops.sync()}"
                except OSError as exc:
                    reply = f"error {exc}"
            elif command == "status":
                with ops.mutex:
                    reply = f"{'powered' if ops.powered else 'cut'} {len(ops.durable)}"
            else:
                reply = f"error unknown command {command!r}"
            conn.sendall(reply.encode() + b"\n")


def main(argv: list[str] | None = None) -> int:
    """The daemon: mount ``BACKING`` at ``MOUNTPOINT`` in the foreground until unmounted."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m epochlab.kafka.live.lossyfs BACKING MOUNTPOINT CONTROL", file=sys.stderr)
        return 2
    import mfusepy

    backing, mountpoint, control = args
    if os.environ.get("EPOCHLAB_LOSSYFS_DEBUG"):  # every error answered, to the daemon's log
        logging.basicConfig(level=logging.DEBUG, format="%(asctime)s %(message)s")
        logging.getLogger("fuse").setLevel(logging.DEBUG)
        _log.setLevel(logging.DEBUG)
    daemon = _Daemon(LossyOperations(backing))
    threading.Thread(target=_serve_control, args=(daemon, control), daemon=True).start()
    while True:
        mfusepy.FUSE(daemon.ops, mountpoint, foreground=True, fsname="lossyfs", subtype="lossyfs")
        if not daemon.remount:
            return 0
        # the power is back: a new mount (the kernel's page cache went with the old one)
        daemon.remount = False
        daemon.ops = LossyOperations(backing)


class LossyDisk:
    """A lossy mount of ``backing`` at ``mountpoint``, its daemon logging to ``log``.

    >>> disk = LossyDisk("/tmp/d/disk", "/tmp/d/data", "/tmp/d/lossyfs.log")  # doctest: +SKIP
    >>> disk.mount(); ...; disk.power_cycle(); ...; disk.unmount()            # doctest: +SKIP

    ``mount`` raises :class:`ConfigError` when the filesystem is unavailable (naming
    :data:`SETUP`) or the mount does not come up; ``unmount`` is safe to call twice.
    """

    def __init__(self, backing: str | os.PathLike[str], mountpoint: str | os.PathLike[str],
                 log: str | os.PathLike[str]) -> None:
        self.backing = Path(backing)
        self.mountpoint = Path(mountpoint)
        self.log = Path(log)
        self.control = f"epochlab-lossyfs-{uuid.uuid4().hex[:12]}"
        self.proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def for_node(cls, node_dir: str | os.PathLike[str]) -> LossyDisk:
        """A cluster node's disk: ``NODE/disk`` mounted at its log directory ``NODE/data``."""
        return cls(Path(node_dir) / "disk", Path(node_dir) / "data", Path(node_dir) / "lossyfs.log")

    @property
    def mounted(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def mount(self, timeout_s: float = 15.0) -> None:
        why = available()
        if why is not None:
            raise ConfigError(f"a lossy filesystem cannot be mounted: {why}", where="lossyfs", field="fuse",
                              expected="FUSE", got=why)
        try:
            self.backing.mkdir(parents=True, exist_ok=True)
            self.mountpoint.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"the lossy filesystem cannot be mounted at {self.mountpoint}: {exc}",
                              where="lossyfs", field="mount", expected="a directory", got=str(exc)) from exc
        self.control = f"epochlab-lossyfs-{uuid.uuid4().hex[:12]}"
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "epochlab.kafka.live.lossyfs", str(self.backing),
                                          str(self.mountpoint), self.control], stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            if os.path.ismount(self.mountpoint) and self._ask("status", quiet=True).startswith("powered"):
                return
            time.sleep(0.05)
        self.unmount()
        raise ConfigError(f"the lossy filesystem did not mount at {self.mountpoint} within {timeout_s:.0f} s "
                          f"(its log: {self.log})", where="lossyfs", field="mount", expected="mounted",
                          got=str(self.mountpoint))

    def _ask(self, command: str, quiet: bool = False) -> str:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(30)
                s.connect("\0" + self.control)
                s.sendall(command.encode() + b"\n")
                return s.makefile().readline().strip()
        except OSError as exc:
            if quiet:
                return ""
            raise ConfigError(f"the lossy filesystem at {self.mountpoint} does not answer: {exc}",
                              where="lossyfs", field="control", expected="an answer", got=str(exc)) from exc

    def cut_power(self) -> int:
        """Every file back to its last fsync, every later change refused; the number of files
        changed back. The mount stays until :meth:`unmount`."""
        return self._count("cut-power", "reverted")

    def sync(self) -> int:
        """Make every change so far durable (``sync(1)``); the number of files it concerned."""
        return self._count("sync", "synced")

    def _count(self, command: str, word: str) -> int:
        """``command``'s answer ``WORD N``: N; any other answer is a :class:`ConfigError`."""
        reply = self._ask(command)
        parts = reply.split()
        if len(parts) != 2 or parts[0] != word or not parts[1].isdigit():
            raise ConfigError(f"the lossy filesystem at {self.mountpoint} answered {reply!r} to {command}",
                              where="lossyfs", field="control", expected=f"{word} N", got=reply)
        return int(parts[1])

    def unmount(self) -> None:
        """``fusermount3 -u`` (lazily if still busy after 5 s), then wait for the daemon."""
        if self.proc is None:
            return
        self._fusermount_u()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.proc = None

    def _fusermount_u(self) -> None:
        """Unmount, retrying while busy, lazily after 5 s."""
        deadline = time.monotonic() + 5
        while os.path.ismount(self.mountpoint):
            done = subprocess.run(["fusermount3", "-u", str(self.mountpoint)], capture_output=True, check=False)
            if done.returncode == 0:
                break
            with open(self.log, "ab") as log:
                log.write(b"unmount: " + done.stderr)
            if time.monotonic() > deadline:
                subprocess.run(["fusermount3", "-u", "-z", str(self.mountpoint)], capture_output=True, check=False)
                break
            time.sleep(0.1)

    def power_cycle(self, timeout_s: float = 15.0) -> int:
        """A power loss and the machine back on: the cut of :meth:`cut_power`, an unmount (the
        kernel's page cache for the mount goes with it, and what it writes back on the way is
        refused) and a fresh mount by the same daemon (no process start: about 0.1 s). Returns
        the number of files changed back."""
        reply = self._ask("power-cycle")
        if not reply.startswith("reverted "):
            raise ConfigError(f"the lossy filesystem at {self.mountpoint} answered {reply!r} to power-cycle",
                              where="lossyfs", field="control", expected="reverted N", got=reply)
        self._fusermount_u()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.mounted:
            if os.path.ismount(self.mountpoint) and self._ask("status", quiet=True).startswith("powered"):
                return int(reply.split()[1])
            time.sleep(0.01)
        self.unmount()
        raise ConfigError(f"the lossy filesystem did not come back at {self.mountpoint} within {timeout_s:.0f} s "
                          f"after its power cut (its log: {self.log})", where="lossyfs", field="mount",
                          expected="mounted", got=str(self.mountpoint))


def mounts_under(directory: str | os.PathLike[str]) -> list[str]:
    """The mount points of this filesystem at or below ``directory``."""
    root = os.path.realpath(directory)
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    points = [line.split()[1].encode().decode("unicode_escape") for line in lines if len(line.split()) > 2
              and line.split()[2] == FSTYPE]
    return [p for p in points if p == root or p.startswith(root.rstrip("/") + "/")]


def unmount_all(directory: str | os.PathLike[str]) -> None:
    """Unmount every mount of this filesystem at or below ``directory`` (lazily: a mount left
    by a process that died may still be busy); its daemon exits with it."""
    if shutil.which("fusermount3") is None:
        return
    for point in mounts_under(directory):
        subprocess.run(["fusermount3", "-u", "-z", point], capture_output=True, check=False)


if __name__ == "__main__":
    raise SystemExit(main())
