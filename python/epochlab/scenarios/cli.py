"""The commands of model runs: ``epochlab scenario ...``, and beside it the small commands
around a run of the model, in the order ``epochlab --help`` lists them: ``generations`` (the
labels ``--generation`` takes), ``show`` (any run directory's step table and verdict),
``schema`` (the JSON Schema of a file people write) and ``demo``.

    epochlab scenario list
    epochlab scenario run NAME_OR_FILE [--generation G] [--seed S] [--out DIR] [--json]
    epochlab scenario show NAME
    epochlab generations
    epochlab show RUN_DIR
    epochlab schema FORMAT
    epochlab demo [--out DIR]

Exit status: 0 every expectation holds, 1 one fails, 2 a bad scenario or option (one line
naming the file and field).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["DEMO_SCENARIO", "register"]

DEMO_SCENARIO = "seed-004-kip101-problem-1"


def register(sub: Any) -> None:
    """Add ``scenario``, ``generations``, ``show``, ``schema`` and ``demo`` to ``sub``."""
    scenario = sub.add_parser("scenario", help="list, show and run scenarios")
    ssub = scenario.add_subparsers(dest="scenario_command", required=True, parser_class=type(scenario))
    ssub.add_parser("list", help="built-in scenarios: name, seed document, description").set_defaults(handler=_list)
    show = ssub.add_parser("show", help="print a scenario's TOML")
    show.add_argument("name")
    show.set_defaults(handler=_show)
    run = ssub.add_parser("run", help="run a scenario and judge its expectations")
    run.add_argument("scenario", metavar="NAME_OR_FILE")
    run.add_argument("--generation", "-g", help="one generation (default: all the scenario lists)")
    run.add_argument("--seed", type=int, help="root seed (default: the scenario's)")
    run.add_argument("--backend", choices=("rust", "reference"), default="rust",
                     help="replica protocol implementation (default: rust; all give the same run)")
    run.add_argument("--out", help="run directory (default: runs/<scenario>-<generation>-seed<seed>)")
    run.add_argument("--json", action="store_true", help="print a machine-readable verdict")
    run.set_defaults(handler=_run)
    sub.add_parser("generations", help="protocol generations, oldest first").set_defaults(handler=_generations)
    show_run = sub.add_parser("show", help="print the step table and verdict of a run directory")
    show_run.add_argument("run_dir", metavar="RUN_DIR")
    show_run.set_defaults(handler=_show_run)
    schema = sub.add_parser("schema", help="print the JSON Schema of a file format "
                            "(schedule, fuzz-profile, campaign-grid, scenario)")
    schema.add_argument("format", choices=("schedule", "fuzz-profile", "campaign-grid", "scenario"),
                        help="which file format")
    schema.set_defaults(handler=_schema)
    demo = sub.add_parser("demo", help="seed 004 problem 1 in hw-truncation and the latest generation")
    demo.add_argument("--out", help="parent directory of the two run directories")
    demo.set_defaults(handler=_demo)


def _list(args: argparse.Namespace) -> int:
    from epochlab.scenarios import builtin_names, load_builtin

    scenarios = [load_builtin(n) for n in builtin_names()]
    width = max((len(s.name) for s in scenarios), default=0)
    for s in scenarios:
        source = Path(s.source).name if s.source else "-"
        line = _one_line(s.description)
        print(f"{s.name:<{width}}  {source:<26}  {line}")
    return 0


def _one_line(description: str, limit: int = 140) -> str:
    """The first sentence of a description, on one line, at most ``limit`` characters."""
    sentence = " ".join(description.split()).split(". ")[0].rstrip(".")
    return sentence if len(sentence) <= limit else sentence[:limit - 3].rstrip() + "..."


def _show(args: argparse.Namespace) -> int:
    from epochlab.scenarios import builtin_text, resolve

    path = Path(args.name)
    if path.suffix == ".toml" or path.exists():
        resolve(args.name)  # validates, raises ScenarioError with file/field
        print(path.read_text(encoding="utf-8"), end="")
    else:
        print(builtin_text(args.name), end="")
    return 0


def _run(args: argparse.Namespace) -> int:
    from epochlab.errors import ConfigError, UsageError
    from epochlab.generations import Generation
    from epochlab.scenarios import resolve

    scenario = resolve(args.scenario)
    if args.generation is not None:
        try:
            labels = [Generation.parse(args.generation).label]
        except ConfigError:
            raise UsageError(f"epochlab: --generation: expected one of "
                             + ", ".join(g.label for g in sorted(Generation))
                             + f", got {args.generation!r}") from None
    else:
        labels = list(scenario.generations)
    results = []
    for label in labels:
        out = _out_dir(args.out, scenario.name, label, args.seed if args.seed is not None
                       else scenario.seed, len(labels))
        results.append(_run_one(scenario, label, args.seed, out, quiet=args.json,
                                backend=args.backend))
    if args.json:
        print(json.dumps({"scenario": scenario.name, "passed": all(r.passed for r in results),
                          "runs": [_verdict_json(r) for r in results]}, sort_keys=True, indent=2))
    return 0 if all(r.passed for r in results) else 1


def _out_dir(out: str | None, name: str, label: str, seed: int, count: int) -> Path | None:
    if out is None:
        return None
    return Path(out) if count == 1 else Path(out) / f"{name}-{label}-seed{seed}"


def _run_one(scenario: Any, label: str, seed: int | None, out: Path | None, quiet: bool,
             backend: str = "rust") -> Any:
    from epochlab.report import render_terminal, render_verdict, step_rows
    from epochlab.scenarios.runner import run_scenario

    result = run_scenario(scenario, label, seed=seed, out_dir=out, backend=backend)
    if not quiet:
        render_terminal(step_rows(result.records),
                        title=f"{scenario.name} - {label} (seed {result.seed})")
        print(render_verdict(result), end="")
        print(f"run directory: {result.run_dir}\n")
    return result


def _verdict_json(result: Any) -> dict[str, Any]:
    data = result.verdict()
    data["run_dir"] = str(result.run_dir) if result.run_dir is not None else None
    return data


def _generations(args: argparse.Namespace) -> int:
    from epochlab.generations import Generation

    for g in sorted(Generation):
        print(f"{g.label:<16} Kafka {g.kafka_versions}")
    return 0


def _show_run(args: argparse.Namespace) -> int:
    from epochlab.report.rundir import RunDirError, show

    try:
        print(show(args.run_dir), end="")
    except RunDirError as exc:
        print(f"epochlab: show: {exc}", file=sys.stderr)
        return 2
    return 0


def _schema(args: argparse.Namespace) -> int:
    from epochlab.schemas import json_schema

    print(json.dumps(json_schema(args.format), indent=1, sort_keys=True))
    return 0


def _demo(args: argparse.Namespace) -> int:
    from epochlab.generations import Generation
    from epochlab.report import render_verdict
    from epochlab.scenarios import load_builtin
    from epochlab.scenarios.runner import run_scenario

    scenario = load_builtin(DEMO_SCENARIO)
    labels = [Generation.TRUNCATE_TO_HW.label, max(Generation).label]
    results = []
    for label in labels:
        path = Path(args.out) / f"{scenario.name}-{label}-seed{scenario.seed}" if args.out else None
        results.append(run_scenario(scenario, label, out_dir=path))
    print(f"{scenario.name}: {_one_line(scenario.description)}\n")
    for result in results:
        print(render_verdict(result))
    old, new = results
    print(_demo_summary(old, new))
    return 0 if all(r.passed for r in results) else 1


def _demo_summary(old: Any, new: Any) -> str:
    def survivors(r: Any) -> str:
        rep = r.final.leader_replica()
        values = rep.values() if rep is not None else []
        return "[" + " ".join(f"m{v}" for v in values) + "]"

    return (f"side by side: final leader log {survivors(old)} in {old.generation} vs "
            f"{survivors(new)} in {new.generation}\n"
            f"run directories: {old.run_dir} and {new.run_dir}")
