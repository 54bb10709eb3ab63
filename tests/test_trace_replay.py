"""Replay semantics: each invariant on a crafted trace, Rust vs pure-Python reference."""

from __future__ import annotations

from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")

from epochlab import trace  # noqa: E402
from epochlab.trace.schema import FLAG_LOSE_UNFLUSHED, FLAG_UNCLEAN, KIND_CODES  # noqa: E402


def table(rows: list[dict[str, Any]]) -> Any:
    cols: dict[str, list[Any]] = {f.name: [] for f in trace.schema()}
    for i, r in enumerate(rows):
        for name in cols:
            if name == "event":
                cols[name].append(i)
            elif name == "kind":
                cols[name].append(KIND_CODES[r["kind"]])
            elif name in ("partition", "flags"):
                cols[name].append(r.get(name, 0))
            else:
                cols[name].append(r.get(name))
    return pa.Table.from_arrays([pa.array(cols[f.name], f.type) for f in trace.schema()],
                                schema=trace.schema())


def elect(leader: int, epoch: int, followers: tuple[int, ...] = (), unclean: bool = False) -> list[dict[str, Any]]:
    rows = [{"kind": "leader_change", "leader": leader, "epoch": epoch, "flags": FLAG_UNCLEAN if unclean else 0},
            {"kind": "become_leader", "broker": leader, "epoch": epoch}]
    rows += [{"kind": "become_follower", "broker": f, "epoch": epoch, "leader": leader} for f in followers]
    return rows


def lead(b: int, epoch: int, values: list[int], offset: int | None = None, **kw: Any) -> dict[str, Any]:
    return {"kind": "append_leader", "broker": b, "epoch": epoch, "values": values, "offset": offset, **kw}


def follow(b: int, src: int, upto: int) -> dict[str, Any]:
    return {"kind": "fetch", "broker": b, "leader": src, "offset": upto}


def hw(b: int, value: int) -> dict[str, Any]:
    return {"kind": "high_watermark", "broker": b, "offset": value}


def both(rows: list[dict[str, Any]], **kw: Any) -> tuple[Any, Any]:
    t = table(rows)
    rust, ref = trace.replay(t, **kw), trace.reference_replay(t, **kw)
    key = lambda v: (v["invariant"], v["verdict"], v["row"], v["broker"], v["records"])  # noqa: E731
    assert [key(v) for v in rust.violations] == [key(v) for v in ref.violations]
    assert rust.replicas == ref.replicas
    return rust, ref


def first(report: Any, invariant: str) -> dict[str, Any]:
    found = [v for v in report.violations if v["invariant"] == invariant]
    assert found, report.violations
    return found[0]


BASE = elect(1, 0, (2,)) + [lead(1, 0, [10, 11], 0), follow(2, 1, 2), hw(1, 2), hw(2, 2)]


def test_clean_trace_has_no_violation() -> None:
    rust, _ = both(BASE)
    assert rust.verdict == "ok" and rust.rows == len(BASE)


def test_hw_beyond_leo() -> None:
    rows = BASE + [hw(2, 5)]
    v = first(both(rows)[0], "Inv-HW-bounds")
    assert v["row"] == len(BASE) and v["broker"] == 2 and v["verdict"] == "protocol-violation"


def test_leader_hw_going_down() -> None:
    v = first(both(BASE + [hw(1, 1)])[0], "Inv-HW-bounds")
    assert v["row"] == len(BASE) and "went down" in v["message"]


def test_epoch_regression() -> None:
    rows = BASE + elect(1, 3, (2,)) + [lead(1, 3, [12]), lead(1, 2, [13])]
    v = first(both(rows)[0], "Inv-EpochMonotone")
    assert v["row"] == len(rows) - 1 and v["records"][0]["offset"] == 3


def test_truncation_inside_a_batch() -> None:
    v = first(both(BASE + [{"kind": "truncate", "broker": 2, "offset": 1}])[0], "Inv-OffsetMonotone")
    assert v["row"] == len(BASE) and v["records"][0]["value"] == 11


def test_log_matching_below_both_high_watermarks() -> None:
    rows = elect(1, 0, (2,)) + [lead(1, 0, [10, 11], 0),
                                {"kind": "append_follower", "broker": 2, "epoch": 0, "offset": 0, "values": [10, 99]},
                                hw(1, 2), hw(2, 2)]
    v = first(both(rows)[0], "Inv-LogMatching")
    assert v["row"] == 6 and v["offset"] == 2
    assert [(r["broker"], r["offset"], r["value"]) for r in v["records"]] == [(2, 1, 99), (1, 1, 11)]


