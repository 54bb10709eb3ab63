"""The commands of live runs: ``epochlab kafka run``, ``epochlab kafka fuzz`` and ``epochlab kafka
downtime``, each on a local KRaft cluster beside the model (``docs/kafka-run.md``). Their
pipelines are in ``epochlab.kafka.runs``; these handlers parse, call and print.

``kafka run SCENARIO [--compare] [--json] [--out DIR] [--cluster-dir DIR] [--keep-cluster]
[--kafka-version V] [--mode zk|kraft] [--client librdkafka|java]``: the scenario on a real
cluster (ZooKeeper mode by default for a release before 4.0,
:mod:`epochlab.kafka.live.zookeeper`; the model then runs in that release's generation,
:func:`epochlab.kafka.runs.era.live_generation`)
(:func:`epochlab.kafka.runs.pipeline.execute`, its run directory default
``runs/kafka-<scenario>``). Without ``--cluster-dir`` a three-broker cluster with the
scenario's broker settings (:func:`~epochlab.kafka.runs.scenario.broker_overrides`) is
started for the run and stopped after it (also on Ctrl-C; ``--keep-cluster`` leaves it running
and prints how to stop it). With it, the model runs with that cluster's settings in place of
the scenario's (listed in ``model.json``). Exit 0: the expectations hold on the real run (and
with ``--compare`` the outcomes agree), 1 otherwise, 2 bad input or a scenario not runnable on
real Kafka.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_downtime", "add_fuzz", "add_run", "positive"]


def positive(text: str) -> int:
    """argparse type: an integer from 1 to 100000."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if not 1 <= value <= 100_000:
        raise argparse.ArgumentTypeError(f"expected an integer in 1..100000, got {value}")
    return value


def add_run(ksub: Any) -> None:
    """``epochlab kafka run``."""
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
                   help="the producers and consumers: confluent-kafka's librdkafka (default) or Kafka's "
                        "own Java clients of the cluster's release, which the model's clients are")
    p.add_argument("--kafka-version", default=None, metavar="V",
                   help="the Kafka release of a cluster started here (default: the project's release; "
                        "resolve it first with `epochlab kafka jars --version V`)")
    p.add_argument("--mode", choices=("zk", "kraft"), default=None,
                   help="how a cluster started here keeps its metadata: ZooKeeper (the default before "
                        "Kafka 4.0) or KRaft (3.3+); the model runs in the release's generation")
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from epochlab.errors import EpochlabError
    from epochlab.kafka.live.start import cluster_for
    from epochlab.kafka.runs.pipeline import execute
    from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION, release_for
    from epochlab.kafka.live.zookeeper import check_mode
    from epochlab.kafka.runs.era import era_refusals
    from epochlab.kafka.runs.links import delayed_clients
    from epochlab.kafka.runs.scenario import broker_overrides, lossy_brokers, unmappable
    from epochlab.scenarios import resolve

    try:
        scenario = resolve(args.scenario)
    except EpochlabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else Path("runs") / f"kafka-{scenario.name}"
    if not args.cluster_dir:
        try:
            version = args.kafka_version or DEFAULT_KAFKA_VERSION
            release_for(version)
            why = unmappable(scenario, version=version) + era_refusals(scenario, version, check_mode(version, args.mode))
        except EpochlabError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if why:
            return _emit(args, 2, {"scenario": scenario.name, "runnable": False, "why": why})
    try:
        with cluster_for(args.cluster_dir, out.with_name(out.name + ".cluster"), broker_overrides(scenario),
                         keep=args.keep_cluster, version=args.kafka_version, mode=args.mode,
                         proxied_listeners=len(delayed_clients(scenario)),
                         lossy_brokers=lossy_brokers(scenario)) as cluster:
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
        print(f"  model ({payload['model']['generation']}, the generation of Kafka {real['kafka_version']}): "
              + ("agrees" if payload["agree"] else "differs"))
        for d in payload["differences"]:
            print(f"    [{d['kind']}] {d['text']}")
    if "run_dir" in payload:
        print(f"  run directory: {payload['run_dir']}")
    return code


# -- epochlab kafka fuzz ---------------------------------------------------------------------

