"""Reading and writing trace files: Parquet (``.parquet``) and the Arrow IPC stream format
(``.arrows``/``.arrow``). Reading yields record batches one by one so that a damaged file is
replayed up to the damage: the error names the first row that could not be read."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from epochlab.errors import TraceError
from epochlab.trace.schema import check_metadata, normalize

__all__ = ["open_trace", "read_trace", "write_trace"]


def _is_ipc(path: Path) -> bool:
    return path.suffix in (".arrows", ".arrow", ".ipc")


def write_trace(table: Any, path: str | os.PathLike[str], *, row_group_rows: int = 1 << 20) -> Path:
    """Write ``table`` (a v1 trace) to ``path``: Parquet with zstd compression and page
    checksums (so corruption is detected, not read as wrong numbers), or an Arrow IPC stream
    for ``.arrows``/``.arrow``. Returns the path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    table = normalize(table)
    meta = dict(table.schema.metadata or {})
    meta[b"epochlab.columns"] = ",".join(table.column_names).encode()  # read back: schema intact
    table = table.replace_schema_metadata(meta)
    # Written beside the target and renamed into place once complete and synced: a writer
    # killed part way leaves the previous file (or none), never half a trace under its name.
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    _remove_stale_partials(path)
    try:
        if _is_ipc(path):
            with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
                for batch in table.to_batches(max_chunksize=row_group_rows):
                    writer.write_batch(batch)
        else:
            pq.write_table(table, str(tmp), row_group_size=row_group_rows, compression="zstd",
                           write_page_checksum=True, write_statistics=False)
        with open(tmp, "rb+") as written:
            os.fsync(written.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _remove_stale_partials(path: Path) -> None:
    """Temporary files of writers that were killed (their process is gone)."""
    for partial in path.parent.glob(f".{path.name}.partial-*"):
        try:
            os.kill(int(partial.name.rsplit("-", 1)[1]), 0)
        except ProcessLookupError:
            partial.unlink(missing_ok=True)
        except (ValueError, OSError):
            continue


class TraceFile:
    """An open trace file: ``metadata`` (the ``epochlab.*`` keys), ``num_rows`` when known,
    and :meth:`batches`, which yields ``(first_row, record_batch)`` and raises
    :class:`TraceError` at the first unreadable part."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.path = str(path)
        self._ipc = _is_ipc(Path(path))
        self.num_rows: int | None = None
        try:
            if self._ipc:
                self._reader: Any = pa.ipc.open_stream(pa.OSFile(self.path, "rb"))
                arrow_schema = self._reader.schema
            else:
                self._reader = pq.ParquetFile(self.path, page_checksum_verification=True)
                arrow_schema = self._reader.schema_arrow
                self.num_rows = self._reader.metadata.num_rows
        except FileNotFoundError:
            raise TraceError(f"{self.path}: no such file", path=self.path, row=0,
                             reason="no such file") from None
        except (OSError, pa.ArrowException, UnicodeDecodeError) as exc:
            size = os.path.getsize(self.path) if os.path.exists(self.path) else 0
            hint = (" (a Parquet file cut short loses its footer, so no row group can be located;"
                    " the Arrow IPC stream format keeps every complete batch)" if not self._ipc else "")
            raise TraceError(f"{self.path}: unreadable trace file of {size} bytes: {exc}{hint}",
                             path=self.path, row=0, reason=str(exc)) from None
        self.metadata = check_metadata(arrow_schema, self.path)
        if not self._ipc:
            # The column names of the Parquet footer itself: pyarrow may take names and types
            # from the Arrow schema stored beside them and read a damaged column as nulls
            from epochlab.trace.schema import check_column_names

            try:
                leaves = [self._reader.schema.column(i).path.split(".")[0]
                          for i in range(len(self._reader.schema))]
            except (pa.ArrowException, UnicodeDecodeError) as exc:
                raise TraceError(f"{self.path}: damaged Parquet schema: {exc}", path=self.path, row=0,
                                 reason="unreadable column names") from None
            physical = list(dict.fromkeys(leaves))
            check_column_names(physical, arrow_schema.metadata or {}, self.path)
            if sorted(physical) != sorted(arrow_schema.names):
                raise TraceError(f"{self.path}: the Parquet columns ({', '.join(physical)}) differ from "
                                 f"its Arrow schema ({', '.join(arrow_schema.names)}): damaged schema",
                                 path=self.path, row=0, reason="Parquet and Arrow column names differ")

    def batches(self, max_rows: int = 1 << 20) -> Iterator[tuple[int, Any]]:
        import pyarrow as pa

        row = 0
        if self._ipc:
            while True:
                try:
                    batch = self._reader.read_next_batch()
                except StopIteration:
                    return
                except (OSError, pa.ArrowException) as exc:
                    raise TraceError(f"{self.path}: unreadable from row {row}: {exc}",
                                     path=self.path, row=row, reason=str(exc)) from None
                yield from self._normalized(row, batch, max_rows)
                row += batch.num_rows
        for group in range(self._reader.num_row_groups):
            try:
                table = self._reader.read_row_group(group)
            except (OSError, pa.ArrowException, UnicodeDecodeError) as exc:
                raise TraceError(f"{self.path}: row group {group} (rows from {row}) is unreadable: "
                                 f"{exc}", path=self.path, row=row, reason=str(exc)) from None
            for batch in table.to_batches():
                yield from self._normalized(row, batch, max_rows)
                row += batch.num_rows

    def _normalized(self, row: int, batch: Any, max_rows: int) -> Iterator[tuple[int, Any]]:
        import pyarrow as pa

        table = normalize(pa.Table.from_batches([batch]), self.path, first_row=row)
        for part in table.combine_chunks().to_batches(max_chunksize=max_rows):
            yield row, part
            row += part.num_rows


def open_trace(path: str | os.PathLike[str]) -> TraceFile:
    return TraceFile(path)


def read_trace(path: str | os.PathLike[str]) -> Any:
    """The whole trace as one ``pyarrow.Table`` (v1 types)."""
    import pyarrow as pa

    f = TraceFile(path)
    batches = [b for _, b in f.batches()]
    table = pa.Table.from_batches(batches) if batches else normalize(pa.table({"kind": pa.array([], pa.uint8())}))
    from epochlab.trace.schema import schema

    meta = dict(table.schema.metadata or {})
    meta.update(schema(**f.metadata).metadata)
    return table.replace_schema_metadata(meta)
