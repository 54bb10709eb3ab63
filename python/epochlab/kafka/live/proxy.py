"""Delayed links on a live cluster without netem: Toxiproxy between the nodes and the clients.

The kernel here has no ``sch_netem``, so a link delay is made in user space: every proxied
connection goes through `Toxiproxy <https://github.com/Shopify/toxiproxy>`_ (a Go TCP proxy,
installed by ``scripts/kafka-proxy-setup`` into ``~/.cache/epochlab/toxiproxy/``), whose
*toxics*, added and removed through its HTTP API, delay (``latency``), slow (``bandwidth``),
stall (``timeout``) or reset (``reset_peer``) one direction of a proxy's connections:
``upstream`` is what the connecting side sends, ``downstream`` what it receives.

Where the proxy sits. Toxiproxy runs in a namespace of its own, ``el<tag>-px``, on the
cluster's bridge at ``10.213.K.2`` (:data:`PROXY_OCTET`; its API on port
:data:`API_PORT`). One Toxiproxy *proxy* (a listening port) per directed connection
``(initiator, acceptor)``, which it connects on to the acceptor's real listener:

* a node that connects to another node (a follower fetching from its leader, a broker
  fetching metadata from the controller): an nft ``nat`` rule in the initiator's namespace
  DNATs new connections to ``(acceptor address, acceptor port)`` to the proxy port of that
  pair (:func:`node_link_port`). Established connections are not DNATed, so
  :meth:`LinkProxies.start` aborts the initiator's connections to the acceptor (``ss -K``)
  once the rule is in: Kafka reconnects, through the proxy.
* a client (every client runs in the harness's namespace, one address, so a NAT rule could
  not tell them apart): the brokers get one extra listener per proxied client,
  ``PROXIED<i>`` on port ``9100 + i`` (:func:`client_listeners`), advertised at the proxy's
  address and port :func:`client_proxy_port`, so a client bootstrapped there reaches every
  broker through the proxy (Kafka answers a metadata request with the endpoints of the
  listener it came in on), while the harness's own Admin and the other clients keep the
  direct ``PLAINTEXT`` listener. The cluster must be started with those listeners
  (``LocalCluster(proxied_listeners=N)``).

Cuts. :class:`~epochlab.kafka.live.faults.Faults` cuts by address pair in the nodes'
namespaces; a proxied connection carries the proxy's address on one side, so those rules miss
it, and :meth:`LinkProxies.apply_cuts` enforces the same cuts in the proxy's namespace, by
proxy port: a cut ``initiator -> acceptor`` drops what the initiator sends to that port, a cut
``acceptor -> initiator`` what the proxy sends back to the initiator from it. Packets are
dropped, never refused: TCP retransmits after the heal, as across a direct cut.

>>> proxies = LinkProxies(cluster, node_links={(3, 1), (3, 2)}, clients={"p1": 1})  # doctest: +SKIP
>>> proxies.start(); proxies.set_latency((3, 1), "upstream", 2000)                    # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from epochlab.errors import ConfigError

__all__ = ["API_PORT", "PROXY_OCTET", "SETUP", "TOXIPROXY_VERSION", "LinkProxies", "Toxiproxy",
           "client_listeners", "client_proxy_port", "latency_of", "node_link_port", "proxy_missing",
           "toxiproxy_binary"]

#: The release ``scripts/kafka-proxy-setup`` installs.
TOXIPROXY_VERSION = "2.12.0"
#: The script that installs it (named in every refusal).
SETUP = "scripts/kafka-proxy-setup"
#: The proxy namespace's address on the cluster's bridge: ``10.213.K.<PROXY_OCTET>``.
PROXY_OCTET = 2
#: Toxiproxy's HTTP API port (its default).
API_PORT = 8474
#: A broker's ``PROXIED<i>`` listener binds ``<its address>:<_LISTENER_BASE + i>``.
_LISTENER_BASE = 9100

#: The harness's endpoint in cuts: ``epochlab.kafka.live.cluster.CLIENT`` (the cluster module
#: imports this one for its listeners, so the name is repeated here; a test checks they agree).
CLIENT = "client"

Link = tuple[Any, Any]  # (initiator, acceptor): node ids, or a client name as initiator


def toxiproxy_binary() -> Path:
    """Where ``scripts/kafka-proxy-setup`` puts ``toxiproxy-server``
    (``$EPOCHLAB_TOXIPROXY_DIR``, default ``~/.cache/epochlab/toxiproxy``, then ``bin/``)."""
    base = os.environ.get("EPOCHLAB_TOXIPROXY_DIR") or str(Path.home() / ".cache" / "epochlab" / "toxiproxy")
    return Path(base) / "bin" / "toxiproxy-server"


def proxy_missing() -> str | None:
    """``None`` when delayed links can run here, else what is missing and how to install it."""
    if os.geteuid() != 0:
        return "link delays need root (a proxy namespace and nft NAT rules)"
    if shutil.which("nft") is None or shutil.which("ip") is None:
        return "link delays need nft and ip: run scripts/kafka-net-setup"
    if not os.access(toxiproxy_binary(), os.X_OK):
        return (f"link delays need Toxiproxy (the kernel has no netem), not found at {toxiproxy_binary()}: "
                f"run {SETUP}")
    return None


def latency_of(delay_ms: Iterable[int]) -> tuple[int, int]:
    """A model delay range ``[lo, hi]`` (each message uniform in it, ``sim/network.py``) as
    Toxiproxy's ``(latency, jitter)``: each chunk is delayed ``latency + U[-jitter, jitter)``
    ms (``toxics/latency.go``, ``LatencyToxic.delay``), so ``latency = (lo + hi) // 2``,
    ``jitter = (hi - lo) // 2`` (an odd ``hi - lo`` loses 1 ms of range)."""
    lo, hi = (int(x) for x in delay_ms)
    return (lo + hi) // 2, (hi - lo) // 2


