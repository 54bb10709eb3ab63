"""A re-elected KRaft leader's stale view of a follower, run on Kafka's own ``Partition``.

The finding ``docs/kafka-findings/README.md`` (``kraft-reelected-leader-stale-follower-leo``):
a broker that led a partition in epoch 0 catches up on the metadata log in one delta and goes
straight to "leader in epoch 2"; it missed epoch 1, in which another broker led and follower F2
truncated. ``Partition.makeLeader`` then sees ``isNewLeader == false`` and
``Replica.resetReplicaState(isNewLeader = false)`` keeps each follower's log end offset from
epoch 0, so the high watermark can pass a record an ISR member lacks and
``checkEnoughReplicasReachOffset`` acknowledges an acks=all write that member does not have.

:func:`check_release` replays that at the ``Partition`` level with the release's own classes,
in this process's JVM (``epochlab.kafka.jvm``; Mockito mocks ``Partition``'s collaborators, a
real ``UnifiedLog`` is set with ``setLog``). Brokers: leader L = 1, F2 = 2, F3 = 3, replicas and
ISR [1, 2, 3] throughout, ``min.insync.replicas=2``:

1. ``makeLeader(epoch 0)``; L appends offset 0; F2 and F3 fetch it; L appends offset 1; F2
   fetches it and reports LEO 2, F3 reports LEO 1 (its copy of offset 1 is still in flight):
   HW 1.
2. (Epoch 1, not seen by L: F3 leads, F2 truncates offset 1; F3 has epoch 1 in its cache.)
3. ``makeLeader(epoch 2)`` on L, which was leader all along in its own view.
4. F3 fetches with ``lastFetchedEpoch`` 1 (``DivergingEpoch``), then from offset 1 with epoch 0,
   then at offset 2: L takes the minimum LEO over the ISR, with F2's remembered 2.
5. ``checkEnoughReplicasReachOffset(2)``: is the acks=all produce of offset 1 acknowledged?

The control runs the same steps on a fresh partition with one more fetch before step 4: F2's
own first fetch of epoch 2 from offset 1 (its real LEO), which corrects L's view.

Each release runs in its own process (:func:`check_in_subprocess`, ``epochlab kafka
stale-follower``): JPype starts one JVM per process and never restarts it. Fetches carry broker
epoch -1, which skips the KIP-903 broker-epoch check (``Replica.updateFetchStateOrThrow``); the
mocked ``MetadataCache`` answers nothing, which only ISR expansion would ask (every replica is
in the ISR here).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from epochlab.errors import ConfigError
from epochlab.kafka.jars import jar_dir, mockito_dir, release_for
from epochlab.kafka.jvm import ensure_jvm, running_release

__all__ = ["F2_REAL_LOG_END_OFFSET", "FIRST_KRAFT_LINE", "StaleFollowerResult", "add", "check_in_subprocess",
           "check_release", "check_releases", "format_table", "release_line"]

#: KRaft brokers exist from 3.3 on (KIP-833 marked KRaft production-ready in 3.3).
FIRST_KRAFT_LINE = (3, 3)
#: F2's log end offset after its truncation in the epoch L missed: it has offset 0 only.
F2_REAL_LOG_END_OFFSET = 1

_TOPIC = "epochlab"
_LEADER, _F2, _F3 = 1, 2, 3
_REPLICAS = (_LEADER, _F2, _F3)


@dataclass(frozen=True)
class StaleFollowerResult:
    """What Kafka ``release``'s ``Partition`` did in the sequence and in the control.

    ``new_leader_in_epoch_2``: ``makeLeader(epoch 2)``'s answer (``isNewLeader``).
    ``f2_log_end_offset_seen``: F2's LEO in L's replica state right after it; F2's real LEO is
    :data:`F2_REAL_LOG_END_OFFSET`. ``f3_diverging_epoch``: (epoch, end offset) L answered F3's
    fetch with ``lastFetchedEpoch`` 1, or None. ``high_watermark`` / ``acknowledged``: L's HW
    after F3 caught up and whether ``checkEnoughReplicasReachOffset(2)`` completed (the produce
    of offset 1 acknowledged), with ``ack_error`` its ``Errors`` name. ``control_*``: the same
    after F2's own fetch of epoch 2 from offset 1.

    >>> r = StaleFollowerResult("4.1.0", "17.0.15", 1, False, 2, (0, 2), 2, True, "NONE", 1, False)
    >>> r.affected
    True
    """

    release: str
    java: str
    high_watermark_epoch_0: int
    new_leader_in_epoch_2: bool
    f2_log_end_offset_seen: int
    f3_diverging_epoch: tuple[int, int] | None
    high_watermark: int
    acknowledged: bool
    ack_error: str
    control_high_watermark: int
    control_acknowledged: bool

    @property
    def affected(self) -> bool:
        """The HW passed offset 1 (and the write of it was acknowledged) while ISR member F2,
        whose real LEO is 1, lacks it."""
        return self.high_watermark > F2_REAL_LOG_END_OFFSET

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict, ``affected`` and ``f2_log_end_offset_real`` included."""
        out = asdict(self)
        out["f3_diverging_epoch"] = list(self.f3_diverging_epoch) if self.f3_diverging_epoch else None
        out["f2_log_end_offset_real"] = F2_REAL_LOG_END_OFFSET
        out["affected"] = self.affected
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StaleFollowerResult:
        """The inverse of :meth:`to_dict` (derived keys ignored)."""
        fields = {k: v for k, v in data.items() if k not in ("affected", "f2_log_end_offset_real")}
        diverging = fields.get("f3_diverging_epoch")
        fields["f3_diverging_epoch"] = tuple(diverging) if diverging else None
        return cls(**fields)


