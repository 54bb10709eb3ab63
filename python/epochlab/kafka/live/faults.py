"""Faults on the real processes and links of a :class:`~epochlab.kafka.live.cluster.LocalCluster`.

Processes (any network mode):

* :meth:`Faults.kill` - SIGKILL: a crash; the page cache survives, so nothing written is lost
  (a power cut is :meth:`LocalCluster.power_loss` after it, for a broker whose log directory is
  on the lossy filesystem: :mod:`epochlab.kafka.live.lossyfs`).
* :meth:`Faults.drop_sockets` - abort the TCP sockets a killed node's kernel still holds (a
  machine crash rather than a process crash: nothing it wrote arrives after a heal).
* :meth:`Faults.restart` - start a killed or shut-down node again, same data, same command line.
* :meth:`Faults.pause` / :meth:`Faults.resume` - SIGSTOP / SIGCONT: a slow follower, or a
  zombie leader that wakes up after it was replaced.
* :meth:`Faults.shutdown` - SIGTERM and wait: Kafka's controlled shutdown (leadership moved off
  first).

Links (``network="netns"`` only): endpoints are node ids and :data:`CLIENT` (the harness's
side, where its confluent-kafka clients run). :meth:`Faults.cut` drops the packets from one
endpoint to another (both ways by default); :meth:`Faults.partition` cuts every pair of
endpoints that sit in different groups, leaving endpoints in no group connected to all;
:meth:`Faults.heal` removes every cut. The rules are nftables sets in a table ``inet epochlab``
inside each node's own namespace (``drop_to``: addresses it may not send to; ``drop_from``:
addresses it may not receive from), so the harness's namespace and the rest of the machine are
never touched, and deleting the namespaces at :meth:`LocalCluster.stop` removes them with
everything else. ``nft`` comes from the Debian package ``nftables``
(``scripts/kafka-net-setup``); the kernel side is built in.

Seed 002's split brain, a leader cut off from the controller (and the other brokers) while the
producer still reaches it::

    faults.partition([[leader], [*cluster.controller_ids, *others]])   # CLIENT in no group

>>> faults = Faults(cluster)                # doctest: +SKIP
>>> faults.kill(2); faults.restart(2)       # doctest: +SKIP
"""

from __future__ import annotations

import itertools
import os
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence

from epochlab.errors import ConfigError
from epochlab.kafka.live.cluster import CLIENT, LocalCluster
from epochlab.kafka.live.proxy import LinkProxies

__all__ = ["CLIENT", "Faults", "firewall_available"]

Endpoint = int | str


