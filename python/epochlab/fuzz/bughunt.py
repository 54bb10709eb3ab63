"""The bug hunt: runs and seconds to the first finding that matches each catalogued bug
(``epochlab.checks.catalogue``), per engine and campaign seed.

A *hunt* is one campaign (engine, generation, campaign seed) that runs until every catalogued
bug of its generation has been matched by a finding, or a budget (runs, seconds) is spent. A
finding matches a bug by signature (:func:`epochlab.checks.catalogue.match`: the finding's
generation and invariant), so one finding can match several bugs, and a bug's figure is the
first run whose protocol violations include an invariant the bug breaks. Since neither engine's
search depends on what it hunts for, one campaign per (engine, generation, seed) gives every
bug of that generation the same figures as a campaign per bug would, at a fraction of the cost.

* ``random``: the loop of :class:`~epochlab.fuzz.campaign.Campaign` (run *i* is
  ``generate_schedule(run_seed(seed, i), ...)``), in-process, without shrinking or writing, so
  its runs are the campaign's run for run (a test checks it);
* ``atheris``: the harness in a subprocess per campaign, as ``epochlab fuzz --engine atheris``
  starts it (``BOOTSTRAP``, corpus seeded with this seed's random schedules), without
  ``--stop-on-violation``; stopped (SIGTERM to that child) when every bug is matched. Its seconds
  include starting the instrumented interpreter and writing each finding's run directory.

Every distinct finding on the way is kept (invariant, run, seconds, matched bugs), including
those that match another bug or none: a finding of an old generation that matches no
catalogued bug is either a model defect or a bug the catalogue lacks.

Results are a JSON document (:func:`new_results`, ``benches/results/bughunt.json``) from which
:func:`markdown` renders the table between ``<!-- bughunt -->`` and ``<!-- /bughunt -->`` in
``docs/bugs.md``::

    python benches/bench_bughunt.py --seeds 1 2 3 4 5 --runs 3000 --seconds 240   # measure
    python -m epochlab.fuzz.bughunt                                               # re-render

The wall clock (``time.monotonic``) is used for the budget and the figures only.
"""

from __future__ import annotations

import argparse
import os
import platform
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from epochlab.checks.catalogue import BUGS, KnownBug, match
from epochlab.fuzz.generator import FuzzProfile
from epochlab.generations import Generation

__all__ = ["Budget", "CampaignRecord", "FindingRecord", "doc_text", "generations_of", "hunt", "hunt_atheris",
           "hunt_random", "markdown", "new_results", "put_campaign", "update_doc"]

ENGINES = ("random", "guided", "atheris")
FORMAT = "epochlab-bughunt"
BEGIN, END = "<!-- bughunt -->\n", "<!-- /bughunt -->"
#: Runs between two points of a random hunt's new-states-over-runs curve (the guided engine
#: records one point per round).
CURVE_EVERY = 40


def markers(section: str | None = None) -> tuple[str, str]:
    """The begin and end markers of the bug-hunt section ``section`` (``None``: the main one)."""
    if section is None:
        return BEGIN, END
    return f"<!-- bughunt:{section} -->\n", f"<!-- /bughunt:{section} -->"
ROOT = Path(__file__).resolve().parents[3]
DEFAULT_JSON = ROOT / "benches" / "results" / "bughunt.json"
DEFAULT_DOC = ROOT / "docs" / "bugs.md"
#: The section of ``docs/bugs.md`` measuring the bugs that need an off-by-default step, with a
#: profile that enables them (results in ``benches/results/bughunt-steps.json``).
STEPS_SECTION = "steps"


@dataclass(frozen=True)
class Budget:
    """Per campaign: stop after ``runs`` runs or ``seconds`` of wall time, the first reached."""

    runs: int = 3000
    seconds: float = 240.0


@dataclass
class FindingRecord:
    """The first occurrence of one invariant's protocol violation in a campaign.

    ``run`` is 1-based (runs to first); ``run_seed`` is the random engine's per-run seed
    (``epochlab fuzz`` prints it; ``None`` for atheris, whose run directory holds the schedule)."""

    invariant: str
    run: int
    seconds: float
    known_bugs: list[str]
    run_seed: int | None = None
    message: str = ""