def release_line(version: str) -> tuple[int, int]:
    """(major, minor) of ``version``; :class:`ConfigError` for a malformed version or one whose
    brokers cannot run in KRaft mode (before 3.3)."""
    release_for(version)  # raises ConfigError for a malformed version
    major, minor = (int(p) for p in version.split(".")[:2])
    if (major, minor) < FIRST_KRAFT_LINE:
        raise ConfigError(f"Kafka {version}: KRaft brokers exist from 3.3 on", where="--release",
                          field="release", expected=">= 3.3", got=version)
    return major, minor


# -- the per-release adapter -------------------------------------------------------------------
#
# Where each class lives, by the first release line that has it there; a line takes the last
# entry at or below it. Kafka's sources: core/src/main/scala/kafka/cluster/Partition.scala
# (class Partition's constructor, makeLeader, appendRecordsToLeader, fetchRecords,
# checkEnoughReplicasReachOffset) and core/src/main/scala/kafka/log/UnifiedLog.scala (object
# UnifiedLog.apply) up to 4.0; storage/src/main/java/.../log/UnifiedLog.java (UnifiedLog.create)
# from 4.1.
_CLASSES: tuple[tuple[tuple[int, int], dict[str, str]], ...] = (
    ((3, 3), {
        "UnifiedLog": "kafka.log.UnifiedLog",                           # UnifiedLog.apply (Scala)
        "LogConfig": "kafka.log.LogConfig",                             # case class LogConfig(props, overrides)
        "Scheduler": "kafka.utils.KafkaScheduler",
        "BrokerTopicStats": "kafka.server.BrokerTopicStats",
        "LogDirFailureChannel": "kafka.server.LogDirFailureChannel",
        "FetchParams": "kafka.server.FetchParams",                      # kafka/server/FetchDataInfo.scala
        "RequestLocal": "kafka.server.RequestLocal",
        "OffsetCheckpoints": "kafka.server.checkpoints.OffsetCheckpoints",
        "LeaderState": "org.apache.kafka.common.message.LeaderAndIsrRequestData$LeaderAndIsrPartitionState",
        "Records": "org.apache.kafka.common.record",                    # MemoryRecords, SimpleRecord
        "MetadataVersion": "org.apache.kafka.server.common.MetadataVersion",
        "AlterPartitionListener": "kafka.cluster.AlterPartitionListener",
        "DelayedOperations": "kafka.cluster.DelayedOperations",
        "MetadataCache": "kafka.server.MetadataCache",
        "LogManager": "kafka.log.LogManager",
        "AlterPartitionManager": "kafka.server.AlterPartitionManager",
    }),
    ((3, 4), {"ProducerStateManagerConfig": "kafka.log.ProducerStateManagerConfig"}),
    ((3, 5), {  # the storage and server-common modules take these over, as Java classes
        "LogConfig": "org.apache.kafka.storage.internals.log.LogConfig",
        "Scheduler": "org.apache.kafka.server.util.KafkaScheduler",
        "LogDirFailureChannel": "org.apache.kafka.storage.internals.log.LogDirFailureChannel",
        "FetchParams": "org.apache.kafka.storage.internals.log.FetchParams",
        "FetchIsolation": "org.apache.kafka.storage.internals.log.FetchIsolation",
        "AppendOrigin": "org.apache.kafka.storage.internals.log.AppendOrigin",
        "ProducerStateManagerConfig": "org.apache.kafka.storage.internals.log.ProducerStateManagerConfig",
        "LogOffsetsListener": "org.apache.kafka.storage.internals.log.LogOffsetsListener",
    }),
    ((3, 7), {"VerificationGuard": "org.apache.kafka.storage.internals.log.VerificationGuard"}),
    ((4, 0), {  # ZooKeeper removed; LeaderAndIsrRequest.PartitionState wraps the KRaft delta
        "BrokerTopicStats": "org.apache.kafka.storage.log.metrics.BrokerTopicStats",
        "FetchParams": "org.apache.kafka.server.storage.log.FetchParams",
        "FetchIsolation": "org.apache.kafka.server.storage.log.FetchIsolation",
        "RequestLocal": "org.apache.kafka.server.common.RequestLocal",
        "OffsetCheckpoints": "org.apache.kafka.storage.internals.checkpoint.OffsetCheckpoints",
        "LeaderState": "org.apache.kafka.common.requests.LeaderAndIsrRequest$PartitionState",
    }),
    ((4, 1), {  # UnifiedLog.java; Replica.java (server/src/main/java/.../server/replica/Replica.java)
        "UnifiedLog": "org.apache.kafka.storage.internals.log.UnifiedLog",
        "MetadataCache": "org.apache.kafka.metadata.MetadataCache",
    }),
    ((4, 2), {  # makeLeader(PartitionRegistration, isNew, ...)
        "LeaderState": "org.apache.kafka.metadata.PartitionRegistration",
        "AlterPartitionListener": "org.apache.kafka.server.partition.AlterPartitionListener",
        "TransactionVersion": "org.apache.kafka.server.common.TransactionVersion",
    }),
    ((4, 3), {"Records": "org.apache.kafka.common.record.internal"}),
    ((4, 4), {
        "LogManager": "org.apache.kafka.storage.internals.log.LogManager",
        "AlterPartitionManager": "org.apache.kafka.server.partition.AlterPartitionManager",
    }),
)


