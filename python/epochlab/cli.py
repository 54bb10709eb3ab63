"""The ``epochlab`` command.

Exit status, as Jepsen's: 0 valid (every expectation holds, no protocol violation), 1 invalid
(a protocol violation, or a failed expectation), 2 anything else: a usage or input error, a
missing optional dependency (with the ``pip install`` line that adds it), an environment
problem (no Java, an unwritable output path, a closed output pipe), or a bug; reported as one
line on stderr naming the file and field, never a traceback for a user's mistake
(``EPOCHLAB_DEBUG=1`` adds the traceback).

    epochlab scenario list
    epochlab scenario run NAME_OR_FILE [--generation G] [--seed S] [--out DIR] [--json]
    epochlab scenario show NAME
    epochlab generations
    epochlab demo [--out DIR]
    epochlab trace replay FILE [--check NAME ...] [--json] [--all]
    epochlab trace generate OUT --batches N --leader-changes M --replicas R --seed S
    epochlab trace export RUN_DIR [-o OUT]
    epochlab fuzz [--engine random|atheris] [--generation G] [--config FILE] [--seconds N]
                  [--runs N] [--seed S] [--out DIR] [--json] [--until-found]
    epochlab replay SCHEDULE_OR_RUN_DIR [--out DIR] [--json]
    epochlab show RUN_DIR
    epochlab shrink SCHEDULE [--invariant NAME] [--out FILE] [--max-runs N] [--json]
    epochlab campaign [--grid FILE] [--runs N] [--seed S] [--master URL] [--out DIR] [--resume]
    epochlab kafka jars [--version V]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Sequence

from epochlab.errors import ConfigError, EpochlabError, ScenarioError, UsageError

__all__ = ["main"]

DEMO_SCENARIO = "seed-004-kip101-problem-1"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse's own convention)
        raise UsageError(f"{self.prog}: {message}")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="epochlab", description="Model Apache Kafka partition replication.")
    parser.add_argument("--version", action="version", version=f"epochlab {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    scenario = sub.add_parser("scenario", help="list, show and run scenarios")
    ssub = scenario.add_subparsers(dest="scenario_command", required=True, parser_class=_Parser)
    ssub.add_parser("list", help="built-in scenarios: name, seed document, description")
    show = ssub.add_parser("show", help="print a scenario's TOML")
    show.add_argument("name")
    run = ssub.add_parser("run", help="run a scenario and judge its expectations")
    run.add_argument("scenario", metavar="NAME_OR_FILE")
    run.add_argument("--generation", "-g", help="one generation (default: all the scenario lists)")
    run.add_argument("--seed", type=int, help="root seed (default: the scenario's)")
    run.add_argument("--backend", choices=("rust", "python", "reference"), default="rust",
                     help="replica protocol implementation (default: rust; all give the same run)")
    run.add_argument("--out", help="run directory (default: runs/<scenario>-<generation>-seed<seed>)")
    run.add_argument("--json", action="store_true", help="print a machine-readable verdict")
    sub.add_parser("generations", help="protocol generations, oldest first")
    show_run = sub.add_parser("show", help="print the step table and verdict of a run directory")
    show_run.add_argument("run_dir", metavar="RUN_DIR")
    schema = sub.add_parser("schema", help="print the JSON Schema of a file format "
                            "(schedule, fuzz-profile, campaign-grid, scenario)")
    schema.add_argument("format", choices=("schedule", "fuzz-profile", "campaign-grid", "scenario"),
                        help="which file format")
    demo = sub.add_parser("demo", help="seed 004 problem 1 in hw-truncation and the latest generation")
    demo.add_argument("--out", help="parent directory of the two run directories")
    _add_trace_parser(sub)
    from epochlab.fuzz.cli import add_fuzz_commands

    add_fuzz_commands(sub)
    from epochlab.campaigns.cli import add_campaign_command

    add_campaign_command(sub)
    from epochlab.kafka.cli import register as add_kafka_commands

    add_kafka_commands(sub)
    from epochlab.ondisk.cli import add_parser as add_inspect_command

    add_inspect_command(sub)
    return parser


#: optional modules -> the extra that installs them
_EXTRAS = {"pyarrow": "trace", "matplotlib": "plot", "atheris": "fuzz", "pyspark": "spark",
           "pandas": "spark", "jpype": "kafka", "confluent_kafka": "kafka"}


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("epochlab")
    except Exception:  # noqa: BLE001 - not installed as a distribution (source tree)
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        code = _dispatch(args)
        sys.stdout.flush()   # inside the handlers below: a closed pipe is not a traceback
        return code
    except UsageError as exc:
        return _fail(str(exc))
    except (ScenarioError, ConfigError) as exc:
        return _fail(f"epochlab: error: {exc.message}")
    except EpochlabError as exc:
        return _fail(f"epochlab: error: {type(exc).__name__}: {exc.message}")
    except BrokenPipeError:
        # the reader went away (`epochlab ... | head`): stop quietly
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return 2
    except KeyboardInterrupt:
        return _fail("epochlab: interrupted")
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        if top in _EXTRAS:
            return _fail(f"epochlab: error: this command needs {top}, which is not installed: "
                         f'pip install "epochlab[{_EXTRAS[top]}]"')
        return _internal(exc)
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        return _fail(f"epochlab: error:{where}: {exc.strerror or exc}")
    except Exception as exc:  # noqa: BLE001 - a bug, or an environment the code did not foresee
        return _internal(exc)


def _fail(message: str) -> int:
    print(message, file=sys.stderr)
    return 2


def _internal(exc: BaseException) -> int:
    if os.environ.get("EPOCHLAB_DEBUG"):
        traceback.print_exception(exc)
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return _fail(f"epochlab: internal error: {type(exc).__name__}: {first} (this is a bug or an "
                 "environment epochlab does not handle; EPOCHLAB_DEBUG=1 shows the traceback)")


def _add_trace_parser(sub: Any) -> None:
    from epochlab.trace.cli import add_parser

    add_parser(sub, _Parser)


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "trace":
        from epochlab.trace.cli import run as run_trace

        return run_trace(args)
    if args.command == "generations":
        return _generations()
    if args.command == "show":
        from epochlab.report.rundir import RunDirError, show

        try:
            print(show(args.run_dir), end="")
        except RunDirError as exc:
            return _fail(f"epochlab: show: {exc}")
        return 0
    if args.command == "schema":
        from epochlab.schemas import json_schema

        print(json.dumps(json_schema(args.format), indent=1, sort_keys=True))
        return 0
    if args.command == "demo":
        return _demo(args.out)
    if args.command == "campaign":
        from epochlab.campaigns.cli import dispatch_campaign

        return dispatch_campaign(args)
    if args.command == "inspect":
        from epochlab.ondisk.cli import run as run_inspect

        return run_inspect(args)
    if args.command == "kafka":
        return int(args.handler(args))
    if args.command in ("fuzz", "replay", "shrink"):
        from epochlab.fuzz.cli import dispatch_fuzz

        return dispatch_fuzz(args)
    if args.scenario_command == "list":
        return _list()
    if args.scenario_command == "show":
        from epochlab.scenarios import builtin_text, resolve

        path = Path(args.name)
        if path.suffix == ".toml" or path.exists():
            resolve(args.name)  # validates, raises ScenarioError with file/field
            print(path.read_text(encoding="utf-8"), end="")
        else:
            print(builtin_text(args.name), end="")
        return 0
    return _run(args)


def _generations() -> int:
    from epochlab.generations import Generation

    for g in sorted(Generation):
        print(f"{g.label:<16} Kafka {g.kafka_versions}")
    return 0


def _list() -> int:
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


def _run(args: argparse.Namespace) -> int:
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


def _demo(out: str | None) -> int:
    from epochlab.generations import Generation
    from epochlab.report import render_verdict
    from epochlab.scenarios import load_builtin
    from epochlab.scenarios.runner import run_scenario

    scenario = load_builtin(DEMO_SCENARIO)
    labels = [Generation.TRUNCATE_TO_HW.label, max(Generation).label]
    results = []
    for label in labels:
        path = Path(out) / f"{scenario.name}-{label}-seed{scenario.seed}" if out else None
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