def client_proxy_port(listener: int, broker: int) -> int:
    """The proxy port that stands for broker ``broker`` to the client of listener ``listener``."""
    return 20000 + 100 * listener + broker


def node_link_port(initiator: int, acceptor: int) -> int:
    """The proxy port of the connections node ``initiator`` opens to node ``acceptor``."""
    return 30000 + 200 * initiator + acceptor


def _proxy_host(node_host: str) -> str:
    return f"{node_host.rsplit('.', 1)[0]}.{PROXY_OCTET}"


def client_listeners(broker: int, host: str, count: int) -> dict[str, str]:
    """The ``server.properties`` additions of broker ``broker`` (address ``host``) for
    ``count`` proxied clients: listener ``PROXIED<i>`` bound to ``host:9100+i``, advertised at
    the proxy (:func:`client_proxy_port`), plaintext."""
    names = [f"PROXIED{i}" for i in range(1, count + 1)]
    proxy = _proxy_host(host)
    return {
        "listeners": ",".join(f"{n}://{host}:{_LISTENER_BASE + i}" for i, n in enumerate(names, 1)),
        "advertised.listeners": ",".join(f"{n}://{proxy}:{client_proxy_port(i, broker)}"
                                         for i, n in enumerate(names, 1)),
        "listener.security.protocol.map": ",".join(f"{n}:PLAINTEXT" for n in names),
    }


