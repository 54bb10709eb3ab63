"""The simulated network: per-link delay, loss, duplication, partitions, dead endpoints.

Nodes are broker ids (``int``), ``"controller"`` and client names (``str``). Every message gets
an independent delay drawn uniformly from its link's ``(min, max)`` range. Messages on
different links overtake each other freely.

Connections as TCP has them. Kafka talks over one TCP connection per peer, so on one directed
link, between the same incarnations of the two nodes, messages arrive in send order and none
is lost while a later one gets through (unless the link was configured with ``reorder=True``,
an addition that lets random delays reorder them). A network partition or a link with
``drop=1.0`` does not lose what is sent across it: TCP keeps retransmitting, so the messages
are *held* and delivered, in order, once the path is usable again (the way an ``iptables
DROP`` partition behaves: Jepsen's partitions are made that way). A released message gets a
fresh delay (the retransmission); a later message of the same connection that arrives while
it is still on its way waits for it and goes right after it (TCP's receiver keeps
out-of-order segments until the missing one fills the gap). A ``drop`` probability below
1 stands for packet loss: each loss costs one retransmission timeout (200 ms, doubling, as
Linux's ``TCP_RTO_MIN`` and backoff), the message and everything behind it arrive later, but
never more than ``request.timeout.ms`` (30 s) later: then Kafka reconnects and sends again.
With :meth:`Network.set_retransmission_backoff` (``ClusterConfig.tcp_retransmission_backoff``)
held messages go when TCP would send them again, not at once: its
retransmission timer runs from the connection's hold (200 ms, doubling), so a cut of 1.5 s
releases them 3.0 s after it began (:func:`retransmission_after`). Measured on Kafka 4.3.1
here (``epochlab kafka fuzz`` schedule 10): a follower cut off for 1.52 s caught up 3.0 s
after the cut began, 1.5 s after the heal. A retransmission that meets a cut again on its way
is held with its connection's first hold time: the timer's backoff goes on doubling from
there (Linux resets it only when an acknowledgement arrives), so a fetch response held at
6.6 s, sent again at 9.6 s into a new cut, goes next at 12.8 s, not 200 ms doubling from
9.6 s (``epochlab kafka fuzz`` campaign seed 10, schedule 1, Java: the follower was back at
12.8 s, as this rule has it, where a fresh timer had it at 15.8 s).
On every link but the controller channel (and the transaction coordinator's, which the
model puts on the controller's side). A KRaft broker's requests to the controller (its
metadata fetch, its heartbeat) time out after ``controller.quorum.request.timeout.ms`` (2 s)
and go again on a new connection, which the model's controller channel does not tell from the
held one, so there a release goes at once, as without the rule (with the rule on that channel
too, a 16 s cut of two brokers from the controller kept them out of the ISR until 30 s after
the cut, where Kafka had them back 1.4 s after the heal). A client's requests wait on their
connection until the client's own request timeout, and then the client closes it
(:meth:`Network.close_connection`): what the old connection held still goes at its
retransmission (the closed socket's kernel sends the queued data, then the FIN), and what the
client sends after goes on a new connection, not behind it. Measured on Kafka 4.3.1 here
(``epochlab kafka fuzz`` seed 14, Java run 5): requests sent into a cut at 12.3 s, healed at
14.1 s, reached the leader with the retransmission at 15.3 s (200 ms doubling from 12.3 s);
m12 was acknowledged at 15.46 s, just after the client's 3 s request timeout had closed the
connection and retried m13 and m14, which were then written twice. Without this rule the
model delivered them at the heal and acknowledged all three at 14.2 s. Without the
retransmission timing the network keeps one connection per pair of incarnations
(``close_connection`` does nothing).
Held messages are lost only with the connection: when either end dies or restarts (a new
incarnation has new connections; late replies to the old one are lost). Requests already
in flight from a node that crashed are still delivered (bytes on the wire arrive: zombie
requests, ``docs/invariants.md`` "Faults"); held ones die with their sender's kernel.

A client that gives up on a request (``request.timeout.ms``) does not get it back: a held
request may still reach the broker after the partition heals, as with Kafka, whose client
closes the connection but whose kernel still delivers the data it had queued.

KRaft brokers read the metadata log: after a gap a broker fetches every record it missed in
one response and applies them as one delta (``MetadataLoader.handleCommit`` loads all batches
of a commit, then ``MetadataBatchLoader.maybeFlushBatches`` publishes once), so it sees only the
newest partition state. Messages sent with a ``coalesce`` key behave that way: when held
messages are released, only the newest of each key on that connection is delivered.

The controller channel (every link with ``"controller"`` at one end) is one ordered, reliable
connection in every Kafka version: ZooKeeper-era controllers queue requests per broker and
resend until delivered (``ControllerChannelManager.RequestSendThread``), KRaft brokers read the
metadata log in order and send AlterPartition one at a time over one connection
(``NodeToControllerChannelManager``, ``AlterPartitionManager``). So ``reorder`` and
``duplicate`` do not apply there (:meth:`Network.set_link` says so in its return value).

Partitions: ``partition([[1, "p"], [2, 3, "controller"]])`` puts each listed group on its own
side; every node not listed forms one further group together, except the transaction
coordinator (node ``"coordinator"``), which stays on the controller's side unless listed.

Two implementations with one contract: this class (the reference backend's, and the statement
of the rules) and ``epochlab._core.Network`` (``src/sim/network.rs``), which the rust
backend runs with the Rust kernel, so a message's send, delay draw, hold and arrival
checks cost no Python. The Rust network draws from its own Mersenne Twister, seeded from the
state of ``kernel.rng("network")`` and drawing as ``random.Random.randint`` and ``random()``
do, so both give the same run draw for draw (``tests/test_fast_paths.py``: schedules of every
generation, random operation sequences, the raw stream).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from epochlab.sim.kernel import Kernel

__all__ = ["LinkConfig", "Network", "Node", "SYN_RESENDS_MS", "retransmission_after", "syn_checks"]

Node = int | str


_KEYS: dict[tuple[type, Node], str] = {}


def _key(node: Node) -> str:
    """The node's name in the network's tables: ``b<id>`` for a broker, ``n<name>`` else
    (memoised: it is asked for several times per message)."""
    key = _KEYS.get((type(node), node))
    if key is None:
        key = _KEYS[(type(node), node)] = f"b{node}" if isinstance(node, int) else f"n{node}"
    return key


@dataclass(frozen=True)
class LinkConfig:
    """One link's behaviour, the same in both directions: ``delay_ms`` is ``(min, max)``
    inclusive; ``drop`` and ``duplicate`` are probabilities in ``[0, 1]``."""

    delay_ms: tuple[int, int]
    drop: float = 0.0
    duplicate: float = 0.0
    reorder: bool = False


RTO_MIN_MS = 200
"""Linux's minimum retransmission timeout (``TCP_RTO_MIN``): what one lost packet costs."""

