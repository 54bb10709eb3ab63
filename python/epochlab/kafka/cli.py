"""``epochlab kafka ...``: commands that run real Apache Kafka.

    epochlab kafka jars [--version V]      resolve a release from Maven Central, print its folder
    epochlab kafka differential [--ops N] [--seed S] [--component C] [--keep-data DIR] [--json]

Each further subcommand module registers itself in :data:`_SUBCOMMANDS` with an ``add(sub)``
function that adds its parsers (setting ``kafka_run`` to its handler) so this group stays a
table of contents.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable

__all__ = ["add_kafka_commands", "dispatch_kafka"]


def _add_jars(ksub: Any) -> None:
    from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION

    p = ksub.add_parser("jars", help="resolve a Kafka release's jars from Maven Central",
                        description="Resolve org.apache.kafka:kafka_<scala>:VERSION and its runtime "
                                    "dependencies through the pinned pom.xml into the jar cache "
                                    "($EPOCHLAB_KAFKA_CACHE, default ~/.cache/epochlab/kafka) and "
                                    "print the folder.")
    p.add_argument("--version", default=DEFAULT_KAFKA_VERSION,
                   help=f"Kafka release (default {DEFAULT_KAFKA_VERSION}, the current one)")
    p.set_defaults(kafka_run=_run_jars)


def _run_jars(args: argparse.Namespace) -> int:
    from epochlab.kafka.jars import jar_dir

    print(jar_dir(args.version))
    return 0


def _add_differential(ksub: Any) -> None:
    from epochlab.kafka.differential import COMPONENTS
    from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION

    p = ksub.add_parser("differential", help="compare the model with Kafka's own classes",
                        description="Run the same random operation sequences on Kafka's own "
                                    "storage classes (through JPype), the Rust core and the "
                                    "pure-Python twin, compare every observable after every "
                                    "operation, and shrink the first disagreement. Exit 1 on a "
                                    "mismatch, 2 for a usage or environment problem.")
    p.add_argument("--ops", type=int, default=100_000, help="operations per component (default 100000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the operation sequences")
    p.add_argument("--component", choices=COMPONENTS, action="append",
                   help=f"component to test, repeatable (default: all: {', '.join(COMPONENTS)})")
    p.add_argument("--version", default=DEFAULT_KAFKA_VERSION, help="Kafka release whose classes are the oracle")
    p.add_argument("--generation", "-g", default=None,
                   help="protocol generation the compared rules belong to (only the current one, "
                        "strict-min-isr, has its release's classes wired up)")
    p.add_argument("--keep-data", default=None, metavar="DIR",
                   help="keep Kafka's checkpoint files under DIR (default: temporary, removed)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(kafka_run=_run_differential)


def _run_differential(args: argparse.Namespace) -> int:
    import json
    import sys
    from pathlib import Path

    from epochlab.errors import ConfigError
    from epochlab.generations import Generation
    from epochlab.kafka.differential import COMPONENTS, run_component

    if args.ops < 1:
        raise ConfigError(f"--ops: expected an integer >= 1, got {args.ops}", where="--ops",
                          field="ops", expected=">= 1", got=args.ops)
    if args.generation is not None and Generation.parse(args.generation) != Generation.STRICT_MIN_ISR:
        raise ConfigError(f"--generation {args.generation}: only strict-min-isr (Kafka 3.7+) is "
                          "compared with its release's classes so far", where="--generation",
                          field="generation", expected="strict-min-isr", got=args.generation)
    keep = Path(args.keep_data) if args.keep_data else None
    reports = {}
    for name in args.component or COMPONENTS:
        def progress(done: int, name: str = name) -> None:
            if not args.json:
                print(f"\r{name}: {done}/{args.ops} operations", end="", file=sys.stderr, flush=True)
        reports[name] = run_component(name, args.ops, args.seed, args.version, keep, progress=progress)
        if not args.json:
            print(file=sys.stderr)
    if args.json:
        print(json.dumps({"kafka": args.version, "seed": args.seed,
                          "components": {n: r.to_dict() for n, r in reports.items()}}, indent=1))
    else:
        for name, r in reports.items():
            rate = f"{r.ops / r.seconds:.0f} ops/s" if r.seconds else ""
            print(f"{name}: {r.ops} operations against Kafka {args.version}, {r.mismatches} "
                  f"mismatches ({r.seconds:.1f} s, {rate})")
            if r.first is not None:
                print(f"  first mismatch at operation {r.first['index']}: {r.first['op']}")
                for side in ("kafka", "rust", "reference"):
                    print(f"    {side:<9} {r.first[side]}")
                print(f"  minimal sequence ({len(r.minimal)} operations): {[list(op) for op in r.minimal]}")
    return 1 if any(r.mismatches for r in reports.values()) else 0


_SUBCOMMANDS: list[Callable[[Any], None]] = [_add_jars, _add_differential]


def add_kafka_commands(sub: Any) -> None:
    kafka = sub.add_parser("kafka", help="run real Apache Kafka: jars, differential tests, clusters")
    ksub = kafka.add_subparsers(dest="kafka_command", required=True, parser_class=type(kafka))
    for add in _SUBCOMMANDS:
        add(ksub)


def dispatch_kafka(args: argparse.Namespace) -> int:
    handler: Callable[[argparse.Namespace], int] = args.kafka_run
    return handler(args)
