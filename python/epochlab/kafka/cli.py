"""``epochlab kafka ...``: commands that run real Apache Kafka.

    epochlab kafka jars [--version V | --all-generations]   resolve releases, print their folders
    epochlab kafka probe [--version V | --all-generations] [--json]   Java 17 check, a process each
    epochlab kafka differential [--ops N] [--seed S] [--generation G] [--component C]
                                [--keep-data DIR] [--keep-going] [--json]
    epochlab kafka stale-follower [--release V ...] [--json]   Partition of each KRaft release

Each further subcommand module registers itself in :data:`_SUBCOMMANDS` with an ``add(sub)``
function that adds its parsers (setting ``kafka_run`` to its handler) so this group stays a
table of contents.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable

__all__ = ["add_kafka_commands", "dispatch_kafka"]


def _add_jars(ksub: Any) -> None:
    from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION

    p = ksub.add_parser("jars", help="resolve a Kafka release's jars from Maven Central",
                        description="Resolve org.apache.kafka:kafka_<scala>:VERSION and its runtime "
                                    "dependencies through the pinned pom.xml into the jar cache "
                                    "($EPOCHLAB_KAFKA_CACHE, default ~/.cache/epochlab/kafka) and "
                                    "print the folder.")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--version", default=DEFAULT_KAFKA_VERSION,
                       help=f"Kafka release (default {DEFAULT_KAFKA_VERSION}, the current one)")
    which.add_argument("--all-generations", action="store_true",
                       help="every release the differential compares (the one each protocol "
                            "generation stands for and the later patches compared with it), then "
                            "every KRaft release line the stale-follower check runs and Mockito; "
                            "prints 'generation version folder' lines ('kraft' for a release "
                            "only that check runs, 'mockito' for Mockito's folder)")
    p.set_defaults(kafka_run=_run_jars)


def _compared_releases() -> list[tuple[str, str]]:
    """(generation label, version) of every release compared, oldest first."""
    from epochlab.kafka.jars import GENERATION_RELEASES, PATCH_RELEASES

    pairs = [(g.label, v) for g, v in GENERATION_RELEASES.items()]
    pairs += [(g.label, v) for v, g in PATCH_RELEASES.items()]
    return sorted(pairs, key=lambda pair: tuple(int(n) for n in pair[1].split(".")))


def _run_jars(args: argparse.Namespace) -> int:
    from epochlab.kafka.jars import KRAFT_RELEASES, MOCKITO_VERSION, jar_dir, logging_dir, mockito_dir

    def resolve(version: str) -> Path:
        folder = jar_dir(version)
        logging_dir(folder)  # a live broker's log binding (4.0+; resolved into older caches too)
        return folder

    if not args.all_generations:
        print(resolve(args.version))
        return 0
    compared = _compared_releases()
    for label, version in compared:
        print(f"{label} {version} {resolve(version)}", flush=True)
    for version in KRAFT_RELEASES:
        if version not in {v for _, v in compared}:
            print(f"kraft {version} {resolve(version)}", flush=True)
    print(f"mockito {MOCKITO_VERSION} {mockito_dir()}", flush=True)
    return 0


def _add_probe(ksub: Any) -> None:
    from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION

    p = ksub.add_parser("probe", help="check that a release's leader-epoch cache runs on this Java",
                        description="Start a JVM with the release's jars (already resolved), load its "
                                    "LeaderEpochFileCache and run assign, endOffsetFor, truncation "
                                    "from both ends and a reload from the checkpoint file. With "
                                    "--all-generations, one process per release. Exit 1 when a "
                                    "release that has a leader-epoch cache does not run.")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--version", default=DEFAULT_KAFKA_VERSION, help="Kafka release")
    which.add_argument("--all-generations", action="store_true", help="every compared release")
    p.add_argument("--json", action="store_true", help="print the reports as JSON")
    p.set_defaults(kafka_run=_run_probe)


def _run_probe(args: argparse.Namespace) -> int:
    import json
    import subprocess
    import sys

    from epochlab.kafka.legacy import probe

    if args.all_generations:
        reports = []
        for _, version in _compared_releases():
            done = subprocess.run([sys.executable, "-m", "epochlab", "kafka", "probe", "--version", version,
                                   "--json"], capture_output=True, text=True, check=False)
            try:
                reports.extend(json.loads(done.stdout))
            except json.JSONDecodeError:
                reports.append({"version": version, "resolved": None, "loads": False, "runs": False,
                                "error": (done.stderr.strip().splitlines() or ["no output"])[-1]})
    else:
        reports = [probe(args.version)]
    if args.json:
        print(json.dumps(reports, indent=1))
    else:
        for r in reports:
            status = "runs" if r["runs"] else ("loads" if r["loads"] else "does not run")
            print(f"Kafka {r['version']}: {status} on Java {r.get('java')}; {r.get('class') or 'no cache class'}")
            for step, result in r.get("steps", []):
                print(f"  {step} -> {result!s}".rstrip().replace("\n", " | "))
            if r["error"]:
                print(f"  {r['error']}")
    no_cache = "has no leader-epoch cache"
    return 1 if any(not r["runs"] and no_cache not in str(r["error"]) for r in reports) else 0


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
    p.add_argument("--version", default=None,
                   help="Kafka release whose classes are the oracle (default: the release the "
                        f"generation stands for; {DEFAULT_KAFKA_VERSION} for the latest)")
    p.add_argument("--generation", "-g", default=None,
                   help="protocol generation whose model rules are compared (default: the one of "
                        "--version, else the latest, strict-min-isr); the older ones compare "
                        "the leader-epoch cache only, kip-101 and later")
    p.add_argument("--keep-going", action="store_true",
                   help="older generations: run every sequence, count the disagreeing ones by "
                        "known difference (docs/kafka-releases.md) instead of stopping at the first")
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
    generation, version = _generation_and_release(args.generation, args.version)
    if generation != Generation.STRICT_MIN_ISR:
        return _run_legacy_differential(args, generation, version)
    args.version = version
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


def _generation_and_release(generation: str | None, version: str | None) -> tuple[Any, str]:
    """The generation compared and the release whose classes answer: each defaults to the
    other's (``GENERATION_RELEASES``), both to the latest."""
    from epochlab.generations import Generation
    from epochlab.kafka.jars import GENERATION_RELEASES, generation_of, release_for

    if version is not None:
        release_for(version)  # a malformed version is a usage error before anything runs
    if generation is not None:
        parsed = Generation.parse(generation)
    else:
        parsed = (generation_of(version) if version else None) or Generation.STRICT_MIN_ISR
    return parsed, version or GENERATION_RELEASES[parsed]


