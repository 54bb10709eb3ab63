"""The ``epochlab-trace`` v1 schema (``docs/trace-format.md``): columns, kind codes, flags."""

from __future__ import annotations

from typing import Any

from epochlab.errors import TraceError

__all__ = [
    "FLAG_CONTROL", "FLAG_LOSE_UNFLUSHED", "FLAG_TRANSACTIONAL", "FLAG_UNCLEAN", "FORMAT", "KINDS",
    "KIND_CODES", "VERSION", "check_metadata", "normalize", "schema", "trace_metadata",
]

FORMAT = "epochlab-trace"
VERSION = 1

#: Kind names in code order: the ``kind`` column holds the index.
KINDS = ("append_leader", "append_follower", "truncate", "truncate_fully", "high_watermark",
         "assign_epoch", "flush", "crash", "restart", "leader_change", "become_leader",
         "become_follower", "fetch")
KIND_CODES = {name: code for code, name in enumerate(KINDS)}

FLAG_UNCLEAN = 1          # leader_change: unclean election
FLAG_LOSE_UNFLUSHED = 2   # crash: the page cache was lost
FLAG_TRANSACTIONAL = 4    # appends
FLAG_CONTROL = 8          # appends: a transaction marker

#: (name, type factory name, nullable)
COLUMNS = (
    ("event", "uint64", False),
    ("time_ms", "int64", True),
    ("partition", "uint32", False),
    ("kind", "uint8", False),
    ("broker", "uint32", True),
    ("epoch", "uint32", True),
    ("offset", "uint64", True),
    ("leader", "uint32", True),
    ("record_count", "uint32", True),
    ("flags", "uint8", False),
    ("values", "list<uint64>", True),
    ("producer_id", "uint64", True),
    ("producer_epoch", "uint16", True),
    ("base_sequence", "uint32", True),
)


def _type(pa: Any, name: str) -> Any:
    if name == "list<uint64>":
        return pa.list_(pa.uint64())
    return getattr(pa, name)()


def trace_metadata(**extra: Any) -> dict[bytes, bytes]:
    meta = {b"epochlab-trace": str(VERSION).encode()}
    for key, value in extra.items():
        if value is not None:
            meta[f"epochlab.{key}".encode()] = str(value).encode()
    return meta


def schema(**metadata: Any) -> Any:
    """The v1 ``pyarrow.Schema``; keyword arguments go to the metadata as ``epochlab.<key>``
    (``min_insync_replicas``, ``kip101_epoch_cache``, ``source``)."""
    import pyarrow as pa

    fields = [pa.field(n, _type(pa, t), nullable=null) for n, t, null in COLUMNS]
    return pa.schema(fields, metadata=trace_metadata(**metadata))


def check_metadata(arrow_schema: Any, path: str | None = None) -> dict[str, str]:
    """The ``epochlab.*`` metadata of a trace schema; :class:`TraceError` (row 0) if the
    format marker is missing or names another major version."""
    try:
        meta = {k.decode(): v.decode() for k, v in (arrow_schema.metadata or {}).items()}
    except UnicodeDecodeError as exc:
        raise TraceError(f"{path or '<table>'}: damaged schema metadata (byte {exc.start} of a key "
                         "or value is not UTF-8)", path=path, row=0, reason="metadata not UTF-8") from None
    version = meta.get(FORMAT)
    if version is None:
        raise TraceError(f"{path or '<table>'}: not an epochlab trace (no '{FORMAT}' schema metadata)",
                         path=path, row=0, reason="missing format marker")
    if version.split(".")[0] != str(VERSION):
        raise TraceError(f"{path or '<table>'}: trace format version {version}, this build reads {VERSION}",
                         path=path, row=0, reason=f"unsupported version {version}")
    return {k[len("epochlab."):]: v for k, v in meta.items() if k.startswith("epochlab.")}


def _near(a: str, b: str) -> bool:
    """``a`` and ``b`` differ in exactly one character (what one flipped bit does to a name)."""
    return len(a) == len(b) and sum(x != y for x, y in zip(a, b)) == 1


def check_column_names(names: list[str], meta: Any, path: str | None, row: int = 0) -> None:
    """A file records the columns it was written with (``epochlab.columns``, written by
    :func:`epochlab.trace.io.write_trace`): they must be the columns read. Without that key,
    an unknown column one character away from an absent v1 column is a damaged name, not an
    added column (unknown columns are otherwise ignored, ``docs/trace-format.md``)."""
    where = path or "<table>"
    v1 = [n for n, _t, _null in COLUMNS]
    written = meta.get(b"epochlab.columns")
    if written is not None and path is not None:  # a file; a table in memory may add columns
        expected = written.decode("utf-8", "replace").split(",")
        if sorted(expected) != sorted(names):
            odd = sorted(set(names) ^ set(expected))
            raise TraceError(f"{where}: the columns read ({', '.join(names)}) are not those the file "
                             f"was written with ({', '.join(expected)}): damaged schema ({', '.join(odd)})",
                             path=path, row=row, reason="columns differ from epochlab.columns")
        return
    absent = [n for n in v1 if n not in names]
    for name in names:
        twin = next((n for n in absent if _near(name, n)), None)
        if name not in v1 and twin is not None:
            raise TraceError(f"{where}: column {name!r} is not in the schema and {twin!r} is missing: "
                             "a damaged or misspelt column name", path=path, row=row,
                             reason=f"column {name!r} instead of {twin!r}")


def normalize(table: Any, path: str | None = None, first_row: int = 0) -> Any:
    """``table`` with the v1 column types (casting compatible integer columns, adding absent
    optional columns as nulls), in schema order; :class:`TraceError` for a column that cannot
    be cast, a missing required column (``kind``) or a damaged column name
    (:func:`check_column_names`; other unknown columns are ignored). ``first_row``
    is the table's first row in the whole trace: an absent ``event`` column numbers rows from
    there, so numbers continue across row groups and batches."""
    import pyarrow as pa

    target = schema()
    meta = table.schema.metadata
    check_column_names(table.column_names, meta or {}, path, first_row)
    if len(set(table.column_names)) != len(table.column_names):
        raise TraceError(f"{path or '<table>'}: a column appears twice", path=path, row=first_row,
                         reason="duplicate column")
    if "kind" not in table.column_names:
        raise TraceError(f"{path or '<table>'}: the trace has no 'kind' column", path=path, row=0,
                         reason="missing column 'kind'")
    arrays = []
    for field in target:
        if field.name in table.column_names:
            col = table.column(field.name)
            if col.type != field.type:
                try:
                    col = col.cast(field.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise TraceError(f"{path or '<table>'}: column '{field.name}' of type {col.type} "
                                     f"cannot be read as {field.type}: {exc}", path=path, row=0,
                                     reason=f"column '{field.name}' has type {col.type}") from None
        elif field.name in ("event", "partition", "flags"):
            n = table.num_rows
            col = pa.chunked_array([pa.array(range(first_row, first_row + n) if field.name == "event"
                                             else [0] * n, type=field.type)])
        else:
            col = pa.chunked_array([pa.nulls(table.num_rows, type=field.type)])
        arrays.append(col)
    return pa.Table.from_arrays(arrays, schema=target.with_metadata(meta or target.metadata))
