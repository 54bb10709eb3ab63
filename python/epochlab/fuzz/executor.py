"""Run a :class:`~epochlab.fuzz.schedule.Schedule` on a ``Cluster`` and return the checker's
verdict.

The run: build the cluster (``seed``, ``generation``, configs) and the clients, then for each
action advance virtual time to its ``at_ms`` and apply it, checking the state invariants after
every engine event and every action. Then the healing phase: faults stop (network healed,
links reset, slow followers released, crashed brokers and consumers restarted), consumers keep
polling every second, and the cluster runs until it has converged or ``healing_ms`` passed;
producers get their delivery timeout to finish. Finally the history and liveness invariants.

Same schedule, same build -> byte-identical history and verdict JSON (no wall clock, no
unordered iteration; ``produce`` with ``count`` takes the next unused integers as values).
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import gc
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from epochlab.checks import (
    ALL_INVARIANTS,
    StateChecker,
    Verdict,
    Violation,
    check_history,
    check_liveness,
    converged,
    lso_settled,
)
from epochlab.checks.transactions import check_transactions
from epochlab.fuzz.coverage import attach
from epochlab.fuzz.schedule import Action, Schedule
from epochlab.generations import Generation
from epochlab.observe import StepRecord, snapshot_from
from epochlab.sim.history import HistoryOp, history_to_jsonl
from epochlab.steps import STEPS

__all__ = ["Run", "RunResult", "execute", "gc_for_many_runs"]

POLL_EVERY_MS = 1000
STABLE_POLLS = 7  # > CONTROLLED_SHUTDOWN_TIMEOUT_MS (5 s) of the broker


#: The youngest generation's collection threshold while many runs follow one another: a run
#: allocates closures, timers and messages by the ten thousand, nearly all short-lived and
#: freed by reference counting, so CPython's default (a young collection every 700 net
#: allocations) mostly walks live objects for nothing: about 5% of a latest-generation fuzz run
#: (beaffc8: 29.6 against 28.3 ms per run with the collector off).
MANY_RUNS_GC_THRESHOLD = 20_000


@contextlib.contextmanager
def gc_for_many_runs() -> Iterator[None]:
    """Within the block: what exists now is moved out of the collector's sight
    (``gc.freeze``: imported modules, the grid, the caller's state) and young collections
    happen every :data:`MANY_RUNS_GC_THRESHOLD` allocations; both undone after. For the
    loops that run schedule after schedule in one process (the fuzz campaign, the bug hunt, a
    Spark task). Collection timing changes no run: nothing in a run has a finaliser or a weak
    reference that its outcome depends on."""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(threshold[0], MANY_RUNS_GC_THRESHOLD), *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def worker_pool(jobs: int) -> Any:
    """A ``concurrent.futures.ProcessPoolExecutor`` of ``jobs`` spawned workers (the fuzz
    campaign's and the guided search's) that end with the process that made them, even when it
    is killed: SIGKILL runs no ``finally``, and a pool's idle workers wait on their task queue
    for good when its owner is gone (and keep its resource tracker alive with them). Each worker
    watches its parent (:func:`_exit_with_parent`)."""
    import concurrent.futures
    import multiprocessing
    import os

    return concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                                                  initializer=_exit_with_parent, initargs=(os.getpid(),))


def _exit_with_parent(parent: int) -> None:
    """In a pool worker: a daemon thread that ends the process once its parent ``parent`` is
    gone (the worker is handed to another parent then: ``os.getppid`` changes), checked twice a
    second."""
    import os
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="epochlab-exit-with-parent", daemon=True).start()


@dataclass
class RunResult:
    """What one run produced; ``verdict_json()`` and ``history_jsonl`` are byte-stable."""

    schedule: Schedule
    verdict: Verdict
    history: list[HistoryOp]            # the client history, in order
    final_state: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    end_ms: int = 0
    records: list[Any] | None = None   # step records (``execute(record=True)``)
    #: the protocol-state features the run reached (``execute(coverage=True)``,
    #: ``epochlab.fuzz.coverage``), increasing, and the action index each was first reached
    #: at (-1: before the first action; the number of actions: while healing), the simulated
    #: time (ms), and the broker whose tuple it is with the follower of that broker's stale
    #: belief (-1: none; both -1 for a cluster feature)
    features: list[int] | None = None
    first_steps: list[int] | None = None
    first_times: list[int] | None = None
    first_brokers: list[tuple[int, int]] | None = None

    def verdict_json(self) -> str:
        return self.verdict.to_json()

    @functools.cached_property
    def history_jsonl(self) -> str:
        """The history as JSON Lines, made when first asked for: a fuzz campaign judges
        thousands of runs by their verdicts and writes the history of the few it keeps."""
        return history_to_jsonl(self.history)


#: Generations whose releases have no idempotent producer (KIP-98, 0.11.0): the model still lets
#: a profile or scenario configure one there (the seed scenarios run in every generation), but
#: the guarantee the duplicate and order checks judge does not exist, so they are allowed.
NO_IDEMPOTENCE = {Generation.TRUNCATE_TO_HW: "Kafka before 0.11 has no idempotent producer (KIP-98, "
                                            "0.11.0), nor sequence numbers for a broker to check"}


class Run:
    """The executor's engine: one schedule's cluster, clients and state checker, driven action
    by action (:meth:`advance_to`, :meth:`apply`, :meth:`healing`, :meth:`verdict`).
    :func:`execute` is the whole run; a caller that must look at the cluster between two
    actions (a campaign's snapshot at the fault, ``epochlab.campaigns.runs``) drives it
    itself, with the same checks."""

    def __init__(self, schedule: Schedule, backend: str | None) -> None:
        from epochlab.sim import Cluster
        from epochlab.sim.config import ClusterConfig, ConsumerConfig, ProducerConfig

        self.schedule = schedule
        # the configurations validation built (Schedule.configs), else built here
        built = schedule.configs or {}

        def config(cls: Any, path: str, mapping: Any) -> Any:
            made = built.get(path)
            return made if made is not None else cls.from_dict(mapping, path)
        self.config = config(ClusterConfig, "cluster", schedule.cluster)
        kwargs = {"backend": backend} if backend is not None else {}
        self.cluster = Cluster(self.config, schedule.generation, seed=schedule.seed, **kwargs)
        self.producers = {n: self.cluster.producer(n, config(ProducerConfig, f"producers.{n}", c))
                          for n, c in sorted(schedule.producers.items())}
        self.consumers = {n: self.cluster.consumer(n, config(ConsumerConfig, f"consumers.{n}", c))
                          for n, c in sorted(schedule.consumers.items())}
        self.step = -1
        self.checker = StateChecker(self.cluster, lambda: self.step)
        # the state a broker leaves when it stops, seen before it is gone (Recorder.before_stop)
        self.cluster.recorder.stop_watchers.append(self.checker.observe)
        self.next_value = 1
        self.links: list[tuple[Any, Any]] = []
        self.slowed: list[int] = []
        self.healing_start_ms: int | None = None
        self._ops: list[dict[str, Any]] = []

    def history_dicts(self) -> list[dict[str, Any]]:
        """The history so far as ``HistoryOp.to_dict()`` dicts (made once per record: the
        history is only appended to; callers must not change them)."""
        history = self.cluster.history
        if len(self._ops) < len(history):
            self._ops.extend(op.to_dict() for op in history[len(self._ops):])
        return self._ops

    def _tick(self, _cluster: Any) -> bool:
        if not self.cluster.kernel.last_quiet:  # a client's event changes nothing checked
            self.checker.observe()
        return False

    def advance_to(self, time_ms: int) -> None:
        cluster = self.cluster
        if time_ms > cluster.now_ms:
            # the checker after every event that is not quiet (a client's event changes
            # nothing checked), as ``_tick`` does, called by the kernel itself
            cluster.kernel.run_until(time_ms, None, self.checker.hook())

    def apply(self, action: Action) -> None:
        """Perform ``action``: its step's simulator action (``epochlab.steps``), and what the
        run itself keeps of it: the values a ``count`` stands for, the lossy crash the checker
        must know of, the faults the healing phase undoes (:meth:`heal_everything`)."""
        p, op = action.params, action.op
        if op == "produce":  # ``count``: the next unused integers
            values = p["values"] or tuple(range(self.next_value, self.next_value + p["count"]))
            self.next_value = max(self.next_value, max(values) + 1)
            p = {**p, "values": values}
        # noted after the crash: the checker looks at the broker just before it stops
        # (Recorder.before_stop) and must not see it as recovering yet
        lossy = op == "crash" and p["lose_unflushed"] and self.cluster.brokers[p["broker"]].alive
        STEPS[op].run(self, p)
        if lossy:
            self.checker.note_lossy_crash(p["broker"])
        elif op == "slow_follower":
            self.slowed.append(p["broker"])
        elif op == "set_link":
            self.links.append((p["a"], p["b"]))

    def heal_everything(self) -> None:
        c = self.cluster
        c.heal()
        for a, b in self.links:
            delay = self.config.controller_delay_ms if "controller" in (a, b) else self.config.network_delay_ms
            c.set_link(a, b, delay_ms=delay)
        for b in self.slowed:
            c.slow_follower(b, 0)
        self.restart_dead()

    def restart_dead(self) -> None:
        """Restart crashed brokers and consumers (also those a late controlled shutdown
        stopped after the healing began)."""
        c = self.cluster
        for b in sorted(c.brokers):
            if not c.brokers[b].alive:
                c.restart(b)
        if not c.coordinator.alive:
            c.restart_coordinator()
        for consumer in self.consumers.values():
            if not consumer.alive:
                consumer.restart()

    def healing(self) -> None:
        self.step = len(self.schedule.actions)
        self.healing_start_ms = self.cluster.now_ms
        self.heal_everything()
        self.checker.observe()
        deadline = self.cluster.now_ms + self.schedule.healing_ms
        stable = 0
        while self.cluster.now_ms < deadline:
            self.advance_to(min(deadline, self.cluster.now_ms + POLL_EVERY_MS))
            self.restart_dead()
            for consumer in self.consumers.values():
                consumer.poll()
            done = converged(self.cluster) and not any(
                p.pending or p.transactions_pending for p in self.producers.values()) \
                and lso_settled(self.cluster)
            stable = stable + 1 if done else 0
            # converged for longer than a controlled shutdown still in flight can take
            if stable >= STABLE_POLLS:
                break
        if any(p.pending for p in self.producers.values()):
            wait = max(p.config.delivery_timeout_ms + p.config.request_timeout_ms
                       for p in self.producers.values())
            self.cluster.run_until(lambda c: self._tick(c) or not any(
                p.pending for p in self.producers.values()), wait)

    def step_of(self, time_ms: int) -> int | None:
        if self.healing_start_ms is not None and time_ms > self.healing_start_ms:
            return len(self.schedule.actions)
        times = [a.at_ms for a in self.schedule.actions]
        index = bisect.bisect_right(times, time_ms) - 1
        return index if index >= 0 else None

    def final_log(self) -> dict[int, int]:
        c = self.cluster
        leader = c.controller.leader
        candidates = [leader] if leader is not None else sorted(
            c.brokers, key=lambda b: -c.brokers[b].replica.log.log_end_offset)
        if not candidates:
            return {}
        log = c.brokers[candidates[0]].replica.log
        out: dict[int, int] = {}
        for batch in log.batches():
            if batch.is_control:
                continue
            for i, value in enumerate(batch.records):
                out[batch.base_offset + i] = value
        return out

    def skippable(self) -> dict[str, set[int]]:
        """Offsets a consumer legitimately never receives: transaction markers, and for a
        read_committed consumer the aborted data, on any replica's log."""
        from epochlab.checks.transactions import read_committed_view

        markers: set[int] = set()
        aborted: set[int] = set()
        for b in sorted(self.cluster.brokers):
            log = self.cluster.brokers[b].replica.log
            view = read_committed_view(log)
            lso = log.last_stable_offset
            for batch in log.batches():
                offsets = range(batch.base_offset, batch.last_offset + 1)
                if batch.is_control:
                    markers.update(offsets)
                elif batch.is_transactional:
                    aborted.update(o for o in offsets if o < lso and o not in view)
        return {n: markers | (aborted if x.config.isolation_level == "read_committed" else set())
                for n, x in self.consumers.items()}

    def committed(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for batch in self.checker.truth.batches():
            if batch.is_control:
                continue
            for i, value in enumerate(batch.records):
                if batch.base_offset + i < self.checker.true_hw:
                    out[batch.base_offset + i] = value
        return out

    def verdict(self) -> Verdict:
        c = self.cluster
        violations: list[Violation] = list(self.checker.violations)
        resets: dict[str, list[int]] = {}
        for e in c.events:
            if e.kind == "client" and e.message.startswith("consumer ") and ", reset " in e.message:
                resets.setdefault(e.message.split()[1].rstrip(":"), []).append(e.time_ms)
        idempotent = {n for n, p in self.producers.items() if p.config.enable_idempotence}
        rewritten = {v for p in self.producers.values() for v in p.rewritten_values}
        violations += check_history(self.history_dicts(), self.final_log(),
                                    self.committed(), self.checker.true_hw_at,
                                    self.checker.allowance, idempotent, self.step_of, resets,
                                    c.now_ms, skippable=self.skippable() if any(
                                        p.transactional for p in self.producers.values()) else None,
                                    rewritten=rewritten, no_idempotence=NO_IDEMPOTENCE.get(c.generation))
        leader = c.controller.leader
        read_committed = {n for n, x in self.consumers.items()
                          if x.config.isolation_level == "read_committed"}
        violations += check_transactions(
            self.history_dicts(),
            c.brokers[leader].replica.log if leader is not None else None,
            {b: c.brokers[b].replica.log for b in sorted(c.brokers)}, read_committed,
            self.checker.allowance, self.step_of, c.now_ms)
        violations += check_liveness(c, len(self.schedule.actions), self.schedule.healing_ms,
                                     self.checker.allowance())
        seen: set[str] = set()
        unique = []
        for v in violations:
            if v.invariant not in seen:
                seen.add(v.invariant)
                unique.append(v)
        return Verdict(unique, list(ALL_INVARIANTS))


class Healing:
    """The pseudo-step of the healing phase in a step table."""

    def __init__(self, healing_ms: int) -> None:
        self.healing_ms = healing_ms

    def describe(self) -> str:
        return (f"healing (up to {self.healing_ms} ms): partitions healed, links reset, "
                "crashed brokers and consumers restarted, consumers polling")

    def to_dict(self) -> dict[str, Any]:
        return {"op": "healing", "healing_ms": self.healing_ms}


def execute(schedule: Schedule, backend: str | None = None, record: bool = False,
            coverage: bool = False) -> RunResult:
    """Run ``schedule`` and judge it. ``backend`` is passed to ``Cluster`` when given
    (``"rust"`` or ``"reference"``). With ``record`` the result carries step
    records for a step table (``epochlab.observe.StepRecord``: the state at the end
    of each action's interval, then after the healing phase); with ``coverage`` the
    protocol-state features the run reached (``epochlab.fuzz.coverage``). Both only read
    state, so the run is the same."""
    run = Run(schedule, backend)
    features = attach(run) if coverage else None
    run.checker.observe()
    records: list[Any] = [StepRecord(None, 0)] if record else []
    for index, action in enumerate(schedule.actions):
        run.advance_to(action.at_ms)
        if record:
            records[-1].snapshot = snapshot_from(run.cluster.state())
            records.append(StepRecord(action, run.cluster.now_ms))
        run.step = index
        run.apply(action)
        run.checker.observe()
    if record:
        records[-1].snapshot = snapshot_from(run.cluster.state())
        records.append(StepRecord(Healing(schedule.healing_ms), run.cluster.now_ms))
    run.healing()
    verdict = run.verdict()
    c = run.cluster
    if record:
        records[-1].snapshot = snapshot_from(c.state())
    reached, steps, times, brokers = features() if features is not None else (None, None, None, None)
    return RunResult(schedule, verdict, c.history, c.state().to_dict(),
                     [e.to_dict() for e in c.events], c.now_ms, records if record else None,
                     reached, steps, times, brokers)
