"""Log directories written by Kafka's own classes, for checking ``epochlab inspect``.

Everything on disk here is written by Kafka 4.x code driven through JPype: segments, indexes,
the transaction index and producer snapshots by ``UnifiedLog`` (appends as leader and as
follower, ``roll``, ``close``), the leader-epoch checkpoint by ``LeaderEpochFileCache``,
``partition.metadata`` by ``PartitionMetadataFile``, and the broker-level checkpoints
(``replication-offset-checkpoint``, ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``) by ``OffsetCheckpointFile``, as ``ReplicaManager`` and
``LogManager`` write them. Nothing is produced by epochlab's own encoders, so a test that reads
these directories with ``epochlab.ondisk`` compares our parsers with Kafka's writers, and
``DumpLogSegments`` (``epochlab.kafka.classes.dumplog``) gives Kafka's own reading of the same bytes.

:func:`write_broker_dir` writes one broker's directory with every kind of batch Kafka writes
(every codec, keys and headers, idempotent and transactional batches, COMMIT and ABORT markers,
several leader epochs, several segments, a log start offset above 0).
:func:`write_diverged_replicas` writes the directories of three replicas of one partition after
a leader change that left one replica with records no other holds (seed 004's KIP-101 problem
in Kafka's own files), for the multi-replica forensics.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION
from epochlab.kafka.jvm import ensure_jvm
from epochlab.kafka.classes.oracle import _drain, kafka_scheduler

__all__ = ["BrokerDir", "KafkaLogWriter", "write_broker_dir", "write_diverged_replicas"]

TOPIC = "epochlab"
#: a fixed wall clock, so that two runs write the same bytes where Kafka lets them
BASE_TIME_MS = 1_764_000_000_000


@dataclass
class BrokerDir:
    """One broker's log directory as written: its path, node id and per partition the state
    the broker-level checkpoints recorded."""

    path: Path
    node_id: int
    high_watermarks: dict[str, int] = field(default_factory=dict)
    log_start_offsets: dict[str, int] = field(default_factory=dict)
    recovery_points: dict[str, int] = field(default_factory=dict)


class KafkaLogWriter:
    """One partition's ``UnifiedLog`` in ``<broker_dir>/<topic>-<partition>``, with helpers
    that build real ``MemoryRecords`` batches (values as text or 8 big-endian bytes)."""

    def __init__(self, broker_dir: Path, partition: int = 0, *, topic_id: str | None = None,
                 version: str = DEFAULT_KAFKA_VERSION) -> None:
        jpype = ensure_jvm(version)
        self._jpype = jpype
        j = jpype.JClass
        self.broker_dir = Path(broker_dir)
        self.name = f"{TOPIC}-{partition}"
        self.dir = self.broker_dir / self.name
        self.tp = j("org.apache.kafka.common.TopicPartition")(TOPIC, partition)
        self._records = j("org.apache.kafka.common.record.internal.MemoryRecords")
        self._simple = j("org.apache.kafka.common.record.internal.SimpleRecord")
        self._header = j("org.apache.kafka.common.header.internals.RecordHeader")
        self._compression = j("org.apache.kafka.common.compress.Compression")
        self._marker = j("org.apache.kafka.common.record.internal.EndTransactionMarker")
        self._control = j("org.apache.kafka.common.record.internal.ControlRecordType")
        self._origin = j("org.apache.kafka.storage.internals.log.AppendOrigin")
        self._optional = j("java.util.Optional")
        uuid = j("org.apache.kafka.common.Uuid")
        topic = self._optional.of(uuid.fromString(topic_id)) if topic_id else self._optional.empty()
        props = j("java.util.HashMap")()
        props.put("index.interval.bytes", "64")  # an offset/time index entry every few batches
        config = j("org.apache.kafka.storage.internals.log.LogConfig")(props)
        psm = j("org.apache.kafka.storage.internals.log.ProducerStateManagerConfig")(86_400_000, False)
        self._scheduler = kafka_scheduler(version)
        self.log = j("org.apache.kafka.storage.internals.log.UnifiedLog").create(
            j("java.io.File")(str(self.dir)), config, 0, 0, self._scheduler,
            j("org.apache.kafka.storage.log.metrics.BrokerTopicStats")(),
            j("org.apache.kafka.common.utils.Time").SYSTEM, 300_000, psm, 600_000,
            j("org.apache.kafka.storage.internals.log.LogDirFailureChannel")(1), True, topic)
        self._time = BASE_TIME_MS

    # -- batches ------------------------------------------------------------------------------
    def _codec(self, name: str) -> Any:
        return getattr(self._compression, name)().build()

    def records(self, values: Iterable[bytes | int | str], *, keys: Sequence[bytes | None] | None = None,
                headers: Sequence[tuple[str, bytes | None]] = ()) -> Any:
        """``SimpleRecord``\\ s: ints become 8 big-endian bytes, text UTF-8."""
        jpype = self._jpype
        out = []
        for i, v in enumerate(values):
            raw = struct.pack(">Q", v) if isinstance(v, int) else (v.encode() if isinstance(v, str) else v)
            key = None if keys is None or keys[i] is None else jpype.JArray(jpype.JByte)(keys[i])
            hdrs = jpype.JArray(j_header := self._header)(
                [j_header(k, None if hv is None else jpype.JArray(jpype.JByte)(hv)) for k, hv in headers])
            self._time += 1
            out.append(self._simple(self._time, key, jpype.JArray(jpype.JByte)(raw), hdrs))
        return jpype.JArray(self._simple)(out)

    def batch(self, records: Any, *, epoch: int, base_offset: int = 0, codec: str = "none",
              producer: tuple[int, int, int] | None = None, transactional: bool = False) -> Any:
        compression = self._codec(codec)
        if producer is None:
            return self._records.withRecords(base_offset, compression, epoch, records)
        pid, pepoch, seq = producer
        if transactional:
            return self._records.withTransactionalRecords(base_offset, compression, pid, pepoch, seq, epoch, records)
        return self._records.withIdempotentRecords(base_offset, compression, pid, pepoch, seq, epoch, records)

    # -- appends ------------------------------------------------------------------------------
    def append_leader(self, records: Any, *, epoch: int, codec: str = "none",
                      producer: tuple[int, int, int] | None = None, transactional: bool = False) -> tuple[int, int]:
        info = self.log.appendAsLeader(self.batch(records, epoch=epoch, codec=codec, producer=producer,
                                                  transactional=transactional), epoch)
        return int(info.firstOffset()), int(info.lastOffset())

    def append_marker(self, *, epoch: int, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int = 0) -> int:
        """A COMMIT or ABORT marker written by the transaction coordinator's path."""
        kind = self._control.COMMIT if commit else self._control.ABORT
        self._time += 1
        marker = self._records.withEndTransactionMarker(0, self._time, epoch, producer_id, producer_epoch,
                                                         self._marker(kind, coordinator_epoch))
        j = self._jpype.JClass
        # TV_1 (transaction version 1): markers keep the producer epoch (KIP-890's TV_2 bumps it)
        info = self.log.appendAsLeader(marker, epoch, self._origin.COORDINATOR,
                                       j("org.apache.kafka.server.common.RequestLocal").noCaching(),
                                       j("org.apache.kafka.storage.internals.log.VerificationGuard").SENTINEL,
                                       self._jpype.JShort(1))
        return int(info.firstOffset())

    def append_legacy(self, values: Iterable[bytes | int | str], *, magic: int, codec: str = "none",
                      keys: Sequence[bytes | None] | None = None) -> tuple[int, int]:
        """A v0 or v1 message set, as brokers before 4.0 wrote them (``appendAsLeaderWithRecordVersion``,
        the path Kafka keeps for logs written by older releases)."""
        j = self._jpype.JClass
        version = j("org.apache.kafka.common.record.internal.RecordVersion").lookup(self._jpype.JByte(magic))
        type_ = j("org.apache.kafka.common.record.TimestampType")
        ts = type_.NO_TIMESTAMP_TYPE if magic == 0 else type_.CREATE_TIME
        built = self._records.withRecords(self._jpype.JByte(magic), 0, self._codec(codec), ts,
                                          self.records(values, keys=keys))
        info = self.log.appendAsLeaderWithRecordVersion(built, 0, version)
        return int(info.firstOffset()), int(info.lastOffset())

    def append_follower(self, batch: Any, epoch: int) -> None:
        self.log.appendAsFollower(batch, epoch)

    def copy_from(self, leader: KafkaLogWriter, start: int, end: int) -> None:
        """Replicate ``leader``'s batches with base offsets in ``[start, end)`` as a follower
        does: the leader's bytes, appended with ``appendAsFollower``."""
        read = leader.log.read(start, 1 << 30, self._jpype.JClass(
            "org.apache.kafka.server.storage.log.FetchIsolation").LOG_END, True)
        records = read.records
        for b in records.batches():
            if b.baseOffset() >= end:
                break
            buf = self._jpype.JClass("java.nio.ByteBuffer").allocate(b.sizeInBytes())
            b.writeTo(buf)
            buf.flip()
            self.log.appendAsFollower(self._records.readableRecords(buf), b.partitionLeaderEpoch())

    # -- state --------------------------------------------------------------------------------
    def close(self) -> tuple[int, int, int]:
        """Flush and close as a clean shutdown does; returns (HW, log start, recovery point)."""
        hw, start = int(self.log.highWatermark()), int(self.log.logStartOffset())
        self.log.flush(True)
        recovery = int(self.log.recoveryPoint())
        _drain(self._jpype, self._scheduler)
        metadata = self.log.partitionMetadataFile()
        if metadata.isPresent():
            metadata.get().maybeFlush()
        self.log.close()
        return hw, start, recovery


