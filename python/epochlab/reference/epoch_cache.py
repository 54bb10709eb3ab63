"""The leader-epoch cache (Kafka's ``LeaderEpochFileCache``) and its checkpoint file."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Sequence
from os import PathLike
from typing import Any

from epochlab.errors import CorruptCheckpointError, StorageError

from . import _validate as v


class LeaderEpochCache:
    """Epoch -> first offset written in that epoch, strictly increasing in both coordinates.

    >>> c = LeaderEpochCache()
    >>> c.assign(0, 0), c.assign(1, 120)
    (True, True)
    >>> c.end_offset_for(0, 200)
    (0, 120)
    """

    __slots__ = ("_entries",)

    def __init__(self, entries: Sequence[tuple[int, int]] | None = None) -> None:
        """``entries``: strictly increasing epochs, non-decreasing start offsets."""
        checked = []
        for entry in entries or ():
            epoch, start = _pair(entry, "entries")
            checked.append((v.leader_epoch(epoch, "entries"), v.offset(start, "entries")))
        for index in range(1, len(checked)):
            (epoch_a, start_a), (epoch_b, start_b) = checked[index - 1], checked[index]
            if epoch_b <= epoch_a or start_b < start_a:
                # the value is the index of the offending entry, the one int that names it
                raise v.invalid("entries", index, f"entry {index} does not increase on its "
                                "predecessor in both epoch and start offset")
        self._entries: list[tuple[int, int]] = checked

    def assign(self, epoch: int, start_offset: int) -> bool:
        """KAFKA-7415 rule: no-op if ``epoch`` is the latest and ``start_offset`` is not below its
        start; otherwise evict trailing entries with an epoch >= ``epoch`` or a start >=
        ``start_offset``, then append. Returns whether the cache changed."""
        v.leader_epoch(epoch, "epoch")
        v.offset(start_offset, "start_offset")
        entries = self._entries
        if entries and entries[-1][0] == epoch and start_offset >= entries[-1][1]:
            return False
        while entries and (entries[-1][0] >= epoch or entries[-1][1] >= start_offset):
            entries.pop()
        entries.append((epoch, start_offset))
        return True

    def assign_kip101(self, epoch: int, start_offset: int) -> bool:
        """0.11-2.0 rule: append only if the cache is empty or ``epoch`` > latest epoch and
        ``start_offset`` >= latest start; otherwise ignore (no eviction)."""
        v.leader_epoch(epoch, "epoch")
        v.offset(start_offset, "start_offset")
        entries = self._entries
        if entries and not (epoch > entries[-1][0] and start_offset >= entries[-1][1]):
            return False
        entries.append((epoch, start_offset))
        return True

    def end_offset_for(self, requested_epoch: int | None, log_end_offset: int) -> tuple[int, int] | None:
        """Current ``endOffsetFor``: ``(epoch, exclusive end offset)`` or ``None`` (UNDEFINED).
        Below every known epoch it echoes ``requested_epoch`` with the first start offset."""
        requested_epoch = _check_lookup(requested_epoch, log_end_offset)
        if requested_epoch is None:
            return None
        if self.latest_epoch == requested_epoch:
            return (requested_epoch, log_end_offset)
        lo, hi = self._neighbours(requested_epoch)
        if hi is None:
            return None
        if lo is None:
            return (requested_epoch, hi[1])
        return (lo[0], hi[1])

    def end_offset_for_kip279(
        self, requested_epoch: int | None, log_end_offset: int
    ) -> tuple[int, int] | None:
        """Kafka 2.0: as :meth:`end_offset_for`, but below every known epoch it answers ``None``."""
        answer = self.end_offset_for(requested_epoch, log_end_offset)
        requested_epoch = _check_lookup(requested_epoch, log_end_offset)
        earliest = self.earliest_epoch
        if requested_epoch is not None and earliest is not None and requested_epoch < earliest:
            return None
        return answer

    def _neighbours(self, epoch: int) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
        """The last entry with an epoch <= ``epoch`` and the first with a larger one."""
        lower = [e for e in self._entries if e[0] <= epoch]
        higher = [e for e in self._entries if e[0] > epoch]
        return (lower[-1] if lower else None, higher[0] if higher else None)

    def end_offset_for_kip101(self, requested_epoch: int | None, log_end_offset: int) -> int | None:
        """Kafka 0.11: an end offset only, ``None`` for UNDEFINED. An empty cache answers its
        ``log_end_offset`` to an undefined request (the KAFKA-6857 bug)."""
        requested_epoch = _check_lookup(requested_epoch, log_end_offset)
        if requested_epoch is None:
            return log_end_offset if not self._entries else None
        if self.latest_epoch == requested_epoch:
            return log_end_offset
        _, hi = self._neighbours(requested_epoch)
        if hi is None or requested_epoch < self._entries[0][0]:
            return None
        return hi[1]

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove every entry whose start offset is >= ``end_offset``."""
        v.offset(end_offset, "end_offset")
        self._entries = [e for e in self._entries if e[1] < end_offset]

    def truncate_from_start(self, start_offset: int) -> None:
        """Remove entries starting at or before ``start_offset`` and re-insert the last of them
        at ``start_offset`` (the log start moved past them)."""
        v.offset(start_offset, "start_offset")
        dropped = [e for e in self._entries if e[1] <= start_offset]
        kept = [e for e in self._entries if e[1] > start_offset]
        if dropped:
            kept.insert(0, (dropped[-1][0], start_offset))
        self._entries = kept

    def epoch_for_offset(self, offset: int) -> int | None:
        """Epoch of the entry with the greatest start offset <= ``offset``; ``None`` if none."""
        v.offset(offset, "offset")
        found = [e for e in self._entries if e[1] <= offset]
        return found[-1][0] if found else None

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1][0] if self._entries else None

    @property
    def earliest_epoch(self) -> int | None:
        return self._entries[0][0] if self._entries else None

    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    def clear(self) -> None:
        self._entries = []

    def copy(self) -> LeaderEpochCache:
        clone = LeaderEpochCache()
        clone._entries = list(self._entries)
        return clone

    def to_checkpoint_text(self) -> str:
        """Kafka's ``leader-epoch-checkpoint`` text: version 0, the entry count, then
        ``"<epoch> <start_offset>"`` lines, each ending in a newline."""
        lines = ["0", str(len(self._entries))] + [f"{e} {s}" for e, s in self._entries]
        return "".join(line + "\n" for line in lines)

    @staticmethod
    def from_checkpoint_text(text: str, path: str | None = None) -> LeaderEpochCache:
        """Parse checkpoint text; :class:`CorruptCheckpointError` names the 1-based line."""
        if not isinstance(text, str):
            raise TypeError("argument 'text' must be str")
        if path is not None and not isinstance(path, str):
            raise TypeError("argument 'path' must be str or None")
        return LeaderEpochCache(_parse_checkpoint(text, path))

    def write_checkpoint(self, path: str | PathLike[str]) -> None:
        """Atomic write: ``<path>.tmp``, fsync, rename over ``path``, fsync the directory.
        An I/O failure is a :class:`StorageError`."""
        target = os.fspath(path)
        if not target:
            raise StorageError("checkpoint : empty path", path="", reason="empty path")
        tmp = target + ".tmp"
        try:
            with open(tmp, "w", encoding="utf-8", newline="\n") as f:
                f.write(self.to_checkpoint_text())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
            _fsync_directory(os.path.dirname(os.path.abspath(target)))
        except OSError as e:
            with contextlib.suppress(OSError):
                os.remove(tmp)  # leave no half-written temporary behind
            raise StorageError(f"checkpoint {target}: {e}", path=target, reason=str(e)) from e

    @staticmethod
    def read_checkpoint(path: str | PathLike[str]) -> LeaderEpochCache:
        """Read and parse a checkpoint file; a missing or unreadable file is a
        :class:`StorageError`, malformed content a :class:`CorruptCheckpointError`."""
        target = os.fspath(path)
        try:
            with open(target, "rb") as f:
                data = f.read()
        except OSError as e:
            raise StorageError(f"checkpoint {target}: {e}", path=target, reason=str(e)) from e
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            line = data[: e.start].count(b"\n") + 1
            raise _corrupt(target, line, "invalid UTF-8") from e
        return LeaderEpochCache.from_checkpoint_text(text, target)

    def __len__(self) -> int:
        return len(self._entries)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LeaderEpochCache):
            return NotImplemented
        return self._entries == other._entries

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self._entries!r})"


