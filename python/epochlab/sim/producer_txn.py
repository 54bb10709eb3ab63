"""The transactional half of the simulated producer (``docs/core-semantics.md`` rule 1.12; Java client
semantics, simplified).

``begin_transaction()`` opens a transaction locally; every ``send`` until
``commit_transaction()`` / ``abort_transaction()`` belongs to it. The calls return at once and
the work queues up, one transaction at a time, in call order:

1. InitProducerId at the coordinator on the first transaction of a session (a new session with
   the same ``transactional.id`` bumps the epoch and aborts the previous session's open
   transaction; CONCURRENT_TRANSACTIONS is retried after ``retry_backoff_ms``);
2. AddPartitionsToTxn before the transaction's first batch is sent;
3. its batches (transactional, producer id, epoch and per-epoch sequence);
4. once every batch has an outcome, EndTxn. A commit whose transaction saw a failed or
   unknown send outcome is refused locally (``commit_txn`` ``fail`` with
   ``TRANSACTION_ABORTABLE``) and turned into an abort; while aborting, unsent batches fail
   (``TRANSACTION_ABORTED``) and retries stop, but requests already on the wire are not
   recalled - the delayed-write hazard KIP-890 closes;
5. after EndTxn: with KIP-890 the answer carries the bumped epoch; before KIP-890 the epoch is
   bumped by a new InitProducerId only after an abort whose sends had an unknown outcome (what
   KIP-360 does so that sequences can restart). A new epoch restarts sequences at 0.

Fencing: INVALID_PRODUCER_EPOCH or PRODUCER_FENCED from a broker or the coordinator is fatal
for the session (the zombie): open sends and transaction operations fail with that error, and
so do later calls, until ``restart()``.

History: ``begin_txn`` (``invoke`` + ``ok``), ``commit_txn`` / ``abort_txn`` (``invoke`` with
``value`` = the values sent in the transaction, then ``ok``, ``fail`` with the Kafka error, or
``info`` when a restart cut it short, or when the session was fenced after an EndTxn the
coordinator may have taken: one without an answer, or one answered CONCURRENT_TRANSACTIONS).
Sends invoked between a ``begin_txn`` and the next ``commit_txn``/``abort_txn`` invoke (or
restart) of the same process belong to that transaction. A send outside a transaction on a
transactional producer fails at once (``fail`` with ``INVALID_TXN_STATE``) and writes nothing,
as both clients refuse it (``Producer.send``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from epochlab.sim.messages import (
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnCoordinatorResponse,
)

if TYPE_CHECKING:
    from epochlab.sim.config import ProducerConfig
    from epochlab.sim.context import SimContext

__all__ = ["FENCING_ERRORS", "TransactionalMixin", "Txn"]

FENCING_ERRORS = frozenset({"INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED"})
COORDINATOR_TIMEOUT_MS = 3000


@dataclass
class Txn:
    """One transaction of a session: its sends, and how far its end got."""

    number: int
    send_ids: list[int] = field(default_factory=list)
    values: list[int] = field(default_factory=list)
    added: bool = False
    end: str | None = None            # "commit" | "abort" once requested
    end_sent: bool = False
    end_may_apply: bool = False       # an EndTxn may have been taken (unanswered, or CONCURRENT_TRANSACTIONS)
    failed: str | None = None         # first error that made it abortable
    unknown: bool = False             # some send's outcome is unknown (KIP-360 bump needed)
    done: bool = False


class TransactionalMixin:
    """Transactional state and coordinator traffic of :class:`~epochlab.sim.producer.Producer`."""

    ctx: SimContext
    name: str
    config: ProducerConfig
    session: int
    producer_id: int | None
    producer_epoch: int | None
    _next_sequence: int
    _open: set[int]
    _values: dict[int, int]

    def _drain(self) -> None:  # pragma: no cover - provided by Producer
        raise NotImplementedError

    def _reset_transactions(self) -> None:
        self._txns: list[Txn] = []
        self._open_txn: Txn | None = None
        self._fenced: str | None = None
        self._txn_pending: tuple[str, int] | None = None   # (kind, request id) at the coordinator
        self._txn_numbers = getattr(self, "_txn_numbers", 0)

    # -- public API -------------------------------------------------------------------------
    @property
    def transactional(self) -> bool:
        return self.config.transactional_id is not None

    def begin_transaction(self) -> None:
        """Open a transaction (locally, as Kafka's ``beginTransaction``)."""
        self._require_transactional("begin_transaction")
        self.ctx.record(self.name, "invoke", "begin_txn")
        if self._fenced is not None or self._open_txn is not None:
            error = self._fenced or "INVALID_TXN_STATE"
            self.ctx.record(self.name, "fail", "begin_txn", error=error)
            return
        self._txn_numbers += 1
        self._open_txn = Txn(self._txn_numbers)
        self._txns.append(self._open_txn)
        self.ctx.record(self.name, "ok", "begin_txn", value=self._txn_numbers)
        self._drain()

    def commit_transaction(self) -> None:
        """Commit the open transaction once its sends completed (asynchronous)."""
        self._end_transaction("commit")

    def abort_transaction(self) -> None:
        """Abort the open transaction (asynchronous)."""
        self._end_transaction("abort")

    @property
    def transactions_pending(self) -> int:
        """Transactions begun and not yet finished (committed, aborted or failed)."""
        return sum(1 for t in self._txns if not t.done)

    def _require_transactional(self, what: str) -> None:
        if not self.transactional:
            from epochlab.errors import ScenarioError

            raise ScenarioError(f"{what} needs a producer with transactional.id", where="<python>",
                                field="producer", expected="a transactional producer",
                                got=repr(self.name))

    def _end_transaction(self, kind: str) -> None:
        self._require_transactional(f"{kind}_transaction")
        txn = self._open_txn
        f = f"{kind}_txn"
        self.ctx.record(self.name, "invoke", f, value=list(txn.values) if txn else [])
        if txn is None or self._fenced is not None:
            self.ctx.record(self.name, "fail", f, value=list(txn.values) if txn else [],
                            error=self._fenced or "INVALID_TXN_STATE")
            if txn is not None:
                txn.done = True
                self._open_txn = None
            return
        self._open_txn = None
        txn.end = kind
        self._drain()

    # -- hooks used by the producer ---------------------------------------------------------
    def _txn_of_new_send(self, send_id: int, value: int) -> Txn | None:
        txn = self._open_txn
        if txn is not None:
            txn.send_ids.append(send_id)
            txn.values.append(value)
        return txn

    def _head_txn(self) -> Txn | None:
        for txn in self._txns:
            if not txn.done:
                return txn
        return None

    def _txn_blocks(self, txn: Txn | None) -> bool:
        """Whether a batch of ``txn`` must wait (not the head transaction, or its partition
        is not added yet)."""
        if txn is None:
            return False
        return txn is not self._head_txn() or not txn.added

    def _txn_step(self, incomplete: Any) -> None:
        """Advance the head transaction: AddPartitionsToTxn, EndTxn, local completion.
        ``incomplete(txn)`` says whether some batch or send of ``txn`` is still open."""
        txn = self._head_txn()
        if txn is None or self._txn_pending is not None or self.producer_id is None:
            return
        if txn.end is None:
            if not txn.added and incomplete(txn):
                self._send_add_partitions()
            return
        if txn.end == "abort" or txn.failed:
            self._abort_unsent(txn)
            if txn.done or self._head_txn() is not txn or self._txn_pending is not None:
                return  # a nested step (the failed sends drained the producer) moved on
        if incomplete(txn):
            if not txn.added and not txn.failed and txn.end == "commit":
                self._send_add_partitions()
            return
        if txn.end == "commit" and txn.failed:
            self.ctx.record(self.name, "fail", "commit_txn", value=list(txn.values),
                            error="TRANSACTION_ABORTABLE")
            txn.end = "abort"
            self.ctx.record(self.name, "invoke", "abort_txn", value=list(txn.values))
        if not txn.added:
            self._finish_txn(txn, None)
            return
        self._send_end_txn(txn)

    # -- coordinator requests ---------------------------------------------------------------
    def _coordinator_request(self, kind: str, method: str, msg_of: Any) -> None:
        request_id = self._next_id()  # type: ignore[attr-defined]
        self._txn_pending = (kind, request_id)
        self.ctx.post(self.name, "coordinator", method, msg_of(request_id))
        session = self.session

        def expire() -> None:
            if session == self.session and self._txn_pending == (kind, request_id):
                self._txn_pending = None
                txn = self._head_txn()
                if kind == "end" and txn is not None:
                    txn.end_may_apply = True  # the coordinator may have taken it
                self._drain()
        self.ctx.kernel.schedule(COORDINATOR_TIMEOUT_MS, expire)

    def _init_transactional_id(self) -> None:
        if self._txn_pending is not None:
            return
        tid = self.config.transactional_id
        assert tid is not None
        self._coordinator_request("init", "on_init_producer_id", lambda rid: InitProducerIdRequest(
            self.name, rid, tid, self.config.transaction_timeout_ms))

    def _send_add_partitions(self) -> None:
        assert self.producer_id is not None and self.producer_epoch is not None
        tid, pid, epoch = self.config.transactional_id or "", self.producer_id, self.producer_epoch
        self._coordinator_request("add", "on_add_partitions_to_txn", lambda rid: AddPartitionsToTxnRequest(
            self.name, rid, tid, pid, epoch, self.ctx.topic_partition))

    def _send_end_txn(self, txn: Txn) -> None:
        assert self.producer_id is not None and self.producer_epoch is not None
        tid, pid, epoch = self.config.transactional_id or "", self.producer_id, self.producer_epoch
        commit = txn.end == "commit"
        txn.end_sent = True
        self._coordinator_request("end", "on_end_txn", lambda rid: EndTxnRequest(
            self.name, rid, tid, pid, epoch, commit))

    def _accept(self, resp: TxnCoordinatorResponse, kind: str) -> bool:
        if self._txn_pending != (kind, resp.request_id):
            return False
        self._txn_pending = None
        return True

    def _retry_after_backoff(self) -> None:
        session = self.session
        self.ctx.kernel.schedule(self.config.retry_backoff_ms,
                                 lambda: self._wake(session))  # type: ignore[attr-defined]

    def on_init_producer_id_response(self, resp: Any, src: object) -> None:
        if not isinstance(resp, TxnCoordinatorResponse):
            self._on_plain_init_response(resp)  # type: ignore[attr-defined]
            return
        if not self._accept(resp, "init"):
            return
        if resp.error is not None:
            self._retry_after_backoff()
            return
        self._new_epoch(resp.producer_id, resp.producer_epoch)
        self._drain()

    def on_add_partitions_response(self, resp: TxnCoordinatorResponse, src: object) -> None:
        if not self._accept(resp, "add"):
            return
        txn = self._head_txn()
        if resp.error is None:
            if txn is not None:
                txn.added = True
        elif resp.error in FENCING_ERRORS:
            self._fence(resp.error)
            return
        elif resp.error != "CONCURRENT_TRANSACTIONS" and txn is not None:
            txn.failed = txn.failed or resp.error
        self._retry_after_backoff() if resp.error else self._drain()

    def on_end_txn_response(self, resp: TxnCoordinatorResponse, src: object) -> None:
        if not self._accept(resp, "end"):
            return
        txn = self._head_txn()
        if txn is None:
            return
        if resp.error in FENCING_ERRORS:
            self._fence(resp.error or "PRODUCER_FENCED")
            return
        if resp.error is not None:
            if resp.error == "CONCURRENT_TRANSACTIONS":
                # the coordinator is completing an end it took: an earlier EndTxn of this
                # transaction whose answer the client did not get
                txn.end_may_apply = True
                self._retry_after_backoff()
                return
            self._finish_txn(txn, resp.error)
            return
        if resp.producer_epoch is not None and resp.producer_epoch != self.producer_epoch:
            self._new_epoch(resp.producer_id, resp.producer_epoch)
        self._finish_txn(txn, None)

    def _new_epoch(self, producer_id: int | None, producer_epoch: int | None) -> None:
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self._next_sequence = 0
        self.ctx.log_event("client", f"producer {self.name}: producer id {producer_id} "
                           f"epoch {producer_epoch}")

    def _finish_txn(self, txn: Txn, error: str | None) -> None:
        if txn.done:
            return
        txn.done = True
        f = f"{txn.end}_txn"
        self.ctx.record(self.name, "fail" if error else "ok", f, value=list(txn.values), error=error)
        if txn.end == "abort" and txn.unknown and not self.ctx.kip890:
            # KIP-360: restart sequences under a new epoch (a fresh InitProducerId bumps it)
            self.producer_id = self.producer_epoch = None
        self._drain()

    # -- failures ---------------------------------------------------------------------------
    def _note_batch_failed(self, txn: Txn | None, error: str, unknown: bool) -> None:
        if txn is None:
            return
        txn.failed = txn.failed or error
        txn.unknown = txn.unknown or unknown

    def _abort_unsent(self, txn: Txn) -> None:
        """Fail the transaction's batches that were not sent yet (Java's
        ``abortUndrainedBatches``)."""
        ready: list[Any] = self._ready  # type: ignore[has-type]
        accumulated: list[Any] = self._accumulator  # type: ignore[has-type]
        unsent = [b for b in ready if b.txn is txn and b.attempts == 0]
        self._ready = [b for b in ready if not (b.txn is txn and b.attempts == 0)]
        queued = [e for e in accumulated if e[3] is txn]
        self._accumulator = [e for e in accumulated if e[3] is not txn]
        # sends still waiting for the topic's metadata (a re-bootstrap) end with it too
        awaiting: list[Any] = self._awaiting_topic  # type: ignore[attr-defined]
        queued += [e for e in awaiting if e[2] is txn]
        for entry in queued:
            self._finish(entry[0], "fail", error="TRANSACTION_ABORTED")  # type: ignore[attr-defined]
        self._forget_ended_waits()  # type: ignore[attr-defined]
        for batch in unsent:
            self._fail(batch, "TRANSACTION_ABORTED")  # type: ignore[attr-defined]

    def _fence(self, error: str) -> None:
        """The session is a zombie: everything open fails with ``error``."""
        if self._fenced is not None:
            return
        self._fenced = error
        self.ctx.log_event("client", f"producer {self.name} fenced: {error}")
        in_flight = {s for b, _ in self._in_flight.values() for s in b.send_ids}  # type: ignore[attr-defined]
        for send_id in sorted(self._open):
            self._finish(send_id, "info" if send_id in in_flight else "fail",  # type: ignore[attr-defined]
                         error=error)
        for txn in self._txns:
            if txn.done:
                continue
            txn.done = True
            if txn.end is not None:
                # Fenced after an EndTxn the coordinator may have taken: the transaction may
                # have ended as asked (a KIP-890 retry is recognised only until the next epoch
                # bump, TransactionCoordinator.handleEndTransaction; after it the retry is
                # PRODUCER_FENCED), so the outcome is unknown, not a failure.
                self.ctx.record(self.name, "info" if txn.end_may_apply else "fail", f"{txn.end}_txn",
                                value=list(txn.values), error=error)
        self._open_txn = None
        self._ready.clear()  # type: ignore[attr-defined]
        self._accumulator.clear()  # type: ignore[attr-defined]
        self._forget_ended_waits()  # type: ignore[attr-defined]

    def _abandon_transactions(self) -> None:
        """A restart: transaction operations in progress end with an unknown outcome."""
        for txn in self._txns:
            if not txn.done and txn.end is not None:
                self.ctx.record(self.name, "info", f"{txn.end}_txn", value=list(txn.values),
                                error="PRODUCER_RESTARTED")
