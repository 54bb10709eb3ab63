"""Run a :class:`Scenario` on ``epochlab.sim.Cluster``, judge it, write its run directory.

The runner executes the steps in order at their times (``at_ms`` absolute; ``after_ms``
relative to the end of the previous step, which ``wait``, ``wait_until`` and ``flush`` move),
samples the cluster's state after every engine event while time advances (the
:class:`~epochlab.observe.Observer`), snapshots the state at the end of each step's
interval (one row of the step table), and judges the expectations that apply to the
generation. A step the engine cannot perform is recorded as a failed ``step`` check: never a
silent pass.

Run directory (``docs/cli.md``, "Run directories"; the layout every kind of run shares,
``epochlab.report.rundir``): ``README.md`` (the report with the rerun command),
``config.json``, ``scenario.toml``, ``steps.json`` (executed steps with times and outcomes),
``history.jsonl``, ``state.json``, ``steps.md``, ``events.txt``, ``timeline.png`` (with matplotlib),
``verdict.json``, ``report.md``. JSON files have sorted keys and end with a newline.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from epochlab.errors import EpochlabError
from epochlab.observe import Observer, Snapshot, StepRecord, snapshot_from
from epochlab.scenarios.expectations import Check, Facts, evaluate
from epochlab.scenarios.model import Scenario, Step
from epochlab.steps import STEPS

__all__ = ["RunResult", "default_run_dir", "run_scenario", "write_run_dir"]


@dataclass
class RunResult:
    scenario: Scenario
    generation: str
    seed: int
    configs: dict[str, Any]
    records: list[StepRecord]
    history_lines: list[str]
    final_state: dict[str, Any]
    final: Snapshot
    checks: list[Check]
    events: list[str] = field(default_factory=list)
    run_dir: Path | None = None

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def verdict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario.name,
            "generation": self.generation,
            "seed": self.seed,
            "passed": self.passed,
            "checks": [c.to_dict() for c in self.checks],
        }

    def schedule(self) -> list[dict[str, Any]]:
        out = []
        for rec in self.records[1:]:
            item = rec.step.to_dict()
            item.update(executed_at_ms=rec.executed_at_ms, outcome=rec.outcome, error=rec.error)
            out.append(item)
        return out


def default_run_dir(scenario: Scenario, generation: str, seed: int, root: str | Path = "runs") -> Path:
    return Path(root) / f"{scenario.name}-{generation}-seed{seed}"


def run_scenario(scenario: Scenario, generation: str | int | None = None, seed: int | None = None,
                 out_dir: str | Path | None = None, write: bool = True,
                 backend: str = "rust") -> RunResult:
    """Run ``scenario`` once. ``generation`` defaults to the scenario's first; ``seed`` to the
    scenario's. With ``write`` the run directory is ``out_dir`` (default
    ``runs/<scenario>-<generation>-seed<seed>``). ``backend`` selects the replica protocol
    implementation (``epochlab.sim.broker.make_replica``); every backend gives the same run."""
    from epochlab.generations import Generation
    from epochlab.sim import Cluster
    from epochlab.sim.config import ClusterConfig, ConsumerConfig, ProducerConfig

    gen = Generation.parse(generation if generation is not None else scenario.generations[0])
    seed = scenario.seed if seed is None else seed
    where = scenario.where
    cluster_cfg = ClusterConfig.from_dict(scenario.cluster, f"{where}: cluster")
    cluster = Cluster(cluster_cfg, gen, seed=seed, backend=backend)
    producer_cfgs = {n: ProducerConfig.from_dict(c, f"{where}: producers.{n}")
                     for n, c in scenario.producers.items()}
    consumer_cfgs = {n: ConsumerConfig.from_dict(c, f"{where}: consumers.{n}")
                     for n, c in scenario.consumers.items()}
    clients = _Clients({n: cluster.producer(n, c) for n, c in producer_cfgs.items()},
                       {n: cluster.consumer(n, c) for n, c in consumer_cfgs.items()})
    driver = _Driver(cluster, clients)
    records = driver.run(scenario.steps, scenario.settle_ms)
    state = cluster.state()
    final = snapshot_from(state)
    history = [op.to_json() for op in cluster.history]
    facts = Facts(final=final, after_step={i: r.snapshot for i, r in enumerate(records[1:])},
                  history=[json.loads(line) for line in history], observer=driver.observer,
                  events=[_event_dict(e) for e in cluster.events])
    checks = [evaluate(e, facts) for e in scenario.expectations if e.applies_to(gen.label, cluster_cfg.release)]
    checks += step_checks(records)
    configs = {
        "scenario": scenario.name,
        "source": scenario.source,
        "generation": gen.label,
        "kafka_versions": gen.kafka_versions,
        "seed": seed,
        "build": _build(),
        "cluster": _config_dict(cluster_cfg),
        "producers": {n: _config_dict(c) for n, c in producer_cfgs.items()},
        "consumers": {n: _config_dict(c) for n, c in consumer_cfgs.items()},
        "settle_ms": scenario.settle_ms,
    }
    result = RunResult(scenario, gen.label, seed, configs, records, history, state.to_dict(),
                       final, checks, events=[_event_text(e) for e in cluster.events])
    if write:
        path = Path(out_dir) if out_dir is not None else default_run_dir(scenario, gen.label, seed)
        write_run_dir(result, path)
    return result


class _Clients:
    def __init__(self, producers: dict[str, Any], consumers: dict[str, Any]) -> None:
        self.producers = producers
        self.consumers = consumers


class _Driver:
    """Executes steps on a cluster while sampling its state after every event."""

    def __init__(self, cluster: Any, clients: _Clients) -> None:
        self.cluster = cluster
        self.clients = clients
        self.observer = Observer()
        # what a step's simulator action reaches (epochlab.steps.Step.run)
        self.producers = clients.producers
        self.consumers = clients.consumers

    def sample(self) -> None:
        self.observer.sample(snapshot_from(self.cluster.state()))

    def advance(self, ms: int) -> None:
        """Let ``ms`` of virtual time pass, sampling after every event."""
        if ms <= 0:
            return
        target = self.cluster.now_ms + ms

        def watch(c: Any) -> bool:
            self.sample()
            return False

        self.cluster.run_until(watch, timeout_ms=ms)
        if self.cluster.now_ms < target:
            self.cluster.run_for(target - self.cluster.now_ms)
        self.sample()

    def run(self, steps: tuple[Step, ...], settle_ms: int) -> list[StepRecord]:
        self.sample()
        records = [StepRecord(None, self.cluster.now_ms, "initial state")]
        cursor = self.cluster.now_ms
        for step in steps:
            target = step.at_ms if step.at_ms is not None else cursor + (step.after_ms or 0)
            self.advance(target - self.cluster.now_ms)
            records[-1].snapshot = snapshot_from(self.cluster.state())
            record = StepRecord(step, self.cluster.now_ms)
            try:
                record.outcome = _ACTIONS[step.action](self, step.params)
            except (AttributeError, NotImplementedError, TypeError, EpochlabError) as exc:
                record.error = f"the engine cannot perform {step.action}: {type(exc).__name__}: {exc}"
            self.sample()
            records.append(record)
            cursor = self.cluster.now_ms
        self.advance(settle_ms)
        records[-1].snapshot = snapshot_from(self.cluster.state())
        return records


def _flush(d: _Driver, p: dict[str, Any]) -> str:
    done = d.clients.producers[p["producer"]].flush(p["timeout_ms"])
    d.sample()
    return "all sends completed" if done else f"sends still pending after {p['timeout_ms']} ms"


def _wait_until(d: _Driver, p: dict[str, Any]) -> str:
    cond = p["condition"]

    def pred(c: Any) -> bool:
        snap = snapshot_from(c.state())
        d.observer.sample(snap)
        return _holds(cond, snap, d)

    start = d.cluster.now_ms
    ok = _holds(cond, snapshot_from(d.cluster.state()), d) or d.cluster.run_until(
        pred, timeout_ms=p["timeout_ms"])
    waited = d.cluster.now_ms - start
    if ok:
        return f"condition held after {waited} ms"
    return ("TIMEOUT" if p["required"] else "timeout") + f": condition not met in {p['timeout_ms']} ms"


def state_conditions(snap: Snapshot) -> dict[str, Callable[[Any], bool]]:
    """The ``wait_until`` conditions read from a state snapshot alone (leader, epoch, ISR,
    HW), for the simulator and for a real cluster's sampled state (``epochlab.kafka.runs.scenario``)."""
    return {
        "leader": lambda b: snap.available() and snap.leader == b,
        "not_leader": lambda b: snap.available() and snap.leader != b,
        "leader_epoch_at_least": lambda e: snap.leader_epoch is not None and snap.leader_epoch >= e,
        "offline": lambda v: snap.offline == v,
        "isr": lambda bs: set(snap.isr) == set(bs),
        "high_watermark_at_least": lambda h: snap.available()
        and snap.leader_replica().high_watermark >= h,  # type: ignore[union-attr]
        "leo": lambda bo: (r := snap.replica(bo[0])) is not None and r.log_end_offset == bo[1],
    }