def _classes(line: tuple[int, int]) -> dict[str, str]:
    merged: dict[str, str] = {}
    for since, names in _CLASSES:
        if line >= since:
            merged.update(names)
    return merged


class _Kafka:
    """One release's ``Partition`` and ``UnifiedLog`` in the calls the check makes, each call
    shaped for the release line (:data:`_CLASSES` and the version tests below)."""

    def __init__(self, jpype: Any, version: str, directory: Path) -> None:
        self.j = jpype
        self.line = release_line(version)
        self.names = _classes(self.line)
        self.directory = directory
        self._none = self.scala_object("scala.None")
        self._mockito = self.cls("org.mockito.Mockito")
        self._time = self.cls("org.apache.kafka.common.utils.Time").SYSTEM
        self._scheduler = self._start_scheduler()
        #: the Kafka call under way, named in the error when it fails
        self.step = "construction"

    def cls(self, name: str) -> Any:
        return self.j.JClass(self.names.get(name, name))

    def scala_object(self, name: str) -> Any:
        """The instance of Scala ``object name`` (its class ``name$``'s static ``MODULE$``)."""
        return getattr(self.j.JClass(f"{name}$"), "MODULE$")

    def mock(self, name: str) -> Any:
        return self._mockito.mock(self.cls(name).class_)

    def close(self) -> None:
        self._scheduler.shutdown()

    # -- construction ---------------------------------------------------------------------------
    def _start_scheduler(self) -> Any:
        if self.line < (3, 5):   # kafka.utils.KafkaScheduler(threads, threadNamePrefix, daemon)
            scheduler = self.cls("Scheduler")(1, "epochlab-stale-follower-", True)
        else:                    # org.apache.kafka.server.util.KafkaScheduler(threads, daemon, prefix)
            scheduler = self.cls("Scheduler")(1, True, "epochlab-stale-follower-")
        scheduler.startup()
        return scheduler

    def _log_config(self) -> Any:
        props = self.cls("java.util.Properties")()
        props.put("min.insync.replicas", "2")
        if self.line < (3, 5):   # case class LogConfig(props: java.util.Map[_, _], overriddenConfigs: Set[String])
            return self.cls("LogConfig")(props, self.scala_object("scala.collection.immutable.Set").empty())
        return self.cls("LogConfig")(props)

    def _broker_topic_stats(self) -> Any:
        if (3, 6) <= self.line < (3, 8):    # BrokerTopicStats(configOpt: java.util.Optional[KafkaConfig])
            return self.cls("BrokerTopicStats")(self.cls("java.util.Optional").empty())
        if (3, 8) <= self.line < (4, 0):    # BrokerTopicStats(remoteStorageEnabled: Boolean)
            return self.cls("BrokerTopicStats")(False)
        return self.cls("BrokerTopicStats")()

    def new_log(self, topic: str) -> Any:
        """A fresh ``UnifiedLog`` of partition 0 of ``topic`` in ``directory/topic-0``: the
        factory of each line with its defaults spelled out (300 s transaction timeout, one day
        of producer-id expiration, checks every 10 min, a clean shutdown, no topic id)."""
        j, line = self.j, self.line
        folder = self.cls("java.io.File")(str(self.directory / f"{topic}-0"))
        args: list[Any] = [folder, self._log_config(), j.JLong(0), j.JLong(0), self._scheduler,
                           self._broker_topic_stats(), self._time, j.JInt(300_000)]
        if line < (3, 4):       # maxProducerIdExpirationMs: Int
            args.append(j.JInt(86_400_000))
        elif line < (3, 6):     # ProducerStateManagerConfig(producerIdExpirationMs)
            args.append(self.cls("ProducerStateManagerConfig")(86_400_000))
        else:                   # ProducerStateManagerConfig(producerIdExpirationMs, transactionVerificationEnabled)
            args.append(self.cls("ProducerStateManagerConfig")(86_400_000, False))
        args += [j.JInt(600_000), self.cls("LogDirFailureChannel")(1), True]
        if line >= (4, 1):      # UnifiedLog.create(..., lastShutdownClean, Optional<Uuid> topicId)
            args.append(self.cls("java.util.Optional").empty())
            return self.cls("UnifiedLog").create(*args)
        # UnifiedLog.apply(..., topicId: Option[Uuid], keepPartitionMetadataFile, numRemainingSegments, ...)
        args += [self._none, False, self.cls("java.util.concurrent.ConcurrentHashMap")()]
        if line == (3, 5):      # remoteStorageSystemEnable, remoteLogManager: Option, logOffsetsListener
            args += [False, self._none, self.cls("LogOffsetsListener").NO_OP_OFFSETS_LISTENER]
        elif line >= (3, 6):    # remoteStorageSystemEnable, logOffsetsListener
            args += [False, self.cls("LogOffsetsListener").NO_OP_OFFSETS_LISTENER]
        return self.cls("UnifiedLog").apply(*args)

    def new_partition(self, topic: str, log: Any) -> Any:
        """``new Partition(...)`` of partition 0 of ``topic`` with ``log`` set (``setLog``):
        the collaborators are Mockito mocks; replica.lag.time.max.ms 30 s; the local broker is L."""
        j, line = self.j, self.line
        tp = self.cls("org.apache.kafka.common.TopicPartition")(topic, 0)
        args: list[Any] = [tp, j.JLong(30_000)]
        if line < (3, 7):       # interBrokerProtocolVersion: MetadataVersion (gone with ZooKeeper in 4.0)
            args.append(self.cls("MetadataVersion").latest())
        elif line < (4, 0):     # MetadataVersion.latest() split into latestProduction() / latestTesting()
            args.append(self.cls("MetadataVersion").latestProduction())
        args.append(j.JInt(_LEADER))
        if line >= (3, 5):      # localBrokerEpochSupplier: () => Long (KIP-903)
            args.append(j.JProxy("scala.Function0", dict={"apply": lambda: j.JClass("java.lang.Long")(-1),
                                                          "apply$mcJ$sp": lambda: -1}))
        args += [self._time] + [self.mock(n) for n in ("AlterPartitionListener", "DelayedOperations",
                                                      "MetadataCache", "LogManager", "AlterPartitionManager")]
        if line >= (3, 7):      # _topicId: Option[Uuid]
            args.append(self._none)
        partition = self.cls("kafka.cluster.Partition")(*args)
        partition.setLog(log, False)
        return partition

    # -- the calls of the sequence ----------------------------------------------------------------
    def make_leader(self, partition: Any, leader_epoch: int, is_new: bool) -> bool:
        """``makeLeader`` with L leader, replicas and ISR [1, 2, 3], partition epoch = leader
        epoch (each election bumps both); returns ``isNewLeader``."""
        j, line = self.j, self.line
        self.step = f"makeLeader(epoch {leader_epoch})"
        checkpoints = self.mock("OffsetCheckpoints")
        if line >= (4, 2):      # makeLeader(partitionRegistration, isNew, checkpoints, topicId, targetDirectoryId)
            ints = j.JArray(j.JInt)(list(_REPLICAS))
            uuid = self.cls("org.apache.kafka.common.Uuid")
            registration = (self.cls("org.apache.kafka.metadata.PartitionRegistration$Builder")()
                            .setReplicas(ints).setIsr(ints).setDirectories(j.JArray(uuid)([uuid.ZERO_UUID] * 3))
                            .setLeader(j.JClass("java.lang.Integer")(_LEADER))
                            .setLeaderRecoveryState(self.cls("org.apache.kafka.metadata.LeaderRecoveryState").RECOVERED)
                            .setLeaderEpoch(j.JClass("java.lang.Integer")(leader_epoch))
                            .setPartitionEpoch(j.JClass("java.lang.Integer")(leader_epoch)).build())
            return bool(partition.makeLeader(registration, is_new, checkpoints, self._none, self._none))
        replicas = self.cls("java.util.ArrayList")()
        for r in _REPLICAS:
            replicas.add(j.JClass("java.lang.Integer")(r))
        state = (self.cls("LeaderState")().setTopicName(str(partition.topic())).setPartitionIndex(0)
                 .setControllerEpoch(1)
                 .setLeader(_LEADER).setLeaderEpoch(leader_epoch).setIsr(replicas)
                 .setPartitionEpoch(leader_epoch).setReplicas(replicas).setIsNew(is_new))
        if line >= (3, 7):      # makeLeader(partitionState, checkpoints, topicId, targetDirectoryId)
            return bool(partition.makeLeader(state, checkpoints, self._none, self._none))
        return bool(partition.makeLeader(state, checkpoints, self._none))

    def append(self, partition: Any, value: int) -> None:
        """``appendRecordsToLeader`` of one record, acks=all (-1), origin CLIENT."""
        j, line = self.j, self.line
        self.step = f"appendRecordsToLeader(value {value})"
        pkg = self.names["Records"]
        simple = j.JClass(f"{pkg}.SimpleRecord")
        record = simple(j.JArray(j.JByte)(value.to_bytes(8, "big")))
        if line >= (3, 8):      # KIP-390: MemoryRecords.withRecords(Compression, SimpleRecord...)
            compression = self.cls("org.apache.kafka.common.compress.Compression").NONE
        else:
            compression = j.JClass(f"{pkg}.CompressionType").NONE
        records = j.JClass(f"{pkg}.MemoryRecords").withRecords(compression, j.JArray(simple)([record]))
        if line < (3, 5):       # object AppendOrigin { case object Client }; object RequestLocal.NoCaching
            args = [self.scala_object("kafka.log.AppendOrigin$Client"), j.JInt(-1),
                    self.cls("RequestLocal").NoCaching()]
        elif line < (4, 0):
            args = [self.cls("AppendOrigin").CLIENT, j.JInt(-1), self.cls("RequestLocal").NoCaching()]
        else:
            args = [self.cls("AppendOrigin").CLIENT, j.JInt(-1), self.cls("RequestLocal").noCaching()]
        if line == (3, 6):      # verificationGuard: Object = null
            args.append(None)
        elif line >= (3, 7):    # verificationGuard: VerificationGuard = VerificationGuard.SENTINEL
            args.append(self.cls("VerificationGuard").SENTINEL)
        if line >= (4, 2):      # transactionVersion: Short = TransactionVersion.TV_UNKNOWN
            args.append(j.JShort(self.cls("TransactionVersion").TV_UNKNOWN))
        partition.appendRecordsToLeader(records, *args)

    def fetch(self, partition: Any, replica_id: int, fetch_offset: int, last_fetched_epoch: int | None,
              current_leader_epoch: int) -> tuple[int, int] | None:
        """A follower's ``fetchRecords`` (broker epoch -1, updateFetchState); returns the
        ``DivergingEpoch`` (epoch, end offset) of the answer, or None."""
        j, line = self.j, self.line
        self.step = (f"fetchRecords(replica {replica_id}, offset {fetch_offset}, lastFetchedEpoch "
                     f"{last_fetched_epoch}, leader epoch {current_leader_epoch})")
        optional, integer = self.cls("java.util.Optional"), j.JClass("java.lang.Integer")
        request_version = j.JShort(self.cls("org.apache.kafka.common.protocol.ApiKeys").FETCH.latestVersion())
        # maxWaitMs 0, minBytes 1, maxBytes 1 MiB; the follower's broker epoch -1 (KIP-903, 3.5+)
        limits = [j.JLong(0), j.JInt(1), j.JInt(1 << 20)]
        if line < (3, 5):       # case class FetchParams(requestVersion, replicaId, maxWaitMs, minBytes,
            #                     maxBytes, isolation: FetchIsolation, clientMetadata: Option)
            params = self.cls("FetchParams")(request_version, j.JInt(replica_id), *limits,
                                             self.scala_object("kafka.server.FetchLogEnd"), self._none)
        elif line < (4, 1):     # FetchParams(requestVersion, replicaId, replicaEpoch, ..., clientMetadata: Optional)
            params = self.cls("FetchParams")(request_version, j.JInt(replica_id), j.JLong(-1), *limits,
                                             self.cls("FetchIsolation").LOG_END, optional.empty())
        else:                   # FetchParams(replicaId, replicaEpoch, ...): the request version is gone
            params = self.cls("FetchParams")(j.JInt(replica_id), j.JLong(-1), *limits,
                                             self.cls("FetchIsolation").LOG_END, optional.empty())
        last = optional.empty() if last_fetched_epoch is None else optional.of(integer(last_fetched_epoch))
        data = self.cls("org.apache.kafka.common.requests.FetchRequest$PartitionData")(
            self.cls("org.apache.kafka.common.Uuid").ZERO_UUID, j.JLong(fetch_offset), j.JLong(0), j.JInt(1 << 20),
            optional.of(integer(current_leader_epoch)), last)
        info = partition.fetchRecords(params, data, j.JLong(self._time.milliseconds()), j.JInt(1 << 20), True, True)
        if line < (3, 5):       # case class LogReadInfo(..., divergingEpoch: Option[EpochEndOffset], ...)
            diverging, present = info.divergingEpoch(), info.divergingEpoch().isDefined()
        elif line < (4, 2):     # LogReadInfo.java: public final Optional<EpochEndOffset> divergingEpoch
            diverging, present = info.divergingEpoch, info.divergingEpoch.isPresent()
        else:                   # LogReadInfo.java became a record: divergingEpoch()
            diverging, present = info.divergingEpoch(), info.divergingEpoch().isPresent()
        if not present:
            return None
        epoch = diverging.get()
        return int(epoch.epoch()), int(epoch.endOffset())

    def follower_log_end_offset(self, partition: Any, replica_id: int) -> int:
        """The follower's LEO in the leader's replica state (``Replica.stateSnapshot``)."""
        return int(partition.getReplica(replica_id).get().stateSnapshot().logEndOffset())

    def check_enough_replicas(self, partition: Any, offset: int) -> tuple[bool, str]:
        """``checkEnoughReplicasReachOffset``: (completed, ``Errors`` name)."""
        self.step = f"checkEnoughReplicasReachOffset({offset})"
        answer = partition.checkEnoughReplicasReachOffset(self.j.JLong(offset))
        return bool(answer._1()), str(answer._2().name())