def _write_checkpoints(broker: BrokerDir, version: str) -> None:
    """The broker-level checkpoint files, written by Kafka's ``OffsetCheckpointFile``."""
    jpype = ensure_jvm(version)
    j = jpype.JClass
    failure = j("org.apache.kafka.storage.internals.log.LogDirFailureChannel")(1)
    tp = j("org.apache.kafka.common.TopicPartition")
    checkpoint = j("org.apache.kafka.storage.internals.checkpoint.OffsetCheckpointFile")
    for name, table in (("replication-offset-checkpoint", broker.high_watermarks),
                        ("log-start-offset-checkpoint", broker.log_start_offsets),
                        ("recovery-point-offset-checkpoint", broker.recovery_points)):
        offsets = j("java.util.HashMap")()
        for partition_dir, offset in sorted(table.items()):
            topic, _, partition = partition_dir.rpartition("-")
            offsets.put(tp(topic, int(partition)), j("java.lang.Long")(offset))
        checkpoint(j("java.io.File")(str(broker.path / name)), failure).write(offsets)
    (broker.path / "meta.properties").write_text(
        f"version=1\nnode.id={broker.node_id}\ncluster.id=epochlab-forensics\n", encoding="ascii")


def _finish(broker: BrokerDir, writers: Iterable[KafkaLogWriter], version: str) -> BrokerDir:
    for w in writers:
        hw, start, recovery = w.close()
        broker.high_watermarks[w.name] = hw
        broker.log_start_offsets[w.name] = start
        broker.recovery_points[w.name] = recovery
    _write_checkpoints(broker, version)
    return broker


