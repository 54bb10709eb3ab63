"""Delayed links without netem: Toxiproxy on its own (loopback), the scenario mapping decisions
(which links are proxied, runnable when the proxy is installed, refused up front naming
``scripts/kafka-proxy-setup`` when it is not), and one delayed-link scenario on a live cluster
(``epochlab.kafka.live.proxy``, ``epochlab.kafka.runs.links``, ``docs/kafka-run.md``)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from epochlab.errors import ConfigError
from epochlab.kafka.live.proxy import (SETUP, LinkProxies, Toxiproxy, client_listeners, client_proxy_port, latency_of,
                                       node_link_port, proxy_missing, toxiproxy_binary)
from epochlab.kafka.runs.links import delayed_clients, proxy_plan, uses_proxy
from epochlab.scenarios import load_builtin

#: The built-ins that need a delayed link (set_link with delay_ms, or slow_follower).
DELAYED = ("seed-001-exactly-once-across-failover", "seed-001-idempotence-across-failover",
           "seed-002-mid-replication-retry-duplicates", "seed-002-minisr2-mid-replication-idempotent-retry",
           "kafka-2334-list-offsets-go-back")

needs_toxiproxy = pytest.mark.skipif(not os.access(toxiproxy_binary(), os.X_OK),
                                     reason=f"Toxiproxy is not installed at {toxiproxy_binary()}: run {SETUP}")


# -- the mapping, pure ------------------------------------------------------------------------
def test_a_model_delay_range_becomes_latency_and_jitter() -> None:
    assert latency_of([1000, 1000]) == (1000, 0)
    assert latency_of([100, 300]) == (200, 100)  # Toxiproxy: latency + U[-jitter, jitter)
    assert latency_of([0, 5]) == (2, 2)


def test_the_proxy_names_the_harness_endpoint_as_the_cluster_does() -> None:
    from epochlab.kafka.live import cluster, proxy

    assert proxy.CLIENT == cluster.CLIENT


def test_proxy_ports_do_not_collide() -> None:
    client_ports = {client_proxy_port(i, b) for i in range(1, 21) for b in range(1, 90)}
    nodes = [*range(1, 90), *range(100, 109)]
    node_ports = {node_link_port(s, r) for s in nodes for r in nodes if s != r}
    assert len(client_ports) == 20 * 89 and len(node_ports) == len(nodes) * (len(nodes) - 1)
    assert not client_ports & node_ports and max(node_ports) < 65536


def test_a_proxied_client_listener_is_advertised_at_the_proxy() -> None:
    props = client_listeners(2, "10.213.7.12", 2)
    assert props == {"listeners": "PROXIED1://10.213.7.12:9101,PROXIED2://10.213.7.12:9102",
                     "advertised.listeners": "PROXIED1://10.213.7.2:20102,PROXIED2://10.213.7.2:20202",
                     "listener.security.protocol.map": "PROXIED1:PLAINTEXT,PROXIED2:PLAINTEXT"}


def test_the_proxied_links_are_planned_from_the_scenario() -> None:
    """A client's delayed link gives it a listener; a slow follower proxies its connections to
    every other broker; a scenario without either proxies nothing."""
    assert all(uses_proxy(load_builtin(n)) for n in DELAYED)
    assert not uses_proxy(load_builtin("seed-002-acks1-acked-then-lost"))
    assert proxy_plan(load_builtin("seed-001-idempotence-across-failover"), [1, 2, 3], [100]) == \
        (set(), {"p1": 1, "p2": 2})
    assert delayed_clients(load_builtin("seed-002-mid-replication-retry-duplicates")) == ["p1"]
    assert proxy_plan(load_builtin("kafka-2334-list-offsets-go-back"), [1, 2, 3], [100]) == ({(3, 1), (3, 2)}, {})


# -- Toxiproxy on its own, on loopback --------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def echo() -> Iterator[int]:
    """A TCP echo server on loopback; yields its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def handle(conn: socket.socket) -> None:
        with conn:
            try:
                while data := conn.recv(4096):
                    conn.sendall(data)
            except OSError:  # a reset_peer toxic ends the connection with a reset
                pass

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield int(server.getsockname()[1])
    stop.set()
    t.join(2)
    server.close()


