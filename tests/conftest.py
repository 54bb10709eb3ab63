"""Shared fixtures: every contract test runs against both implementations of the core rules.

``impl`` is the module under test: ``epochlab.reference`` (the pure-Python oracle) or
``epochlab._core`` (the Rust core). CI always builds the native module, so a missing ``_core``
is a failure, not a skip; run ``pytest -k reference`` while it does not exist yet.
"""

from __future__ import annotations

import importlib
from types import ModuleType

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


def started_cluster(directory, overrides):  # type: ignore[no-untyped-def]
    """A three-broker live cluster with ``overrides``, stopped when the generator is closed,
    and the teardown checked by pid: a JVM left running fails the test that owns the fixture.
    For module-scoped fixtures of the live-cluster tests (``yield from``)."""
    from epochlab.kafka.live.cluster import LocalCluster, live_pid

    c = LocalCluster(directory, brokers=3, grace_s=10, overrides=overrides)
    c.start()
    yield c
    pids = [p for p in c.pids().values() if p is not None]
    c.stop(grace_s=0)
    assert pids and not [p for p in pids if live_pid(p)], "a JVM survived the teardown"
