"""Seed 002's "Downtime During Leader Failure" table measured on a live KRaft cluster, beside
the model's run of the same workload with the cluster's settings.

The workload, on both sides: one partition with three replicas and ``min.insync.replicas=2``,
an idempotent ``acks=all`` producer sending a record every :data:`SEND_EVERY_MS` (request
timeout 3 s, delivery timeout 20 s, as in the campaign runs of :mod:`epochlab.campaigns.runs`),
a consumer reading from the start, and after :data:`WARMUP_MS` a SIGKILL of the partition's
leader. Each phase is measured from the fault:

* **detection**: to the controller fencing the dead broker. Real: the controller's log line
  ``Fencing broker N at epoch E because its session has timed out``
  (``ReplicationControlManager.maybeFenceOneStaleBroker``); model: ``controller: broker N
  session expired``.
* **election**: detection to the controller choosing the new leader. In KRaft the fencing
  writes the new leader in the same records (``ReplicationControlManager.handleBrokerFenced``
  -> ``generateLeaderAndIsrUpdates``, one ``PartitionChangeRecord`` per partition), so the
  real figure is 0 when the new leader's partition epoch is the old one plus one (one change
  record: the fencing's), and unknown otherwise.
* **metadata propagation**: fencing to the new leader acting as leader. Real: its
  state-change log line ``Leader <topic>-0 ... starts at leader epoch E``
  (``Partition.makeLeader``); model: its ``broker N is leader in epoch E`` event.
* **producer recovery** / **consumer recovery**: fault to the first acknowledgement of a send
  made after the fault / the first poll returning records after the fault.
* **offline**: how long the partition had no leader at all. Model: the controller's
  ``unavailable_ms``; real: 0 when the election was part of the fencing (the leader moved
  directly from the dead broker to the new one), unknown otherwise.

Real runs read wall-clock times from the nodes' ``server.log`` (log4j 2 lines starting with
ms since the epoch, :data:`epochlab.kafka.live.cluster.LOG_PATTERN`) and from the harness's clock,
all on this machine's one clock. Model runs are deterministic per seed; the model's heartbeat
phase at the fault varies with the seed as the real one varies with when the kill lands.
"""

from __future__ import annotations

import re
import statistics
import time
import uuid
from pathlib import Path
from typing import Any, Callable

__all__ = ["PHASES", "SEND_EVERY_MS", "WARMUP_MS", "calibrated_settings", "measure_live", "measure_model",
           "measure_real", "model_schedule", "parse_log", "summarize", "table_markdown", "with_model"]

#: (component, column) of seed 002's table, in its order.
PHASES: tuple[tuple[str, str], ...] = (
    ("Detection", "detection_ms"), ("Election", "election_ms"),
    ("Metadata Propagation", "propagation_ms"), ("Producer Recovery", "producer_recovery_ms"),
    ("Consumer Recovery", "consumer_recovery_ms"), ("Offline (no leader at all)", "offline_ms"))

SEND_EVERY_MS = 50
WARMUP_MS = 2000
#: The longest a real run waits after the fault for every phase to be seen.
AFTER_MS = 20000

_LINE = re.compile(r"^(\d{10,16}) (\w+) \[([^\]]*)\] (.*)$")
_FENCED = re.compile(r"Fencing broker (\d+) at epoch (\d+) because its session has timed out")
_LEADER = re.compile(r"Leader (\S+)-(\d+) with topic id \S+ starts at leader epoch (\d+) from offset (\d+) "
                     r"with partition epoch (\d+)")


def parse_log(path: Path, since_ms: int = 0) -> list[tuple[int, str, str, str]]:
    """``(time_ms, level, logger, message)`` of each line of a node's ``server.log`` at or after
    ``since_ms``; lines of another shape (a stack trace's) are skipped. A missing file is empty."""
    out: list[tuple[int, str, str, str]] = []
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        m = _LINE.match(line)
        if m and int(m.group(1)) >= since_ms:
            out.append((int(m.group(1)), m.group(2), m.group(3), m.group(4)))
    return out


def _leader_lines(lines: list[tuple[int, str, str, str]], topic: str) -> list[tuple[int, int, int]]:
    """``(time_ms, leader_epoch, partition_epoch)`` of each ``Leader <topic>-0 starts`` line."""
    out = []
    for t, _level, _logger, msg in lines:
        m = _LEADER.search(msg)
        if m and m.group(1) == topic and m.group(2) == "0":
            out.append((t, int(m.group(3)), int(m.group(5))))
    return out


# -- the live cluster -----------------------------------------------------------------------

