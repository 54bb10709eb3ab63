"""Recording a simulation as a trace: :class:`TraceRecorder`, :func:`export_cluster`,
:func:`export_run_dir`.

A cluster made with ``Cluster(..., record_trace=True)`` enables the journal of every broker's
``replica.log`` (a Rust ``ReplicaLog``: the ``rust`` and ``python`` backends) and wraps, on
the instances only, the engine calls whose effects are not log operations: the controller's
decisions (``Controller._commit``), broker crash, restart and clean shutdown, and role changes
(``Broker.on_leader_and_isr``), plus the kernel's ``step`` to stamp time. After every kernel
event and around every wrapped call the journals are drained in order, so rows come out in
the order things happened. Nothing the simulation computes changes.
"""

from __future__ import annotations

from dataclasses import dataclass

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from epochlab.errors import ConfigError, TraceError
from epochlab.trace.schema import FLAG_LOSE_UNFLUSHED, FLAG_UNCLEAN, KIND_CODES, schema

if TYPE_CHECKING:
    from epochlab.sim.cluster import Cluster

__all__ = ["TraceRecorder", "export_cluster", "export_run_dir"]

DROP_UNFLUSHED = 7  # journal code of drop_unflushed (a crash's page-cache loss)
FIELDS = ("time_ms", "partition", "kind", "broker", "epoch", "offset", "leader", "record_count",
          "flags", "values", "producer_id", "producer_epoch", "base_sequence")