def _holds(cond: dict[str, Any], snap: Snapshot, d: _Driver) -> bool:
    checks = state_conditions(snap) | {
        "in_sync": lambda v: _in_sync(snap) == v,
        "sends_done": lambda name: _sends_done(d, name),
        "transactions_done": lambda name: not d.clients.producers[name].transactions_pending,
    }
    return all(checks[k](v) for k, v in cond.items())


def _in_sync(snap: Snapshot) -> bool:
    leader = snap.leader_replica()
    if leader is None or not snap.available():
        return False
    return all(r.log_end_offset == leader.log_end_offset and r.high_watermark == leader.high_watermark
               for r in snap.replicas if r.alive)


def _sends_done(d: _Driver, producer: str) -> bool:
    invoked, done = 0, 0
    for op in d.cluster.history:
        if getattr(op, "process", None) == producer and getattr(op, "f", None) == "send":
            if op.type == "invoke":
                invoked += 1
            else:
                done += 1
    return done >= invoked


def _wait(d: _Driver, p: dict[str, Any]) -> str:
    d.advance(p["ms"])
    return f"waited {p['ms']} ms"


def _note(d: _Driver, p: dict[str, Any]) -> str:
    return ""


#: The scenario-only time steps (``epochlab.steps``: those without a simulator action).
_TIME_STEPS: dict[str, Callable[[_Driver, dict[str, Any]], str]] = {
    "flush": _flush,
    "wait": _wait,
    "wait_until": _wait_until,
    "note": _note,
}