def _run(kafka: _Kafka, topic: str, control: bool) -> dict[str, Any]:
    """The sequence (module docs) on a fresh log and partition of ``topic``; ``control`` adds
    F2's fetch of epoch 2 from its real LEO before F3 catches up."""
    log = kafka.new_log(topic)
    partition = kafka.new_partition(topic, log)
    seen: dict[str, Any] = {}
    kafka.make_leader(partition, 0, is_new=True)
    kafka.append(partition, 1)                       # offset 0
    kafka.fetch(partition, _F2, 0, None, 0)
    kafka.fetch(partition, _F3, 0, None, 0)
    kafka.append(partition, 2)                       # offset 1
    kafka.fetch(partition, _F2, 1, 0, 0)
    kafka.fetch(partition, _F2, 2, 0, 0)             # F2: LEO 2
    kafka.fetch(partition, _F3, 1, 0, 0)             # F3: LEO 1, offset 1 in flight
    seen["high_watermark_epoch_0"] = int(log.highWatermark())
    seen["new_leader_in_epoch_2"] = kafka.make_leader(partition, 2, is_new=False)
    seen["f2_log_end_offset_seen"] = kafka.follower_log_end_offset(partition, _F2)
    if control:
        kafka.fetch(partition, _F2, F2_REAL_LOG_END_OFFSET, 0, 2)
    seen["f3_diverging_epoch"] = kafka.fetch(partition, _F3, 1, 1, 2)   # F3 led epoch 1
    kafka.fetch(partition, _F3, 1, 0, 2)             # after truncating to min(end offset, its LEO 1)
    kafka.fetch(partition, _F3, 2, 0, 2)             # F3: LEO 2
    seen["high_watermark"] = int(log.highWatermark())
    seen["acknowledged"], seen["ack_error"] = kafka.check_enough_replicas(partition, 2)
    log.close()
    return seen