def add_fuzz(ksub: Any) -> None:
    """``epochlab kafka fuzz``."""
    p = ksub.add_parser("fuzz", help="fuzzer schedules on a real cluster, each replayed on the model",
                        description="Draw fuzzer schedules limited to the faults a live cluster here can "
                                    "take (crash/restart, partitions, controlled shutdown, client "
                                    "restarts), run each on a real KRaft cluster and on the model, and "
                                    "report lost acknowledged writes on either side and every outcome "
                                    "where they differ (docs/kafka-run.md). Exit 1 when a run shows a "
                                    "violation or a real outcome no model seed gives, 2 for a usage or "
                                    "environment problem.")
    p.add_argument("--runs", type=positive, default=10, help="schedules to run (default 10)")
    p.add_argument("--seconds", type=positive, default=None, help="stop starting runs after this long")
    p.add_argument("--seed", type=int, default=1, help="campaign seed (default 1)")
    p.add_argument("--actions", type=positive, default=15, help="actions per schedule (default 15)")
    p.add_argument("--out", default="runs/kafka-fuzz", help="campaign directory (default runs/kafka-fuzz)")
    p.add_argument("--cluster-dir", help="use the running cluster recorded in this directory")
    p.add_argument("--client", choices=("librdkafka", "java", "both"), default="librdkafka",
                   help="the producers and consumers: confluent-kafka's librdkafka (default), Kafka's own "
                        "Java clients, or both (each schedule run with each)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(handler=_fuzz)


def _fuzz(args: argparse.Namespace) -> int:
    from epochlab.errors import EpochlabError
    from epochlab.kafka.live.start import cluster_for
    from epochlab.kafka.live.faults import firewall_available
    from epochlab.kafka.runs.fuzz import MODEL_SEEDS, REAL_FAULT_CLASSES, KafkaFuzzRun, fuzz_cluster, real_profile
    from epochlab.kafka.runs.scenario import cluster_overrides

    out = Path(args.out)

    def show(run: KafkaFuzzRun) -> None:
        if args.json:
            return
        what = run.error or ("agree" if run.agree else
                             f"differ, {run.kind} (the real data outcome in {run.model_seeds_matching} of "
                             f"{MODEL_SEEDS} model seeds): " + "; ".join(d["what"] for d in run.differences))
        lost = f" real lost {run.real_lost}" if run.real_lost else ""
        lost += f" model lost {run.model_lost}" if run.model_lost else ""
        print(f"run {run.index:3d} {run.client} (seed {run.seed}) {run.seconds:5.1f} s: {what}{lost}", flush=True)

    missing = firewall_available() if REAL_FAULT_CLASSES.get("partition") else None
    if missing is not None:  # before any broker starts: its schedules cut links
        print(f"error: the live fuzz profile's partitions cannot be applied on this machine: {missing}",
              file=sys.stderr)
        return 2
    try:
        with cluster_for(args.cluster_dir, out.with_name(out.name + ".cluster"),
                         cluster_overrides(real_profile().cluster)) as cluster:
            done = fuzz_cluster(cluster, args.runs, args.seed, out, args.actions, args.seconds, show,
                                client=args.client)
    except EpochlabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    summary = json.loads((out / "summary.json").read_text())
    if args.json:
        print(json.dumps(summary, sort_keys=True, indent=2))
    else:
        print(f"{summary['runs']} runs in {summary['seconds']} s: real violations {summary['real_violations']}, "
              f"model violations {summary['model_violations']}, disagreements {summary['disagreements']} "
              f"(of which no model seed gives the real outcome: {summary['unexplained']}), "
              f"errors {summary['errors']}; summary: {out / 'summary.json'}")
        for client, c in summary["per_client"].items():
            print(f"  {client}: the model reproduces the real data outcome of {c['reproduced']} of {c['runs']} "
                  f"runs (on at least one of {MODEL_SEEDS} seeds); not reproduced: {c['not_reproduced']}"
                  + "".join(f"; {kind}: {runs}" for kind, runs in c["not_reproduced_by_kind"].items()))
    bad = summary["real_violations"] or summary["model_violations"] or summary["unexplained"] or summary["errors"]
    return 1 if bad or not done else 0


# -- epochlab kafka downtime -----------------------------------------------------------------

def add_downtime(ksub: Any) -> None:
    """``epochlab kafka downtime``."""
    p = ksub.add_parser("downtime", help="seed 002's downtime table measured on a live cluster beside the model's",
                        description="Kill the partition leader of a live 3-broker KRaft cluster RUNS times under "
                                    "an acks=all idempotent producer and a consumer, measure detection, "
                                    "election, metadata propagation, producer and consumer recovery from the "
                                    "brokers' logs and the clients' history, run the same workload on the model "
                                    "with the cluster's settings (and again with the controller delay set to "
                                    "the measured metadata propagation), and print seed 002's table with all "
                                    "three (docs/kafka-run.md). Exit 2 for a usage or environment problem.")
    p.add_argument("--runs", type=positive, default=5, help="leader failures on the live cluster (default 5)")
    p.add_argument("--model-runs", type=positive, default=50, help="model seeds (default 50)")
    p.add_argument("--cluster-dir", help="use the running cluster recorded in this directory")
    p.add_argument("--dir", default="runs/kafka-downtime.cluster",
                   help="directory of the cluster started for the measurement (default runs/kafka-downtime.cluster)")
    p.add_argument("--out", help="write rows and summaries as JSON to this file")
    p.add_argument("--json", action="store_true", help="print rows and summaries as JSON")
    p.set_defaults(handler=_downtime)


def _downtime(args: argparse.Namespace) -> int:
    from epochlab.errors import EpochlabError
    from epochlab.kafka.runs.downtime import PHASES, measure_live, with_model

    def show(row: dict[str, Any]) -> None:
        if not args.json:
            print(f"run {row['run']}: leader {row['leader']} killed; " +
                  ", ".join(f"{key} {row[key]}" for _n, key in PHASES), flush=True)

    try:
        live = measure_live(args.cluster_dir, args.dir, args.runs, show)
    except EpochlabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result = with_model(live, args.model_runs)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print(result["table"], end="")
    return 0