#: A step's outcome in ``steps.json`` from what its simulator action returned (default: "").
_OUTCOMES: dict[str, Callable[[Any, dict[str, Any]], str]] = {
    "produce": lambda _, p: f"sent {len(p['values'])}",
    "consume": lambda got, _: "polled " + (" ".join(f"{o}:m{v}" for o, v in got) if got else "nothing"),
    "list_offsets": lambda _, p: f"asked the leader for the {p['spec']} offset",
}


def _perform(name: str) -> Callable[[_Driver, dict[str, Any]], str]:
    """The step's simulator action, and its outcome."""
    outcome = _OUTCOMES.get(name)

    def run(d: _Driver, p: dict[str, Any]) -> str:
        got = STEPS[name].run(d, p)
        return outcome(got, p) if outcome is not None else ""
    return run


#: step name -> what performs it on the simulator: every step of the vocabulary.
_ACTIONS: dict[str, Callable[[_Driver, dict[str, Any]], str]] = {
    s.name: _TIME_STEPS[s.name] if s.time_only else _perform(s.name) for s in STEPS.values()}


def step_checks(records: list[StepRecord], error_status: str = "unsupported") -> list[Check]:
    """A failed engine call (status ``error_status``: the simulator calls it unsupported, a
    real cluster's harness failed), or a required ``wait_until`` that timed out, fails the
    verdict."""
    out = []
    for rec in records[1:]:
        step = rec.step
        assert step is not None
        if rec.error is not None:
            out.append(Check(None, "step", f"step {step.index + 1}: {step.describe()}",
                             error_status, rec.error))
        elif step.action == "wait_until" and rec.outcome.startswith("TIMEOUT"):
            out.append(Check(None, "step", f"step {step.index + 1}: {step.describe()}",
                             "failed", rec.outcome))
    return out


def _config_dict(config: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(config):
        return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    return dict(vars(config))


def _build() -> str:
    import epochlab

    return str(epochlab.BUILD)


def _event_dict(event: Any) -> dict[str, Any]:
    if hasattr(event, "to_dict"):
        return dict(event.to_dict())
    return {"time_ms": getattr(event, "time_ms", None), "kind": getattr(event, "kind", None),
            "message": getattr(event, "message", str(event))}


def _event_text(event: Any) -> str:
    time_ms = getattr(event, "time_ms", None)
    message = getattr(event, "message", None)
    if time_ms is None and message is None:
        return str(event)
    return f"{time_ms} ms: {message}"


def _dump(data: Any) -> str:
    return json.dumps(data, sort_keys=True, indent=2, default=_json_default) + "\n"


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (tuple, set, frozenset)):
        return list(obj)
    if dataclasses.is_dataclass(obj):
        return _config_dict(obj)
    return str(obj)


def write_run_dir(result: RunResult, path: str | Path) -> Path:
    """Write every file of the run directory (``epochlab.report.rundir``: written beside it and
    moved into place when complete); returns the directory."""
    from epochlab.report import picture, render_report
    from epochlab.report.rundir import write_atomically
    from epochlab.report.table import step_rows, table_markdown

    rows = step_rows(result.records)
    verdict = result.verdict()
    verdict["valid"] = result.passed
    sc = result.scenario

    def fill(d: Path) -> None:
        (d / "config.json").write_text(_dump(result.configs))
        (d / "steps.json").write_text(_dump(result.schedule()))
        if sc.text is not None:
            (d / "scenario.toml").write_text(sc.text, encoding="utf-8")
        (d / "history.jsonl").write_text("".join(line + "\n" for line in result.history_lines))
        (d / "state.json").write_text(_dump(result.final_state))
        (d / "steps.md").write_text(table_markdown(rows))
        (d / "verdict.json").write_text(_dump(verdict))
        (d / "events.txt").write_text("".join(e + "\n" for e in result.events))
        picture_note = picture.save_timeline(result.records, d / "timeline.png",
                                             title=f"{sc.name} ({result.generation}, seed {result.seed})")
        report = render_report(result, rows, picture_note)
        (d / "report.md").write_text(report)
        rerun = (f"epochlab scenario run {Path(path) / 'scenario.toml'} -g {result.generation} "
                 f"--seed {result.seed}" if sc.text is not None else
                 f"epochlab scenario run {sc.name} -g {result.generation} --seed {result.seed}")
        head, _, rest = report.partition("\n")
        (d / "README.md").write_text(f"{head}\n\nRerun it (same build, byte-identical history):\n\n"
                                     f"```sh\n{rerun}\n```\n{rest}")

    write_atomically(path, fill)
    result.run_dir = Path(path)
    return Path(path)
