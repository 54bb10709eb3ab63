"""``epochlab kafka ...``: the command group that runs real Apache Kafka, as a table of contents.

:func:`register` adds the group; :data:`SUBCOMMANDS` lists each subcommand's ``add`` function in
the order ``epochlab kafka --help`` shows them. Each adds its parser and sets its handler
(``set_defaults(handler=...)``); the handlers live beside the wing they drive:

- ``jars`` (here): resolve a release's jars (``epochlab.kafka.jars``);
- ``probe``, ``differential``, ``stale-follower``: Kafka's classes in this process
  (``epochlab.kafka.classes_cli``);
- ``cluster up|status|down``: a live cluster (``epochlab.kafka.cluster_cli``);
- ``run``, ``fuzz``, ``downtime``: scenarios and schedules on a live cluster beside the model
  (``epochlab.kafka.run_cli``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from epochlab.kafka.classes_cli import add_differential, add_probe, add_stale_follower
from epochlab.kafka.cluster_cli import add_cluster
from epochlab.kafka.run_cli import add_downtime, add_fuzz, add_run

__all__ = ["SUBCOMMANDS", "add_jars", "register"]


def register(sub: Any) -> None:
    """Add ``epochlab kafka`` and its subcommands to the ``epochlab`` parser's ``sub``."""
    kafka = sub.add_parser("kafka", help="run real Apache Kafka: jars, differential tests, clusters")
    ksub = kafka.add_subparsers(dest="kafka_command", required=True, parser_class=type(kafka))
    for add in SUBCOMMANDS:
        add(ksub)


def add_jars(ksub: Any) -> None:
    """``epochlab kafka jars``."""
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
    p.set_defaults(handler=_jars)


def _jars(args: argparse.Namespace) -> int:
    from epochlab.kafka.jars import (KRAFT_RELEASES, MOCKITO_VERSION, compared_releases, jar_dir, logging_dir,
                                     mockito_dir)

    def resolve(version: str) -> Path:
        folder = jar_dir(version)
        logging_dir(folder)  # a live broker's log binding (4.0+; resolved into older caches too)
        return folder

    if not args.all_generations:
        print(resolve(args.version))
        return 0
    compared = compared_releases()
    for label, version in compared:
        print(f"{label} {version} {resolve(version)}", flush=True)
    for version in KRAFT_RELEASES:
        if version not in {v for _, v in compared}:
            print(f"kraft {version} {resolve(version)}", flush=True)
    print(f"mockito {MOCKITO_VERSION} {mockito_dir()}", flush=True)
    return 0


#: every subcommand of the group, in the order ``epochlab kafka --help`` lists them
SUBCOMMANDS: tuple[Callable[[Any], None], ...] = (add_jars, add_probe, add_differential, add_cluster, add_run,
                                                  add_fuzz, add_downtime, add_stale_follower)
