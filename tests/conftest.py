"""Shared fixtures: every contract test runs against both implementations of the core rules.

``impl`` is the module under test: ``epochlab.reference`` (the pure-Python oracle) or
``epochlab._core`` (the Rust core). CI always builds the native module, so a missing ``_core``
is a failure, not a skip; run ``pytest -k reference`` while it does not exist yet.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

IMPLEMENTATIONS = {"reference": "epochlab.reference", "core": "epochlab._core"}


@pytest.fixture(params=list(IMPLEMENTATIONS))
def impl(request: pytest.FixtureRequest) -> ModuleType:
    return importlib.import_module(IMPLEMENTATIONS[request.param])


@pytest.fixture
def log_from(impl: ModuleType):
    """Build a ReplicaLog from ``(epoch, n_records)`` batches appended as a follower would,
    records numbered from ``first_value`` so two logs can be made to differ by content."""

    def build(batches, *, log_start_offset: int = 0, first_value: int = 0, **kwargs):
        log = impl.ReplicaLog(log_start_offset, **kwargs)
        value = first_value
        for epoch, size in batches:
            records = list(range(value, value + size))
            log.append_as_follower(impl.RecordBatch(log.log_end_offset, epoch, records))
            value += size
        return log

    return build


@contextlib.contextmanager
def running_cluster(directory, overrides=None, brokers=3, grace_s=10):  # type: ignore[no-untyped-def]
    """A live cluster of ``brokers`` brokers with ``overrides``, stopped when the block ends
    (also on failure), and the teardown checked by pid: a JVM left running fails the test.
    The pids are taken at the start, so a test that stops the cluster itself is checked too."""
    from epochlab.kafka.live.cluster import LocalCluster, live_pid

    c = LocalCluster(directory, brokers=brokers, grace_s=grace_s, overrides=overrides)
    c.start()
    pids = [p for p in c.pids().values() if p is not None]
    try:
        yield c
    finally:
        c.stop(grace_s=0)
    assert pids and not [p for p in pids if live_pid(p)], "a JVM survived the teardown"


def started_cluster(directory, overrides):  # type: ignore[no-untyped-def]
    """:func:`running_cluster` of three brokers for module-scoped fixtures of the live-cluster
    tests (``yield from``): stopped, and its teardown checked, when the generator is closed."""
    with running_cluster(directory, overrides) as c:
        yield c


#: The test files that start live clusters: Kafka brokers and controllers (in network
#: namespaces on subnets picked from what this machine's interfaces leave free, behind
#: Toxiproxy, on the lossy filesystem), ZooKeeper, a Spark standalone master and workers.
#: ``scripts/test`` runs them after the rest of the suite, in one process with the machine to
#: themselves: two clusters started at once would race for the same free subnet, and a live
#: run's timings are compared with the model's (beside a worker running other tests, a
#: delayed-link scenario's leader crashed before its followers had copied the record the
#: scenario waits for). Under pytest-xdist they also form one unit of work (:func:`work_unit`),
#: so that ``pytest -n N`` over the whole suite runs them one after another. A file with
#: module-scoped fixtures (a Spark session, a campaign) goes to one worker whole, since each
#: worker would make them for itself. Every other test shares nothing across processes but its
#: own ``tmp_path`` and runs on whichever worker is free.
LIVE_CLUSTER_FILES = frozenset({
    "test_kafka_cluster.py", "test_kafka_power_loss.py", "test_kafka_proxy.py",
    "test_kafka_refusals.py", "test_kafka_run.py", "test_kafka_zk_live.py",
    "test_kafka_zookeeper.py", "test_kraft_skip_epoch.py", "test_spark_standalone.py",
})


def work_unit(nodeid: str, has_module_fixtures: Callable[[str], bool]) -> str:
    """The unit of work a test goes in under pytest-xdist (:data:`LIVE_CLUSTER_FILES`): the
    live-cluster group, its file when ``has_module_fixtures(file)``, else the test alone."""
    file = nodeid.split("::", 1)[0]
    if file.rsplit("/", 1)[-1] in LIVE_CLUSTER_FILES:
        return "live-cluster"
    return file if has_module_fixtures(file) else nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's scheduler, taking :func:`work_unit` as the unit a worker runs whole
    (xdist's own ``--dist loadgroup`` reads ``xdist_group`` marks through a node id field
    pytest 9.2 no longer uses, so its groups fell apart silently)."""
    from xdist.scheduler import LoadScopeScheduling

    root = Path(str(config.rootpath))

    @functools.cache
    def has_module_fixtures(file: str) -> bool:
        path = root / file
        return path.is_file() and 'scope="module"' in path.read_text(encoding="utf-8")

    class WorkUnits(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid, has_module_fixtures)

    return WorkUnits(config, log)