def write_broker_dir(root: str | Path, *, node_id: int = 1, version: str = DEFAULT_KAFKA_VERSION) -> BrokerDir:
    """One broker's log directory with two partitions exercising every batch kind Kafka writes.

    Partition 0: plain batches in every codec with keys and headers (epoch 0), a leader change
    (epoch 3), an idempotent producer, a committed and an aborted transaction (so a ``.txnindex``
    entry), a segment roll after each group (so several segments and producer snapshots), the
    HW at the log end and the log start offset moved above 0 by a deletion (``DeleteRecords``).
    Partition 1: a few plain batches in one segment, the HW below the log end.
    Partition 2: v0 and v1 message sets (plain, gzip, snappy, lz4) as releases before 4.0 wrote
    them, then a v2 batch (a log that lived through an upgrade).
    """
    broker = BrokerDir(Path(root), node_id)
    broker.path.mkdir(parents=True, exist_ok=True)
    p0 = KafkaLogWriter(broker.path, 0, topic_id="Y2N1Q5pWRkGm6Vd8yKq3Xw", version=version)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        p0.append_leader(p0.records([f"{codec}-{i}" for i in range(3)], keys=[b"k0", None, b"k2"],
                                    headers=[("h1", b"v1"), ("h2", None)]), epoch=0, codec=codec)
    p0.log.roll()
    p0.append_leader(p0.records([7, 8]), epoch=3, producer=(1000, 0, 0))
    p0.append_leader(p0.records([9]), epoch=3, producer=(1000, 0, 2), codec="lz4")
    p0.append_leader(p0.records(["t1", "t2"]), epoch=3, producer=(2000, 1, 0), transactional=True)
    p0.append_marker(epoch=3, producer_id=2000, producer_epoch=1, commit=True, coordinator_epoch=5)
    p0.log.roll()
    p0.append_leader(p0.records(["a1", "a2", "a3"]), epoch=3, producer=(3000, 0, 0), transactional=True,
                     codec="zstd")
    p0.append_leader(p0.records(["between"]), epoch=3)
    p0.append_marker(epoch=3, producer_id=3000, producer_epoch=0, commit=False, coordinator_epoch=6)
    p0.append_leader(p0.records(["tail"]), epoch=3, codec="gzip")
    p0.log.updateHighWatermark(p0.log.logEndOffset())
    reason = ensure_jvm(version).JClass(
        "org.apache.kafka.storage.internals.log.LogStartOffsetIncrementReason").ClientRecordDeletion
    p0.log.maybeIncrementLogStartOffset(4, reason)
    p1 = KafkaLogWriter(broker.path, 1, topic_id="Y2N1Q5pWRkGm6Vd8yKq3Xw", version=version)
    p1.append_leader(p1.records([1, 2, 3]), epoch=2)
    p1.append_leader(p1.records([4]), epoch=2)
    p1.log.updateHighWatermark(3)
    p2 = KafkaLogWriter(broker.path, 2, version=version)
    p2.append_legacy(["v0-a", "v0-b"], magic=0, keys=[b"k", None])
    p2.append_legacy(["v0-gzip-a", "v0-gzip-b"], magic=0, codec="gzip")
    p2.append_legacy(["v1-a"], magic=1)
    p2.append_legacy(["v1-snappy-a", "v1-snappy-b", "v1-snappy-c"], magic=1, codec="snappy")
    p2.append_legacy(["v1-lz4-a", "v1-lz4-b"], magic=1, codec="lz4")
    p2.append_leader(p2.records(["v2-after-upgrade"]), epoch=0)
    p2.log.updateHighWatermark(p2.log.logEndOffset())
    return _finish(broker, (p0, p1, p2), version)


