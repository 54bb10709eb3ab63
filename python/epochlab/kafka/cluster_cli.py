"""``epochlab kafka cluster ...``: a local cluster that outlives the command.

    epochlab kafka cluster up [--brokers N] [--controllers C] [--dir DIR] [--version V]
                              [--mode zk|kraft] [--network auto|netns|loopback] [--json]
    epochlab kafka cluster status [--dir DIR] [--json]
    epochlab kafka cluster down [--dir DIR]

``up`` starts the cluster (KRaft; ZooKeeper mode by default before Kafka 4.0,
:mod:`epochlab.kafka.live.zookeeper`) detached (its JVMs keep running after the command exits), prints the
bootstrap servers and a node table, and refuses a directory whose recorded cluster still runs.
``down`` stops the cluster ``DIR/cluster.json`` records, from any process. ``status`` exits 0
when every node runs, 1 otherwise. A bad argument or a missing cluster exits 2
(:class:`~epochlab.errors.ConfigError`). The default directory is
``$EPOCHLAB_KAFKA_CLUSTER_DIR`` or ``~/.cache/epochlab/kafka-cluster``, so ``up`` and ``down``
find the same cluster from any working directory.

Wiring: ``epochlab.kafka.cli`` calls :func:`add_cluster` with its sub-parsers; each of ``up``,
``status`` and ``down`` sets its handler.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from epochlab.errors import ConfigError

__all__ = ["add_cluster", "default_dir"]


def default_dir() -> Path:
    env = os.environ.get("EPOCHLAB_KAFKA_CLUSTER_DIR")
    return Path(env) if env else Path.home() / ".cache" / "epochlab" / "kafka-cluster"


def add_cluster(kafka_subparsers: Any) -> None:
    """Add ``cluster up|down|status`` under ``epochlab kafka``, each with its handler."""
    from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION

    cluster = kafka_subparsers.add_parser(
        "cluster", help="a local KRaft cluster: up, status, down",
        description="Start, inspect and stop a local KRaft cluster of real Kafka processes (one "
                    "JVM per node) from the resolved jars; see docs/kafka-cluster.md.")
    csub = cluster.add_subparsers(dest="cluster_command", required=True, parser_class=type(cluster))
    dir_help = "cluster directory (default $EPOCHLAB_KAFKA_CLUSTER_DIR or ~/.cache/epochlab/kafka-cluster)"

    up = csub.add_parser("up", help="start a cluster and leave it running")
    up.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    up.add_argument("--controllers", type=int, default=1, help="dedicated controllers (default 1)")
    up.add_argument("--dir", default=None, help=dir_help)
    up.add_argument("--version", "--kafka-version", dest="version", default=DEFAULT_KAFKA_VERSION,
                    help="Kafka release (resolved jars)")
    up.add_argument("--mode", choices=("zk", "kraft"), default=None,
                    help="ZooKeeper (the default before 4.0) or KRaft (3.3+)")
    up.add_argument("--network", choices=("auto", "netns", "loopback"), default="auto",
                    help="netns: a network namespace per node, partitions possible (root); "
                         "loopback: 127.0.0.1 ports; auto: netns when root")
    up.add_argument("--json", action="store_true", help="print the cluster state as JSON")
    up.set_defaults(handler=_up)

    status = csub.add_parser("status", help="which nodes of a cluster run")
    status.add_argument("--dir", default=None, help=dir_help)
    status.add_argument("--json", action="store_true", help="print the cluster state as JSON")
    status.set_defaults(handler=_status)

    down = csub.add_parser("down", help="stop a cluster (SIGTERM, then SIGKILL) and remove its network")
    down.add_argument("--dir", default=None, help=dir_help)
    down.set_defaults(handler=_down)


def _dir(args: argparse.Namespace) -> Path:
    return Path(args.dir) if args.dir else default_dir()


def _up(args: argparse.Namespace) -> int:
    from epochlab.kafka.live.zookeeper import make_cluster

    if args.brokers < 1:
        raise ConfigError(f"--brokers: expected an integer >= 1, got {args.brokers}", where="--brokers",
                          field="brokers", expected=">= 1", got=args.brokers)
    if args.controllers < 1:
        raise ConfigError(f"--controllers: expected an integer >= 1, got {args.controllers}",
                          where="--controllers", field="controllers", expected=">= 1", got=args.controllers)
    cluster = make_cluster(_dir(args), brokers=args.brokers, controllers=args.controllers,
                           version=args.version, mode=args.mode, network=args.network, detach=True)
    cluster.start()
    if args.json:
        print(json.dumps(dict(cluster._state(), ready_after_s=cluster.ready_after_s), indent=1))
    else:
        print(f"bootstrap servers: {cluster.bootstrap_servers}")
        print(f"ready {cluster.ready_after_s:.1f} s after launch; stop with "
              f"`epochlab kafka cluster down --dir {cluster.dir}`")
        _table(cluster)
    return 0


def _status(args: argparse.Namespace) -> int:
    from epochlab.kafka.live.start import attach

    cluster = attach(_dir(args))
    running = {i: cluster.is_running(i) for i in cluster.nodes}
    zk_running = getattr(cluster, "zookeeper_running", lambda: True)()
    if args.json:
        state = cluster._state()
        for n in state["nodes"]:
            n["running"] = running[n["node_id"]]
        print(json.dumps(state, indent=1))
    else:
        print(f"cluster {cluster.cluster_id} in {cluster.dir} ({cluster.mode} mode, Kafka {cluster.version}, "
              f"{cluster.network} network): "
              f"{sum(running.values())} of {len(running)} nodes running")
        print(f"bootstrap servers: {cluster.bootstrap_servers}")
        _table(cluster)
    return 0 if all(running.values()) and zk_running else 1


def _down(args: argparse.Namespace) -> int:
    from epochlab.kafka.live.start import attach

    cluster = attach(_dir(args))
    running = [i for i in sorted(cluster.nodes) if cluster.is_running(i)]
    cluster.stop()
    left = [i for i in sorted(cluster.nodes) if cluster.is_running(i)]
    if left:
        print(f"nodes {left} are still running")
        return 1
    print(f"stopped nodes {running}" if running else "no node was running")
    return 0


def _table(cluster: Any) -> None:
    print(f"{'node':>5} {'role':<10} {'address':<21} {'pid':>7} {'state':<8} data / log")
    for i, n in sorted(cluster.nodes.items()):
        state = ("paused" if n.paused else "running") if cluster.is_running(i) else "stopped"
        pid = n.pid if n.pid is not None else "-"
        print(f"{i:>5} {n.roles:<10} {n.address:<21} {pid!s:>7} {state:<8} {n.data_dir}  {n.log_path}")
    zk = getattr(cluster, "zookeeper", None)
    if zk is not None:
        state = "running" if cluster.zookeeper_running() else "stopped"
        print(f"{'zk':>5} {'zookeeper':<10} {zk.address:<21} {zk.pid or '-'!s:>7} {state:<8} "
              f"{zk.dir}/data  {zk.log_path}")
