"""``epochlab kafka ...``: commands that run real Apache Kafka.

    epochlab kafka jars [--version V]      resolve a release from Maven Central, print its folder

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


_SUBCOMMANDS: list[Callable[[Any], None]] = [_add_jars]


def add_kafka_commands(sub: Any) -> None:
    kafka = sub.add_parser("kafka", help="run real Apache Kafka: jars, differential tests, clusters")
    ksub = kafka.add_subparsers(dest="kafka_command", required=True, parser_class=type(kafka))
    for add in _SUBCOMMANDS:
        add(ksub)


def dispatch_kafka(args: argparse.Namespace) -> int:
    handler: Callable[[argparse.Namespace], int] = args.kafka_run
    return handler(args)
