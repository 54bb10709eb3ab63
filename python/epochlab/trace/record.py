"""Recording a simulation as a trace: :class:`TraceRecorder`, :func:`recording_traces`,
:func:`export_cluster`.

A :class:`TraceRecorder` is an observer of a cluster (``Cluster(..., observers=[TraceRecorder])``,
or any cluster made inside :func:`recording_traces`): called with the cluster before its brokers
start, it enables the journal of every broker's ``replica.log`` (a Rust ``ReplicaLog``: the
``rust`` backend) and wraps, on the instances only, the engine calls whose
effects are not log operations: the controller's decisions (``Controller._commit``), broker
crash, restart and clean shutdown, and role changes (``Broker.on_leader_and_isr``), plus the
kernel's ``step`` to stamp time. After every kernel event and around every wrapped call the
journals are drained in order, so rows come out in the order things happened. Nothing the
simulation computes changes.

Re-running a run directory with a recorder attached (``epochlab trace export``) is
``epochlab.fuzz.rerun``: it runs schedules and scenarios, which sit above this package.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from epochlab.errors import ConfigError
from epochlab.trace.schema import FLAG_LOSE_UNFLUSHED, FLAG_UNCLEAN, KIND_CODES, schema

if TYPE_CHECKING:
    from epochlab.sim.cluster import Cluster

__all__ = ["TraceRecorder", "export_cluster", "recording_traces"]

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
                raise ConfigError("a trace recorder needs a Rust ReplicaLog (backend 'rust')",
                                  where="Cluster", field="backend", expected="rust",
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

        def recorded_start(*args: Any) -> None:
            self.drain()
            start(*args)
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


@contextmanager
def recording_traces() -> Iterator[list[Cluster]]:
    """Every ``Cluster`` made inside the block records a trace (a :class:`TraceRecorder` among
    its observers); the yielded list receives them, in creation order."""
    from epochlab.sim.cluster import observing_clusters

    made: list[Cluster] = []

    def record(cluster: Cluster) -> TraceRecorder:
        made.append(cluster)
        return TraceRecorder(cluster)

    with observing_clusters(record):
        yield made


def export_cluster(cluster: Cluster, path: str | os.PathLike[str] | None = None) -> Any:
    """The trace of a cluster a :class:`TraceRecorder` observed (written to ``path`` if given)."""
    recorder = next((o for o in cluster.observers if isinstance(o, TraceRecorder)), None)
    if recorder is None:
        raise ConfigError("the cluster has no TraceRecorder among its observers", where="export_cluster",
                          field="observers", expected="a TraceRecorder", got="none")
    table = recorder.table()
    if path is not None:
        from epochlab.trace.io import write_trace

        write_trace(table, path)
    return table
