"""The step table, in the seeds' own style, and the Markdown report around it.

One row per step: step number, time, action, leader, leader epoch, ISR, each replica's log
and ``(LEO/HW)``, and what the step truncated or lost. A log is written as compact value runs
with ``|`` at the high watermark: ``[m1 m2 | m3] (3/2)`` is a replica holding values 1, 2, 3
with HW 2 and LEO 3; ``m1..m10`` is a run of consecutive values; ``e1:`` marks the first
record of a new leader epoch; a crashed replica's cell starts with ``down``.

Rows are built from step records holding snapshots (:class:`~epochlab.observe.Snapshot`,
made by ``snapshot_from`` from a ``ClusterState`` or a plain dict), so everything here is
testable without running the simulator. The terminal form uses ``rich`` when it is installed
and aligned plain text otherwise.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Iterable, Sequence, TextIO

from epochlab.observe import ReplicaView, Snapshot

__all__ = ["Row", "format_log", "render_report", "render_terminal", "render_verdict",
           "step_rows", "table_markdown", "table_text"]


@dataclass(frozen=True)
class Row:
    step: str
    time_ms: int
    action: str
    leader: str
    epoch: str
    isr: str
    logs: tuple[tuple[int, str], ...]     # (broker, cell)
    truncated: str
    lost: str


def format_log(replica: ReplicaView) -> str:
    """``[m1 m2 | m3] (3/2)``: values in runs, ``|`` at the HW, ``(LEO/HW)`` after."""
    tokens: list[str] = []
    records = replica.records()
    hw_written = False
    run: list[int] = []
    prefix = [""]

    def flush() -> None:
        if run:
            text = f"m{run[0]}..m{run[-1]}" if len(run) >= 3 else " ".join(f"m{v}" for v in run)
            tokens.append(prefix[0] + text)
            prefix[0] = ""
            run.clear()

    previous_epoch = records[0][1] if records else None
    for offset, epoch, value in records:
        if not hw_written and offset >= replica.high_watermark:
            flush()
            tokens.append("|")
            hw_written = True
        if epoch != previous_epoch:
            flush()
            prefix[0] = f"e{epoch}:"
            previous_epoch = epoch
        elif run and value != run[-1] + 1:
            flush()
        run.append(value)
    flush()
    if not hw_written:
        tokens.append("|")
    body = "[" + " ".join(tokens) + "]"
    prefix = "" if replica.alive else "down "
    start = f" start {replica.log_start_offset}" if replica.log_start_offset else ""
    return f"{prefix}{body} ({replica.log_end_offset}/{replica.high_watermark}){start}"


def step_rows(records: Sequence[Any]) -> list[Row]:
    """Rows from runner step records (``step``, ``executed_at_ms``, ``outcome``, ``error``,
    ``snapshot``); the first record is the initial state."""
    rows: list[Row] = []
    previous: Snapshot | None = None
    reference: set[int] = set()
    for i, rec in enumerate(records):
        snap: Snapshot = rec.snapshot
        step = rec.step
        if step is None:
            action = "start"
        else:
            action = step.describe()
            if rec.error:
                action += f" -> ERROR: {rec.error}"
            elif rec.outcome:
                action += f" -> {rec.outcome}"
        truncated = _truncated(previous, snap)
        leader_rep = snap.leader_replica()
        lost = ""
        if leader_rep is not None:
            now = set(leader_rep.values())
            gone = sorted(reference - now)
            lost = _values(gone)
            reference = now
        rows.append(Row(
            step=str(i) if step is not None else "0",
            time_ms=snap.time_ms,
            action=action,
            leader="none" if snap.offline or snap.leader is None else str(snap.leader)
            + ("" if snap.available() else " (down)"),
            epoch="-" if snap.leader_epoch is None else str(snap.leader_epoch),
            isr=",".join(str(b) for b in snap.isr),
            logs=tuple((r.broker, format_log(r)) for r in snap.replicas),
            truncated=truncated,
            lost=lost,
        ))
        previous = snap
    return rows


def _truncated(previous: Snapshot | None, snap: Snapshot) -> str:
    if previous is None:
        return ""
    parts = []
    for r in snap.replicas:
        before = previous.replica(r.broker)
        if before is None:
            continue
        now = set(r.records())
        gone = [v for o, e, v in before.records() if (o, e, v) not in now]
        if gone:
            parts.append(f"{r.broker}: {_values(gone)}")
    return "; ".join(parts)


def _values(values: Iterable[int]) -> str:
    return " ".join(f"m{v}" for v in values)


def _header(rows: Sequence[Row]) -> list[str]:
    brokers = [b for b, _ in rows[0].logs] if rows else []
    return (["step", "t (ms)", "action", "leader", "epoch", "ISR"]
            + [f"broker {b} log (LEO/HW)" for b in brokers] + ["truncated", "lost"])


def _cells(row: Row) -> list[str]:
    return ([row.step, str(row.time_ms), row.action, row.leader, row.epoch, row.isr]
            + [cell for _b, cell in row.logs] + [row.truncated, row.lost])


def table_markdown(rows: Sequence[Row]) -> str:
    """A GitHub-flavoured Markdown table (``|`` in cells escaped)."""
    header = _header(rows)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in _cells(row)) + " |")
    return "\n".join(lines) + "\n"


def table_text(rows: Sequence[Row]) -> str:
    """Aligned plain text, for terminals without ``rich``."""
    table = [_header(rows)] + [_cells(r) for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    out = []
    for n, line in enumerate(table):
        out.append("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out) + "\n"


def render_terminal(rows: Sequence[Row], title: str = "", file: TextIO | None = None) -> None:
    """Print the table: a ``rich`` table when ``rich`` is importable, plain text otherwise."""
    file = file if file is not None else sys.stdout
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        if title:
            print(title, file=file)
        print(table_text(rows), end="", file=file)
        return
    table = Table(title=title or None, show_lines=False)
    for name in _header(rows):
        table.add_column(name.replace("[", "\\["), overflow="fold")
    for row in rows:
        table.add_row(*(c.replace("[", "\\[") for c in _cells(row)))
    console = Console(file=file, width=max(160, Console(file=file).width))
    # rich answers a closed pipe with SystemExit(1) (Console.on_broken_pipe); let it reach the
    # CLI's handler instead, which stops quietly with exit 2 like every other write
    console.on_broken_pipe = _raise_broken_pipe  # type: ignore[method-assign]
    console.print(table)


def _raise_broken_pipe() -> None:
    raise BrokenPipeError


def render_verdict(result: Any) -> str:
    """``PASS``/``FAIL`` per check, one per line, then the overall verdict."""
    lines = [f"verdict for {result.scenario.name} in {result.generation} (seed {result.seed}):"]
    for c in result.checks:
        mark = {"passed": "PASS", "failed": "FAIL", "unsupported": "UNSUPPORTED"}[c.status]
        lines.append(f"  {mark:<11} {c.description}: {c.detail}")
    if not result.checks:
        lines.append("  (no expectations apply to this generation)")
    lines.append(f"  => {'all expectations hold' if result.passed else 'EXPECTATIONS FAILED'}")
    return "\n".join(lines) + "\n"


def render_report(result: Any, rows: Sequence[Row], picture_note: str) -> str:
    """``report.md``: description, config, step table, picture, verdict, engine events."""
    sc = result.scenario
    cfg = result.configs
    out = [f"# {sc.name} ({result.generation}, seed {result.seed})", ""]
    if sc.description:
        out += [sc.description.strip(), ""]
    if sc.source:
        out += [f"Source: `{sc.source}`", ""]
    out += [f"Build: `{cfg.get('build')}`; Kafka versions: {cfg.get('kafka_versions')}.", "",
            "## Configuration", ""]
    out.append(f"- cluster: {_kv(sc.cluster) or 'defaults'}")
    for name, c in sc.producers.items():
        out.append(f"- producer `{name}`: {_kv(c) or 'defaults'}")
    for name, c in sc.consumers.items():
        out.append(f"- consumer `{name}`: {_kv(c) or 'defaults'}")
    out += ["", "## Steps", "", table_markdown(rows).rstrip("\n"), "", "## Timeline", "",
            picture_note, "", "## Verdict", ""]
    for c in result.checks:
        mark = {"passed": "PASS", "failed": "**FAIL**", "unsupported": "**UNSUPPORTED**"}[c.status]
        out.append(f"- {mark} {c.description}: {c.detail}")
    if not result.checks:
        out.append("- no expectation applies to this generation")
    out += ["", f"Overall: {'all expectations hold' if result.passed else 'expectations failed'}.", ""]
    if result.events:
        out += ["## Engine events", ""] + [f"- {e}" for e in result.events] + [""]
    return "\n".join(out)


def _kv(mapping: Any) -> str:
    return ", ".join(f"`{k}` = {v!r}" for k, v in mapping.items())
