"""The cluster a command works on: :func:`cluster_for` attaches to a running one or starts a new
one of the release and mode asked for (KRaft, :class:`~epochlab.kafka.live.cluster.LocalCluster`;
ZooKeeper, :class:`~epochlab.kafka.live.zookeeper.ZkCluster`) and stops what it started."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from epochlab.kafka.live.cluster import LocalCluster
from epochlab.kafka.live.zookeeper import ZkCluster, make_cluster

__all__ = ["attach", "cluster_for"]


def attach(directory: str | os.PathLike[str]) -> LocalCluster:
    """The cluster recorded in ``DIR/cluster.json`` (started by any process), of the class its
    mode needs (:class:`ZkCluster` for ``zk``), to inspect or stop it; a
    :class:`~epochlab.errors.ConfigError` when there is none."""
    try:
        mode = json.loads((Path(directory).resolve() / "cluster.json").read_text()).get("mode")
    except (OSError, ValueError, AttributeError):
        mode = None  # LocalCluster.attach names what is missing or malformed
    return (ZkCluster if mode == "zk" else LocalCluster).attach(directory)


@contextlib.contextmanager
def cluster_for(cluster_dir: str | os.PathLike[str] | None, directory: str | os.PathLike[str],
                overrides: dict[str, str] | None = None, keep: bool = False,
                version: str | None = None, mode: str | None = None, proxied_listeners: int = 0,
                lossy_brokers: tuple[int, ...] = ()) -> Iterator[LocalCluster]:
    """The cluster a command works on: the running one recorded in ``cluster_dir`` (left
    running), or a new three-broker cluster of Kafka ``version`` (default: the project's
    release) in ``mode`` (``zk`` or ``kraft``; default ZooKeeper before 4.0,
    :func:`epochlab.kafka.live.zookeeper.make_cluster`) started under ``directory`` (its start time printed
    to stderr) and stopped when the block ends, also on an error or Ctrl-C; ``keep`` leaves it
    running (detached) and says how to stop it; ``proxied_listeners``: see :class:`LocalCluster`;
    ``lossy_brokers``: brokers of a new cluster whose log directories are on the lossy filesystem."""
    if cluster_dir:
        yield attach(cluster_dir)
        return
    cluster = make_cluster(directory, brokers=3, overrides=overrides, detach=keep, version=version, mode=mode,
                           proxied_listeners=proxied_listeners, lossy_brokers=lossy_brokers)
    t0 = time.monotonic()
    cluster.start()  # a failed start stops what it started and raises
    print(f"cluster ({cluster.mode} mode, Kafka {cluster.version}) started in {time.monotonic() - t0:.1f} s",
          file=sys.stderr)
    try:
        yield cluster
    finally:
        if keep:
            print(f"cluster left running: epochlab kafka cluster down --dir {cluster.dir}", file=sys.stderr)
        else:
            cluster.stop()
