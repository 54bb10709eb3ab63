"""Transaction invariants (``docs/invariants.md`` 15 read_committed part, 20, 21).

Judged once, after the run, on the client history and the final replica logs:

============================  =====================================================================
name                          holds when
============================  =====================================================================
``Inv-ReadCommittedOnly``     a read_committed consumer never receives a value of a transaction
                              that did not commit (aborted, fenced, abandoned, still open) nor data
                              the final leader log marks aborted (15, Jepsen's G1a)
``Inv-ProducerFencing``       in every replica's log, each producer id's batches carry
                              non-decreasing producer epochs and its markers non-decreasing
                              coordinator epochs: nothing older is appended after a bump (20)
``Inv-TxnAtomicity``          in the read_committed view of the final leader log, every
                              transaction is visible whole or not at all; a committed one whole
                              once its records are below the LSO; a value of a transaction that
                              did not commit is never visible (it did not move into another
                              transaction) (21)
============================  =====================================================================

Transactions come from the history (``epochlab.sim.producer_txn``): the sends a process invokes
between its ``begin_txn`` and its next ``commit_txn``/``abort_txn`` invoke (or restart) form one
transaction; its outcome is ``committed`` (``commit_txn`` ok), ``aborted`` (``abort_txn`` ok),
``unknown`` (``commit_txn`` ended ``info``: it may have committed) or ``not-committed``
(fenced, failed, abandoned by a restart, or never ended). An end called with no transaction open
(a commit right after an abort, say) ends nothing: the producer refuses it at once, and its
answer is not the answer of an earlier transaction still ending. Record values are assumed
unique per run, as the executor and the scenarios produce them.

The *read_committed view* of a log is what a read_committed consumer reading it from the start
gets: data records below the LSO, minus those of aborted transactions (the fetch response's
aborted list applied the way Kafka's consumer does), control records skipped.

Classification: loss or divergence that the configuration permits (unclean election, too many
lossy crashes: the ``allowance`` of the state checker) makes 15 and 21 allowed; 20 never is.
Each is judged by what it reads: a value of a transaction that did not commit by the allowance
at the time of the read, anything judged on the final log (15's data marked aborted there, 21)
by the allowance at the run's end.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from epochlab.checks.verdict import ALLOWED, PROTOCOL, Violation

__all__ = ["TXN_INVARIANTS", "Transaction", "check_transactions", "read_committed_view",
           "transactions_from_history"]

TXN_INVARIANTS = ("Inv-ReadCommittedOnly", "Inv-ProducerFencing", "Inv-TxnAtomicity")
_FENCING = ("INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED")


@dataclass
class Transaction:
    """One transaction of the history. ``outcome``: ``committed``, ``aborted``, ``unknown``
    (a commit whose answer was lost) or ``not-committed``."""

    process: str
    number: int
    values: list[int] = field(default_factory=list)
    outcome: str = "not-committed"
    end_ms: int | None = None
    awaiting_abort: bool = False

    @property
    def may_be_committed(self) -> bool:
        return self.outcome in ("committed", "unknown")


def transactions_from_history(history: Sequence[Mapping[str, Any]]) -> list[Transaction]:
    """Every transaction of the history, in begin order (see the module doc)."""
    out: list[Transaction] = []
    open_: dict[str, Transaction] = {}
    ending: dict[str, list[Transaction]] = {}
    # per process, the end calls made with no transaction open whose answers are still to come
    idle_ends: dict[str, int] = {}
    for op in history:
        process, f, type_ = op["process"], op["f"], op["type"]
        if f == "begin_txn" and type_ == "ok":
            txn = Transaction(process, len(out))
            out.append(txn)
            open_[process] = txn
        elif f == "send" and type_ == "invoke" and process in open_:
            open_[process].values.append(op["value"])
        elif f in ("commit_txn", "abort_txn") and type_ == "invoke":
            pending = ending.get(process) or []
            if f == "abort_txn" and pending and pending[0].awaiting_abort:
                pending[0].awaiting_abort = False  # the abort after a refused commit
                continue
            closing = open_.pop(process, None)
            if closing is not None:
                ending.setdefault(process, []).append(closing)
            else:
                idle_ends[process] = idle_ends.get(process, 0) + 1
        elif f in ("commit_txn", "abort_txn"):
            if idle_ends.get(process):
                idle_ends[process] -= 1  # the refusal of an end with nothing open
                continue
            queue = ending.get(process) or []
            if not queue:
                continue
            txn = queue[0]
            txn.end_ms = op["time_ms"]
            if type_ == "fail" and op["error"] == "TRANSACTION_ABORTABLE":
                txn.awaiting_abort = True  # the producer's own abort follows
                continue
            queue.pop(0)
            if type_ == "ok":
                txn.outcome = "committed" if f == "commit_txn" else "aborted"
            elif type_ == "info" and f == "commit_txn":
                txn.outcome = "unknown"
        elif f == "restart" and type_ == "info":
            open_.pop(process, None)  # ending ones get their (info) outcome right after
    return out


def read_committed_view(log: Any) -> dict[int, int]:
    """offset -> value of what a read_committed consumer reading ``log`` from its start gets."""
    lso = log.last_stable_offset
    aborted = sorted((first, pid) for pid, first, _last, _l in log.aborted_transactions(0, lso))
    aborting: set[int] = set()
    out: dict[int, int] = {}
    for batch in log.batches():
        if batch.base_offset >= lso:
            break
        while aborted and aborted[0][0] <= batch.last_offset:
            aborting.add(aborted.pop(0)[1])
        if batch.is_control:
            if batch.control_type == "abort":
                aborting.discard(batch.producer_id)
            continue
        if batch.is_transactional and batch.producer_id in aborting:
            continue
        for i, value in enumerate(batch.records):
            if batch.base_offset + i < lso:
                out[batch.base_offset + i] = value
    return out


def check_transactions(history: Sequence[Mapping[str, Any]], leader_log: Any | None,
                       logs: Mapping[int, Any], read_committed: set[str],
                       allowance: Callable[[int | None], str | None],
                       step_of: Callable[[int], int | None], end_ms: int) -> list[Violation]:
    """Items 15 (read_committed part), 20 and 21 (module doc). ``leader_log`` is the final
    leader's log (``None`` without a leader: 15's log part and 21 are skipped), ``logs`` every
    replica's final log by broker, ``read_committed`` the read_committed consumers."""
    out: dict[str, Violation] = {}

    def add(name: str, time_ms: int, message: str, details: dict[str, Any], reason: str | None) -> None:
        if name not in out:
            out[name] = Violation(name, ALLOWED if reason else PROTOCOL, step_of(time_ms), time_ms,
                                  message, details, reason)

    txns = transactions_from_history(history)
    txn_of = {v: t for t in txns for v in t.values}
    loss = allowance(end_ms)
    view = read_committed_view(leader_log) if leader_log is not None else None
    visible = set(view.values()) if view is not None else set()
    logged = _all_values(leader_log) if leader_log is not None else {}
    final_lso = leader_log.last_stable_offset if leader_log is not None else 0

    # 15: what read_committed consumers actually received
    for op in history:
        if op["process"] not in read_committed or op["f"] != "poll" or op["type"] != "ok":
            continue
        for offset, value in op["value"] or ():
            txn = txn_of.get(value)
            bad = txn is not None and not txn.may_be_committed
            dropped = view is not None and logged.get(offset) == value and offset < final_lso \
                and offset not in view
            if bad or dropped:
                what = f"transaction {txn.number} of {txn.process} ({txn.outcome})" if txn else "aborted data"
                # a value of a transaction that did not commit is wrong when it is read; data the
                # final log marks aborted is judged on that log, so a loss the configuration
                # permits before the run's end allows it (a lost COMMIT marker: the producer's
                # next abort marker then covers the committed records from their offset on)
                add("Inv-ReadCommittedOnly", op["time_ms"],
                    f"read_committed consumer {op['process']} read value {value} at offset {offset} "
                    f"of {what}", {"process": op["process"], "offset": offset, "value": value,
                                   "op": op["index"], "transaction": txn.values if txn else None},
                    allowance(op["time_ms"]) if bad else loss)

    # 20: epochs never go back within a log
    for broker in sorted(logs):
        problem = _fencing_problem(logs[broker])
        if problem is not None:
            add("Inv-ProducerFencing", end_ms, f"broker {broker}: {problem[0]}",
                {"replica": broker, **problem[1]}, None)

    # 21: all or nothing in the read_committed view of the final leader log
    if view is not None:
        lso = final_lso
        offsets = {v: o for o, v in logged.items()}
        for txn in txns:
            seen = [v for v in txn.values if v in visible]
            if txn.may_be_committed:
                settled = all(offsets.get(v, -1) < lso for v in txn.values)
                partial = seen and len(seen) != len(txn.values)
                lost = not seen and txn.outcome == "committed" and txn.values and settled
                if (partial or lost) and settled:
                    add("Inv-TxnAtomicity", txn.end_ms or end_ms,
                        f"{txn.outcome} transaction {txn.number} of {txn.process} {txn.values}: "
                        f"read_committed sees only {seen}",
                        {"process": txn.process, "values": txn.values, "visible": seen,
                         "outcome": txn.outcome}, loss)
            elif seen:
                add("Inv-TxnAtomicity", txn.end_ms or end_ms,
                    f"transaction {txn.number} of {txn.process} {txn.values} did not commit "
                    f"({txn.outcome}), yet read_committed sees {seen}: its writes moved into "
                    "another transaction", {"process": txn.process, "values": txn.values,
                                            "visible": seen, "outcome": txn.outcome,
                                            "offsets": [offsets.get(v) for v in seen]}, loss)
    return sorted(out.values(), key=lambda v: (v.time_ms, v.invariant))


