"""Read a Kafka broker's log directory (or one partition directory) with the Rust parsers.

Layout, as ``LogManager`` and ``UnifiedLog`` keep it (Kafka 4.x, ``LogManager.loadLogs``,
``LogLoader``): a log directory holds ``meta.properties``, the broker-level checkpoints
(``replication-offset-checkpoint``, ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``cleaner-offset-checkpoint``) and one ``<topic>-<partition>``
directory per replica, which holds segments (``<base offset>.log`` with ``.index``,
``.timeindex`` and ``.txnindex``), producer snapshots (``<offset>.snapshot``),
``leader-epoch-checkpoint`` and ``partition.metadata``.

Nothing here raises for damaged data: each file that cannot be read becomes a
:class:`FileProblem` naming the file and the byte offset, and everything readable is kept (a
segment keeps its batches up to the damage). Only a path that is not a Kafka directory at
all is an error (:class:`~epochlab.errors.ConfigError`).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from epochlab import _core
from epochlab.errors import ConfigError, KafkaFormatError

__all__ = ["FileProblem", "LogDirView", "PartitionView", "Segment", "read_log_dir", "read_partition_dir"]

_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d{1,10})$")
_OFFSET_FILE = re.compile(r"^(?P<offset>\d{20})\.(?P<suffix>log|index|timeindex|txnindex|snapshot)$")
#: Kafka's segment size limit is an int (``segment.bytes``); a larger file is not a segment
MAX_FILE_BYTES = (1 << 31) - 1
BROKER_CHECKPOINTS = ("replication-offset-checkpoint", "recovery-point-offset-checkpoint",
                      "log-start-offset-checkpoint", "cleaner-offset-checkpoint")


@dataclass(frozen=True)
class FileProblem:
    """A file that could not be (fully) read: ``offset`` is the byte where the damage starts."""

    file: str
    offset: int | None
    reason: str

    def __str__(self) -> str:
        where = f" at byte {self.offset}" if self.offset is not None else ""
        return f"{self.file}{where}: {self.reason}"


@dataclass
class Segment:
    """One ``<base offset>.log`` with its indexes. ``batches`` are the dicts of
    ``epochlab._core.parse_segment`` (Kafka's field values as written, -1 sentinels included)."""

    file: str
    base_offset: int
    size: int
    valid_bytes: int
    batches: list[dict[str, Any]]
    error: FileProblem | None = None
    offset_index: list[tuple[int, int]] | None = None
    time_index: list[tuple[int, int]] | None = None
    aborted_txns: list[dict[str, Any]] | None = None


@dataclass
class PartitionView:
    """Everything one replica's partition directory holds."""

    topic: str
    partition: int
    path: str
    segments: list[Segment] = field(default_factory=list)
    leader_epoch_checkpoint: list[tuple[int, int]] | None = None
    producer_snapshots: dict[int, dict[str, Any]] = field(default_factory=dict)
    topic_id: str | None = None
    high_watermark: int | None = None
    log_start_offset_checkpoint: int | None = None
    recovery_point: int | None = None
    other_files: list[str] = field(default_factory=list)
    problems: list[FileProblem] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def batches(self) -> Iterator[dict[str, Any]]:
        for s in self.segments:
            yield from s.batches

    @property
    def log_end_offset(self) -> int:
        """One past the last batch read (the base offset of the first segment if none)."""
        last = None
        for b in self.batches():
            last = b
        if last is not None:
            return int(last["last_offset"]) + 1
        return self.segments[0].base_offset if self.segments else 0

    @property
    def log_start_offset(self) -> int:
        """The checkpointed log start offset, else the first segment's base offset (what
        ``LogLoader`` starts from)."""
        first = self.segments[0].base_offset if self.segments else 0
        return max(first, self.log_start_offset_checkpoint or 0)

    def epochs_from_batches(self) -> list[tuple[int, int]]:
        """The leader-epoch cache Kafka rebuilds from the batches when the checkpoint is lost
        (``LogLoader`` -> ``UnifiedLog.assignEpochStartOffset`` per v2 batch whose epoch is new
        and higher), then truncated from the log start offset as ``LogLoader`` does
        (``LeaderEpochFileCache.truncateFromStart``: the entry covering the log start begins
        there, earlier ones go): ``(epoch, first offset)``; v0/v1 batches carry no epoch."""
        out: list[tuple[int, int]] = []
        for b in self.batches():
            epoch = int(b["partition_leader_epoch"])
            if b["magic"] >= 2 and epoch >= 0 and (not out or epoch > out[-1][0]):
                out.append((epoch, int(b["base_offset"])))
        start = self.log_start_offset
        covering = [e for e in out if e[1] <= start]
        later = [e for e in out if e[1] > start]
        return ([(covering[-1][0], start)] if covering else []) + later

    def leader_epochs(self) -> list[tuple[int, int]]:
        """The checkpoint's entries when it was readable, else the ones rebuilt from batches."""
        if self.leader_epoch_checkpoint is not None:
            return list(self.leader_epoch_checkpoint)
        return self.epochs_from_batches()


@dataclass
class LogDirView:
    """A broker's log directory: its partitions, broker checkpoints and problems."""

    path: str
    node_id: int | None
    partitions: dict[str, PartitionView] = field(default_factory=dict)
    checkpoints: dict[str, list[tuple[str, int, int]]] = field(default_factory=dict)
    problems: list[FileProblem] = field(default_factory=list)

    def all_problems(self) -> list[FileProblem]:
        return self.problems + [p for v in self.partitions.values() for p in v.problems]


def _read(path: Path, problems: list[FileProblem]) -> bytes | None:
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):  # a FIFO or device under a Kafka name would block or never end
            problems.append(FileProblem(str(path), None, "not a regular file"))
            return None
        size = st.st_size
        if size > MAX_FILE_BYTES:
            problems.append(FileProblem(str(path), None, f"{size} bytes: larger than any Kafka file ({MAX_FILE_BYTES})"))
            return None
        return path.read_bytes()
    except OSError as exc:
        problems.append(FileProblem(str(path), None, f"cannot read: {exc.strerror or exc}"))
        return None


