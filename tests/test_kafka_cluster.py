"""A real local KRaft cluster (1 controller + 3 broker JVMs), real faults, real clients.

One cluster for the module: crash and restart of a partition leader under an idempotent
acks=all producer, a paused follower, a leader cut off from the controller (seed 002's split
brain, when nftables is installed), each judged by epochlab's history checker; then teardown,
checked by pid. The measured times are printed (``pytest -s``) and kept in ``MEASURED``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka", reason="needs confluent-kafka (pip install confluent-kafka)")

from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION, resolved  # noqa: E402

if not resolved(DEFAULT_KAFKA_VERSION):
    pytest.skip(f"Kafka {DEFAULT_KAFKA_VERSION}'s jars are not resolved (epochlab kafka jars)",
                allow_module_level=True)

from epochlab.kafka.live.clients import (  # noqa: E402
    History, KafkaAdmin, RecordingConsumer, RecordingProducer, judge, read_partition)
from epochlab.kafka.live.cluster import LocalCluster, live_pid  # noqa: E402
from epochlab.kafka.live.faults import Faults, firewall_available  # noqa: E402
from epochlab.sim.config import ConsumerConfig, ProducerConfig  # noqa: E402

TOPIC = "t"
MEASURED: dict[str, float] = {}
PRODUCER = ProducerConfig(acks="all", enable_idempotence=True, retries=2147483647, request_timeout_ms=3000,
                          delivery_timeout_ms=30000, linger_ms=5, batch_size_records=100)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(tmp_path_factory.mktemp("kafka") / "cluster", brokers=3, grace_s=10)
    t0 = time.monotonic()
    c.start()
    MEASURED["start_s"] = time.monotonic() - t0
    MEASURED["ready_after_launch_s"] = c.ready_after_s or 0.0
    yield c
    c.stop(grace_s=0)
    print("\nmeasured:", json.dumps({k: round(v, 2) for k, v in MEASURED.items()}))


@pytest.fixture(scope="module")
def admin(cluster: LocalCluster) -> KafkaAdmin:
    a = KafkaAdmin(cluster.bootstrap_servers)
    a.create_topic(TOPIC, replication_factor=3, min_insync_replicas=2)
    return a


@pytest.fixture(scope="module")
def history() -> History:
    return History()


@pytest.fixture(scope="module")
def producer(cluster: LocalCluster, admin: KafkaAdmin, history: History):
    p = RecordingProducer(cluster.bootstrap_servers, TOPIC, history, PRODUCER, name="p1")
    yield p
    p.close(5)


class Sender:
    """Consecutive integer values, so every test adds to one history."""

    def __init__(self) -> None:
        self.next = 0

    def send(self, producer: RecordingProducer, n: int) -> list[int]:
        values = list(range(self.next, self.next + n))
        for v in values:
            producer.send(v)
        self.next += n
        return values


SENDER = Sender()


def _acked_all(history: History, values: list[int]) -> bool:
    acked = history.acked()
    return all(v in acked for v in values)


def _check_exactly_once(cluster: LocalCluster, history: History) -> None:
    """Every acknowledged value is read exactly once at its acknowledged offset; the checker
    finds nothing."""
    consumer = RecordingConsumer(cluster.bootstrap_servers, TOPIC, history,
                                 ConsumerConfig(auto_offset_reset="earliest", enable_auto_commit=False),
                                 name="c1")
    pairs = consumer.read_to_end(30)
    consumer.close()
    read = [v for _, v in pairs]
    errors = {d["error"] for d in history.dicts() if d["process"] == "c1" and d["error"]}
    assert pairs, f"nothing read (poll errors: {errors})"
    acked = history.acked()
    assert sorted(set(read)) == sorted(read), "a value was read twice"
    assert {v: o for o, v in pairs if v in acked} == acked
    final = read_partition(cluster.bootstrap_servers, TOPIC)
    assert judge(history, final) == []


def test_cluster_is_ready(cluster: LocalCluster) -> None:
    assert KafkaAdmin(cluster.bootstrap_servers).broker_ids() == [1, 2, 3]
    state = json.loads((cluster.dir / "cluster.json").read_text())
    assert {n["node_id"]: n["pid"] for n in state["nodes"]} == cluster.pids()
    for node_id, n in cluster.nodes.items():
        assert cluster.is_running(node_id)
        assert (n.data_dir / "meta.properties").is_file()
        assert n.log_path.is_file()
    assert cluster.controller_ids == [100]


def test_cli_refuses_a_live_directory_and_reports_status(cluster: LocalCluster, capsys) -> None:
    from epochlab.errors import ConfigError

    with pytest.raises(ConfigError, match="holds a running cluster"):
        _cli(["up", "--dir", str(cluster.dir)])
    with pytest.raises(ConfigError, match="--brokers"):
        _cli(["up", "--brokers", "0", "--dir", str(cluster.dir.parent / "other")])
    assert _cli(["status", "--dir", str(cluster.dir)]) == 0
    assert cluster.bootstrap_servers in capsys.readouterr().out


def test_leader_crash_failover_restart_rejoin(cluster: LocalCluster, admin: KafkaAdmin,
                                              producer: RecordingProducer, history: History) -> None:
    faults = Faults(cluster)
    first = SENDER.send(producer, 300)
    assert producer.flush(30) == 0 and _acked_all(history, first)
    before = admin.describe_partition(TOPIC)
    assert before.leader is not None and len(before.isr) == 3 and before.leader_epoch is not None
    old = before.leader

    signalled = time.monotonic()
    faults.kill(old)
    returned = time.monotonic()
    history.event("crash", f"SIGKILL broker {old}")
    # the moment its JVM exited (its sockets closed), which the model's crash is given
    assert set(faults.applied) == {old} and signalled <= faults.applied[old] <= returned
    t0 = time.monotonic()
    during = SENDER.send(producer, 100)
    after = admin.wait_for(TOPIC, 0, lambda s: s.leader not in (None, old) and s.leader_epoch is not None, 30)
    MEASURED["failover_s"] = time.monotonic() - t0
    assert after.leader_epoch is not None and after.leader_epoch > before.leader_epoch
    assert old not in after.isr
    more = SENDER.send(producer, 100)
    assert producer.flush(30) == 0 and _acked_all(history, during + more)

    faults.restart(old)
    history.event("restart", f"broker {old}")
    t1 = time.monotonic()
    admin.wait_for(TOPIC, 0, lambda s: old in s.isr, 60)
    MEASURED["rejoin_isr_s"] = time.monotonic() - t1
    _check_exactly_once(cluster, history)


def test_paused_follower_leaves_and_rejoins_the_isr(cluster: LocalCluster, admin: KafkaAdmin,
                                                    producer: RecordingProducer, history: History) -> None:
    faults = Faults(cluster)
    state = admin.describe_partition(TOPIC)
    follower = next(b for b in state.isr if b != state.leader)
    faults.pause(follower)
    history.event("crash", f"SIGSTOP broker {follower}")
    t0 = time.monotonic()
    try:
        values = SENDER.send(producer, 100)
        admin.wait_for(TOPIC, 0, lambda s: follower not in s.isr, 30)
        MEASURED["paused_follower_out_of_isr_s"] = time.monotonic() - t0
        assert producer.flush(30) == 0 and _acked_all(history, values)
    finally:
        faults.resume(follower)
        history.event("restart", f"SIGCONT broker {follower}")
    t1 = time.monotonic()
    admin.wait_for(TOPIC, 0, lambda s: follower in s.isr, 60)
    MEASURED["resumed_follower_in_isr_s"] = time.monotonic() - t1
    _check_exactly_once(cluster, history)


def test_leader_cut_off_from_the_controller(cluster: LocalCluster, admin: KafkaAdmin,
                                            producer: RecordingProducer, history: History) -> None:
    """Seed 002's split brain: the leader loses the controller and the other brokers, the
    producer still reaches it; after the heal no acknowledged record is lost."""
    reason = firewall_available()
    if reason or cluster.network != "netns":
        pytest.skip(reason or "the cluster runs without network namespaces")
    faults = Faults(cluster)
    state = admin.describe_partition(TOPIC)
    old = state.leader
    assert old is not None
    others = [b for b in cluster.broker_ids if b != old]
    # ask the majority side: the isolated leader still describes itself as the leader
    majority = KafkaAdmin(",".join(cluster.nodes[b].address for b in others), only_bootstrap=True)
    faults.partition([[old], [*cluster.controller_ids, *others]])
    history.event("network", f"partition [{old}] | {cluster.controller_ids + others}")
    t0 = time.monotonic()
    try:
        values = SENDER.send(producer, 100)
        moved = majority.wait_for(TOPIC, 0, lambda s: s.leader not in (None, old), 30)
        MEASURED["isolated_leader_replaced_s"] = time.monotonic() - t0
        assert moved.leader_epoch is None or state.leader_epoch is None or moved.leader_epoch > state.leader_epoch
    finally:
        faults.heal()
        history.event("network", "heal")
    t1 = time.monotonic()
    # the majority's view again: the old leader's own metadata may still be the stale one
    majority.wait_for(TOPIC, 0, lambda s: old in s.isr and s.leader not in (None, old), 60)
    MEASURED["healed_leader_in_isr_s"] = time.monotonic() - t1
    producer.flush(40)
    assert all(v in history.acked() or _outcome(history, v) in ("fail", "info") for v in values)
    _check_exactly_once(cluster, history)


def test_stop_leaves_no_process_and_no_namespace(cluster: LocalCluster) -> None:
    pids = [p for p in cluster.pids().values() if p is not None]
    namespaces = [n.netns for n in cluster.nodes.values() if n.netns]
    t0 = time.monotonic()
    cluster.stop()
    MEASURED["stop_s"] = time.monotonic() - t0
    assert len(pids) == 4
    assert [p for p in pids if live_pid(p)] == []
    if namespaces:
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert [n for n in namespaces if n in listed] == []


def test_cli_up_and_down_from_other_processes(tmp_path: Path) -> None:
    """``up`` in one process leaves a (1 controller + 1 broker) cluster running; ``down`` in
    another stops it."""
    directory = tmp_path / "c"
    up = _cli_process(["up", "--brokers", "1", "--dir", str(directory), "--json"], timeout=120)
    assert up.returncode == 0, up.stderr
    pids = [n["pid"] for n in json.loads(up.stdout)["nodes"]]
    assert all(live_pid(p) for p in pids)
    down = _cli_process(["down", "--dir", str(directory)], timeout=60)
    assert down.returncode == 0, down.stderr
    assert [p for p in pids if live_pid(p)] == []
    assert _cli_process(["status", "--dir", str(directory)], timeout=30).returncode == 1


def _outcome(history: History, value: int) -> str | None:
    ends = [d["type"] for d in history.dicts() if d["f"] == "send" and d["value"] == value and d["type"] != "invoke"]
    return ends[-1] if ends else None


def _cli(argv: list[str]) -> int:
    from epochlab.kafka.cluster_cli import add_cluster

    parser = argparse.ArgumentParser(prog="epochlab kafka")
    add_cluster(parser.add_subparsers(dest="kafka_command", required=True))
    args = parser.parse_args(["cluster", *argv])
    return int(args.handler(args))


def _cli_process(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    script = ("import argparse, sys\n"
              "from epochlab.kafka.cluster_cli import add_cluster\n"
              "p = argparse.ArgumentParser(prog='epochlab kafka')\n"
              "add_cluster(p.add_subparsers(dest='kafka_command', required=True))\n"
              f"a = p.parse_args(['cluster', *{argv!r}])\n"
              "sys.exit(a.handler(a))\n")
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"}, check=False)


def test_a_start_that_fails_after_the_spawn_is_retried_once_and_leaves_its_evidence(tmp_path: Path, capsys) -> None:
    """A real start that cannot be ready in time (no time at all): the attempt is stopped, its evidence
    written, a second attempt from scratch fails the same way, the error is the second one's,
    and nothing is left running."""
    from epochlab.errors import ConfigError

    c = LocalCluster(tmp_path / "c", brokers=1, grace_s=5, ready_timeout_s=0.0)
    try:
        with pytest.raises(ConfigError, match="not ready after"):
            c.start()
    finally:
        c.stop(grace_s=0)
    assert c.start_attempts == 2
    assert "cluster start attempt 1 failed" in capsys.readouterr().err
    for attempt in (1, 2):
        report = (tmp_path / "c" / f"start-failure-{attempt}.txt").read_text()
        assert f"start attempt {attempt} of the cluster" in report
        assert "node 1 (broker" in report and "node 100 (controller" in report
        assert "server.log" in report or "stdout.log" in report
    assert json.loads((tmp_path / "c" / "cluster.json").read_text())["start_attempts"] == 2
    assert [p for p in c.pids().values() if p is not None] == []
    if c.network == "netns":
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert f"el{c.tag}-" not in listed


def test_a_node_just_spawned_counts_as_running_while_it_execs(tmp_path: Path) -> None:
    """``is_running`` of a node this process spawned asks the kernel (``Popen.poll``): a check
    of ``/proc`` while the child execs from ``setpriv`` to ``nsenter`` to ``java`` misses the
    node's command line and said "not running" (a CI flake before 7db0997). Spawned, checked in a
    tight loop for 50 ms, never reported gone; killed, reported gone."""
    c = LocalCluster(tmp_path / "c", brokers=1)
    c._plan()
    if c.network == "netns":
        c._make_network()
    try:
        c._write_configs()
        node = c.broker_ids[0]
        from epochlab.kafka.jars import jar_dir

        c._spawn(node, jar_dir(c.version, resolve=False))
        deadline = time.monotonic() + 0.05
        while time.monotonic() < deadline:
            assert c.is_running(node)
    finally:
        c.stop(grace_s=0)
    assert not c.is_running(node)


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka's ``Uuid.randomUuid`` draws again when the id would start with "-" (the tools read
    it as an option); ours did not, and ``kafka-storage format -t`` failed one run in 64."""
    import uuid

    from epochlab.kafka.live import cluster as cluster_module

    draws = iter([uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(int=0), uuid.UUID(int=5)])
    monkeypatch.setattr(cluster_module.uuid, "uuid4", lambda: next(draws))
    assert cluster_module._cluster_id() == "AAAAAAAAAAAAAAAAAAAABQ"  # the dashed and the zero one skipped
