"""Coverage-guided search over schedules: the atheris engine (:func:`run_atheris` drives it in a
subprocess for ``epochlab fuzz --engine atheris``).

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

The search is structure-aware: it starts with the byte encodings of the random engine's first
:data:`SEED_INPUTS` schedules, run in order (so the first runs are the random engine's), and the
custom mutator (:func:`mutate_records`) changes whole action records or the bytes of one
record, never shifting the records after it. Coverage of the simulator and the checker
(``atheris.instrument_all``) decides what is kept.

This module imports without atheris; only :func:`main` and :func:`mutate_records` need it.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from epochlab.fuzz.campaign import run_seed, write_finding
from epochlab.fuzz.executor import execute
from epochlab.fuzz.generator import (
    HEADER_BYTES,
    RECORD_BYTES,
    FuzzProfile,
    decode_schedule,
    encode_random_schedule,
    load_profile,
)
from epochlab.generations import Generation

__all__ = ["ScheduleHarness", "ViolationFound", "main", "run_atheris"]


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
        if not data:  # libFuzzer's first, empty input: no schedule, not counted as a run
            return
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
            write_finding(self.out, v, schedule, None, None, "atheris")
            print(f"epochlab: run {self.runs}: {v.invariant}: {v.message} -> "
                  f"{self.out / 'violations' / v.signature}", file=sys.stderr, flush=True)
        if new and self.stop_on_violation:
            raise ViolationFound(", ".join(v.invariant for v in new))


#: inputs written into an empty corpus before the search starts (module doc)
SEED_INPUTS = 64


def seed_corpus(corpus: Path, seed: int, profile: FuzzProfile, count: int = SEED_INPUTS) -> list[Path]:
    """Fill an empty ``corpus`` directory with the byte encodings of the random engine's first
    ``count`` schedules for campaign seed ``seed`` (:func:`encode_random_schedule` of
    ``run_seed(seed, i)``): the search starts exactly where the random engine is, and coverage
    guidance takes it from there. Returns the files, in run order (none if not empty)."""
    if any(corpus.iterdir()):
        return []
    files = []
    for i in range(count):
        path = corpus / f"random-{i:03d}"
        path.write_bytes(encode_random_schedule(run_seed(seed, i), profile))
        files.append(path)
    return files


def mutate_records(data: bytes, max_size: int, seed: int) -> bytes:
    """A structure-aware mutation: schedules are a header then fixed-size action records, so
    mutate whole records (replace one with random bytes, duplicate one, drop one, swap two,
    splice a run) or, one time in four, let libFuzzer mutate the bytes of one record only.
    Byte-level mutations of the whole input would shift every later record and turn one change
    into a different schedule."""
    import random

    import atheris

    rng = random.Random(seed)
    header, body = data[:HEADER_BYTES].ljust(HEADER_BYTES, b"\0"), data[HEADER_BYTES:]
    records = [body[i:i + RECORD_BYTES].ljust(RECORD_BYTES, b"\0")
               for i in range(0, len(body), RECORD_BYTES)]
    choice = rng.randrange(7)
    if choice == 0 or not records:
        records.insert(rng.randrange(len(records) + 1), rng.randbytes(RECORD_BYTES))
    elif choice == 1:
        records[rng.randrange(len(records))] = rng.randbytes(RECORD_BYTES)
    elif choice == 2 and len(records) > 1:
        del records[rng.randrange(len(records))]
    elif choice == 3:
        i = rng.randrange(len(records))
        records.insert(rng.randrange(len(records) + 1), records[i])
    elif choice == 4 and len(records) > 1:
        i, j = rng.randrange(len(records)), rng.randrange(len(records))
        records[i], records[j] = records[j], records[i]
    elif choice == 5:
        header = atheris.Mutate(header, HEADER_BYTES)[:HEADER_BYTES].ljust(HEADER_BYTES, b"\0")
    else:
        i = rng.randrange(len(records))
        records[i] = atheris.Mutate(records[i], RECORD_BYTES)[:RECORD_BYTES].ljust(RECORD_BYTES, b"\0")
    out = header + b"".join(records)
    return out[:max(HEADER_BYTES, max_size - (max_size - HEADER_BYTES) % RECORD_BYTES)]


#: how the CLI starts the harness: epochlab is imported inside atheris's instrumentation
#: context (atheris instruments the whole ``epochlab`` package that way; ``instrument_all``
#: would also instrument the standard library and every dependency), and matplotlib, which a
#: finding's run directory draws with, is imported before it, uninstrumented: instrumenting it
#: on first use cost a minute and a half per finding
BOOTSTRAP = ("import sys, atheris\n"
             "try:\n"
             "    import matplotlib\n"
             "    matplotlib.use('Agg')\n"
             "    import matplotlib.pyplot\n"
             "except ImportError:\n"
             "    pass\n"
             "with atheris.instrument_imports(include=['epochlab']):\n"
             "    import epochlab.sim, epochlab.checks, epochlab.fuzz.executor\n"
             "from epochlab.fuzz import harness\n"
             "harness.main(sys.argv[1:], instrument=False)\n")


def run_atheris(generation: Generation, out: Path, *, seed: int, seconds: float | None, config: str | None,
                runs: int | None, until_found: bool,
                progress: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """``epochlab fuzz --engine atheris``: run the harness (:data:`BOOTSTRAP`) in a subprocess
    for ``seconds`` or ``runs``, then shrink every violation it wrote under ``out`` and write
    each as a finding. ``progress`` receives a line every 5 s and one per violation found. The
    summary has the random engine's shape (``engine``, ``generation``, ``seed``, ``build``,
    ``runs``, ``seconds``, ``violations``) and the harness's exit status."""
    import importlib.util
    import subprocess
    import time

    import epochlab
    from epochlab.errors import EpochlabError
    from epochlab.fuzz.campaign import known_bugs
    from epochlab.fuzz.schedule import load_schedule
    from epochlab.fuzz.shrink import shrink

    if importlib.util.find_spec("atheris") is None:
        raise ModuleNotFoundError("No module named 'atheris'", name="atheris")
    cmd = [sys.executable, "-c", BOOTSTRAP, "--generation", generation.label,
           "--out", str(out), f"-seed={seed or 1}"]
    if seconds is not None:
        cmd.append(f"-max_total_time={max(1, int(seconds))}")
    if config:
        cmd += ["--config", config]
    if runs is not None:
        cmd.append(f"-runs={runs}")
    if until_found:
        cmd.append("--stop-on-violation")
    cmd.append(f"--corpus-seed={seed}")  # the corpus starts with this seed's random runs
    start = time.monotonic()
    tail: list[str] = []
    done = 0
    found_at: dict[str, tuple[int, float]] = {}    # signature -> (runs, seconds) to first
    last_shown = 0.0
    with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stderr is not None
        try:
            for line in proc.stderr:
                tail = (tail + [line])[-40:]
                if line.startswith("#") and " cov:" in line:
                    try:
                        done = int(line[1:].split()[0])
                    except ValueError:
                        pass
                    now = time.monotonic() - start
                    if now - last_shown >= 5:
                        last_shown = now
                        cov = line.split(" cov:")[1].split()[0]
                        progress(f"atheris: {done} runs, {now:.0f} s, coverage {cov}")
                elif line.startswith("epochlab: ") and " -> " in line:
                    sig = Path(line.rsplit(" -> ", 1)[1].strip()).name
                    at_run = line.split("epochlab: run ", 1)[1].split(":", 1)[0] \
                        if line.startswith("epochlab: run ") else ""
                    found_at.setdefault(sig, (int(at_run) if at_run.isdigit() else done,
                                              round(time.monotonic() - start, 3)))
                    progress(line.rstrip())
        except KeyboardInterrupt:
            proc.terminate()
            raise
        returncode = proc.wait()
    elapsed = time.monotonic() - start
    if returncode != 0 and not (out / "violations").exists():
        raise EpochlabError(f"the atheris harness failed (exit {returncode}) before finding "
                            f"anything; its last output:\n{''.join(tail)[-2000:]}")
    violations = []
    for directory in sorted((out / "violations").glob("*")) if (out / "violations").exists() else []:
        original = load_schedule(directory / "original.json")
        first = execute(original).verdict.first(directory.name)
        if first is None:
            continue
        shrunk = shrink(original, directory.name, max_runs=300)
        write_finding(out, first, original, shrunk.schedule, None, "atheris")
        to_first = found_at.get(directory.name, (None, None))
        violations.append({"signature": first.signature, "invariant": first.invariant,
                           "message": first.message, "runs_to_first": to_first[0],
                           "seconds_to_first": to_first[1], "seed": None,
                           "known_bugs": known_bugs(out / "violations" / first.signature, generation, first.invariant),
                           "original_actions": len(original.actions),
                           "minimal_actions": len(shrunk.schedule.actions),
                           "schedule": str(directory / "schedule.json")})
    return {"engine": "atheris", "generation": generation.label, "seed": seed,
            "build": str(epochlab.BUILD), "runs": done, "seconds": round(elapsed, 3),
            "violations": violations, "harness_exit": returncode}