def measure_real(cluster: Any, runs: int, progress: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """``runs`` leader failures on ``cluster`` (running, 3+ brokers, logging: 4.0+ releases),
    each in a topic of its own; the killed broker is restarted and back in the ISR before the
    next. One row per run (:data:`PHASES` columns plus what was seen)."""
    from epochlab.errors import ConfigError
    from epochlab.kafka.live.clients import KafkaAdmin
    from epochlab.kafka.live.faults import Faults

    if not any(cluster.nodes[i].server_log.exists() for i in cluster.controller_ids):
        raise ConfigError("the cluster's nodes write no server.log (a release before 4.0, or started "
                          "before epochlab wrote broker logs): restart it", where=str(cluster.dir),
                          field="server.log", expected="log4j 2 logs", got=None)
    admin = KafkaAdmin(cluster.bootstrap_servers)
    faults = Faults(cluster)
    rows = []
    for index in range(1, runs + 1):
        row = _one_real(cluster, admin, faults, index)
        rows.append(row)
        if progress is not None:
            progress(row)
    return rows


def _one_real(cluster: Any, admin: Any, faults: Any, index: int) -> dict[str, Any]:
    from epochlab.kafka.live.clients import History, RecordingConsumer, RecordingProducer
    from epochlab.sim.config import ConsumerConfig, ProducerConfig

    topic = f"downtime-{index}-{uuid.uuid4().hex[:6]}"
    admin.create_topic(topic, replication_factor=3, min_insync_replicas=2)
    state = admin.wait_for(topic, 0, lambda s: s.leader is not None and len(s.isr) == 3, timeout_s=60)
    leader = int(state.leader)
    history = History()
    wall0 = time.time() * 1000 - history.now_ms()  # history ms -> wall-clock ms
    producer = RecordingProducer(cluster.bootstrap_servers, topic, history,
                                 ProducerConfig(acks="all", enable_idempotence=True, request_timeout_ms=3000,
                                                delivery_timeout_ms=20000), name="p1")
    consumer = RecordingConsumer(cluster.bootstrap_servers, topic, history,
                                 ConsumerConfig(auto_offset_reset="earliest", enable_auto_commit=False), name="c1")
    value, fault_ms, fenced, started = 0, None, None, None
    before_epoch = None
    try:
        start = time.monotonic()
        next_send = start
        while True:
            now = time.monotonic()
            if now >= next_send:
                value += 1
                producer.send(value)
                next_send += SEND_EVERY_MS / 1000
            producer.poll(0)
            consumer.poll(timeout_s=0.01)
            elapsed_ms = (now - start) * 1000
            if fault_ms is None and elapsed_ms >= WARMUP_MS:
                lines = [ln for i in cluster.broker_ids for ln in parse_log(cluster.nodes[i].server_log)]
                before = _leader_lines(lines, topic)
                before_epoch = max(before)[2] if before else None
                fault_ms = int(time.time() * 1000)
                faults.kill(leader)
                history.event("kill", f"broker {leader} killed (SIGKILL)")
            if fault_ms is not None:
                fenced, started = _seen(cluster, leader, topic, fault_ms)
                ops = history.dicts()
                recovered = _recovery(ops, fault_ms - wall0)
                done = fenced is not None and started is not None and None not in recovered
                if done or time.time() * 1000 - fault_ms > AFTER_MS:
                    break
        producer.flush(5)
    finally:
        producer.close(5)
        consumer.close()
    ops = history.dicts()
    producer_ms, consumer_ms = _recovery(ops, fault_ms - wall0)
    row: dict[str, Any] = {
        "run": index, "topic": topic, "leader": leader, "new_leader": None, "leader_epoch": None,
        "detection_ms": None if fenced is None else fenced - fault_ms,
        "election_ms": None, "propagation_ms": None, "producer_recovery_ms": producer_ms,
        "consumer_recovery_ms": consumer_ms, "offline_ms": None,
        "sent": value, "acked": sum(1 for op in ops if op["f"] == "send" and op["type"] == "ok")}
    if started is not None:
        t, node, epoch, partition_epoch = started
        row.update(new_leader=node, leader_epoch=epoch)
        if fenced is not None:
            row["propagation_ms"] = t - fenced
            if before_epoch is not None and partition_epoch == before_epoch + 1:
                row["election_ms"], row["offline_ms"] = 0, 0
    faults.restart(leader)
    admin.wait_for(topic, 0, lambda s: leader in s.isr and len(s.isr) == 3, timeout_s=90)
    return row


def _seen(cluster: Any, leader: int, topic: str, since_ms: int) -> tuple[int | None, tuple[int, int, int, int] | None]:
    """The controller's fencing of ``leader`` and the first ``Leader <topic>-0 starts`` line on
    another broker, at or after ``since_ms``: ``(fenced_ms, (time_ms, broker, leader_epoch,
    partition_epoch))``, ``None`` for what is not in the logs yet."""
    fenced = None
    for i in cluster.controller_ids:
        for t, _level, _logger, msg in parse_log(cluster.nodes[i].server_log, since_ms):
            m = _FENCED.search(msg)
            if m and int(m.group(1)) == leader and (fenced is None or t < fenced):
                fenced = t
    started = None
    for i in cluster.broker_ids:
        if i == leader:
            continue
        for t, epoch, partition_epoch in _leader_lines(parse_log(cluster.nodes[i].server_log, since_ms), topic):
            if started is None or t < started[0]:
                started = (t, i, epoch, partition_epoch)
    return fenced, started


def _recovery(ops: list[dict[str, Any]], fault_ms: float) -> tuple[int | None, int | None]:
    """(first acknowledgement of a send made after the fault, first poll returning a record of
    such a send) as ms after ``fault_ms`` (history ms). Only sends made after the fault count:
    an acknowledgement the dead leader sent just before it died is reported by librdkafka up to
    a poll later, and records fetched before the fault wait in the consumer's queue; either
    would read as a recovery in milliseconds (a consumer once "recovered" in 13 ms that way)."""
    after = {op["value"] for op in ops if op["f"] == "send" and op["type"] == "invoke" and op["time_ms"] > fault_ms}
    ack = next((op["time_ms"] for op in ops if op["f"] == "send" and op["type"] == "ok"
                and op["value"] in after), None)
    poll = next((op["time_ms"] for op in ops if op["f"] == "poll" and op["type"] == "ok"
                 and op["time_ms"] > fault_ms and any(pair[1] in after for pair in op["value"] or ())), None)
    return (None if ack is None else round(ack - fault_ms), None if poll is None else round(poll - fault_ms))


# -- the model ------------------------------------------------------------------------------

def model_schedule(settings: dict[str, int], seed: int, generation: str = "strict-min-isr") -> tuple[Any, int]:
    """The workload of :func:`measure_real` as a fuzz schedule on the model (broker 1 leads
    first and is the one killed), with ``settings`` (scenario setting names, as
    :func:`epochlab.kafka.runs.scenario.cluster_settings` reads them from a running cluster);
    ``(schedule, index of the crash action)``."""
    from epochlab.fuzz.schedule import Schedule

    start, end = 1000, 1000 + WARMUP_MS + AFTER_MS
    actions: list[dict[str, Any]] = []
    crash_at = start + WARMUP_MS
    for t in range(start, end, SEND_EVERY_MS):
        if t == crash_at:
            actions.append({"at_ms": t, "op": "crash", "broker": 1})
        actions.append({"at_ms": t, "op": "produce", "producer": "p1", "count": 1})
        actions.append({"at_ms": t, "op": "consume", "consumer": "c1"})
    crash_index = next(i for i, a in enumerate(actions) if a["op"] == "crash")
    cluster: dict[str, Any] = {"brokers": [1, 2, 3], "replicas": [1, 2, 3], "min.insync.replicas": 2,
                               "unclean.leader.election.enable": False, **settings}
    schedule = Schedule.from_dict({
        "format": "epochlab-schedule", "version": 1, "generation": generation, "seed": seed,
        "healing_ms": 5000, "cluster": cluster,
        "producers": {"p1": {"acks": "all", "enable.idempotence": True, "request.timeout.ms": 3000,
                             "delivery.timeout.ms": 20000}},
        "consumers": {"c1": {"auto.offset.reset": "earliest"}}, "actions": actions,
        "origin": {"engine": "downtime", "seed": seed}}, f"downtime model run seed {seed}")
    return schedule, crash_index


def measure_model(settings: dict[str, int], runs: int, first_seed: int = 1) -> list[dict[str, Any]]:
    """The model's rows for seeds ``first_seed .. first_seed + runs - 1``."""
    from epochlab.campaigns.runs import execute_measured, failover_phases

    rows = []
    for seed in range(first_seed, first_seed + runs):
        schedule, crash_index = model_schedule(settings, seed)
        run, snapshot = execute_measured(schedule, crash_index)
        history = [op.to_dict() for op in run.cluster.history]
        row: dict[str, Any] = {"run": seed, "leader": snapshot.get("leader")}
        row.update(failover_phases(run, snapshot, history, snapshot.get("time_ms", 0)))
        row["producer_recovery_ms"], row["consumer_recovery_ms"] = _recovery(history, snapshot.get("time_ms", 0))
        row["offline_ms"] = int(run.cluster.state().controller["unavailable_ms"])
        rows.append(row)
    return rows


# -- the table ------------------------------------------------------------------------------

def summarize(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per phase column: ``{"n", "min", "p50", "max"}`` over the rows where it was measured
    (``n`` = 0 and the rest ``None`` when none was)."""
    out = {}
    for _name, key in PHASES:
        values = sorted(r[key] for r in rows if r.get(key) is not None)
        out[key] = {"n": len(values), "min": values[0] if values else None,
                    "p50": statistics.median_low(values) if values else None,
                    "max": values[-1] if values else None}
    return out


def _cell(s: dict[str, Any], runs: int) -> str:
    if not s["n"]:
        return f"not measured (0 of {runs})"
    seen = "" if s["n"] == runs else f", {s['n']} of {runs} runs"
    return f"{s['p50']} ms ({s['min']}-{s['max']}{seen})"


def calibrated_settings(settings: dict[str, Any], real: list[dict[str, Any]]) -> dict[str, Any] | None:
    """``settings`` with the model's controller-to-broker delay (``controller_delay_ms``) set to
    the range of metadata propagation the live cluster showed, or ``None`` when none was
    measured. KRaft's propagation is a metadata commit plus the brokers' fetch of it; the
    model's is one controller message, so this is the one constant a real run calibrates
    (detection follows the session timeout both share, election is part of the fencing)."""
    prop = summarize(real)["propagation_ms"]
    if not prop["n"]:
        return None
    return {**settings, "controller_delay_ms": [max(0, int(prop["min"])), max(0, int(prop["max"]))]}


def table_markdown(real: list[dict[str, Any]], model: list[dict[str, Any]],
                   calibrated: list[dict[str, Any]] | None = None) -> str:
    """Seed 002's table: the seed's claim, the model's (with its default controller delay, and
    ``calibrated`` with :func:`calibrated_settings`) and the live cluster's median (min-max)."""
    from epochlab.campaigns.report import SEED_DOWNTIME

    claims = {key: (claim, notes) for _c, key, claim, notes, _r in SEED_DOWNTIME}
    rs, ms = summarize(real), summarize(model)
    cs = summarize(calibrated) if calibrated else None
    head = "| component | seed 002 says | model, median (min-max) |"
    head += " model, controller delay from the live runs |" if cs else ""
    lines = [head + " live Kafka, median (min-max) |", "|---|---|---|" + ("---|" if cs else "") + "---|"]
    for name, key in PHASES:
        claim, notes = claims.get(key, ("-", ""))
        row = f"| {name} | {claim} ({notes}) | {_cell(ms[key], len(model))} |"
        if cs is not None and calibrated:
            row += f" {_cell(cs[key], len(calibrated))} |"
        lines.append(row + f" {_cell(rs[key], len(real))} |")
    return "\n".join(lines) + "\n"


# -- the whole measurement ------------------------------------------------------------------

def measure_live(cluster_dir: str | None, directory: str, runs: int,
                 progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """The live half of ``epochlab kafka downtime``: ``runs`` leader failures on the cluster
    ``cluster_dir`` records, or on one started in ``directory`` for the measurement
    (:func:`epochlab.kafka.live.start.cluster_for`): its settings, its rows and the times
    taken. Raises :class:`~epochlab.errors.EpochlabError` when no cluster can be used."""
    from epochlab.kafka.live.start import cluster_for
    from epochlab.kafka.runs.scenario import cluster_settings

    t0 = time.monotonic()
    with cluster_for(cluster_dir, directory) as cluster:
        cluster_s = time.monotonic() - t0
        settings = cluster_settings(cluster)
        t1 = time.monotonic()
        real = measure_real(cluster, runs, progress)
        real_s = time.monotonic() - t1
    return {"settings": settings, "cluster_start_s": None if cluster_dir else round(cluster_s, 1),
            "real_seconds": round(real_s, 1), "real": real}


def with_model(live: dict[str, Any], model_runs: int) -> dict[str, Any]:
    """:func:`measure_live`'s result with the model's rows beside it (``model_runs`` seeds with
    the cluster's settings, and again with :func:`calibrated_settings`), their summaries and
    seed 002's table (``table``)."""
    settings, real = live["settings"], live["real"]
    t2 = time.monotonic()
    model = measure_model(settings, model_runs)
    calibration = calibrated_settings(settings, real)
    calibrated = measure_model(calibration, model_runs) if calibration is not None else None
    return {**live, "model_seconds": round(time.monotonic() - t2, 1),
            "model": model, "real_summary": summarize(real), "model_summary": summarize(model),
            "calibrated_settings": calibration, "calibrated": calibrated,
            "calibrated_summary": summarize(calibrated) if calibrated else None,
            "table": table_markdown(real, model, calibrated)}
