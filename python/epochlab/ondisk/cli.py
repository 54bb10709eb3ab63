"""``epochlab inspect DATA_DIR...``: read Kafka log directories (registered by ``epochlab.cli``).

The command brings three packages together: ``epochlab.ondisk`` reads and compares the
directories, ``epochlab.kafka.classes.dumplog`` runs Kafka's ``DumpLogSegments`` on the same
files (``--verify-with-kafka``) and ``epochlab.trace`` writes them as a trace (``--trace``); it
sits above all three, as every command does.

Exit status: 0 everything read and nothing found; 1 a finding (acknowledged records that
survive nowhere, or ``--verify-with-kafka`` disagreeing with Kafka's ``DumpLogSegments``);
2 damaged files (the report of everything readable is printed first) or bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add ``inspect`` to ``sub``."""
    p = sub.add_parser("inspect", help="read Kafka log directories: segments, batches, checkpoints, producer "
                                       "state; several replicas: divergence and what rejoining truncates")
    p.add_argument("dirs", nargs="+", metavar="DATA_DIR",
                   help="a broker's log directory (log.dirs entry) or one <topic>-<partition> directory; "
                        "give several replicas' directories to compare them")
    p.add_argument("--partition", action="append", metavar="TOPIC-N", help="only this partition (repeatable)")
    p.add_argument("--records", action="store_true", help="print every record (DumpLogSegments --deep-iteration)")
    p.add_argument("--payload", action="store_true", help="with --records: print keys and values")
    p.add_argument("--json", action="store_true", help="print everything as JSON")
    p.add_argument("--trace", metavar="OUT", help="also write the directories as an epochlab-trace (.parquet or .arrows)")
    p.add_argument("--acked", metavar="FILE", help="history of acknowledged records (JSON Lines: value/value_hex, "
                                                   "key/key_hex, offset): report those that survive nowhere")
    p.add_argument("--leader", metavar="REPLICA", help="the replica the others rejoin (default: highest latest "
                                                       "epoch, then longest log); replicas are named broker-<node.id>")
    p.add_argument("--verify-with-kafka", action="store_true",
                   help="also run Kafka's DumpLogSegments on the same files and report any disagreement "
                        "(needs `epochlab kafka jars` and java)")
    p.set_defaults(handler=_inspect)


def _names(views: list[Any]) -> list[str]:
    names = []
    for i, v in enumerate(views):
        name = f"broker-{v.node_id}" if v.node_id is not None else v.path
        names.append(name if name not in names else f"{name}#{i + 1}")
    return names


def _broker_ids(views: list[Any]) -> list[int]:
    ids = [v.node_id for v in views]
    if all(i is not None and i >= 0 for i in ids) and len(set(ids)) == len(ids):
        return [int(i) for i in ids]
    return list(range(1, len(views) + 1))


def _inspect(args: argparse.Namespace) -> int:
    from epochlab.ondisk import Replica, compare_replicas, read_acked, read_log_dir
    from epochlab.ondisk.render import forensics_text, log_dir_json, log_dir_text

    views = [read_log_dir(d) for d in args.dirs]
    if args.partition:
        wanted = set(args.partition)
        for v in views:
            v.partitions = {k: p for k, p in v.partitions.items() if k in wanted}
            v.checkpoints = {name: [e for e in entries if f"{e[0]}-{e[1]}" in wanted]
                             for name, entries in v.checkpoints.items()}
    acked = read_acked(args.acked) if args.acked else None
    names = _names(views)
    partitions = sorted({k for v in views for k in v.partitions})
    forensics = []
    for part in partitions:
        holders = [(n, v.partitions[part]) for n, v in zip(names, views, strict=True) if part in v.partitions]
        if len(holders) >= 2 or acked is not None:
            leader = args.leader if args.leader in {n for n, _ in holders} or len(partitions) == 1 else None
            forensics.append(compare_replicas([Replica.of(n, p) for n, p in holders], leader=leader, acked=acked))
    verified: list[dict[str, Any]] = []
    if args.verify_with_kafka:
        from epochlab.kafka.classes.dumplog import verify_with_kafka

        for v in views:
            count, found = verify_with_kafka(v)
            verified.append({"path": v.path, "files": count, "disagreements": [vars(d) for d in found]})
    if args.trace:
        from epochlab.ondisk.totrace import to_trace_table
        from epochlab.trace import write_trace

        ids = _broker_ids(views)
        table = to_trace_table([(b, p) for b, v in zip(ids, views, strict=True) for p in v.partitions.values()])
        write_trace(table, args.trace)
    problems = [p for v in views for p in v.all_problems()]
    lost = sum(len(f.acked_lost or []) for f in forensics)
    disagreements = sum(len(v["disagreements"]) for v in verified)
    if args.json:
        doc = {"log_dirs": [dict(log_dir_json(v), name=n) for n, v in zip(names, views, strict=True)],
               "forensics": [f.to_json() for f in forensics],
               "problems": [{"file": p.file, "offset": p.offset, "reason": p.reason} for p in problems]}
        if args.verify_with_kafka:
            doc["verify_with_kafka"] = verified
        if args.trace:
            doc["trace"] = args.trace
        json.dump(doc, sys.stdout, indent=1, sort_keys=True)
        print()
    else:
        for v in views:
            print(log_dir_text(v, records=args.records, payload=args.payload), end="")
        for f in forensics:
            print(forensics_text(f), end="")
        for v in verified:
            print(f"Kafka's DumpLogSegments on {v['path']}: {v['files']} files, "
                  f"{len(v['disagreements'])} disagreements")
            for d in v["disagreements"]:
                print(f"  {d['file']}, line {d['line']}:\n    Kafka:    {d['kafka']}\n    epochlab: {d['epochlab']}")
        if args.trace:
            print(f"wrote {args.trace} (replay: epochlab trace replay {args.trace})")
    if problems:
        print(f"epochlab inspect: {len(problems)} damaged or unreadable file(s); first: {problems[0]}", file=sys.stderr)
        return 2
    return 1 if lost or disagreements else 0