def _run_legacy_differential(args: argparse.Namespace, generation: Any, version: str) -> int:
    """The leader-epoch cache of an older release against the model's rules of ``generation``,
    in this process when its JVM is free (or already carries ``version``)."""
    import json
    import sys
    from pathlib import Path

    from epochlab.errors import ConfigError
    from epochlab.generations import Generation
    from epochlab.kafka.jvm import running_release
    from epochlab.kafka.legacy import KNOWN_DIFFERENCES, run_legacy_component

    where = f"--generation {generation.label}"
    if generation == Generation.TRUNCATE_TO_HW:
        raise ConfigError(f"{where}: Kafka {version} has no leader-epoch cache (KIP-101 added it in "
                          "0.11) and its replica-log classes are not wired up: nothing to compare",
                          where="--generation", field="generation", expected="kip-101 or later",
                          got=generation.label)
    others = [c for c in (args.component or []) if c != "leader-epoch-cache"]
    if others:
        raise ConfigError(f"{where}: component {others[0]} is compared with the current release's "
                          f"classes only (Kafka {version}'s kafka.log.Log is not wired up); use "
                          "--component leader-epoch-cache", where="--component", field="component",
                          expected="leader-epoch-cache", got=others[0])
    if running_release() not in (None, version):
        raise ConfigError(f"{where}: this process's JVM already carries Kafka {running_release()}; "
                          f"run `epochlab kafka differential --generation {generation.label}` in a "
                          "separate process", where="jvm", field="version", expected=version,
                          got=running_release())
    if not args.component and not args.json:
        print(f"{where}: only leader-epoch-cache is compared with Kafka {version}", file=sys.stderr)

    def progress(done: int) -> None:
        if not args.json:
            print(f"\rleader-epoch-cache: {done}/{args.ops} operations", end="", file=sys.stderr, flush=True)

    keep = Path(args.keep_data) if args.keep_data else None
    r, causes = run_legacy_component(args.ops, args.seed, version, generation, keep, progress=progress,
                                     keep_going=args.keep_going)
    if args.json:
        print(json.dumps({"kafka": version, "generation": generation.label, "seed": args.seed,
                          "components": {"leader-epoch-cache": dict(r.to_dict(), differences=causes)}},
                         indent=1))
    else:
        print(file=sys.stderr)
        rate = f"{r.ops / r.seconds:.0f} ops/s" if r.seconds else ""
        unit = "sequences disagreed" if args.keep_going else "mismatches"
        print(f"leader-epoch-cache: {r.ops} operations against Kafka {version} with the "
              f"{generation.label} rules, {r.mismatches} {unit} ({r.seconds:.1f} s, {rate})")
        for cause, count in sorted(causes.items()):
            print(f"  {count} x {cause}: {KNOWN_DIFFERENCES.get(cause, 'not explained yet')}")
        if r.first is not None:
            print(f"  first mismatch at operation {r.first['index']}: {r.first['op']}")
            for side in ("kafka", "rust", "reference"):
                print(f"    {side:<9} {r.first[side]}")
            print(f"  minimal sequence ({len(r.minimal)} operations): {[list(op) for op in r.minimal]}")
    return 1 if r.mismatches else 0


def _add_cluster(ksub: Any) -> None:
    from epochlab.kafka.cluster_cli import add_cluster_commands

    add_cluster_commands(ksub)


def _add_run(ksub: Any) -> None:
    from epochlab.kafka.run_cli import add

    add(ksub)


def _add_fuzz(ksub: Any) -> None:
    from epochlab.kafka.fuzz import add

    add(ksub)


def _add_downtime(ksub: Any) -> None:
    from epochlab.kafka.downtime import add

    add(ksub)


def _add_stale_follower(ksub: Any) -> None:
    from epochlab.kafka.stale_follower import add

    add(ksub)


_SUBCOMMANDS: list[Callable[[Any], None]] = [_add_jars, _add_probe, _add_differential, _add_cluster, _add_run,
                                             _add_fuzz, _add_downtime, _add_stale_follower]


def add_kafka_commands(sub: Any) -> None:
    kafka = sub.add_parser("kafka", help="run real Apache Kafka: jars, differential tests, clusters")
    ksub = kafka.add_subparsers(dest="kafka_command", required=True, parser_class=type(kafka))
    for add in _SUBCOMMANDS:
        add(ksub)


def dispatch_kafka(args: argparse.Namespace) -> int:
    handler: Callable[[argparse.Namespace], int] = args.kafka_run
    return handler(args)
