"""Several replicas' copies of one partition, side by side: where they diverge, what each
holds, what the current protocol would truncate when they rejoin, which acknowledged records
survive nowhere.

The rejoin is computed with the Rust core's rules of the latest generation (truncate on
fetch, Kafka 2.8+): the follower fetches from its log end offset with its latest epoch
(``AbstractFetcherThread.partitionFetchState``: a follower with an epoch starts FETCHING), the
leader checks it (``epochlab.leader_fetch_check``, Kafka ``Partition.readRecords`` /
``UnifiedLog.endOffsetForEpoch``), a DivergingEpoch answer truncates the follower
(``epochlab.diverging_epoch_truncation``, ``AbstractFetcherThread.truncateOnFetchResponse``) and the
fetch repeats until the leader serves records. An OFFSET_OUT_OF_RANGE answer is handled as
``AbstractFetcherThread.fetchOffsetAndTruncate`` does: truncate to the leader's log end when
the follower is ahead of it, start over at the leader's log start when it is behind it. A
follower without epochs (v0/v1 data only) truncates to its high watermark first
(``ReplicaState.TRUNCATING`` without an epoch).

Records are compared by content (leader epoch, key, value) at each offset: two replicas agree
at an offset when both hold a record there with the same epoch, key and value.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import epochlab
from epochlab.errors import ConfigError
from epochlab.ondisk.reader import PartitionView

__all__ = ["AckedRecord", "Forensics", "Rejoin", "Replica", "compare_replicas", "read_acked"]

#: a record at an offset: (leader epoch of its batch, key, value)
Content = tuple[int, bytes | None, bytes | None]


@dataclass
class Replica:
    """One replica's copy: its name (broker), the partition view and its records by offset."""

    name: str
    view: PartitionView
    records: dict[int, Content] = field(default_factory=dict)

    @classmethod
    def of(cls, name: str, view: PartitionView) -> Replica:
        records: dict[int, Content] = {}
        for b in view.batches():
            if b["is_control"]:
                continue
            for r in b["records"]:
                records[int(r["offset"])] = (int(b["partition_leader_epoch"]), r["key"], r["value"])
        return cls(name, view, records)

    @property
    def log_end_offset(self) -> int:
        return self.view.log_end_offset

    @property
    def high_watermark(self) -> int:
        hw = self.view.high_watermark
        return min(hw, self.log_end_offset) if hw is not None else self.view.log_start_offset

    @property
    def latest_epoch(self) -> int | None:
        epochs = self.view.leader_epochs()
        return epochs[-1][0] if epochs else None


@dataclass
class Rejoin:
    """What happens to a follower when it fetches from the leader: the truncation steps
    (``(reason, offset)``), the offset it keeps below, and the records it loses."""

    replica: str
    steps: list[tuple[str, int]]
    kept_below: int
    start_at: int | None
    truncated: list[tuple[int, Content]]


@dataclass(frozen=True)
class AckedRecord:
    """A record a producer had acknowledged (one line of the history file)."""

    value: bytes | None
    key: bytes | None = None
    offset: int | None = None
    line: int = 0


@dataclass
class Forensics:
    partition: str
    leader: str
    leader_chosen_by: str
    replicas: list[Replica]
    first_divergence: dict[tuple[str, str], int | None]
    ranges: list[dict[str, Any]]
    rejoins: list[Rejoin]
    acked_lost: list[dict[str, Any]] | None = None
    acked_checked: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "leader": self.leader,
            "leader_chosen_by": self.leader_chosen_by,
            "replicas": [{"name": r.name, "path": r.view.path, "log_start_offset": r.view.log_start_offset,
                          "log_end_offset": r.log_end_offset, "high_watermark": r.high_watermark,
                          "leader_epochs": [list(e) for e in r.view.leader_epochs()]} for r in self.replicas],
            "first_divergence": [{"a": a, "b": b, "offset": off} for (a, b), off in self.first_divergence.items()],
            "ranges": self.ranges,
            "rejoin": [{"replica": j.replica, "steps": [{"reason": s, "offset": o} for s, o in j.steps],
                        "kept_below": j.kept_below, "start_at": j.start_at,
                        "truncated": [_record_json(o, c) for o, c in j.truncated]} for j in self.rejoins],
            "acked_checked": self.acked_checked,
            "acked_lost": self.acked_lost,
        }


def _text(raw: bytes | None) -> str | None:
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + raw.hex()


