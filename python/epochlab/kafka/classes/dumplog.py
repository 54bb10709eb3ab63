"""Kafka's own ``DumpLogSegments`` as the judge of ``epochlab inspect``.

:func:`run_dump_log_segments` runs ``org.apache.kafka.tools.DumpLogSegments --deep-iteration
--print-data-log`` from the resolved jars (a subprocess, so the tool's ``System.exit`` and
output stay its own; stopped on timeout or Ctrl-C). :func:`expected_dump` renders what the
Rust parsers read in the same words, line for line, following ``DumpLogSegments.java``
(``dumpLog``, ``printBatchLevel``, ``printRecordMetadata``, ``printControlRecord``,
``printRecordContents``, ``printTrailingBytes``, ``dumpIndex``, ``dumpTimeIndex``,
``dumpProducerIdSnapshot``, ``dumpTxnIndex``). :func:`verify_with_kafka` compares the two per
file: any difference in any batch field, record field, key, payload, index entry, producer
entry or aborted transaction is a :class:`Disagreement`.

Payloads are printed by Kafka as ``new String(bytes, UTF_8)``; :func:`expected_dump` decodes
with Python's ``errors="replace"``, which follows the same maximal-subpart rule, and both sides
are read as UTF-8 (the JVM is started with ``-Dstdout.encoding=UTF-8``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from epochlab.errors import ConfigError
from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION, jar_dir
from epochlab.ondisk.reader import LogDirView, PartitionView, Segment
from epochlab.ondisk.render import batch_line, record_line

__all__ = ["Disagreement", "dump_files", "expected_dump", "run_dump_log_segments", "verify_with_kafka"]

_TOOL = "org.apache.kafka.tools.DumpLogSegments"


@dataclass(frozen=True)
class Disagreement:
    """The first line where Kafka's dump of ``file`` and epochlab's reading differ."""

    file: str
    line: int
    kafka: str | None
    epochlab: str | None

    def __str__(self) -> str:
        return f"{self.file}, line {self.line}:\n  Kafka:    {self.kafka}\n  epochlab: {self.epochlab}"


def run_dump_log_segments(files: Iterable[str | os.PathLike[str]], *, version: str = DEFAULT_KAFKA_VERSION,
                          timeout: float = 600.0) -> str:
    """Kafka's ``DumpLogSegments`` stdout for ``files`` (text, UTF-8)."""
    java = shutil.which("java")
    if java is None:
        raise ConfigError("java is needed to run Kafka's DumpLogSegments and is not on PATH", where="java",
                          field="java", expected="a Java 17 runtime", got=None)
    names = [str(f) for f in files]
    cmd = [java, "-Dstdout.encoding=UTF-8", "-Dfile.encoding=UTF-8", "-Xmx512m", "-cp",
           str(jar_dir(version) / "*"), _TOOL, "--deep-iteration", "--print-data-log", "--files", ",".join(names)]
    proc = subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        raise ConfigError(f"DumpLogSegments failed (exit {proc.returncode}): {' | '.join(tail)}", where=_TOOL,
                          field="files", expected="files Kafka can dump", got=len(names))
    return proc.stdout.decode("utf-8", "replace")


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _record_lines(b: dict[str, Any]) -> Iterable[str]:
    """``printRecordMetadata`` + ``printRecordContents`` per record, payloads as Kafka's
    ``StringDecoder`` turns them into text."""
    for r in b["records"]:
        yield record_line(b, r, payload=True, show=_text)


def _segment_lines(s: Segment) -> list[str]:
    out = [f"Log starting offset: {s.base_offset}"]
    for b in s.batches:
        out.append(batch_line(b))
        out.extend(_record_lines(b))
    if s.size > s.valid_bytes:
        out.append(f"Found {s.size - s.valid_bytes} invalid bytes at the end of {Path(s.file).name}")
    return out


def _index_lines(file: str, s: Segment) -> list[str]:
    entries = s.offset_index or []
    if not entries:
        return [f"{file} is empty."]
    return [f"offset: {s.base_offset + rel} position: {pos}" for rel, pos in entries]