def test_committed_loss_on_a_new_leader_and_its_excuse() -> None:
    rows = BASE + [{"kind": "truncate", "broker": 2, "offset": 0}] + elect(2, 1, (1,))
    v = first(both(rows)[0], "Inv-Durability")
    assert v["row"] == len(rows) - 2 and v["verdict"] == "protocol-violation"  # become_leader of 2
    assert v["records"][0] == {"broker": None, "offset": 0, "value": 10, "epoch": 0}
    unclean = BASE + [{"kind": "truncate", "broker": 2, "offset": 0}] + elect(2, 1, (1,), unclean=True)
    v = first(both(unclean)[0], "Inv-Durability")
    assert v["verdict"] == "allowed-by-configuration" and "unclean" in v["reason"]
    lossy = BASE + [{"kind": "flush", "broker": 2, "offset": 0},
                    {"kind": "crash", "broker": 2, "flags": FLAG_LOSE_UNFLUSHED},
                    {"kind": "restart", "broker": 2}] + elect(2, 1, (1,))
    v = first(both(lossy)[0], "Inv-Durability")
    assert v["verdict"] == "allowed-by-configuration" and "KIP-966" in v["reason"]


def test_duplicates_under_idempotence() -> None:
    p = {"producer_id": 7, "producer_epoch": 0}
    rows = elect(1, 0) + [lead(1, 0, [5], base_sequence=0, **p), lead(1, 0, [6], base_sequence=1, **p),
                          lead(1, 0, [5], base_sequence=2, **p)]
    v = first(both(rows)[0], "Inv-NoDuplicates")
    assert v["row"] == 4 and [r["offset"] for r in v["records"]] == [0, 2]
    assert both(rows, checks=["log-matching"])[0].verdict == "ok"


def test_two_leaders_of_one_epoch() -> None:
    rows = BASE + [{"kind": "become_leader", "broker": 2, "epoch": 0}]
    assert first(both(rows)[0], "Inv-EpochFencing")["row"] == len(BASE)


def test_inconsistent_rows() -> None:
    rows = BASE + [lead(1, 0, [1], offset=7), follow(2, 1, 9),
                   {"kind": "crash", "broker": 2}, lead(2, 0, [3])]
    report, _ = both(rows, collect="all")
    consistency = [v for v in report.violations if v["invariant"] == "trace-consistency"]
    assert [v["row"] for v in consistency] == [len(BASE), len(BASE) + 3]


def test_collect_modes_and_hooks() -> None:
    rows = BASE + [hw(2, 9), hw(2, 8), hw(1, 0)]
    assert len(both(rows, collect="all")[0].violations) == 3
    assert len(both(rows)[0].violations) == 1
    stopped = trace.replay(table(rows), collect="stop")
    assert stopped.rows == len(BASE) + 1 and stopped.stopped_early
    seen: list[tuple[int, int]] = []
    trace.replay(table(rows), hooks={"high_watermark": lambda row, r: seen.append((row["event"], r.rows))})
    assert seen == [(i, i + 1) for i, r in enumerate(rows) if r["kind"] == "high_watermark"]


@pytest.mark.parametrize("seed", range(8))
def test_rust_and_reference_agree_on_generated_traces(seed: int) -> None:
    t = trace.generate(300, leader_changes=12, replicas=3 + seed % 3, partitions=1 + seed % 2,
                       seed=seed, crash_every=5 if seed % 2 else None)
    if seed >= 4:  # damage the run: drop a random fetch so a follower diverges from its leader
        rows = t.to_pylist()
        fetches = [i for i, r in enumerate(rows) if r["kind"] == KIND_CODES["fetch"]]
        del rows[fetches[len(fetches) // 2]]
        t = pa.Table.from_pylist(rows, schema=t.schema)
    rust, ref = trace.replay(t, collect="all"), trace.reference_replay(t, collect="all")
    assert rust.replicas == ref.replicas
    key = lambda v: (v["invariant"], v["verdict"], v["row"], v["records"])  # noqa: E731
    assert [key(v) for v in rust.violations] == [key(v) for v in ref.violations]
    if seed < 4:
        assert rust.verdict == "ok"


def test_a_trace_naming_too_many_brokers_in_one_partition_is_refused_not_an_abort() -> None:
    """The replay keeps a replicas x replicas matrix per partition: a trace naming thousands of
    brokers in one partition is a malformed trace (the report's error, exit 2 on the command
    line), not an out-of-memory abort."""
    rows = [{"kind": "become_follower", "broker": b, "epoch": 0, "leader": 0} for b in range(1500)]
    for report in (trace.replay(table(rows)), trace.reference_replay(table(rows))):
        assert report.error is not None and "at most 1024 brokers per partition" in str(report.error)
    ok = [{"kind": "become_follower", "broker": b * 1_000_000, "epoch": 0, "leader": 0} for b in range(8)]
    assert trace.replay(table(ok)).error is None                # large ids are fine


@pytest.mark.parametrize(("field", "value"), [("offset", 2**63), ("epoch", 2**31), ("broker", 2**31)])
def test_numbers_outside_kafkas_ranges_are_a_malformed_trace(field: str, value: int) -> None:
    rows = elect(1, 0, (2,)) + [lead(1, 0, [1], offset=0), hw(1, 1)]
    rows[-2 if field == "offset" else 1] = dict(rows[-2 if field == "offset" else 1], **{field: value})
    for report in (trace.replay(table(rows)), trace.reference_replay(table(rows))):
        assert report.error is not None and "outside Kafka's" in str(report.error), report
