"""``epochlab kafka run SCENARIO [--compare] [--json] [--out DIR] [--cluster-dir DIR] [--keep-cluster]
[--kafka-version V] [--client librdkafka|java]``.

Runs a scenario on a real cluster (:mod:`epochlab.kafka.run`), judges its expectations on the
real run, with ``--compare`` runs it on the model too (:mod:`epochlab.kafka.run_compare`), and
writes a run directory (default ``runs/kafka-<scenario>``):

``README.md`` (report), ``steps.md`` (the step table of the real run), ``timeline.png`` (with
matplotlib), ``steps.json``, ``history.jsonl`` (the real clients' history), ``real.json``,
``model.json`` and ``compare.json`` (with ``--compare``), ``inspect-broker-<id>.json`` (each
replica's partition directory as ``epochlab inspect --json`` shows it, read at the end of the
last step, before crashed brokers are restarted for the next run; running brokers are read
as they run: Kafka writes through the page cache, so every appended batch is visible),
``scenario.toml``, ``state-change.log`` (every broker's ``state.change.logger`` lines about the
run's topic, from its ``server.log``: releases 4.0+ log through log4j 2 here) and, with
``--compare``, ``model-events.txt`` (the model run's engine events).

Both sides report the leaders re-elected across a skipped epoch (``epoch_skips``): a broker
that becomes leader in epoch E while its previous state was leader in an epoch below E - 1
(``Partition.makeLeader``'s "starts at leader epoch E ... Previous leader Some(B) and previous
leader epoch was P" with B the broker itself; the model's "broker B is leader in epoch E (was
leader in epoch P)"). A real run without the brokers' logs cannot tell (``None``).

Without ``--cluster-dir`` a three-broker cluster with the scenario's broker settings
(:func:`~epochlab.kafka.run.broker_overrides`) is started for the run and stopped after it
(also on Ctrl-C; ``--keep-cluster`` leaves it running and prints how to stop it). With it, the
model runs with that cluster's settings in place of the scenario's (listed in ``model.json``). Exit 0: the
expectations hold on the real run (and with ``--compare`` the outcomes agree), 1 otherwise,
2 bad input or a scenario not runnable on real Kafka.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["add", "execute", "run_command"]


def add(ksub: Any) -> None:
    p = ksub.add_parser("run", help="run a scenario on a real cluster, optionally compared with the model",
                        description="Map a scenario's steps onto a real KRaft cluster, judge its "
                                    "expectations on the real run, and with --compare report it side "
                                    "by side with the model (docs/kafka-run.md).")
    p.add_argument("scenario", help="a built-in scenario name or a scenario file")
    p.add_argument("--compare", action="store_true", help="also run the model and compare")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--out", help="run directory (default runs/kafka-<scenario>)")
    p.add_argument("--cluster-dir", help="use the running cluster recorded in this directory")
    p.add_argument("--keep-cluster", action="store_true", help="leave a cluster started here running")
    p.add_argument("--client", choices=("librdkafka", "java"), default="librdkafka",
                   help="the producers: confluent-kafka's librdkafka (default) or Kafka's own Java "
                        "client of the cluster's release, which the model's producer is")
    p.add_argument("--kafka-version", default=None, metavar="V",
                   help="the Kafka release of a cluster started here (default: the project's release; "
                        "resolve it first with `epochlab kafka jars --version V`)")
    p.set_defaults(kafka_run=run_command)


def execute(scenario: Any, cluster: Any, compare: bool, out: Path | None,
            client: str = "librdkafka") -> tuple[int, dict[str, Any]]:
    """Run ``scenario`` on ``cluster`` with ``client``'s producers; (exit code, the JSON payload)."""
    from epochlab.errors import ConfigError
    from epochlab.kafka.run import GENERATION, cluster_settings, run_on_cluster, unmappable
    from epochlab.kafka.run_compare import compare as compare_runs
    from epochlab.kafka.run_compare import (model_epoch_skips, model_run, model_scenario, real_epoch_skips,
                                            state_change_lines, summarize_model, summarize_real)

    why = unmappable(scenario, cluster)
    if why:
        return 2, {"scenario": scenario.name, "runnable": False, "why": why}
    try:
        real = run_on_cluster(scenario, cluster, client=client)
    except ConfigError as exc:
        return 2, {"scenario": scenario.name, "runnable": False, "why": [str(exc)]}
    real_summary = summarize_real(real)
    state_changes = state_change_lines(cluster, real.topic)
    real_summary["epoch_skips"] = real_epoch_skips(state_changes) if state_changes else None
    settings = cluster_settings(cluster)
    _, replaced = model_scenario(scenario, settings, client)
    payload: dict[str, Any] = {
        "scenario": scenario.name, "runnable": True,
        "real": {"expectations_hold": real.expectations_hold, "checks": [c.to_dict() for c in real.checks],
                 "topic": real.topic, "seconds": round(real.seconds, 2), "notes": real.notes,
                 "kafka_version": cluster.version, "client": client, "settings": settings,
                 "settings_differ_from_scenario": replaced, **real_summary},
    }
    ok = real.expectations_hold
    model = None
    if compare:
        t0 = time.monotonic()
        model = model_run(scenario, GENERATION, settings, client)
        payload["model"] = {"expectations_hold": model.passed, "generation": GENERATION,
                            "settings": settings, "settings_replaced": replaced,
                            "checks": [c.to_dict() for c in model.checks],
                            "seconds": round(time.monotonic() - t0, 2), **summarize_model(model),
                            "epoch_skips": model_epoch_skips(model.events)}
        agree, diffs = compare_runs(real_summary, payload["model"])
        payload["agree"], payload["differences"] = agree, diffs
        ok = ok and agree
    if out is not None:
        write_run_dir(out, scenario, real, payload, state_changes, model)
        payload["run_dir"] = str(out)
    return (0 if ok else 1), payload