class Toxiproxy:
    """One ``toxiproxy-server`` process (in namespace ``netns``, or here) and its HTTP API at
    ``host:port``. :meth:`start` waits until the API answers; :meth:`stop` kills it."""

    def __init__(self, host: str = "127.0.0.1", port: int = API_PORT, netns: str | None = None,
                 log: Path | None = None) -> None:
        self.host, self.port, self.netns, self.log = host, port, netns, log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 10.0) -> Toxiproxy:
        reason = proxy_missing() if self.netns else (
            None if os.access(toxiproxy_binary(), os.X_OK) else f"Toxiproxy not found: run {SETUP}")
        if reason:
            raise ConfigError(reason, where="toxiproxy", field="proxy", expected=str(toxiproxy_binary()), got=None)
        from epochlab.kafka.live.netns import enter

        setpriv = shutil.which("setpriv")
        # dies with this process (PR_SET_PDEATHSIG), like the cluster's JVMs
        cmd = ([setpriv, "--pdeathsig", "KILL"] if setpriv else []) + (enter(self.netns) if self.netns else []) + [
            str(toxiproxy_binary()), "-host", self.host, "-port", str(self.port)]
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        finally:
            if self.log:
                out.close()  # type: ignore[union-attr]
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._call("GET", "/version")
                return self
            except ConfigError:
                if self.proc.poll() is not None or time.monotonic() >= deadline:
                    self.stop()
                    raise ConfigError(f"toxiproxy-server did not answer at {self.url} within {timeout_s:.0f} s",
                                      where="toxiproxy", field="start", expected="its API", got=self.url) from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self.proc = None

    def __enter__(self) -> Toxiproxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                text = resp.read().decode()
        except urllib.error.HTTPError as exc:
            raise ConfigError(f"toxiproxy {method} {path}: HTTP {exc.code} {exc.read().decode(errors='replace')}",
                              where="toxiproxy", field=path, expected="2xx", got=exc.code) from exc
        except OSError as exc:
            raise ConfigError(f"toxiproxy {method} {path}: {exc}", where="toxiproxy", field=path,
                              expected="an answer", got=str(exc)) from exc
        return json.loads(text) if text.strip() else None

    def create(self, name: str, listen: str, upstream: str) -> None:
        """A proxy ``name`` listening at ``listen`` (host:port) that connects on to ``upstream``."""
        self._call("POST", "/proxies", {"name": name, "listen": listen, "upstream": upstream, "enabled": True})

    def add_toxic(self, proxy: str, name: str, kind: str, stream: str, attributes: Mapping[str, Any]) -> None:
        """Toxic ``name`` of type ``kind`` (``latency``, ``bandwidth``, ``timeout``,
        ``reset_peer``, ``slicer``...) on ``stream`` (``upstream``: what the connecting side
        sends; ``downstream``: what it receives), on every connection of ``proxy``, present
        and future."""
        if stream not in ("upstream", "downstream"):
            raise ConfigError(f"toxic stream: expected upstream or downstream, got {stream!r}", where="toxiproxy",
                              field="stream", expected="upstream|downstream", got=stream)
        self._call("POST", f"/proxies/{proxy}/toxics", {"name": name, "type": kind, "stream": stream,
                                                        "toxicity": 1.0, "attributes": dict(attributes)})

    def update_toxic(self, proxy: str, name: str, attributes: Mapping[str, Any]) -> None:
        """Change the attributes of ``proxy``'s toxic ``name`` in place (one request; the
        chunks it holds keep the delay they were given)."""
        self._call("POST", f"/proxies/{proxy}/toxics/{name}", {"attributes": dict(attributes)})

    def remove_toxic(self, proxy: str, name: str) -> bool:
        """Remove toxic ``name`` of ``proxy``; False when it had none of that name."""
        try:
            self._call("DELETE", f"/proxies/{proxy}/toxics/{name}")
        except ConfigError as exc:
            if "HTTP 404" in str(exc):
                return False
            raise
        return True

    def toxics(self, proxy: str) -> list[dict[str, Any]]:
        return list(self._call("GET", f"/proxies/{proxy}/toxics"))


_NAT = "epochlab_proxy"
_CUTS = "epochlab_proxy_cuts"