def check_release(version: str, directory: Path | None = None) -> StaleFollowerResult:
    """Run the sequence and the control on Kafka ``version``'s classes in this process's JVM
    (started with the release's jars and Mockito, or already carrying exactly those).

    ``directory`` holds the two logs (a temporary one, removed afterwards, by default). Raises
    :class:`ConfigError` for a release before 3.3, a release or Mockito not resolved
    (``epochlab kafka jars --all-generations``), a JVM carrying another release, or a Kafka
    call of the sequence that fails (the call and Java's exception in the message).
    """
    from epochlab.kafka.classes.oracle import scratch_directory

    release_line(version)
    jar_dir(version, resolve=False)
    jpype = ensure_jvm(version, extra=(mockito_dir(resolve=False),))
    java = str(jpype.JClass("java.lang.System").getProperty("java.version"))
    owned = directory is None
    work = scratch_directory() if directory is None else Path(directory)
    kafka = None
    try:
        kafka = _Kafka(jpype, version, work)
        main = _run(kafka, _TOPIC, control=False)
        control = _run(kafka, f"{_TOPIC}-control", control=True)
    except jpype.JException as exc:
        step = kafka.step if kafka is not None else "construction"
        raise ConfigError(f"Kafka {version}: {step} failed: {_java_error(exc)}",
                          where="kafka.cluster.Partition", field="release",
                          expected="a release whose Partition API the adapter knows", got=version) from exc
    finally:
        if kafka is not None:
            kafka.close()
        if owned:
            shutil.rmtree(work, ignore_errors=True)
    return StaleFollowerResult(release=version, java=java, control_high_watermark=control["high_watermark"],
                               control_acknowledged=control["acknowledged"], **main)