def _parsed(path: Path, parse: Callable[[bytes, str], Any], problems: list[FileProblem]) -> Any:
    data = _read(path, problems)
    if data is None:
        return None
    try:
        return parse(data, str(path))
    except KafkaFormatError as exc:
        problems.append(FileProblem(str(path), getattr(exc, "offset", None), getattr(exc, "reason", exc.message)))
        return None


def _node_id(directory: Path, problems: list[FileProblem]) -> int | None:
    """``node.id`` (KRaft) or ``broker.id`` (ZooKeeper mode) from ``meta.properties``."""
    meta = directory / "meta.properties"
    if not meta.is_file():
        return None
    data = _read(meta, problems)
    if data is None:
        return None
    for line in data.decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() in ("node.id", "broker.id"):
            try:
                return int(value.strip())
            except ValueError:
                problems.append(FileProblem(str(meta), None, f"{key.strip()} is not an integer: {value.strip()!r}"))
    return None


def read_partition_dir(path: str | os.PathLike[str]) -> PartitionView:
    """Read one ``<topic>-<partition>`` directory."""
    directory = Path(path)
    match = _PARTITION_DIR.match(directory.name)
    if not directory.is_dir():
        raise ConfigError(f"{directory}: not a directory", where=str(directory), field="path",
                          expected="a Kafka log or partition directory", got=str(directory))
    topic, partition = (match["topic"], int(match["partition"])) if match else (directory.name, 0)
    view = PartitionView(topic, partition, str(directory))
    segments: dict[int, Segment] = {}
    pending: list[tuple[int, str, Path]] = []
    for entry in sorted(directory.iterdir()):
        m = _OFFSET_FILE.match(entry.name)
        if m and entry.is_file():
            pending.append((int(m["offset"]), m["suffix"], entry))
        elif entry.name == "leader-epoch-checkpoint":
            got = _parsed(entry, _core.parse_leader_epoch_checkpoint, view.problems)
            view.leader_epoch_checkpoint = None if got is None else [tuple(e) for e in got["entries"]]
        elif entry.name == "partition.metadata":
            got = _parsed(entry, _core.parse_partition_metadata, view.problems)
            view.topic_id = None if got is None else got["topic_id"]
        else:
            view.other_files.append(entry.name)
    for offset, suffix, entry in pending:  # segments first: the indexes attach to them
        if suffix == "log":
            segments[offset] = _segment(entry, offset, view.problems)
    for offset, suffix, entry in pending:
        if suffix == "snapshot":
            got = _parsed(entry, _core.parse_producer_snapshot, view.problems)
            if got is not None and not got["crc_valid"]:
                # Kafka refuses it (ProducerStateManager.readSnapshot: CorruptSnapshotException)
                view.problems.append(FileProblem(str(entry), 2, f"CRC mismatch (stored {got['crc']})"))
            elif got is not None:
                view.producer_snapshots[offset] = got
        elif suffix != "log":
            _attach_index(segments, offset, suffix, entry, view)
    view.segments = [segments[k] for k in sorted(segments)]
    return view


