"""One campaign run: a short workload with one leader failure, executed and measured.

:func:`build_schedule` turns a configuration and a run seed into an ordinary
:class:`~epochlab.fuzz.schedule.Schedule` (so every run, and every violation, replays with
``epochlab replay``): producer ``p1`` (the configuration's ``acks`` / idempotence) sends
10-20 batches of 1-3 records from t = 1 s, consumer ``c1`` polls now and then, and once,
a third to two thirds of the way in (0-15 ms after a send), the *fault* strikes broker 1, the
initial leader:

* ``leader-crash``: the leader crashes (25 %: losing its unflushed tail, a power failure)
  and restarts 8-20 s later (10 %: 3 s later, before the controller's 6 s session timeout);
* ``follower-lag``: follower 3 is slowed from the start and falls out of the ISR, then the
  leader crashes and restarts 8-20 s later;
* ``correlated``: the leader and follower 2 crash within 50 ms of each other (processes,
  disks intact), half the time with follower 3 lagging; both restart 8-30 s later;
* ``leader-partition``: the leader and the producer are cut off from the controller, the
  other brokers and the consumer for 8-15 s (split brain), then the network heals.

:func:`run_one` executes the schedule with the fuzz executor's engine and checker, the fuzzer's
checks (state invariants after every action and after every event that is not quiet, healing
phase included; history and liveness invariants after the healing phase) and returns one flat row
(:data:`ROW_FIELDS`): writes acknowledged and lost, committed and lost, duplicates,
out-of-order records, offline time, the phases of the failover (detection, election, leader
notified, producer and consumer recovery), produce latencies, the record states at the instant
of the fault and whether each state's records survived, and the signatures of protocol
violations and of findings the configuration allows.

Deterministic: the row depends only on (configuration, seed, grid settings, build). No wall
clock; the run's randomness is ``random.Random`` seeded with the run seed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from random import Random
from typing import Any

from epochlab.campaigns.grid import Grid, RunConfig
from epochlab.fuzz.schedule import Schedule

__all__ = ["ROW_FIELDS", "Workload", "build_schedule", "execute_measured", "failover_phases", "run_one",
           "run_seed"]

HEALING_MS = 30000
START_MS = 1000
GAPS_MS = (20, 50, 100, 100, 200, 300)

#: Column name -> Arrow type name ("string", "int64", "bool", "list<int64>", "list<string>").
ROW_FIELDS: dict[str, str] = {
    "config_id": "string", "run_id": "int64", "campaign_seed": "int64", "seed": "int64",
    "generation": "string", "acks": "string", "min_insync_replicas": "int64",
    "replication_factor": "int64", "unclean": "bool", "idempotence": "bool",
    "fault": "string", "lossy": "bool", "actions": "int64", "end_ms": "int64",
    "sent": "int64", "acked": "int64", "acked_lost": "int64", "failed": "int64",
    "unknown": "int64", "committed": "int64", "committed_lost": "int64",
    "duplicates": "int64", "out_of_order": "int64",
    "latency_ms": "list<int64>", "latency_p50_ms": "int64", "latency_max_ms": "int64",
    "offline_ms": "int64", "detection_ms": "int64", "election_ms": "int64",
    "propagation_ms": "int64", "producer_recovery_ms": "int64", "consumer_recovery_ms": "int64",
    "at_fault_committed": "int64", "at_fault_committed_lost": "int64",
    "at_fault_replicated": "int64", "at_fault_replicated_lost": "int64",
    "at_fault_leader_only": "int64", "at_fault_leader_only_lost": "int64",
    "at_fault_acked_unreplicated": "int64", "at_fault_acked_unreplicated_lost": "int64",
    "at_fault_acked_isr": "int64", "at_fault_acked_isr_lost": "int64",
    "at_fault_unsent": "int64", "at_fault_unsent_lost": "int64", "at_fault_unsent_failed": "int64",
    "violations": "list<string>", "allowed": "list<string>", "protocol_violation": "bool",
    "error": "string",
}


def run_seed(campaign_seed: int, run_id: int) -> int:
    """The seed of run ``run_id``: SHA-256 of ``"<campaign seed>:<run id>"`` (31 bits), so a
    retried or speculative task computes the same seed (never Python's salted ``hash``).
    Same function as ``epochlab fuzz`` uses."""
    digest = hashlib.sha256(f"{campaign_seed}:{run_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


@dataclass(frozen=True)
class Workload:
    """What the schedule builder decided: the fault kind, the index of the first fault action
    (the instant the record states are measured), whether a crash loses its unflushed tail."""

    fault: str
    fault_index: int
    lossy: bool


def build_schedule(cfg: RunConfig, seed: int, grid: Grid) -> tuple[Schedule, Workload]:
    """The run's schedule (module docs), validated like any schedule file."""
    rng = Random(f"epochlab-campaign:{seed}")
    fault = _weighted(rng, grid.faults)
    cluster: dict[str, Any] = {
        "brokers": [1, 2, 3], "replicas": [1, 2, 3][:cfg.replication_factor],
        "min.insync.replicas": cfg.min_insync_replicas,
        "unclean.leader.election.enable": cfg.unclean_leader_election_enable,
        "replica.lag.time.max.ms": rng.choice((2000, 5000, 10000)),
        "flush.interval.ms": rng.choice((200, 1000, 5000)),
    }
    for key, value in grid.cluster.items():
        cluster[key] = value
    producer: dict[str, Any] = {"acks": cfg.acks, "request.timeout.ms": 3000,
                                "delivery.timeout.ms": 20000}
    if cfg.enable_idempotence:
        producer["enable.idempotence"] = True
    producer.update(grid.producer)
    actions: list[dict[str, Any]] = []
    now = START_MS
    sends = rng.randint(10, 20)
    fault_at = rng.randint(sends // 3, (2 * sends) // 3)
    lossy = False
    if fault == "follower-lag" or (fault == "correlated" and rng.random() < 0.5):
        actions.append({"at_ms": now, "op": "slow_follower", "broker": 3,
                        "extra_delay_ms": cluster["replica.lag.time.max.ms"] * 3})
    for i in range(sends):
        if i == fault_at:
            if fault in ("follower-lag", "correlated") and actions and actions[0]["op"] == "slow_follower":
                now = max(now, START_MS + cluster["replica.lag.time.max.ms"] + 1500)
            # 0-15 ms after the last send: the records are in flight, on the leader only,
            # replicated to some followers, or committed
            lossy = _fault(rng, fault, now + rng.randint(0, 15), actions)
        now += rng.choice(GAPS_MS)
        actions.append({"at_ms": now, "op": "produce", "producer": "p1", "count": rng.randint(1, 3)})
        if rng.random() < 0.3:
            actions.append({"at_ms": now, "op": "consume", "consumer": "c1"})
    actions.sort(key=lambda a: a["at_ms"])  # stable: equal times keep their order
    fault_index = next(i for i, a in enumerate(actions) if a.get("fault_marker"))
    for a in actions:
        a.pop("fault_marker", None)
    schedule = Schedule.from_dict({
        "format": "epochlab-schedule", "version": 1, "generation": cfg.generation, "seed": seed,
        "healing_ms": HEALING_MS, "cluster": cluster, "producers": {"p1": producer},
        "consumers": {"c1": {"auto.offset.reset": "earliest"}}, "actions": actions,
        "origin": {"engine": "campaign", "config_id": cfg.config_id, "fault": fault, "seed": seed}},
        f"campaign run {cfg.config_id} seed {seed}")
    return schedule, Workload(fault, fault_index, lossy)


def _weighted(rng: Random, weights: dict[str, int]) -> str:
    names = [k for k in sorted(weights) if weights[k] > 0]
    x = rng.randrange(sum(weights[k] for k in names))
    for k in names:
        x -= weights[k]
        if x < 0:
            return k
    return names[-1]  # pragma: no cover


def _fault(rng: Random, fault: str, now: int, actions: list[dict[str, Any]]) -> bool:
    """Append the fault's actions from ``now``; the first is marked. Returns ``lossy``."""
    lossy = fault == "leader-crash" and rng.random() < 0.25
    if fault == "leader-partition":
        actions.append({"at_ms": now, "op": "partition", "groups": [[1, "p1"]], "fault_marker": True})
        actions.append({"at_ms": now + rng.randint(8000, 15000), "op": "heal"})
        return False
    actions.append({"at_ms": now, "op": "crash", "broker": 1, "lose_unflushed": lossy,
                    "fault_marker": True})
    if fault == "correlated":
        actions.append({"at_ms": now + rng.randint(0, 50), "op": "crash", "broker": 2})
        actions.append({"at_ms": now + rng.randint(8000, 30000), "op": "restart", "broker": 2})
    quick = fault == "leader-crash" and rng.random() < 0.1
    delay = 3000 if quick else rng.randint(8000, 20000 if fault != "correlated" else 30000)
    actions.append({"at_ms": now + delay, "op": "restart", "broker": 1})
    return lossy


# -- execution --------------------------------------------------------------------------------

def run_one(cfg: RunConfig, run_id: int, campaign_seed: int, grid: Grid) -> dict[str, Any]:
    """Build, execute and measure run ``run_id`` of configuration ``cfg``: one row."""
    seed = run_seed(campaign_seed, run_id)
    schedule, workload = build_schedule(cfg, seed, grid)
    row: dict[str, Any] = {name: None for name in ROW_FIELDS}
    row.update({"config_id": cfg.config_id, "run_id": run_id, "campaign_seed": campaign_seed,
                "seed": seed, "generation": cfg.generation, "acks": cfg.acks,
                "min_insync_replicas": cfg.min_insync_replicas,
                "replication_factor": cfg.replication_factor,
                "unclean": cfg.unclean_leader_election_enable,
                "idempotence": cfg.enable_idempotence, "fault": workload.fault,
                "lossy": workload.lossy, "actions": len(schedule.actions),
                "latency_ms": [], "violations": [], "allowed": []})
    try:
        run, snapshot = execute_measured(schedule, workload.fault_index)
    except Exception as exc:  # a simulator exception is a finding, not a lost row
        row.update({"error": f"{type(exc).__name__}: {exc}"[:500], "protocol_violation": True,
                    "violations": [f"exception-{type(exc).__name__.lower()}"]})
        return row
    row.update(_measure(run, snapshot, schedule))
    return row


def execute_measured(schedule: Schedule, fault_index: int) -> tuple[Any, dict[str, Any]]:
    """Run ``schedule`` as :func:`epochlab.fuzz.execute` does (the same checks, so a campaign's
    violation is the fuzzer's) and snapshot the record states just before action
    ``fault_index``. Returns the executor's run object (verdict computed) and the snapshot.
    The checker runs from the kernel's hook after every event that is not quiet, as in the
    fuzzer (a sampled cadence of the state checks missed violations, docs/campaigns.md)."""
    from epochlab.fuzz.executor import Run  # the executor's engine; see docs/campaigns.md

    run = Run(schedule, None)
    run.checker.observe()
    snapshot: dict[str, Any] = {}
    for index, action in enumerate(schedule.actions):
        run.advance_to(action.at_ms)
        run.step = index
        if index == fault_index:
            run.checker.observe()
            snapshot = _snapshot(run)
        run.apply(action)
        run.checker.observe()
    run.healing()
    run.checker.observe()
    run.final_verdict = run.verdict()
    return run, snapshot


def _snapshot(run: Any) -> dict[str, Any]:
    """Record states at the fault instant: which values are committed, replicated to some
    other replica, on the leader only, acknowledged, or still in the producer."""
    c = run.cluster
    leader = c.controller.leader
    logs: dict[int, dict[int, int]] = {}
    for b, broker in sorted(c.brokers.items()):
        if b not in (c.config.replicas or ()):
            continue
        offsets: dict[int, int] = {}
        for batch in broker.replica.log.batches():
            for i, value in enumerate(batch.records):
                offsets[batch.base_offset + i] = value
        logs[b] = offsets
    hw = c.brokers[leader].replica.log.high_watermark if leader is not None else 0
    on_leader = logs.get(leader, {}) if leader is not None else {}
    others = {(o, v) for b, log in logs.items() if b != leader for o, v in log.items()}
    history = run.history_dicts()
    acked = {op["value"]: op["acks"] for op in history if op["f"] == "send" and op["type"] == "ok"}
    done = {op["value"] for op in history if op["f"] == "send" and op["type"] != "invoke"}
    invoked = [op["value"] for op in history if op["f"] == "send" and op["type"] == "invoke"]
    anywhere = {v for log in logs.values() for v in log.values()}
    states: dict[str, list[int]] = {k: [] for k in (
        "committed", "replicated", "leader_only", "acked_unreplicated", "acked_isr", "unsent")}
    for offset, value in sorted(on_leader.items()):
        if offset < hw:
            states["committed"].append(value)
        elif (offset, value) in others:
            states["replicated"].append(value)
        else:
            states["leader_only"].append(value)
            if acked.get(value) in ("0", "1"):
                states["acked_unreplicated"].append(value)
        if acked.get(value) == "all":
            states["acked_isr"].append(value)
    states["unsent"] = [v for v in invoked if v not in done and v not in anywhere]
    return {"time_ms": c.now_ms, "leader": leader, "states": states}


def _final_values(run: Any) -> list[int]:
    return [v for _, v in sorted(run.final_log().items())]


def _measure(run: Any, snapshot: dict[str, Any], schedule: Schedule) -> dict[str, Any]:
    c = run.cluster
    verdict = run.final_verdict
    history = run.history_dicts()
    final = _final_values(run)
    present = set(final)
    invokes = {op["value"]: op["time_ms"] for op in history if op["f"] == "send" and op["type"] == "invoke"}
    oks = [op for op in history if op["f"] == "send" and op["type"] == "ok"]
    committed = set(run.committed().values())
    counts: dict[int, int] = {}
    first_pos: dict[int, int] = {}
    for pos, value in enumerate(final):
        counts[value] = counts.get(value, 0) + 1
        first_pos.setdefault(value, pos)
    order = [v for v in sorted(invokes, key=lambda v: (invokes[v], v)) if v in first_pos]
    out_of_order = sum(1 for a, b in zip(order, order[1:]) if first_pos[b] < first_pos[a])
    latencies = [op["time_ms"] - invokes[op["value"]] for op in oks if op["value"] in invokes]
    fault_ms = snapshot.get("time_ms", 0)
    row: dict[str, Any] = {
        "end_ms": c.now_ms, "sent": len(invokes), "acked": len(oks),
        "acked_lost": sum(1 for op in oks if op["value"] not in present),
        "failed": sum(1 for op in history if op["f"] == "send" and op["type"] == "fail"),
        "unknown": sum(1 for op in history if op["f"] == "send" and op["type"] == "info"),
        "committed": len(committed), "committed_lost": len(committed - present),
        "duplicates": sum(n - 1 for n in counts.values() if n > 1),
        "out_of_order": out_of_order, "latency_ms": latencies,
        "latency_p50_ms": sorted(latencies)[len(latencies) // 2] if latencies else None,
        "latency_max_ms": max(latencies) if latencies else None,
        "offline_ms": c.state().controller["unavailable_ms"],
        "violations": sorted(set(verdict.signatures())),
        "allowed": sorted({v.signature for v in verdict.allowed}),
        "protocol_violation": not verdict.ok, "error": None,
    }
    row.update(failover_phases(run, snapshot, history, fault_ms))
    acked_values = {op["value"] for op in oks}
    for name, values in snapshot.get("states", {}).items():
        row[f"at_fault_{name}"] = len(values)
        if name == "unsent":  # lost = the producer was told it succeeded, yet it is gone
            row["at_fault_unsent_lost"] = sum(1 for v in values if v in acked_values and v not in present)
            row["at_fault_unsent_failed"] = sum(1 for v in values if v not in acked_values)
        else:
            row[f"at_fault_{name}_lost"] = sum(1 for v in values if v not in present)
    return row


def failover_phases(run: Any, snapshot: dict[str, Any], history: list[dict[str, Any]],
                    fault_ms: int) -> dict[str, Any]:
    """Failover phases after the fault (``None`` when a phase did not happen):
    detection (the controller expires the leader's session), election (detection -> the
    controller installs a leader), propagation (-> that broker acts as leader), producer
    recovery (fault -> first acknowledged send) and consumer recovery (fault -> first poll that
    returns records)."""
    c = run.cluster
    leader = snapshot.get("leader")
    detected = next((e.time_ms for e in c.events if e.time_ms >= fault_ms and e.kind == "controller"
                     and e.message == f"controller: broker {leader} session expired"), None)
    out: dict[str, Any] = {"detection_ms": None if detected is None else detected - fault_ms,
                           "election_ms": None, "propagation_ms": None}
    if detected is not None:
        elected = next((e for e in c.controller.elections if e[0] >= detected), None)
        if elected is not None:
            out["election_ms"] = elected[0] - detected
            role = f"broker {elected[2]} is leader in epoch {elected[1]} "
            acting = next((e.time_ms for e in c.events if e.time_ms >= elected[0] and e.kind == "role"
                           and e.message.startswith(role)), None)
            out["propagation_ms"] = None if acting is None else acting - elected[0]
    ack = next((op["time_ms"] for op in history if op["f"] == "send" and op["type"] == "ok"
                and op["time_ms"] > fault_ms), None)
    poll = next((op["time_ms"] for op in history if op["f"] == "poll" and op["type"] == "ok"
                 and op["value"] and op["time_ms"] > fault_ms), None)
    out["producer_recovery_ms"] = None if ack is None else ack - fault_ms
    out["consumer_recovery_ms"] = None if poll is None else poll - fault_ms
    return out
