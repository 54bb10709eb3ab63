"""``epochlab campaign``: a Spark campaign from the command line.

    epochlab campaign [--grid FILE] [--runs N] [--seed S] [--master URL] [--out DIR] [--resume]
                      [--batch-runs N] [--conf KEY=VALUE] [--no-shrink] [--no-progress] [--json]

Prints the Producer Guarantees Summary (seed 002, measured) and the Kafka-semantics checks;
exit status 0, or 1 when a check fails or the campaign is incomplete; 2 for a bad grid or
option (one line naming the file and field), or when PySpark is not installed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["register"]

DEFAULT_RUNS = 2000
DEFAULT_OUT = "runs/campaign"


def register(sub: Any) -> None:
    """Add ``campaign`` to ``sub``."""
    p = sub.add_parser("campaign", help="distributed fuzzing and configuration sweeps on Spark",
                       description="Run a grid of configurations and fault mixes on Apache Spark "
                                   "(local[*] by default) and report loss, duplication and "
                                   "downtime per configuration (docs/campaigns.md).")
    p.add_argument("--grid", help="grid file, TOML or JSON (default: every configuration the seeds discuss)")
    p.add_argument("--runs", type=int, default=DEFAULT_RUNS, help=f"number of runs (default {DEFAULT_RUNS})")
    p.add_argument("--seed", type=int, default=0, help="campaign seed; run i uses sha256(seed:i)")
    p.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    p.add_argument("--resume", action="store_true", help="skip the batches already written under --out")
    p.add_argument("--batch-runs", type=int, default=None,
                   help="runs per Spark job, the unit of --resume (default 2500)")
    p.add_argument("--no-shrink", action="store_true", help="do not shrink violations")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Spark setting, repeatable (e.g. spark.archives=env.tar.gz#environment)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(handler=_campaign)


def _campaign(args: argparse.Namespace) -> int:
    from epochlab.campaigns.grid import load_grid
    from epochlab.errors import ConfigError

    grid = load_grid(args.grid)
    if args.runs < 1:
        raise ConfigError(f"--runs: expected an integer >= 1, got {args.runs}", where="--runs",
                          field="runs", expected=">= 1", got=args.runs)
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("epochlab: error: campaigns need PySpark: pip install 'epochlab[spark]'", file=sys.stderr)
        return 2
    from epochlab.campaigns.driver import run_campaign
    from epochlab.campaigns.report import expectations
    from epochlab.campaigns.spark import DEFAULT_BATCH_RUNS, CampaignSpec
    from epochlab.spark import build_session

    batch = args.batch_runs or DEFAULT_BATCH_RUNS
    if batch < 1:
        raise ConfigError(f"--batch-runs: expected an integer >= 1, got {batch}", where="--batch-runs",
                          field="batch_runs", expected=">= 1", got=batch)
    spec = CampaignSpec(grid, runs=args.runs, seed=args.seed, batch_runs=batch)
    conf = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--conf: expected KEY=VALUE, got {item!r}", where="--conf", field="conf",
                              expected="KEY=VALUE", got=item)
        conf[key] = value
    spark = build_session(args.master, conf=conf)
    try:
        result = run_campaign(spark, spec, args.out, resume=args.resume,
                              progress=not args.no_progress and not args.json,
                              shrink=not args.no_shrink,
                              say=(lambda line: print(line, file=sys.stderr)))
    finally:
        spark.stop()
    summary = result.summary
    checks = expectations(summary) if summary.get("latest_generation") else []
    if args.json:
        print(json.dumps({"summary": summary, "expectations": checks}, sort_keys=True, indent=1, default=str))
    else:
        _print(summary, checks, result)
    ok = result.complete and all(c["ok"] is not False for c in checks)   # None: not run
    return 0 if ok else 1


def _print(summary: dict[str, Any], checks: list[dict[str, Any]], result: Any) -> None:
    from epochlab.campaigns.report import guarantees_table, md_table

    if summary.get("latest_generation"):
        header, rows, notes = guarantees_table(summary)
        print(f"Producer Guarantees Summary (seed 002), measured: {summary['latest_generation']}, "
              "replication factor 3, clean elections\n")
        print(md_table(header, rows) + "\n")
        for n in notes:
            print(f"disagrees with the seed: {n.replace('**', '')}")
    for c in checks:
        mark = {True: "ok      ", False: "FAIL    ", None: "not run "}[c["ok"]]
        print(f"{mark}{c['name']}: {c['measured']}")
    print(f"{summary['runs']} runs ({summary.get('runs_executed')} executed now in {result.seconds:.1f} s, "
          f"{summary.get('runs_per_second')} runs/s), "
          f"{len(summary['violations'])} distinct protocol violations; report: "
          f"{result.report.get('md', '-')}")