def _java_error(exc: Any) -> str:
    text = f"{exc.getClass().getName()}: {exc.getMessage()}"
    cause = exc.getCause()
    while cause is not None and cause.getCause() is not None:
        cause = cause.getCause()
    return text if cause is None else f"{text} (root cause {cause.getClass().getName()}: {cause.getMessage()})"


def check_in_subprocess(version: str, timeout_s: float = 300) -> StaleFollowerResult:
    """:func:`check_release` in a new process (``epochlab kafka stale-follower --release V
    --json``), so that this process's JVM, if any, is not involved; a failure there is raised
    here as :class:`ConfigError` with the child's last line of stderr."""
    release_line(version)
    cmd = [sys.executable, "-m", "epochlab", "kafka", "stale-follower", "--release", version, "--json"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise ConfigError(f"Kafka {version}: no answer within {timeout_s:g} s", where=" ".join(cmd[1:]),
                          field="release", expected="exit 0", got="timeout") from exc
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ConfigError(f"Kafka {version}: {last.removeprefix('epochlab: error: ')}", where=" ".join(cmd[1:]),
                          field="release", expected="exit 0", got=done.returncode)
    return StaleFollowerResult.from_dict(json.loads(done.stdout)[0])


def check_releases(versions: list[str]) -> list[StaleFollowerResult]:
    """Each of ``versions``: in this process when it is the only one and this process has no
    JVM yet (or one carrying it), else one process each, in order."""
    if len(versions) == 1 and running_release() in (None, versions[0]):
        return [check_release(versions[0])]
    return [check_in_subprocess(v) for v in versions]


def format_table(results: list[StaleFollowerResult]) -> str:
    """The results as a Markdown table, one row per release (the one in docs/kafka-releases.md)."""
    def yes(flag: bool) -> str:
        return "yes" if flag else "no"

    lines = [("| release | makeLeader(epoch 2) new leader | F2 LEO seen (real 1) | F3 DivergingEpoch "
              "| HW | acks=all offset 1 acknowledged | control HW | control acknowledged | affected |"),
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        diverging = "none" if r.f3_diverging_epoch is None else "({}, {})".format(*r.f3_diverging_epoch)
        lines.append(f"| {r.release} | {yes(r.new_leader_in_epoch_2)} | {r.f2_log_end_offset_seen} | {diverging} "
                     f"| {r.high_watermark} | {yes(r.acknowledged)} | {r.control_high_watermark} "
                     f"| {yes(r.control_acknowledged)} | **{yes(r.affected)}** |")
    return "\n".join(lines)
