"""Text and JSON views of inspected directories. Batch and record lines use the words and
order of Kafka's ``DumpLogSegments`` (``printBatchLevel``, ``printRecordMetadata``), so a
line of ``epochlab inspect`` can be compared with ``kafka-dump-log.sh`` output by eye or diff."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from epochlab.ondisk.forensics import Forensics
from epochlab.ondisk.reader import FileProblem, LogDirView, PartitionView, Segment

__all__ = ["batch_line", "forensics_text", "log_dir_json", "log_dir_text", "partition_json", "partition_text",
           "record_line", "record_sequence"]


def _optional_long(value: int | None) -> str:
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def batch_line(b: dict[str, Any]) -> str:
    """One batch as ``DumpLogSegments.printBatchLevel`` prints it."""
    if b["magic"] >= 2:
        head = (f"baseOffset: {b['base_offset']} lastOffset: {b['last_offset']} count: {b['count']} "
                f"baseSequence: {b['base_sequence']} lastSequence: {b['last_sequence']} "
                f"producerId: {b['producer_id']} producerEpoch: {b['producer_epoch']} "
                f"partitionLeaderEpoch: {b['partition_leader_epoch']} "
                f"isTransactional: {str(b['is_transactional']).lower()} isControl: {str(b['is_control']).lower()} "
                f"deleteHorizonMs: {_optional_long(b['delete_horizon_ms'])}")
    else:
        head = f"offset: {b['last_offset']}"
    return (f"{head} position: {b['position']} {b['timestamp_type']}: {b['max_timestamp']} size: {b['size']} "
            f"magic: {b['magic']} compresscodec: {b['compression']} crc: {b['crc']} "
            f"isvalid: {str(b['crc_valid']).lower()}")


def _size(raw: bytes | None) -> int:
    return -1 if raw is None else len(raw)


def _shown(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + raw.hex()


def record_sequence(b: dict[str, Any], r: dict[str, Any]) -> int:
    """A v2 record's sequence as Kafka derives it (``DefaultRecord.sequence``: the batch's base
    sequence plus the offset delta, wrapping past ``Integer.MAX_VALUE`` as
    ``DefaultRecordBatch.incrementSequence`` does; -1 without a producer)."""
    base, delta = int(b["base_sequence"]), int(r["offset_delta"])
    if base < 0:
        return -1
    top = (1 << 31) - 1
    return delta - (top - base) - 1 if base > top - delta else base + delta


def record_line(b: dict[str, Any], r: dict[str, Any], *, payload: bool = False,
                show: Callable[[bytes], str] = _shown) -> str:
    """One record as ``DumpLogSegments.printRecordMetadata`` prints it, plus key and payload
    as ``--print-data-log`` does when ``payload`` (``show`` turns bytes into text: by default
    UTF-8, non-UTF-8 bytes in hex)."""
    line = (f"| offset: {r['offset']} {b['timestamp_type']}: {r['timestamp']} "
            f"keySize: {_size(r['key'])} valueSize: {_size(r['value'])}")
    if b["magic"] >= 2:
        keys = ",".join(k if isinstance(k, str) else show(k) for k, _ in r["headers"])
        line += f" sequence: {record_sequence(b, r)} headerKeys: [{keys}]"
    else:
        line += f" isValid: {str(r['crc_valid']).lower()} crc: {r['crc']}"
    control = b.get("control")
    if b["is_control"] and control is not None:
        if control["type"] in ("ABORT", "COMMIT"):
            line += f" endTxnMarker: {control['type']} coordinatorEpoch: {control['coordinator_epoch']}"
        else:
            line += f" controlType: {control['type']}({control['type_id']})"
    elif payload:
        if r["key"] is not None:
            line += f" key: {show(r['key'])}"
        if r["value"] is not None:
            line += f" payload: {show(r['value'])}"
    return line


def _segment_text(s: Segment, records: bool, payload: bool) -> Iterable[str]:
    n = len(s.batches)
    span = f", offsets {s.batches[0]['base_offset']}-{s.batches[-1]['last_offset']}" if n else ""
    yield f"  Segment {Path(s.file).name}: {s.size} bytes, {n} batches{span}"
    for b in s.batches:
        yield "    " + batch_line(b)
        if records:
            for r in b["records"]:
                yield "    " + record_line(b, r, payload=payload)
    if s.error is not None and s.error.offset is None:
        yield f"    ! not read: {s.error.reason}"
    elif s.error is not None:
        yield f"    ! {s.size - s.valid_bytes} bytes not read from byte {s.error.offset}: {s.error.reason}"
    if s.offset_index is not None:
        yield f"    .index: {len(s.offset_index)} entries" + _few(f"offset {s.base_offset + o} position {p}"
                                                              for o, p in s.offset_index)
    if s.time_index is not None:
        yield f"    .timeindex: {len(s.time_index)} entries" + _few(f"timestamp {t} offset {s.base_offset + o}"
                                                                  for t, o in s.time_index)
    for t in s.aborted_txns or []:
        yield (f"    .txnindex: version: {t['version']} producerId: {t['producer_id']} firstOffset: {t['first_offset']} "
               f"lastOffset: {t['last_offset']} lastStableOffset: {t['last_stable_offset']}")


def _few(items: Iterable[str], limit: int = 3) -> str:
    shown = list(items)
    if not shown:
        return ""
    more = f", ... ({len(shown) - limit} more)" if len(shown) > limit else ""
    return " (" + ", ".join(shown[:limit]) + more + ")"


def _snapshot_text(offset: int, snap: dict[str, Any]) -> Iterable[str]:
    yield f"  Producer snapshot {offset:020d}.snapshot: {len(snap['entries'])} producers"
    for e in snap["entries"]:
        txn = e["current_txn_first_offset"]
        yield (f"    producerId: {e['producer_id']} producerEpoch: {e['epoch']} "
               f"coordinatorEpoch: {e['coordinator_epoch']} currentTxnFirstOffset: "
               f"{_optional_long(None if txn < 0 else txn)} lastTimestamp: {e['timestamp']} "
               f"lastSequence: {e['last_sequence']} lastOffset: {e['last_offset']} offsetDelta: {e['offset_delta']}")


def partition_text(v: PartitionView, *, records: bool = False, payload: bool = False) -> list[str]:
    out = [f"Partition {v.name}" + (f" (topic id {v.topic_id})" if v.topic_id else "") + f": {v.path}"]
    hw = "?" if v.high_watermark is None else v.high_watermark
    rp = "?" if v.recovery_point is None else v.recovery_point
    out.append(f"  log start {v.log_start_offset}, log end {v.log_end_offset}, high watermark {hw}, "
               f"recovery point {rp}")
    if v.leader_epoch_checkpoint is not None:
        out.append("  leader-epoch-checkpoint: " + (" ".join(f"{e}@{o}" for e, o in v.leader_epoch_checkpoint)
                                                      or "(empty)"))
    rebuilt = v.epochs_from_batches()
    if v.leader_epoch_checkpoint is None or [e for e in v.leader_epoch_checkpoint if e[1] < v.log_end_offset] != rebuilt:
        out.append("  leader epochs from batches: " + (" ".join(f"{e}@{o}" for e, o in rebuilt) or "(none)"))
    for s in v.segments:
        out.extend(_segment_text(s, records, payload))
    for offset, snap in sorted(v.producer_snapshots.items()):
        out.extend(_snapshot_text(offset, snap))
    if v.other_files:
        out.append("  other files: " + " ".join(v.other_files))
    return out


def log_dir_text(d: LogDirView, *, records: bool = False, payload: bool = False) -> str:
    node = f" (node {d.node_id})" if d.node_id is not None else ""
    out = [f"Log directory {d.path}{node}"]
    for name, entries in d.checkpoints.items():
        out.append(f"  {name}: " + (" ".join(f"{t}-{p}={o}" for t, p, o in entries) or "(empty)"))
    for v in d.partitions.values():
        out.extend(partition_text(v, records=records, payload=payload))
    problems = d.all_problems()
    if problems:
        out.append(f"Problems ({len(problems)}):")
        out.extend(f"  {p}" for p in problems)
    return "\n".join(out) + "\n"


def _bytes_json(raw: bytes | None, name: str) -> dict[str, Any]:
    if raw is None:
        return {name: None, f"{name}_size": -1}
    try:
        return {name: raw.decode("utf-8"), f"{name}_size": len(raw)}
    except UnicodeDecodeError:
        return {f"{name}_hex": raw.hex(), f"{name}_size": len(raw)}


def _batch_json(b: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in b.items() if k != "records"}
    out["records"] = []
    for r in b["records"]:
        rec = {k: v for k, v in r.items() if k not in ("key", "value", "headers")}
        rec.update(_bytes_json(r["key"], "key"))
        rec.update(_bytes_json(r["value"], "value"))
        rec["headers"] = [{"key": k if isinstance(k, str) else _shown(k), **_bytes_json(hv, "value")}
                          for k, hv in r["headers"]]
        out["records"].append(rec)
    return out


def _problem_json(p: FileProblem | None) -> dict[str, Any] | None:
    return None if p is None else {"file": p.file, "offset": p.offset, "reason": p.reason}


def partition_json(v: PartitionView) -> dict[str, Any]:
    return {
        "topic": v.topic, "partition": v.partition, "path": v.path, "topic_id": v.topic_id,
        "log_start_offset": v.log_start_offset, "log_end_offset": v.log_end_offset,
        "high_watermark": v.high_watermark, "recovery_point": v.recovery_point,
        "leader_epoch_checkpoint": None if v.leader_epoch_checkpoint is None else [list(e) for e in v.leader_epoch_checkpoint],
        "leader_epochs_from_batches": [list(e) for e in v.epochs_from_batches()],
        "segments": [{"file": s.file, "base_offset": s.base_offset, "size": s.size, "valid_bytes": s.valid_bytes,
                      "error": _problem_json(s.error), "batches": [_batch_json(b) for b in s.batches],
                      "offset_index": s.offset_index, "time_index": s.time_index, "aborted_txns": s.aborted_txns}
                     for s in v.segments],
        "producer_snapshots": {str(k): s for k, s in sorted(v.producer_snapshots.items())},
        "other_files": v.other_files,
        "problems": [_problem_json(p) for p in v.problems],
    }


def log_dir_json(d: LogDirView) -> dict[str, Any]:
    return {"path": d.path, "node_id": d.node_id,
            "checkpoints": {k: [list(e) for e in v] for k, v in d.checkpoints.items()},
            "partitions": {k: partition_json(v) for k, v in d.partitions.items()},
            "problems": [_problem_json(p) for p in d.problems]}


def forensics_text(f: Forensics) -> str:
    out = [f"Replicas of {f.partition}: leader {f.leader} ({f.leader_chosen_by})"]
    for r in f.replicas:
        epochs = " ".join(f"{e}@{o}" for e, o in r.view.leader_epochs()) or "(none)"
        out.append(f"  {r.name}: log start {r.view.log_start_offset}, log end {r.log_end_offset}, "
                   f"high watermark {r.high_watermark}, epochs {epochs}")
    out.append("  Holdings (offset ranges; replicas in one group hold identical records):")
    for g in f.ranges:
        groups = " | ".join(f"{','.join(names)} (epoch {g['epochs'][','.join(names)]})" for names in g["groups"])
        mark = "" if g["agree"] else "   <- differ"
        out.append(f"    [{g['start']}, {g['end']}): {groups or 'nobody'}{mark}")
    for (a, b), off in f.first_divergence.items():
        out.append(f"  {a} vs {b}: " + ("one is a prefix of the other" if off is None else f"first differ at offset {off}"))
    out.append("  On rejoining the leader (truncate on fetch, Kafka 2.8+):")
    for j in f.rejoins:
        if not j.steps:
            out.append(f"    {j.replica}: nothing to truncate")
            continue
        steps = "; ".join(f"{reason} -> {off}" for reason, off in j.steps)
        out.append(f"    {j.replica}: {steps}; keeps offsets below {j.kept_below}, loses {len(j.truncated)} records"
                   + (f" (offsets {j.truncated[0][0]}-{j.truncated[-1][0]})" if j.truncated else ""))
    if f.acked_lost is not None:
        out.append(f"  Acknowledged records checked: {f.acked_checked}; surviving nowhere after rejoin: "
                   f"{len(f.acked_lost)}")
        for a in f.acked_lost:
            where = ", ".join(a["held_now_by"]) or "no replica now"
            out.append(f"    line {a['line']}: value {a['value']!r}" + (f" at offset {a['offset']}" if a["offset"] is not None
                                                                         else "") + f" (held now by {where})")
    return "\n".join(out) + "\n"
