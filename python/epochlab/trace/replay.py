"""Bulk replay through the Rust core (``epochlab._core.Replayer``), with progress, hooks and a
report that survives a damaged file."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

from epochlab import _core
from epochlab.errors import TraceError
from epochlab.trace.schema import check_metadata, normalize

__all__ = ["ReplayReport", "replay"]

Hook = Callable[[dict[str, Any], Any], None]


@dataclass
class ReplayReport:
    """What a replay found. ``violations`` are dicts (``invariant``, ``verdict``, ``reason``,
    ``row``, ``event``, ``time_ms``, ``kind``, ``partition``, ``broker``, ``offset``,
    ``epoch``, ``message``, ``records``); ``replicas`` the final state per (partition,
    broker); ``error`` the :class:`TraceError` that ended a damaged trace early (every row
    before ``error.row`` was replayed and is in this report)."""

    path: str | None
    rows: int
    total_rows: int | None
    violations: list[dict[str, Any]]
    violation_count: int
    replicas: list[dict[str, Any]]
    elapsed_s: float
    error: TraceError | None = None
    stopped_early: bool = False
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def protocol_violations(self) -> list[dict[str, Any]]:
        return [v for v in self.violations if v["verdict"] == "protocol-violation"]

    @property
    def verdict(self) -> str:
        """``"ok"``, ``"violations"`` (some protocol violation) or ``"allowed"`` (only
        violations the configuration permits); a damaged trace is judged on what was read."""
        if self.protocol_violations:
            return "violations"
        return "allowed" if self.violations else "ok"

    @property
    def events_per_s(self) -> float:
        return self.rows / self.elapsed_s if self.elapsed_s > 0 else float("inf")

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path, "rows": self.rows, "total_rows": self.total_rows,
            "verdict": self.verdict, "violation_count": self.violation_count,
            "violations": self.violations, "replicas": self.replicas,
            "elapsed_s": round(self.elapsed_s, 6), "events_per_s": round(self.events_per_s, 1),
            "stopped_early": self.stopped_early, "metadata": self.metadata,
            "error": None if self.error is None else {"row": self.error.row, "reason": self.error.reason,
                                                     "message": self.error.message},
        }


def _source(trace: Any, chunk_rows: int) -> tuple[str | None, int | None, dict[str, str], Iterator[tuple[int, Any]]]:
    """(path, total rows, metadata, iterator of (first_row, record batch))."""
    if isinstance(trace, (str, os.PathLike)):
        from epochlab.trace.io import TraceFile

        f = TraceFile(trace)
        return f.path, f.num_rows, f.metadata, f.batches(chunk_rows)
    import pyarrow as pa

    if isinstance(trace, pa.RecordBatch):
        trace = pa.Table.from_batches([trace])
    if not isinstance(trace, pa.Table):
        raise TypeError(f"expected a trace path or a pyarrow Table, got {type(trace).__name__}")
    meta = check_metadata(trace.schema) if (trace.schema.metadata or {}).get(b"epochlab-trace") else {}
    table = normalize(trace)

    def batches() -> Iterator[tuple[int, Any]]:
        row = 0
        for b in table.to_batches(max_chunksize=chunk_rows):
            yield row, b
            row += b.num_rows

    return None, table.num_rows, meta, batches()


def replay(trace: Any, *, checks: Iterable[str] | None = None, collect: str = "first",
           min_insync_replicas: int | None = None, kip101_epoch_cache: bool | None = None,
           hooks: Mapping[str, Hook] | None = None,
           progress: Callable[[int, int | None], None] | None = None,
           chunk_rows: int = 1 << 20, raise_on_error: bool = False) -> ReplayReport:
    """Replay ``trace`` (a path or a ``pyarrow.Table``) through the Rust core.

    ``checks``: invariant names (``"log-matching"``, ``"Inv-Durability"``, ...; default all).
    ``collect``: ``"first"`` (first violation of each invariant), ``"all"`` or ``"stop"``
    (end at the first). ``min_insync_replicas`` / ``kip101_epoch_cache`` default to the
    trace's metadata. ``hooks`` maps event kinds to ``hook(row, replayer)``: the replay
    returns to Python after each such row and continues when the hook returns.
    ``progress(rows_done, total_rows)`` runs between chunks. A damaged file ends the replay
    at the damage: the report carries the :class:`TraceError` in ``error`` (or it is raised,
    with the partial report as ``exc.report``, when ``raise_on_error``).
    """
    started = perf_counter()
    path, total, meta, batches = _source(trace, chunk_rows)
    if min_insync_replicas is None:
        min_insync_replicas = int(meta.get("min_insync_replicas", "1"))
    if kip101_epoch_cache is None:
        kip101_epoch_cache = meta.get("kip101_epoch_cache", "False") == "True"
    replayer = _core.Replayer(checks=None if checks is None else list(checks), collect=collect,
                              min_insync_replicas=min_insync_replicas,
                              kip101_epoch_cache=kip101_epoch_cache,
                              eligible_leader_replicas=meta.get("eligible_leader_replicas") == "True",
                              wrapper_batches=meta.get("wrapper_batches") == "True")
    pause = sorted(hooks or {})
    error: TraceError | None = None
    stopped = False
    try:
        for first_row, batch in batches:
            start = 0
            while True:
                status, at = replayer.replay_batch(batch, first_row, start=start, pause_kinds=pause)
                if status == "paused" and hooks:
                    row = batch.slice(at, 1).to_pylist()[0]
                    hooks[_kind_name(row["kind"])](row, replayer)
                    start = at + 1
                    continue
                stopped = status == "stopped"
                break
            if progress is not None:
                progress(replayer.rows, total)
            if stopped:
                break
    except TraceError as exc:
        if exc.path is None and path is not None:
            exc.path = path
            exc.details["path"] = path
        error = exc
    report = ReplayReport(path, replayer.rows, total, replayer.violations(), replayer.violation_count,
                          replayer.replicas(), perf_counter() - started, error, stopped, meta)
    report.replayer = replayer  # type: ignore[attr-defined]
    if error is not None and raise_on_error:
        error.report = report  # type: ignore[attr-defined]
        raise error
    return report


def _kind_name(code: int) -> str:
    from epochlab.trace.schema import KINDS

    return KINDS[code]