@pytest.fixture
def toxiproxy(tmp_path: Path) -> Iterator[Toxiproxy]:
    api = Toxiproxy("127.0.0.1", _free_port(), log=tmp_path / "toxiproxy.log").start()
    yield api
    from epochlab.kafka.live.cluster import live_pid

    pid = api.proc.pid if api.proc else None
    api.stop()
    assert pid is not None and not live_pid(pid), "toxiproxy-server survived stop()"


def _round_trip_s(port: int, payload: bytes = b"epochlab") -> float:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
        t0 = time.monotonic()
        c.sendall(payload)
        got = b""
        while len(got) < len(payload):
            got += c.recv(4096)
        assert got == payload
        return time.monotonic() - t0


@needs_toxiproxy
def test_a_latency_toxic_delays_each_direction(toxiproxy: Toxiproxy, echo: int) -> None:
    """An echo through a 300 ms downstream latency takes at least 300 ms; 300 ms more upstream,
    at least 600 ms; the bytes arrive intact and in order."""
    port = _free_port()
    toxiproxy.create("echo", f"127.0.0.1:{port}", f"127.0.0.1:{echo}")
    toxiproxy.add_toxic("echo", "down", "latency", "downstream", {"latency": 300, "jitter": 0})
    assert _round_trip_s(port) >= 0.3
    toxiproxy.add_toxic("echo", "up", "latency", "upstream", {"latency": 300, "jitter": 0})
    assert _round_trip_s(port, bytes(range(256)) * 64) >= 0.6
    assert {t["name"] for t in toxiproxy.toxics("echo")} == {"down", "up"}
    toxiproxy.update_toxic("echo", "up", {"latency": 500, "jitter": 0})
    assert {t["name"]: t["attributes"]["latency"] for t in toxiproxy.toxics("echo")} == {"down": 300, "up": 500}
    assert toxiproxy.remove_toxic("echo", "up") and not toxiproxy.remove_toxic("echo", "up")
    assert [t["name"] for t in toxiproxy.toxics("echo")] == ["down"]


@needs_toxiproxy
def test_a_timeout_toxic_stalls_and_a_reset_peer_toxic_drops_the_connection(toxiproxy: Toxiproxy, echo: int) -> None:
    port = _free_port()
    toxiproxy.create("echo", f"127.0.0.1:{port}", f"127.0.0.1:{echo}")
    toxiproxy.add_toxic("echo", "stall", "timeout", "downstream", {"timeout": 0})  # holds data, never closes
    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
        c.sendall(b"x")
        c.settimeout(0.5)
        with pytest.raises(socket.timeout):
            c.recv(1)
    toxiproxy.remove_toxic("echo", "stall")
    toxiproxy.add_toxic("echo", "reset", "reset_peer", "upstream", {"timeout": 0})
    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
        c.settimeout(5)
        try:
            c.sendall(b"x")
            assert c.recv(1) == b""  # closed
        except ConnectionResetError:
            pass


@needs_toxiproxy
def test_a_bad_toxic_is_a_typed_error(toxiproxy: Toxiproxy) -> None:
    with pytest.raises(ConfigError, match="stream"):
        toxiproxy.add_toxic("none", "x", "latency", "sideways", {"latency": 1})
    with pytest.raises(ConfigError, match="HTTP 404"):
        toxiproxy.add_toxic("none", "x", "latency", "upstream", {"latency": 1})


# -- runnable, or refused up front -----------------------------------------------------------
def test_delayed_links_are_runnable_when_the_proxy_is_installed() -> None:
    from epochlab.kafka.runs.scenario import unmappable

    if proxy_missing() is not None:
        pytest.skip(f"this machine cannot run delayed links: {proxy_missing()}")
    for name in DELAYED:
        assert unmappable(load_builtin(name)) == [], name


