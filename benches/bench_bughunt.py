"""Bug-hunt benchmark: for each catalogued bug (``docs/bugs.md``), each engine and
each campaign seed, the runs and seconds to the first finding whose catalogue match is that
bug, with median and max over seeds; the table of ``docs/bugs.md`` between ``<!-- bughunt -->``
markers is regenerated from the results (when they go to one of the repository's results files
in ``benches/results/``, or ``--doc`` names a document; a campaign with an ``--out`` of its own
only prints its table, so it cannot overwrite the measured one).

    python benches/bench_bughunt.py --seeds 1 2 3 4 5 --runs 3000 --seconds 240
    python benches/bench_bughunt.py --engines atheris --seconds 120    # adds to the same file

The bugs that need an off-by-default step (``KnownBug.needs``: controller failover, ListOffsets)
are measured with a profile that enables it, into their own file and section:

    python benches/bench_bughunt.py --engines random --generations hw-truncation kip-101 kip-279 \
        --config benches/profiles/off-by-default-steps.json --runs 4000 --seconds 300 \
        --out benches/results/bughunt-steps.json --section steps

A script, not a pytest-benchmark suite: each figure is one deterministic, budget-censored
campaign of seconds to minutes (pytest-benchmark times repeated rounds of one callable and
reports their mean and minimum, which means nothing here), and a partial measurement must be
kept and resumed. One campaign per (engine, generation, seed) serves every bug of that
generation (``epochlab.fuzz.bughunt``). The results go to ``benches/results/bughunt.json``
after every campaign (campaigns of the same engine, generation and seed are replaced; the
others are kept, so engines or generations can be measured in separate sessions) with the
machine, the date, the command and the wall time of each session. ``--render-only`` (or
``python -m epochlab.fuzz.bughunt``) re-renders the table from the file.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from epochlab.fuzz import bughunt
from epochlab.generations import Generation

#: The repository this script is in: its measured results, and the document that shows them
#: (by this file's place, not the installed package's, which may live in a virtualenv).
REPOSITORY = Path(__file__).resolve().parents[1]
RESULTS = REPOSITORY / "benches" / "results"
DOC = REPOSITORY / "docs" / "bugs.md"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", nargs="+", choices=bughunt.ENGINES, default=list(bughunt.ENGINES))
    parser.add_argument("--generations", nargs="+", default=None,
                        help="default: every generation a catalogued bug lists")
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    parser.add_argument("--runs", type=int, default=3000, help="run budget per campaign")
    parser.add_argument("--seconds", type=float, default=240.0, help="time budget per campaign")
    parser.add_argument("--config", help="fuzz profile JSON (default: the default profile, with "
                        "which docs/fuzzing.md found these bugs)")
    parser.add_argument("--out", default=str(RESULTS / "bughunt.json"))
    parser.add_argument("--doc", default=None,
                        help="the document to render the table into (default: docs/bugs.md when "
                        "--out is one of the repository's results files in benches/results/, else "
                        "none: a campaign of one's own leaves the docs alone and prints its table)")
    parser.add_argument("--section", default=None,
                        help="the named section of --doc to render into (<!-- bughunt:NAME -->; "
                        "'steps' for the off-by-default steps' profile)")
    parser.add_argument("--fresh", action="store_true", help="start a new results file")
    parser.add_argument("--render-only", action="store_true")
    parser.add_argument("--plot", help="also draw the new-states-over-runs curves (PNG) here")
    parser.add_argument("--plot-generation", help="the generation of --plot (default: the first "
                        "with curves)")
    return parser


def _load(args: argparse.Namespace, generations: list[str]) -> dict[str, Any]:
    out = Path(args.out)
    budget = bughunt.Budget(args.runs, args.seconds)
    plan = bughunt.new_results(args.seeds, args.engines, generations, budget, args.config)
    if args.fresh or not out.exists():
        return plan
    results = json.loads(out.read_text(encoding="utf-8"))
    if results["plan"]["budget"] != plan["plan"]["budget"] or \
            results["plan"]["profile"] != plan["plan"]["profile"]:
        raise SystemExit(f"{out}: measured with {results['plan']['budget']} and "
                         f"{results['plan']['profile']}; use --fresh for other budgets or profiles")
    for key in ("seeds", "engines", "generations"):
        results["plan"][key] = sorted(set(results["plan"][key]) | set(plan["plan"][key]),
                                      key=lambda x: (bughunt.ENGINES.index(x) if key == "engines"
                                                     else int(Generation.parse(x)) if key == "generations"
                                                     else x))
    return results


def _save(results: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)


def _line(record: bughunt.CampaignRecord) -> str:
    found = ", ".join(f"{f.invariant}@{f.run} ({'/'.join(f.known_bugs) or 'NO MATCH'})"
                      for f in record.findings) or "nothing"
    return (f"{record.engine} {record.generation} seed {record.seed}: {record.runs} runs, "
            f"{record.seconds:.1f} s, stopped: {record.stopped}; {found}"
            + (f"\n  error: {record.error}" if record.error else ""))


def _doc(args: argparse.Namespace) -> Path | None:
    """The document the table goes into: ``--doc``; without it ``docs/bugs.md`` when ``--out``
    is one of the repository's results files (the measured tables the docs show), else none."""
    if args.doc is not None:
        return Path(args.doc)
    return DOC if Path(args.out).resolve().parent == RESULTS else None


def main() -> int:
    parser = _parser()
    args = parser.parse_args()
    doc = _doc(args)
    if doc is not None:
        try:
            bughunt.doc_text(doc, args.section)
        except ValueError as e:
            parser.error(f"--doc: {e}")
    if args.render_only:
        results = json.loads(Path(args.out).read_text(encoding="utf-8"))
        if doc is not None:
            bughunt.update_doc(results, doc, args.section)
        if args.plot:
            bughunt.plot_curves(results, Path(args.plot), args.plot_generation)
        print(bughunt.markdown(results), end="")
        return 0
    generations = [Generation.parse(g).label for g in args.generations] if args.generations \
        else [g.label for g in bughunt.generations_of()]
    results = _load(args, generations)
    session: dict[str, Any] = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               "command": "python benches/bench_bughunt.py " + shlex.join(sys.argv[1:]),
               "machine": bughunt.machine()}
    results["sessions"].append(session)
    start = time.monotonic()
    budget = bughunt.Budget(args.runs, args.seconds)
    for engine in args.engines:
        for generation in generations:
            for seed in args.seeds:
                record = bughunt.hunt(engine, generation, seed, budget, args.config)
                print(_line(record), flush=True)
                bughunt.put_campaign(results, record)
                session["wall_seconds"] = round(time.monotonic() - start)
                _save(results, Path(args.out))
    if doc is not None:
        bughunt.update_doc(results, doc, args.section)
    if args.plot:
        bughunt.plot_curves(results, Path(args.plot), args.plot_generation)
    print(bughunt.markdown(results), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
