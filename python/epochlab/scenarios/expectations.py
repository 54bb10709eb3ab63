"""Judge a scenario's expectations against what a run produced.

Each kind in :data:`epochlab.scenarios.model.EXPECTATIONS` has one function here taking the
expectation's parameters and the run's :class:`Facts` and returning ``(passed, detail)``; the
detail names the exact records involved either way, so a verdict explains itself.

Vocabulary (``docs/scenario-format.md`` has the full table): the *surviving log* is the
controller's leader's log at the judged instant, or the union of all replicas' logs when the
partition has no leader. A value is *lost* when it was sent and is not in the surviving log.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from epochlab.observe import Observer, Snapshot
from epochlab.scenarios.model import STATE_KINDS, Expectation

__all__ = ["Check", "Facts", "evaluate"]


@dataclass(frozen=True)
class Check:
    """One judged claim. ``status``: ``passed``, ``failed`` or ``unsupported`` (the engine
    cannot produce what the claim needs: counts as a failure)."""

    index: int | None
    kind: str
    description: str
    status: str
    detail: str

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "kind": self.kind, "description": self.description,
                "status": self.status, "detail": self.detail}


@dataclass
class Facts:
    """Everything expectations may read about one run."""

    final: Snapshot
    after_step: Mapping[int, Snapshot]
    history: list[Mapping[str, Any]]
    observer: Observer
    events: list[Mapping[str, Any]] = field(default_factory=list)

    def sends(self, producer: str) -> list[Mapping[str, Any]]:
        return [op for op in self.history if op.get("process") == producer and op.get("f") == "send"]

    def acked(self, producer: str | None = None) -> dict[int, int | None]:
        """value -> acknowledged offset, for sends with an ``ok`` outcome."""
        return {op["value"]: op.get("offset") for op in self.history
                if op.get("f") == "send" and op.get("type") == "ok"
                and (producer is None or op.get("process") == producer)}

    def polled(self, consumer: str) -> list[tuple[int, int, int]]:
        """``(time_ms, offset, value)`` for every record delivered to ``consumer``."""
        out = []
        for op in self.history:
            if op.get("process") == consumer and op.get("f") == "poll" and op.get("type") == "ok":
                for offset, value in op.get("value") or ():
                    out.append((op.get("time_ms", 0), offset, value))
        return out


def evaluate(expectation: Expectation, facts: Facts) -> Check:
    snap = facts.final
    if expectation.after_step is not None:
        snap = facts.after_step[expectation.after_step]
    judge = _KINDS[expectation.kind]
    params = dict(expectation.params)
    try:
        if expectation.kind in STATE_KINDS:
            passed, detail = judge(params, facts, snap)
        else:
            passed, detail = judge(params, facts)
    except _Unsupported as exc:
        return Check(expectation.index, expectation.kind, expectation.describe(), "unsupported",
                     str(exc))
    return Check(expectation.index, expectation.kind, expectation.describe(),
                 "passed" if passed else "failed", detail)


class _Unsupported(Exception):
    pass


def _surviving(snap: Snapshot) -> tuple[list[int], str]:
    r = snap.leader_replica()
    if r is not None:
        return r.values(), f"leader {r.broker}'s log"
    return sorted({v for rep in snap.replicas for v in rep.values()}), "all replicas (no leader)"


def _lost(p: dict, facts: Facts, snap: Snapshot) -> tuple[bool, str]:
    log, what = _surviving(snap)
    present = [v for v in p["values"] if v in log]
    problems = [f"{present} still in {what}"] if present else []
    if p.get("acked"):
        acked = facts.acked()
        unacked = [v for v in p["values"] if v not in acked]
        if unacked:
            problems.append(f"{unacked} never acknowledged")
    if problems:
        return False, "; ".join(problems)
    return True, f"{p['values']} absent from {what} {_short(log)}"


def _durable(p: dict, facts: Facts, snap: Snapshot) -> tuple[bool, str]:
    log, what = _surviving(snap)
    acked = sorted(facts.acked(p.get("producer")))
    gone = [v for v in acked if v not in log]
    if gone:
        return False, f"acknowledged {gone} missing from {what} {_short(log)}"
    return True, f"every acknowledged value {_short(acked)} is in {what}"


def _present(p: dict, facts: Facts, snap: Snapshot) -> tuple[bool, str]:
    targets = p.get("brokers")
    views = [snap.replica(b) for b in targets] if targets else [snap.leader_replica()]
    if views == [None]:
        return False, "no leader to check"
    problems = []
    for view in views:
        at = view.value_at()  # type: ignore[union-attr]
        for i, v in enumerate(p["values"]):
            where = [o for o, val in at.items() if val == v]
            if not where:
                problems.append(f"{v} missing on broker {view.broker}")  # type: ignore[union-attr]
            elif p.get("offsets") is not None and p["offsets"][i] not in where:
                problems.append(f"{v} on broker {view.broker} at {where}, "  # type: ignore[union-attr]
                                f"expected offset {p['offsets'][i]}")
    if problems:
        return False, "; ".join(problems)
    return True, f"{p['values']} present on broker(s) {[v.broker for v in views]}"  # type: ignore[union-attr]


def _leader_counts(snap: Snapshot) -> tuple[Counter, str]:
    log, what = _surviving(snap)
    return Counter(log), what


def _duplicated(p: dict, facts: Facts, snap: Snapshot) -> tuple[bool, str]:
    counts, what = _leader_counts(snap)
    once = [v for v in p["values"] if counts[v] < 2]
    if once:
        return False, f"{once} appear fewer than 2 times in {what}"
    return True, f"{ {v: counts[v] for v in p['values']} } copies in {what}"


def _not_duplicated(p: dict, facts: Facts, snap: Snapshot) -> tuple[bool, str]:
    counts, what = _leader_counts(snap)
    values = p.get("values") or sorted(counts)
    dup = {v: counts[v] for v in values if counts[v] > 1}
    if dup:
        return False, f"duplicates in {what}: {dup}"
    return True, f"no value appears twice in {what}"


def _truncated(p: dict, facts: Facts) -> tuple[bool, str]:
    broker = p["broker"]
    held = {v for _o, v in facts.observer.held.get(broker, set())}
    final = facts.final.replica(broker)
    now = set(final.values()) if final else set()
    never = [v for v in p["values"] if v not in held]
    kept = [v for v in p["values"] if v in now]
    if never or kept:
        parts = ([f"broker {broker} never held {never}"] if never else []) + (
            [f"broker {broker} still holds {kept}"] if kept else [])
        return False, "; ".join(parts)
    return True, f"broker {broker} held {p['values']} and no longer does"


def _log(p: dict, facts: Facts, snap: Snapshot) -> tuple[bool, str]:
    view = snap.replica(p["broker"]) if p.get("broker") is not None else snap.leader_replica()
    if view is None:
        return False, "no such replica (no leader?)"
    got = view.values()
    return got == p["values"], f"broker {view.broker} log values {got}"


def _consumer_saw(p: dict, facts: Facts) -> tuple[bool, str]:
    seen = facts.polled(p["consumer"])
    values, offsets = {v for _t, _o, v in seen}, {o for _t, o, _v in seen}
    pairs = {(o, v) for _t, o, v in seen}
    missing = [v for v in p.get("values") or () if v not in values]
    missing += [f"offset {o}" for o in p.get("offsets") or () if o not in offsets]
    missing += [f"record {r}" for r in p.get("records") or () if (r[0], r[1]) not in pairs]
    detail = f"{p['consumer']} received {sorted(pairs)}"
    return not missing, (f"missing {missing}; " if missing else "") + detail


def _consumer_did_not_see(p: dict, facts: Facts) -> tuple[bool, str]:
    seen = facts.polled(p["consumer"])
    bad = [v for v in p.get("values") or () if any(v == sv for _t, _o, sv in seen)]
    bad += [f"offset {o}" for o in p.get("offsets") or () if any(o == so for _t, so, _v in seen)]
    detail = f"{p['consumer']} received {sorted({(o, v) for _t, o, v in seen})}"
    return not bad, (f"saw {bad}; " if bad else "") + detail


def _listed_offsets(p: dict, facts: Facts) -> tuple[bool, str]:
    got = [op["value"][1] for op in facts.history if op.get("process") == p["consumer"]
           and op.get("f") == "list_offsets" and op.get("type") == "ok"]
    return got == list(p["offsets"]), f"{p['consumer']}'s ListOffsets answers: {got}"


def _consumer_saw_twice(p: dict, facts: Facts) -> tuple[bool, str]:
    counts = Counter(v for _t, _o, v in facts.polled(p["consumer"]))
    once = [v for v in p["values"] if counts[v] < 2]
    detail = f"deliveries: { {v: counts[v] for v in p['values']} }"
    return not once, (f"{once} delivered fewer than twice; " if once else "") + detail


def _consumer_within_hw(p: dict, facts: Facts) -> tuple[bool, str]:
    seen = facts.polled(p["consumer"])
    if facts.observer.samples == 0:
        raise _Unsupported("no state samples were taken: cannot compare polls with the HW")
    beyond = [(t, o) for t, o, _v in seen if o >= facts.observer.hw_at(t)]
    if beyond:
        return False, f"offsets read at or beyond the leader HW (time, offset): {beyond}"
    return True, f"all {len(seen)} records read below the leader's HW"


def _consumer_fetched_from(p: dict, facts: Facts) -> tuple[bool, str]:
    """The ``info fetch_from`` ops of a consumer with a rack (the model's consumer records its
    fetch target; a real one the broker librdkafka's statistics say it fetches from)."""
    sources = [op["value"] for op in facts.history if op.get("process") == p["consumer"]
               and op.get("f") == "fetch_from" and op.get("type") == "info"]
    if not sources:
        raise _Unsupported(f"{p['consumer']} recorded no fetch source (no client.rack?)")
    it = iter(sources)  # a subsequence: sampled statistics may miss a short stay anywhere
    return all(b in it for b in p["brokers"]), f"{p['consumer']} fetched from {sources}"


def _consumer_saw_truncated(p: dict, facts: Facts) -> tuple[bool, str]:
    r = facts.final.leader_replica()
    if r is None:
        return False, "no leader at the end: cannot compare with the surviving log"
    at = r.value_at()
    gone = sorted({(o, v) for _t, o, v in facts.polled(p["consumer"]) if at.get(o) != v})
    wanted = p.get("values")
    if wanted is not None:
        missing = [v for v in wanted if v not in {gv for _o, gv in gone}]
        return not missing, f"read but not in the final log at that offset: {gone}" + (
            f"; not among them: {missing}" if missing else "")
    return bool(gone), f"read but not in the final log at that offset: {gone}"


def _leader(p: dict, facts: Facts, snap: Snapshot) -> tuple[bool, str]:
    ok = (p.get("broker") is None or snap.leader == p["broker"]) and (
        p.get("epoch") is None or snap.leader_epoch == p["epoch"])
    return ok, f"leader {snap.leader} in epoch {snap.leader_epoch} (offline={snap.offline})"


def _offline(p: dict, facts: Facts, snap: Snapshot) -> tuple[bool, str]:
    return snap.offline == p["value"], f"offline={snap.offline}, leader {snap.leader}"


def _isr(p: dict, facts: Facts, snap: Snapshot) -> tuple[bool, str]:
    return set(snap.isr) == set(p["brokers"]), f"ISR {list(snap.isr)}"


def _offset_check(attr: str):
    def judge(p: dict, facts: Facts, snap: Snapshot) -> tuple[bool, str]:
        view = snap.replica(p["broker"]) if p.get("broker") is not None else snap.leader_replica()
        if view is None:
            return False, "no such replica (no leader?)"
        got = getattr(view, attr)
        return got == p["value"], f"broker {view.broker} {attr} = {got}"
    return judge


def _pairs(p: dict, snap: Snapshot) -> list[tuple[int, dict[int, tuple[int, int]]]]:
    brokers = p.get("brokers") or [r.broker for r in snap.replicas if r.alive]
    out = []
    for b in brokers:
        r = snap.replica(b)
        out.append((b, r.readable() if r else {}))
    return out


def _divergences(p: dict, snap: Snapshot) -> list[str]:
    logs = _pairs(p, snap)
    found = []
    for i, (a, la) in enumerate(logs):
        for b, lb in logs[i + 1:]:
            for o in sorted(set(la) & set(lb)):
                if la[o] != lb[o]:
                    found.append(f"offset {o}: broker {a} has m{la[o][1]} (epoch {la[o][0]}), "
                                 f"broker {b} has m{lb[o][1]} (epoch {lb[o][0]})")
                    break
    return found


def _logs_match(p: dict, facts: Facts, snap: Snapshot) -> tuple[bool, str]:
    logs = _pairs(p, snap)
    first = logs[0][1] if logs else {}
    differ = [b for b, log in logs if log != first]
    if differ:
        return False, "; ".join(_divergences(p, snap)) or f"lengths differ: " + ", ".join(
            f"broker {b}: {len(log)} records" for b, log in logs)
    return True, f"brokers {[b for b, _ in logs]} hold identical logs ({len(first)} records)"


def _logs_diverge(p: dict, facts: Facts, snap: Snapshot) -> tuple[bool, str]:
    found = _divergences(p, snap)
    return bool(found), "; ".join(found) or "no offset holds different records on two replicas"


def _unavailable(p: dict, facts: Facts) -> tuple[bool, str]:
    intervals = facts.observer.intervals()
    lengths = [end - start for start, end in intervals]
    got = (max(lengths) if lengths else 0) if p["measure"] == "longest" else sum(lengths)
    ok = got >= p["min"] and (p.get("max") is None or got <= p["max"])
    return ok, f"{p['measure']} unavailability {got} ms; intervals {intervals}"


def _acked(p: dict, facts: Facts) -> tuple[bool, str]:
    acked = facts.acked(p["producer"])
    problems = [f"{v} not acknowledged" for v in p["values"] if v not in acked]
    for i, o in enumerate(p.get("offsets") or ()):
        v = p["values"][i]
        if v in acked and acked[v] != o:
            problems.append(f"{v} acknowledged at {acked[v]}, expected {o}")
    detail = f"acks: { {v: acked.get(v) for v in p['values']} }"
    return not problems, ("; ".join(problems) + "; " if problems else "") + detail


def _not_acked(p: dict, facts: Facts) -> tuple[bool, str]:
    acked = facts.acked(p["producer"])
    bad = [v for v in p["values"] if v in acked]
    errors = {op["value"]: op.get("error") for op in facts.sends(p["producer"])
              if op.get("type") in ("fail", "info") and op["value"] in p["values"]}
    return not bad, (f"{bad} were acknowledged; " if bad else "") + f"outcomes: {errors}"


def _error_seen(p: dict, facts: Facts) -> tuple[bool, str]:
    ops = [op for op in facts.sends(p["producer"]) if op.get("type") in ("fail", "info")]
    if p.get("values") is not None:
        ops = [op for op in ops if op.get("value") in p["values"]]
    errors = sorted({str(op.get("error")) for op in ops})
    ok = any(e in p["error"] for e in errors)
    return ok, f"errors seen by {p['producer']}: {errors or 'none'}"


def _observed_offsets(facts: Facts) -> dict[int, set[int]]:
    seen: dict[int, set[int]] = {}
    for op in facts.history:
        if op.get("f") == "send" and op.get("type") == "ok" and op.get("offset") is not None:
            seen.setdefault(op["offset"], set()).add(op["value"])
        if op.get("f") == "poll" and op.get("type") == "ok":
            for o, v in op.get("value") or ():
                seen.setdefault(o, set()).add(v)
    r = facts.final.leader_replica()
    if r is not None:
        for o, _e, v in r.records():
            seen.setdefault(o, set()).add(v)
    return seen


def _inconsistent(p: dict, facts: Facts) -> tuple[bool, str]:
    seen = _observed_offsets(facts)
    bad = {o: sorted(vs) for o, vs in sorted(seen.items()) if len(vs) > 1}
    if p.get("offsets") is not None:
        missing = [o for o in p["offsets"] if o not in bad]
        return not missing, f"offsets with two values: {bad}" + (
            f"; consistent: {missing}" if missing else "")
    return bool(bad), f"offsets with two values (acks, polls, final log): {bad or 'none'}"


def _consistent(p: dict, facts: Facts) -> tuple[bool, str]:
    ok, detail = _inconsistent({}, facts)
    return not ok, detail


def _event_seen(p: dict, facts: Facts) -> tuple[bool, str]:
    hits = [e for e in facts.events if p["text"] in str(e.get("message", ""))
            and (p.get("event_kind") is None or e.get("kind") == p["event_kind"])]
    if hits:
        first = hits[0]
        return True, f"{len(hits)} event(s), first at {first.get('time_ms')} ms: {first.get('message')}"
    return False, f"no engine event contains {p['text']!r} ({len(facts.events)} events)"


def _consumer_polled(p: dict, facts: Facts) -> tuple[bool, str]:
    polls = [op for op in facts.history if op.get("process") == p["consumer"]
             and op.get("f") == "poll" and op.get("type") == "ok"]
    if len(polls) < p["poll"]:
        return False, f"{p['consumer']} polled only {len(polls)} times"
    got = [v for _o, v in polls[p["poll"] - 1].get("value") or ()]
    return got == list(p["values"]), f"poll {p['poll']} of {p['consumer']} delivered {got}"


_FENCED = ("INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED")


def _txn_outcome(p: dict, facts: Facts) -> tuple[bool, str]:
    values = list(p["values"])
    ends = [op for op in facts.history if op.get("process") == p["producer"]
            and op.get("f") in ("commit_txn", "abort_txn") and op.get("type") != "invoke"
            and list(op.get("value") or ()) == values]
    if not ends:
        return False, f"no commit/abort outcome of {p['producer']}'s transaction {values}"
    last = ends[-1]
    got = {("commit_txn", "ok"): "committed", ("abort_txn", "ok"): "aborted"}.get(
        (last["f"], last["type"]), "fenced" if last.get("error") in _FENCED else "failed")
    return got == p["outcome"], (f"{p['producer']}'s transaction {values}: {last['f']} "
                                 f"{last['type']}" + (f" {last['error']}" if last.get("error") else ""))


def _lso(p: dict, facts: Facts, snap: Snapshot) -> tuple[bool, str]:
    r = snap.replica(p["broker"]) if p.get("broker") is not None else snap.leader_replica()
    if r is None:
        return False, "no such replica"
    return r.last_stable_offset == p["value"], (f"broker {r.broker} LSO {r.last_stable_offset} "
                                                f"(HW {r.high_watermark})")


def _short(values: list[int]) -> str:
    return "[" + " ".join(f"m{v}" for v in values) + "]" if len(values) <= 12 else (
        f"[{len(values)} records]")


_KINDS: dict[str, Callable[..., tuple[bool, str]]] = {
    "lost": _lost,
    "durable": _durable,
    "present": _present,
    "duplicated": _duplicated,
    "not_duplicated": _not_duplicated,
    "truncated": _truncated,
    "log": _log,
    "consumer_saw": _consumer_saw,
    "consumer_did_not_see": _consumer_did_not_see,
    "consumer_saw_twice": _consumer_saw_twice,
    "listed_offsets": _listed_offsets,
    "consumer_within_hw": _consumer_within_hw,
    "consumer_fetched_from": _consumer_fetched_from,
    "consumer_saw_truncated": _consumer_saw_truncated,
    "leader": _leader,
    "offline": _offline,
    "isr": _isr,
    "hw": _offset_check("high_watermark"),
    "leo": _offset_check("log_end_offset"),
    "logs_match": _logs_match,
    "logs_diverge": _logs_diverge,
    "unavailable_ms_between": _unavailable,
    "acked": _acked,
    "not_acked": _not_acked,
    "error_seen": _error_seen,
    "inconsistent_offsets": _inconsistent,
    "consistent_offsets": _consistent,
    "event_seen": _event_seen,
    "consumer_polled": _consumer_polled,
    "txn_outcome": _txn_outcome,
    "lso": _lso,
}