class TraceRecorder:
    """Collects the rows of one cluster's run; :meth:`table` builds the trace."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.rows: dict[str, list[Any]] = {f: [] for f in FIELDS}
        for broker in cluster.brokers.values():
            log = broker.replica.log
            if not hasattr(log, "enable_journal"):
                raise ConfigError("record_trace needs a Rust ReplicaLog (backend 'rust' or 'python')",
                                  where="Cluster", field="backend", expected="rust | python",
                                  got=cluster.backend)
            log.enable_journal()
        self._wrap()
        self.leader_change()  # the controller's initial state

    # -- rows -------------------------------------------------------------------------------
    def _row(self, kind: str, broker: int | None = None, *, epoch: int | None = None,
             offset: int | None = None, leader: int | None = None, flags: int = 0,
             values: list[int] | None = None, producer: tuple[int, int, int] | None = None) -> None:
        r = self.rows
        r["time_ms"].append(self.cluster.now_ms)
        r["partition"].append(0)
        r["kind"].append(KIND_CODES[kind])
        r["broker"].append(broker)
        r["epoch"].append(epoch)
        r["offset"].append(offset)
        r["leader"].append(leader)
        r["record_count"].append(None if values is None else len(values))
        r["flags"].append(flags)
        r["values"].append(values)
        for name, value in zip(("producer_id", "producer_epoch", "base_sequence"), producer or (None,) * 3):
            r[name].append(value)

    def drain(self, only: int | None = None, fold_crash: bool = False) -> bool:
        """Move journal entries into rows (broker ``only``, or every broker in id order).
        With ``fold_crash``, a ``drop_unflushed`` entry is dropped and ``True`` returned: the
        crash row carries it."""
        dropped = False
        for b in sorted(self.cluster.brokers):
            if only is not None and b != only:
                continue
            j = self.cluster.brokers[b].replica.log.take_journal()
            if not j["kind"]:
                continue
            producers = {i: (pid, pep, seq) for i, pid, pep, seq in zip(
                j["producer_index"], j["producer_id"], j["producer_epoch"], j["base_sequence"])}
            pos = 0
            for i, (k, off, ep, n, fl) in enumerate(zip(j["kind"], j["offset"], j["epoch"], j["record_count"], j["flags"])):
                if k <= 1:
                    values = j["values"][pos:pos + n]
                    pos += n
                    self._row("append_leader" if k == 0 else "append_follower", b, epoch=ep, offset=off,
                              flags=fl, values=values, producer=producers.get(i))
                elif k == DROP_UNFLUSHED:
                    if fold_crash:
                        dropped = True
                    else:
                        self._row("crash", b, offset=off, flags=FLAG_LOSE_UNFLUSHED)
                elif k == KIND_CODES["assign_epoch"]:
                    self._row("assign_epoch", b, epoch=ep, offset=off)
                else:
                    name = {2: "truncate", 3: "truncate_fully", 4: "high_watermark", 6: "flush"}[k]
                    self._row(name, b, offset=off)
        return dropped

    def leader_change(self) -> None:
        c = self.cluster.controller
        unclean = bool(c.elections and c.elections[-1][1] == c.leader_epoch and c.elections[-1][3])
        self._row("leader_change", None, epoch=c.leader_epoch, leader=c.leader,
                  flags=FLAG_UNCLEAN if unclean else 0)

    # -- wrappers ---------------------------------------------------------------------------
    def _wrap(self) -> None:
        kernel, controller = self.cluster.kernel, self.cluster.controller
        step = kernel.step

        def recorded_step() -> bool:
            self.drain()
            ran = step()
            self.drain()
            return ran

        kernel.step = recorded_step  # type: ignore[method-assign]
        commit = controller._commit

        def recorded_commit(*args: Any, **kwargs: Any) -> None:
            before = (controller.leader, controller.leader_epoch)
            self.drain()
            commit(*args, **kwargs)
            if (controller.leader, controller.leader_epoch) != before:
                self.leader_change()

        controller._commit = recorded_commit  # type: ignore[method-assign]
        for b, broker in self.cluster.brokers.items():
            self._wrap_broker(b, broker)

    def _wrap_broker(self, b: int, broker: Any) -> None:
        crash, start, shutdown, lai = broker.crash, broker.start, broker.shutdown_cleanly, broker.on_leader_and_isr

        def recorded_crash(lose_unflushed: bool) -> None:
            was_alive = broker.alive
            self.drain()
            crash(lose_unflushed)
            if not was_alive:
                return
            # The crash row first (it drops the unflushed tail on replay), then the HW reload.
            j_rows = len(self.rows["kind"])
            dropped = self.drain(b, fold_crash=True)
            moved = {f: v[j_rows:] for f, v in self.rows.items()}
            for v in self.rows.values():
                del v[j_rows:]
            self._row("crash", b, flags=FLAG_LOSE_UNFLUSHED if dropped else 0)
            for f, v in moved.items():
                self.rows[f].extend(v)

        def recorded_start() -> None:
            self.drain()
            start()
            self._row("restart", b)

        def recorded_shutdown() -> None:
            was_alive = broker.alive
            self.drain()
            shutdown()
            self.drain(b)
            if was_alive:
                self._row("crash", b)

        def recorded_lai(msg: Any, src: object) -> None:
            before = (broker.replica.role, broker.replica.leader_epoch)
            self.drain()
            # Role rows must precede the log effects of becoming leader/follower.
            j_rows = len(self.rows["kind"])
            lai(msg, src)
            self.drain(b)
            after = (broker.replica.role, broker.replica.leader_epoch)
            if after != before and after[0] in ("leader", "follower") and after[1] is not None:
                moved = {f: v[j_rows:] for f, v in self.rows.items()}
                for v in self.rows.values():
                    del v[j_rows:]
                kind = "become_leader" if after[0] == "leader" else "become_follower"
                self._row(kind, b, epoch=after[1], leader=broker.replica.leader_id)
                for f, v in moved.items():
                    self.rows[f].extend(v)

        broker.crash = recorded_crash
        broker.start = recorded_start
        broker.shutdown_cleanly = recorded_shutdown
        broker.on_leader_and_isr = recorded_lai

    # -- output -----------------------------------------------------------------------------
    def table(self, **metadata: Any) -> Any:
        """The trace so far as a v1 ``pyarrow.Table``."""
        import pyarrow as pa

        self.drain()
        c = self.cluster
        target = schema(min_insync_replicas=c.config.min_insync_replicas,
                        kip101_epoch_cache=c.generation.kip101_epoch_cache,
                        generation=c.generation.label, seed=c.seed,
                        eligible_leader_replicas=c.controller.elr_enabled,
                        wrapper_batches=c.generation.wrapper_batches or None, **metadata)
        n = len(self.rows["kind"])
        columns = []
        for f in target:
            if f.name == "event":
                columns.append(pa.array(range(n), type=f.type))
            else:
                columns.append(pa.array(self.rows[f.name], type=f.type))
        return pa.Table.from_arrays(columns, schema=target)


def export_cluster(cluster: Cluster, path: str | os.PathLike[str] | None = None) -> Any:
    """The trace of a cluster made with ``record_trace=True`` (written to ``path`` if given)."""
    recorder = getattr(cluster, "trace_recorder", None)
    if recorder is None:
        raise ConfigError("the cluster was not made with record_trace=True", where="export_cluster",
                          field="record_trace", expected="True", got="False")
    table = recorder.table()
    if path is not None:
        from epochlab.trace.io import write_trace

        write_trace(table, path)
    return table


def export_run_dir(run_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None = None,
                   *, backend: str = "rust") -> tuple[Any, Any]:
    """Re-run the run of ``run_dir`` with recording on and return ``(trace table, run
    result)``; every run is deterministic, so it is the run the directory describes. A
    directory with ``schedule.json`` (a replay or a fuzz finding) reruns that schedule; one
    with ``scenario.toml`` reruns that very scenario (not a built-in of the same name); an
    older scenario run directory is resolved from its ``config.json``. Written to ``out`` if
    given; ``result`` has ``label``, ``generation`` and ``seed``."""
    from epochlab.scenarios import resolve
    from epochlab.scenarios.loader import load_file
    from epochlab.scenarios.runner import run_scenario
    from epochlab.sim.cluster import recording_traces

    directory = Path(run_dir)
    if (directory / "schedule.json").is_file():
        from epochlab.fuzz.executor import execute
        from epochlab.fuzz.schedule import load_schedule

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
