"""A power loss on a live broker: ``crash`` with ``lose_unflushed`` on real Kafka, its log
directory on the lossy filesystem (``epochlab.kafka.live.lossyfs``), compared with the model.

seed-002-rf1-power-loss: ten acks=all records on a replication-factor-1 partition, then the
broker's power is cut. Kafka never fsyncs by default (``flush.messages``/``flush.ms`` unset:
``LogManager``'s flusher never acts), so the restarted broker finds an empty log: every
acknowledged record is lost, on the real cluster as in the model. The cluster is started here
with broker 1 on the lossy filesystem and stopped at the end; no JVM, mount or daemon may
survive it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("confluent_kafka", reason="needs confluent-kafka (pip install confluent-kafka)")

from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION, resolved  # noqa: E402
from epochlab.kafka.live import lossyfs  # noqa: E402

if not resolved(DEFAULT_KAFKA_VERSION):
    pytest.skip(f"Kafka {DEFAULT_KAFKA_VERSION}'s jars are not resolved (epochlab kafka jars)",
                allow_module_level=True)
if os.geteuid() != 0:
    pytest.skip("a crash aborts the broker's sockets in its network namespace, which needs root",
                allow_module_level=True)
if lossyfs.available() is not None:
    pytest.skip(f"a power loss needs the lossy filesystem: {lossyfs.available()}", allow_module_level=True)

from epochlab.kafka.live.cluster import LocalCluster, live_pid  # noqa: E402
from epochlab.kafka.runs.pipeline import execute  # noqa: E402
from epochlab.kafka.runs.scenario import broker_overrides, lossy_brokers, unmappable  # noqa: E402
from epochlab.scenarios import load_builtin  # noqa: E402

SCENARIO = "seed-002-rf1-power-loss"
#: What the comparison judges about data: these must agree.
DATA = {"acked", "not_acked", "lost", "duplicated", "read"}


def test_rf1_power_loss_on_real_kafka_loses_every_unflushed_record(tmp_path: Path) -> None:
    scenario = load_builtin(SCENARIO)
    assert lossy_brokers(scenario) == (1,)
    cluster = LocalCluster(tmp_path / "cluster", brokers=3, grace_s=10, overrides=broker_overrides(scenario),
                           lossy_brokers=lossy_brokers(scenario))
    cluster.start()
    try:
        assert cluster.lossy_mounted == (1,)
        assert lossyfs.mounts_under(cluster.dir) == [str(cluster.nodes[1].data_dir)]
        assert unmappable(scenario, cluster) == []
        code, payload = execute(scenario, cluster, compare=True, out=tmp_path / "run")
    finally:
        pids = [p for p in cluster.pids().values() if p is not None]
        cluster.stop(grace_s=0)
        assert not [p for p in pids if live_pid(p)], "a JVM survived the teardown"
        assert not lossyfs.mounts_under(tmp_path), "a lossy mount survived the teardown"
    real, model = payload["real"], payload["model"]
    assert real["expectations_hold"], real["checks"]
    assert model["expectations_hold"], model["checks"]
    assert real["lost"] == list(range(1, 11)), real["lost"]
    assert [d["text"] for d in payload["differences"] if d["what"] in DATA] == []
    crash = (tmp_path / "run" / "steps.md").read_text()
    assert "power cut" in crash
    assert code in (0, 1)


def test_a_lossy_crash_on_a_cluster_without_the_lossy_filesystem_is_refused(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "cluster", brokers=3)  # not started: unmappable only reads it
    why = unmappable(load_builtin(SCENARIO), cluster)
    assert any("not on a lossy filesystem" in w for w in why), why