class LinkProxies:
    """The proxied links of one run on ``cluster`` (netns network): ``node_links``, the
    directed node connections ``(initiator, acceptor)`` to proxy, and ``clients``, client
    name -> its ``PROXIED<i>`` listener index (``1..cluster.proxied_listeners``). A client's
    links are ``(name, broker)`` for every broker.

    :meth:`start` creates the namespace, starts Toxiproxy, creates the proxies, the DNAT
    rules, and aborts the initiators' established connections; :meth:`stop` undoes all of
    it (the namespace deleted, the rules removed, the initiators' proxied connections aborted
    so they reconnect directly). Latencies are set per directed link and stream
    (:meth:`set_latency`); several reasons for latency on one stream (a ``set_link`` delay and
    a slow follower) are separate toxics whose delays add up."""

    def __init__(self, cluster: Any, node_links: Iterable[Link] = (), clients: Mapping[str, int] | None = None) -> None:
        if cluster.network != "netns" or not cluster.tag or cluster.subnet is None or cluster.bridge is None:
            raise ConfigError("delayed links need the cluster's netns network (root)", where="network",
                              field="network", expected="netns", got=cluster.network)
        self.cluster = cluster
        self.clients = dict(clients or {})
        bad = {n: i for n, i in self.clients.items() if not 1 <= i <= cluster.proxied_listeners}
        if bad:
            raise ConfigError(f"clients {sorted(bad)} need proxied listeners the cluster lacks (it has "
                              f"{cluster.proxied_listeners}); start a cluster for the scenario", where="proxy",
                              field="proxied_listeners", expected=len(self.clients), got=cluster.proxied_listeners)
        self.node_links = sorted(set(node_links))
        for s, r in self.node_links:
            if s not in cluster.nodes or r not in cluster.nodes or s == r:
                raise ConfigError(f"proxied link {s} -> {r}: expected two different node ids of {sorted(cluster.nodes)}",
                                  where="proxy", field="link", expected=sorted(cluster.nodes), got=(s, r))
        self.netns = f"el{cluster.tag}-px"
        self.veth = f"elv{cluster.tag}-px"
        self.host = f"{cluster.subnet}.{PROXY_OCTET}"
        self.api = Toxiproxy(self.host, API_PORT, self.netns, Path(cluster.dir) / "toxiproxy.log")
        self.latency: dict[tuple[Link, str, str], int] = {}  # (link, stream, reason) -> latency in force
        self.started = False

    # -- the links --------------------------------------------------------------------------
    def links(self) -> dict[Link, int]:
        """Every proxied directed link -> its proxy port."""
        out = {(s, r): node_link_port(s, r) for s, r in self.node_links}
        for name, i in self.clients.items():
            out.update({(name, b): client_proxy_port(i, b) for b in self.cluster.broker_ids})
        return out

    @staticmethod
    def proxy_name(link: Link) -> str:
        return f"{link[0]}-to-{link[1]}"

    def _upstream(self, link: Link) -> str:
        s, r = link
        node = self.cluster.nodes[r]
        if s in self.clients:
            return f"{node.host}:{_LISTENER_BASE + self.clients[s]}"
        return node.address

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> LinkProxies:
        from epochlab.kafka.live import netns

        reason = proxy_missing()
        if reason:
            raise ConfigError(reason, where="proxy", field="toxiproxy", expected=str(toxiproxy_binary()), got=None)
        self.stop()  # a namespace left by an interrupted run of the same cluster
        self.started = True
        try:
            netns.ip("netns", "add", self.netns)
            netns.ip("link", "add", self.veth, "type", "veth", "peer", "name", "eth0", "netns", self.netns)
            netns.ip("link", "set", self.veth, "master", self.cluster.bridge, "up")
            netns.ip("-n", self.netns, "link", "set", "lo", "up")
            netns.ip("-n", self.netns, "addr", "add", f"{self.host}/24", "dev", "eth0")
            netns.ip("-n", self.netns, "link", "set", "eth0", "up")
            self.api.start()
            for link, port in self.links().items():
                self.api.create(self.proxy_name(link), f"{self.host}:{port}", self._upstream(link))
            self._install_nat()
            self.apply_cuts(set())
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop Toxiproxy, delete the namespace, remove the DNAT rules and abort the
        connections that went through the proxy (they reconnect directly). Safe to call twice."""
        self.api.stop()
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True, check=False)
        for s in sorted(self.cluster.nodes):  # every node: a run that died may have left rules
            n = self.cluster.nodes[s]
            if n.netns:
                subprocess.run(["ip", "netns", "exec", n.netns, "nft", "delete", "table", "ip", _NAT],
                               capture_output=True, check=False)
                self._abort(s, f"dst {self.host}")
        self.latency.clear()
        self.started = False

    def _install_nat(self) -> None:
        by_initiator: dict[int, list[str]] = {}
        for (s, r), port in self.links().items():
            if s in self.clients:
                continue
            node = self.cluster.nodes[r]
            by_initiator.setdefault(s, []).append(
                f"ip daddr {node.host} tcp dport {node.port} dnat to {self.host}:{port}")
        for s, rules in by_initiator.items():
            script = (f"table ip {_NAT} {{\n chain output {{ type nat hook output priority -100; policy accept;\n"
                      + "".join(f"  {r}\n" for r in rules) + " }\n}\n")
            self._nft(self.cluster.nodes[s].netns, script)
            # established connections keep their (un-NATed) path: end them, Kafka reconnects
            for _, r in [lk for lk in self.node_links if lk[0] == s]:
                node = self.cluster.nodes[r]
                self._abort(s, f"dst {node.host} dport = {node.port}")

    def _abort(self, node_id: int, filter_: str) -> None:
        netns = self.cluster.nodes[node_id].netns
        subprocess.run(["ip", "netns", "exec", str(netns), "ss", "-K", "-t", *filter_.split()],
                       capture_output=True, check=False)

    @staticmethod
    def _nft(netns: str | None, script: str) -> None:
        done = subprocess.run(["ip", "netns", "exec", str(netns), "nft", "-f", "-"], input=script,
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise ConfigError(f"nft in {netns} failed: {done.stderr.strip()}", where="nft", field="proxy",
                              expected="exit 0", got=done.returncode)

    # -- faults -----------------------------------------------------------------------------
    def apply_cuts(self, cuts: set[tuple[Any, Any]]) -> None:
        """Enforce ``cuts`` (one-way endpoint pairs, :class:`~epochlab.kafka.live.faults.Faults`'
        vocabulary: node ids and ``"client"``) on the proxied links, in the proxy's namespace."""
        if not self.started:
            return
        ins, outs = [], []
        for (s, r), port in sorted(self.links().items(), key=str):
            end = CLIENT if s in self.clients else s
            addr = self.cluster.host_of(end)
            if (end, r) in cuts:   # what the initiator sends does not reach the proxy
                ins.append(f"  ip saddr {addr} tcp dport {port} drop\n")
            if (r, end) in cuts:   # what the acceptor answers does not leave the proxy
                outs.append(f"  ip daddr {addr} tcp sport {port} drop\n")
        script = (f"table inet {_CUTS}\ndelete table inet {_CUTS}\ntable inet {_CUTS} {{\n"
                  f" chain input {{ type filter hook input priority 0; policy accept;\n{''.join(ins)} }}\n"
                  f" chain output {{ type filter hook output priority 0; policy accept;\n{''.join(outs)} }}\n}}\n")
        self._nft(self.netns, script)

    def set_latency(self, link: Link, stream: str, latency_ms: int, jitter_ms: int = 0, reason: str = "link") -> None:
        """Delay ``stream`` of ``link``'s connections by ``latency_ms`` +- ``jitter_ms`` for
        ``reason`` (one toxic per reason; 0 and 0 removes it)."""
        if link not in self.links():
            raise ConfigError(f"no proxied link {link[0]} -> {link[1]} (proxied: {sorted(self.links(), key=str)})",
                              where="proxy", field="link", expected="a proxied link", got=link)
        name, toxic, key = self.proxy_name(link), f"{reason}-{stream}", (link, stream, reason)
        # one API request per change (a step's latency is in force tens of ms sooner)
        if latency_ms > 0 or jitter_ms > 0:
            attributes = {"latency": int(latency_ms), "jitter": int(jitter_ms)}
            if key in self.latency:
                self.api.update_toxic(name, toxic, attributes)
            else:
                self.api.add_toxic(name, toxic, "latency", stream, attributes)
            self.latency[key] = int(latency_ms)
        elif key in self.latency:
            self.api.remove_toxic(name, toxic)
            del self.latency[key]