def _decrement_sequence(sequence: int, decrement: int) -> int:
    """``DefaultRecordBatch.decrementSequence``."""
    if sequence < decrement:
        return (1 << 31) - 1 - (decrement - sequence) + 1
    return sequence - decrement


def _snapshot_lines(snap: dict[str, Any]) -> list[str]:
    out = []
    for e in snap["entries"]:
        txn = e["current_txn_first_offset"]
        line = (f"producerId: {e['producer_id']} producerEpoch: {e['epoch']} "
                f"coordinatorEpoch: {e['coordinator_epoch']} currentTxnFirstOffset: "
                f"{'OptionalLong.empty' if txn < 0 else f'OptionalLong[{txn}]'} lastTimestamp: {e['timestamp']}")
        if e["last_offset"] >= 0:
            line += (f" firstSequence: {_decrement_sequence(e['last_sequence'], e['offset_delta'])} "
                     f"lastSequence: {e['last_sequence']} lastOffset: {e['last_offset']} "
                     f"offsetDelta: {e['offset_delta']} timestamp: {e['timestamp']}")
        out.append(line)
    return out


def dump_files(view: PartitionView) -> list[str]:
    """The files of a partition that ``DumpLogSegments`` reads, in name order."""
    files = []
    for s in view.segments:
        base = s.file[: -len(".log")]
        files.append(s.file)
        for suffix, present in ((".index", s.offset_index), (".timeindex", s.time_index),
                                (".txnindex", s.aborted_txns)):
            if present is not None:
                files.append(base + suffix)
    files.extend(str(Path(view.path) / f"{offset:020d}.snapshot") for offset in view.producer_snapshots)
    return sorted(files)


def expected_dump(view: PartitionView, file: str) -> list[str]:
    """What ``DumpLogSegments`` prints for ``file`` of ``view``, rendered from our reading."""
    path = Path(file)
    offset = int(path.name.split(".")[0])
    if path.suffix == ".snapshot":
        return _snapshot_lines(view.producer_snapshots[offset])
    segment = next(s for s in view.segments if s.base_offset == offset)
    if path.suffix == ".log":
        return _segment_lines(segment)
    if path.suffix == ".index":
        return _index_lines(file, segment)
    if path.suffix == ".timeindex":
        return [f"timestamp: {t} offset: {segment.base_offset + rel}" for t, rel in segment.time_index or []]
    return [f"version: {t['version']} producerId: {t['producer_id']} firstOffset: {t['first_offset']} "
            f"lastOffset: {t['last_offset']} lastStableOffset: {t['last_stable_offset']}"
            for t in segment.aborted_txns or []]


def _split(output: str, files: list[str]) -> dict[str, list[str]]:
    """Kafka's output cut into the lines printed for each file (after its ``Dumping`` line)."""
    headers = {f"Dumping {f}": f for f in files}
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in output.split("\n"):
        if line in headers:
            current = out.setdefault(headers[line], [])
        elif current is not None:
            current.append(line)
    for lines in out.values():
        while lines and lines[-1] == "":
            lines.pop()
    return out


def verify_with_kafka(log_dir: LogDirView, *, version: str = DEFAULT_KAFKA_VERSION) -> tuple[int, list[Disagreement]]:
    """Run ``DumpLogSegments`` over every segment, index and snapshot of ``log_dir`` and compare
    with our reading; returns (files compared, disagreements: the first differing line per file)."""
    per_file = [(view, f) for view in log_dir.partitions.values() for f in dump_files(view)]
    if not per_file:
        return 0, []
    dumped = _split(run_dump_log_segments([f for _, f in per_file], version=version), [f for _, f in per_file])
    found: list[Disagreement] = []
    for view, f in per_file:
        # a payload may hold newlines: compare the texts cut at the same places
        lines = expected_dump(view, f)
        theirs, ours = dumped.get(f, []), "\n".join(lines).split("\n") if lines else []
        for i in range(max(len(theirs), len(ours))):
            a = theirs[i] if i < len(theirs) else None
            b = ours[i] if i < len(ours) else None
            if a != b:
                found.append(Disagreement(f, i + 1, a, b))
                break
    return len(per_file), found