def _segment(entry: Path, base_offset: int, problems: list[FileProblem]) -> Segment:
    data = _read(entry, problems)
    if data is None:  # _read has reported why
        return Segment(str(entry), base_offset, 0, 0, [], problems[-1])
    dump = _core.parse_segment(data, str(entry))
    error = None
    if dump["error"] is not None:
        error = FileProblem(str(entry), dump["error"]["offset"], dump["error"]["reason"])
        problems.append(error)
    for b in dump["batches"]:
        if not b["crc_valid"]:
            problems.append(FileProblem(str(entry), b["position"], f"batch at offset {b['base_offset']}: CRC mismatch "
                                        f"(stored {b['crc']})"))
    return Segment(str(entry), base_offset, dump["size"], dump["valid_bytes"], dump["batches"], error)


def _attach_index(segments: dict[int, Segment], offset: int, suffix: str, entry: Path, view: PartitionView) -> None:
    parse = {"index": _core.parse_offset_index, "timeindex": _core.parse_time_index,
             "txnindex": _core.parse_txn_index}[suffix]
    got = _parsed(entry, parse, view.problems)
    segment = segments.get(offset)
    if segment is None:
        view.other_files.append(entry.name)  # an index without its segment: LogLoader deletes it
        return
    if got is None:
        return
    if suffix == "index":
        segment.offset_index = [tuple(e) for e in got]
    elif suffix == "timeindex":
        segment.time_index = [tuple(e) for e in got]
    else:
        segment.aborted_txns = list(got)


def read_log_dir(path: str | os.PathLike[str]) -> LogDirView:
    """Read a broker's log directory (``log.dirs`` entry). A directory that itself holds
    segments is read as a single partition directory."""
    directory = Path(path)
    if not directory.is_dir():
        raise ConfigError(f"{directory}: not a directory", where=str(directory), field="path",
                          expected="a Kafka log or partition directory", got=str(directory))
    if any(_OFFSET_FILE.match(p.name) for p in directory.iterdir()):
        view = read_partition_dir(directory)
        return LogDirView(str(directory), None, {view.name: view})
    result = LogDirView(str(directory), None)
    result.node_id = _node_id(directory, result.problems)
    for name in BROKER_CHECKPOINTS:
        f = directory / name
        if f.is_file():
            got = _parsed(f, _core.parse_offset_checkpoint, result.problems)
            if got is not None:
                result.checkpoints[name] = [tuple(e) for e in got["entries"]]
    for entry in sorted(directory.iterdir()):
        if entry.is_dir() and _PARTITION_DIR.match(entry.name):
            view = read_partition_dir(entry)
            result.partitions[view.name] = view
    if not result.partitions and not result.checkpoints:
        raise ConfigError(f"{directory}: no Kafka partition directories or checkpoint files", where=str(directory),
                          field="path", expected="a Kafka log directory (log.dirs)", got=str(directory))
    _apply_checkpoints(result)
    return result


def _apply_checkpoints(view: LogDirView) -> None:
    targets = {"replication-offset-checkpoint": "high_watermark",
               "log-start-offset-checkpoint": "log_start_offset_checkpoint",
               "recovery-point-offset-checkpoint": "recovery_point"}
    for name, attribute in targets.items():
        for topic, partition, offset in view.checkpoints.get(name, []):
            partition_view = view.partitions.get(f"{topic}-{partition}")
            if partition_view is not None:
                setattr(partition_view, attribute, offset)