def main(argv: list[str] | None = None, instrument: bool = True) -> None:
    parser = argparse.ArgumentParser(prog="fuzz_schedules", add_help=True)
    parser.add_argument("--generation", "-g", default=Generation.STRICT_MIN_ISR.label)
    parser.add_argument("--out", required=True, help="corpus, crashes and violations go here")
    parser.add_argument("--config", help="fuzz profile JSON (docs/fuzzing.md)")
    parser.add_argument("--stop-on-violation", action="store_true")
    parser.add_argument("--corpus-seed", type=int, default=0,
                        help="campaign seed of the random-engine schedules an empty corpus starts with")
    args, libfuzzer = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    import atheris

    out = Path(args.out)
    for sub in ("corpus", "crashes", "seeds"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    profile = load_profile(args.config)
    # The random engine's schedules go in as -seed_inputs. With -shuffle=0 libFuzzer runs
    # initial inputs of equal size last-given first (measured with atheris 3.0's libFuzzer), so
    # they are given in reverse and the first runs are exactly the random engine's; what adds
    # coverage lands in the corpus directory as usual.
    seeds = seed_corpus(out / "seeds", args.corpus_seed, profile)[::-1]
    harness = ScheduleHarness(args.generation, out, profile, args.stop_on_violation)
    if instrument:
        atheris.instrument_all()
    max_len = HEADER_BYTES + RECORD_BYTES * harness.max_actions
    flags = [f"-artifact_prefix={out / 'crashes'}/", f"-max_len={max_len}", "-shuffle=0"]
    if seeds:
        flags.append("-seed_inputs=" + ",".join(str(p) for p in seeds))
    flags += [*libfuzzer, str(out / "corpus")]
    atheris.Setup([sys.argv[0], *flags], harness.test_one_input, custom_mutator=mutate_records)
    atheris.Fuzz()


def _entry() -> Any:  # pragma: no cover - process entry point
    main()


if __name__ == "__main__":  # pragma: no cover
    main()