def _check_lookup(requested_epoch: Any, log_end_offset: Any) -> int | None:
    """Validates a lookup's arguments; returns the requested epoch, ``None`` when undefined."""
    requested = v.requested_epoch(requested_epoch, "requested_epoch")
    v.offset(log_end_offset, "log_end_offset")
    return requested


def _pair(entry: Any, argument: str) -> tuple[Any, Any]:
    try:
        epoch, start = entry
    except (TypeError, ValueError):
        raise TypeError(f"argument '{argument}' must hold (epoch, start_offset) pairs") from None
    return epoch, start


def _fsync_directory(directory: str) -> None:
    # The rename is durable only once the directory entry is; POSIX needs the directory fsynced.
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _corrupt(path: str | None, line: int, reason: str) -> CorruptCheckpointError:
    where = f"corrupt checkpoint {path}" if path is not None else "corrupt checkpoint"
    return CorruptCheckpointError(f"{where}, line {line}: {reason}", path=path, line=line, reason=reason)


def _non_negative(token: str) -> int | None:
    """ASCII decimal digits only: no sign, no spaces, no underscores (Python's ``int`` would
    accept all three)."""
    if token and token.isascii() and token.isdigit():
        return int(token)
    return None


def _parse_checkpoint(text: str, path: str | None) -> list[tuple[int, int]]:
    # A "\r" before the "\n" is dropped, so CRLF files read as they do in Kafka.
    lines = [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]
    if lines[-1] == "":
        lines.pop()  # the trailing newline of the last line
    # Kafka's CheckpointFile reads an empty file, or a version line alone, as no entries
    # (CheckpointReadBuffer.read); it creates such an empty file for every new partition.
    if not lines:
        return []
    if lines[0] != "0":
        raise _corrupt(path, 1, f"unsupported version {lines[0]!r}")
    if len(lines) < 2:
        return []
    count = _non_negative(lines[1])
    if count is None or count > 2**31 - 1:  # Kafka reads the count as an Int
        raise _corrupt(path, 2, f"invalid entry count {lines[1]!r}")
    entries: list[tuple[int, int]] = []
    for index in range(count):
        line_no = index + 3
        if line_no > len(lines):
            raise _corrupt(path, line_no, f"missing entry {index + 1} of {count}")
        entries.append(_parse_entry(lines[line_no - 1], line_no, path, entries))
    if len(lines) > count + 2:
        raise _corrupt(path, count + 3, "unexpected line after the last entry")
    return entries


def _parse_entry(line: str, line_no: int, path: str | None, previous: list[tuple[int, int]]) -> tuple[int, int]:
    # Java's \s minus line terminators separates the fields; Python's str.split() would also
    # split on other Unicode spaces.
    tokens = [t for t in re.split(r"[ \t\x0b\x0c]+", line) if t]
    if len(tokens) != 2:
        raise _corrupt(path, line_no, f"expected '<epoch> <start_offset>', got {line!r}")
    epoch, start = (_non_negative(t) for t in tokens)
    if epoch is None or start is None:
        raise _corrupt(path, line_no, f"not a non-negative integer pair: {line!r}")
    if epoch > v.LEADER_EPOCH_MAX or start > v.OFFSET_MAX:
        raise _corrupt(path, line_no, f"entry out of range: {line!r}")
    if previous and (epoch <= previous[-1][0] or start < previous[-1][1]):
        raise _corrupt(path, line_no, f"entry ({epoch}, {start}) does not follow {previous[-1]}")
    return (epoch, start)
