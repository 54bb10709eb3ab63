"""The commands of Kafka's own classes in this process (``epochlab.kafka.classes``):
``epochlab kafka probe``, ``epochlab kafka differential`` and ``epochlab kafka stale-follower``.

    epochlab kafka probe [--version V | --all-generations] [--json]   Java 17 check, a process each
    epochlab kafka differential [--ops N] [--seed S] [--generation G] [--component C]
                                [--keep-data DIR] [--keep-going] [--json]
    epochlab kafka stale-follower [--release V ...] [--json]   Partition of each KRaft release
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_differential", "add_probe", "add_stale_follower"]


def add_probe(ksub: Any) -> None:
    """``epochlab kafka probe``."""
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
    p.set_defaults(handler=_probe)


def _probe(args: argparse.Namespace) -> int:
    import subprocess

    from epochlab.kafka.classes.legacy import probe
    from epochlab.kafka.jars import compared_releases

    if args.all_generations:
        reports = []
        for _, version in compared_releases():
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


def add_differential(ksub: Any) -> None:
    """``epochlab kafka differential``."""
    from epochlab.kafka.classes.differential import COMPONENTS
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
                   help="keep the files Kafka's classes wrote under DIR/<component>/sequence-NNNNN "
                        "(default: temporary, removed); DIR must not hold an earlier run's files")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=_differential)


def _differential(args: argparse.Namespace) -> int:
    from epochlab.errors import ConfigError
    from epochlab.generations import Generation
    from epochlab.kafka.classes.differential import COMPONENTS, check_keep_data, run_component

    if args.ops < 1:
        raise ConfigError(f"--ops: expected an integer >= 1, got {args.ops}", where="--ops",
                          field="ops", expected=">= 1", got=args.ops)
    generation, version = _generation_and_release(args.generation, args.version)
    if generation != Generation.STRICT_MIN_ISR:
        return _legacy_differential(args, generation, version)
    args.version = version
    keep = Path(args.keep_data) if args.keep_data else None
    if keep is not None:  # every component's directory before the first JVM starts
        check_keep_data(keep, args.component or COMPONENTS)
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


def _legacy_differential(args: argparse.Namespace, generation: Any, version: str) -> int:
    """The leader-epoch cache of an older release against the model's rules of ``generation``,
    in this process when its JVM is free (or already carries ``version``)."""
    from epochlab.errors import ConfigError
    from epochlab.generations import Generation
    from epochlab.kafka.classes.differential import check_keep_data
    from epochlab.kafka.classes.legacy import KNOWN_DIFFERENCES, run_legacy_component
    from epochlab.kafka.jvm import running_release

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
    if keep is not None:
        check_keep_data(keep, ["leader-epoch-cache"])
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


# -- epochlab kafka stale-follower -----------------------------------------------------------

def _release_argument(text: str) -> str:
    from epochlab.errors import ConfigError
    from epochlab.kafka.classes.stale_follower import release_line

    try:
        release_line(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(exc.message) from exc
    return text


def add_stale_follower(ksub: Any) -> None:
    """``epochlab kafka stale-follower``."""
    from epochlab.kafka.jars import KRAFT_RELEASES

    p = ksub.add_parser("stale-follower", help="the re-elected leader's stale follower LEO, on each KRaft "
                                               "release's own Partition class",
                        description="Run the sequence of docs/kafka-findings/README.md "
                                    "(kraft-reelected-leader-stale-follower-leo) on kafka.cluster.Partition of "
                                    "each release in-process (one process per release): makeLeader in epoch 0, "
                                    "two acks=all appends, followers at LEO 2 and 1, makeLeader in epoch 2 "
                                    "without epoch 1, the other follower catching up; and a control in which "
                                    "F2 fetches in epoch 2 first. Prints whether the high watermark passed a "
                                    "record an ISR member lacks. Exit 0 either way; 2 for a usage or "
                                    "environment problem (a release not resolved: epochlab kafka jars "
                                    "--all-generations).")
    p.add_argument("--release", action="append", type=_release_argument, metavar="V",
                   help="Kafka release, 3.3 or later, repeatable (default: every KRaft release line: "
                        f"{', '.join(KRAFT_RELEASES)})")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(handler=_stale_follower)


def _stale_follower(args: argparse.Namespace) -> int:
    from epochlab.kafka.classes.stale_follower import check_releases, format_table
    from epochlab.kafka.jars import KRAFT_RELEASES, jar_dir, mockito_dir

    versions = list(dict.fromkeys(args.release or KRAFT_RELEASES))
    for version in versions:  # every prerequisite before the first JVM starts
        jar_dir(version, resolve=False)
    mockito_dir(resolve=False)
    results = check_releases(versions)
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=1))
        return 0
    print(format_table(results))
    return 0
