"""The ``fuzz``, ``replay`` and ``shrink`` commands of ``epochlab`` (registered by ``epochlab.cli``).

* ``fuzz``: search for violations (random engine in-process, :class:`epochlab.fuzz.campaign.Campaign`,
  or atheris in a subprocess, :func:`epochlab.fuzz.harness.run_atheris`), shrink each distinct
  one, print a summary; exit 1 if a protocol violation was found.
* ``replay SCHEDULE``: run a saved schedule; the same build gives byte-identical history and
  verdict; exit 1 if it violates an invariant.
* ``shrink SCHEDULE``: write the minimal schedule that violates the same invariant.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add ``fuzz``, ``replay`` and ``shrink`` to ``sub``."""
    fuzz = sub.add_parser("fuzz", help="search failure interleavings for invariant violations")
    fuzz.add_argument("--engine", choices=("random", "guided", "atheris"), default="random",
                      help="random: independent random schedules; guided: mutates the schedules "
                      "that reached new protocol states (docs/fuzzing.md, \"Guided search\"); "
                      "atheris: libFuzzer over the schedule bytes, Python line coverage")
    fuzz.add_argument("--generation", "-g", default="strict-min-isr")
    fuzz.add_argument("--config", help="fuzz profile JSON (cluster, producers, consumers, "
                      "actions, healing_ms, fault_classes, swarm, vary_config)")
    fuzz.add_argument("--seconds", type=_seconds, default=None,
                      help="time budget in seconds (default: 60, or none when --runs is given)")
    fuzz.add_argument("--runs", type=_positive, help="run budget (default: none; the search "
                      "stops at the first budget reached)")
    fuzz.add_argument("--seed", type=int, default=0, help="campaign seed")
    fuzz.add_argument("--jobs", "-j", type=_positive, default=None,
                      help="worker processes of the random and guided engines (default: every core); "
                      "the findings of a run budget are the same on any number")
    fuzz.add_argument("--master", default=None,
                      help="run the random or guided engine's runs as tasks of this Spark master "
                      "(local[N], spark://host:7077; needs the spark extra); the findings are "
                      "those of --jobs 1")
    fuzz.add_argument("--out", help="directory for findings (default runs/fuzz-<generation>-seed<S>)")
    fuzz.add_argument("--resume", action="store_true",
                      help="guided engine: continue the search saved in OUT/corpus/ (same "
                      "generation, seed and profile) where it stopped")
    fuzz.add_argument("--json", action="store_true", help="print the summary as JSON")
    fuzz.add_argument("--until-found", action="store_true", help="stop at the first violation")
    fuzz.add_argument("--backend", choices=("rust", "reference"),
                      help="simulator backend passed to Cluster: rust (the default) or reference (the all-Python oracle)")
    fuzz.add_argument("--transactions", action="store_true",
                      help="transactional producers, a read_committed consumer, coordinator faults")
    fuzz.add_argument("--pre-kip890", action="store_true",
                      help="model transactions before KIP-890 (implies --transactions)")
    fuzz.set_defaults(handler=_fuzz)
    replay = sub.add_parser("replay", help="run a saved schedule and judge it")
    replay.add_argument("schedule", metavar="SCHEDULE_OR_RUN_DIR",
                        help="a schedule file, or a run directory holding schedule.json")
    replay.add_argument("--out", help="write a run directory here (step table, timeline, "
                        "history, verdict, README with the rerun command; see `epochlab show`)")
    replay.add_argument("--json", action="store_true", help="print the verdict as JSON")
    replay.add_argument("--backend", choices=("rust", "reference"),
                        help="replica protocol implementation (default rust; all give the same run)")
    replay.set_defaults(handler=_replay)
    shrink = sub.add_parser("shrink", help="shrink a schedule that violates an invariant")
    shrink.add_argument("schedule")
    shrink.add_argument("--invariant", help="name or signature (default: its first violation)")
    shrink.add_argument("--out", help="output file (default: <schedule>.min.json)")
    shrink.add_argument("--max-runs", type=_positive, default=400,
                        help="most candidate runs to try (default 400)")
    shrink.add_argument("--json", action="store_true")
    shrink.add_argument("--backend")
    shrink.set_defaults(handler=_shrink)


