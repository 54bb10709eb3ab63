"""The random engine's campaign loop and the artifacts every engine writes.

A campaign runs generated schedules (per-run seed: a hash of the campaign seed and the run
number, so a run is reproducible on its own) until a time or run budget is spent. The first
time a signature (invariant name) shows up as a protocol violation, the schedule is saved at
once (``original.json``), shrunk to a minimal schedule that violates the same invariant, and
the directory ``<out>/violations/<signature>/`` gets::

    schedule.json   the minimal schedule (replay: epochlab replay .../schedule.json)
    original.json   the schedule as generated
    verdict.json    the minimal schedule's verdict
    README.txt      invariant, message, seed, build, the exact replay and shrink commands

``<out>/summary.json`` lists every distinct violation with the runs and seconds to its first
occurrence. The wall clock (``time.monotonic``) is used here only for the budget and these
figures, never inside a run.

With ``jobs`` > 1 the runs execute in that many worker processes, in chunks of consecutive run
numbers handed out in order; the parent takes the chunks' results back in run order, so the
findings (the first run of each signature, its shrinking, the stop of ``until_found``) and the
summary are those of one process running the same runs: a run budget gives the same findings,
byte for byte, on any number of jobs. With ``master`` the same chunks run as tasks of a Spark
cluster (``epochlab fuzz --master URL``), gathered and shrunk on the driver, with the same
findings. Only the seconds, and with a time budget how many runs fit in it, depend on the
deployment.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from epochlab.checks import Violation
from epochlab.checks.catalogue import match
from epochlab.fuzz.executor import execute, gc_for_many_runs, worker_pool
from epochlab.fuzz.generator import FuzzProfile, generate_schedule
from epochlab.fuzz.schedule import Schedule
from epochlab.fuzz.shrink import shrink
from epochlab.generations import Generation

__all__ = ["CHUNK_RUNS", "Campaign", "Finding", "default_jobs", "run_seed", "write_finding"]


#: Consecutive runs a worker executes per task with ``jobs`` > 1.
CHUNK_RUNS = 20


def default_jobs() -> int:
    """Every core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _run_chunk(task: tuple[int, str, FuzzProfile, str | None], first: int, count: int) -> list[tuple[int, Any]]:
    """A worker's task: runs ``first .. first + count - 1`` of the campaign, their verdicts."""
    seed, generation, profile, backend = task
    with gc_for_many_runs():
        return [(run, execute(generate_schedule(run_seed(seed, run), generation, profile), backend=backend).verdict)
                for run in range(first, first + count)]


