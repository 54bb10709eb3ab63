"""Convert inspected log directories into an ``epochlab-trace`` (``docs/trace-format.md``) so
``epochlab trace replay`` can check the invariants across the replicas.

Each replica becomes rows for its broker: ``truncate_fully`` to its log start offset when that
is above 0, one ``append_follower`` row per batch (its base offset, leader epoch, record
values, producer fields, transactional and control flags), ``assign_epoch`` for checkpoint
entries no batch explains (a leader that took over and has not appended yet), then its high
watermark and recovery point. Partitions are numbered in the order met (``epochlab.source``
in the metadata maps the numbers back to ``topic-partition`` names).

Record values: the trace stores one unsigned 64-bit value per record. A value of exactly 8
bytes is read as a big-endian integer (what epochlab's own Kafka tests write); any other record
(and every control record) becomes the first 8 bytes of BLAKE2b over its key and value, so equal
records map to equal numbers and different ones differ with overwhelming probability.
Batches with holes (compacted: fewer records than their offset span) cannot be represented
and are refused with a :class:`ConfigError` naming the file and batch.
"""

from __future__ import annotations

import hashlib
import json
import struct
from typing import Any

from epochlab.errors import ConfigError
from epochlab.ondisk.reader import PartitionView

__all__ = ["record_value", "to_trace_table"]

_FLAG_TRANSACTIONAL = 4
_FLAG_CONTROL = 8
_KIND = {"append_follower": 1, "truncate_fully": 3, "high_watermark": 4, "assign_epoch": 5, "flush": 6}


def record_value(key: bytes | None, value: bytes | None) -> int:
    """The trace's 64-bit stand-in for a record (see the module doc)."""
    if value is not None and len(value) == 8:
        return int(struct.unpack(">Q", value)[0])
    h = hashlib.blake2b(digest_size=8)
    for part in (key, value):
        h.update(b"\xff" if part is None else len(part).to_bytes(4, "big") + part)
    return int.from_bytes(h.digest(), "big")


def _producer(batch: dict[str, Any]) -> tuple[int | None, int | None, int | None]:
    pid, pepoch, seq = batch["producer_id"], batch["producer_epoch"], batch["base_sequence"]
    if batch["magic"] < 2 or pid < 0 or pepoch < 0 or seq < 0:
        return None, None, None
    return pid, pepoch, seq


def _replica_rows(broker: int, partition: int, view: PartitionView) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def row(kind: str, **fields: Any) -> None:
        rows.append({"partition": partition, "kind": _KIND[kind], "broker": broker, "flags": 0, **fields})

    if view.log_start_offset > 0:
        row("truncate_fully", offset=view.log_start_offset)
    derived = set(view.epochs_from_batches())
    for segment in view.segments:
        for b in segment.batches:
            if int(b["last_offset"]) < view.log_start_offset:
                continue
            span = int(b["last_offset"]) - int(b["base_offset"]) + 1
            if len(b["records"]) != span:
                raise ConfigError(f"{segment.file}: batch at offset {b['base_offset']} holds {len(b['records'])} "
                                  f"records over {span} offsets (compacted); epochlab-trace cannot represent holes",
                                  where=segment.file, field="batch", expected="contiguous offsets",
                                  got=b["base_offset"])
            pid, pepoch, seq = _producer(b)
            flags = (_FLAG_TRANSACTIONAL if b["is_transactional"] else 0) | (_FLAG_CONTROL if b["is_control"] else 0)
            epoch = int(b["partition_leader_epoch"]) if b["magic"] >= 2 and b["partition_leader_epoch"] >= 0 else 0
            row("append_follower", offset=int(b["base_offset"]), epoch=epoch,
                values=[record_value(r["key"], r["value"]) for r in b["records"]],
                record_count=len(b["records"]), flags=flags, producer_id=pid, producer_epoch=pepoch,
                base_sequence=seq, time_ms=int(b["max_timestamp"]) if b["max_timestamp"] >= 0 else None)
    end = view.log_end_offset
    for epoch, start in view.leader_epoch_checkpoint or []:
        if (epoch, start) not in derived and start == end:
            row("assign_epoch", epoch=epoch, offset=start)
    if view.high_watermark is not None:
        row("high_watermark", offset=min(view.high_watermark, end))
    if view.recovery_point is not None:
        row("flush", offset=min(view.recovery_point, end))
    return rows


def to_trace_table(replicas: list[tuple[int, PartitionView]]) -> Any:
    """A ``pyarrow.Table`` in the v1 trace schema for ``(broker id, partition view)`` pairs."""
    import pyarrow as pa

    from epochlab.trace.schema import schema

    numbers: dict[str, int] = {}
    rows: list[dict[str, Any]] = []
    for broker, view in replicas:
        partition = numbers.setdefault(view.name, len(numbers))
        rows.extend(_replica_rows(broker, partition, view))
    for i, r in enumerate(rows):
        r["event"] = i
    source = json.dumps({"tool": "epochlab inspect", "partitions": {str(v): k for k, v in numbers.items()}},
                        sort_keys=True)
    return pa.Table.from_pylist(rows, schema=schema(source=source))