def test_a_delayed_link_without_toxiproxy_is_refused_before_any_broker_starts(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the refusal names Toxiproxy only for root (without root the namespaces are missing first)")
    from epochlab.kafka.live.faults import firewall_available

    if firewall_available() is not None:
        pytest.skip(f"the refusal names nft first: {firewall_available()}")
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "epochlab", "kafka", "run", "kafka-2334-list-offsets-go-back",
                           "--compare", "--json", "--out", str(out)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "EPOCHLAB_TOXIPROXY_DIR": str(tmp_path / "no-toxiproxy")})
    assert done.returncode == 2, done.stderr[-2000:]
    payload = json.loads(done.stdout)
    assert payload["runnable"] is False
    assert any("Toxiproxy" in w and SETUP in w for w in payload["why"]), payload["why"]
    assert not out.with_name(out.name + ".cluster").exists()  # no broker was started


def test_a_cluster_without_proxied_listeners_cannot_delay_a_client(tmp_path: Path) -> None:
    from epochlab.kafka.live.cluster import LocalCluster
    from epochlab.kafka.runs.scenario import unmappable

    cluster = LocalCluster(tmp_path / "c", network="loopback")
    why = unmappable(load_builtin("seed-001-idempotence-across-failover"), cluster)
    assert any("2 proxied listener(s)" in w and "have 0" in w for w in why), why
    with pytest.raises(ConfigError, match="netns"):
        LinkProxies(cluster, clients={"p1": 1})


# -- one delayed-link scenario on a live cluster ----------------------------------------------
LIVE = "seed-002-minisr2-mid-replication-idempotent-retry"


def _live_skip() -> str | None:
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return "needs confluent-kafka (pip install confluent-kafka)"
    from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION, resolved

    if not resolved(DEFAULT_KAFKA_VERSION):
        return f"Kafka {DEFAULT_KAFKA_VERSION}'s jars are not resolved (epochlab kafka jars)"
    from epochlab.kafka.live.faults import firewall_available

    return firewall_available() or proxy_missing()


@pytest.mark.skipif(_live_skip() is not None, reason=str(_live_skip()))
def test_a_delayed_producer_link_on_real_kafka_agrees_with_the_model(tmp_path: Path) -> None:
    """seed 002's idempotent retry: the producer's link to leader 1 delayed 1 s each way
    through Toxiproxy, the leader crashes with m11's acknowledgement on its way, the retry is
    deduplicated by the new leader; the model agrees. Nothing is left running."""
    from epochlab.kafka.live.cluster import LocalCluster, live_pid
    from epochlab.kafka.runs.pipeline import execute
    from epochlab.kafka.runs.scenario import broker_overrides

    scenario = load_builtin(LIVE)
    cluster = LocalCluster(tmp_path / "cluster", brokers=3, grace_s=10, overrides=broker_overrides(scenario),
                           proxied_listeners=len(delayed_clients(scenario)))
    cluster.start()
    try:
        code, payload = execute(scenario, cluster, compare=True, out=tmp_path / "run")
        steps = (tmp_path / "run" / "steps.md").read_text()
        assert "proxied connection(s) delayed 1000 +- 0 ms each way" in steps
        assert payload["real"]["expectations_hold"], payload["real"]["checks"]
        assert payload["agree"], [d["text"] for d in payload["differences"]]
        assert code == 0
        assert f"el{cluster.tag}-px" not in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                                            text=True).stdout  # the proxy went with the run
    finally:
        pids = [p for p in cluster.pids().values() if p is not None]
        cluster.stop(grace_s=0)
    assert pids and not [p for p in pids if live_pid(p)], "a JVM survived the teardown"
    log = (tmp_path / "cluster" / "toxiproxy.log").read_text()
    assert "Accepted client" in log  # the producer's connections went through the proxy
