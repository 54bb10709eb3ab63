"""Coverage-guided search over schedules: the atheris engine.

:class:`ScheduleHarness` turns fuzzer bytes into a schedule (:func:`decode_schedule`), runs it
and judges it. A new protocol-violation signature is written to
``<out>/violations/<signature>/`` (a run directory, ``epochlab.report.rundir``, with
``original.json`` beside the schedule) *before* anything is raised, and an exception escaping the simulator is written
to ``<out>/crashes/<sha1>.json`` (the schedule) and ``.txt`` (the traceback) before it is
re-raised, so a harness crash never loses a finding. libFuzzer keeps its corpus in
``<out>/corpus`` and its own crash inputs in ``<out>/crashes/``.

Without ``--stop-on-violation`` violations are recorded and the search goes on (the CLI uses
this and shrinks the findings afterwards); with it, the harness raises
:class:`ViolationFound` after writing, which libFuzzer reports as a crash.

    python -m epochlab.fuzz.harness --generation kip-101 --out runs/fuzz-g1 -max_total_time=300

This module imports without atheris; only :func:`main` needs it.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import traceback
from pathlib import Path
from typing import Any

from epochlab.fuzz.campaign import write_finding
from epochlab.fuzz.executor import execute
from epochlab.fuzz.generator import FuzzProfile, decode_schedule, load_profile
from epochlab.generations import Generation

__all__ = ["ScheduleHarness", "ViolationFound", "main"]


class ViolationFound(Exception):
    """A protocol violation (raised only with ``stop_on_violation``, after it was written)."""


class ScheduleHarness:
    def __init__(self, generation: Generation | str, out: str | Path,
                 profile: FuzzProfile | None = None, stop_on_violation: bool = False,
                 max_actions: int = 200) -> None:
        self.generation = Generation.parse(generation)
        self.out = Path(out)
        self.profile = profile or FuzzProfile()
        self.stop_on_violation = stop_on_violation
        self.max_actions = max_actions
        self.seen: set[str] = {p.name for p in (self.out / "violations").glob("*")} \
            if (self.out / "violations").exists() else set()
        self.runs = 0

    def test_one_input(self, data: bytes) -> None:
        schedule = decode_schedule(data, self.generation, self.profile, self.max_actions)
        self.runs += 1
        try:
            result = execute(schedule)
        except Exception:
            name = hashlib.sha1(data).hexdigest()
            crashes = self.out / "crashes"
            crashes.mkdir(parents=True, exist_ok=True)
            schedule.save(crashes / f"{name}.json")
            (crashes / f"{name}.txt").write_text(traceback.format_exc(), encoding="utf-8")
            raise
        new = [v for v in result.verdict.protocol_violations if v.signature not in self.seen]
        for v in new:
            self.seen.add(v.signature)
            write_finding(self.out, v, schedule, None, result, None, "atheris")
            print(f"epochlab: {v.invariant}: {v.message} -> "
                  f"{self.out / 'violations' / v.signature}", file=sys.stderr, flush=True)
        if new and self.stop_on_violation:
            raise ViolationFound(", ".join(v.invariant for v in new))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="fuzz_schedules", add_help=True)
    parser.add_argument("--generation", "-g", default=Generation.STRICT_MIN_ISR.label)
    parser.add_argument("--out", required=True, help="corpus, crashes and violations go here")
    parser.add_argument("--config", help="fuzz profile JSON (docs/fuzzing.md)")
    parser.add_argument("--stop-on-violation", action="store_true")
    args, libfuzzer = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    import atheris

    out = Path(args.out)
    (out / "corpus").mkdir(parents=True, exist_ok=True)
    (out / "crashes").mkdir(parents=True, exist_ok=True)
    harness = ScheduleHarness(args.generation, out, load_profile(args.config),
                              args.stop_on_violation)
    atheris.instrument_all()
    flags = [f"-artifact_prefix={out / 'crashes'}/", "-max_len=2048", *libfuzzer, str(out / "corpus")]
    atheris.Setup([sys.argv[0], *flags], harness.test_one_input)
    atheris.Fuzz()


def _entry() -> Any:  # pragma: no cover - process entry point
    main()


if __name__ == "__main__":  # pragma: no cover
    main()