def _exit_watch(pid: int) -> int | None:
    """A pidfd of ``pid``, readable once the process has exited (``None`` where the kernel or
    Python has none, or the process is gone already)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None

_TABLE = """table inet epochlab {
  set drop_to { type ipv4_addr; }
  set drop_from { type ipv4_addr; }
  chain output { type filter hook output priority 0; policy accept; ip daddr @drop_to drop; }
  chain input { type filter hook input priority 0; policy accept; ip saddr @drop_from drop; }
}
"""


def firewall_available() -> str | None:
    """``None`` when link faults can run here, else the reason they cannot."""
    import os

    if os.geteuid() != 0:
        return "network partitions need root (network namespaces and nftables)"
    if shutil.which("ip") is None:
        return "network partitions need iproute2 (ip)"
    if shutil.which("nft") is None:
        return "network partitions need nft: run scripts/kafka-net-setup (apt-get install nftables)"
    return None


class Faults:
    """Fault injection on ``cluster``; keeps the set of cut links (one-way pairs)."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.cuts: set[tuple[Endpoint, Endpoint]] = set()
        self._tables: set[int] = set()
        #: the run's proxied links (:class:`epochlab.kafka.live.proxy.LinkProxies`): their
        #: connections carry the proxy's address, so the cuts are enforced there too
        self.proxies: LinkProxies | None = None
        #: ``time.monotonic()`` at which each node's rules last took effect (:meth:`_apply`,
        #: which rewrites them one namespace after another, tens of milliseconds each: the
        #: links of one partition are cut node by node), or at which a killed node's JVM
        #: exited (:meth:`kill`); the caller empties it when it wants the times of one change
        self.applied: dict[int, float] = {}

    # -- processes --------------------------------------------------------------------------
    def kill(self, node_id: int) -> int:
        """SIGKILL ``node_id``'s JVM and reap it; returns the pid it had. When the JVM's exit
        can be watched (a pidfd, Linux 5.3+), the moment it exited is kept in
        :attr:`applied`: the signal stops the JVM's threads at once, but the kernel closes a
        process's sockets only as it exits (``do_exit``: ``exit_files`` comes just before the
        exit is signalled), so that is when its peers see their connections close. Here that
        took 1-75 ms after the step began, median 38 ms, over 90 crashes (kafka fuzz seeds 10
        and 11; :func:`~epochlab.kafka.runs.fuzz.at_real_times` gives the model the broker cut off
        from the signal and crashed at the exit)."""
        pid = self._running_pid(node_id, "kill")
        watch = _exit_watch(pid)
        try:
            self.cluster.signal_nodes([node_id], signal.SIGKILL)
            if watch is not None and select.select([watch], [], [], 10)[0]:
                self.applied[node_id] = time.monotonic()
        finally:
            if watch is not None:
                os.close(watch)
        self.cluster.wait_exit([node_id], 10)
        return pid

    def drop_sockets(self, node_id: int) -> None:
        """Abort every TCP socket in the node's namespace (``ss -K``), e.g. after :meth:`kill`:
        a SIGKILLed JVM's kernel keeps retransmitting what the JVM had written, so across a
        cut the peers would receive it after the heal; a crashed machine sends nothing more.
        Needs the netns network; a no-op on loopback."""
        netns = self.cluster.nodes[node_id].netns
        if netns is None:
            return
        done = subprocess.run(["ip", "netns", "exec", netns, "ss", "-K", "-t", "state", "all"],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise ConfigError(f"ss -K in {netns} failed: {done.stderr.strip()}", where="drop_sockets",
                              field="network", expected="exit 0", got=done.returncode)

    def restart(self, node_id: int) -> int:
        """Start ``node_id`` again after :meth:`kill` or :meth:`shutdown`; returns the new pid."""
        self.cluster.restart_node(node_id)
        pid = self.cluster.nodes[node_id].pid
        assert pid is not None
        return pid

    def pause(self, node_id: int) -> None:
        """SIGSTOP: the JVM stops answering, its sockets stay open."""
        self._running_pid(node_id, "pause")
        self.cluster.signal_nodes([node_id], signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        """SIGCONT after :meth:`pause`."""
        self._running_pid(node_id, "resume")
        self.cluster.signal_nodes([node_id], signal.SIGCONT)
        self.cluster.nodes[node_id].paused = False

    def shutdown(self, node_id: int, timeout_s: float = 30.0) -> float:
        """SIGTERM (Kafka's controlled shutdown) and wait for the JVM to exit; returns the
        seconds it took. Raises :class:`ConfigError` if it is still running after
        ``timeout_s`` (it is then left running)."""
        self._running_pid(node_id, "shutdown")
        t0 = time.monotonic()
        self.cluster.signal_nodes([node_id], signal.SIGTERM)
        if self.cluster.wait_exit([node_id], timeout_s):
            raise ConfigError(f"node {node_id} still running {timeout_s:.0f} s after SIGTERM",
                              where="shutdown", field="node", expected="exited", got=node_id)
        return time.monotonic() - t0

    def _running_pid(self, node_id: int, what: str) -> int:
        if node_id not in self.cluster.nodes:
            raise ConfigError(f"{what}: no node {node_id} (nodes: {sorted(self.cluster.nodes)})",
                              where=what, field="node", expected=sorted(self.cluster.nodes), got=node_id)
        if not self.cluster.is_running(node_id):
            raise ConfigError(f"{what}: node {node_id} is not running", where=what, field="node",
                              expected="a running node", got=node_id)
        pid = self.cluster.nodes[node_id].pid
        assert pid is not None
        return pid

    # -- links ------------------------------------------------------------------------------
    def cut(self, a: Endpoint, b: Endpoint, *, both_ways: bool = True) -> None:
        """Drop every packet from ``a`` to ``b`` (and from ``b`` to ``a`` unless
        ``both_ways=False``; a one-way cut still breaks TCP both ways, but a node that only
        listens keeps receiving SYNs it cannot answer)."""
        self._check(a)
        self._check(b)
        if a == b:
            raise ConfigError(f"cut: an endpoint cannot be cut from itself ({a})", where="cut",
                              field="endpoint", expected="two endpoints", got=a)
        self.cuts.add((a, b))
        if both_ways:
            self.cuts.add((b, a))
        self._apply()

    def partition(self, groups: Sequence[Iterable[Endpoint]]) -> None:
        """Cut every endpoint from the endpoints of the other groups (added to earlier cuts).
        An endpoint in no group stays connected to everyone."""
        sets = [list(g) for g in groups]
        seen: set[Endpoint] = set()
        for g in sets:
            for e in g:
                self._check(e)
                if e in seen:
                    raise ConfigError(f"partition: endpoint {e} is in two groups", where="partition",
                                      field="groups", expected="disjoint groups", got=e)
                seen.add(e)
        for g1, g2 in itertools.permutations(sets, 2):
            self.cuts.update((a, b) for a in g1 for b in g2)
        self._apply()

    def heal(self) -> None:
        """Remove every cut."""
        self.cuts.clear()
        self._apply()

    def set_cuts(self, cuts: Iterable[tuple[Endpoint, Endpoint]]) -> None:
        """Replace every cut by ``cuts`` (one-way pairs), e.g. a scenario's partition plus its
        dropped links, which it changes independently."""
        pairs = set(cuts)
        for a, b in pairs:
            self._check(a)
            self._check(b)
        self.cuts = pairs
        self._apply()

    def _check(self, e: Endpoint) -> None:
        if self.cluster.network != "netns":
            raise ConfigError("network partitions need the cluster's netns network (root)",
                              where="network", field="network", expected="netns", got=self.cluster.network)
        reason = firewall_available()
        if reason:
            raise ConfigError(reason, where="nft", field="network", expected="nft", got=None)
        if e != CLIENT and e not in self.cluster.nodes:
            raise ConfigError(f"no endpoint {e!r}: node ids {sorted(self.cluster.nodes)} or {CLIENT!r}",
                              where="faults", field="endpoint", expected=sorted(self.cluster.nodes), got=e)

    def rules(self) -> dict[int, tuple[list[str], list[str]]]:
        """node id -> (addresses it may not send to, addresses it may not receive from),
        from :attr:`cuts`: a cut ``a -> b`` is enforced in ``a``'s namespace (``drop_to``), or,
        when ``a`` is the client, in ``b``'s (``drop_from``)."""
        out: dict[int, tuple[list[str], list[str]]] = {i: ([], []) for i in self.cluster.nodes}
        for a, b in sorted(self.cuts, key=str):
            if a == CLIENT:
                out[int(b)][1].append(self.cluster.host_of(a))
            else:
                out[int(a)][0].append(self.cluster.host_of(b))
        return out

    def _apply(self) -> None:
        """Rewrite the two sets in every node's namespace to match :attr:`cuts`."""
        for node_id, (to, from_) in self.rules().items():
            if node_id not in self._tables and not (to or from_):
                continue
            script = "" if node_id in self._tables else _TABLE
            script += "flush set inet epochlab drop_to\nflush set inet epochlab drop_from\n"
            if to:
                script += f"add element inet epochlab drop_to {{ {', '.join(to)} }}\n"
            if from_:
                script += f"add element inet epochlab drop_from {{ {', '.join(from_)} }}\n"
            netns = self.cluster.nodes[node_id].netns
            done = subprocess.run(["ip", "netns", "exec", str(netns), "nft", "-f", "-"], input=script,
                                  capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise ConfigError(f"nft in {netns} failed: {done.stderr.strip()}", where="nft",
                                  field="network", expected="exit 0", got=done.returncode)
            self.applied[node_id] = time.monotonic()
            self._tables.add(node_id)
        if self.proxies is not None:
            self.proxies.apply_cuts(self.cuts)