def write_run_dir(path: Path, scenario: Any, real: Any, payload: dict[str, Any],
                  state_changes: list[str] | None = None, model: Any = None) -> None:
    from epochlab.report import picture
    from epochlab.report.rundir import write_atomically
    from epochlab.report.table import step_rows, table_markdown

    rows = step_rows(real.records)

    def dump(data: Any) -> str:
        return json.dumps(data, sort_keys=True, indent=2, default=str) + "\n"

    def fill(d: Path) -> None:
        (d / "steps.md").write_text(table_markdown(rows))
        steps = [{**r.step.to_dict(), "executed_at_ms": r.executed_at_ms, "outcome": r.outcome, "error": r.error}
                 for r in real.records[1:]]
        (d / "steps.json").write_text(dump(steps))
        (d / "history.jsonl").write_text(real.history.to_jsonl())
        (d / "real.json").write_text(dump(payload["real"]))
        if "model" in payload:
            (d / "model.json").write_text(dump(payload["model"]))
            (d / "compare.json").write_text(dump({k: payload[k] for k in ("scenario", "agree", "differences")}))
        if scenario.text is not None:
            (d / "scenario.toml").write_text(scenario.text, encoding="utf-8")
        if state_changes:
            (d / "state-change.log").write_text("\n".join(state_changes) + "\n")
        if model is not None:
            (d / "model-events.txt").write_text("".join(f"{e}\n" for e in model.events))
        for b, data in sorted(real.inspect.items()):
            (d / f"inspect-broker-{b}.json").write_text(dump(data))
        note = picture.save_timeline(real.records, d / "timeline.png", title=f"{scenario.name} (real Kafka)")
        (d / "README.md").write_text(_report(scenario, payload, table_markdown(rows), note))

    write_atomically(path, fill)


def _report(scenario: Any, payload: dict[str, Any], table: str, picture_note: str) -> str:
    real = payload["real"]
    lines = [f"# {scenario.name} on real Kafka {real['kafka_version']}", "",
             f"Topic `{real['topic']}`, {real['seconds']} s. Expectations "
             + ("hold" if real["expectations_hold"] else "do NOT hold") + " on the real run.", "",
             table, picture_note, "", "## Expectations (real run)", ""]
    lines += [f"- {c['status']}: {c['description']} - {c['detail']}" for c in real["checks"]]
    if real["notes"]:
        lines += ["", "## Approximations", ""] + [f"- {n}" for n in real["notes"]]
    if "model" in payload:
        lines += ["", f"## Compared with the model ({payload['model']['generation']})", "",
                  "agree: " + ("yes" if payload["agree"] else "no"), ""]
        lines += [f"- [{d['kind']}] {d['text']}" for d in payload["differences"]] or ["- no differences"]
    return "\n".join(lines) + "\n"


def run_command(args: argparse.Namespace) -> int:
    from epochlab.errors import EpochlabError
    from epochlab.kafka.cluster import cluster_for
    from epochlab.kafka.run import broker_overrides, unmappable
    from epochlab.scenarios import resolve

    try:
        scenario = resolve(args.scenario)
    except EpochlabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else Path("runs") / f"kafka-{scenario.name}"
    if not args.cluster_dir:
        why = unmappable(scenario)
        if why:
            return _emit(args, 2, {"scenario": scenario.name, "runnable": False, "why": why})
    try:
        with cluster_for(args.cluster_dir, out.with_name(out.name + ".cluster"), broker_overrides(scenario),
                         keep=args.keep_cluster, version=args.kafka_version) as cluster:
            code, payload = execute(scenario, cluster, args.compare, out, client=args.client)
    except EpochlabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return _emit(args, code, payload)


def _emit(args: argparse.Namespace, code: int, payload: dict[str, Any]) -> int:
    if args.json:
        print(json.dumps(payload, sort_keys=True, indent=2, default=str))
        return code
    if not payload.get("runnable", True):
        print(f"{payload['scenario']}: not runnable on real Kafka: " + "; ".join(payload["why"]))
        return code
    real = payload["real"]
    print(f"{payload['scenario']}: real run {real['seconds']} s, expectations "
          + ("hold" if real["expectations_hold"] else "do NOT hold"))
    for c in real["checks"]:
        if c["status"] != "passed":
            print(f"  {c['status']}: {c['description']} - {c['detail']}")
    if real.get("epoch_skips"):
        print("  leaders re-elected across a skipped epoch (state-change.log): "
              + ", ".join(f"broker {b} from epoch {p} to {e}" for b, p, e in real["epoch_skips"]))
    if "agree" in payload:
        print("  model: " + ("agrees" if payload["agree"] else "differs"))
        for d in payload["differences"]:
            print(f"    [{d['kind']}] {d['text']}")
    if "run_dir" in payload:
        print(f"  run directory: {payload['run_dir']}")
    return code
