"""The network namespaces of a live cluster (``LocalCluster(network="netns")``, root only).

Each node runs in its own namespace ``el<tag>-<id>``, joined by a veth pair (its bridge end
``elv<tag>-<id>``, its own end ``eth0``) to a bridge ``elbr-<tag>`` in the harness's namespace,
with its own address ``10.213.K.<id + 10>``; the harness reaches the nodes through the bridge
from ``10.213.K.1``. A connection between two nodes then carries the sender's own address, so a
firewall rule can cut a chosen pair (:mod:`epochlab.kafka.live.faults`).

:func:`create` builds the bridge and the namespaces, :func:`remove` deletes what a cluster's
state names, :func:`enter` is the command prefix that runs a program inside a node's namespace.
Everything goes through iproute2's ``ip`` and util-linux's ``nsenter``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable
from typing import Any, Protocol

from epochlab.errors import ConfigError

__all__ = ["NSENTER", "SUBNET_PREFIX", "available", "create", "enter", "free_subnet", "ip", "remove"]

SUBNET_PREFIX = "10.213"
NSENTER = "nsenter"  # util-linux, like setpriv


class _Endpoint(Protocol):
    """A node as the network sees it (``epochlab.kafka.live.cluster.Node``)."""

    host: str
    netns: str | None
    veth: str | None


def available() -> bool:
    """Whether this process may create network namespaces (root, and ``ip`` on PATH)."""
    return os.geteuid() == 0 and shutil.which("ip") is not None and shutil.which(NSENTER) is not None


def ip(*args: str) -> None:
    """Run ``ip ARGS``; :class:`ConfigError` with its stderr when it fails."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ConfigError(f"`ip {' '.join(args)}` failed: {done.stderr.strip()}", where="ip",
                          field="network", expected="exit 0", got=done.returncode)


def free_subnet() -> str:
    """``10.213.K`` for a K no interface of this machine uses yet."""
    used = subprocess.run(["ip", "-o", "-4", "addr"], capture_output=True, text=True, check=False).stdout
    for k in range(1 + os.getpid() % 200, 255):
        if f" {SUBNET_PREFIX}.{k}." not in used:
            return f"{SUBNET_PREFIX}.{k}"
    raise ConfigError(f"no free subnet {SUBNET_PREFIX}.K.0/24 left", where="network", field="subnet",
                      expected="a free /24", got=None)


def create(bridge: str, client_host: str, nodes: Iterable[_Endpoint]) -> None:
    """The bridge ``bridge`` with the harness's address ``client_host`` (/24), and for each node
    its namespace, its veth pair to the bridge and its address, every link up."""
    ip("link", "add", bridge, "type", "bridge")
    ip("addr", "add", f"{client_host}/24", "dev", bridge)
    ip("link", "set", bridge, "up")
    for n in nodes:
        assert n.netns is not None and n.veth is not None
        ip("netns", "add", n.netns)
        ip("link", "add", n.veth, "type", "veth", "peer", "name", "eth0", "netns", n.netns)
        ip("link", "set", n.veth, "master", bridge, "up")
        ip("-n", n.netns, "link", "set", "lo", "up")
        ip("-n", n.netns, "addr", "add", f"{n.host}/24", "dev", "eth0")
        ip("-n", n.netns, "link", "set", "eth0", "up")


def remove(state: dict[str, Any]) -> None:
    """Delete the namespaces (with their veths and firewall tables) and the bridge a
    cluster state names; missing ones are fine."""
    for n in state.get("nodes", []):
        if n.get("netns"):
            subprocess.run(["ip", "netns", "del", n["netns"]], capture_output=True, check=False)
    if state.get("tag"):  # the link proxy's namespace (epochlab.kafka.live.proxy), if a run left one
        subprocess.run(["ip", "netns", "del", f"el{state['tag']}-px"], capture_output=True, check=False)
    if state.get("bridge"):
        subprocess.run(["ip", "link", "del", state["bridge"]], capture_output=True, check=False)


def enter(netns: str) -> list[str]:
    """The command prefix that runs a program in namespace ``netns``: nsenter joins its network
    namespace and execs the program, nothing else (``ip netns exec`` also makes a mount
    namespace and remounts /sys, which no broker needs)."""
    return [NSENTER, f"--net=/run/netns/{netns}", "--"]
