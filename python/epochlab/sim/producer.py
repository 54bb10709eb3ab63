"""The simulated producer (``docs/core-semantics.md`` rules 1.8, 1.11; Java client semantics).

Records go into an accumulator (``buffer_memory_records`` records; a full buffer blocks the
send up to ``max_block_ms``, then it fails with ``BUFFER_EXHAUSTED``), are grouped into
batches of ``batch_size_records`` after ``linger_ms``, and sent to the partition leader with
at most ``max_in_flight_requests_per_connection`` requests in flight. Retriable errors
(NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND,
REQUEST_TIMED_OUT, connection refused = NETWORK_EXCEPTION, an out-of-order sequence behind an
unresolved earlier batch) are retried after ``retry_backoff_ms`` while ``retries`` and
``delivery_timeout_ms`` allow; leader-related ones refresh metadata first. A request without
an answer after ``request_timeout_ms`` counts as REQUEST_TIMED_OUT. A batch still unsent or
waiting for a retry when ``delivery_timeout_ms`` expires fails with ``DELIVERY_TIMEOUT``
(Java's TimeoutException).

Transactions (``transactional.id``): see :mod:`epochlab.sim.producer_txn` (begin, commit,
abort, fencing; InitProducerId at the transaction coordinator).

Idempotence: a producer id and epoch from InitProducerId (the controller hands out ids to
non-transactional producers), a per-partition sequence assigned when a batch is first sent and kept across
retries, so the leader's producer state deduplicates a retry (also after failover, if the new
leader's log holds the original). ``restart()`` starts a new session: a new producer id, or
with ``transactional_id`` the same id with a bumped epoch, which fences the old session's late
batches (INVALID_PRODUCER_EPOCH at the leader once it has seen the new epoch).

Unresolved sequences (idempotent, not transactional; Java's ``TransactionManager``): a batch
that fails for good after it got a sequence (expired, out of retries, refused) may leave a gap
that the leader would answer with OUT_OF_ORDER_SEQUENCE_NUMBER for ever. Once no request is in
flight the producer checks (``maybeResolveSequences``): if every sequence handed out was
acknowledged there is no gap; otherwise, from G4 (clients 2.5+, KIP-360) it bumps its epoch
locally and numbers the waiting batches from 0 again (``bumpIdempotentProducerEpoch``); before,
it asks for a new producer id (``resetIdempotentProducerId``). From G4 an
OUT_OF_ORDER_SEQUENCE_NUMBER answer is retried (``canRetry``): for the batch right after the
acknowledged sequences it is a real gap, answered with the same epoch bump; any other batch is
retried as it is until it succeeds or expires (it may have been written already, its duplicate
entry evicted from the last five: writing it again under a new epoch would duplicate it).

Connections (``socket_connection_setup_timeout_ms`` set: the Java client's connection set-up,
off unless configured, see :class:`~epochlab.sim.config.ProducerConfig`): the producer sends to
a broker only over a connection, opened before its first request there and again after the
client closed it (a request timed out) or the broker's process died. A connection attempt
across a usable link succeeds at once; to a broker whose process is down, but reachable, it is
refused at once (the request fails as NETWORK_EXCEPTION, as without the rule). Across a link
that drops packets the attempt waits: the kernel resends the SYN 1, 2, 3, 4, 5, 7, 11, 19 and 35 s
after the first (Linux's ``TCP_TIMEOUT_INIT`` of 1 s, linear for the first resends, then
doubling: :data:`~epochlab.sim.network.SYN_RESENDS_MS`), so the connection comes up at the first
of those after the link heals, and the client gives up on it after
``socket.connection.setup.timeout.ms`` (``NetworkClient.handleTimedOutConnections``:
"Disconnecting from node N due to socket connection setup timeout"), drawn for each attempt as
``ExponentialBackoff(timeout, 2, max, 0.2)`` of the broker's failed attempts in a row
(``ClusterConnectionStates.connectionSetupTimeoutMs``), and asks for metadata again
(``DefaultMetadataUpdater.handleServerDisconnect``). Meanwhile the batches for that broker wait
in the accumulator, where no request timeout runs, only their delivery timeout. Measured on
Kafka 4.3.1 here (``client.log`` of an ``epochlab kafka fuzz`` run): a producer that learned of
a new leader after the leader was cut off logged "Disconnecting from node 2 due to socket
connection setup timeout. The timeout value is 9242 ms." 9.2 s after it began, and only then
learned of the next leader; its two batches waiting since expired.

With the connection set-up rule on, metadata requests go to a broker as well, over the
producer's own connection to it, as the Java client's do (``NetworkClient``'s
``DefaultMetadataUpdater.maybeUpdate``): the broker is the ``leastLoadedNode``, the one with the
fewest requests in flight among those not in their reconnect backoff after a refusal, ties
broken by a random rotation of the broker list drawn for each choice (``randOffset``), so a
broker the producer has produce requests in flight to is passed over for an idle one. A
connected broker is asked at once; while a connection attempt is under way nothing else is
tried (``isAnyNodeConnecting``) and the choice is made again each reconnect backoff (50 ms); an
unconnected one is connected to first (across a cut link the attempt waits as above); one whose
process is down, or not yet registered and so not serving (endpoints closed: refused), is
backed off (``reconnect.backoff.ms`` 50 ms doubling to 1 s per refusal in a row, with jitter) and
another is chosen. The broker answers from its metadata cache (``Broker.on_metadata``: what the
controller last told it). A request unanswered after ``request_timeout_ms`` closes the
connection ("Disconnecting from node N due to request timeout": the produce requests in flight
on it fail as disconnected) and counts as a failed metadata attempt. Measured on Kafka 4.3.1
here (``client.log`` of ``epochlab kafka fuzz`` schedule 17, Java): a metadata request went to
broker 2 after it was isolated; the client disconnected from it for the request timeout, then
waited on a new connection to it for the connection set-up timeout (11.7 s) before it learned
the new leader, and its waiting records expired. Without the rule the model's producer asks the
controller, which always answers.

librdkafka's connections (``socket_connection_setup_timeout_ms`` set together with
``socket_timeout_ms``, which makes the producer librdkafka; its default is 30 s): the same
connection before a broker's first request and after a closed one, with librdkafka's own
timing (``rdkafka_broker.c``, ``rd_kafka_broker_thread_main``). The set-up timeout is fixed,
counted from the attempt's start (checked in the CONNECT state: "Connection setup timed out in
state CONNECT"). An attempt starts no earlier than the broker's reconnect time, which each
attempt sets at its start (``rd_kafka_broker_update_reconnect_backoff``): the attempt's time
plus the broker's backoff with -25 % to +50 % jitter, capped at ``reconnect.backoff.max.ms``
(10 s); the backoff starts at ``reconnect.backoff.ms`` (100 ms), doubles with each attempt up
to the cap, and goes back to 100 ms when the last reconnect time is more than 10 s past. So a
connection that was up for a while is attempted again at once after it closes, and a broker
that refuses is tried again after about 100, 200, 400 ms and on. No request goes to a broker
until its connection is up: the records wait in the partition's queue (only their delivery
timeout runs), a refused attempt fails nothing, and a failed attempt asks for no metadata
(``rd_kafka_broker_fail`` refreshes the topics, "broker down", only for a connection that was
up); but while records wait for a leader whose connection is not up, librdkafka's one-second
timer asks for the leader again each second (``rd_kafka_topic_scan_all``: "broker is down:
re-query"), so the producer moves to a new leader within a second of its election. A request
that timed out or lost its connection leaves the partition with its leader, and the producer
asks for metadata (``rd_kafka_toppar_leader_unavailable``): so does every producer with
librdkafka's timing, with these connections or without, where the model's Java client forgets
the leader until the answer. Metadata requests go to the controller as without the rule. Measured on Kafka 4.3.1 here
(``epochlab kafka fuzz`` seed 13, librdkafka run 4): requests to leader 1 timed out behind a
cut ("Timed out 5 in-flight" at 11.1 s); librdkafka connected again across the cut at once, its
SYN resent up to 7 s later and dropped; the cut ended at 18.4 s, between two resends, and the
connection came up with the next, 11 s after the attempt began: the records waiting since
5-6 s expired at 21.1 s unwritten, the later ones were written and acknowledged at 22.5 s.

Re-bootstrap (``metadata_recovery_strategy="rebootstrap"``: the Java client's default from 4.0,
KIP-1102): when the client wants metadata and finds no broker available
(``NetworkClient.DefaultMetadataUpdater.maybeUpdate``: ``leastLoadedNode`` has no node ready,
connecting or past its reconnect backoff), it starts again from its bootstrap addresses
(``Metadata.rebootstrap``: "Rebootstrapping with ..."), and the bootstrap cluster it then knows
has no partitions. A Java producer keeps a connection to some broker and asks for metadata at
every disconnection (``handleServerDisconnect``), so once the last broker it can reach has
gone it plays rounds against it: the metadata backoff of the round's failed attempts ``m``
(100 ms doubling to 1 s) and the broker's reconnect backoff ``r`` (50 ms doubling to 1 s), both
from the last refusal and both with Kafka's jitter; if ``r`` has passed when the update is due,
the connection is tried and refused and the next round begins; if not, there is no node to ask
and the client re-bootstraps. A sender with records for that broker tries it itself at ``r``
and is refused, so at ``m`` it is in backoff again: with records waiting, the re-bootstrap
comes at the end of the round they came in. Here a broker is unavailable when its process is
down across a usable link (refused at once; behind a cut link the attempt would be connecting,
which counts as available), and the rounds are drawn from the producer's own random stream
when it first looks (a send, a metadata refresh) in an outage. After a re-bootstrap a send
waits in ``KafkaProducer.waitOnMetadata`` until metadata names the topic's partitions, up to
``max_block_ms`` (then it fails, REQUEST_TIMED_OUT: Java's TimeoutException "not present in
metadata"), before its record enters the accumulator, where its delivery timeout begins; the
application's sending thread is held meanwhile, so the sends after it wait behind it, each for
its own ``max_block_ms`` from when the one before it returned. The producer asks for metadata
again each ``reconnect.backoff.max.ms`` (1 s) while no broker is available. Measured on Kafka
4.3.1 here (``client.log`` of ``epochlab kafka fuzz`` schedule 29, Java): the last broker shut
down at 7.0 s; the client was refused by it at 7.1, 7.4, 7.8, 8.8, 9.8 and 10.7 s (rounds of
about 100, 200, 400, 800, 1,000 and 950 ms) and re-bootstrapped at 10.7 s, 0.4 s after a send;
that send's two records expired after their 15 s delivery timeout, while records sent at 22 s,
with no broker up until 39 s, were acknowledged at 45 s, 23 s after their send.

History: ``invoke`` at ``send``, then ``ok`` (offset; ``None`` for acks=0, which completes
when sent), ``fail`` (no attempt can have been appended) or ``info`` (outcome unknown: a
timeout, NOT_ENOUGH_REPLICAS_AFTER_APPEND, a possibly-parked NOT_LEADER_OR_FOLLOWER, a
restart with the request in flight).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING

from epochlab.generations import Generation
from epochlab.sim.backoff import RETRY_BACKOFF_MAX_MS, ExponentialBackoff, MetadataBackoff
from epochlab.sim.config import ProducerConfig
from epochlab.sim.kernel import Timer
from epochlab.sim.messages import ClientDisconnect, ProduceRequest, ProduceResponse
from epochlab.sim.network import syn_checks
from epochlab.sim.producer_txn import FENCING_ERRORS, TransactionalMixin, Txn

if TYPE_CHECKING:
    from epochlab.sim.context import SimContext

_BATCH_ID = attrgetter("batch_id")  # the sort key of batches waiting to be sent

__all__ = ["Producer"]

METADATA_TIMEOUT_MS = 1000
#: librdkafka's broker thread scans its requests for timeouts this often.
LIBRDKAFKA_SCAN_MS = 1000
_RETRIABLE = {"NOT_LEADER_OR_FOLLOWER", "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
              "REQUEST_TIMED_OUT", "NETWORK_EXCEPTION", "UNKNOWN_LEADER_EPOCH",
              "FENCED_LEADER_EPOCH"}
_REFRESH = {"NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT", "NETWORK_EXCEPTION",
            "UNKNOWN_LEADER_EPOCH", "FENCED_LEADER_EPOCH"}
#: Errors of the connection, not of the broker's answer: nothing in them says the leader moved.
_TRANSPORT = {"REQUEST_TIMED_OUT", "NETWORK_EXCEPTION"}
_INDETERMINATE = {"REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "NOT_LEADER_OR_FOLLOWER"}
#: librdkafka's ``reconnect.backoff.ms`` and ``reconnect.backoff.max.ms`` by default
#: (``CONFIGURATION.md``).
LIBRDKAFKA_RECONNECT_BACKOFF_MS = 100
LIBRDKAFKA_RECONNECT_BACKOFF_MAX_MS = 10000
#: The Java client's ``reconnect.backoff.max.ms`` by default
#: (``CommonClientConfigs.DEFAULT_RECONNECT_BACKOFF_MAX_MS``): how often a client that finds no
#: broker available tries again.
RECONNECT_BACKOFF_MAX_MS = 1000
#: ``reconnect.backoff.ms`` by default (``CommonClientConfigs.DEFAULT_RECONNECT_BACKOFF_MS``).
RECONNECT_BACKOFF_MS = 50
#: The most metadata rounds of an outage the re-bootstrap draw plays (each ends in a
#: re-bootstrap with probability about 3/8 once both backoffs reach their maximum).
_REBOOTSTRAP_ROUNDS = 200


class _NoTimer:
    """What a Java client's request holds in place of a timeout timer: its poll finds its
    timeout (:meth:`Producer._poll`)."""

    __slots__ = ()

    def cancel(self) -> None:
        pass


_NO_TIMER = _NoTimer()


@dataclass
class _Batch:
    batch_id: int
    send_ids: list[int]
    values: list[int]
    created_ms: int
    base_sequence: int | None = None
    attempts: int = 0
    indeterminate: bool = False
    done: bool = False
    expiry: Timer | None = field(default=None, repr=False)
    txn: Txn | None = field(default=None, repr=False)


class Producer(TransactionalMixin):
    """A producer client named ``name`` (its network node)."""

    #: its events change no broker or controller state (``Kernel``: quiet events)
    QUIET = True
    _wants_since: int | None

    def __init__(self, ctx: SimContext, name: str, config: ProducerConfig) -> None:
        self.ctx = ctx
        self.name = name
        self.config = config
        self.session = 0
        self._ids = 0
        self.producer_id: int | None = None
        self.producer_epoch: int | None = None
        #: Values of batches sent at least once and then renumbered under a new producer epoch
        #: or id (an earlier attempt may have been written: see :meth:`_resolve_sequences`).
        self.rewritten_values: set[int] = set()
        # G5 (Java clients 3.7+, KIP-580): retries and metadata requests back off exponentially
        self._backoff = (ExponentialBackoff(config.retry_backoff_ms, RETRY_BACKOFF_MAX_MS,
                                            ctx.kernel.rng(f"{name}:backoff"))
                         if ctx.generation.client_exponential_backoff else None)
        # the client's connection set-up (module doc), when configured: the Java client's, or
        # librdkafka's (socket_timeout_ms set), whose set-up timeout does not grow
        setup = config.socket_connection_setup_timeout_ms
        self._librdkafka = config.socket_timeout_ms is not None
        java_setup = setup is not None and not self._librdkafka
        self._setup = (None if setup is None else
                       ExponentialBackoff(setup, setup if self._librdkafka else
                                          config.socket_connection_setup_timeout_max_ms,
                                          ctx.kernel.rng(f"{name}:connect")))
        self._rebootstraps = config.metadata_recovery_strategy == "rebootstrap"
        # with the Java client's connection rule, metadata goes to the least loaded broker
        # (module doc): the rotation of the broker list drawn for each choice, and the backoff
        # after a refusal
        self._nodes_rng = ctx.kernel.rng(f"{name}:nodes") if java_setup else None
        self._reconnect = (None if not java_setup else
                           ExponentialBackoff(RECONNECT_BACKOFF_MS, RECONNECT_BACKOFF_MAX_MS,
                                              ctx.kernel.rng(f"{name}:reconnect")))
        # librdkafka's reconnect backoff (module doc): its jitter, drawn at each attempt's start
        self._rd_jitter = (ctx.kernel.rng(f"{name}:reconnect")
                           if setup is not None and self._librdkafka else None)
        self._start_session()

    # -- public API -------------------------------------------------------------------------
    def send(self, value: int) -> int:
        """Queue ``value``; returns its send id (the history's ``invoke`` index)."""
        op = self.ctx.record(self.name, "invoke", "send", value=value, acks=self.config.acks)
        send_id = op.index
        self._values[send_id] = value
        self._open.add(send_id)
        txn = self._txn_of_new_send(send_id, value)
        if self._fenced is not None or (txn is not None and txn.failed):
            self._finish(send_id, "fail", error=self._fenced or "TRANSACTION_ABORTABLE")
            return send_id
        if txn is None and self.transactional:
            # a transactional producer sends only inside a transaction: the Java client throws
            # (KafkaProducer.doSend -> TransactionManager.maybeAddPartition, "Cannot add
            # partition ... while in state READY"), librdkafka refuses to queue it
            # (rd_kafka_check_produce -> rd_kafka_txn_may_enq_msg: ERR__STATE); nothing is sent
            self._finish(send_id, "fail", error="INVALID_TXN_STATE")
            return send_id
        if self._rebootstraps and (self._awaiting_topic or not self._topic_present()):
            self._await_topic(send_id, value, txn)
            return send_id
        self._enqueue(send_id, value, txn)
        self._drain()
        return send_id

    def _enqueue(self, send_id: int, value: int, txn: Txn | None) -> None:
        """Hand a send to the accumulator, or block it while the buffer is full."""
        if self._wants_since is None:
            self._wants_since = self.ctx.now_ms
        if self._buffered() >= self.config.buffer_memory_records:
            if self.config.max_block_ms == 0:
                self._finish(send_id, "fail", error="BUFFER_EXHAUSTED")
                return
            session = self.session
            timer = self.ctx.kernel.schedule(
                self.config.max_block_ms, lambda: self._block_expired(session, send_id))
            self._blocked.append((send_id, value, timer, txn))
            return
        self._accumulator.append((send_id, value, self.ctx.now_ms, txn))

    def send_many(self, values: list[int] | tuple[int, ...]) -> list[int]:
        return [self.send(v) for v in values]

    @property
    def pending(self) -> int:
        """Sends not yet completed (ok, fail or info)."""
        return len(self._open)

    def flush(self, timeout_ms: int = 60000) -> bool:
        """Run the simulation until every send has completed or ``timeout_ms`` passed."""
        return self.ctx.run_until(lambda: not self._open, timeout_ms)

    def wait_for_transactions(self, timeout_ms: int = 60000) -> bool:
        """Run until every transaction begun has finished (committed, aborted or failed)."""
        return self.ctx.run_until(lambda: not self.transactions_pending, timeout_ms)

    def restart(self) -> None:
        """Crash and restart the producer process: unsent records fail, in-flight ones end as
        ``info``; a new session asks for a producer id (epoch bump with a transactional id)."""
        self.ctx.record(self.name, "info", "restart")
        for send_id in sorted(self._open):
            in_flight = any(send_id in b.send_ids for b, _ in self._in_flight.values())
            batch = self._batch_of.get(send_id)
            unknown = in_flight or (batch is not None and batch.indeterminate)
            self._finish(send_id, "info" if unknown else "fail", error="PRODUCER_RESTARTED")
        self._abandon_transactions()
        # the process's sockets close with it (the Java client's close(0), librdkafka's destroy,
        # or its exit): each broker it had a request in flight to learns of the close, and the
        # new session's requests come on new connections (Broker.on_client_disconnect), not
        # behind the old one's in the broker's muted channel
        open_to = sorted(b for b, ids in self._order.items() if ids)
        self.ctx.network.set_alive(self.name, False)
        self._start_session()
        for broker in open_to:
            self.ctx.post(self.name, broker, "on_client_disconnect", ClientDisconnect(self.name, self.ctx.now_ms))

    # -- session ----------------------------------------------------------------------------
    def _start_session(self) -> None:
        self.session += 1
        self.ctx.network.set_alive(self.name, True)
        self._values: dict[int, int] = {}
        self._open: set[int] = set()
        self._accumulator: list[tuple[int, int, int, Txn | None]] = []
        self._blocked: list[tuple[int, int, Timer, Txn | None]] = []
        self._ready: list[_Batch] = []
        self._in_flight: dict[int, tuple[_Batch, Timer | _NoTimer]] = {}
        # the Java client's request deadlines, found by its poll (_poll), and the poll's clock
        self._deadline: dict[int, int] = {}
        self._last_poll = self.ctx.now_ms
        self._poll_timer: Timer | None = None
        self._scan_origin = self.ctx.now_ms  # librdkafka's timeout scan ticks from here
        # per broker connection, request ids in send order, and answers that came early
        self._order: dict[int, list[int]] = {}
        self._early: dict[int, ProduceResponse] = {}
        self._batch_of: dict[int, _Batch] = {}
        self._next_sequence = 0
        self._acked_sequence = 0          # end of the acknowledged sequence range
        self._unresolved = False          # a sequenced batch failed: maybe a gap (module doc)
        self._gap = False                 # the leader answered OUT_OF_ORDER_SEQUENCE_NUMBER
        self._leader: int | None = None
        # the Java client's connections (module doc): brokers connected, attempts under way
        # (broker -> (attempt id, its deadline)), failed attempts in a row per broker
        self._connected: set[int] = set()
        self._connecting: dict[int, tuple[int, int]] = {}
        self._connect_failures: dict[int, int] = {}
        self._connect_attempts = 0
        # librdkafka's (module doc): per broker, its reconnect time and backoff, and the
        # reconnect times a wake-up is scheduled for
        self._rd_reconnect: dict[int, tuple[int, int]] = {}
        self._rd_wakes: set[tuple[int, int]] = set()
        self._rd_requery_armed = False
        # re-bootstrap (module doc): whether the topic's partitions are known, and the sends
        # waiting for them in order, the first one's max_block_ms timer running
        self._topic_known = True
        self._awaiting_topic: list[tuple[int, int, Txn | None]] = []
        self._topic_timer: Timer | None = None
        # since when records have waited to be acknowledged without a break (None: none
        # waits), and the outage of every broker last looked at: (its start, its rounds' ends)
        self._wants_since = None
        self._outage: tuple[int, list[int]] | None = None
        self._metadata_pending: int | None = None
        # the broker a pending metadata request went to, and the brokers that refused a
        # connection, each until its reconnect backoff ends (the connection rule)
        self._metadata_node: int | None = None
        self._refused_until: dict[int, int] = {}
        self._metadata_backoff = MetadataBackoff(self._backoff) if self._backoff else None
        self._metadata_timer: Timer | None = None
        self._init_pending: int | None = None
        self._linger_timer: Timer | None = None
        self._backoff_until = 0
        self.producer_id = self.producer_epoch = None
        self._reset_transactions()
        if self.config.metadata_at_start:
            session = self.session
            self.ctx.kernel.schedule(0, lambda: self._look_up_topic(session))

    def _look_up_topic(self, session: int) -> None:
        """The application looks the topic up as the producer starts
        (``ProducerConfig.metadata_at_start``: ``KafkaProducer.partitionsFor`` asks for the
        topic's metadata); the answer turns the sender, which then asks an idempotent
        producer's id as at a send."""
        if session == self.session and self._leader is None:
            self._refresh_metadata()

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    def _buffered(self) -> int:
        return len(self._open) - len(self._blocked) - len(self._awaiting_topic)

    def _finish(self, send_id: int, kind: str, offset: int | None = None,
                error: str | None = None) -> None:
        if send_id not in self._values:
            return
        value = self._values.pop(send_id)
        self._open.discard(send_id)
        if not self._open:
            self._wants_since = None
        self._batch_of.pop(send_id, None)
        self.ctx.record(self.name, kind, "send", value=value, offset=offset, error=error,
                        acks=self.config.acks)

    def _block_expired(self, session: int, send_id: int) -> None:
        if session != self.session:
            return
        for i, (sid, _, _, _) in enumerate(self._blocked):
            if sid == send_id:
                del self._blocked[i]
                self._finish(send_id, "fail", error="BUFFER_EXHAUSTED")
                return

    # -- re-bootstrap (module doc) ----------------------------------------------------------
    def _outage_start(self) -> int | None:
        """When the last broker became unavailable, if none is available now: its process is
        down and its link to the producer usable (a connection attempt is refused at once; one
        behind a cut link would be connecting, which ``leastLoadedNode`` returns)."""
        network, last = self.ctx.network, 0
        for b in self.ctx.routes():
            if not isinstance(b, int):
                continue
            if network.is_alive(b) or not network.usable(self.name, b):
                return None
            last = max(last, getattr(self.ctx.node(b), "stopped_ms", None) or 0)
        return last

    def _rebootstrap_at(self, outage: int) -> int:
        """When the producer re-bootstraps in the outage that began at ``outage`` (module doc):
        the metadata updater's rounds against the last broker, each ending in a refused
        connection after the metadata backoff ``m`` of its round, until a round's ``m`` ends
        while the broker is still in its reconnect backoff ``r`` (``m < r``); or, from the round
        in which the producer had records to send, at that round's end (its sender's own
        connection attempt at ``r`` is refused, so at ``m`` the broker is in backoff again)."""
        if self._outage is None or self._outage[0] != outage:
            rng = self.ctx.kernel.rng(f"{self.name}:rebootstrap")
            metadata = ExponentialBackoff(self.config.retry_backoff_ms, RETRY_BACKOFF_MAX_MS, rng)
            reconnect = ExponentialBackoff(RECONNECT_BACKOFF_MS, RECONNECT_BACKOFF_MAX_MS, rng)
            ends, at = [], outage
            for k in range(_REBOOTSTRAP_ROUNDS):
                m, r = metadata.backoff(k), reconnect.backoff(k)
                at += m
                ends.append(at)
                if m < r:
                    break
            self._outage = (outage, ends)
        ends = self._outage[1]
        if self._wants_since is None:
            return ends[-1]
        active = max(outage, self._wants_since)
        return next((end for end in ends if end > active), ends[-1])

    def _topic_present(self) -> bool:
        """Whether the topic's partitions are in the producer's metadata: not once it has
        re-bootstrapped in an outage."""
        if self._topic_known:
            outage = self._outage_start()
            if outage is not None and self.ctx.now_ms >= self._rebootstrap_at(outage):
                self._rebootstrap()
        return self._topic_known

    def _rebootstrap(self) -> None:
        self.ctx.log_event("client", f"producer {self.name}: no broker available: re-bootstraps "
                           "and forgets the topic's partitions (metadata.recovery.strategy=rebootstrap)")
        self._topic_known = False
        self._leader = None

    def _await_topic(self, send_id: int, value: int, txn: Txn | None) -> None:
        """``send`` waits in ``waitOnMetadata`` (behind any send waiting already)."""
        if self.config.max_block_ms == 0:
            self._finish(send_id, "fail", error="REQUEST_TIMED_OUT")
            return
        self._awaiting_topic.append((send_id, value, txn))
        if len(self._awaiting_topic) == 1:
            self._arm_topic_wait()
        self._drain()

    def _arm_topic_wait(self) -> None:
        session, send_id = self.session, self._awaiting_topic[0][0]
        self._topic_timer = self.ctx.kernel.schedule(
            self.config.max_block_ms, lambda: self._topic_wait_expired(session, send_id))

    def _topic_wait_expired(self, session: int, send_id: int) -> None:
        """The first waiting send's ``max_block_ms`` passed: it fails, and the next one's
        wait begins (the sending thread calls ``send`` for it now)."""
        if session != self.session or not self._awaiting_topic or self._awaiting_topic[0][0] != send_id:
            return
        self._topic_timer = None
        self._awaiting_topic.pop(0)
        self._finish(send_id, "fail", error="REQUEST_TIMED_OUT")
        self._forget_ended_waits()

    def _forget_ended_waits(self) -> None:
        """Sends waiting for the topic that ended meanwhile (the first one's wait, a fenced
        session, an aborted transaction) leave the queue; when the first one changed, the wait
        of the one now first begins (the sending thread calls ``send`` for it now)."""
        first = self._awaiting_topic[0][0] if self._awaiting_topic else None
        self._awaiting_topic = [e for e in self._awaiting_topic if e[0] in self._values]
        if self._topic_timer is not None and self._awaiting_topic and self._awaiting_topic[0][0] == first:
            return
        if self._topic_timer is not None:
            self._topic_timer.cancel()
            self._topic_timer = None
        if self._awaiting_topic:
            self._arm_topic_wait()

    def _topic_learned(self) -> None:
        """Metadata named the topic's partitions again: the waiting sends go on, in order."""
        self._topic_known = True
        if self._topic_timer is not None:
            self._topic_timer.cancel()
            self._topic_timer = None
        waiting, self._awaiting_topic = self._awaiting_topic, []
        for send_id, value, txn in waiting:
            if send_id in self._values:
                self._enqueue(send_id, value, txn)

    # -- batching and sending ---------------------------------------------------------------
    def _drain(self, own_wake: bool = False) -> None:
        """One turn of the client's sender: :meth:`_drain_now`, then :meth:`_poll` (``own_wake``:
        the turn is the end of the poll's own sleep, :meth:`_poll_due`)."""
        self._drain_now()
        self._poll(own_wake)

    def _drain_now(self) -> None:
        """Move blocked sends into free buffer space, close batches, send what may be sent."""
        while self._blocked and self._buffered() < self.config.buffer_memory_records:
            send_id, value, timer, txn = self._blocked.pop(0)
            timer.cancel()
            self._accumulator.append((send_id, value, self.ctx.now_ms, txn))
        if self._accumulator:
            self._close_batches()
        if self._fenced is not None:
            return
        if self._unresolved and not self._in_flight and (
                self._gap or all(b.base_sequence is None for b in self._ready)):
            self._resolve_sequences()
        if self.config.enable_idempotence and self.producer_id is None:
            if not self.transactional or self._open or self.transactions_pending:
                self._init_producer_id()
            return
        if self.transactional:
            self._txn_step(self._txn_incomplete)
        if self._leader is None:
            self._refresh_metadata()
            return
        while self._leader is not None and self.ctx.now_ms >= self._backoff_until \
                and len(self._in_flight) < self.config.max_in_flight_requests_per_connection:
            batch = next((b for b in self._ready if not self._txn_blocks(b.txn)), None)
            if batch is None or self._retry_must_wait(batch):
                break
            if self._setup is not None and not self._connect(self._leader):
                break  # the batches wait in the accumulator for the connection
            self._ready.remove(batch)
            self._send_batch(batch)
            if self.config.enable_idempotence and batch.attempts > 1:
                break  # a retry goes alone: one request in flight until it completes

    def _connect(self, broker: int) -> bool:
        """Whether a request may go to ``broker`` now: connected, or connected now, or refused
        now (the request then fails as without the rule); False while an attempt waits on a
        link that drops packets (module doc)."""
        if broker in self._connected:
            return True
        if broker in self._connecting:
            return False
        if self._librdkafka:
            return self._rd_connect(broker)
        if self._syn_answered(broker):
            return True
        assert self._setup is not None
        self._attempt_across_cut(broker, self._setup.backoff(self._connect_failures.get(broker, 0)))
        return False

    def _attempt_across_cut(self, broker: int, timeout: int) -> None:
        """A connection attempt to ``broker`` whose SYN a cut drops: checked at each of the
        SYN's resends and given up at ``timeout`` (:meth:`_connect_check`)."""
        self._connect_attempts += 1
        session, attempt = self.session, self._connect_attempts
        self._connecting[broker] = (attempt, self.ctx.now_ms + timeout)
        for wait in syn_checks(timeout):
            self.ctx.kernel.schedule(wait, lambda: self._connect_check(session, broker, attempt))
        self.ctx.log_event("client", f"producer {self.name}: connecting to broker {broker} across a link "
                           f"that drops packets (set-up timeout {timeout} ms)")

    def _rd_connect(self, broker: int) -> bool:
        """librdkafka's connection attempt to ``broker`` (module doc): not before its reconnect
        time (``rd_kafka_broker_reconnect_backoff``; the sender is woken then); at its start the
        next reconnect time is set (``rd_kafka_broker_update_reconnect_backoff``); up at once
        across a usable link to a live broker, refused by a dead one (tried again at the
        reconnect time), else waiting on the SYN's resends until the set-up timeout."""
        assert self._setup is not None and self._rd_jitter is not None
        now = self.ctx.now_ms
        at, backoff = self._rd_reconnect.get(broker, (0, LIBRDKAFKA_RECONNECT_BACKOFF_MS))
        if now < at:
            self._rd_wake(broker, at)
            self._rd_requery()
            return False
        if at + LIBRDKAFKA_RECONNECT_BACKOFF_MAX_MS < now:
            backoff = LIBRDKAFKA_RECONNECT_BACKOFF_MS
        wait = min(self._rd_jitter.randint(int(backoff * 0.75), int(backoff * 1.5)),
                   LIBRDKAFKA_RECONNECT_BACKOFF_MAX_MS)
        self._rd_reconnect[broker] = (now + wait, min(backoff * 2, LIBRDKAFKA_RECONNECT_BACKOFF_MAX_MS))
        if self.ctx.network.usable(self.name, broker):
            if self.ctx.network.is_alive(broker):
                self._connected.add(broker)
                return True
            self.ctx.log_event("client", f"producer {self.name}: connection to broker {broker} refused "
                               f"(next attempt in {wait} ms)")
            self._rd_wake(broker, now + wait)
            self._rd_requery()
            return False
        self._attempt_across_cut(broker, self._setup.backoff(0))
        self._rd_requery()
        return False

    def _rd_requery(self) -> None:
        """librdkafka's one-second timer (``rd_kafka_1s_tmr_cb`` -> ``rd_kafka_topic_scan_all``):
        a partition whose leader's broker is not up while the producer needs it (connecting,
        or waiting to reconnect) has its leader asked again (``rd_kafka_toppar_needs_query``:
        "broker is down: re-query"), every second until the connection is up or the metadata
        names another leader. Armed once, on the grid of the client's start."""
        if self._rd_requery_armed:
            return
        self._rd_requery_armed = True
        session, now = self.session, self.ctx.now_ms
        tick = self._scan_origin + (now - self._scan_origin) // LIBRDKAFKA_SCAN_MS * LIBRDKAFKA_SCAN_MS + LIBRDKAFKA_SCAN_MS

        def scan() -> None:
            if session != self.session:
                return
            self._rd_requery_armed = False
            leader = self._leader
            if leader is None or leader in self._connected or not (self._ready or self._accumulator):
                return
            self._refresh_metadata()
            self._rd_requery()
        self.ctx.kernel.schedule_at(tick, scan)

    def _rd_wake(self, broker: int, at: int) -> None:
        """Run the sender at ``at``, ``broker``'s reconnect time (once per broker and time)."""
        if (broker, at) in self._rd_wakes:
            return
        self._rd_wakes.add((broker, at))
        session = self.session

        def wake() -> None:
            self._rd_wakes.discard((broker, at))
            if session == self.session:
                self._drain()
        self.ctx.kernel.schedule_at(at, wake)

    def _syn_answered(self, broker: int) -> bool:
        """Whether a SYN to ``broker`` gets an answer now (the link usable): then the
        connection is up, or refused at once if its process is down (a reset from its host)."""
        if not self.ctx.network.usable(self.name, broker):
            return False
        if self.ctx.network.is_alive(broker):
            self._connected.add(broker)
            self._connect_failures.pop(broker, None)
        else:
            self._connect_failures[broker] = self._connect_failures.get(broker, 0) + 1
        return True

    def _connect_check(self, session: int, broker: int, attempt: int) -> None:
        """Attempt ``attempt``'s resent SYN, or its deadline: answered if the link is usable
        now; else at the deadline the attempt fails and the client asks for metadata again."""
        under_way = self._connecting.get(broker)
        if session != self.session or under_way is None or under_way[0] != attempt:
            return
        if self._syn_answered(broker):
            del self._connecting[broker]
            self._drain()
            return
        if self.ctx.now_ms < under_way[1]:
            return
        del self._connecting[broker]
        if self._librdkafka:
            # rd_kafka_broker_thread_main: "Connection setup timed out in state CONNECT"; the
            # connection was never up, so no metadata refresh; the next attempt at the
            # reconnect time set at this one's start
            self.ctx.log_event("client", f"producer {self.name}: gives up connecting to broker {broker} "
                               "(socket connection set-up timeout)")
            self._drain()
            return
        failures = self._connect_failures[broker] = self._connect_failures.get(broker, 0) + 1
        if self._reconnect is not None:  # disconnected: in its reconnect backoff (module doc)
            self._refused_until[broker] = self.ctx.now_ms + self._reconnect.backoff(failures - 1)
        self.ctx.log_event("client", f"producer {self.name}: gives up connecting to broker {broker} "
                           "(socket connection set-up timeout) and asks for metadata again")
        if self._leader == broker:
            self._leader = None
        self._drain()

    def _retry_must_wait(self, batch: _Batch) -> bool:
        """Idempotent producers retry in sequence order, one request at a time: a batch that
        already has a sequence is sent again only when no batch with a lower sequence is in
        flight, and nothing else is sent while such retries are pending
        (``RecordAccumulator.shouldStopDrainBatchesForPartition``: "this effectively reduces our
        in flight request count to 1")."""
        if not self.config.enable_idempotence:
            return False
        retrying = [b for b in self._ready if b.base_sequence is not None]
        if not retrying:
            return False
        first = min(retrying, key=lambda b: b.base_sequence or 0)
        in_flight = [b for b, _ in self._in_flight.values() if b.base_sequence is not None]
        return batch is not first or any((b.base_sequence or 0) < (first.base_sequence or 0)
                                         for b in in_flight)

    def _txn_incomplete(self, txn: Txn) -> bool:
        return any(s in self._open for s in txn.send_ids)

    def _close_batches(self) -> None:
        c, now = self.config, self.ctx.now_ms
        while self._accumulator:
            full = len(self._accumulator) >= c.batch_size_records
            if not full and now < self._accumulator[0][2] + c.linger_ms:
                if self._linger_timer is None or self._linger_timer.cancelled:
                    session = self.session
                    self._linger_timer = self.ctx.kernel.schedule_at(
                        self._accumulator[0][2] + c.linger_ms, lambda: self._wake(session))
                return
            txn = self._accumulator[0][3]
            size = 1
            while size < min(c.batch_size_records, len(self._accumulator)) \
                    and self._accumulator[size][3] is txn:
                size += 1
            records, self._accumulator = (self._accumulator[:size], self._accumulator[size:])
            batch = _Batch(self._next_id(), [r[0] for r in records], [r[1] for r in records],
                           records[0][2], txn=txn)
            for send_id in batch.send_ids:
                self._batch_of[send_id] = batch
            self._arm_expiry(batch)
            self._ready.append(batch)

    def _arm_expiry(self, batch: _Batch) -> None:
        session = self.session
        batch.expiry = self.ctx.kernel.schedule(
            self.config.delivery_timeout_ms, lambda: self._delivery_expired(session, batch))

    def _wake(self, session: int) -> None:
        if session == self.session:
            self._linger_timer = None
            self._drain()

    def _send_batch(self, batch: _Batch) -> None:
        c = self.config
        if c.enable_idempotence and batch.base_sequence is None:
            batch.base_sequence = self._next_sequence
            self._next_sequence += len(batch.values)
        batch.attempts += 1
        request_id = self._next_id()
        req = ProduceRequest(self.name, request_id, c.acks, tuple(batch.values), c.request_timeout_ms,
                             self.producer_id if c.enable_idempotence else None,
                             self.producer_epoch if c.enable_idempotence else None,
                             batch.base_sequence, is_transactional=batch.txn is not None,
                             transactional_id=c.transactional_id)
        leader = self._leader
        assert leader is not None
        if not self.ctx.network.is_alive(leader):
            self._on_error(batch, "NETWORK_EXCEPTION")
            return
        self.ctx.post(self.name, leader, "on_produce", req)
        if c.acks == "0":
            self._complete(batch, None)
            return
        session = self.session
        now = self.ctx.now_ms
        if c.socket_timeout_ms is not None:
            # librdkafka: the client's own limit (ProducerConfig), found by the broker thread's
            # scan of its wait-response queue, which runs once a second
            # (rd_kafka_broker_serve: rd_interval(&rkb->rkb_timeout_scan_intvl, 1000000, now))
            due = now + max(1, min(c.socket_timeout_ms, batch.created_ms + c.delivery_timeout_ms - now))
            tick = self._scan_origin + -(-(due - self._scan_origin) // LIBRDKAFKA_SCAN_MS) * LIBRDKAFKA_SCAN_MS
            timer: Timer | _NoTimer = self.ctx.kernel.schedule(
                tick - now, lambda: self._request_timeout(session, request_id))
        else:
            self._deadline[request_id] = now + c.request_timeout_ms
            timer = _NO_TIMER
        self._in_flight[request_id] = (batch, timer)
        self._order.setdefault(leader, []).append(request_id)

    def _resolve_sequences(self) -> None:
        """``maybeResolveSequences`` then ``bumpIdempotentEpochAndResetIdIfNeeded``."""
        gap, self._unresolved, self._gap = self._gap, False, False
        if (self._acked_sequence == self._next_sequence and not gap) or self.producer_id is None:
            return
        assert self.producer_epoch is not None
        if self.ctx.generation >= Generation.DIVERGING_EPOCH and self.producer_epoch < 32767:
            self.producer_epoch += 1
            how = f"bumps its epoch to {self.producer_epoch}"
        else:
            self.producer_id = self.producer_epoch = None
            how = "asks for a new producer id"
        # The Java client renumbers every in-flight batch, also one whose earlier attempt the
        # leader may have appended (`TxnPartitionEntry.startSequencesAtBeginning`): under the new
        # epoch its duplicate is not recognised, so it can be written twice (KAFKA-14034).
        ready = sorted(self._ready, key=_BATCH_ID)
        sent = [v for b in ready if b.attempts > 0 for v in b.values]
        self.rewritten_values.update(sent)
        resent = f"; renumbers values {sent}, sent before under the old epoch" if sent else ""
        self.ctx.log_event("client", f"producer {self.name}: sequence gap after a failed batch "
                           f"(acknowledged up to {self._acked_sequence}, next "
                           f"{self._next_sequence}): {how} and restarts sequences at 0{resent}")
        self._next_sequence = self._acked_sequence = 0
        for batch in ready:
            batch.base_sequence = None

    def _complete(self, batch: _Batch, base_offset: int | None) -> None:
        batch.done = True
        if batch.base_sequence is not None and not self.transactional:
            self._acked_sequence = max(self._acked_sequence, batch.base_sequence + len(batch.values))
        if batch.expiry is not None:
            batch.expiry.cancel()
        for i, send_id in enumerate(batch.send_ids):
            self._finish(send_id, "ok", offset=None if base_offset is None else base_offset + i)
        self._drain()

    def _fail(self, batch: _Batch, error: str) -> None:
        self._note_batch_failed(batch.txn, error, batch.indeterminate)
        if batch.base_sequence is not None and not self.transactional:
            self._unresolved = True
        batch.done = True
        if batch.expiry is not None:
            batch.expiry.cancel()
        for send_id in batch.send_ids:
            self._finish(send_id, "info" if batch.indeterminate else "fail", error=error)
        self._drain()

    def on_produce_response(self, resp: ProduceResponse, src: object) -> None:
        """Answers are taken in request order per connection, as Kafka's broker sends them
        (it handles one request of a connection at a time): an answer that overtook an earlier
        request's waits for it."""
        if resp.request_id not in self._in_flight:
            self._poll()
            return  # answered after the client-side timeout: the connection was closed
        queue = next((q for q in self._order.values() if resp.request_id in q), None)
        if queue is not None and queue[0] != resp.request_id:
            self._early[resp.request_id] = resp
            self._poll()
            return
        self._take_response(resp)
        self._poll()

    def _take_response(self, resp: ProduceResponse) -> None:
        entry = self._in_flight.pop(resp.request_id, None)
        self._deadline.pop(resp.request_id, None)
        if entry is None:
            return
        batch, timer = entry
        timer.cancel()
        self._dequeue(resp.request_id)
        if resp.error is None:
            self._complete(batch, resp.base_offset)
        else:
            self._on_error(batch, resp.error)
        self._release_early()

    def _dequeue(self, request_id: int) -> None:
        for queue in self._order.values():
            if request_id in queue:
                queue.remove(request_id)

    def _release_early(self) -> None:
        for queue in self._order.values():
            if queue and queue[0] in self._early:
                self._take_response(self._early.pop(queue[0]))
                return

    def _poll(self, own_wake: bool = False) -> None:
        """The end of a turn of the Java client's network poll (``NetworkClient.poll``): after
        the answers that woke it (``handleCompletedReceives``), the requests past their
        ``request.timeout.ms`` (``handleTimedOutRequests``: the oldest of a connection closes
        it, :meth:`_request_timeout`). The client looks only when its poll wakes: on an answer,
        a new batch (``Sender.wakeup``), a timer of its own (linger, backoff), or after
        ``request.timeout.ms`` without any (``selector.poll(min(timeout, ...,
        defaultRequestTimeoutMs))``). So a request is given up some time after its deadline,
        and an answer that arrives in between, even late, is taken (on Kafka 4.3.1 here, an
        acks=all produce the broker timed out at the client's deadline was answered and
        retried, while the request behind it closed the connection: ``epochlab kafka fuzz``
        run 1, docs/kafka-run.md). librdkafka scans once a second instead (``_send_batch``)."""
        if self.config.socket_timeout_ms is not None:
            return
        now, session = self.ctx.now_ms, self.session
        if self._deadline:  # (no request in flight has a deadline: none is due)
            for dst in sorted(self._order):
                queue = self._order.get(dst)
                deadline = self._deadline.get(queue[0]) if queue else None
                if deadline is not None and (deadline < now or deadline == now and (own_wake or self._past_timeout())):
                    self._request_timeout(session, queue[0])
        self._last_poll = now
        if self._in_flight and self._poll_timer is None:
            self._poll_timer = self.ctx.kernel.schedule(self.config.request_timeout_ms,
                                                        lambda: self._poll_due(session))

    def _past_timeout(self) -> bool:
        """Whether a poll woken by something else (an answer, a new batch, a timer) in the
        very millisecond of a request's deadline finds it past its timeout.
        ``InFlightRequests.hasExpiredRequest`` gives a request up when ``now - sendTimeMs >
        requestTimeoutMs``, both read in whole milliseconds (``sendTimeMs`` is the sender's
        clock at the start of its turn, ``NetworkClient.doSend``; ``now`` is read after
        ``selector.poll`` returns), and where in their milliseconds the send and that wake
        fell, which the model does not know, decides whether the count is the timeout or one
        more. Live runs show both: in ``epochlab kafka fuzz`` seed 6 (Java) run 25 a request
        was still in flight when new sends woke the client exactly ``request.timeout.ms``
        after it, and in run 6 the broker's own timeout answer, arriving in that millisecond,
        was taken before the requests behind it were given up. So it is a fair draw, each
        wake its own, from the producer's stream for it. The poll's own sleep of
        ``request.timeout.ms`` (:meth:`_poll_due`) ends past the deadline instead: it began
        in the turn of the send or later and oversleeps a little (``own_wake``): of the nine
        requests the Java client gave up in seed 9's campaign, seven had waited 3,002-3,011 ms
        of a 3,000 ms timeout, none 3,001, and none the second timeout a miss at that wake
        would have cost."""
        return self.ctx.kernel.rng(f"{self.name}:poll-wake").random() < 0.5

    def _poll_due(self, session: int) -> None:
        """The poll's sleep of ``request.timeout.ms`` since its last turn ends (if nothing woke
        it since: then it sleeps on from that turn)."""
        if session != self.session:
            return
        self._poll_timer = None
        due = self._last_poll + self.config.request_timeout_ms
        if due > self.ctx.now_ms:
            if self._in_flight:
                self._poll_timer = self.ctx.kernel.schedule_at(due, lambda: self._poll_due(session))
            return
        self._drain(own_wake=True)

    def _request_timeout(self, session: int, request_id: int) -> None:
        """A request unanswered after ``request.timeout.ms`` (librdkafka: ``socket.timeout.ms``,
        ``rd_kafka_broker_timeout_scan``): the Java client closes the
        connection (``NetworkClient.handleTimedOutRequests`` -> ``processTimeoutDisconnection``),
        which fails every other request in flight on it as disconnected (NETWORK_EXCEPTION,
        retried; the broker may still write one of them: ``Broker.on_client_disconnect``)."""
        if session != self.session:
            return
        entry = self._in_flight.pop(request_id, None)
        self._early.pop(request_id, None)
        self._deadline.pop(request_id, None)
        if entry is None:
            return
        dst = next((d for d, q in self._order.items() if request_id in q), None)
        self._dequeue(request_id)
        others = self._disconnect(dst) if dst is not None else []
        self._on_error(entry[0], "REQUEST_TIMED_OUT")
        self._fail_disconnected(others)
        self._release_early()

    def _disconnect(self, broker: int) -> list[int]:
        """The client closes its connection to ``broker`` (a request on it timed out): the
        broker learns it, a metadata request on it fails with it; returns the ids of the
        produce requests that were in flight on it (:meth:`_fail_disconnected`)."""
        others = list(self._order.pop(broker, []))
        self.ctx.post(self.name, broker, "on_client_disconnect", ClientDisconnect(self.name, self.ctx.now_ms))
        # the close goes after what the connection holds (the FIN after the data); what the
        # client sends from now on goes on a new connection (epochlab.sim.network)
        self.ctx.network.close_connection(self.name, broker)
        self._connected.discard(broker)
        self._metadata_lost(broker)
        return others

    def _fail_disconnected(self, request_ids: list[int]) -> None:
        """The requests ``request_ids`` were in flight on a connection the client closed: each
        fails as disconnected (NETWORK_EXCEPTION, retried), possibly written."""
        for other in request_ids:
            pending = self._in_flight.pop(other, None)
            self._early.pop(other, None)
            self._deadline.pop(other, None)
            if pending is not None:
                pending[1].cancel()
                pending[0].indeterminate = True  # it may have been answered on the wire
                self._on_error(pending[0], "NETWORK_EXCEPTION")

    def on_connection_reset(self, broker: object, src: object) -> None:
        """``broker``'s process died and its kernel closed the connection
        (``SimContext.reset_connections``): every request in flight on it fails at once as
        disconnected (``NetworkClient.handleDisconnections``: NETWORK_EXCEPTION, retried after a
        metadata refresh), each possibly appended before the crash. With nothing in flight the
        client asks for metadata all the same, keeping the leader it knows until the answer:
        the disconnect may mean its metadata is stale (the Java client's
        ``DefaultMetadataUpdater.handleServerDisconnect``: ``metadata.requestUpdate``;
        librdkafka's ``rd_kafka_broker_fail``: a refresh of the known topics, "broker down"),
        so a send after a leader's shutdown goes to the new leader, not to the old one first."""
        self._connected.discard(broker)  # type: ignore[arg-type]
        lost = self._metadata_lost(broker)
        for request_id in self._order.pop(broker, []):  # type: ignore[call-overload]
            entry = self._in_flight.pop(request_id, None)
            self._early.pop(request_id, None)
            self._deadline.pop(request_id, None)
            if entry is not None:
                entry[1].cancel()
                entry[0].indeterminate = True
                self._on_error(entry[0], "NETWORK_EXCEPTION")
        self._release_early()
        if lost:
            self._drain()  # ask again (its metadata request went with the connection)
        else:
            self._refresh_metadata()
            self._poll()

    def _on_error(self, batch: _Batch, error: str) -> None:
        """Retry or fail one batch after an error (see the module doc)."""
        if error in _INDETERMINATE:
            batch.indeterminate = True
        if error in FENCING_ERRORS and self.config.transactional_id is not None:
            self._fence(error)
            return
        txn = batch.txn
        if txn is not None and (txn.end == "abort" or txn.failed):
            self._fail(batch, error)
            return
        retriable = error in _RETRIABLE or (
            error == "OUT_OF_ORDER_SEQUENCE_NUMBER" and self._out_of_order_retriable(batch))
        now, c = self.ctx.now_ms, self.config
        # the wait before this retry: retry.backoff.ms, or from G5 exponential in the batch's
        # attempts (RecordAccumulator.shouldBackoff: backoff(attempts - 1), KIP-580)
        wait = (self._backoff.backoff(max(batch.attempts - 1, 0)) if self._backoff is not None
                else c.retry_backoff_ms)
        within = now + wait < batch.created_ms + c.delivery_timeout_ms
        if not retriable or batch.attempts > c.retries or not within:
            self._fail(batch, error)
            return
        if error in _REFRESH and self._librdkafka and error in _TRANSPORT:
            # librdkafka keeps the partition on its leader's broker and asks for metadata
            # (rd_kafka_handle_Produce_error -> rd_kafka_toppar_leader_unavailable: a fast
            # leader query); the retry goes to that broker unless the answer names another
            self._refresh_metadata()
        elif error in _REFRESH:
            self._leader = None
        if self.config.enable_idempotence or self.config.socket_timeout_ms is not None:
            # by sequence (Java: RecordAccumulator.reenqueue -> insertInSequenceOrder) or by
            # message id (librdkafka: rd_kafka_toppar_retry_msgq -> rd_kafka_msgq_insert_msgq)
            self._ready.append(batch)
            self._ready.sort(key=_BATCH_ID)
        else:
            # the Java client without idempotence has no TransactionManager, and reenqueue
            # puts the batch at the head of its partition's queue (deque.addFirst): batches
            # failed together (answers in order, or a closed connection's requests handed
            # back oldest first by InFlightRequests.clearAll) are sent again newest first
            self._ready.insert(0, batch)
        self._backoff_until = now + wait
        session = self.session
        self.ctx.kernel.schedule(wait, lambda: self._wake(session))

    def _out_of_order_retriable(self, batch: _Batch) -> bool:
        """``TransactionManager.canRetry`` for OUT_OF_ORDER_SEQUENCE_NUMBER. From G4
        (KIP-360), idempotent: a batch that is not the next one after the acknowledged
        sequences (an earlier batch may still land, or this one was written already and its
        duplicate record evicted) is retried as it is; the next one is a real gap: the epoch
        is bumped and it is retried from sequence 0. Before, and for transactions, only a
        batch behind an unresolved earlier one is retried."""
        if self.transactional or self.ctx.generation < Generation.DIVERGING_EPOCH:
            return self._earlier_unresolved(batch)
        if not self._unresolved and batch.base_sequence != self._acked_sequence:
            return True
        # "For the idempotent producer, retry all OUT_OF_ORDER_SEQUENCE_NUMBER errors. If there
        # are no unresolved sequences, we know there is actually a gap in the sequences, and we
        # can bump the epoch. Otherwise, retry without bumping and wait to infer whether the
        # batch was written or not." (TransactionManager.canRetry)
        if not self._unresolved:
            self._unresolved = self._gap = True
        return True

    def _earlier_unresolved(self, batch: _Batch) -> bool:
        seq = batch.base_sequence if batch.base_sequence is not None else -1
        others = [b for b, _ in self._in_flight.values()] + self._ready
        return any(b.base_sequence is not None and b.base_sequence < seq and not b.done
                   for b in others)

    def _delivery_expired(self, session: int, batch: _Batch) -> None:
        if session != self.session or batch.done:
            return
        if batch in self._ready:
            self._ready.remove(batch)
            self._fail(batch, "DELIVERY_TIMEOUT")

    # -- metadata and producer id -----------------------------------------------------------
    def _refresh_metadata(self) -> None:
        if self._metadata_pending is not None or self._metadata_timer is not None:
            return
        if self._rebootstraps and self._outage_start() is not None:
            # no node to ask (DefaultMetadataUpdater.maybeUpdate): re-bootstrap when due, and
            # try again after the reconnect backoff
            self._topic_present()
            self._metadata_after(RECONNECT_BACKOFF_MAX_MS)
            return
        wait = self._metadata_backoff.wait_ms(self.ctx.now_ms) if self._metadata_backoff else 0
        if wait > 0:  # Metadata.timeToAllowUpdate (G5, KIP-580)
            self._metadata_after(wait)
            return
        if self._setup is not None and not self._librdkafka:
            self._ask_a_broker()
            return
        request_id = self._metadata_pending = self._next_id()
        self.ctx.post(self.name, "controller", "on_metadata", (self.name, request_id))
        session = self.session
        self.ctx.kernel.schedule(METADATA_TIMEOUT_MS, lambda: self._metadata_timeout(session, request_id))

    def _ask_a_broker(self) -> None:
        """Send a metadata request to the least loaded broker over the producer's connection to
        it, connecting first; or wait for a connection under way, or for a broker out of its
        reconnect backoff (module doc)."""
        network, now = self.ctx.network, self.ctx.now_ms
        assert self._reconnect is not None
        for _ in range(len(self._brokers())):
            node = self._least_loaded()
            if node is None:
                break
            if node not in self._connected:
                if self._connecting or not network.usable(self.name, node):
                    # a connection attempt under way holds every other one back
                    # (isAnyNodeConnecting); across a cut link one starts; the choice is made
                    # again after the reconnect backoff
                    if not self._connecting:
                        self._connect(node)
                    self._metadata_after(RECONNECT_BACKOFF_MS)
                    return
                if self._accepting(node):
                    self._connected.add(node)
                    self._connect_failures.pop(node, None)
            if node in self._connected and self._accepting(node):
                request_id = self._metadata_pending = self._next_id()
                self._metadata_node = node
                self.ctx.post(self.name, node, "on_metadata", (self.name, request_id))
                session = self.session
                self.ctx.kernel.schedule(self.config.request_timeout_ms,
                                         lambda: self._metadata_request_timeout(session, request_id))
                return
            # refused: the process is down or not serving yet (its endpoints are closed)
            self._connected.discard(node)
            failures = self._connect_failures[node] = self._connect_failures.get(node, 0) + 1
            self._refused_until[node] = now + self._reconnect.backoff(failures - 1)
        waits = [t - now for t in self._refused_until.values() if t > now]
        self._metadata_after(min(waits) if waits else RECONNECT_BACKOFF_MS)

    def _brokers(self) -> list[int]:
        """The brokers' ids, in order (the nodes of the producer's metadata)."""
        return sorted(b for b in self.ctx.routes() if isinstance(b, int))

    def _accepting(self, broker: int) -> bool:
        """Whether ``broker`` takes a connection: its process is up and serving, registered
        (``Broker.on_metadata``); else a connection attempt is refused."""
        return self.ctx.network.is_alive(broker) and bool(getattr(self.ctx.node(broker), "registered", True))

    def _least_loaded(self) -> int | None:
        """``NetworkClient.leastLoadedNode`` while a metadata update is due: from a random
        rotation of the brokers, the first with the fewest requests in flight among those not
        in their reconnect backoff; ``None`` when every one is."""
        assert self._nodes_rng is not None
        brokers, now = self._brokers(), self.ctx.now_ms
        if not brokers:
            return None
        offset = self._nodes_rng.randrange(len(brokers))
        best, fewest = None, 0
        for i in range(len(brokers)):
            node = brokers[(offset + i) % len(brokers)]
            if self._refused_until.get(node, 0) > now:
                continue
            in_flight = len(self._order.get(node, ()))
            if best is None or in_flight < fewest:
                best, fewest = node, in_flight
        return best

    def _metadata_request_timeout(self, session: int, request_id: int) -> None:
        """A metadata request to a broker unanswered after ``request_timeout_ms``: the client
        closes the connection (``NetworkClient.handleTimedOutRequests``), failing what else is
        in flight on it, and the attempt counts as failed."""
        if session != self.session or self._metadata_pending != request_id:
            return
        node = self._metadata_node
        assert node is not None
        self.ctx.log_event("client", f"producer {self.name}: disconnects from broker {node}: its "
                           "metadata request timed out")
        self._fail_disconnected(self._disconnect(node))
        self._release_early()
        self._drain()

    def _metadata_lost(self, node: object) -> bool:
        """The connection to ``node`` closed: a metadata request pending on it failed (then
        True)."""
        if self._metadata_pending is None or self._metadata_node != node:
            return False
        self._metadata_pending = self._metadata_node = None
        if self._metadata_backoff is not None:
            self._metadata_backoff.failed(self.ctx.now_ms)
        return True

    def _metadata_after(self, wait_ms: int) -> None:
        """Ask for metadata again (a turn of the sender) after ``wait_ms``."""
        session = self.session

        def allowed() -> None:
            if session == self.session:
                self._metadata_timer = None
                self._drain()
        self._metadata_timer = self.ctx.kernel.schedule(wait_ms, allowed)

    def _metadata_timeout(self, session: int, request_id: int) -> None:
        if session == self.session and self._metadata_pending == request_id:
            self._metadata_pending = None
            if self._metadata_backoff is not None:
                self._metadata_backoff.failed(self.ctx.now_ms)
            self._drain()

    def on_metadata_response(self, msg: tuple[int, int | None, int], src: object) -> None:
        self._on_metadata_response(msg)
        self._poll()

    def _on_metadata_response(self, msg: tuple[int, int | None, int]) -> None:
        request_id, leader, epoch = msg
        if request_id != self._metadata_pending:
            return
        self._metadata_pending = self._metadata_node = None
        if not self._topic_known:
            self._topic_learned()
        if leader is None and self._librdkafka:
            # librdkafka takes the partition from the broker it was delegated to
            # (rd_kafka_toppar_leader_update with no leader): no connection is wanted there
            self._leader = None
        if self._metadata_backoff is not None:
            self._metadata_backoff.answered(self.ctx.now_ms, epoch)
            if leader is None:  # OFFLINE: ask again when Metadata allows (G5, KIP-580)
                self._drain()
                return
        if leader is None:  # OFFLINE: ask again after the backoff
            session = self.session
            self.ctx.kernel.schedule(self.config.retry_backoff_ms, lambda: self._wake(session))
            return
        self._leader = leader
        self._drain()

    def _init_producer_id(self) -> None:
        if self.transactional:
            self._init_transactional_id()
            return
        if self._init_pending is not None:
            return
        request_id = self._init_pending = self._next_id()
        self.ctx.post(self.name, "controller", "on_init_producer_id",
                      (self.name, request_id, self.config.transactional_id))
        session = self.session

        def timeout() -> None:
            if session == self.session and self._init_pending == request_id:
                self._init_pending = None
                self._drain()
        self.ctx.kernel.schedule(METADATA_TIMEOUT_MS, timeout)

    def _on_plain_init_response(self, msg: tuple[int, tuple[int, int]]) -> None:
        request_id, (producer_id, producer_epoch) = msg
        if request_id != self._init_pending:
            return
        self._init_pending = None
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.ctx.log_event("client", f"producer {self.name}: producer id {producer_id} "
                           f"epoch {producer_epoch}")
        self._drain()