@dataclass
class CampaignRecord:
    """One hunt. ``stopped`` is ``"all-matched"``, ``"runs"``, ``"seconds"`` or ``"error"``."""

    engine: str
    generation: str
    seed: int
    runs: int = 0
    seconds: float = 0.0
    stopped: str = ""
    findings: list[FindingRecord] = field(default_factory=list)
    error: str | None = None
    #: (runs, distinct protocol-state features) along the hunt (random and guided engines:
    #: ``epochlab.fuzz.coverage``); the new-states-over-runs curve
    curve: list[list[int]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CampaignRecord:
        found = [FindingRecord(**f) for f in data.get("findings", [])]
        return cls(**{**data, "findings": found})

    def first_match(self, bug: KnownBug) -> FindingRecord | None:
        """The earliest finding whose matches include ``bug`` (``None``: not within budget)."""
        hits = [f for f in self.findings if bug.id in f.known_bugs]
        return min(hits, key=lambda f: (f.run, f.seconds)) if hits else None


def generations_of(bugs: tuple[KnownBug, ...] = BUGS) -> list[Generation]:
    """Every generation some bug of ``bugs`` lists, oldest first (a bug that needs cluster
    settings, :attr:`KnownBug.settings`, only with a profile that sets them: not by default)."""
    return sorted({Generation.parse(g) for b in bugs if not b.settings for g in b.generations})


def _targets(generation: Generation, bugs: tuple[KnownBug, ...]) -> set[str]:
    return {b.id for b in bugs if generation.label in b.generations}


def _note(record: CampaignRecord, invariant: str, run: int, seconds: float,
          run_seed: int | None, message: str, events: list[Any] | None = None) -> set[str]:
    """Add the first finding of ``invariant`` matching these bugs (if new); the ids of the
    bugs it matches (witnesses checked when the run's ``events`` are given: the random
    engine's; atheris's findings are matched by signature)."""
    known = [b.id for b in match(record.generation, invariant, events)]
    if any(f.invariant == invariant and f.known_bugs == known for f in record.findings):
        return set()
    record.findings.append(FindingRecord(invariant, run, round(seconds, 3), known, run_seed,
                                         message[:300]))
    return set(known)


def hunt_random(generation: Generation | str, seed: int, budget: Budget,
                profile: Any = None, bugs: tuple[KnownBug, ...] = BUGS,
                backend: str | None = None) -> CampaignRecord:
    """The random engine's campaign ``seed`` in ``generation`` until every bug of ``bugs``
    listing that generation is matched, or ``budget`` is spent. Run *i* is exactly run *i* of
    ``Campaign(generation, profile, seed=seed)``; nothing is shrunk or written."""
    from epochlab.fuzz.campaign import run_seed
    from epochlab.fuzz.executor import execute, gc_for_many_runs
    from epochlab.fuzz.generator import FuzzProfile, generate_schedule

    generation = Generation.parse(generation)
    profile = profile or FuzzProfile()
    record = CampaignRecord("random", generation.label, seed)
    wanted, matched = _targets(generation, bugs), set()
    seen: set[int] = set()
    start = time.monotonic()
    record.stopped = "runs"
    with gc_for_many_runs():
        while record.runs < budget.runs:
            if time.monotonic() - start >= budget.seconds:
                record.stopped = "seconds"
                break
            this_seed = run_seed(seed, record.runs)
            result = execute(generate_schedule(this_seed, generation, profile), backend=backend,
                             coverage=True)
            record.runs += 1
            seen.update(result.features or ())
            if record.runs % CURVE_EVERY == 0:
                record.curve.append([record.runs, len(seen)])
            for v in result.verdict.protocol_violations:
                matched |= _note(record, v.invariant, record.runs, time.monotonic() - start,
                                 this_seed, v.message, result.events)
            if wanted <= matched:
                record.stopped = "all-matched"
                break
    record.seconds = round(time.monotonic() - start, 3)
    return record


def hunt_guided(generation: Generation | str, seed: int, budget: Budget,
                profile: Any = None, bugs: tuple[KnownBug, ...] = BUGS,
                backend: str | None = None, jobs: int = 1) -> CampaignRecord:
    """The guided engine's search ``seed`` (:class:`~epochlab.fuzz.guided.GuidedSearch`, the
    runs of ``epochlab fuzz --engine guided``) until every bug of ``bugs`` listing
    ``generation`` is matched, or ``budget`` is spent; nothing is shrunk or written."""
    from epochlab.fuzz.generator import FuzzProfile
    from epochlab.fuzz.guided import GuidedSearch

    generation = Generation.parse(generation)
    record = CampaignRecord("guided", generation.label, seed)
    wanted, matched = _targets(generation, bugs), set()
    start = time.monotonic()

    def noted(run: int, v: Any, data: dict[str, Any], events: Any) -> None:
        matched.update(_note(record, v.invariant, run + 1, time.monotonic() - start,
                             data.get("seed"), v.message, events or []))

    search = GuidedSearch(generation, profile or FuzzProfile(), seed=seed, seconds=budget.seconds,
                          runs=budget.runs, backend=backend, jobs=jobs, on_violation=noted,
                          should_stop=lambda: wanted <= matched)
    search.run()
    record.runs = search.total_runs
    record.curve = [[r, n] for r, n in search.curve]
    record.stopped = "all-matched" if wanted <= matched else \
        "runs" if record.runs >= budget.runs else "seconds"
    record.seconds = round(time.monotonic() - start, 3)
    return record


def _atheris_command(generation: Generation, seed: int, budget: Budget, out: Path,
                     config: str | None) -> list[str]:
    """The harness command of ``epochlab fuzz --engine atheris`` (``fuzz/cli.py``), without
    ``--stop-on-violation``."""
    from epochlab.fuzz.harness import BOOTSTRAP

    cmd = [sys.executable, "-c", BOOTSTRAP, "--generation", generation.label, "--out", str(out),
           f"-seed={seed or 1}", f"-max_total_time={max(1, int(budget.seconds))}",
           f"-runs={budget.runs}", f"--corpus-seed={seed}"]
    return cmd + (["--config", config] if config else [])


def _parse_finding(line: str) -> tuple[int, str, str] | None:
    """``epochlab: run N: INVARIANT: message -> dir`` (the harness's line): (N, invariant, message)."""
    if not line.startswith("epochlab: run ") or " -> " not in line:
        return None
    number, _, rest = line[len("epochlab: run "):].partition(": ")
    invariant, _, message = rest.rsplit(" -> ", 1)[0].partition(": ")
    return (int(number), invariant, message) if number.isdigit() else None


def _libfuzzer_runs(line: str) -> int | None:
    """The execution count of a libFuzzer status line (``#123 NEW cov: ...``)."""
    if line.startswith("#") and " cov:" in line:
        head = line[1:].split(maxsplit=1)[0]
        return int(head) if head.isdigit() else None
    return None


def _pump(stream: Any, lines: queue.Queue[str | None]) -> None:
    """Copy the harness's stderr into ``lines`` (``None`` at its end): a reader thread, so the
    hunt can stop at its wall-clock budget while the harness is quiet."""
    for line in stream:
        lines.put(line)
    lines.put(None)


def hunt_atheris(generation: Generation | str, seed: int, budget: Budget,
                 config: str | None = None, bugs: tuple[KnownBug, ...] = BUGS) -> CampaignRecord:
    """The atheris engine's campaign ``seed`` (one subprocess, a temporary output directory)
    until every bug of ``bugs`` listing ``generation`` is matched or ``budget`` is spent (wall
    seconds from starting the subprocess; runs counted by the harness's finding lines and
    libFuzzer's status lines, since libFuzzer's own ``-runs`` does not count the seed inputs).
    ``runs`` is the harness's count (the last finding's, or libFuzzer's last status line)."""
    generation = Generation.parse(generation)
    record = CampaignRecord("atheris", generation.label, seed)
    wanted, matched = _targets(generation, bugs), set()
    lines: queue.Queue[str | None] = queue.Queue()
    tail: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bughunt-") as work:
        start = time.monotonic()
        proc = subprocess.Popen(_atheris_command(generation, seed, budget, Path(work), config),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        stream = proc.stderr
        threading.Thread(target=_pump, args=(stream, lines), daemon=True).start()
        record.stopped = ""
        try:
            while True:
                left = budget.seconds - (time.monotonic() - start)
                if left <= 0:
                    record.stopped = "seconds"
                    break
                try:
                    line = lines.get(timeout=min(left, 5.0))
                except queue.Empty:
                    continue
                if line is None:
                    break
                tail = (tail + [line])[-30:]
                count = _libfuzzer_runs(line)
                if count is not None:
                    record.runs = max(record.runs, min(count, budget.runs))
                found = _parse_finding(line)
                if found is not None and found[0] > budget.runs:
                    count = found[0]   # past the run budget: libFuzzer's -runs excludes the seeds
                elif found is not None:
                    run, invariant, message = found
                    record.runs = max(record.runs, run)
                    matched |= _note(record, invariant, run, time.monotonic() - start, None, message)
                    if wanted <= matched:
                        record.stopped = "all-matched"
                        break
                if count is not None and count >= budget.runs:
                    record.runs, record.stopped = budget.runs, "runs"
                    break
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
            code = proc.wait()
        record.seconds = round(time.monotonic() - start, 3)
    if not record.stopped:
        # libFuzzer ended on its own: its -runs or -max_total_time, or a harness crash
        if code == 0:
            record.stopped = "runs" if record.runs >= budget.runs else "seconds"
        else:
            record.stopped, record.error = "error", f"exit {code}: " + "".join(tail)[-1500:]
    return record


def hunt(engine: str, generation: Generation | str, seed: int, budget: Budget,
         config: str | None = None, bugs: tuple[KnownBug, ...] = BUGS) -> CampaignRecord:
    """One hunt with ``engine`` (``"random"`` or ``"atheris"``); ``config`` a fuzz profile file."""
    if engine == "random":
        from epochlab.fuzz.generator import load_profile

        return hunt_random(generation, seed, budget, load_profile(config), bugs)
    if engine == "guided":
        from epochlab.fuzz.generator import load_profile

        return hunt_guided(generation, seed, budget, load_profile(config), bugs)
    if engine == "atheris":
        return hunt_atheris(generation, seed, budget, config, bugs)
    raise ValueError(f"unknown engine {engine!r}: expected one of {', '.join(ENGINES)}")


# -- the results document --------------------------------------------------------------------

def machine() -> dict[str, Any]:
    """What the figures were measured on (load average at the time of the call)."""
    info: dict[str, Any] = {"platform": platform.platform(), "python": platform.python_version(),
                            "cpus": os.cpu_count()}
    try:
        info["load_average"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - not on every platform
        pass
    try:
        import epochlab

        info["build"] = str(epochlab.BUILD)
    except Exception:  # pragma: no cover - the core failed to import
        info["build"] = "unknown"
    return info


def new_results(seeds: list[int], engines: list[str], generations: list[str], budget: Budget,
                profile: str | None) -> dict[str, Any]:
    """An empty results document for that plan (``campaigns`` filled by :func:`put_campaign`)."""
    return {"format": FORMAT, "version": 1, "plan": {
        "seeds": seeds, "engines": engines, "generations": generations,
        "budget": {"runs": budget.runs, "seconds": budget.seconds},
        "profile": profile or "default (FuzzProfile())",
        # the catalogue the campaigns hunted for: a bug added later has no measurement
        "bugs": [b.id for b in BUGS]}, "sessions": [], "campaigns": []}


def put_campaign(results: dict[str, Any], record: CampaignRecord) -> None:
    """Add ``record``, replacing an earlier one of the same engine, generation and seed."""
    key = (record.engine, record.generation, record.seed)
    results["campaigns"] = [c for c in results["campaigns"]
                            if (c["engine"], c["generation"], c["seed"]) != key]
    results["campaigns"].append(record.to_dict())
    order = {e: i for i, e in enumerate(ENGINES)}
    results["campaigns"].sort(key=lambda c: (order.get(c["engine"], 9),
                                             int(Generation.parse(c["generation"])), c["seed"]))


# -- rendering ---------------------------------------------------------------------------------

def _censored(values: Sequence[float | None], pick: str) -> float | None:
    """Median or max over seeds, a seed without a match counting as larger than any budget:
    ``None`` when that censored value is the answer (not within budget)."""
    ordered = sorted(values, key=lambda v: float("inf") if v is None else v)
    if not ordered:
        return None
    if pick == "max":
        return ordered[-1]
    middle = [ordered[(len(ordered) - 1) // 2], ordered[len(ordered) // 2]]
    if any(v is None for v in middle):
        return None
    return statistics.mean(v for v in middle if v is not None)


def _number(value: float | None, seconds: bool = False) -> str:
    if value is None:
        return "not within budget"
    return f"{value:.1f}" if seconds else f"{value:g}"


def _campaigns(results: dict[str, Any]) -> dict[tuple[str, str, int], CampaignRecord]:
    return {(c["engine"], c["generation"], c["seed"]): CampaignRecord.from_dict(c)
            for c in results["campaigns"]}


def _bug_row(bug: KnownBug, generation: str, engine: str, seeds: list[int],
             campaigns: dict[tuple[str, str, int], CampaignRecord]) -> str:
    measured = [campaigns[(engine, generation, s)] for s in seeds if (engine, generation, s) in campaigns]
    if not measured:
        return f"| {bug.id} | {generation} | {engine} | not measured | | | | | |"
    firsts = [c.first_match(bug) for c in measured]
    runs = [f.run if f else None for f in firsts]
    secs = [f.seconds if f else None for f in firsts]
    per_runs = ", ".join(str(f.run) if f else f">{c.runs}" for f, c in zip(firsts, measured))
    per_secs = ", ".join(f"{f.seconds:.1f}" if f else f">{c.seconds:.0f}" for f, c in zip(firsts, measured))
    names = sorted({f.invariant for f in firsts if f})
    seeds_done = ", ".join(str(c.seed) for c in measured)
    return (f"| {bug.id} | {generation} | {engine} | {seeds_done} | {per_runs} | "
            f"{_number(_censored(runs, 'median'))} / {_number(_censored(runs, 'max'))} | {per_secs} | "
            f"{_number(_censored(secs, 'median'), True)} / {_number(_censored(secs, 'max'), True)} | "
            f"{', '.join(names) or '-'} |")


def _findings_rows(results: dict[str, Any]) -> list[str]:
    """One row per (generation, engine, invariant) found on the way, with its seeds and runs."""
    seen: dict[tuple[str, str, str], list[tuple[int, FindingRecord]]] = {}
    for c in _campaigns(results).values():
        for f in c.findings:
            seen.setdefault((c.generation, c.engine, f.invariant), []).append((c.seed, f))
    rows = []
    for (generation, engine, invariant), hits in sorted(
            seen.items(), key=lambda kv: (int(Generation.parse(kv[0][0])), kv[0][1], kv[0][2])):
        where = ", ".join(f"{s} (run {f.run}" + (f", run seed {f.run_seed})" if f.run_seed is not None
                                                  else ")") for s, f in sorted(hits, key=lambda h: h[0]))
        known = hits[0][1].known_bugs
        rows.append(f"| {generation} | {engine} | {invariant} | {where} | "
                    f"{', '.join(known) if known else '**none**'} |")
    return rows


def _missing(results: dict[str, Any]) -> list[str]:
    plan, campaigns = results["plan"], _campaigns(results)
    missing = []
    for engine in plan["engines"]:
        for generation in plan["generations"]:
            seeds = [s for s in plan["seeds"] if (engine, generation, s) not in campaigns]
            if seeds:
                missing.append(f"{engine} in {generation}, seeds {', '.join(map(str, seeds))}")
    errors = [f"{c.engine} in {c.generation}, seed {c.seed}: {c.error.splitlines()[0]}"
              for c in campaigns.values() if c.error]
    return missing + [f"failed: {e}" for e in errors]


def markdown(results: dict[str, Any], bugs: tuple[KnownBug, ...] = BUGS) -> str:
    """The ``<!-- bughunt -->`` section of ``docs/bugs.md`` for a results document."""
    plan = results["plan"]
    budget = plan["budget"]
    campaigns = _campaigns(results)
    lines = [f"Budget per campaign: {budget['runs']:,} runs or {budget['seconds']:g} s, the first "
             f"reached; campaign seeds {', '.join(map(str, plan['seeds']))}; fuzz profile: "
             f"{plan['profile']}. The random engine's runs are deterministic per seed"
             + (", the guided engine's too (a function of seed, profile and budget)"
                if "guided" in plan["engines"] else "")
             + ", atheris's "
             "follow libFuzzer's seeded search (its first 64 are the random engine's); seconds depend "
             "on the machine's load. `>N`: no match in the N runs (or N seconds) the budget allowed; a "
             "median or max over seeds counts such a seed as larger than any budget.", ""]
    for s in results["sessions"]:
        m = s["machine"]
        lines.append(f"* {s['date']}, build {m.get('build')}, {m.get('platform')}, {m.get('cpus')} "
                     f"cpus, load average {m.get('load_average')} at start; wall time "
                     f"{s.get('wall_seconds', '?')} s: `{s['command']}`")
    lines += ["", "| bug | generation | engine | seeds | runs to first match per seed | median / max "
              "runs | seconds per seed | median / max s | matching invariant |",
              "|---|---|---|---|---|---|---|---|---|"]
    default_profile = str(plan.get("profile", "")).startswith("default")
    off = {name for name, weight in FuzzProfile().fault_classes.items() if weight <= 0}
    unhunted = [b for b in bugs if default_profile and (set(b.needs) & off or b.settings)]
    hunted_ids = plan.get("bugs")
    later = [b for b in bugs if hunted_ids is not None and b.id not in hunted_ids]
    for bug in bugs:
        if bug in later:
            continue
        if bug in unhunted:
            continue
        for generation in bug.generations:
            if generation not in plan["generations"]:
                continue
            for engine in plan["engines"]:
                lines.append(_bug_row(bug, generation, engine, plan["seeds"], campaigns))
    lines += ["", "Every distinct finding on the way (first run per seed; the bugs its signature "
              "matches, **none** when it matches no catalogued bug):", "",
              "| generation | engine | invariant | seeds (first run) | matches |", "|---|---|---|---|---|"]
    lines += _findings_rows(results)
    missing = _missing(results)
    missing += [f"{b.id} (needs the {', '.join(b.needs)} fault class, off in the default profile)"
                for b in unhunted if b not in later and b.needs]
    missing += [f"{b.id} (needs the setting "
                f"{', '.join(f'{k} = {v}' for k, v in b.settings)}, not in the default profile)"
                for b in unhunted if b not in later and b.settings and not b.needs]
    missing += [f"{b.id} (catalogued after these campaigns ran)" for b in later]
    done = "; ".join(missing) if missing else "nothing (the whole plan ran)"
    lines += ["", f"Not measured: {done}."]
    return "\n".join(lines) + "\n"


def plot_curves(results: dict[str, Any], path: Path, generation: str | None = None) -> Path:
    """The new-states-over-runs curves of ``results`` (one line per engine and seed, for
    ``generation`` or the first generation with curves) as a PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = [r for r in _campaigns(results).values() if r.curve]
    if generation is None and records:
        generation = records[0].generation
    records = [r for r in records if r.generation == generation]
    fig, ax = plt.subplots(figsize=(7, 4))
    colours = {"random": "tab:blue", "guided": "tab:red", "atheris": "tab:green"}
    for r in sorted(records, key=lambda r: (r.engine, r.seed)):
        xs, ys = zip(*r.curve)
        ax.plot(xs, ys, color=colours.get(r.engine, "black"), alpha=0.7, linewidth=1,
                label=r.engine if r.seed == min(x.seed for x in records if x.engine == r.engine) else None)
    ax.set_xlabel("runs")
    ax.set_ylabel("distinct protocol-state features")
    ax.set_title(f"New protocol states over runs, {generation} (one line per seed)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def doc_text(doc: Path, section: str | None = None) -> str:
    """The text of ``doc``, checked to hold the ``bughunt`` markers of ``section``: a
    ``ValueError`` naming the file when it cannot be read or lacks them (a campaign checks its
    document before it starts, so hours of runs never end in a document it cannot write)."""
    begin, end = markers(section)
    try:
        text = doc.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{doc}: cannot be read ({getattr(e, 'strerror', None) or e})") from None
    if begin not in text or end not in text:
        raise ValueError(f"{doc}: no {begin.strip()} ... {end} markers")
    return text


def update_doc(results: dict[str, Any], doc: Path = DEFAULT_DOC, section: str | None = None) -> bool:
    """Replace the text between the ``bughunt`` markers of ``doc`` (of ``section``, see
    :func:`markers`); ``True`` if it changed."""
    begin, end = markers(section)
    text = doc_text(doc, section)
    head, rest = text.split(begin, 1)
    new = head + begin + markdown(results) + end + rest.split(end, 1)[1]
    if new != text:
        doc.write_text(new, encoding="utf-8")
    return new != text


def main(argv: list[str] | None = None) -> int:
    """``python -m epochlab.fuzz.bughunt [--json FILE] [--doc FILE] [--section NAME] [--print]``:
    re-render (``--section steps`` with ``--json benches/results/bughunt-steps.json``)."""
    import json

    parser = argparse.ArgumentParser(prog="python -m epochlab.fuzz.bughunt",
                                     description="render the bug-hunt table into docs/bugs.md")
    parser.add_argument("--json", default=str(DEFAULT_JSON), help="results (default %(default)s)")
    parser.add_argument("--doc", default=str(DEFAULT_DOC), help="document (default %(default)s)")
    parser.add_argument("--section", default=None,
                        help=f"a named section (<!-- bughunt:NAME -->), e.g. {STEPS_SECTION}")
    parser.add_argument("--print", action="store_true", help="print the section, change nothing")
    args = parser.parse_args(argv)
    results = json.loads(Path(args.json).read_text(encoding="utf-8"))
    if args.print:
        print(markdown(results), end="")
        return 0
    changed = update_doc(results, Path(args.doc), args.section)
    print(f"{args.doc}: {'updated' if changed else 'already up to date'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
