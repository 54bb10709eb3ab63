"""``epochlab trace replay|generate|export``: the subcommands' parsers and handlers (registered
by ``epochlab.cli``). Exit status: 0 no protocol violation, 1 a protocol violation, 2 bad
input (a malformed or damaged trace: the report of everything before the damage is printed
first)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from epochlab.errors import TraceError

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add ``trace replay``, ``trace generate`` and ``trace export`` to ``sub``."""
    trace = sub.add_parser("trace", help="replay, generate and export traces (docs/trace-format.md)")
    tsub = trace.add_subparsers(dest="trace_command", required=True, parser_class=type(trace))
    rp = tsub.add_parser("replay", help="replay a trace through the Rust core, checking invariants")
    rp.add_argument("file", help="trace file (.parquet, or .arrows for an Arrow IPC stream)")
    rp.add_argument("--check", action="append", metavar="NAME",
                    help="invariant to check (repeatable; default all): hw-bounds, epoch-monotone, "
                         "offset-monotone, log-matching, durability, no-duplicates, epoch-fencing")
    rp.add_argument("--json", action="store_true", help="print the report as JSON")
    rp.add_argument("--all", action="store_true", help="report every violation, not the first of each")
    rp.add_argument("--fail-fast", action="store_true", help="stop at the first violation")
    rp.add_argument("--reference", action="store_true", help="use the pure-Python reference replay")
    rp.set_defaults(handler=_replay)
    gen = tsub.add_parser("generate", help="write a synthetic trace")
    gen.add_argument("out")
    gen.add_argument("--batches", type=int, default=100_000)
    gen.add_argument("--leader-changes", type=int, default=100)
    gen.add_argument("--replicas", type=int, default=3)
    gen.add_argument("--partitions", type=int, default=1)
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--max-records", type=int, default=3)
    gen.add_argument("--crash-every", type=int, default=None, help="crash a follower every N rounds")
    gen.set_defaults(handler=_generate)
    ex = tsub.add_parser("export", help="re-run a run directory's scenario and write its trace")
    ex.add_argument("run_dir")
    ex.add_argument("-o", "--out", help="output file (default RUN_DIR/trace.parquet)")
    ex.set_defaults(handler=_export)


def _generate(args: argparse.Namespace) -> int:
    from epochlab.trace import generate, write_trace

    table = generate(args.batches, leader_changes=args.leader_changes, replicas=args.replicas,
                     partitions=args.partitions, seed=args.seed, max_records=args.max_records,
                     crash_every=args.crash_every)
    write_trace(table, args.out)
    print(f"wrote {args.out}: {table.num_rows} events ({args.batches} batches)")
    return 0


def _export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from epochlab.fuzz.rerun import export_run_dir

    out = args.out or str(Path(args.run_dir) / "trace.parquet")
    table, result = export_run_dir(args.run_dir, out)
    print(f"wrote {out}: {table.num_rows} events ({result.label}, {result.generation}, "
          f"seed {result.seed})")
    return 0


def _replay(args: argparse.Namespace) -> int:
    from epochlab.trace import read_trace, reference_replay, replay

    collect = "stop" if args.fail_fast else "all" if args.all else "first"
    if args.reference:
        try:
            report = reference_replay(read_trace(args.file), checks=args.check, collect=collect)
        except TraceError as exc:
            print(f"epochlab: error: TraceError: {exc.message}", file=sys.stderr)
            return 2
        report.path = args.file
    else:
        progress, finish = _progress(args.json)
        try:
            report = replay(args.file, checks=args.check, collect=collect, progress=progress)
        finally:
            finish()
    if args.json:
        print(json.dumps(report.to_json(), sort_keys=True, indent=2))
    else:
        _print(report)
    if report.error is not None:
        print(f"epochlab: error: TraceError: {report.error.message}", file=sys.stderr)
        return 2
    return 1 if report.protocol_violations else 0


def _progress(quiet: bool) -> tuple[Any, Any]:
    if quiet or not sys.stdout.isatty():
        return None, lambda: None
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(TextColumn("replay"), BarColumn(), TextColumn("{task.completed:,} events"),
                   TimeRemainingColumn(), transient=True)
    bar.start()
    task = bar.add_task("replay", total=None)

    def update(done: int, total: int | None) -> None:
        bar.update(task, completed=done, total=total)

    return update, bar.stop


def _print(report: Any) -> None:
    print(f"{report.path}: {report.rows:,} events replayed in {report.elapsed_s:.3f} s "
          f"({report.events_per_s:,.0f} events/s); verdict: {report.verdict}")
    for v in report.violations:
        where = f"row {v['row']} (event {v['event']}, {v['kind']}"
        where += f", broker {v['broker']})" if v["broker"] is not None else ")"
        print(f"  {v['invariant']} [{v['verdict']}] at {where}: {v['message']}")
        if v["reason"]:
            print(f"    allowed: {v['reason']}")
        for r in v["records"]:
            who = "committed" if r["broker"] is None else f"broker {r['broker']}"
            print(f"    {who}: offset {r['offset']} value {r['value']} epoch {r['epoch']}")
    if report.violation_count > len(report.violations):
        print(f"  ({report.violation_count - len(report.violations)} more not kept)")
    for r in report.replicas:
        print(f"  partition {r['partition']} broker {r['broker']}: {r['role']}"
              f"{'' if r['alive'] else ' (down)'}, LEO {r['log_end_offset']}, HW {r['high_watermark']}, "
              f"{r['batch_count']} batches")