def _positive(text: str) -> int:
    """argparse type: an integer from 1 to 10^9."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if not 1 <= value <= 10**9:
        raise argparse.ArgumentTypeError(f"expected an integer from 1 to 1000000000, got {value}")
    return value


def _seconds(text: str) -> float:
    """argparse type: a finite number of seconds, more than 0 and at most 30 days."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or not 0 < value <= 30 * 86400:
        raise argparse.ArgumentTypeError(f"expected seconds in (0, 2592000], got {text}")
    return value


def _build() -> str:
    import epochlab

    return str(epochlab.BUILD)


def _generation(value: str) -> Any:
    from epochlab.errors import ConfigError, UsageError
    from epochlab.generations import Generation

    try:
        return Generation.parse(value)
    except ConfigError:
        raise UsageError("epochlab: --generation: expected one of "
                          + ", ".join(g.label for g in sorted(Generation)) + f", got {value!r}") from None


def _fuzz(args: argparse.Namespace) -> int:
    from epochlab.errors import UsageError
    from epochlab.fuzz.campaign import Campaign, default_jobs
    from epochlab.fuzz.generator import load_profile

    generation = _generation(args.generation)
    profile = load_profile(args.config)
    if args.transactions or args.pre_kip890:
        profile = profile.with_transactions(pre_kip890=True if args.pre_kip890 else None)
    out = Path(args.out or f"runs/fuzz-{generation.label}-seed{args.seed}")
    if args.seconds is None and args.runs is None:
        args.seconds = 60.0   # neither budget given: a minute
    if args.resume and args.engine != "guided":
        raise UsageError("epochlab fuzz: --resume continues a guided search (--engine guided)")
    if args.engine == "atheris":
        from epochlab.fuzz.harness import run_atheris

        summary = run_atheris(generation, out, seed=args.seed, seconds=args.seconds, config=args.config,
                              runs=args.runs, until_found=args.until_found,
                              progress=(lambda line: None) if args.json else
                              (lambda line: print(line, flush=True)))
    else:
        from epochlab.fuzz.guided import GuidedSearch
        from epochlab.report.progress import progress_bar

        quiet = args.json
        engine: Any = GuidedSearch if args.engine == "guided" else Campaign
        extra = {"resume": args.resume} if args.engine == "guided" else {}
        with progress_bar("fuzz", args.runs, enabled=not quiet) as update:
            campaign = engine(generation, profile, **extra, seed=args.seed, seconds=args.seconds,
                                runs=args.runs, out=out, backend=args.backend,
                                until_found=args.until_found, jobs=args.jobs or default_jobs(),
                                master=args.master,
                                progress=(lambda line: None) if quiet else
                                (lambda line: print(line, flush=True)),
                                tick=lambda runs, seconds: update(
                                    runs, note=f"{seconds:.0f} s, {len(campaign.findings)} found"))
            campaign.run()
        summary = campaign.summary()
    summary["out"] = str(out)
    if args.json:
        print(json.dumps(summary, sort_keys=True, indent=2))
    else:
        _print_summary(summary)
    return 1 if summary["violations"] else 0


def _print_summary(summary: dict[str, Any]) -> None:
    print(f"\n{summary['engine']} engine, {summary['generation']}: {summary['runs']} runs in "
          f"{summary['seconds']} s (build {summary['build']}, campaign seed {summary.get('seed')})")
    if not summary["violations"]:
        print("no protocol violation found")
    for v in summary["violations"]:
        print(f"VIOLATION {v['invariant']}: {v['message']}")
        run_dir = str(Path(v['schedule']).parent)
        print(f"  first after {v['runs_to_first']} runs / {v['seconds_to_first']} s, run seed {v['seed']}; "
              f"minimal schedule ({v['minimal_actions']} of {v['original_actions']} actions): {run_dir}")
        known = v.get("known_bugs")
        if known is not None:
            print(f"  known bug with this signature (docs/bugs.md): {', '.join(known)}" if known else
                  "  matches no catalogued bug (docs/bugs.md): a candidate for a new report")
        print(f"  see it: epochlab show {run_dir}    replay: epochlab replay {run_dir}")
    allowed = summary.get("allowed_by_configuration") or {}
    if allowed:
        print("allowed by the configuration (not violations): "
              + ", ".join(f"{k} x{n}" for k, n in allowed.items()))