RTO_MAX_MS = 120_000
"""Linux's ceiling on the retransmission timeout (``TCP_RTO_MAX``)."""

RECONNECT_MS = 30_000
"""Most a lost message waits for retransmissions: Kafka's clients and inter-broker channels
close a connection whose request has had no answer for ``request.timeout.ms`` (30 s by
default, ``NetworkClient.handleTimedOutRequests``) and send again on a new one, so a message
never waits behind TCP's backed-off retransmission timer for longer than that."""


SYN_RESENDS_MS = (1000, 2000, 3000, 4000, 5000, 7000, 11000, 19000, 35000, 67000)
"""When the kernel sends a connection attempt's SYN again, from the first: Linux's initial
retransmission timeout of 1 s (``TCP_TIMEOUT_INIT``), kept for the first
``tcp_syn_linear_timeouts`` (4, Linux 6.5 and later) resends and one more, then doubling, until
the time ``tcp_syn_retries`` (6) allows for the doubling series alone (127 s) has passed. An
attempt across a link that drops packets gets through at the first of these after the heal.
Measured on this project's machine (Linux 6.18; ``net.ipv4.tcp_syn_linear_timeouts = 4``), a
connect() to a port whose SYNs an nft rule drops: SYNs at 0, 1.0, 2.0, 3.1, 4.1, 5.1, 7.1,
11.2, 19.4, 35.5 and 68.8 s, ETIMEDOUT at 134 s (``docs/measurements.md``). Kernels before
6.5 resend at 1, 3, 7, 15, 31 and 63 s."""


