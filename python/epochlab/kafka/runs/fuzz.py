"""``epochlab kafka fuzz``: fuzzer schedules on a real Kafka cluster, each replayed on the model.

Each run draws a schedule with the random engine (``epochlab.fuzz.generator``) restricted to the
faults a live cluster on this machine can take: crashes and restarts (SIGKILL), partitions and
isolations (nft rules between the harness's network namespaces), controlled shutdowns, and
client restarts; link delays, lossy links and lossy crashes need netem or a forgetting
filesystem (``epochlab.kafka.runs.scenario.unmappable``), and operator elections of a chosen broker
(reorder and preferred election, ``epochlab.kafka.live.controller_admin``) are left out of the live
profile. The schedule becomes a scenario (every action at its
``at_ms``, then a heal, a restart of every broker still down, a wait until the ISR is whole and
in sync and the producer's sends are resolved, and a last read), which ``epochlab kafka run``'s
machinery runs on the cluster and, the same schedule, on the model (the latest generation with
the cluster's settings, on an ``established`` cluster: the live one serves run after run). A
partition the harness cannot make (one that puts clients on different sides: they share one
address) is rewritten before either side runs (:func:`live_schedule`). When the outcomes
differ, the model's seeds are asked with every step at the time the real run executed it
(:func:`at_real_times`).

Per run it reports the real outcome (acknowledged writes lost, records duplicated), the model's,
and where they differ. With ``acks=all``, ``min.insync.replicas=2``, clean elections only and
no lossy crash, an acknowledged write missing at the end is a durability violation on either
side; duplicates are allowed (the producer is not idempotent). Every run keeps its directory
(step table, timeline, history, the real and model summaries) and its ``schedule.json``, which
``epochlab replay`` replays on the model byte for byte.

``client``: the client family of every producer and consumer of a run (``librdkafka`` or
``java``, :data:`epochlab.kafka.runs.scenario.CLIENTS`), or ``both``: each schedule runs twice on
the cluster, with librdkafka's clients then with Kafka's Java clients (``run-NNN-librdkafka``,
``run-NNN-java``), each compared with the model standing for that client
(:func:`epochlab.kafka.runs.compare.model_scenario`); the summary gives each client's share of
runs whose real data outcome the model reproduces (:func:`reproduced`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from epochlab.fuzz.generator import FAULT_CLASSES, FuzzProfile, generate_schedule
from epochlab.fuzz.schedule import Action, Schedule
from epochlab.kafka.runs.scenario import GENERATION

__all__ = ["FUZZ_CLIENTS", "REAL_FAULT_CLASSES", "KafkaFuzzRun", "kept_restart_roles", "live_schedule", "real_profile",
           "reexamine", "reproduced", "schedule_scenario", "fuzz_cluster"]

#: ``--client`` choices: one client family, or each schedule with both.
FUZZ_CLIENTS = ("librdkafka", "java", "both")

#: The generator's fault classes a live cluster here can take, with their usual weights; the
#: others are off (link delays and partial loss need netem, lossy crashes a forgetting
#: filesystem; ``elect`` of a chosen broker runs live but is left out of this profile).
REAL_FAULT_CLASSES: dict[str, int] = {name: 0 for name in FAULT_CLASSES} | {
    "crash": FAULT_CLASSES["crash"], "partition": FAULT_CLASSES["partition"],
    "shutdown": FAULT_CLASSES["shutdown"], "client-restart": FAULT_CLASSES["client-restart"]}

#: Model seeds tried when a real run and the model's differ.
MODEL_SEEDS = 20

#: How long the end of a run waits for the cluster to converge (ISR whole, in sync, sends resolved).
SETTLE_MS = 60_000


def real_profile(actions: int = 15) -> FuzzProfile:
    """The default fuzz profile (acks=all, min.insync.replicas=2, clean elections) with the
    faults of :data:`REAL_FAULT_CLASSES` and no per-run variation of the broker settings (one
    cluster serves every run)."""
    return replace(FuzzProfile(), actions=actions, fault_classes=dict(REAL_FAULT_CLASSES), vary_config=False)


def live_schedule(schedule: Schedule) -> Schedule:
    """``schedule`` with every partition the harness cannot make rewritten into one it can.

    Every client of a live run shares one network address (the harness's), so a partition
    can cut the clients off from brokers only all together: one that puts clients on
    different sides leaves them connected to every broker on the live cluster
    (``epochlab.kafka.runs.driver``), a fault the model cannot express, and the two runs would
    differ by construction. Such a partition here puts every client on the side of the first
    one (producers, then consumers, by name), which both the cluster and the model make
    exactly; a group left without members is dropped, and a partition left without groups
    becomes a heal. The rewritten schedule is the one a run keeps, so ``epochlab replay``
    replays what ran."""
    clients = sorted(schedule.producers) + sorted(schedule.consumers)
    actions: list[Action] = []
    changed = False
    for action in schedule.actions:
        groups = action.params.get("groups") if action.op == "partition" else None
        # each client's side: the index of its group, -1 for the unlisted rest
        sides = [next((i for i, g in enumerate(groups) if c in g), -1) for c in clients] if groups else []
        if len(set(sides)) < 2:
            actions.append(action)
            continue
        target = sides[0]
        kept = [[n for n in g if n not in clients] + (clients if i == target else [])
                for i, g in enumerate(groups)]
        kept = [g for g in kept if g]
        changed = True
        if kept:
            actions.append(Action(action.at_ms, "partition", {**action.params, "groups": kept}))
        else:
            actions.append(Action(action.at_ms, "heal", {}))
    if not changed:
        return schedule
    return Schedule.from_dict(schedule.with_actions(actions, live="clients kept on one side").to_dict())


def schedule_scenario(schedule: Schedule, name: str) -> Any:
    """The scenario that runs ``schedule``'s actions at their times, then heals the cluster and
    waits for it to converge (see the module doc). Its cluster is ``established``
    (:class:`~epochlab.sim.config.ClusterConfig`): the live cluster serves one run after
    another, so when a run begins its brokers registered long ago and each heartbeats on a
    phase of its own."""
    from epochlab.scenarios.loader import from_mapping

    steps: list[dict[str, Any]] = []
    down: set[int] = set()
    for action in schedule.actions:
        params = {k: _plain(v) for k, v in action.params.items() if v is not None}
        steps.append({"action": action.op, "at_ms": action.at_ms, **params})
        if action.op in ("crash", "controlled_shutdown"):
            down.add(action.params["broker"])
        elif action.op == "restart":
            down.discard(action.params["broker"])
    brokers = list(schedule.cluster.get("brokers", [1, 2, 3]))
    steps.append({"action": "heal", "after_ms": 500, "label": "heal"})
    steps += [{"action": "restart", "broker": b} for b in sorted(down)]
    condition: dict[str, Any] = {"isr": brokers, "in_sync": True}
    if schedule.producers:
        condition["sends_done"] = sorted(schedule.producers)[0]
    steps.append({"action": "wait_until", "condition": condition, "timeout_ms": SETTLE_MS,
                  "required": False, "label": "converged"})
    steps += [{"action": "consume", "consumer": c} for c in sorted(schedule.consumers)]
    data = {"name": name, "seed": schedule.seed, "generations": [GENERATION],
            "description": f"fuzz schedule (run seed {schedule.seed}) on a real cluster",
            "cluster": {**schedule.cluster, "established": True}, "producers": {k: dict(v) for k, v in schedule.producers.items()},
            "consumers": {k: dict(v) for k, v in schedule.consumers.items()}, "steps": steps}
    return from_mapping(data, f"<kafka fuzz {name}>")


def _plain(value: Any) -> Any:
    """Tuples (a schedule's frozen lists) as the lists a scenario mapping has."""
    return [_plain(v) for v in value] if isinstance(value, (tuple, list)) else value


@dataclass
class KafkaFuzzRun:
    """One schedule on the cluster and on the model."""

    index: int
    seed: int
    directory: Path
    seconds: float
    real_lost: list[int]
    model_lost: list[int]
    real_duplicated: list[int]
    model_duplicated: list[int]
    agree: bool
    differences: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    #: when they differ: of :data:`MODEL_SEEDS` model seeds, how many give the real run's data
    #: outcome (:func:`data_outcome`): > 0, nondeterminism both show; 0, a model defect or a
    #: timing the model does not reach
    model_seeds_matching: int | None = None
    #: the client family of the run's producers and consumers
    client: str = "librdkafka"
    #: how the real data outcome differs from the default model seed's (:func:`outcome_kind`)
    kind: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "seed": self.seed, "client": self.client, "directory": str(self.directory),
                "seconds": round(self.seconds, 1), "real": {"lost": self.real_lost, "duplicated": self.real_duplicated},
                "model": {"lost": self.model_lost, "duplicated": self.model_duplicated},
                "agree": self.agree, "differences": self.differences, "error": self.error,
                "model_seeds_matching": self.model_seeds_matching,
                "model_seeds": MODEL_SEEDS if self.model_seeds_matching is not None else None,
                "kind": self.kind}


#: :func:`outcome_kind`'s answers, for a run whose data outcome differs from the model's.
OUTCOME_KINDS = ("duplicates", "kafka-acknowledged-fewer", "kafka-acknowledged-more", "other")


def outcome_kind(real: dict[str, Any], model: dict[str, Any]) -> str | None:
    """How a real run's data outcome differs from the model's (summaries with ``acked``,
    ``lost`` and ``duplicated``): ``None`` if it does not; ``"duplicates"`` when the same
    values were acknowledged and lost and only the values written twice differ (retries of a
    producer without idempotence, allowed); ``"kafka-acknowledged-fewer"`` /
    ``"kafka-acknowledged-more"`` when one side's acknowledged values are a proper subset of
    the other's (a timing: a send that ran out of its delivery timeout on one side only);
    ``"other"`` otherwise."""
    if data_outcome(real) == data_outcome(model):
        return None

    def acked(summary: dict[str, Any]) -> set[tuple[str, int]]:
        return {(p, int(v)) for p, a in summary["acked"].items() for v in a}
    ra, ma = acked(real), acked(model)
    if ra == ma and sorted(real["lost"]) == sorted(model["lost"]):
        return "duplicates"
    if ra < ma:
        return "kafka-acknowledged-fewer"
    if ma < ra:
        return "kafka-acknowledged-more"
    return "other"


def reproduced(run: KafkaFuzzRun) -> bool | None:
    """Whether the model reproduces ``run``'s real data outcome: the run agrees (no outcome
    difference with the model's default seed), or one of :data:`MODEL_SEEDS` model seeds gives
    it; ``None`` for a run that did not run."""
    if run.error is not None:
        return None
    return run.agree or bool(run.model_seeds_matching)


def fuzz_cluster(cluster: Any, runs: int, seed: int, out: Path, actions: int = 15,
                 seconds: float | None = None,
                 progress: Callable[[KafkaFuzzRun], None] | None = None,
                 client: str = "librdkafka") -> list[KafkaFuzzRun]:
    """Run up to ``runs`` schedules (fewer when ``seconds`` run out) on ``cluster`` with
    ``client``'s producers and consumers (:data:`FUZZ_CLIENTS`; ``both``: each schedule with
    librdkafka's, then with Java's); each run's directory and ``schedule.json`` go under
    ``out/run-NNN`` (``out/run-NNN-<client>`` with ``both``); ``out/summary.json`` is rewritten
    after every run, so a stopped campaign keeps what it measured."""
    if client not in FUZZ_CLIENTS:
        from epochlab.errors import ConfigError

        raise ConfigError(f"--client: expected one of {', '.join(FUZZ_CLIENTS)}, got {client!r}",
                          where="--client", field="client", expected=list(FUZZ_CLIENTS), got=client)
    import random

    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    profile = real_profile(actions)
    done: list[KafkaFuzzRun] = []
    start = time.monotonic()
    for index in range(runs):
        if seconds is not None and time.monotonic() - start >= seconds:
            break
        run_seed = rng.randrange(2**31)
        schedule = live_schedule(generate_schedule(run_seed, GENERATION, profile))
        for each in (("librdkafka", "java") if client == "both" else (client,)):
            directory = out / (f"run-{index:03d}-{each}" if client == "both" else f"run-{index:03d}")
            run = _one_run(cluster, schedule, run_seed, index, directory, each)
            done.append(run)
            _write_summary(out, seed, profile, done, time.monotonic() - start, client)
            if progress is not None:
                progress(run)
    return done


def _one_run(cluster: Any, schedule: Schedule, run_seed: int, index: int, directory: Path,
             client: str) -> KafkaFuzzRun:
    """``schedule`` on the cluster with ``client``'s clients and on the model standing for
    that client; the model's seeds when their outcomes differ."""
    from epochlab.kafka.runs.pipeline import execute

    t0 = time.monotonic()
    code, payload = execute(schedule_scenario(schedule, f"kafka-fuzz-{index:03d}"), cluster, True, directory,
                            client=client)
    directory.mkdir(parents=True, exist_ok=True)
    schedule.save(directory / "schedule.json")
    if code == 2:
        return KafkaFuzzRun(index, run_seed, directory, time.monotonic() - t0, [], [], [], [], False,
                            error="; ".join(payload.get("why", [])) or "not runnable", client=client)
    real, model = payload["real"], payload["model"]
    outcome = [d for d in payload["differences"] if d["kind"] == "outcome"]
    run = KafkaFuzzRun(index, run_seed, directory, time.monotonic() - t0, list(real["lost"]),
                       list(model["lost"]), list(real["duplicated"]), list(model["duplicated"]),
                       not outcome, outcome, client=client, kind=outcome_kind(real, model))
    if outcome:
        scenario = schedule_scenario(schedule, f"kafka-fuzz-{index:03d}")
        steps = json.loads((directory / "steps.json").read_text())
        run.model_seeds_matching = model_seeds_matching(scenario, real, real["settings"], MODEL_SEEDS, client, steps)
    return run


def data_outcome(summary: dict[str, Any]) -> tuple[Any, ...]:
    """What a run did to the data, whatever the timing: the acknowledged values of each
    producer, the acknowledged values lost, the values duplicated."""
    acked = tuple(sorted((p, tuple(sorted(int(v) for v in a))) for p, a in summary["acked"].items()))
    return acked, tuple(summary["lost"]), tuple(summary["duplicated"])


#: The closing steps the model is given at the time the real run executed them
#: (:func:`at_real_times`).
_CLOSING_TIMED = frozenset({"heal", "restart"})


def at_real_times(scenario: Any, steps: list[dict[str, Any]], startups: dict[str, int] | None = None,
                  link_by_link: bool = True) -> Any:
    """``scenario`` with every timed step at the moment the real run executed it (a run's
    ``steps.json``: ``executed_at_ms`` by step index). The harness starts a step late when the
    one before it took time (a partition's nft rules in every namespace took 30-60 ms here on an
    idle machine, up to 1 s under load), so a produce due with a fault, or right after it, went
    out up to a few hundred milliseconds late; the model asked whether it gives the real
    outcome is given the same inputs at the same times. So are the closing heal and restarts,
    which have no time of their own: the harness starts each when the one before it returned,
    and with every broker down that took about 1.5 s a step here (``epochlab kafka fuzz``
    schedule 29, librdkafka: the restarts at 38.8, 40.3 and 41.6 s, 4.8 s after the last
    produce, where the model, running them at once, had brokers back before records sent at
    28.6 s expired). The closing wait and read stay as they are. With ``startups``
    (``real.json``'s ``restart_role_ms``: step index -> ms from the restart to the broker's
    first role in the partition, :func:`~epochlab.kafka.runs.compare.restart_roles`) each
    restart takes that startup time instead of a draw from ``broker_startup_ms`` (2.0-3.8 s;
    63 restarts here took 1.35-9.26 s, median 2.04 s).

    With ``link_by_link`` (the default), a partition, isolation or heal whose step kept the
    time each node's rules took effect (``applied_ms``,
    :class:`~epochlab.kafka.runs.driver.LiveStepRecord`) changes the model's links in that
    order (:func:`_link_by_link`), not all at the step's start; and a crash whose step kept
    when the broker's JVM exited (its ``applied_ms``; 1-75 ms after the step began, median
    38 ms, over 90 crashes here) holds the broker's links from the step's start and crashes
    it at the exit (:func:`_frozen_until_exit`)."""
    executed = {s["index"]: int(s["executed_at_ms"]) for s in steps
                if s.get("index") is not None and s.get("executed_at_ms") is not None
                and (s.get("at_ms") is not None or s.get("action") in _CLOSING_TIMED)}
    applied: dict[int, dict[int, int]] = {
        s["index"]: {int(n): int(ms) for n, ms in s["applied_ms"].items()} for s in steps
        if link_by_link and s.get("index") is not None and s.get("applied_ms")}
    startups = {int(k): int(v) for k, v in (startups or {}).items()}
    if not executed and not startups and not applied:
        return scenario
    brokers = [int(b) for b in scenario.cluster.get("brokers", [1, 2, 3])]
    nodes: list[Any] = [*brokers, "controller", *sorted(scenario.producers), *sorted(scenario.consumers)]
    cut: frozenset[frozenset[Any]] = frozenset()
    moved = []
    for step in scenario.steps:
        if step.at_ms is not None or step.action in _CLOSING_TIMED:
            step = replace(step, at_ms=executed.get(step.index, step.at_ms))
        if step.action == "restart" and step.index in startups:
            step = replace(step, params={**step.params, "startup_ms": startups[step.index]})
        if step.action == "crash" and step.at_ms is not None and step.index in applied:
            exited = applied[step.index].get(int(step.params["broker"]))
            if exited is not None and exited > step.at_ms:
                moved += _frozen_until_exit(step, exited, nodes, cut)
                continue
        after = _cut_after(step, nodes, cut)
        if after is not None and step.index in applied and step.at_ms is not None:
            moved += _link_by_link(step, cut, after, applied[step.index], brokers)
        else:
            moved.append(step)
        cut = cut if after is None else after
    return replace(scenario, steps=type(scenario.steps)(moved))


def _cut_after(step: Any, nodes: list[Any], cut: frozenset[frozenset[Any]]) -> frozenset[frozenset[Any]] | None:
    """The pairs of ``nodes`` the model's network has cut after ``step`` (``None``: the step
    changes no cut). A partition cuts every pair on different sides, its unlisted nodes being
    one more side (``Network.partition``); an isolation cuts the broker from every other node;
    a heal cuts nothing."""
    if step.action == "heal":
        return frozenset()
    if step.action == "isolate":
        b = int(step.params["broker"])
        return frozenset(frozenset((b, n)) for n in nodes if n != b)
    if step.action != "partition":
        return None
    side = {n: i for i, g in enumerate(step.params["groups"]) for n in g}
    return frozenset(frozenset((a, b)) for i, a in enumerate(nodes) for b in nodes[i + 1:]
                     if side.get(a, -1) != side.get(b, -1))


def _link_by_link(step: Any, before: frozenset[frozenset[Any]], after: frozenset[frozenset[Any]],
                  applied: dict[int, int], brokers: list[int]) -> list[Any]:
    """A cut-changing ``step`` as the harness made it: node by node, at the times of
    ``applied`` (node id -> run ms at which its rules took effect).

    A cut from ``a`` to ``b`` is enforced in ``a``'s namespace, one to or from the clients
    (which share the harness's address) in the broker's (``Faults.rules``). The model's links
    are cut both ways, and a request and its answer need both directions, so a pair is cut
    from the first of its two ends that cut it and usable again from the last that lets it
    through. Until the last change, the cuts are per link (``set_link`` with ``drop=1``, the
    partition lifted); at the last, the step itself, at that time, and the per-link cuts
    lifted. The controller is the one node of ``applied`` that is not a broker; with none or
    several, or a node without a time (its rules unchanged), the change counts at the step's
    start. The group coordinator, which the model hosts beside the controller, changes with
    the step itself, at the last change."""
    start = int(step.at_ms)
    controllers = [n for n in applied if n not in brokers]
    namespace: dict[Any, int] = {b: b for b in brokers}
    if len(controllers) == 1:
        namespace["controller"] = controllers[0]

    def when(node: Any) -> int | None:
        ns = namespace.get(node)
        return None if ns is None else applied.get(ns)

    changes: dict[frozenset[Any], int] = {}
    for pair in before ^ after:
        times = [t for t in (when(n) for n in pair) if t is not None] or [start]
        changes[pair] = min(times) if pair in after else max(times)
    if not changes:
        return [step]
    last = max(changes.values())
    moments = sorted({t for t in changes.values() if t < last})
    if not moments:
        return [replace(step, at_ms=last)]

    out: list[Any] = []
    dropped: set[frozenset[Any]] = set()
    for i, t in enumerate(moments):
        now = {p for p in before | after if (p in after if p in changes and changes[p] <= t else p in before)}
        out += [_set_link(step, p, 1.0, t) for p in sorted(now - dropped, key=_pair_key)]
        if i == 0 and before:
            out.append(replace(step, action="heal", params={}, at_ms=t, label=None))
        out += [_set_link(step, p, 0.0, t) for p in sorted(dropped - now, key=_pair_key)]
        dropped = now
    out.append(replace(step, at_ms=last))
    out += [_set_link(step, p, 0.0, last) for p in sorted(dropped, key=_pair_key)]
    return out


def _frozen_until_exit(step: Any, exited: int, nodes: list[Any], cut: frozenset[frozenset[Any]]) -> list[Any]:
    """A crash whose JVM exited at ``exited``, after the step began: SIGKILL stops the broker's
    threads at once, but its sockets close only as the process exits (``do_exit`` closes the
    files last), so until then its peers' messages wait unread and its listening socket still
    completes handshakes. In the model: from the step's start, every link of the broker not
    cut already holds what is sent across it (``set_link`` with ``drop=1``: TCP keeps it), and
    at the exit the broker crashes, what was held for it is lost with the connection, and the
    links are usable again."""
    broker = int(step.params["broker"])
    pairs = sorted((frozenset((broker, n)) for n in nodes if n != broker
                    and frozenset((broker, n)) not in cut), key=_pair_key)
    return [*(_set_link(step, p, 1.0, int(step.at_ms)) for p in pairs), replace(step, at_ms=exited),
            *(_set_link(step, p, 0.0, exited) for p in pairs)]


def _set_link(step: Any, pair: frozenset[Any], drop: float, at_ms: int) -> Any:
    """``step`` turned into the ``set_link`` of ``pair`` that cuts it (``drop=1``: what is sent
    is held, as across a partition) or lets it through (``drop=0``) at ``at_ms``."""
    a, b = sorted(pair, key=str)
    return replace(step, action="set_link", at_ms=at_ms, label=None,
                   params={"a": a, "b": b, "delay_ms": None, "drop": drop, "duplicate": 0.0, "reorder": False})


def _pair_key(pair: frozenset[Any]) -> list[str]:
    return sorted(map(str, pair))


def model_seeds_matching(scenario: Any, real: dict[str, Any], settings: dict[str, int], seeds: int,
                         client: str = "librdkafka", steps: list[dict[str, Any]] | None = None,
                         measured_startups: bool = True, link_by_link: bool = True) -> int:
    """Of model seeds ``1..seeds``, how many give ``real``'s :func:`data_outcome`, each step at
    the time the real run executed it when ``steps`` (its ``steps.json``) is given; with
    ``measured_startups`` (the default), each restart also takes the startup time the real
    run measured, from the restart to the broker's first role in the partition
    (``real["restart_role_ms"]``, :func:`~epochlab.kafka.runs.compare.restart_roles`): the
    broker's start is an input of the run, as the steps' times are (``docs/kafka-run.md``,
    "Seeds 6 and 7"); and so is each broker's first role as the topic was made
    (``real["first_role_ms"]``, :func:`~epochlab.kafka.runs.compare.first_roles`), the
    model's ``first_role_ms`` on an established cluster. ``link_by_link``: a partition's or
    heal's links cut or let through in the order the real run's nodes took them
    (:func:`at_real_times`)."""
    from epochlab.kafka.runs.compare import model_run, summarize_model

    if steps is not None:
        scenario = at_real_times(scenario, steps, real.get("restart_role_ms") if measured_startups else None,
                                 link_by_link)
    if measured_startups and real.get("first_role_ms") and scenario.cluster.get("established"):
        scenario = replace(scenario, cluster={**scenario.cluster, "first_role_ms": dict(real["first_role_ms"])})
    want = data_outcome(real)
    return sum(data_outcome(summarize_model(model_run(replace(scenario, seed=seed), GENERATION, settings,
                                                      client))) == want
               for seed in range(1, seeds + 1))


def reexamine(directory: Path, client: str, cluster: dict[str, Any] | None = None, seeds: int = MODEL_SEEDS,
              measured_startups: bool = True, link_by_link: bool = True) -> int:
    """Of model seeds ``1..seeds``, how many give the real data outcome kept in a run
    ``directory`` (``real.json``, ``schedule.json``), the model standing for ``client`` with the
    cluster's settings as the run had them plus ``cluster`` (scenario names: for instance the
    broker start time this machine showed, ``{"broker_startup_ms": [9000, 16000]}``): whether a
    timing the model's defaults do not reach explains a run no default seed reproduces; with
    ``measured_startups`` (the default), each restart's startup time as the run measured it
    (:func:`model_seeds_matching`; read from the kept ``state-change.log`` for a run kept
    before ``real.json`` held it); without ``link_by_link``, each partition and heal at its
    step's start, as runs kept before the harness timed each node's rules have it."""
    from epochlab.fuzz.schedule import load_schedule

    real = json.loads((directory / "real.json").read_text())
    real["restart_role_ms"] = kept_restart_roles(directory, real)
    real["first_role_ms"] = kept_first_roles(directory, real)
    scenario = schedule_scenario(load_schedule(directory / "schedule.json"), directory.name)
    if cluster:
        scenario = replace(scenario, cluster={**scenario.cluster, **cluster})
    steps_file = directory / "steps.json"
    steps = json.loads(steps_file.read_text()) if steps_file.exists() else None
    return model_seeds_matching(scenario, real, real["settings"], seeds, client, steps, measured_startups,
                                link_by_link)


def kept_restart_roles(directory: Path, real: dict[str, Any]) -> dict[str, int]:
    """The ms from each restart to the broker's first role in the partition
    (:func:`~epochlab.kafka.runs.compare.restart_roles`) of the run kept in ``directory``, whose
    ``real.json`` is ``real``: as it holds them (``restart_role_ms``), or for a run kept before
    it did, read from its ``state-change.log``, ``steps.json`` and clock (``clock_epoch_ms``);
    none when those are missing (every restart then draws its startup)."""
    from epochlab.kafka.runs.compare import restart_roles

    return _kept(directory, real, "restart_role_ms", restart_roles)


def kept_first_roles(directory: Path, real: dict[str, Any]) -> dict[str, int]:
    """Each broker's first role as the topic was made (:func:`~epochlab.kafka.runs.compare.first_roles`)
    in the run kept in ``directory``: as ``real`` holds them (``first_role_ms``), or read from
    its ``state-change.log``, ``steps.json`` and clock; none when those are missing."""
    from epochlab.kafka.runs.compare import first_roles

    return _kept(directory, real, "first_role_ms", first_roles)


def _kept(directory: Path, real: dict[str, Any], key: str, read: Any) -> dict[str, int]:
    from epochlab.kafka.runs.compare import restarted

    if key in real:
        return {str(k): int(v) for k, v in real[key].items()}
    changes, steps = directory / "state-change.log", directory / "steps.json"
    if not changes.exists() or not steps.exists() or "clock_epoch_ms" not in real:
        return {}
    return dict(read(changes.read_text(errors="replace").splitlines(), restarted(json.loads(steps.read_text())),
                     real["clock_epoch_ms"]))


def _write_summary(out: Path, seed: int, profile: FuzzProfile, done: list[KafkaFuzzRun], seconds: float,
                   client: str = "librdkafka") -> None:
    summary = {
        "generation": GENERATION, "seed": seed, "client": client, "profile": profile.to_dict(), "runs": len(done),
        "seconds": round(seconds, 1),
        "real_violations": [r.index for r in done if r.real_lost],
        "model_violations": [r.index for r in done if r.model_lost],
        "disagreements": [r.index for r in done if not r.agree and r.error is None],
        "unexplained": [r.index for r in done if r.model_seeds_matching == 0],
        "errors": [r.index for r in done if r.error is not None],
        "per_client": _per_client(done),
        "per_run": [r.to_dict() for r in done],
    }
    tmp = out / "summary.json.tmp"
    tmp.write_text(json.dumps(summary, sort_keys=True, indent=2, default=str) + "\n")
    tmp.replace(out / "summary.json")


def _per_client(done: list[KafkaFuzzRun]) -> dict[str, dict[str, Any]]:
    """Per client family: runs that ran, how many of them the model reproduces
    (:func:`reproduced`), the share, and the indexes of the others."""
    out: dict[str, dict[str, Any]] = {}
    for client in dict.fromkeys(r.client for r in done):
        ran = [r for r in done if r.client == client and r.error is None]
        yes = [r for r in ran if reproduced(r)]
        out[client] = {"runs": len(ran), "reproduced": len(yes),
                       "share": round(len(yes) / len(ran), 3) if ran else None,
                       "not_reproduced": [r.index for r in ran if not reproduced(r)],
                       "not_reproduced_by_kind": {
                           kind: [r.index for r in ran if not reproduced(r) and r.kind == kind]
                           for kind in OUTCOME_KINDS
                           if any(not reproduced(r) and r.kind == kind for r in ran)},
                       "real_violations": [r.index for r in ran if r.real_lost],
                       "model_violations": [r.index for r in ran if r.model_lost],
                       "errors": [r.index for r in done if r.client == client and r.error is not None]}
    return out
