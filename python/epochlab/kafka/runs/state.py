"""What a scenario run on a real cluster looks like to the scenario layer: snapshots.

A :class:`~epochlab.observe.Snapshot` of the real cluster joins two sources:

* the controller's view through the Admin API (:class:`~epochlab.kafka.live.clients.KafkaAdmin`):
  leader, ISR, the leader's epoch and high watermark (ListOffsets at the leader), and the last
  stable offset when the scenario uses transactions; in ZooKeeper mode corrected by the
  controller's own record of the partition in ZooKeeper, which the brokers' metadata lags
  behind (:meth:`RealView._recorded_state`);
* every replica's log read from its broker's data directory while the broker runs (Kafka
  writes segments through the page cache, so a reader sees every appended batch at once):
  the ``.log`` segments with the Rust parser (``epochlab._core.parse_segment``; the
  preallocated indexes are not read), ``leader-epoch-checkpoint`` and the broker's
  ``replication-offset-checkpoint``.

What the real cluster does not show, and what stands in for it: a follower's high watermark
is its last checkpoint (written every 5 s, ``replica.high.watermark.checkpoint.interval.ms``),
capped by its log end offset; a replica is *alive* while its JVM runs and is not paused; its
*role* is ``leader`` when the controller's metadata names it and its epoch is known: from its
ListOffsets answer, else from its leader-epoch cache on disk (:meth:`RealView._epoch`). During a partition the Admin
API is asked through the brokers still connected to the controller and to the harness
(a leader cut off from the controller keeps answering that it leads).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from epochlab import _core
from epochlab.errors import KafkaFormatError
from epochlab.kafka.live.clients import KafkaAdmin, PartitionState, decode_value
from epochlab.kafka.live.cluster import CLIENT, LocalCluster
from epochlab.observe import ReplicaView, Snapshot

__all__ = ["DiskReplica", "RealView", "read_replica"]


@dataclass
class DiskReplica:
    """One replica as its data directory holds it: data batches ``(base, last, epoch,
    values)`` (control batches left out, their offsets stay gaps), the leader-epoch cache
    ``(epoch, start offset)``, the log start and end offsets and the checkpointed HW."""

    broker: int
    batches: tuple[tuple[int, int, int, tuple[int, ...]], ...] = ()
    epochs: tuple[tuple[int, int], ...] = ()
    log_start_offset: int = 0
    log_end_offset: int = 0
    checkpoint_hw: int | None = None
    problems: list[str] = field(default_factory=list)


def read_replica(data_dir: Path, broker: int, topic: str, partition: int = 0) -> DiskReplica:
    """Read ``<data_dir>/<topic>-<partition>``; an absent directory is an empty replica.
    Values are 8-byte big-endian integers; a record of another shape is reported in
    ``problems`` and left out."""
    out = DiskReplica(broker)
    pdir = data_dir / f"{topic}-{partition}"
    if not pdir.is_dir():
        return out
    batches = []
    for seg in sorted(pdir.glob("*.log")):
        try:
            dump = _core.parse_segment(seg.read_bytes(), str(seg))
        except (OSError, KafkaFormatError) as exc:
            out.problems.append(f"{seg}: {exc}")
            continue
        for b in dump["batches"]:
            out.log_end_offset = max(out.log_end_offset, int(b["last_offset"]) + 1)
            if b["is_control"]:
                continue
            values = []
            for r in b["records"]:
                try:
                    values.append(decode_value(r["value"], "int64"))
                except ValueError:
                    out.problems.append(f"{seg}: offset {r['offset']}: not an 8-byte value")
            epoch = int(b["partition_leader_epoch"])
            batches.append((int(b["base_offset"]), int(b["last_offset"]), epoch, tuple(values)))
    out.batches = tuple(batches)
    if batches:
        out.log_start_offset = batches[0][0]
    elif not out.log_end_offset:
        names = sorted(pdir.glob("*.log"))
        out.log_end_offset = out.log_start_offset = int(names[-1].stem) if names else 0
    ckpt = pdir / "leader-epoch-checkpoint"
    if ckpt.is_file():
        try:
            got = _core.parse_leader_epoch_checkpoint(ckpt.read_bytes(), str(ckpt))
            out.epochs = tuple((int(e), int(o)) for e, o in got["entries"])
        except (OSError, KafkaFormatError) as exc:
            out.problems.append(f"{ckpt}: {exc}")
    hw_file = data_dir / "replication-offset-checkpoint"
    if hw_file.is_file():
        try:
            got = _core.parse_offset_checkpoint(hw_file.read_bytes(), str(hw_file))
            for t, p, off in got["entries"]:
                if t == topic and int(p) == partition:
                    out.checkpoint_hw = int(off)
        except (OSError, KafkaFormatError) as exc:
            out.problems.append(f"{hw_file}: {exc}")
    return out


class RealView:
    """Snapshots of one topic's partition 0 on a :class:`LocalCluster`. ``cuts``: the one-way
    cuts in force (from :class:`~epochlab.kafka.live.faults.Faults`), to pick brokers whose
    metadata is the controller's."""

    def __init__(self, cluster: LocalCluster, topic: str, replicas: tuple[int, ...], with_lso: bool) -> None:
        self.cluster = cluster
        self.topic = topic
        self.replicas = replicas
        self.with_lso = with_lso
        self._admin = KafkaAdmin(cluster.bootstrap_servers)
        self.last: PartitionState | None = None
        self.admin_errors = 0
        self.stale_answers = 0
        self.max_epoch = 0

    def alive(self, broker: int) -> bool:
        return self.cluster.is_running(broker) and not self.cluster.nodes[broker].paused

    def reachable(self, broker: int, cuts: set[tuple[Any, Any]]) -> bool:
        """Running, not paused, and connected both ways to the harness."""
        return self.alive(broker) and (CLIENT, broker) not in cuts and (broker, CLIENT) not in cuts

    def _majority(self, cuts: set[tuple[Any, Any]]) -> str | None:
        """Bootstrap of the reachable brokers connected both ways to every controller;
        ``None`` when every reachable broker is (any broker will do)."""
        if not cuts:
            return None
        reach = [b for b in self.cluster.broker_ids if self.reachable(b, cuts)]
        ok = [b for b in reach if not any((b, c) in cuts or (c, b) in cuts for c in self.cluster.controller_ids)]
        if ok == reach:
            return None
        return ",".join(self.cluster.nodes[b].address for b in ok)

    def admin_state(self, cuts: set[tuple[Any, Any]]) -> PartitionState | None:
        """The controller's view now, or ``None`` when no broker answered. The leader is asked
        for its epoch and HW only when it runs and the harness reaches it."""
        boot = self._majority(cuts)
        if boot == "":
            return None
        admin = self._admin if boot is None else KafkaAdmin(boot, only_bootstrap=True)
        try:
            meta = admin.describe_partition(self.topic, 0, timeout_s=1.5, ask_leader=False)
            if meta.leader is not None and meta.leader in self.cluster.nodes and self.reachable(meta.leader, cuts):
                meta = admin.describe_partition(self.topic, 0, timeout_s=1.5, with_lso=self.with_lso)
        except Exception:  # noqa: BLE001 - no broker answered (elections, cuts): unknown now
            self.admin_errors += 1
            return None
        meta = self._recorded_state(meta)
        last = self.last
        if (last is not None and last.leader_epoch is not None and meta.leader_epoch is not None
                and meta.leader_epoch < last.leader_epoch):
            # a broker that has not caught up with the controller answered (a leader just
            # healed from a partition still says it leads in its old epoch): epochs only grow
            self.stale_answers += 1
            return last
        self.last = meta
        self.max_epoch = max(self.max_epoch, meta.leader_epoch or 0)
        return meta

    def _recorded_state(self, meta: PartitionState) -> PartitionState:
        """In ZooKeeper mode, what the partition's record in ZooKeeper
        (``ZkCluster.partition_record``) says of the leader the metadata names:

        * its ISR: the leader writes an ISR change there itself (``Partition.updateIsr``), and
          the brokers' metadata learns of it only when the controller propagates it
          (``ReplicaManager.maybePropagateIsrChanges``, seconds later);
        * its epoch, when the leader answered ListOffsets without one (before 2.1, KIP-320): the
          epoch cache on its disk may say nothing of it (a 0.11 - 2.0 leader writes its epoch
          there only with its first append, and one that lost power has none); and when the
          leader is dead and the controller has not noticed yet (an ISR shrink bumps the epoch
          in ZooKeeper mode), as the model's snapshot of the controller's leader has it.

        A record naming another leader than the metadata wins: the brokers' metadata is behind
        the controller's decision (on 0.11.0.0 here every broker's metadata kept naming a
        SIGKILLed leader for the 15 s of a ``wait_until``, while ZooKeeper named the new one),
        and the model reports the controller's leader. That leader's epoch and ISR are then
        the record's (the leader was not asked: its HW is unknown until the metadata
        catches up)."""
        record = getattr(self.cluster, "partition_record", None)
        if record is None:
            return meta
        got = record(self.topic)
        leader, isr, epoch = (got.get("leader"), got.get("isr"), got.get("leader_epoch")) if got else (None,) * 3
        if not (isinstance(leader, int) and isinstance(epoch, int) and isinstance(isr, list)
                and all(isinstance(b, int) for b in isr)):
            return meta
        if leader != (-1 if meta.leader is None else meta.leader):
            return replace(meta, leader=None if leader < 0 else leader, isr=tuple(isr),
                           leader_epoch=epoch if leader >= 0 else None, high_watermark=None,
                           last_stable_offset=None)
        if meta.leader is None:
            return meta
        meta = replace(meta, isr=tuple(isr))
        if meta.leader_epoch is not None or epoch < 0:
            return meta
        if meta.high_watermark is None and self.alive(meta.leader):
            return meta  # a live leader that has not answered does not act as one yet
        return replace(meta, leader_epoch=epoch)

    def _epoch(self, state: PartitionState | None, disk: dict[int, DiskReplica]) -> int | None:
        """The leader's epoch: its ListOffsets answer, else the latest entry of its epoch cache
        when that is not older than the last epoch seen (a leader refuses ListOffsets while its
        HW is below the start of its epoch: for a moment after an election, and for good when
        strict min ISR holds the HW, as after an unclean election to a lone replica)."""
        if state is None or state.leader is None:
            return None
        if state.leader_epoch is not None:
            return state.leader_epoch
        d = disk.get(state.leader)
        if d is None or not d.epochs or not self.alive(state.leader):
            return None
        latest = d.epochs[-1][0]
        return latest if latest >= self.max_epoch else None

    def disk(self) -> dict[int, DiskReplica]:
        return {b: read_replica(self.cluster.nodes[b].data_dir, b, self.topic) for b in self.replicas}

    def snapshot(self, time_ms: int, cuts: set[tuple[Any, Any]],
                 admin: bool = True) -> tuple[Snapshot, dict[int, DiskReplica]]:
        """The cluster now (the admin state is the last known one when no broker answers, or
        without ``admin``: the data directories are read in a few ms, the Admin API takes tens)."""
        state = (self.admin_state(cuts) if admin else None) or self.last
        disk = self.disk()
        leader = state.leader if state is not None else None
        epoch = self._epoch(state, disk)
        views = []
        for b in self.replicas:
            d = disk[b]
            is_leader = leader == b
            if is_leader and state is not None and state.high_watermark is not None:
                hw = state.high_watermark
            else:
                hw = min(d.checkpoint_hw or 0, d.log_end_offset)
            lso = state.last_stable_offset if is_leader and state and state.last_stable_offset is not None else hw
            # a leader acts as one once it answers ListOffsets (right after an election it
            # refuses for a moment): until then the partition counts as unavailable
            acting = is_leader and epoch is not None
            views.append(ReplicaView(broker=b, alive=self.alive(b), role="leader" if acting else "follower",
                                     leader_epoch=d.epochs[-1][0] if d.epochs else None,
                                     log_start_offset=d.log_start_offset, log_end_offset=d.log_end_offset,
                                     high_watermark=hw, batches=d.batches, last_stable_offset=lso))
        snap = Snapshot(time_ms=time_ms, leader=leader, leader_epoch=epoch,
                        isr=tuple(state.isr) if state is not None else (), offline=leader is None,
                        replicas=tuple(views))
        return snap, disk
