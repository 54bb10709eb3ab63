"""The simulated network: per-link delay, loss, duplication, partitions, dead endpoints.

Nodes are broker ids (``int``), ``"controller"`` and client names (``str``). Every message gets
an independent delay drawn uniformly from its link's ``(min, max)`` range. Messages on
different links overtake each other freely; on one directed link they arrive in send order
between the same incarnations of the two nodes (Kafka talks over one TCP connection per peer;
a restart opens new connections) unless the link was configured with
``reorder=True``, which lets random delays reorder them. A message is delivered only if, at delivery time, the two nodes are
on the same side of the current partition and the destination is alive in the same
incarnation as when the message was sent (a restarted process has new connections; late
replies to the old one are lost). Requests from a node that crashed after sending are still
delivered: bytes already on the wire arrive (zombie requests, ``PROTOCOL.md`` 4.1).

The controller channel (every link with ``"controller"`` at one end) is one ordered, reliable
connection in every Kafka version: ZooKeeper-era controllers queue requests per broker
(``ControllerChannelManager``), KRaft brokers read the metadata log in order and send
AlterPartition one at a time over one connection (``NodeToControllerChannelManager``,
``AlterPartitionManager``). Its messages can be delayed or lost (a broken connection, resent
by the sender's own retries) but never reordered or duplicated, so ``reorder`` and
``duplicate`` do not apply there (:meth:`Network.set_link` says so in its return value).

Partitions: ``partition([[1, "p"], [2, 3, "controller"]])`` puts each listed group on its own
side; every node not listed forms one further group together, except the transaction
coordinator (node ``"coordinator"``), which stays on the controller's side unless listed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from epochlab.sim.kernel import Kernel

__all__ = ["LinkConfig", "Network", "Node"]

Node = int | str


def _key(node: Node) -> str:
    return f"b{node}" if isinstance(node, int) else f"n{node}"


@dataclass(frozen=True)
class LinkConfig:
    """One link's behaviour, the same in both directions: ``delay_ms`` is ``(min, max)``
    inclusive; ``drop`` and ``duplicate`` are probabilities in ``[0, 1]``."""

    delay_ms: tuple[int, int]
    drop: float = 0.0
    duplicate: float = 0.0
    reorder: bool = False


class Network:
    """Routes messages between nodes through the kernel's event queue."""

    def __init__(self, kernel: Kernel, default_delay_ms: tuple[int, int],
                 controller_delay_ms: tuple[int, int]) -> None:
        self._kernel = kernel
        self._rng = kernel.rng("network")
        self._default = LinkConfig(default_delay_ms)
        self._controller = LinkConfig(controller_delay_ms)
        self._links: dict[tuple[str, str], LinkConfig] = {}
        self._groups: dict[str, int] | None = None
        self._alive: dict[str, bool] = {}
        self._incarnation: dict[str, int] = {}
        self._slow: dict[str, int] = {}
        self._last_arrival: dict[tuple[str, str], int] = {}
        self.sent = 0
        self.delivered = 0
        self.dropped = 0

    # -- node lifecycle ---------------------------------------------------------------------
    def set_alive(self, node: Node, alive: bool) -> None:
        """Mark a node up or down; going up starts a new incarnation."""
        key = _key(node)
        if alive and not self._alive.get(key, False):
            self._incarnation[key] = self._incarnation.get(key, 0) + 1
        self._alive[key] = alive

    def is_alive(self, node: Node) -> bool:
        return self._alive.get(_key(node), False)

    # -- faults -----------------------------------------------------------------------------
    def partition(self, groups: Sequence[Sequence[Node]]) -> None:
        """Cut the network into ``groups`` (see the module doc); replaces any partition."""
        mapping: dict[str, int] = {}
        for index, group in enumerate(groups):
            for node in group:
                mapping[_key(node)] = index
        if "ncoordinator" not in mapping and "ncontroller" in mapping:
            mapping["ncoordinator"] = mapping["ncontroller"]
        self._groups = mapping

    def heal(self) -> None:
        """Remove the partition (link settings and slow followers stay)."""
        self._groups = None

    def set_link(self, a: Node, b: Node, delay_ms: tuple[int, int] | None = None,
                 drop: float = 0.0, duplicate: float = 0.0, reorder: bool = False) -> bool:
        """Configure the link between ``a`` and ``b`` (both directions). Returns False when
        ``duplicate`` or ``reorder`` was asked for on the controller channel, where they
        cannot happen and are not applied (module doc)."""
        base = self._link(a, b)
        applicable = True
        if "controller" in (a, b) and (duplicate > 0 or reorder):
            duplicate, reorder, applicable = 0.0, False, False
        lo, hi = delay_ms if delay_ms is not None else base.delay_ms
        self._links[self._pair(a, b)] = LinkConfig((int(lo), int(hi)), float(drop),
                                                   float(duplicate), bool(reorder))
        return applicable

    def slow_node(self, node: Node, extra_delay_ms: int) -> None:
        """Add ``extra_delay_ms`` to every fetch request ``node`` sends (0 removes it)."""
        self._slow[_key(node)] = max(0, int(extra_delay_ms))

    def connected(self, a: Node, b: Node) -> bool:
        """Whether the current partition lets ``a`` and ``b`` talk."""
        if self._groups is None:
            return True
        return self._groups.get(_key(a), -1) == self._groups.get(_key(b), -1)

    # -- sending ----------------------------------------------------------------------------
    def send(self, src: Node, dst: Node, deliver: Callable[[], None], kind: str = "") -> None:
        """Send a message: ``deliver()`` runs at the destination after the link's delay,
        unless the message is dropped, partitioned away or the destination is down or
        restarted meanwhile. ``kind == "fetch"`` messages get the sender's slow-node delay."""
        self.sent += 1
        if not self.connected(src, dst):
            self.dropped += 1
            return
        link = self._link(src, dst)
        if link.drop > 0 and self._rng.random() < link.drop:
            self.dropped += 1
            return
        copies = 2 if link.duplicate > 0 and self._rng.random() < link.duplicate else 1
        extra = self._slow.get(_key(src), 0) if kind == "fetch" else 0
        dst_key = _key(dst)
        incarnation = self._incarnation.get(dst_key, 0)
        src_key = _key(src)
        direction = (f"{src_key}#{self._incarnation.get(src_key, 0)}", f"{dst_key}#{incarnation}")
        for _ in range(copies):
            arrival = self._kernel.now_ms + self._rng.randint(*link.delay_ms) + extra
            if not link.reorder:
                arrival = max(arrival, self._last_arrival.get(direction, 0))
                self._last_arrival[direction] = arrival
            self._kernel.schedule_at(arrival, lambda: self._arrive(src, dst, dst_key, incarnation, deliver))

    def _arrive(self, src: Node, dst: Node, dst_key: str, incarnation: int,
                deliver: Callable[[], None]) -> None:
        alive = self._alive.get(dst_key, False)
        if not alive or self._incarnation.get(dst_key, 0) != incarnation or not self.connected(src, dst):
            self.dropped += 1
            return
        self.delivered += 1
        deliver()

    def _pair(self, a: Node, b: Node) -> tuple[str, str]:
        ka, kb = _key(a), _key(b)
        return (ka, kb) if ka <= kb else (kb, ka)

    def _link(self, a: Node, b: Node) -> LinkConfig:
        custom = self._links.get(self._pair(a, b))
        if custom is not None:
            return custom
        return self._controller if "controller" in (a, b) else self._default