def schedule_path(given: str) -> Path:
    """A schedule file, or the ``schedule.json`` of a run directory (exit-2 errors otherwise)."""
    from epochlab.fuzz.schedule import ScheduleError

    path = Path(given)
    if path.is_dir():
        if (path / "schedule.json").is_file():
            return path / "schedule.json"
        hint = (f"; it is a scenario run: rerun it with `epochlab scenario run {path / 'scenario.toml'}`"
                if (path / "scenario.toml").is_file() else "")
        raise ScheduleError(f"{given}: a directory without schedule.json{hint}", where=given,
                            field="", expected="a schedule file or a run directory holding one",
                            got="directory")
    return path


def _replay(args: argparse.Namespace) -> int:
    from epochlab.fuzz.executor import execute
    from epochlab.fuzz.schedule import load_schedule

    path = schedule_path(args.schedule)
    schedule = load_schedule(path)
    result = execute(schedule, backend=args.backend, record=bool(args.out))
    digest = hashlib.sha256(result.history_jsonl.encode()).hexdigest()[:16]
    if args.out:
        from epochlab.report.rundir import write_schedule_run

        write_schedule_run(result, args.out, rerun=f"epochlab replay {args.out}",
                           title=f"Replay of {path}")
    if args.json:
        data = result.verdict.to_dict()
        data.update(schedule=str(path), seed=schedule.seed, build=_build(), valid=result.verdict.ok,
                    generation=schedule.generation.label, history_sha256=digest)
        if args.out:
            data["run_dir"] = args.out
        print(json.dumps(data, sort_keys=True, indent=2))
    else:
        print(f"{path}: {schedule.generation.label}, seed {schedule.seed}, "
              f"{len(schedule.actions)} actions, build {_build()}, history sha256 {digest}")
        for v in result.verdict.violations:
            tag = "VIOLATION" if v.is_protocol_violation else "allowed  "
            print(f"{tag} {v.invariant} at step {v.step} ({v.time_ms} ms): {v.message}"
                  + (f" [{v.reason}]" if v.reason else ""))
        if result.verdict.ok:
            print("no protocol violation")
        else:
            print(f"replay: epochlab replay {path}")
        if args.out:
            print(f"run directory: {args.out} (step table: epochlab show {args.out})")
    return 0 if result.verdict.ok else 1


def _shrink(args: argparse.Namespace) -> int:
    from epochlab.fuzz.schedule import load_schedule
    from epochlab.fuzz.shrink import shrink

    path = schedule_path(args.schedule)
    schedule = load_schedule(path)
    from epochlab.report.progress import progress_bar

    try:
        with progress_bar("shrink", args.max_runs, enabled=not args.json) as update:
            res = shrink(schedule, args.invariant, backend=args.backend, max_runs=args.max_runs,
                         on_run=lambda runs, actions: update(runs, note=f"{actions} actions"))
    except ValueError as exc:
        print(f"epochlab: shrink: {path}: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else path.with_name(path.stem + ".min.json")
    res.schedule.save(out)
    v = res.result.verdict.first(res.signature)
    if args.json:
        print(json.dumps({"signature": res.signature, "actions": len(res.schedule.actions),
                          "original_actions": len(schedule.actions), "runs": res.runs,
                          "out": str(out), "build": _build(), "seed": schedule.seed},
                         sort_keys=True, indent=2))
    else:
        print(f"{res.signature}: {len(schedule.actions)} -> {len(res.schedule.actions)} actions in "
              f"{res.runs} runs; {v.message if v else ''}")
        print(f"minimal schedule: {out} (seed {schedule.seed}, build {_build()})")
        print(f"replay: epochlab replay {out}")
    return 0
