"""Re-running a run directory. Every run is deterministic, so running a directory's schedule or
scenario again on the same build is the run the directory describes; re-running it with an
observer attached shows what the first run did not record.

:func:`export_run_dir` re-runs one with a trace recorder (``epochlab trace export RUN_DIR``,
``docs/trace-format.md``). It lives here, above both kinds of run, rather than in
``epochlab.trace``, which the simulator's runs do not need.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from epochlab.errors import TraceError
from epochlab.fuzz.executor import execute
from epochlab.fuzz.schedule import load_schedule
from epochlab.scenarios import resolve
from epochlab.scenarios.loader import load_file
from epochlab.scenarios.runner import run_scenario
from epochlab.trace.record import export_cluster, recording_traces

__all__ = ["export_run_dir"]


def export_run_dir(run_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None = None,
                   *, backend: str = "rust") -> tuple[Any, Any]:
    """Re-run the run of ``run_dir`` with recording on and return ``(trace table, run
    result)``; every run is deterministic, so it is the run the directory describes. A
    directory with ``schedule.json`` (a replay or a fuzz finding) reruns that schedule; one
    with ``scenario.toml`` reruns that very scenario (not a built-in of the same name); an
    older scenario run directory is resolved from its ``config.json``. Written to ``out`` if
    given; ``result`` has ``label``, ``generation`` and ``seed``."""
    directory = Path(run_dir)
    if (directory / "schedule.json").is_file():
        schedule = load_schedule(directory / "schedule.json")
        with recording_traces() as clusters:
            run = execute(schedule, backend=backend)
        table = export_cluster(clusters[-1], out)
        return table, _Exported(f"schedule {directory / 'schedule.json'}",
                                schedule.generation.label, schedule.seed, run)
    config_path = directory / "config.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
        name, generation, seed = config["scenario"], config["generation"], config["seed"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TraceError(f"{config_path}: not a run directory's config ({exc})", path=str(config_path),
                         row=0, reason=str(exc)) from None
    if (directory / "scenario.toml").is_file():
        scenario = load_file(directory / "scenario.toml")
    else:
        source = config.get("source")
        scenario = resolve(source if source and Path(source).suffix == ".toml"
                           and Path(source).exists() else name)
    with recording_traces() as clusters:
        result = run_scenario(scenario, generation, seed=seed, write=False, backend=backend)
    table = export_cluster(clusters[-1], out)
    return table, _Exported(result.scenario.name, result.generation, result.seed, result)


@dataclass(frozen=True)
class _Exported:
    """What ``export_run_dir`` re-ran: a label, its generation and seed, and the run itself."""

    label: str
    generation: str
    seed: int
    run: Any
