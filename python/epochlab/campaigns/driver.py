"""A whole campaign on the driver: run the batches on Spark, aggregate, shrink one schedule per
distinct violation, write ``summary.json`` and the report.

Artifacts under ``out``::

    campaign.json                     seed, runs, batch size, grid (checked by --resume)
    runs/batch=<k>/                   the result rows (Parquet, sorted by config_id, run_id)
    summary.json                      the aggregates (epochlab.campaigns.aggregate.summarize)
    report.md, report.html, plots/    the report (epochlab.campaigns.report)
    violations/<signature>/           a run directory of the shrunk schedule (README.md with
                                      the replay command, steps.md, ...), original.json
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from epochlab.campaigns.grid import RunConfig
from epochlab.campaigns.spark import CampaignSpec, read_runs, run_batches

__all__ = ["CampaignResult", "run_campaign", "shrink_violations"]

SHRINK_SECONDS = 15.0
SHRINK_RUNS = 200


@dataclass
class CampaignResult:
    out: Path
    summary: dict[str, Any]
    seconds: float
    ran_batches: list[int] = field(default_factory=list)
    skipped_batches: list[int] = field(default_factory=list)
    report: dict[str, Path] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.summary.get("runs") == self.summary.get("expected_runs")


def run_campaign(spark: Any, spec: CampaignSpec, out: str | Path, *, resume: bool = False,
                 progress: bool = True, shrink: bool = True, report: bool = True,
                 stop_after: int | None = None,
                 say: Callable[[str], None] = lambda _line: None) -> CampaignResult:
    """Run (or resume) the campaign ``spec`` into ``out`` and report on it."""
    out = Path(out)
    start = time.monotonic()  # wall clock for the figures only, never inside a run
    batches = run_batches(spark, spec, out, resume=resume, progress=progress, stop_after=stop_after)
    seconds = time.monotonic() - start
    from epochlab.campaigns.aggregate import summarize

    df = read_runs(spark, out)
    summary = summarize(df)
    summary["expected_runs"] = spec.runs
    summary["seconds"] = round(seconds, 3)
    executed = sum(min(k * spec.batch_runs + spec.batch_runs, spec.runs) - k * spec.batch_runs
                   for k in batches.ran)
    summary["runs_executed"] = executed
    summary["runs_per_second"] = round(executed / seconds, 2) if seconds else None
    if summary["runs"] != spec.runs:
        say(f"campaign incomplete: {summary['runs']} of {spec.runs} runs written; "
            "run again with --resume")
    meta = dict(spec.meta())
    meta["build"] = _build()
    if shrink and summary["runs"] == spec.runs:
        shrink_violations(spec, summary, out, say)
    _write_json(out / "summary.json", summary)
    result = CampaignResult(out, summary, seconds, batches.ran, batches.skipped)
    if report:
        from epochlab.campaigns.report import write_report

        result.report = write_report(summary, meta, out)
    return result


def shrink_violations(spec: CampaignSpec, summary: dict[str, Any], out: Path,
                      say: Callable[[str], None] = lambda _line: None) -> None:
    """For each distinct protocol violation: rebuild the first run's schedule, shrink it with
    :func:`epochlab.fuzz.shrink.shrink` (same signature), write ``violations/<signature>/``.
    Adds ``schedule`` (the path) to each entry of ``summary["violations"]``."""
    from epochlab.campaigns.runs import build_schedule
    from epochlab.fuzz.campaign import write_finding
    from epochlab.fuzz.executor import execute
    from epochlab.fuzz.shrink import shrink

    configs = {c.config_id: c for c in spec.grid.configs}
    for entry in summary["violations"]:
        first = entry["first"]
        cfg: RunConfig = configs[first["config_id"]]
        schedule, _ = build_schedule(cfg, first["seed"], spec.grid)
        if entry["signature"].startswith("exception-"):
            path = out / "violations" / entry["signature"]
            path.mkdir(parents=True, exist_ok=True)
            schedule.save(path / "schedule.json")
            entry["schedule"] = str(path / "schedule.json")
            continue
        result = execute(schedule)
        violation = result.verdict.first(entry["signature"])
        if violation is None:
            entry["note"] = "not reproduced by the fuzz executor's per-event checks"
            continue
        from epochlab.checks.catalogue import match

        entry["known_bugs"] = sorted({b.id for g in entry["generations"]
                                      for b in match(g, violation.invariant, result.events)})
        write_finding(out, violation, schedule, None, first["seed"], "campaign")
        deadline = time.monotonic() + SHRINK_SECONDS
        try:
            shrunk = shrink(schedule, entry["signature"], max_runs=SHRINK_RUNS,
                            stop=lambda: time.monotonic() > deadline)
        except ValueError:
            continue
        directory = write_finding(out, violation, schedule, shrunk.schedule,
                                  first["seed"], "campaign")
        entry["schedule"] = str(directory / "schedule.json")
        entry["actions"] = [len(schedule.actions), len(shrunk.schedule.actions)]
        say(f"{entry['signature']}: shrunk {len(schedule.actions)} -> "
            f"{len(shrunk.schedule.actions)} actions: epochlab replay {entry['schedule']}")


def _build() -> str:
    import epochlab

    return str(getattr(epochlab, "BUILD", "unknown"))


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, sort_keys=True, indent=1, default=str) + "\n", encoding="utf-8")
    tmp.replace(path)
