"""``epochlab kafka run``'s pipeline: one scenario on a live cluster, end to end.

:func:`execute` runs a scenario on a real cluster (:mod:`epochlab.kafka.runs.scenario`), judges
its expectations on the real run, with ``compare`` runs it on the model too
(:mod:`epochlab.kafka.runs.compare`), and writes a run directory (:func:`write_run_dir`):

``README.md`` (report), ``steps.md`` (the step table of the real run), ``timeline.png`` (with
matplotlib), ``steps.json``, ``history.jsonl`` (the real clients' history), ``real.json``,
``model.json`` and ``compare.json`` (with ``--compare``), ``inspect-broker-<id>.json`` (each
replica's partition directory as ``epochlab inspect --json`` shows it, read at the end of the
last step, before crashed brokers are restarted for the next run; running brokers are read
as they run: Kafka writes through the page cache, so every appended batch is visible),
``scenario.toml``, ``state-change.log`` (every broker's ``state.change.logger`` lines about the
run's topic, from its ``server.log``: releases 4.0+ log through log4j 2 here), ``client.log``
(what the run's own clients logged, :mod:`epochlab.kafka.live.client_log`) and, with
``--compare``, ``model-events.txt`` (the model run's engine events).

Both sides report the leaders re-elected across a skipped epoch (``epoch_skips``): a broker
that becomes leader in epoch E while its previous state was leader in an epoch below E - 1
(``Partition.makeLeader``'s "starts at leader epoch E ... Previous leader Some(B) and previous
leader epoch was P" with B the broker itself; the model's "broker B is leader in epoch E (was
leader in epoch P)"). A real run without the brokers' logs cannot tell (``None``).

``epochlab kafka fuzz`` runs each of its schedules through the same pipeline
(:mod:`epochlab.kafka.runs.fuzz`); the command itself is ``epochlab.kafka.run_cli``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from epochlab.errors import ConfigError
from epochlab.kafka.runs.compare import compare as compare_runs
from epochlab.kafka.runs.compare import (fence_lines, first_roles, model_epoch_skips, model_run, model_scenario,
                                         real_epoch_skips, real_fences, restart_roles, restart_startups, restarted,
                                         silence_fences, state_change_lines, summarize_model,
                                         summarize_real, unfenced_lines)
from epochlab.kafka.runs.era import era_refusals, live_generation
from epochlab.kafka.runs.scenario import cluster_settings, run_on_cluster, unmappable
from epochlab.report import picture
from epochlab.report.rundir import write_atomically
from epochlab.report.table import step_rows, table_markdown
from epochlab.sim.config import ClusterConfig

__all__ = ["execute", "write_run_dir"]


def execute(scenario: Any, cluster: Any, compare: bool, out: Path | None,
            client: str = "librdkafka") -> tuple[int, dict[str, Any]]:
    """Run ``scenario`` on ``cluster`` with ``client``'s producers; (exit code, the JSON payload).
    The model runs in the generation of the cluster's release (:func:`live_generation`) and
    follows that release (``kafka.release``), and the expectations of that generation are judged
    on both runs."""
    mode = getattr(cluster, "mode", "kraft")
    why = unmappable(scenario, cluster) + era_refusals(scenario, cluster.version, mode)
    if why:
        return 2, {"scenario": scenario.name, "runnable": False, "why": why}
    generation = live_generation(cluster.version).label
    try:
        real = run_on_cluster(scenario, cluster, generation=generation, client=client)
    except ConfigError as exc:
        return 2, {"scenario": scenario.name, "runnable": False, "why": [str(exc)]}
    real_summary = summarize_real(real)
    state_changes = state_change_lines(cluster, real.topic)
    real_summary["epoch_skips"] = real_epoch_skips(state_changes) if state_changes else None
    restarts = restarted(step_dicts(real.records))
    real_summary["clock_epoch_ms"] = round(real.history.clock_epoch_ms)
    real_summary["restart_startup_ms"] = restart_startups(unfenced_lines(cluster), restarts,
                                                          real.history.clock_epoch_ms)
    real_summary["restart_role_ms"] = restart_roles(state_changes, restarts, real.history.clock_epoch_ms)
    real_summary["first_role_ms"] = first_roles(state_changes, restarts, real.history.clock_epoch_ms)
    settings = cluster_settings(cluster)
    session_ms = int(settings.get("session_timeout_ms", ClusterConfig.session_timeout_ms))
    steps = [(r.executed_at_ms, r.step.action, dict(r.step.params)) for r in real.records[1:]
             if r.error is None and r.executed_at_ms is not None]
    real_summary["silence_fences"] = silence_fences(
        steps, cluster.broker_ids, real_fences(fence_lines(cluster), real.history.clock_epoch_ms), session_ms)
    _, replaced = model_scenario(scenario, settings, client, cluster.version)
    payload: dict[str, Any] = {
        "scenario": scenario.name, "runnable": True,
        "real": {"expectations_hold": real.expectations_hold, "checks": [c.to_dict() for c in real.checks],
                 "topic": real.topic, "seconds": round(real.seconds, 2), "notes": real.notes,
                 "kafka_version": cluster.version, "mode": mode, "client": client, "settings": settings,
                 "settings_differ_from_scenario": replaced, **real_summary},
    }
    ok = real.expectations_hold
    model = None
    if compare:
        t0 = time.monotonic()
        model = model_run(scenario, generation, settings, client, cluster.version)
        payload["model"] = {"expectations_hold": model.passed, "generation": generation,
                            "settings": settings, "settings_replaced": replaced,
                            "checks": [c.to_dict() for c in model.checks],
                            "seconds": round(time.monotonic() - t0, 2), **summarize_model(model, session_ms),
                            "epoch_skips": model_epoch_skips(model.events)}
        agree, diffs = compare_runs(real_summary, payload["model"])
        payload["agree"], payload["differences"] = agree, diffs
        ok = ok and agree
    if out is not None:
        write_run_dir(out, scenario, real, payload, state_changes, model)
        payload["run_dir"] = str(out)
    return (0 if ok else 1), payload


def step_dicts(records: list[Any]) -> list[dict[str, Any]]:
    """A live run's steps as ``steps.json`` keeps them: each step with the time it was
    executed, its outcome or error, and for a cut-changing step when each node's rules took
    effect, for a crash when the broker's JVM exited (``applied_ms``); the run's opening
    record left out."""
    return [{**r.step.to_dict(), "executed_at_ms": r.executed_at_ms, "outcome": r.outcome, "error": r.error,
             **({"applied_ms": {str(n): ms for n, ms in r.applied_ms.items()}}
                if getattr(r, "applied_ms", None) else {})}
            for r in records[1:]]


def write_run_dir(path: Path, scenario: Any, real: Any, payload: dict[str, Any],
                  state_changes: list[str] | None = None, model: Any = None) -> None:
    """Write the run directory of a real run (and the model's, with ``--compare``) at ``path``
    (``epochlab.report.rundir``: written beside it and moved into place when complete)."""
    rows = step_rows(real.records)

    def dump(data: Any) -> str:
        return json.dumps(data, sort_keys=True, indent=2, default=str) + "\n"

    def fill(d: Path) -> None:
        (d / "steps.md").write_text(table_markdown(rows))
        (d / "steps.json").write_text(dump(step_dicts(real.records)))
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
        if real.client_log is not None:
            (d / "client.log").write_text(real.client_log.text())
        for b, data in sorted(real.inspect.items()):
            (d / f"inspect-broker-{b}.json").write_text(dump(data))
        note = picture.save_timeline(real.records, d / "timeline.png", title=f"{scenario.name} (real Kafka)")
        (d / "README.md").write_text(_report(scenario, payload, table_markdown(rows), note))

    write_atomically(path, fill)


def _report(scenario: Any, payload: dict[str, Any], table: str, picture_note: str) -> str:
    real = payload["real"]
    lines = [f"# {scenario.name} on real Kafka {real['kafka_version']} ({real.get('mode', 'kraft')} mode)", "",
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
