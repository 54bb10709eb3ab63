"""The transaction coordinator (``docs/core-semantics.md`` rule 1.12): node ``"coordinator"``.

Per ``transactional.id`` it keeps Kafka's ``TransactionMetadata``: producer id, producer epoch,
the epoch before the last bump, the state (``Empty``, ``Ongoing``, ``PrepareCommit``,
``PrepareAbort``, ``CompleteCommit``, ``CompleteAbort``), the partitions of the transaction,
``transaction.timeout.ms`` and the transaction's start time. That table stands for the
``__transaction_state`` log: it is written *before* the coordinator acts on a change (answers a
client, sends a marker) and survives a crash. What a crash loses: marker requests in flight,
the leader cache, timers. A restart is a coordinator failover: the coordinator epoch (Kafka's
leader epoch of the ``__transaction_state`` partition) is bumped, the table is reloaded and
every transaction in a Prepare state has its markers sent again, with the new coordinator
epoch.

Requests (Kafka's ``TransactionCoordinator``, simplified to one data partition):

* InitProducerId: a new id (from the controller's producer-id blocks) with epoch 0; for a known
  id, an Ongoing transaction is fenced first (epoch bump, PrepareAbort, ABORT markers with the
  new epoch) and the client is told CONCURRENT_TRANSACTIONS to retry; in a Prepare state the
  same; otherwise the epoch is bumped and the state becomes Empty.
* AddPartitionsToTxn: PRODUCER_FENCED for an older epoch, CONCURRENT_TRANSACTIONS while a
  Prepare state is pending, else the partition joins the (now Ongoing) transaction. With
  ``verify_only`` it is KIP-890's verification from a partition leader: no error only if the
  producer's epoch is current, the state Ongoing and the partition part of it
  (INVALID_PRODUCER_EPOCH / INVALID_TXN_STATE otherwise).
* EndTxn: PRODUCER_FENCED for an older epoch, else Ongoing -> PrepareCommit / PrepareAbort, the
  answer once that is durable (before the markers: Kafka does the same), then one
  WriteTxnMarkers per partition to its leader, retried on NOT_LEADER, NOT_ENOUGH_REPLICAS and
  timeouts, until acknowledged (acks=all); then CompleteCommit / CompleteAbort. With KIP-890
  (transaction.version 2) EndTxn bumps the epoch, the markers carry the new epoch and the
  answer returns it; a retry with the previous epoch of a completed EndTxn is answered again.
* Every ``transaction_abort_timed_out_transaction_cleanup_interval_ms``, Ongoing transactions
  older than their ``transaction.timeout.ms`` are fenced and aborted.

Simplifications: one coordinator node (no replication of ``__transaction_state``; a crash is
followed by a restart of the same node with a new coordinator epoch); producer ids come from
the controller's counter (``Controller.allocate_producer_id``, handed in by the facade);
transactions span the one simulated partition.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from epochlab.sim.kernel import Timer
from epochlab.sim.messages import (
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnCoordinatorResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

if TYPE_CHECKING:
    from epochlab.sim.context import SimContext

__all__ = ["TransactionCoordinator", "TxnMetadata"]

MARKER_TIMEOUT_MS = 5000
RETRY_BACKOFF_MS = 100
_PREPARE = {"PrepareCommit": True, "PrepareAbort": False}
_RETRY_MARKER = {"NOT_LEADER_OR_FOLLOWER", "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
                 "REQUEST_TIMED_OUT", "NETWORK_EXCEPTION"}


@dataclass(frozen=True)
class TxnMetadata:
    """One ``transactional.id``'s durable state (a ``__transaction_state`` record).
    ``marker_epoch`` is the producer epoch the markers of a Prepare state carry."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    last_producer_epoch: int | None
    state: str
    partitions: tuple[str, ...]
    timeout_ms: int
    start_ms: int


