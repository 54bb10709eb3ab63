"""The pure-Python twin of the Rust replay (``src/replay/``): the same rows applied to
``epochlab.reference.ReplicaLog`` with the same checks, for differential tests and as the
benchmark baseline. Kept line for line close to ``src/replay/apply.rs``."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

from epochlab.errors import EpochlabError, InvalidArgumentError, TraceError
from epochlab.reference import RecordBatch, ReplicaLog
from epochlab.trace.schema import FLAG_CONTROL, FLAG_LOSE_UNFLUSHED, FLAG_TRANSACTIONAL, FLAG_UNCLEAN, KINDS

__all__ = ["reference_replay"]

NAMES = {"hw-bounds": "Inv-HW-bounds", "epoch-monotone": "Inv-EpochMonotone",
         "offset-monotone": "Inv-OffsetMonotone", "log-matching": "Inv-LogMatching",
         "durability": "Inv-Durability", "no-duplicates": "Inv-NoDuplicates",
         "epoch-fencing": "Inv-EpochFencing", "trace-consistency": "trace-consistency"}
LOSS_LIKE = {"Inv-Durability", "Inv-LogMatching", "Inv-EpochMonotone"}


def _squash(name: str) -> str:
    key = "".join(ch for ch in name.lower() if ch.isalnum())
    return key[3:] if key.startswith("inv") else key


def _canonical(name: str) -> str:
    """``"log-matching"``, ``"Inv-LogMatching"``, ``"log_matching"``: Inv-LogMatching."""
    for full in NAMES.values():
        if _squash(full) == _squash(name):
            return full
    raise InvalidArgumentError(f"argument 'checks' = {name!r} is invalid: unknown invariant",
                               argument="checks", value=name, reason="unknown invariant")


#: Most distinct brokers one partition may name (as the Rust replay,
#: ``src/replay/state.rs`` ``MAX_REPLICAS_PER_PARTITION``).
MAX_REPLICAS_PER_PARTITION = 1024


@dataclass
class _Replica:
    broker: int
    log: ReplicaLog
    alive: bool = True
    role: tuple[str, int] | None = None   # ("leader"|"follower", epoch)
    leader_hw: int = 0
    truth_agree: int = 0
    values: dict[int, int] = field(default_factory=dict)


@dataclass
class _Partition:
    id: int
    truth: ReplicaLog
    replicas: list[_Replica] = field(default_factory=list)
    agree: list[list[int]] = field(default_factory=list)
    reported: dict[tuple[int, int], int] = field(default_factory=dict)
    true_hw: int = 0
    ctrl_leader: int | None = None
    ctrl_epoch: int | None = None
    elected: set[tuple[int, int]] = field(default_factory=set)
    unclean: str | None = None
    lossy_crashes: list[int] = field(default_factory=list)


def _find(batches: list[RecordBatch], offset: int) -> int | None:
    """The first batch holding ``offset`` (last offsets increase; v0/v1 wrappers may overlap)."""
    i = _first_ending_at_or_after(batches, offset)
    return i if i < len(batches) and batches[i].base_offset <= offset else None


def _first_ending_at_or_after(batches: list[RecordBatch], offset: int) -> int:
    return bisect.bisect_left(batches, offset, key=lambda b: b.last_offset)


def _first_mismatch_between(a: ReplicaLog, b: ReplicaLog, start: int, limit: int) -> int | None:
    """``invariants::first_mismatch_between``: the two-pointer walk over both logs."""
    o = max(a.log_start_offset, b.log_start_offset, start)
    limit = min(a.log_end_offset, b.log_end_offset, limit)
    ba, bb = a._batches, b._batches  # noqa: SLF001 - the reference log's own list, read only
    ia, ib = _first_ending_at_or_after(ba, o), _first_ending_at_or_after(bb, o)
    while o < limit:
        at_a = ia if ia < len(ba) and ba[ia].base_offset <= o else None
        at_b = ib if ib < len(bb) and bb[ib].base_offset <= o else None
        if at_a is None and at_b is None:
            nxt = min(ba[ia].base_offset if ia < len(ba) else 1 << 64,
                      bb[ib].base_offset if ib < len(bb) else 1 << 64)
            o = min(nxt, limit)
            continue
        if at_a is None or at_b is None:
            return o
        x, y = ba[at_a], bb[at_b]
        if (x.base_offset, x.last_offset, x.partition_leader_epoch) != \
                (y.base_offset, y.last_offset, y.partition_leader_epoch):
            return o
        upto = min(x.last_offset, limit - 1)
        lo, hi = o - x.base_offset, upto - x.base_offset + 1
        for k, (p, q) in enumerate(zip(x.records[lo:hi], y.records[lo:hi])):
            if p != q:
                return o + k
        o = upto + 1
        ia += 1
        ib += 1
    return None


def _record(log: ReplicaLog, broker: int | None, offset: int) -> dict[str, Any]:
    inside = offset < log.log_end_offset
    i = _find(log._batches, offset) if inside else None  # noqa: SLF001
    batch = None if i is None else log._batches[i]  # noqa: SLF001
    return {"broker": broker, "offset": offset,
            "value": None if batch is None else batch.records[offset - batch.base_offset],
            "epoch": None if batch is None else batch.partition_leader_epoch}


class _Replay:
    def __init__(self, checks: list[str] | None, collect: str, min_isr: int, kip101: bool,
                 elr: bool = False, wrappers: bool = False) -> None:
        self.elr = elr
        self.wrappers = wrappers
        self.checks = None if checks is None else {_canonical(c) for c in checks}
        self.collect = collect
        self.min_isr = min_isr
        self.kip101 = kip101
        self.parts: dict[int, _Partition] = {}
        self.violations: list[dict[str, Any]] = []
        self.count = 0
        self.seen: set[str] = set()
        self.stop = False
        self.rows = 0

    def on(self, inv: str) -> bool:
        return inv == "trace-consistency" or self.checks is None or inv in self.checks

    def replica(self, part: _Partition, broker: int) -> int:
        for i, r in enumerate(part.replicas):
            if r.broker == broker:
                return i
        if len(part.replicas) >= MAX_REPLICAS_PER_PARTITION:
            raise TraceError(f"broker {broker} would be replica number {len(part.replicas) + 1} of "
                             f"partition {part.id}: at most {MAX_REPLICAS_PER_PARTITION} brokers per "
                             "partition", path=None, row=None,
                             reason="too many brokers in one partition")
        part.replicas.append(_Replica(broker, ReplicaLog(kip101_epoch_cache=self.kip101,
                                                         wrapper_batches=self.wrappers)))
        for row in part.agree:
            row.append(0)
        part.agree.append([0] * len(part.replicas))
        return len(part.replicas) - 1

    def report(self, part: _Partition, row: dict[str, Any], inv: str, message: str,
               records: list[dict[str, Any]]) -> None:
        if not self.on(inv):
            return
        self.count += 1
        keep = {"first": inv not in self.seen, "all": len(self.violations) < 10000,
                "stop": not self.violations}[self.collect]
        self.seen.add(inv)
        if self.collect == "stop":
            self.stop = True
        if not keep:
            return
        reason = self.allowance(part) if inv in LOSS_LIKE else None
        self.violations.append({
            "invariant": inv, "verdict": "allowed-by-configuration" if reason else "protocol-violation",
            "reason": reason, "row": row["_row"], "event": row["event"], "time_ms": row["time_ms"],
            "kind": KINDS[row["kind"]], "partition": part.id, "broker": row["broker"],
            "offset": row["offset"], "epoch": row["epoch"], "message": message, "records": records})

    def allowance(self, part: _Partition) -> str | None:
        if part.unclean:
            return part.unclean
        if part.lossy_crashes and not self.elr:
            return (f"broker {part.lossy_crashes[0]} lost its unflushed tail and eligible leader "
                    "replicas are off: a last replica standing restarted after an unclean "
                    "shutdown may be elected (KIP-966)")
        allowed = max(self.min_isr - 1, 0)
        if len(part.lossy_crashes) > allowed:
            return (f"{len(part.lossy_crashes)} crashes lost their unflushed tail (brokers "
                    f"{part.lossy_crashes}), more than min.insync.replicas - 1 = {allowed}")
        return None

    # -- rows -------------------------------------------------------------------------------
    def apply(self, row: dict[str, Any]) -> None:
        pid = row["partition"] or 0
        part = self.parts.get(pid)
        if part is None:
            part = self.parts[pid] = _Partition(pid, ReplicaLog())
        kind = KINDS[row["kind"]]
        getattr(self, "_" + kind)(part, row, kind)

    def _need(self, row: dict[str, Any], kind: str, name: str) -> int:
        if row[name] is None:
            raise TraceError(f"trace row {row['_row']}: {kind} row: {name} is null", path=None,
                             row=row["_row"], reason=f"{kind} row: {name} is null")
        return int(row[name])

    def _append_leader(self, part: _Partition, row: dict[str, Any], kind: str) -> None:
        self._append(part, row, kind, True)

    def _append_follower(self, part: _Partition, row: dict[str, Any], kind: str) -> None:
        self._append(part, row, kind, False)

    def _producer(self, row: dict[str, Any], kind: str) -> tuple[int, int, int] | None:
        fields = (row["producer_id"], row["producer_epoch"], row["base_sequence"])
        if all(f is None for f in fields):
            return None
        if any(f is None for f in fields):
            raise TraceError(f"trace row {row['_row']}: {kind} row: producer_id, producer_epoch and "
                             "base_sequence must be all null or all set", path=None, row=row["_row"],
                             reason="incomplete producer fields")
        return fields  # type: ignore[return-value]

    def _append(self, part: _Partition, row: dict[str, Any], kind: str, leader: bool) -> None:
        b = self._need(row, kind, "broker")
        r = self.replica(part, b)
        producer = self._producer(row, kind)
        flags = (row["flags"] or 0) & (FLAG_TRANSACTIONAL | FLAG_CONTROL)
        if row["values"] is not None:
            records = list(row["values"])
            epoch = self._need(row, kind, "epoch")
            if row["record_count"] is not None and row["record_count"] != len(records):
                raise TraceError(f"trace row {row['_row']}: {kind} row: record_count "
                                 f"{row['record_count']} but {len(records)} values", path=None,
                                 row=row["_row"], reason="record_count mismatch")
        elif not leader:
            if row["leader"] is None:
                raise TraceError(f"trace row {row['_row']}: {kind} row: values and leader are both null",
                                 path=None, row=row["_row"], reason="values and leader are both null")
            base = self._need(row, kind, "offset")
            src = part.replicas[self.replica(part, row["leader"])].log
            i = _find(src._batches, base)  # noqa: SLF001
            if i is None or src._batches[i].base_offset != base:  # noqa: SLF001
                self.report(part, row, "trace-consistency", f"broker {row['leader']} has no batch starting "
                            f"at offset {base} to copy (LEO {src.log_end_offset})", [])
                return
            x = src._batches[i]  # noqa: SLF001
            records, epoch = list(x.records), x.partition_leader_epoch
            producer = None if x.producer_id is None else (x.producer_id, x.producer_epoch, x.base_sequence)
            flags = (FLAG_TRANSACTIONAL if x.is_transactional else 0) | (FLAG_CONTROL if x.is_control else 0)
        else:
            raise TraceError(f"trace row {row['_row']}: {kind} row: values is null", path=None,
                             row=row["_row"], reason="values is null")
        self._append_records(part, r, row, row["offset"], records, epoch, producer, flags, leader)

    def _append_records(self, part: _Partition, r: int, row: dict[str, Any], expected: int | None,
                        records: list[int], epoch: int, producer: tuple[int, int, int] | None,
                        flags: int, leader: bool = False) -> None:
        rep = part.replicas[r]
        b, leo = rep.broker, rep.log.log_end_offset
        if not rep.alive:
            self.report(part, row, "trace-consistency", f"broker {b} appends while crashed", [])
        base = leo
        if expected is not None and expected != leo:
            # a v0/v1 follower takes a wrapper at its own offsets if its log accepts it there
            if not leader and records and rep.log._follows(leo, expected, expected + len(records) - 1):  # noqa: SLF001
                base = expected
            else:
                self.report(part, row, "trace-consistency",
                            f"broker {b}: batch at offset {expected} but the log end offset is {leo}", [])
                return
        if not 0 <= epoch <= 2**31 - 1:
            self.report(part, row, "trace-consistency", f"epoch {epoch} outside 0..=2^31-1", [])
            return
        batches = rep.log._batches  # noqa: SLF001
        if batches and batches[-1].partition_leader_epoch > epoch:
            prev = batches[-1].partition_leader_epoch
            self.report(part, row, "Inv-EpochMonotone", f"broker {b}: batch at {leo} has epoch {epoch} "
                        f"after epoch {prev}", [{"broker": b, "offset": leo,
                                                 "value": records[0] if records else None, "epoch": epoch}])
        idempotent = producer is not None and not flags & FLAG_CONTROL and self.on("Inv-NoDuplicates")
        if idempotent:
            for k, v in enumerate(records):
                if v in rep.values:
                    first = rep.values[v]
                    self.report(part, row, "Inv-NoDuplicates", f"broker {b}: value {v} appended at offset "
                                f"{leo + k} is already at offset {first}",
                                [{"broker": b, "offset": first, "value": v, "epoch": None},
                                 {"broker": b, "offset": leo + k, "value": v, "epoch": epoch}])
                    break
        pid, pep, seq = producer if producer is not None else (None, None, None)
        try:
            rep.log.append_as_follower(RecordBatch(
                base, epoch, records, producer_id=pid, producer_epoch=pep, base_sequence=seq,
                is_transactional=bool(flags & FLAG_TRANSACTIONAL), is_control=bool(flags & FLAG_CONTROL)))
        except EpochlabError as exc:
            self.report(part, row, "trace-consistency", f"broker {b}: {exc.message}", [])
            return
        if idempotent:
            for k, v in enumerate(records):
                rep.values.setdefault(v, base + k)

    def _fetch(self, part: _Partition, row: dict[str, Any], kind: str) -> None:
        b, upto = self._need(row, kind, "broker"), self._need(row, kind, "offset")
        src = self._need(row, kind, "leader")
        r, s = self.replica(part, b), self.replica(part, src)
        if r == s:
            raise TraceError(f"trace row {row['_row']}: fetch row: a replica fetches from itself",
                             path=None, row=row["_row"], reason="a replica fetches from itself")
        frm = part.replicas[r].log.log_end_offset
        slog = part.replicas[s].log
        if frm < slog.log_start_offset or frm > slog.log_end_offset:
            self.report(part, row, "trace-consistency", f"broker {b} fetches from {src}: offset {frm} is "
                        f"out of range [{slog.log_start_offset}, {slog.log_end_offset}]", [])
            return
        batches = slog._batches  # noqa: SLF001
        first = _first_ending_at_or_after(batches, frm)
        end = max(first, _first_ending_at_or_after(batches, upto))
        for x in batches[first:end]:
            leo = part.replicas[r].log.log_end_offset
            if not part.replicas[r].log._follows(leo, x.base_offset, x.last_offset):  # noqa: SLF001
                self.report(part, row, "trace-consistency", f"broker {b} at log end offset {leo} fetches "
                            f"from {src}, whose batch there starts at {x.base_offset}", [])
                break
            producer = None if x.producer_id is None else (x.producer_id, x.producer_epoch, x.base_sequence)
            flags = (FLAG_TRANSACTIONAL if x.is_transactional else 0) | (FLAG_CONTROL if x.is_control else 0)
            self._append_records(part, r, row, None if x.base_offset == leo else x.base_offset,
                                 list(x.records), x.partition_leader_epoch, producer, flags)

    def _forget(self, rep: _Replica, keep: int) -> None:
        if not rep.values:
            return
        for x in rep.log._batches[keep:]:  # noqa: SLF001
            if x.producer_id is None:
                continue
            for k, v in enumerate(x.records):
                if rep.values.get(v) == x.base_offset + k:
                    del rep.values[v]

    def _invalidate(self, part: _Partition, r: int, frm: int) -> None:
        for j in range(len(part.replicas)):
            part.agree[r][j] = min(part.agree[r][j], frm)
            part.agree[j][r] = min(part.agree[j][r], frm)
        part.replicas[r].truth_agree = min(part.replicas[r].truth_agree, frm)

    def _truncate(self, part: _Partition, row: dict[str, Any], kind: str) -> None:
        b, t = self._need(row, kind, "broker"), self._need(row, kind, "offset")
        r = self.replica(part, b)
        rep = part.replicas[r]
        start, leo = rep.log.log_start_offset, rep.log.log_end_offset
        fully = kind == "truncate_fully" or t < start
        if kind == "truncate" and start < t < leo:
            i = _find(rep.log._batches, t)  # noqa: SLF001
            if i is not None and rep.log._batches[i].base_offset < t:  # noqa: SLF001
                x = rep.log._batches[i]  # noqa: SLF001
                self.report(part, row, "Inv-OffsetMonotone", f"broker {b}: truncation to {t} inside batch "
                            f"[{x.base_offset}, {x.last_offset}] leaves a hole", [_record(rep.log, b, t)])
        keep = 0 if fully else _first_ending_at_or_after(rep.log._batches, t)  # noqa: SLF001
        self._forget(rep, keep)
        if fully:
            rep.values.clear()
        if kind == "truncate_fully":
            rep.log.truncate_fully_and_start_at(t)
        else:
            rep.log.truncate_to(t)
        self._invalidate(part, r, 0 if fully else t)
        self._durability(part, r, row)

    _truncate_fully = _truncate

    def _high_watermark(self, part: _Partition, row: dict[str, Any], kind: str) -> None:
        b, hw = self._need(row, kind, "broker"), self._need(row, kind, "offset")
        r = self.replica(part, b)
        rep = part.replicas[r]
        start, leo = rep.log.log_start_offset, rep.log.log_end_offset
        if hw < start or hw > leo:
            self.report(part, row, "Inv-HW-bounds", f"broker {b}: HW {hw} outside [log start {start}, LEO {leo}]", [])
        role, alive, leader_hw = rep.role, rep.alive, rep.leader_hw
        new_hw = rep.log.update_high_watermark(hw)
        if role is not None and role[0] == "leader" and alive:
            e = role[1]
            if new_hw < leader_hw:
                self.report(part, row, "Inv-HW-bounds", f"leader {b} HW went down {leader_hw} -> {new_hw} in epoch {e}", [])
            rep.leader_hw = max(leader_hw, new_hw)
            if (b, e) in part.elected and new_hw > part.true_hw:
                self._advance_truth(part, rep, new_hw)
                acting = self._acting(part)
                if acting is not None:
                    self._durability(part, acting, row)
        self._log_matching(part, r, row)

    def _advance_truth(self, part: _Partition, rep: _Replica, hw: int) -> None:
        start = part.truth.log_end_offset
        log = rep.log
        if log.log_start_offset <= start < log.log_end_offset:
            batches = log._batches  # noqa: SLF001
            first = _first_ending_at_or_after(batches, start)
            if first < len(batches) and batches[first].base_offset == start:
                for x in batches[first:]:
                    if x.base_offset >= hw:
                        break
                    part.truth.append_as_follower(x)
        part.true_hw = hw

    def _acting(self, part: _Partition) -> int | None:
        if part.ctrl_leader is None or part.ctrl_epoch is None:
            return None
        for i, x in enumerate(part.replicas):
            if x.broker == part.ctrl_leader and x.alive and x.role == ("leader", part.ctrl_epoch):
                return i
        return None

    def _durability(self, part: _Partition, r: int, row: dict[str, Any]) -> None:
        if self._acting(part) != r or part.true_hw == 0 or not self.on("Inv-Durability"):
            return
        rep = part.replicas[r]
        limit = min(part.truth.log_end_offset, rep.log.log_end_offset)
        m = _first_mismatch_between(part.truth, rep.log, rep.truth_agree, limit)
        rep.truth_agree = max(limit if m is None else m, rep.truth_agree)
        missing = None
        if m is not None and m < part.true_hw:
            missing = m
        elif rep.log.log_end_offset < part.true_hw:
            missing = rep.log.log_end_offset
        if missing is not None:
            e = part.ctrl_epoch or 0
            self.report(part, row, "Inv-Durability", f"leader {rep.broker} of epoch {e} lacks committed "
                        f"offset {missing} (trueHW {part.true_hw})",
                        [_record(part.truth, None, missing), _record(rep.log, rep.broker, missing)])

    def _log_matching(self, part: _Partition, r: int, row: dict[str, Any]) -> None:
        if not self.on("Inv-LogMatching"):
            return
        for o in range(len(part.replicas)):
            if o == r:
                continue
            a, b = part.replicas[r], part.replicas[o]
            bound = min(a.log.high_watermark, b.log.high_watermark)
            agreed = part.agree[r][o]
            if bound == 0 or agreed >= bound:
                continue
            m = _first_mismatch_between(a.log, b.log, agreed, bound)
            reached = max(bound if m is None else m, agreed)
            part.agree[r][o] = part.agree[o][r] = reached
            if m is None:
                continue
            key = (min(r, o), max(r, o))
            if part.reported.get(key) == m:
                continue
            part.reported[key] = m
            self.report(part, row, "Inv-LogMatching", f"brokers {a.broker} and {b.broker} differ at offset "
                        f"{m} below min(HW) = {bound}", [_record(a.log, a.broker, m), _record(b.log, b.broker, m)])

    def _assign_epoch(self, part: _Partition, row: dict[str, Any], kind: str) -> None:
        b, e, o = (self._need(row, kind, n) for n in ("broker", "epoch", "offset"))
        part.replicas[self.replica(part, b)].log.assign_epoch(e, o)

    def _flush(self, part: _Partition, row: dict[str, Any], kind: str) -> None:
        b = self._need(row, kind, "broker")
        part.replicas[self.replica(part, b)].log.flush(row["offset"])

    def _crash(self, part: _Partition, row: dict[str, Any], kind: str) -> None:
        b = self._need(row, kind, "broker")
        r = self.replica(part, b)
        rep = part.replicas[r]
        if (row["flags"] or 0) & FLAG_LOSE_UNFLUSHED:
            self._forget(rep, _first_ending_at_or_after(rep.log._batches, rep.log.recovery_point))  # noqa: SLF001
            rep.log.drop_unflushed()
            self._invalidate(part, r, rep.log.log_end_offset)
            part.lossy_crashes.append(b)
        rep.alive = False
        rep.role = None

    def _restart(self, part: _Partition, row: dict[str, Any], kind: str) -> None:
        part.replicas[self.replica(part, self._need(row, kind, "broker"))].alive = True

    def _leader_change(self, part: _Partition, row: dict[str, Any], kind: str) -> None:
        e = self._need(row, kind, "epoch")
        part.ctrl_leader, part.ctrl_epoch = row["leader"], e
        if row["leader"] is not None:
            leader = row["leader"]
            part.elected.add((leader, e))
            if (row["flags"] or 0) & FLAG_UNCLEAN and part.unclean is None:
                part.unclean = f"unclean leader election of broker {leader} in epoch {e} at row {row['_row']}"
            self._durability(part, self.replica(part, leader), row)

    def _become_leader(self, part: _Partition, row: dict[str, Any], kind: str) -> None:
        b, e = self._need(row, kind, "broker"), self._need(row, kind, "epoch")
        r = self.replica(part, b)
        for j, x in enumerate(part.replicas):
            if j != r and x.alive and x.role == ("leader", e):
                self.report(part, row, "Inv-EpochFencing", f"brokers {x.broker} and {b} both lead epoch {e}", [])
                break
        rep = part.replicas[r]
        rep.role = ("leader", e)
        rep.leader_hw = rep.log.high_watermark
        self._durability(part, r, row)

    def _become_follower(self, part: _Partition, row: dict[str, Any], kind: str) -> None:
        b, e = self._need(row, kind, "broker"), self._need(row, kind, "epoch")
        part.replicas[self.replica(part, b)].role = ("follower", e)


def reference_replay(table: Any, *, checks: list[str] | None = None, collect: str = "first",
                     min_insync_replicas: int | None = None,
                     kip101_epoch_cache: bool | None = None) -> Any:
    """Replay a trace table in pure Python; returns a :class:`~epochlab.trace.ReplayReport`
    comparable field by field with :func:`epochlab.trace.replay`'s (``error`` is the first
    malformed row's :class:`TraceError`)."""
    from epochlab.trace.replay import ReplayReport
    from epochlab.trace.schema import check_metadata, normalize

    started = perf_counter()
    meta = check_metadata(table.schema) if (table.schema.metadata or {}).get(b"epochlab-trace") else {}
    if min_insync_replicas is None:
        min_insync_replicas = int(meta.get("min_insync_replicas", "1"))
    if kip101_epoch_cache is None:
        kip101_epoch_cache = meta.get("kip101_epoch_cache", "False") == "True"
    state = _Replay(checks, collect, min_insync_replicas, kip101_epoch_cache,
                    meta.get("eligible_leader_replicas") == "True",
                    meta.get("wrapper_batches") == "True")
    table = normalize(table)
    error = None
    try:
        for i, row in enumerate(table.to_pylist()):
            row["_row"] = i
            if row["event"] is None:
                row["event"] = i
            if not 0 <= row["kind"] < len(KINDS):
                raise TraceError(f"trace row {i}: unknown kind code {row['kind']}", path=None, row=i,
                                 reason=f"unknown kind code {row['kind']}")
            _check_ranges(row, i)
            state.apply(row)
            state.rows += 1
            if state.stop:
                break
    except TraceError as exc:
        error = exc
    replicas = []
    for part in state.parts.values():
        for rep in part.replicas:
            role = rep.role[0] if rep.role else "none"
            replicas.append({
                "partition": part.id, "broker": rep.broker, "alive": rep.alive, "role": role,
                "epoch": rep.role[1] if rep.role else None,
                "log_start_offset": rep.log.log_start_offset, "log_end_offset": rep.log.log_end_offset,
                "high_watermark": rep.log.high_watermark, "batch_count": rep.log.batch_count,
                "record_count": rep.log.record_count,
                "epoch_entries": [tuple(e) for e in rep.log.epoch_entries()]})
    report = ReplayReport(None, state.rows, table.num_rows, state.violations, state.count, replicas,
                          perf_counter() - started, error, state.stop, meta)
    report.logs = {(p.id, r.broker): r.log for p in state.parts.values() for r in p.replicas}  # type: ignore[attr-defined]
    return report


#: Kafka's own ranges of the trace's numbers (as the Rust replay's ``decode``): offsets are
#: Java longs, epochs and broker ids Java ints.
_RANGES = (("offset", 2**63 - 1, "offset range 0..=9223372036854775807"),
           ("epoch", 2**31 - 1, "range 0..=2147483647"),
           ("broker", 2**31 - 1, "range 0..=2147483647"),
           ("leader", 2**31 - 1, "range 0..=2147483647"))


def _check_ranges(row: dict[str, Any], i: int) -> None:
    for name, top, what in _RANGES:
        value = row.get(name)
        if value is not None and value > top:
            reason = f"{name} {value} is outside Kafka's {what}"
            raise TraceError(f"trace row {i}: {reason}", path=None, row=i, reason=reason)