def syn_checks(timeout_ms: int) -> list[int]:
    """When a connection attempt that gives up after ``timeout_ms`` (a Kafka client's
    ``socket.connection.setup.timeout.ms``) looks again, from its start: at each SYN resend
    before the timeout, then at the timeout."""
    return [r for r in SYN_RESENDS_MS if r < timeout_ms] + [timeout_ms]


@dataclass(slots=True)
class _Message:
    seq: int
    src: Node
    dst: Node
    src_key: str
    src_incarnation: int
    dst_key: str
    dst_incarnation: int
    deliver: Callable[[], None]
    extra_ms: int
    coalesce: str | None
    quiet: bool = False  # the destination is a node whose events are quiet (Kernel)
    # a retransmission: when its connection began to hold it (Network._release), so that a
    # cut it meets on its way keeps TCP's backed-off timer instead of starting a new one
    held_since: int | None = None
    # which connection between its two ends it went on (Network.close_connection)
    conn: int = 0


def retransmission_after(since: int, now: int) -> int:
    """When a connection that began to hold at ``since`` sends again after its path became
    usable at ``now``: TCP resends its oldest unacknowledged segment :data:`RTO_MIN_MS` after
    the send and then after each timeout doubled (up to :data:`RTO_MAX_MS`), so at ``since +
    200 * (2**k - 1)`` ms; the first of those at or after ``now``, but no later than
    :data:`RECONNECT_MS` after ``since`` (by then Kafka has closed the connection and sends
    again on a new one), and at once after that."""
    deadline = since + RECONNECT_MS
    if now >= deadline:
        return now
    at, rto = since, RTO_MIN_MS
    while at < now:
        at += rto
        rto = min(rto * 2, RTO_MAX_MS)
    return min(at, deadline)


def _insert_in_send_order(queue: list[_Message], msg: _Message) -> None:
    """Put ``msg`` into ``queue``, kept in send order (late arrivals are few: scan from the end)."""
    index = len(queue)
    while index > 0 and queue[index - 1].seq > msg.seq:
        index -= 1
    queue.insert(index, msg)


