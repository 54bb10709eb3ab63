"""What a simulated component may use of the run it is part of: :class:`SimContext`.

Brokers, the controller, the transaction coordinator and the clients are given one context
when they are made, instead of the :class:`~epochlab.sim.cluster.Cluster` facade. It holds the
virtual clock and its timers (the :class:`~epochlab.sim.kernel.Kernel`), node liveness (the
:class:`~epochlab.sim.network.Network`), message routing (:meth:`SimContext.post`, which
delivers to whatever node the facade registered under the destination's name), the
:class:`~epochlab.sim.history.Recorder` of the history and event log, and the three run-wide
facts the protocol code branches on (``generation``, ``kip890``, ``topic_partition``). So no
component imports the facade, and the facade only composes (``docs/sim-api.md``, "Structure").

>>> from epochlab.generations import Generation
>>> from epochlab.sim.history import Recorder
>>> from epochlab.sim.kernel import Kernel
>>> from epochlab.sim.network import Network
>>> kernel = Kernel(seed=1)
>>> ctx = SimContext(kernel, Network(kernel, (1, 5), (1, 10)), Recorder(kernel),
...                  Generation.DIVERGING_EPOCH, kip890=False, topic_partition="orders-0")
>>> class Echo:
...     def on_ping(self, msg, src):
...         ctx.log_event("client", f"{msg} from {src}")
>>> ctx.register("b", Echo()); ctx.network.set_alive("a", True); ctx.network.set_alive("b", True)
>>> ctx.post("a", "b", "on_ping", "hello"); ctx.post("a", "nobody", "on_ping", "lost")
>>> ctx.run_until(lambda: bool(ctx.recorder.events), 100), ctx.recorder.events[0].message
(True, 'hello from a')
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

from epochlab.generations import Generation
from epochlab.sim.history import Recorder
from epochlab.sim.kernel import Kernel
from epochlab.sim.network import Network, Node

__all__ = ["SimContext"]


class SimContext:
    """The run as one component sees it (made by the facade, shared by every component).

    Attributes: ``kernel`` (``now_ms``, ``schedule``, ``schedule_at``, ``rng``), ``network``
    (``set_alive`` / ``is_alive`` of nodes; messages go through :meth:`post`), ``recorder``
    (with its two methods also reachable as ``log_event`` and ``record``), ``generation``,
    ``kip890`` (KIP-890 transaction verification on) and ``topic_partition`` (the partition's
    name, as AddPartitionsToTxn carries it). Configuration is not here: each component gets its
    own config when it is made.
    """

    __slots__ = ("_nodes", "generation", "kernel", "kip890", "log_event", "network", "record",
                 "recorder", "topic_partition")

    def __init__(self, kernel: Kernel, network: Network, recorder: Recorder,
                 generation: Generation, kip890: bool, topic_partition: str) -> None:
        self.kernel = kernel
        self.network = network
        self.recorder = recorder
        self.generation = generation
        self.kip890 = kip890
        self.topic_partition = topic_partition
        self.log_event = recorder.log_event
        self.record = recorder.record
        self._nodes: dict[Node, Any] = {}

    #: The virtual time in milliseconds: the kernel's clock, read without a Python frame (the
    #: simulator's components read it about 4,500 times a run).
    now_ms = property(attrgetter("kernel.now_ms"), doc="The virtual time in milliseconds.")

    # -- routing ----------------------------------------------------------------------------
    def register(self, name: Node, node: Any) -> None:
        """Route messages for ``name`` to ``node`` from now on (``None`` reserves the name:
        it is known to :meth:`post` before the node exists, e.g. a consumer that sends from
        its constructor)."""
        self._nodes[name] = node

    def knows(self, name: Node) -> bool:
        """Whether ``name`` was registered."""
        return name in self._nodes

    def node(self, name: Node) -> Any:
        """The node registered as ``name`` (``KeyError`` if none)."""
        return self._nodes[name]

    def routes(self) -> dict[Node, Any]:
        """The table :meth:`post` routes by (name -> node), itself: what a Rust component that
        posts (``_core.FetchPlane``) is given."""
        return self._nodes

    def post(self, src: Node, dst: Node, method: str, msg: object, kind: str = "",
             coalesce: str | None = None) -> None:
        """Send ``msg`` from ``src``; on arrival call ``<node registered as dst>.<method>(msg,
        src)`` (``kind`` and ``coalesce``: :meth:`Network.send`). A message to a name nobody
        registered is dropped without being sent (it takes no random draw)."""
        self.network.post(src, dst, self._nodes, method, msg, kind, coalesce)

    def reset_connections(self, node: Node) -> None:
        """``node``'s process dies while its machine lives on (a crash that keeps the page
        cache): the kernel closes its sockets, so every peer that had a connection to it gets
        the FIN/RST after a link delay and calls ``on_connection_reset(node, node)``, as
        Kafka's ``NetworkClient`` fails a closed connection's in-flight requests at once
        (``handleDisconnections``) instead of waiting for their timeout. Call it before the
        node is marked dead; across a network partition the reset is held and dies with the
        node (the peer then waits for its timeout, as with a machine that vanished)."""
        for peer in self.network.peers(node):
            target = self._nodes.get(peer)
            if target is not None and hasattr(target, "on_connection_reset") and self.network.is_alive(peer):
                self.post(node, peer, "on_connection_reset", node)

    # -- time -------------------------------------------------------------------------------
    def run_until(self, stop: Callable[[], bool], timeout_ms: int) -> bool:
        """Run events until ``stop()`` holds (checked first and after every event) or
        ``timeout_ms`` (negative counts as 0) passed; returns whether it held."""
        kernel = self.kernel
        return kernel.run_until(kernel.now_ms + max(0, timeout_ms), stop)
