"""Synthetic traces of any size, generated in Rust (``src/replay/generate.rs``)."""

from __future__ import annotations

from typing import Any

from epochlab import _core
from epochlab.trace.schema import schema

__all__ = ["generate"]


def generate(batches: int, *, leader_changes: int = 0, replicas: int = 3, partitions: int = 1,
             seed: int = 0, max_records: int = 3, crash_every: int | None = None) -> Any:
    """A consistent protocol run of ``batches`` leader batches as a v1 ``pyarrow.Table``
    (``docs/trace-format.md``, "Synthetic traces"). Follower replication is written as
    ``fetch`` rows, so the trace holds each record value once whatever the replica count."""
    import pyarrow as pa

    cols = _core._generate_trace(batches, leader_changes=leader_changes, replicas=replicas,
                                partitions=partitions, seed=seed, max_records=max_records,
                                crash_every=crash_every)
    n = cols["len"]

    def prim(t: Any, data: bytes, valid: bytes | None = None) -> Any:
        return pa.Array.from_buffers(t, n, [None if valid is None else pa.py_buffer(valid), pa.py_buffer(data)])

    offsets, values, valid = cols["values"]
    items = pa.Array.from_buffers(pa.uint64(), len(values) // 8, [None, pa.py_buffer(values)])
    value_lists = pa.Array.from_buffers(pa.list_(pa.uint64()), n, [pa.py_buffer(valid), pa.py_buffer(offsets)],
                                        children=[items])
    arrays = {
        "event": prim(pa.uint64(), cols["event"]),
        "time_ms": prim(pa.int64(), cols["time_ms"]),
        "partition": prim(pa.uint32(), cols["partition"]),
        "kind": prim(pa.uint8(), cols["kind"]),
        "broker": prim(pa.uint32(), *cols["broker"]),
        "epoch": prim(pa.uint32(), *cols["epoch"]),
        "offset": prim(pa.uint64(), *cols["offset"]),
        "leader": prim(pa.uint32(), *cols["leader"]),
        "record_count": prim(pa.uint32(), cols["record_count"]),
        "flags": prim(pa.uint8(), cols["flags"]),
        "values": value_lists,
    }
    target = schema(source=f"generate(batches={batches}, leader_changes={leader_changes}, "
                           f"replicas={replicas}, partitions={partitions}, seed={seed})")
    columns = [arrays.get(f.name, pa.nulls(n, type=f.type)) for f in target]
    return pa.Table.from_arrays(columns, schema=target)