class Network:
    """Routes messages between nodes through the kernel's event queue."""

    def __init__(self, kernel: Kernel, default_delay_ms: tuple[int, int],
                 controller_delay_ms: tuple[int, int]) -> None:
        self._kernel = kernel
        self._rng = kernel.rng("network")
        self._default = LinkConfig(default_delay_ms)
        self._controller = LinkConfig(controller_delay_ms)
        self._links: dict[tuple[str, str], LinkConfig] = {}
        self._link_of: dict[tuple[Node, Node], LinkConfig] = {}  # memo of _link, per direction
        self._groups: dict[str, int] | None = None
        self._alive: dict[str, bool] = {}
        self._incarnation: dict[str, int] = {}
        self._peers: dict[str, set[Node]] = {}  # node key -> who connected to it (this incarnation)
        self._slow: dict[str, int] = {}
        self._last_arrival: dict[tuple[str, str], int] = {}
        self._seq = 0
        self._held: dict[tuple[str, str], list[_Message]] = {}
        # per held connection, when it began to hold; whether a release waits for TCP's next
        # retransmission (set_retransmission_backoff)
        self._held_since: dict[tuple[str, str], int] = {}
        self._retransmission_backoff = False
        # per ordered pair of node keys, the connection messages now go on (close_connection)
        self._conns: dict[tuple[str, str], int] = {}
        # per connection: the seqs of released messages still on their way, and the messages
        # that arrived behind one of them (in send order)
        self._on_way: dict[tuple[str, str], list[int]] = {}
        self._behind: dict[tuple[str, str], list[_Message]] = {}
        self.sent = 0
        self.delivered = 0
        self.dropped = 0
        self.held = 0

    # -- node lifecycle ---------------------------------------------------------------------
    def set_alive(self, node: Node, alive: bool) -> None:
        """Mark a node up or down; going up starts a new incarnation. Messages held on the
        connections of a node that goes down are lost with them."""
        key = _key(node)
        if alive and not self._alive.get(key, False):
            self._incarnation[key] = self._incarnation.get(key, 0) + 1
        self._alive[key] = alive
        self._peers.pop(key, None)  # a new or dead incarnation has no connections yet
        if not alive:
            self._discard_dead()

    def peers(self, node: Node) -> list[Node]:
        """The nodes that opened a connection to ``node``'s current incarnation (sent it a
        message), in a fixed order: those a process crash of ``node`` resets."""
        return sorted(self._peers.get(_key(node), ()), key=_key)

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
        self._release()

    def heal(self) -> None:
        """Remove the partition (link settings and slow followers stay)."""
        self._groups = None
        self._release()

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
        self._link_of.clear()
        self._release()
        return applicable

    def set_retransmission_backoff(self, on: bool) -> None:
        """Release held messages at TCP's next retransmission after the path is usable again
        (:func:`retransmission_after`), or at once (``False``, the default)."""
        if not isinstance(on, bool):
            raise TypeError(f"set_retransmission_backoff: expected a bool, got {type(on).__name__}")
        self._retransmission_backoff = on

    def slow_node(self, node: Node, extra_delay_ms: int) -> None:
        """Add ``extra_delay_ms`` to every fetch request ``node`` sends (0 removes it)."""
        self._slow[_key(node)] = max(0, int(extra_delay_ms))

    def connected(self, a: Node, b: Node) -> bool:
        """Whether the current partition lets ``a`` and ``b`` talk."""
        if self._groups is None:
            return True
        return self._groups.get(_key(a), -1) == self._groups.get(_key(b), -1)

    def usable(self, a: Node, b: Node) -> bool:
        """Whether messages between ``a`` and ``b`` get through now (connected, and the link
        not cut with ``drop=1.0``)."""
        return self.connected(a, b) and self._link(a, b).drop < 1.0

    # -- sending ----------------------------------------------------------------------------
    def send(self, src: Node, dst: Node, deliver: Callable[[], None], kind: str = "",
             coalesce: str | None = None, quiet: bool = False) -> None:
        """Send a message: ``deliver()`` runs at the destination after the link's delay, or
        once the path is usable again (module doc), unless either end dies or restarts
        first. ``kind == "fetch"`` messages get the sender's slow-node delay; ``coalesce``
        names messages of which only the newest matters after a gap (module doc)."""
        self.sent += 1
        src_key, dst_key = _key(src), _key(dst)
        self._peers.setdefault(dst_key, set()).add(src)
        self._seq += 1
        incarnation = self._incarnation
        msg = _Message(self._seq, src, dst, src_key, incarnation.get(src_key, 0),
                       dst_key, incarnation.get(dst_key, 0), deliver,
                       self._slow.get(src_key, 0) if kind == "fetch" else 0, coalesce, quiet)
        msg.conn = self._conns.get((src_key, dst_key), 0)
        direction = self._direction(msg)
        link = self._link(src, dst)
        if direction in self._held or not (self.connected(src, dst) and link.drop < 1.0):
            self._hold(direction, msg)
            return
        if link.duplicate > 0 and self._rng.random() < link.duplicate:
            self._schedule(direction, msg, link)
        self._schedule(direction, msg, link)

    def post(self, src: Node, dst: Node, nodes: Mapping[Node, Any], method: str, msg: object,
             kind: str = "", coalesce: str | None = None, quiet: bool | None = None) -> bool:
        """:meth:`send` of a call: on arrival run ``getattr(nodes[dst], method)(msg, src)``,
        with ``nodes`` looked up then (what ``SimContext.post`` sends). A ``dst`` that
        ``nodes`` lacks gets nothing (no random draw): returns ``False``. ``quiet`` defaults
        to the destination's ``QUIET`` attribute (``False`` without one)."""
        if dst not in nodes:
            return False
        if quiet is None:
            quiet = bool(getattr(nodes[dst], "QUIET", False))
        self.send(src, dst, lambda: getattr(nodes[dst], method)(msg, src), kind, coalesce, quiet)
        return True

    def _direction(self, msg: _Message) -> tuple[str, str]:
        conn = f"/{msg.conn}" if msg.conn else ""
        return (f"{msg.src_key}#{msg.src_incarnation}{conn}", f"{msg.dst_key}#{msg.dst_incarnation}")

    def _schedule(self, direction: tuple[str, str], msg: _Message, link: LinkConfig,
                  sent_ms: int | None = None) -> None:
        """Draw ``msg``'s arrival, sent at ``sent_ms`` (default: now), and queue it."""
        now = self._kernel.now_ms if sent_ms is None else sent_ms
        arrival = now + self._rng.randint(*link.delay_ms) + msg.extra_ms
        if 0.0 < link.drop < 1.0:
            rto, waited = RTO_MIN_MS, 0
            while waited < RECONNECT_MS and self._rng.random() < link.drop:
                self.dropped += 1
                waited += rto
                rto = min(rto * 2, RTO_MAX_MS)
            arrival += min(waited, RECONNECT_MS)
        if not link.reorder:
            arrival = max(arrival, self._last_arrival.get(direction, 0))
            self._last_arrival[direction] = arrival
        self._kernel.schedule_at(arrival, lambda: self._arrive(direction, msg), msg.quiet)

    def _hold(self, direction: tuple[str, str], msg: _Message) -> None:
        if direction not in self._held:
            # a retransmission lost again keeps its connection's timer: TCP's backoff goes on
            # doubling until an acknowledgement comes back (tcp_retransmit_timer), it does not
            # start again from 200 ms (module doc)
            self._held_since[direction] = self._kernel.now_ms if msg.held_since is None else msg.held_since
        _insert_in_send_order(self._held.setdefault(direction, []), msg)
        self.held += 1

    def _alive_as_sent(self, key: str, incarnation: int) -> bool:
        return self._alive.get(key, False) and self._incarnation.get(key, 0) == incarnation

    def _arrive(self, direction: tuple[str, str], msg: _Message) -> None:
        way = self._on_way.get(direction)
        released = False
        if way is not None:
            if msg.seq in way:
                way.remove(msg.seq)
                released = True
            elif min(way) < msg.seq:
                _insert_in_send_order(self._behind.setdefault(direction, []), msg)
                return
        self._arrive_in_order(direction, msg)
        if released:
            self._unblock(direction)

    def _arrive_in_order(self, direction: tuple[str, str], msg: _Message) -> None:
        if not self._alive_as_sent(msg.dst_key, msg.dst_incarnation):
            self.dropped += 1
            return
        if direction in self._held or not self.usable(msg.src, msg.dst):
            self._hold(direction, msg)
            return
        self.delivered += 1
        msg.deliver()

    def _unblock(self, direction: tuple[str, str]) -> None:
        """Deliver now, in send order, the messages of ``direction`` that waited behind
        released ones no longer on their way."""
        way = self._on_way.get(direction)
        if not way:
            self._on_way.pop(direction, None)
        queue = self._behind.get(direction)
        if not queue:
            return
        first = min(way) if way else None
        ready = len(queue) if first is None else sum(1 for m in queue if m.seq < first)
        go, rest = queue[:ready], queue[ready:]
        if rest:
            self._behind[direction] = rest
        else:
            del self._behind[direction]
        now = self._kernel.now_ms
        for m in go:
            self._kernel.schedule_at(now, lambda m=m: self._arrive(direction, m), m.quiet)

    def discard_held(self, src: Node, dst: Node) -> int:
        """Drop what is held on the connection ``src`` -> ``dst`` (the sender gave up on it,
        e.g. a ZooKeeper-era controller removing a dead broker's request queue); returns how
        many messages went."""
        src_key, dst_key = _key(src), _key(dst)
        gone = 0
        for direction in list(self._held):
            first = self._held[direction][0]
            if first.src_key == src_key and first.dst_key == dst_key:
                gone += len(self._held[direction])
                del self._held[direction]
                self._held_since.pop(direction, None)
        self.dropped += gone
        return gone

    def close_connection(self, a: Node, b: Node) -> None:
        """The connection between ``a`` and ``b`` is closed (a client gave up on it): what
        either end sends from now on goes on a new one, not behind what the old one still
        holds or has on its way; the old one's messages go on as they would (a closed socket's
        kernel still sends the data it had queued, then the FIN; module doc)."""
        if not self._retransmission_backoff:
            return  # without TCP's timing, held messages go at once and connections are one
        ka, kb = _key(a), _key(b)
        for pair in ((ka, kb), (kb, ka)):
            self._conns[pair] = self._conns.get(pair, 0) + 1

    def _discard_dead(self) -> None:
        """Held messages die with either end of their connection."""
        for direction in list(self._held):
            queue = self._held[direction]
            first = queue[0]
            if not (self._alive_as_sent(first.dst_key, first.dst_incarnation)
                    and self._alive_as_sent(first.src_key, first.src_incarnation)):
                self.dropped += len(queue)
                del self._held[direction]
                self._held_since.pop(direction, None)

    def _release(self) -> None:
        """Deliver, in order, what is held on every connection that is usable again."""
        self._discard_dead()
        for direction in sorted(self._held):
            queue = self._held[direction]
            first = queue[0]
            if not self.usable(first.src, first.dst):
                continue
            del self._held[direction]
            now = self._kernel.now_ms
            since = self._held_since.pop(direction, now)
            # not on the controller channel, whose requests time out and go again on a new
            # connection within seconds (module doc): what it held goes at once
            channel = {"controller", "coordinator"} & {first.src, first.dst}
            backoff = self._retransmission_backoff and not channel
            resent = retransmission_after(since, now) if backoff else now
            newest: dict[str, int] = {}
            for msg in queue:
                if msg.coalesce is not None:
                    newest[msg.coalesce] = msg.seq
            link = self._link(first.src, first.dst)
            for msg in queue:
                if msg.coalesce is not None and newest[msg.coalesce] != msg.seq:
                    self.dropped += 1
                    continue
                if backoff:
                    msg.held_since = since
                self._schedule(direction, msg, link, resent)
                if not link.reorder:
                    self._on_way.setdefault(direction, []).append(msg.seq)

    def _pair(self, a: Node, b: Node) -> tuple[str, str]:
        ka, kb = _key(a), _key(b)
        return (ka, kb) if ka <= kb else (kb, ka)

    def _link(self, a: Node, b: Node) -> LinkConfig:
        link = self._link_of.get((a, b))
        if link is None:
            link = self._links.get(self._pair(a, b))
            if link is None:
                link = self._controller if "controller" in (a, b) else self._default
            self._link_of[(a, b)] = link
        return link
