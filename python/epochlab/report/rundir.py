"""One run directory for every run: a scenario run, the replay of a fuzz finding or of any
schedule, a shrink result, a campaign violation.

Layout (files a run has no use for are absent):

- ``README.md``: what happened, in words (who led, what crashed, what was lost or exposed and
  which rule allowed it), the step table, the timeline, and the command that reruns it;
- ``config.json``: generation, Kafka versions, seed, build, cluster / producer / consumer
  settings;
- ``schedule.json``: the replayable schedule (format ``epochlab-schedule``, runs of the fuzzer
  and replays) - ``epochlab replay DIR`` reruns it;
- ``scenario.toml``: the scenario (scenario runs) - ``epochlab scenario run DIR/scenario.toml``;
- ``steps.json``: each executed step with its time and outcome; ``steps.md``: the step table;
- ``history.jsonl``: the clients' history; ``state.json``: the final state; ``events.txt``;
- ``verdict.json``: the verdict, with ``valid`` (Jepsen's ``:valid?``) in every kind of run;
- ``timeline.png``: the timeline picture (with matplotlib).

A directory is written next to its destination and moved into place when complete, so an
interrupted run leaves the previous directory (or none), never a half-written one.
:func:`show` prints any run directory's step table and verdict (``epochlab show DIR``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from epochlab.errors import EpochlabError

__all__ = ["RunDirError", "is_run_dir", "show", "write_atomically", "write_schedule_run"]


class RunDirError(EpochlabError):
    """``path`` is not a run directory, or cannot be written."""


def write_atomically(path: str | Path, fill: Callable[[Path], None]) -> Path:
    """Call ``fill(staging)`` on a fresh directory beside ``path``, then put it in ``path``'s
    place (an existing directory is replaced only once the new one is complete)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise RunDirError(f"{path} exists and is not a directory")
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = parent / f".{path.name}.partial-{os.getpid()}"
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir()
    except OSError as exc:
        raise RunDirError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        fill(staging)
        old = parent / f".{path.name}.replaced-{os.getpid()}"
        if path.exists():
            path.rename(old)
        staging.rename(path)
        if old.exists():
            shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise RunDirError(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return path


def _dump(data: Any) -> str:
    return json.dumps(data, sort_keys=True, indent=2, default=_plain) + "\n"


def _plain(obj: Any) -> Any:
    if isinstance(obj, (tuple, set, frozenset)):
        return list(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    return str(obj)


def _annotated_rows(records: Sequence[Any], marks: dict[int, list[str]]) -> list[Any]:
    """Rows numbered as the verdict numbers steps: ``start``, then the action index (0-based,
    the healing phase last), with the violations found in each step's interval."""
    from epochlab.report.table import step_rows

    rows = step_rows(records)
    out = []
    for i, row in enumerate(rows):
        notes = marks.get(i)
        action = row.action + (" => " + "; ".join(notes) if notes else "")
        out.append(dataclasses.replace(row, step="start" if i == 0 else str(i - 1), action=action))
    return out


def _record_index(step: int | None, n_actions: int) -> int:
    """Record (row) index of a violation's ``step`` (action index; ``n_actions`` = healing)."""
    if step is None:
        return 0
    return min(step, n_actions) + 1


def _story(result: Any, events: Sequence[dict[str, Any]]) -> list[str]:
    """The run in words: leadership, crashes and restarts, partitions, then the verdict."""
    lines: list[str] = []
    interesting = ("election", "crash", "restart", "offline", "network", "shutdown", "role")
    for e in events:
        kind = e.get("kind", "")
        message = e.get("message", "")
        if kind in interesting or message.startswith("controller: elect") or "truncated" in message:
            lines.append(f"- {e.get('time_ms')} ms: {message}")
    if len(lines) > 60:
        lines = lines[:30] + [f"- ... {len(lines) - 60} more events in `events.txt` ..."] + lines[-30:]
    return lines


def _verdict_lines(verdict: Any) -> list[str]:
    out = []
    for v in verdict.protocol_violations:
        out.append(f"- **VIOLATION {v.invariant}** at step {v.step} ({v.time_ms} ms): {v.message}")
    for v in verdict.allowed:
        out.append(f"- allowed {v.invariant} at step {v.step} ({v.time_ms} ms): {v.message} "
                   f"(allowed because: {v.reason})")
    if not out:
        out.append("- every invariant held")
    return out


#: most panels of a timeline picture (one per step); longer runs show the steps that matter
MAX_PANELS = 16


def _timeline_records(records: Sequence[Any], marks: dict[int, list[str]]) -> tuple[list[Any], str]:
    """The records a timeline draws: all of a short run; of a long one the start, the end, the
    steps with violations and the step before each, then the steps that changed leadership,
    ISR or a log end, up to :data:`MAX_PANELS`. Returns (records, note on what was left out)."""
    if len(records) <= MAX_PANELS:
        return list(records), ""

    def shape(rec: Any) -> Any:
        snap = rec.snapshot
        if snap is None:
            return None
        return (snap.leader, snap.leader_epoch, tuple(snap.isr),
                tuple((r.broker, r.alive, r.log_end_offset, r.high_watermark) for r in snap.replicas))

    keep = {0, len(records) - 1}
    for i in sorted(marks):
        if len(keep) >= MAX_PANELS:
            break
        keep.update({i, max(0, i - 1)})
    for i in range(1, len(records)):
        if len(keep) >= MAX_PANELS:
            break
        if shape(records[i]) != shape(records[i - 1]):
            keep.add(i)
    chosen = sorted(keep)[:MAX_PANELS]
    return [records[i] for i in chosen], (f" (the picture shows {len(chosen)} of {len(records)} "
                                          "steps: the start, the end, the violations and the "
                                          "steps that changed the state; the table has them all)")


def write_schedule_run(result: Any, path: str | Path, rerun: str, title: str,
                       notes: Sequence[str] = (), extra_files: dict[str, str] | None = None,
                       picture: bool = True) -> Path:
    """The run directory of a schedule's run (``epochlab.fuzz.executor.execute(...,
    record=True)``): ``rerun`` is the command line that reruns it, ``title`` its heading,
    ``notes`` lines for the README after the rerun command, ``extra_files`` more files."""
    from epochlab.report import picture as pictures
    from epochlab.report.table import table_markdown

    schedule = result.schedule
    verdict = result.verdict
    records = result.records or []
    n_actions = len(schedule.actions)
    marks: dict[int, list[str]] = {}
    for v in verdict.protocol_violations:
        marks.setdefault(_record_index(v.step, n_actions), []).append(f"VIOLATION {v.invariant}")
    rows = _annotated_rows(records, marks) if records else []
    config = {"generation": schedule.generation.label,
              "kafka_versions": schedule.generation.kafka_versions, "seed": schedule.seed,
              "build": _build(), "cluster": schedule.cluster, "producers": schedule.producers,
              "consumers": schedule.consumers, "healing_ms": schedule.healing_ms,
              "origin": schedule.origin}
    valid = verdict.ok
    verdict_data = dict(verdict.to_dict())
    verdict_data["valid"] = valid

    def fill(d: Path) -> None:
        schedule.save(d / "schedule.json")
        (d / "config.json").write_text(_dump(config), encoding="utf-8")
        steps = [dict(r.step.to_dict(), executed_at_ms=r.executed_at_ms) for r in records[1:]]
        (d / "steps.json").write_text(_dump(steps), encoding="utf-8")
        (d / "history.jsonl").write_text(result.history_jsonl, encoding="utf-8")
        (d / "state.json").write_text(_dump(result.final_state), encoding="utf-8")
        (d / "events.txt").write_text("".join(f"{e.get('time_ms')} ms [{e.get('kind')}] "
                                              f"{e.get('message')}\n" for e in result.events),
                                      encoding="utf-8")
        (d / "verdict.json").write_text(_dump(verdict_data), encoding="utf-8")
        table = table_markdown(rows) if rows else "(no steps recorded)\n"
        (d / "steps.md").write_text(table, encoding="utf-8")
        if not records:
            note = "No timeline: no steps were recorded."
        elif not picture:
            note = "No timeline yet (written once the schedule is shrunk)."
        else:
            shown, left_out = _timeline_records(records, marks)
            note = pictures.save_timeline(shown, d / "timeline.png",
                                          title=f"{schedule.generation.label}, seed {schedule.seed}")
            note += left_out
        head = ("**INVALID**: the run violates the protocol" if not valid else
                "**VALID**: no protocol violation")
        readme = [f"# {title}", "", head, "",
                  f"Generation `{schedule.generation.label}` (Kafka {schedule.generation.kafka_versions}), "
                  f"seed {schedule.seed}, {n_actions} actions, build `{_build()}`.", "",
                  "Rerun it (same build, byte-identical history and verdict):", "", "```sh",
                  rerun, "```", ""] + list(notes) + (["", "## What happened", ""] if notes
                                                      else ["## What happened", ""])
        readme += _story(result, result.events) or ["- no elections, crashes or partitions"]
        readme += ["", "## Verdict", ""] + _verdict_lines(verdict)
        readme += ["", "## Steps", "",
                   "Each row is the state at the end of that step's interval (just before the "
                   "next step); a log is `[values | uncommitted] (LEO/HW)`, `eN:` starts leader "
                   "epoch N, `down` marks a crashed broker.", "", table.rstrip("\n"), "",
                   "## Timeline", "", note, ""]
        (d / "README.md").write_text("\n".join(readme), encoding="utf-8")
        for name, text in (extra_files or {}).items():
            (d / name).write_text(text, encoding="utf-8")

    return write_atomically(path, fill)


def _build() -> str:
    import epochlab

    return str(epochlab.BUILD)


def is_run_dir(path: str | Path) -> bool:
    p = Path(path)
    return p.is_dir() and (p / "verdict.json").is_file() and (p / "steps.md").is_file()


def show(path: str | Path) -> str:
    """The step table and verdict of the run directory ``path``, as text."""
    p = Path(path)
    if not is_run_dir(p):
        raise RunDirError(f"{p} is not a run directory (no verdict.json and steps.md)")
    try:
        config = json.loads((p / "config.json").read_text(encoding="utf-8"))
        verdict = json.loads((p / "verdict.json").read_text(encoding="utf-8"))
        steps = (p / "steps.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunDirError(f"{p}: unreadable run directory: {exc}") from None
    if not isinstance(config, dict) or not isinstance(verdict, dict):
        raise RunDirError(f"{p}: config.json and verdict.json must hold JSON objects")
    name = config.get("scenario") or "schedule"
    out = [f"{p}: {name}, generation {config.get('generation')}, seed {config.get('seed')}, "
           f"build {config.get('build')}", "", steps.rstrip("\n"), ""]
    valid = verdict.get("valid", verdict.get("ok", verdict.get("passed")))
    if "checks" in verdict:
        for c in verdict.get("checks") or []:
            out.append(f"{str(c.get('status', '')).upper():<11} {c.get('description')}: {c.get('detail')}")
    for v in verdict.get("protocol_violations") or []:
        out.append(f"VIOLATION {v.get('invariant')} at step {v.get('step')} ({v.get('time_ms')} ms): "
                   f"{v.get('message')}")
    for v in verdict.get("allowed_by_configuration") or []:
        out.append(f"allowed   {v.get('invariant')} at step {v.get('step')}: {v.get('message')} "
                   f"[{v.get('reason')}]")
    out.append("valid" if valid else "INVALID")
    if (p / "schedule.json").is_file():
        out.append(f"rerun: epochlab replay {p}")
    elif (p / "scenario.toml").is_file():
        out.append(f"rerun: epochlab scenario run {p / 'scenario.toml'} -g {config.get('generation')}"
                   f" --seed {config.get('seed')}")
    return "\n".join(out) + "\n"
