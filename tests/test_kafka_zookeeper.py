"""ZooKeeper-mode clusters of older releases, without starting one: the configuration written
(``zoo.cfg``, a broker's ``server.properties``), which release runs in which mode, the generation
``--compare`` runs the model in, and the steps refused up front (exit 2, before any broker)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from epochlab.cli import main
from epochlab.errors import ConfigError
from epochlab.generations import Generation
from epochlab.kafka.live.cluster import LocalCluster, Node
from epochlab.kafka.live.zookeeper import (BROKER_EXTRAS, ZK_CLIENT_SUBSTITUTE, ZkCluster, broker_extras,
                                           check_mode, cluster_modes, default_mode, log4j1_properties,
                                           make_cluster, read_znode, zk_properties, zoo_cfg)
from epochlab.kafka.runs.era import era_refusals, live_generation
from epochlab.scenarios import load_builtin
from epochlab.scenarios.loader import loads


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def test_zoo_cfg_is_a_standalone_server_with_wide_session_bounds(tmp_path: Path) -> None:
    cfg = _props(zoo_cfg(tmp_path, "10.213.7.110", 2181))
    assert cfg["clientPortAddress"] == "10.213.7.110" and cfg["clientPort"] == "2181"
    assert cfg["dataDir"] == str(tmp_path)
    assert int(cfg["minSessionTimeout"]) <= 1000 and int(cfg["maxSessionTimeout"]) >= 60000
    assert cfg["admin.enableServer"] == "false" and "ruok" in cfg["4lw.commands.whitelist"]
    assert "server.1" not in cfg  # standalone: no quorum


def test_broker_properties_are_zookeeper_mode_with_the_scenario_session_timeout(tmp_path: Path) -> None:
    broker = Node(2, "broker", "10.213.7.12", 9092, str(tmp_path / "node-2"))
    props = zk_properties(broker, "10.213.7.110:2181", 3, {"broker.session.timeout.ms": "6000"})
    assert props["broker.id"] == "2" and props["zookeeper.connect"] == "10.213.7.110:2181"
    assert props["listeners"] == "PLAINTEXT://10.213.7.12:9092" == props["advertised.listeners"]
    assert "process.roles" not in props and "node.id" not in props and "controller.quorum.voters" not in props
    assert props["zookeeper.session.timeout.ms"] == "6000"  # follows the scenario's session timeout
    assert props["offsets.topic.replication.factor"] == "3" and props["broker.rack"] == "2"
    assert "controlled.shutdown.enable" not in props
    controller = Node(100, "controller", "10.213.7.110", 9093, str(tmp_path / "node-100"))
    assert zk_properties(controller, "10.213.7.110:2181", 1, {})["controlled.shutdown.enable"] == "false"
    assert zk_properties(controller, "10.213.7.110:2181", 1, {})["offsets.topic.replication.factor"] == "1"


def test_a_cluster_lays_out_zookeeper_beside_the_controller_broker(tmp_path: Path) -> None:
    c = make_cluster(tmp_path / "zk", version="2.7.2", network="loopback")
    assert isinstance(c, ZkCluster) and c.mode == "zk"
    c._plan()
    c._write_configs()
    assert c.broker_ids == [1, 2, 3] and c.controller_ids == [100]
    assert c.zookeeper is not None and c.zookeeper.host == c.nodes[100].host
    assert c.zookeeper.netns == c.nodes[100].netns  # one network endpoint: "controller"
    for node_id in (1, 2, 3, 100):
        props = _props(c.nodes[node_id].config_path.read_text())
        assert props["broker.id"] == str(node_id)
        assert props["zookeeper.connect"] == c.zookeeper.address
    assert _props(c.zoo_cfg_path.read_text())["clientPort"] == str(c.zookeeper.port)
    assert c._state()["mode"] == "zk" and c._state()["zookeeper"]["port"] == c.zookeeper.port


def test_power_loss_brokers_are_taken_and_proxied_client_links_refused(tmp_path: Path) -> None:
    """A lossy log directory is mounted by the start both modes share; the per-client proxy
    listeners are wired into the KRaft start only."""
    c = make_cluster(tmp_path / "zk", version="2.0.0", network="loopback", lossy_brokers=(1,))
    assert isinstance(c, ZkCluster) and c.lossy_brokers == (1,)
    with pytest.raises(ConfigError, match="Toxiproxy"):
        make_cluster(tmp_path / "zk2", version="2.0.0", network="loopback", proxied_listeners=1)


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A real standalone ZooKeeper from Kafka 2.0.0's jars (3.4.13) on loopback."""
    import shutil
    import socket
    import subprocess
    import time

    from epochlab.kafka.jars import jar_dir, resolved

    if not resolved("2.0.0") or shutil.which("java") is None:
        pytest.skip("needs Java and Kafka 2.0.0's jars (epochlab kafka jars --all-generations)")
    data = tmp_path_factory.mktemp("zookeeper")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (data / "zoo.cfg").write_text(zoo_cfg(data / "data", "127.0.0.1", port))
    proc = subprocess.Popen(["java", "-Dzookeeper.jmx.log4j.disable=true", "-cp", f"{jar_dir('2.0.0', resolve=False)}/*",
                             "org.apache.zookeeper.server.ZooKeeperServerMain", str(data / "zoo.cfg")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:  # a server still loading its database closes each new connection at once
            try:
                read_znode("127.0.0.1", port, "/zookeeper")
                break
            except (OSError, ValueError):
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "ZooKeeper did not start"
            time.sleep(0.2)
        yield "127.0.0.1", port
    finally:
        proc.kill()
        proc.wait(10)


def test_a_znode_is_read_from_a_real_zookeeper(zookeeper: tuple[str, int]) -> None:
    host, port = zookeeper
    assert read_znode(host, port, "/zookeeper") == b""  # every server has it, without data
    assert read_znode(host, port, "/brokers/topics/none/partitions/0/state") is None
    for _ in range(3):  # each read is a session of its own, closed at once
        assert read_znode(host, port, "/zookeeper/quota") == b""


@pytest.mark.parametrize(("answer", "match"), [
    (b"", "closed the connection"),
    (b"\x7f\xff\xff\xff", "bytes"),
    (b"\x00\x00\x00\x04abcd", "refused the session"),
])
def test_a_znode_reader_refuses_answers_that_are_not_zookeepers(answer: bytes, match: str) -> None:
    """What answers on the port is not trusted: a closed connection, an absurd length or a
    short record is a ``ValueError`` naming it; silence is an ``OSError`` after the timeout."""
    import socket
    import threading

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)

        def answer_once() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(1024)
                conn.sendall(answer)

        t = threading.Thread(target=answer_once, daemon=True)
        t.start()
        with pytest.raises(ValueError, match=match):
            read_znode("127.0.0.1", server.getsockname()[1], "/x", timeout_s=2.0)
        t.join(5)


def test_a_silent_server_times_out() -> None:
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with pytest.raises(OSError):
            read_znode("127.0.0.1", server.getsockname()[1], "/x", timeout_s=0.3)


def test_log_configuration_keeps_state_changes_out_of_server_log(tmp_path: Path) -> None:
    text = log4j1_properties(tmp_path)
    assert f"{tmp_path / 'server.log'}" in text and f"{tmp_path / 'state-change.log'}" in text
    assert "log4j.additivity.state.change.logger=false" in text


def test_releases_with_a_broken_zookeeper_client_get_3_4_10(tmp_path: Path) -> None:
    (tmp_path / "zookeeper-3.4.13.jar").touch()
    assert broker_extras(tmp_path) == BROKER_EXTRAS + (ZK_CLIENT_SUBSTITUTE,)
    other = tmp_path / "other"
    other.mkdir()
    (other / "zookeeper-3.5.9.jar").touch()
    assert broker_extras(other) == BROKER_EXTRAS


@pytest.mark.parametrize(("version", "modes", "default"), [
    ("0.11.0.0", ("zk",), "zk"), ("2.1.1", ("zk",), "zk"), ("2.7.2", ("zk",), "zk"),
    ("3.6.2", ("zk", "kraft"), "zk"), ("3.9.2", ("zk", "kraft"), "zk"), ("4.3.1", ("kraft",), "kraft"),
])
def test_modes_by_release(version: str, modes: tuple[str, ...], default: str) -> None:
    assert cluster_modes(version) == modes
    assert default_mode(version) == default
    assert check_mode(version, None) == default


def test_a_mode_the_release_lacks_is_refused() -> None:
    with pytest.raises(ConfigError, match="removed in 4.0"):
        check_mode("4.3.1", "zk")
    with pytest.raises(ConfigError, match="KIP-833"):
        check_mode("2.7.2", "kraft")
    with pytest.raises(ConfigError, match="zk or kraft"):
        check_mode("3.6.2", "raft")
    with pytest.raises(ConfigError, match="controllers"):
        make_cluster("/tmp/unused", version="2.7.2", controllers=3)
    assert type(make_cluster("/tmp/unused", version="3.6.2", mode="kraft", network="loopback")) is LocalCluster


@pytest.mark.parametrize(("version", "label"), [
    ("0.10.2.2", "hw-truncation"), ("0.11.0.0", "kip-101"), ("2.0.0", "kip-279"), ("2.1.1", "kip-320"),
    ("2.7.2", "kip-320"), ("3.6.2", "diverging-epoch"), ("3.7.2", "strict-min-isr"), ("4.3.1", "strict-min-isr"),
])
def test_compare_runs_the_model_in_the_release_generation(version: str, label: str) -> None:
    assert live_generation(version) is Generation.parse(label)


_ELECTING = """
name = "elections"
description = "a preferred and a chosen election"
[producers.p]
acks = "all"
[[steps]]
action = "produce"
producer = "p"
count = 1
[[steps]]
action = "elect_preferred"
[[steps]]
action = "elect"
broker = 2
"""


def test_zookeeper_mode_refuses_elect_and_early_preferred_elections() -> None:
    scenario = loads(_ELECTING, "elections.toml")
    assert era_refusals(scenario, "3.6.2", "kraft") == []
    why = era_refusals(scenario, "2.7.2", "zk")
    assert len(why) == 1 and "step 3" in why[0] and "bootstrap.controllers" in why[0]
    why = era_refusals(scenario, "2.1.1", "zk")
    assert len(why) == 2 and any("step 2" in w and "2.2" in w for w in why)
    assert era_refusals(load_builtin("seed-002-acks1-acked-then-lost"), "0.11.0.0", "zk") == []


def test_fetch_from_follower_needs_2_4() -> None:
    scenario = load_builtin("kip-392-fetch-from-follower")
    assert any("KIP-392" in w for w in era_refusals(scenario, "2.1.1", "zk"))
    assert not any("KIP-392" in w for w in era_refusals(scenario, "2.7.2", "zk"))


def test_cli_refuses_before_any_broker_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(["kafka", "run", "seed-002-acks1-acked-then-lost", "--kafka-version", "4.3.1", "--mode", "zk",
                 "--out", str(out)]) == 2
    assert "removed in 4.0" in capsys.readouterr().err
    assert main(["kafka", "run", "kraft-skip-epoch-loses-acked-write", "--kafka-version", "2.7.2",
                 "--out", str(out)]) == 2
    assert "ZooKeeper-mode cluster has no controller listener" in capsys.readouterr().out
    assert not out.exists() and not out.with_name("run.cluster").exists()


def test_the_shutdown_and_preferred_election_scenario_maps_from_2_2() -> None:
    from epochlab.scenarios.loader import load_file

    scenario = load_file(Path(__file__).parent / "fixtures" / "scenarios" / "zk-shutdown-preferred.toml")
    assert era_refusals(scenario, "2.7.2", "zk") == []
    assert any("KIP-460" in w for w in era_refusals(scenario, "2.1.1", "zk"))