class TransactionCoordinator:
    """The coordinator node. ``log`` is the durable table; ``bumps`` records every producer
    epoch bump ``(time_ms, producer_id, new_epoch)`` for the checker."""

    #: its events change no broker or controller state (``Kernel``: quiet events)
    QUIET = True

    def __init__(self, ctx: SimContext, kip890: bool, cleanup_interval_ms: int,
                 allocate_producer_id: Callable[[], int]) -> None:
        """``allocate_producer_id``: a new producer id from the cluster-wide counter (the
        controller's, which non-transactional producers draw from too)."""
        self.ctx = ctx
        self._allocate_producer_id = allocate_producer_id
        self.kip890 = kip890
        self.cleanup_interval_ms = cleanup_interval_ms
        self.log: dict[str, TxnMetadata] = {}
        self.coordinator_epoch = 0
        self.incarnation = 0
        self.alive = False
        self.bumps: list[tuple[int, int, int]] = []
        self._reset_volatile()

    def _reset_volatile(self) -> None:
        self._leader: int | None = None
        self._metadata_pending: int | None = None
        self._markers: dict[int, tuple[str, Timer]] = {}   # request id -> (tid, timeout)
        self._sending: set[str] = set()                      # tids with a marker in flight
        self._ids = 0

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        """Boot: a new incarnation; after a crash a new coordinator epoch, and every
        transaction in a Prepare state resumes sending its markers."""
        if self.alive:
            return
        if self.incarnation > 0:
            self.coordinator_epoch += 1
        self.incarnation += 1
        self.alive = True
        self.ctx.network.set_alive("coordinator", True)
        inc = self.incarnation

        def tick() -> None:
            if self.alive and self.incarnation == inc:
                self._abort_timed_out()
                self.ctx.kernel.schedule(self.cleanup_interval_ms, tick)
        self.ctx.kernel.schedule(self.cleanup_interval_ms, tick)
        for tid in sorted(self.log):
            if self.log[tid].state in _PREPARE:
                self._send_markers(tid)

    def crash(self) -> None:
        """Stop: marker sends in flight and caches are lost; the table is not."""
        if not self.alive:
            return
        self.alive = False
        self.ctx.network.set_alive("coordinator", False)
        for _, timer in self._markers.values():
            timer.cancel()
        self._reset_volatile()
        self.ctx.log_event("crash", f"transaction coordinator crashed (coordinator epoch "
                           f"{self.coordinator_epoch})")

    def restart(self) -> None:
        if not self.alive:
            self.start()
            self.ctx.log_event("restart", f"transaction coordinator restarted with "
                               f"coordinator epoch {self.coordinator_epoch}")

    def _write(self, meta: TxnMetadata) -> None:
        """Append to ``__transaction_state`` (durable before anything acts on it)."""
        old = self.log.get(meta.transactional_id)
        if old is not None and meta.producer_epoch != old.producer_epoch:
            self.bumps.append((self.ctx.now_ms, meta.producer_id, meta.producer_epoch))
        self.log[meta.transactional_id] = meta

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    def _reply(self, client: str, resp: TxnCoordinatorResponse, method: str) -> None:
        self.ctx.post("coordinator", client, method, resp)

    # -- InitProducerId ---------------------------------------------------------------------
    def on_init_producer_id(self, req: InitProducerIdRequest, src: object) -> None:
        meta = self.log.get(req.transactional_id)
        method = "on_init_producer_id_response"
        if meta is None:
            meta = TxnMetadata(req.transactional_id, self._allocate_producer_id(), 0, None,
                               "Empty", (), req.transaction_timeout_ms, self.ctx.now_ms)
            self._write(meta)
        elif meta.state == "Ongoing":
            self._fence_and_abort(meta, "InitProducerId from a new session")
            self._reply(req.client, TxnCoordinatorResponse(req.request_id, "CONCURRENT_TRANSACTIONS"), method)
            return
        elif meta.state in _PREPARE:
            self._reply(req.client, TxnCoordinatorResponse(req.request_id, "CONCURRENT_TRANSACTIONS"), method)
            return
        else:
            meta = replace(meta, producer_epoch=meta.producer_epoch + 1,
                           last_producer_epoch=meta.producer_epoch, state="Empty", partitions=(),
                           timeout_ms=req.transaction_timeout_ms)
            self._write(meta)
        self._reply(req.client, TxnCoordinatorResponse(req.request_id, None, meta.producer_id,
                                                       meta.producer_epoch), method)

    def _fence_and_abort(self, meta: TxnMetadata, why: str) -> None:
        """``prepareFenceProducerEpoch`` + abort: the epoch is bumped so that the old session
        is fenced everywhere, and the ABORT markers carry the new epoch."""
        fenced = replace(meta, producer_epoch=meta.producer_epoch + 1,
                         last_producer_epoch=meta.producer_epoch, state="PrepareAbort")
        self._write(fenced)
        self.ctx.log_event("client", f"coordinator: {why}: fences producer {meta.producer_id} "
                           f"epoch {meta.producer_epoch} -> {fenced.producer_epoch} and aborts "
                           f"its transaction ({meta.transactional_id})")
        self._send_markers(meta.transactional_id)

    # -- AddPartitionsToTxn -----------------------------------------------------------------
    def on_add_partitions_to_txn(self, req: AddPartitionsToTxnRequest, src: object) -> None:
        meta = self.log.get(req.transactional_id)
        error: str | None = None
        if req.verify_only:
            error = self._verify(meta, req)
            self.ctx.post("coordinator", src, "on_verify_response",  # type: ignore[arg-type]
                          TxnCoordinatorResponse(req.request_id, error))
            return
        if meta is None or meta.producer_id != req.producer_id:
            error = "INVALID_PRODUCER_ID_MAPPING"
        elif req.producer_epoch < meta.producer_epoch:
            error = "PRODUCER_FENCED"
        elif req.producer_epoch > meta.producer_epoch:
            error = "INVALID_PRODUCER_EPOCH"
        elif meta.state in _PREPARE:
            error = "CONCURRENT_TRANSACTIONS"
        else:
            start = meta.start_ms if meta.state == "Ongoing" else self.ctx.now_ms
            parts = meta.partitions if req.partition in meta.partitions else (*meta.partitions, req.partition)
            self._write(replace(meta, state="Ongoing", partitions=parts, start_ms=start))
        self._reply(req.client, TxnCoordinatorResponse(req.request_id, error),
                    "on_add_partitions_response")

    @staticmethod
    def _verify(meta: TxnMetadata | None, req: AddPartitionsToTxnRequest) -> str | None:
        if meta is None or meta.producer_id != req.producer_id:
            return "INVALID_PRODUCER_ID_MAPPING"
        if req.producer_epoch < meta.producer_epoch:
            return "INVALID_PRODUCER_EPOCH"
        if meta.state != "Ongoing" or req.partition not in meta.partitions \
                or req.producer_epoch != meta.producer_epoch:
            return "INVALID_TXN_STATE"
        return None

    # -- EndTxn -----------------------------------------------------------------------------
    def on_end_txn(self, req: EndTxnRequest, src: object) -> None:
        meta = self.log.get(req.transactional_id)
        method = "on_end_txn_response"
        target = "PrepareCommit" if req.commit else "PrepareAbort"
        complete = "CompleteCommit" if req.commit else "CompleteAbort"

        def answer(error: str | None, epoch: int | None = None) -> None:
            self._reply(req.client, TxnCoordinatorResponse(req.request_id, error, req.producer_id, epoch), method)

        if meta is None or meta.producer_id != req.producer_id:
            return answer("INVALID_PRODUCER_ID_MAPPING")
        retry = self.kip890 and req.producer_epoch == meta.last_producer_epoch \
            and req.producer_epoch + 1 == meta.producer_epoch
        if retry and meta.state == complete:
            return answer(None, meta.producer_epoch)
        if retry and meta.state == target:
            return answer("CONCURRENT_TRANSACTIONS")
        if req.producer_epoch < meta.producer_epoch:
            return answer("PRODUCER_FENCED")
        if req.producer_epoch > meta.producer_epoch:
            return answer("INVALID_PRODUCER_EPOCH")
        if meta.state == "Ongoing":
            epoch = meta.producer_epoch + 1 if self.kip890 else meta.producer_epoch
            self._write(replace(meta, state=target, producer_epoch=epoch,
                                last_producer_epoch=meta.producer_epoch if self.kip890 else meta.last_producer_epoch))
            answer(None, epoch)
            self._send_markers(req.transactional_id)
            return None
        if meta.state == complete:
            return answer(None, meta.producer_epoch)
        if meta.state == target:
            return answer("CONCURRENT_TRANSACTIONS")
        if meta.state == "Empty" and not req.commit:
            return answer(None, meta.producer_epoch)
        return answer("INVALID_TXN_STATE")

    # -- markers ----------------------------------------------------------------------------
    def _send_markers(self, tid: str) -> None:
        """Send the marker of ``tid``'s Prepare state to the partition leader (asking the
        controller for it first), unless one is in flight."""
        meta = self.log.get(tid)
        if not self.alive or meta is None or meta.state not in _PREPARE or tid in self._sending:
            return
        if not meta.partitions:
            self._complete(tid)
            return
        if self._leader is None:
            self._refresh_metadata()
            return
        request_id = self._next_id()
        req = WriteTxnMarkersRequest(request_id, meta.producer_id, meta.producer_epoch,
                                     self.coordinator_epoch, _PREPARE[meta.state], tid,
                                     2 if self.kip890 else 0)
        inc = self.incarnation
        timer = self.ctx.kernel.schedule(
            MARKER_TIMEOUT_MS, lambda: self._marker_timeout(inc, request_id))
        self._markers[request_id] = (tid, timer)
        self._sending.add(tid)
        self.ctx.post("coordinator", self._leader, "on_write_txn_markers", req)

    def _resend_all(self) -> None:
        for tid in sorted(self.log):
            if self.log[tid].state in _PREPARE:
                self._send_markers(tid)

    def _refresh_metadata(self) -> None:
        if self._metadata_pending is not None:
            return
        request_id = self._metadata_pending = self._next_id()
        self.ctx.post("coordinator", "controller", "on_metadata", ("coordinator", request_id))
        inc = self.incarnation

        def expire() -> None:
            if self.alive and self.incarnation == inc and self._metadata_pending == request_id:
                self._metadata_pending = None
                self._resend_all()
        self.ctx.kernel.schedule(MARKER_TIMEOUT_MS, expire)

    def on_metadata_response(self, msg: tuple[int, int | None, int], src: object) -> None:
        request_id, leader, _epoch = msg
        if request_id != self._metadata_pending:
            return
        self._metadata_pending = None
        self._leader = leader
        if leader is None:
            self._retry_later()
            return
        self._resend_all()

    def _retry_later(self) -> None:
        inc = self.incarnation

        def retry() -> None:
            if self.alive and self.incarnation == inc:
                self._resend_all()
        self.ctx.kernel.schedule(RETRY_BACKOFF_MS, retry)

    def _marker_timeout(self, inc: int, request_id: int) -> None:
        if self.alive and self.incarnation == inc and request_id in self._markers:
            self.on_write_txn_markers_response(WriteTxnMarkersResponse(request_id, "REQUEST_TIMED_OUT"), None)

    def on_write_txn_markers_response(self, resp: WriteTxnMarkersResponse, src: object) -> None:
        entry = self._markers.pop(resp.request_id, None)
        if entry is None:
            return
        tid, timer = entry
        timer.cancel()
        self._sending.discard(tid)
        if resp.error is None:
            self._complete(tid)
        elif resp.error in _RETRY_MARKER:
            self._leader = None
            self._retry_later()
        else:
            self.ctx.log_event("client", f"coordinator: marker for {tid} refused with "
                               f"{resp.error}; giving up on it")
            self._complete(tid)

    def _complete(self, tid: str) -> None:
        meta = self.log[tid]
        if meta.state not in _PREPARE:
            return
        state = "CompleteCommit" if _PREPARE[meta.state] else "CompleteAbort"
        self._write(replace(meta, state=state, partitions=()))

    # -- timeouts ---------------------------------------------------------------------------
    def _abort_timed_out(self) -> None:
        now = self.ctx.now_ms
        for tid in sorted(self.log):
            meta = self.log[tid]
            if meta.state == "Ongoing" and now - meta.start_ms > meta.timeout_ms:
                self._fence_and_abort(meta, f"transaction.timeout.ms {meta.timeout_ms} expired")

    # -- observation ------------------------------------------------------------------------
    def ongoing(self) -> list[str]:
        """Transactional ids whose transaction is not complete (Ongoing or Prepare)."""
        return [t for t in sorted(self.log) if self.log[t].state in ("Ongoing", *_PREPARE)]
