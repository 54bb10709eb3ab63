"""Client-history invariants in Jepsen's Kafka vocabulary (``docs/invariants.md`` 13-19, 23).

Judged once, after the run, on the history (``HistoryOp`` dicts), the final leader's log and
the ground truth kept by :class:`~epochlab.checks.state.StateChecker` (which offsets were
committed with which value, ``trueHW`` over time, the allowances):

============================  =====================================================================
name                          holds when
============================  =====================================================================
``inconsistent-offsets``      no offset is observed (acks, polls, final log) with two values (13)
``lost-write``                no acked value is missing from every read while a consumer's reads
                              cover its offset; every acks=all value is in the final log (14)
``Inv-ReadCommittedOnly``     every polled offset was below ``trueHW`` when it was read (15)
``Inv-ConsistentRead``        a polled (offset, value) is still there in the final log (16)
``duplicate``                 an idempotent producer's value is in the final log at most once (18)
``nonmonotonic-send``         an idempotent producer's values keep send order in the log (19)
``nonmonotonic-poll``         a consumer's polls never go back without a crash or reset (23)
``poll-skip``                 ... and never skip an offset (23)
``Inv-ClientHWMonotone``      the latest offset ListOffsets answers (the HW, read_uncommitted)
                              never decreases, across all clients (17)
============================  =====================================================================

Classification: an acks=1 value that was never committed may vanish or be overwritten; a
non-idempotent producer may duplicate or reorder on retry, an idempotent one may duplicate a
batch it renumbered under a bumped epoch after sending it once (the Java client's
``startSequencesAtBeginning``, KAFKA-14034), and the first copy of such a batch may stand
before an earlier send when a leader without the producer's state took it first (its
renumbered copy then follows in order); ``auto.offset.reset`` may move a
consumer; loss after an unclean election or too many lossy crashes is allowed (``allowance``).
Inv-ClientHWMonotone (17) reads the consumers' ``list_offsets`` answers: from 2.2 (KIP-207) a
new leader answers OFFSET_NOT_AVAILABLE until its HW reaches its epoch's start offset, so the
answers never go back; before, a new leader answered its stale HW (KAFKA-2334). The LSO
(read_committed) and a fetch response's HW are not covered: KIP-207 guards ListOffsets only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from epochlab.checks.verdict import ALLOWED, PROTOCOL, Violation

__all__ = ["HISTORY_INVARIANTS", "check_history"]

HISTORY_INVARIANTS = ("inconsistent-offsets", "lost-write", "Inv-ReadCommittedOnly",
                      "Inv-ConsistentRead", "duplicate", "nonmonotonic-send",
                      "nonmonotonic-poll", "poll-skip", "Inv-ClientHWMonotone")


class _Report:
    def __init__(self, step_of: Callable[[int], int | None]) -> None:
        self.step_of = step_of
        self.out: dict[str, Violation] = {}

    def add(self, name: str, time_ms: int, message: str, details: dict[str, Any],
            reason: str | None) -> None:
        verdict = ALLOWED if reason else PROTOCOL
        old = self.out.get(name)
        # Keep the first protocol violation; an allowed one only until a real one shows up.
        if old is not None and (old.verdict == PROTOCOL or verdict == ALLOWED):
            return
        self.out[name] = Violation(name, verdict, self.step_of(time_ms), time_ms, message,
                                   details, reason)


def check_history(history: Sequence[Mapping[str, Any]], final_log: Mapping[int, int],
                  committed: Mapping[int, int], true_hw_at: Callable[[int], int],
                  allowance: Callable[[int | None], str | None], idempotent: set[str],
                  step_of: Callable[[int], int | None], resets: Mapping[str, list[int]],
                  end_ms: int, skippable: Mapping[str, set[int]] | None = None,
                  rewritten: set[int] | None = None,
                  no_idempotence: str | None = None) -> list[Violation]:
    """Every history invariant's first failure. ``final_log``: offset -> value of the final
    leader; ``committed``: offset -> value below ``trueHW``; ``resets``: consumer -> times of
    ``auto.offset.reset`` events; ``skippable``: consumer -> offsets it never receives by
    design (transaction markers; aborted data for read_committed), which a poll may step over;
    ``rewritten``: values an idempotent producer sent, then renumbered under a new epoch
    (:attr:`epochlab.sim.producer.Producer.rewritten_values`), which the Java client may
    write twice. ``no_idempotence``: why the run's releases have no idempotent producer at all
    (hw-truncation: KIP-98 came in 0.11.0); its duplicates and reorderings are then allowed
    with that reason, whatever the producer's configuration says."""
    rep = _Report(step_of)
    acks = [op for op in history if op["f"] == "send" and op["type"] == "ok" and op["offset"] is not None]
    polls = [op for op in history if op["f"] == "poll" and op["type"] == "ok" and op["value"]]
    producer_of = {op["value"]: op["process"] for op in history if op["f"] == "send" and op["type"] == "invoke"}
    end_reason = allowance(None)

    def acked_reason(op: Mapping[str, Any]) -> str | None:
        if op["acks"] != "all" and committed.get(op["offset"]) != op["value"]:
            return f"acks={op['acks']}: acknowledged before it was replicated, never committed"
        return allowance(end_ms)

    # 13: inconsistent offsets
    seen: dict[int, tuple[int, Mapping[str, Any] | None]] = {}
    observations: list[tuple[int, int, Mapping[str, Any] | None]] = \
        [(op["offset"], op["value"], op) for op in acks] + \
        [(o, v, op) for op in polls for o, v in op["value"]] + \
        [(o, v, None) for o, v in sorted(final_log.items())]
    for offset, value, op in observations:
        first = seen.setdefault(offset, (value, op))
        if first[0] == value:
            continue
        ops = [x for x in (first[1], op) if x is not None]
        reason = next((acked_reason(x) for x in ops if x["f"] == "send" and acked_reason(x)), None)
        reason = reason or allowance(end_ms)
        time_ms = op["time_ms"] if op is not None else end_ms
        rep.add("inconsistent-offsets", time_ms,
                f"offset {offset} observed with values {first[0]} and {value}",
                {"offset": offset, "values": [first[0], value],
                 "ops": [x["index"] for x in ops], "processes": [x["process"] for x in ops],
                 "final_log": final_log.get(offset)}, reason)

    # 14: lost write (a transactional value counts only if its transaction committed: a
    # read_committed consumer rightly never reads the others)
    from epochlab.checks.transactions import transactions_from_history

    uncommitted = {v for t in transactions_from_history(history) if t.outcome != "committed"
                   for v in t.values}
    read_values = {v for op in polls for _, v in op["value"]}
    spans = {}
    for op in polls:
        offsets = [o for o, _ in op["value"]]
        lo, hi = spans.get(op["process"], (offsets[0], offsets[-1]))
        spans[op["process"]] = (min(lo, min(offsets)), max(hi, max(offsets)))
    for op in acks:
        a, v = op["offset"], op["value"]
        if v not in read_values and v not in uncommitted and any(lo <= a < hi for lo, hi in spans.values()):
            rep.add("lost-write", op["time_ms"], f"value {v} acked at offset {a} was never read, "
                    "though reads covered that offset",
                    {"value": v, "offset": a, "acks": op["acks"], "process": op["process"],
                     "op": op["index"], "final_log": final_log.get(a)}, acked_reason(op))
        elif op["acks"] == "all" and final_log.get(a) != v:
            rep.add("lost-write", op["time_ms"], f"value {v} acked (acks=all) at offset {a} is not "
                    f"in the final leader log ({_holding(final_log.get(a), a)})",
                    {"value": v, "offset": a, "acks": "all", "process": op["process"],
                     "op": op["index"], "final_log": final_log.get(a)}, allowance(end_ms))

    # 15, 16: reads below trueHW, and still there at the end
    for op in polls:
        for o, v in op["value"]:
            hw = true_hw_at(op["time_ms"])
            if o >= hw:
                rep.add("Inv-ReadCommittedOnly", op["time_ms"], f"{op['process']} read offset {o} "
                        f"(value {v}) at or above trueHW {hw}",
                        {"offset": o, "value": v, "true_high_watermark": hw,
                         "process": op["process"], "op": op["index"]}, allowance(op["time_ms"]))
            if final_log.get(o) != v:
                rep.add("Inv-ConsistentRead", op["time_ms"], f"{op['process']} read value {v} at "
                        f"offset {o}; the final leader log holds {final_log.get(o)} there",
                        {"offset": o, "value": v, "final_log": final_log.get(o),
                         "process": op["process"], "op": op["index"]}, end_reason)

    # 18, 19: duplicates and order in the final log
    positions: dict[int, list[int]] = {}
    for offset, value in sorted(final_log.items()):
        positions.setdefault(value, []).append(offset)
    for value, offsets in sorted(positions.items()):
        if len(offsets) > 1:
            process = producer_of.get(value)
            if process not in idempotent:
                reason: str | None = f"producer {process} has enable.idempotence=false: a retry may append twice"
            elif no_idempotence:
                reason = f"producer {process}: {no_idempotence}, so a retry may append twice"
            elif rewritten and value in rewritten:
                reason = (f"producer {process} bumped its epoch after a sequence gap and renumbered "
                          f"the batch of value {value}, already sent once under the old epoch: the "
                          "Java client does the same "
                          "(TransactionManager.canRetry, bumpIdempotentProducerEpoch, "
                          "TxnPartitionEntry.startSequencesAtBeginning; KAFKA-14034)")
            else:
                reason = None
            rep.add("duplicate", end_ms, f"value {value} appears at offsets {offsets}",
                    {"value": value, "offsets": offsets, "process": process}, reason or end_reason)
    sessions: dict[str, list[list[int]]] = {}
    # value -> the first send of its session that ended without an acknowledgement ("fail" or
    # "info"), sent before it: the idempotent producer then bumps its epoch and renumbers the
    # batches still waiting, while the leader may have taken a later batch already (a
    # producer it has no state for is accepted at any sequence: ProducerAppendInfo.checkSequence),
    # so order is kept only up to the first failed send (TransactionManager.markSequenceUnresolved,
    # bumpIdempotentProducerEpoch).
    failed_before: dict[int, int] = {}
    session_failed: dict[str, int | None] = {}
    unacked = {op["value"] for op in history if op["f"] == "send" and op["type"] in ("fail", "info")}
    for op in history:
        if op["f"] == "restart" and op["process"] in idempotent:
            sessions.setdefault(op["process"], []).append([])
            session_failed[op["process"]] = None
        elif op["f"] == "send" and op["type"] == "invoke" and op["process"] in idempotent:
            sessions.setdefault(op["process"], [[]])[-1].append(op["value"])
            earlier = session_failed.get(op["process"])
            if earlier is not None:
                failed_before[op["value"]] = earlier
            elif op["value"] in unacked:
                session_failed[op["process"]] = op["value"]
    for process, runs in sorted(sessions.items()):
        for values in runs:
            logged = [(positions[v][0], v) for v in values if v in positions]
            for (o1, v1), (o2, v2) in zip(logged, logged[1:]):
                if o2 < o1:
                    failed = failed_before.get(v2)
                    reason = None if failed is None else (
                        f"{process}'s earlier send of {failed} ended without an acknowledgement: "
                        "the idempotent producer renumbers its waiting batches, and the order is "
                        "kept only up to the first failed send (KIP-360)")
                    if reason is None and no_idempotence:
                        reason = f"{no_idempotence}: a retry may reorder"
                    if reason is None and rewritten and v2 in rewritten and max(positions[v2]) > o1:
                        # the copy out of order is the one written under the old epoch; the
                        # renumbered copy follows v1, as sent
                        reason = (
                            f"{process} renumbered the batch of value {v2} under a bumped epoch after "
                            f"a leader had already written it once under the old epoch, ahead of {v1} "
                            "(a leader with no state for the producer takes a first batch at any "
                            "sequence: ProducerAppendInfo.checkSequence); its renumbered copy at "
                            f"{max(positions[v2])} follows {v1}: the Java client does the same "
                            "(TransactionManager.canRetry, bumpIdempotentProducerEpoch, "
                            "TxnPartitionEntry.startSequencesAtBeginning; KAFKA-14034, unfixed)")
                    rep.add("nonmonotonic-send", end_ms, f"{process} sent {v1} before {v2} but the "
                            f"log has {v2} at {o2} before {v1} at {o1}",
                            {"process": process, "values": [v1, v2], "offsets": [o1, o2]},
                            reason or end_reason)
                    break

    # 23: poll order per consumer session
    last: dict[str, tuple[int, int]] = {}
    for op in history:
        process = op["process"]
        if op["type"] == "info" and op["f"] in ("crash", "restart", "poll"):
            last.pop(process, None)
            continue
        if op["f"] != "poll" or op["type"] != "ok" or not op["value"]:
            continue
        for o, _ in op["value"]:
            prev = last.get(process)
            last[process] = (o, op["time_ms"])
            skip = (skippable or {}).get(process, set())
            if prev is None or o == prev[0] + 1 or (
                    o > prev[0] and all(x in skip for x in range(prev[0] + 1, o))):
                continue
            reset = any(prev[1] <= t <= op["time_ms"] for t in resets.get(process, []))
            reason = f"auto.offset.reset moved {process}'s position" if reset else allowance(op["time_ms"])
            if reason is None and skippable is not None and end_reason and o > prev[0]:
                reason = (f"{end_reason}; the skipped offsets may have held transaction markers or "
                          "aborted data in a log that was replaced later")
            name = "nonmonotonic-poll" if o <= prev[0] else "poll-skip"
            rep.add(name, op["time_ms"], f"{process} polled offset {o} right after {prev[0]}",
                    {"process": process, "previous_offset": prev[0], "offset": o,
                     "op": op["index"]}, reason)

    # 17: ListOffsets(latest) never goes back, whoever asks (KIP-207, KAFKA-2334)
    highest: tuple[int, Mapping[str, Any]] | None = None
    for op in history:
        if op["f"] != "list_offsets" or op["type"] != "ok" or not isinstance(op["value"], list) \
                or op["value"][0] != "latest":
            continue
        offset = op["value"][1]
        if highest is not None and offset < highest[0]:
            before = highest[1]
            rep.add("Inv-ClientHWMonotone", op["time_ms"],
                    f"{op['process']} was told the latest offset is {offset} after {before['process']} "
                    f"was told {highest[0]} at {before['time_ms']} ms",
                    {"process": op["process"], "offset": offset, "previous_offset": highest[0],
                     "previous_process": before["process"], "ops": [before["index"], op["index"]]},
                    allowance(op["time_ms"]))
        if highest is None or offset > highest[0]:
            highest = (offset, op)
    return sorted(rep.out.values(), key=lambda v: (v.time_ms, v.invariant))


def _holding(value: int | None, offset: int) -> str:
    """What a log holds at an offset, in words."""
    return f"it holds nothing at offset {offset}" if value is None else f"it holds value {value} there"