def run_seed(campaign_seed: int, run: int) -> int:
    """The seed of run ``run``: a hash of the campaign seed and the run number (31 bits)."""
    digest = hashlib.sha256(f"{campaign_seed}:{run}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def _build() -> str:
    try:
        import epochlab

        return str(epochlab.BUILD)
    except Exception:  # pragma: no cover - the core failed to import
        return "unknown"


@dataclass
class Finding:
    """One distinct violation of a campaign."""

    violation: Violation
    run: int
    seed: int | None
    seconds: float
    directory: Path | None = None
    minimal_actions: int | None = None
    original_actions: int = 0
    shrink_runs: int = 0
    generation: Generation = Generation.STRICT_MIN_ISR

    def to_dict(self) -> dict[str, Any]:
        return {"signature": self.violation.signature, "invariant": self.violation.invariant,
                "message": self.violation.message, "runs_to_first": self.run + 1,
                "seconds_to_first": round(self.seconds, 3), "seed": self.seed,
                "original_actions": self.original_actions, "minimal_actions": self.minimal_actions,
                "shrink_runs": self.shrink_runs,
                "known_bugs": known_bugs(self.directory, self.generation, self.violation.invariant),
                "schedule": str(self.directory / "schedule.json") if self.directory else None}


KNOWN_BUGS_FILE = "known-bugs.json"


def known_bugs(directory: Path | None, generation: Generation, invariant: str) -> list[str]:
    """The catalogued bugs a finding matches: as its run directory recorded them (signature
    and witness, :func:`write_finding`), else by signature alone."""
    if directory is not None:
        try:
            return list(json.loads((directory / KNOWN_BUGS_FILE).read_text(encoding="utf-8"))["matches"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    return [b.id for b in match(generation, invariant)]


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_finding(out: Path, violation: Violation, original: Schedule, minimal: Schedule | None,
                  seed: int | None, engine: str) -> Path:
    """Write (or replace) ``<out>/violations/<signature>/``, a run directory
    (``epochlab.report.rundir``) of the minimal schedule (the original until it is shrunk)
    with ``original.json`` beside it; safe to call first with ``minimal=None`` (before
    shrinking) and again with the minimal schedule. The schedule is run again here, recorded
    step by step for the run directory."""
    from epochlab.fuzz.executor import execute
    from epochlab.report.rundir import write_schedule_run

    directory = out / "violations" / violation.signature
    best = minimal or original
    shown_run = execute(best, record=True)
    shown = shown_run.verdict.first(violation.signature) or violation
    from epochlab.checks.catalogue import describe_match

    notes = [
        f"Found by the {engine} engine: {violation.invariant} ({violation.verdict}) at step "
        f"{shown.step} ({shown.time_ms} ms): {shown.message}.",
        "",
        describe_match(original.generation, violation.invariant, shown_run.events),
        "",
        f"Campaign run seed {seed if seed is not None else original.seed}; "
        f"{len(best.actions)} actions (the original had {len(original.actions)})"
        + ("" if minimal is not None else ", not shrunk yet") + ". Shrink again:",
        "",
        "```sh",
        f"epochlab shrink {directory / 'original.json'}",
        "```",
    ]
    known = {"signature": [b.id for b in match(original.generation, violation.invariant)],
             "matches": [b.id for b in match(original.generation, violation.invariant, shown_run.events)]}
    write_schedule_run(shown_run, directory, rerun=f"epochlab replay {directory}",
                       title=f"{violation.invariant} in {original.generation.label}",
                       notes=notes, extra_files={"original.json": original.to_json(),
                                                 KNOWN_BUGS_FILE: json.dumps(known, indent=1) + "\n"},
                       picture=minimal is not None)
    return directory


@dataclass
class Campaign:
    """A random-engine campaign; :meth:`run` spends the budget and returns the findings."""

    #: the engine named in run directories and summaries
    engine = "random"

    generation: Generation
    profile: FuzzProfile = field(default_factory=FuzzProfile)
    seed: int = 0
    seconds: float | None = 60.0
    runs: int | None = None
    out: Path | None = None
    backend: str | None = None
    shrink_runs: int = 300
    until_found: bool = False
    progress: Callable[[str], None] = lambda _line: None
    #: called after every run with (runs done, seconds spent): the CLI's progress bar
    tick: Callable[[int, float], None] = lambda _runs, _seconds: None
    findings: dict[str, Finding] = field(default_factory=dict)
    allowed: dict[str, int] = field(default_factory=dict)
    total_runs: int = 0
    elapsed: float = 0.0
    #: worker processes (1: run in this process)
    jobs: int = 1
    #: a Spark master (``local[2]``, ``spark://host:7077``): the chunks run as Spark tasks
    master: str | None = None

    def run(self) -> list[Finding]:
        with gc_for_many_runs():
            return self._run()

    def _run(self) -> list[Finding]:
        start = time.monotonic()
        deadline = None if self.seconds is None else start + self.seconds
        if self.master is not None:
            outcomes = self._spark(deadline)
        elif self.jobs > 1:
            outcomes = self._parallel(deadline)
        else:
            outcomes = self._serial(deadline)
        for run, verdict in outcomes:
            seed = run_seed(self.seed, run)
            self.total_runs = run + 1
            for v in verdict.allowed:
                self.allowed[v.invariant] = self.allowed.get(v.invariant, 0) + 1
            for v in verdict.protocol_violations:
                if v.signature not in self.findings:
                    schedule = generate_schedule(seed, self.generation, self.profile)
                    self._found(v, run, seed, schedule, time.monotonic() - start, deadline)
            self.tick(run + 1, time.monotonic() - start)
            if self.until_found and self.findings:
                break
        self.elapsed = time.monotonic() - start
        if self.out is not None:
            self.write_summary()
        return list(self.findings.values())

    def _more(self, run: int, deadline: float | None) -> bool:
        return (self.runs is None or run < self.runs) and (deadline is None or time.monotonic() < deadline)

    def _chunks(self, deadline: float | None) -> Iterator[tuple[int, int]]:
        """``(first run, count)`` of consecutive runs, :data:`CHUNK_RUNS` at a time, while the
        budget lasts (asked each time a chunk is handed out)."""
        first = 0
        while self._more(first, deadline):
            count = CHUNK_RUNS if self.runs is None else min(CHUNK_RUNS, self.runs - first)
            yield first, count
            first += count

    def _serial(self, deadline: float | None) -> Iterator[tuple[int, Any]]:
        run = 0
        while self._more(run, deadline):
            yield run, execute(generate_schedule(run_seed(self.seed, run), self.generation, self.profile),
                               backend=self.backend).verdict
            run += 1

    def _parallel(self, deadline: float | None) -> Iterator[tuple[int, Any]]:
        """Chunks of :data:`CHUNK_RUNS` consecutive runs on ``jobs`` worker processes (spawned:
        no state of this process is shared), at most two chunks per worker in flight, results
        taken back in run order. No chunk is handed out once the budget is spent (every chunk
        handed out counts, as every run a single process started before its deadline does);
        closing the generator (``until_found``) cancels what has not started."""
        task = (self.seed, self.generation.label, self.profile, self.backend)
        with worker_pool(self.jobs) as pool:
            pending: list[Any] = []
            chunks = self._chunks(deadline)
            try:
                while True:
                    while len(pending) < 2 * self.jobs and (chunk := next(chunks, None)) is not None:
                        pending.append(pool.submit(_run_chunk, task, *chunk))
                    if not pending:
                        return
                    # chunks handed out before the budget ran out all count, as the runs a
                    # single process started before it
                    yield from pending.pop(0).result()
            finally:
                for f in pending:
                    f.cancel()

    def _spark(self, deadline: float | None) -> Iterator[tuple[int, Any]]:
        """The chunks as Spark tasks on ``master``, a wave of two chunks per core of the
        cluster at a time (``defaultParallelism``); ``collect`` returns a wave's results in
        chunk order, so the merge is :meth:`_parallel`'s. The findings are shrunk and written
        here, on the driver."""
        from epochlab.spark import build_session

        spark = build_session(self.master, app_name="epochlab-fuzz")
        try:
            sc = spark.sparkContext
            wave = 2 * max(1, sc.defaultParallelism)
            task = (self.seed, self.generation.label, self.profile, self.backend)
            chunks = self._chunks(deadline)
            while batch := list(itertools.islice(chunks, wave)):
                results = sc.parallelize(batch, len(batch)).map(lambda c: _run_chunk(task, *c)).collect()
                for chunk in results:
                    yield from chunk
        finally:
            spark.stop()

    def _found(self, v: Violation, run: int, seed: int, schedule: Schedule,
               seconds: float, deadline: float | None) -> None:
        finding = Finding(v, run, seed, seconds, original_actions=len(schedule.actions),
                          generation=self.generation)
        self.findings[v.signature] = finding
        self.progress(f"run {run + 1} ({seconds:.1f} s, seed {seed}): {v.invariant}: {v.message}")
        if self.out is None:
            return
        finding.directory = write_finding(self.out, v, schedule, None, seed, self.engine)
        grace = time.monotonic() + 60.0  # shrinking may overrun the budget by at most a minute
        shrunk = shrink(schedule, v.signature, backend=self.backend, max_runs=self.shrink_runs,
                        stop=lambda: time.monotonic() > max(grace, deadline or 0.0))
        finding.minimal_actions = len(shrunk.schedule.actions)
        finding.shrink_runs = shrunk.runs
        write_finding(self.out, v, schedule, shrunk.schedule, seed, self.engine)
        self.progress(f"  shrunk {len(schedule.actions)} -> {len(shrunk.schedule.actions)} actions "
                      f"in {shrunk.runs} runs: {finding.directory / 'schedule.json'}")

    def summary(self, deployment: bool = True) -> dict[str, Any]:
        """The summary; ``deployment=False`` leaves out what depends on where and how fast it
        ran (seconds, runs/s, jobs, master) and gives the schedules' paths relative to
        ``out``: what must be the same on one process, ``jobs`` processes and Spark."""
        out = {"engine": self.engine, "generation": self.generation.label, "seed": self.seed,
               "jobs": self.jobs if self.master is None else None, "master": self.master,
               "build": _build(), "runs": self.total_runs, "seconds": round(self.elapsed, 3),
               "runs_per_second": round(self.total_runs / self.elapsed, 2) if self.elapsed else None,
               "violations": [f.to_dict() for f in self.findings.values()],
               "allowed_by_configuration": dict(sorted(self.allowed.items())),
               "profile": self.profile.to_dict()}
        return out if deployment else self._without_deployment(out)

    def _without_deployment(self, summary: dict[str, Any]) -> dict[str, Any]:
        for key in ("seconds", "runs_per_second", "jobs", "master"):
            summary.pop(key)
        violations = []
        for v in summary["violations"]:
            v = {k: x for k, x in v.items() if k != "seconds_to_first"}
            if v.get("schedule") and self.out is not None:
                v["schedule"] = str(Path(v["schedule"]).relative_to(self.out))
            violations.append(v)
        summary["violations"] = violations
        return summary

    def write_summary(self) -> None:
        assert self.out is not None
        self.out.mkdir(parents=True, exist_ok=True)
        _write(self.out / "summary.json", json.dumps(self.summary(), sort_keys=True, indent=1) + "\n")