def write_diverged_replicas(root: str | Path, *, version: str = DEFAULT_KAFKA_VERSION) -> list[BrokerDir]:
    """Three replicas of ``epochlab-0`` (brokers 1, 2, 3 under ``root/broker-N``).

    Epoch 1, leader 1: offsets 0-4 replicated to all (HW 5), then 5-7 on broker 1 only (acked
    with acks=1). Broker 1 stops; the controller elects broker 2 in epoch 2, which appends 5-8
    (broker 3 copies them; HW 9). Broker 1's 5-7 exist nowhere else: when it rejoins, the leader
    answers DivergingEpoch (1, 5) and it truncates to 5.
    """
    brokers = [BrokerDir(Path(root) / f"broker-{n}", n) for n in (1, 2, 3)]
    for b in brokers:
        b.path.mkdir(parents=True, exist_ok=True)
    w1, w2, w3 = (KafkaLogWriter(b.path, 0, version=version) for b in brokers)
    for i in range(5):
        w1.append_leader(w1.records([f"e1-{i}"]), epoch=1)
    w2.copy_from(w1, 0, 5)
    w3.copy_from(w1, 0, 5)
    for w in (w1, w2, w3):
        w.log.updateHighWatermark(5)
    w1.append_leader(w1.records(["e1-5", "e1-6"]), epoch=1)
    w1.append_leader(w1.records(["e1-7"]), epoch=1)
    # broker 2 becomes leader in epoch 2 (Partition.makeLeader assigns (2, LEO) to its cache)
    w2.log.assignEpochStartOffset(2, w2.log.logEndOffset())
    for i in range(4):
        w2.append_leader(w2.records([f"e2-{5 + i}"]), epoch=2)
    w3.copy_from(w2, 5, 9)
    for w in (w2, w3):
        w.log.updateHighWatermark(9)
    for b, w in zip(brokers, (w1, w2, w3), strict=True):
        _finish(b, (w,), version)
    return brokers