def _record_json(offset: int, content: Content) -> dict[str, Any]:
    epoch, key, value = content
    return {"offset": offset, "epoch": epoch, "key": _text(key), "value": _text(value)}


def _first_divergence(a: Replica, b: Replica) -> int | None:
    """The first offset where the two differ (content, or one has a record the other lacks
    below the shorter log end); ``None`` if one is a prefix of the other."""
    start = max(a.view.log_start_offset, b.view.log_start_offset)
    end = min(a.log_end_offset, b.log_end_offset)
    for offset in range(start, end):
        if a.records.get(offset) != b.records.get(offset):
            return offset
    return None


def _ranges(replicas: list[Replica]) -> list[dict[str, Any]]:
    """Contiguous offset ranges over which every replica's holding (which content, or nothing)
    stays the same: each range lists the groups of replicas that hold identical records."""
    lo = min(r.view.log_start_offset for r in replicas)
    hi = max(r.log_end_offset for r in replicas)
    out: list[dict[str, Any]] = []

    def signature(offset: int) -> tuple[tuple[str, ...], ...]:
        groups: dict[Content | None, list[str]] = {}
        for r in replicas:
            groups.setdefault(r.records.get(offset), []).append(r.name)
        return tuple(sorted(tuple(v) for k, v in groups.items() if k is not None))

    current: tuple[tuple[str, ...], ...] | None = None
    for offset in range(lo, hi):
        sig = signature(offset)
        if out and sig == current:
            out[-1]["end"] = offset + 1
            continue
        current = sig
        epochs = {}
        for group in sig:
            held = next(r for r in replicas if r.name == group[0]).records[offset]
            epochs[",".join(group)] = held[0]
        out.append({"start": offset, "end": offset + 1, "groups": [list(g) for g in sig],
                    "epochs": epochs, "agree": len(sig) == 1 and len(sig[0]) == len(replicas)})
    return out


def _rejoin(leader: Replica, follower: Replica) -> Rejoin:
    lead_cache = epochlab.LeaderEpochCache(leader.view.leader_epochs())
    cache = epochlab.LeaderEpochCache(follower.view.leader_epochs())
    leo, hw = follower.log_end_offset, follower.high_watermark
    steps: list[tuple[str, int]] = []
    start_at: int | None = None
    if cache.latest_epoch is None and leo > hw:
        steps.append(("no leader epochs (v0/v1 data): truncate to the high watermark", hw))
        leo = hw
    for _ in range(len(follower.view.leader_epochs()) + 3):
        latest = cache.latest_epoch
        if latest is not None:
            check = epochlab.leader_fetch_check(lead_cache, leader.log_end_offset,
                                                leader.view.log_start_offset, leo, latest)
            kind = check.kind
        else:
            check, kind = None, "read"
            if leo < leader.view.log_start_offset or leo > leader.log_end_offset:
                kind = "offset_out_of_range"
        if kind == "read":
            break
        if kind == "diverging" and check is not None:
            epoch, end = check.diverging_epoch
            outcome = epochlab.diverging_epoch_truncation((epoch, end), cache, leo, min(hw, leo))
            target = outcome.offset if outcome.offset is not None else leo
            steps.append((f"DivergingEpoch(epoch {epoch}, end offset {end})", target))
        elif leo > leader.log_end_offset:
            target = leader.log_end_offset
            steps.append(("OFFSET_OUT_OF_RANGE: ahead of the leader's log end", target))
        else:
            start_at = leader.view.log_start_offset
            steps.append(("OFFSET_OUT_OF_RANGE: behind the leader's log start (truncate fully)", start_at))
            leo = start_at
            cache = epochlab.LeaderEpochCache()
            continue
        if target >= leo:
            break
        leo = target
        cache.truncate_from_end(leo)
    truncated = sorted((o, c) for o, c in follower.records.items() if o >= leo or (start_at is not None and o < start_at))
    return Rejoin(follower.name, steps, leo, start_at, truncated)


def _choose_leader(replicas: list[Replica], leader: str | None) -> tuple[Replica, str]:
    if leader is not None:
        for r in replicas:
            if r.name == leader:
                return r, "--leader"
        names = ", ".join(r.name for r in replicas)
        raise ConfigError(f"--leader {leader}: no such replica (have {names})", where="--leader",
                          field="leader", expected=names, got=leader)
    best = max(replicas, key=lambda r: (r.latest_epoch if r.latest_epoch is not None else -1, r.log_end_offset))
    return best, "highest latest leader epoch, then longest log (give --leader to override)"