def _all_values(log: Any) -> dict[int, int]:
    return {b.base_offset + i: v for b in log.batches() if not b.is_control
            for i, v in enumerate(b.records)}


def _fencing_problem(log: Any) -> tuple[str, dict[str, Any]] | None:
    epochs: dict[int, int] = {}
    coordinator: dict[int, int] = {}
    for batch in log.batches():
        pid, epoch = batch.producer_id, batch.producer_epoch
        if pid is None or epoch is None:
            continue
        last = epochs.get(pid)
        if last is not None and epoch < last:
            return (f"producer {pid}: batch at offset {batch.base_offset} has producer epoch {epoch} "
                    f"after epoch {last}", {"producer_id": pid, "offset": batch.base_offset,
                                            "producer_epoch": epoch, "previous_epoch": last})
        epochs[pid] = epoch
        if batch.is_control and batch.coordinator_epoch is not None:
            c = batch.coordinator_epoch
            prev = coordinator.get(pid)
            if prev is not None and c < prev:
                return (f"producer {pid}: marker at offset {batch.base_offset} has coordinator "
                        f"epoch {c} after {prev}", {"producer_id": pid, "offset": batch.base_offset,
                                                    "coordinator_epoch": c, "previous": prev})
            coordinator[pid] = c
    return None