def compare_replicas(replicas: list[Replica], *, leader: str | None = None,
                     acked: list[AckedRecord] | None = None) -> Forensics:
    """Forensics of one partition's replicas (at least two)."""
    lead, why = _choose_leader(replicas, leader)
    pairs = {(a.name, b.name): _first_divergence(a, b)
             for i, a in enumerate(replicas) for b in replicas[i + 1:]}
    rejoins = [_rejoin(lead, r) for r in replicas if r is not lead]
    result = Forensics(lead.view.name, lead.name, why, replicas, pairs, _ranges(replicas), rejoins)
    if acked is not None:
        result.acked_checked = len(acked)
        result.acked_lost = _acked_lost(lead, replicas, rejoins, acked)
    return result


def _acked_lost(lead: Replica, replicas: list[Replica], rejoins: list[Rejoin],
                acked: list[AckedRecord]) -> list[dict[str, Any]]:
    """Acknowledged records that no replica holds once every follower has rejoined (the
    leader's log plus what each follower keeps), each with where it is now (``held_by``:
    replicas that still have it and will truncate it)."""
    kept = {lead.name: dict(lead.records)}
    for j in rejoins:
        r = next(x for x in replicas if x.name == j.replica)
        kept[r.name] = {o: c for o, c in r.records.items()
                        if o < j.kept_below and (j.start_at is None or o >= j.start_at)}
    surviving_by_content = Counter((c[1], c[2]) for log in kept.values() for c in log.values())
    lost: list[dict[str, Any]] = []
    for a in acked:
        if a.offset is not None:
            survives = any(log.get(a.offset, (None, object(), object()))[2] == a.value
                           and (a.key is None or log[a.offset][1] == a.key) for log in kept.values())
        else:
            survives = any(n > 0 for (k, v), n in surviving_by_content.items()
                           if v == a.value and (a.key is None or k == a.key))
        if survives:
            continue
        held_by = [r.name for r in replicas
                   if any(c[2] == a.value and (a.key is None or c[1] == a.key)
                          and (a.offset is None or o == a.offset) for o, c in r.records.items())]
        lost.append({"line": a.line, "offset": a.offset, "key": _text(a.key), "value": _text(a.value),
                     "held_now_by": held_by})
    return lost


def read_acked(path: str | os.PathLike[str]) -> list[AckedRecord]:
    """The history file: JSON Lines, one acknowledged record per line, with ``value`` (text)
    or ``value_hex``, optionally ``key`` / ``key_hex`` and ``offset`` (the offset the producer
    was told). Blank lines are skipped; anything else malformed is a :class:`ConfigError`
    naming the line."""
    out: list[AckedRecord] = []
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})", where=str(p), field="file",
                          expected="JSON Lines", got=None) from None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _bad(p, n, f"not JSON: {exc.msg}") from None
        if not isinstance(obj, dict):
            raise _bad(p, n, "expected an object like {\"value\": \"...\"}")
        out.append(AckedRecord(_bytes_field(obj, "value", p, n), _bytes_field(obj, "key", p, n),
                               _offset_field(obj, p, n), n))
    return out


def _bad(path: Path, line: int, why: str) -> ConfigError:
    return ConfigError(f"{path}:{line}: {why}", where=f"{path}:{line}", field="line", expected="JSON Lines", got=None)


def _bytes_field(obj: dict[str, Any], name: str, path: Path, line: int) -> bytes | None:
    if f"{name}_hex" in obj:
        raw = obj[f"{name}_hex"]
        if not isinstance(raw, str):
            raise _bad(path, line, f"{name}_hex must be text")
        try:
            return bytes.fromhex(raw)
        except ValueError:
            raise _bad(path, line, f"{name}_hex is not hexadecimal") from None
    value = obj.get(name)
    if value is None:
        if name == "value" and "value" not in obj:
            raise _bad(path, line, "needs \"value\" or \"value_hex\"")
        return None
    if not isinstance(value, str):
        raise _bad(path, line, f"{name} must be text (use {name}_hex for bytes)")
    return value.encode("utf-8")


def _offset_field(obj: dict[str, Any], path: Path, line: int) -> int | None:
    offset = obj.get("offset")
    if offset is None:
        return None
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset < 1 << 63:
        raise _bad(path, line, f"offset must be an integer in [0, 2^63), got {offset!r}")
    return offset
