/*
 * A unit test written the way Kafka's core/src/test/scala/unit/kafka/cluster/PartitionTest.scala
 * holds its tests (release 4.3.1), run against the released jars: it extends Kafka's own
 * kafka.cluster.AbstractPartitionTest (kafka_2.13 test jar), which builds a real Partition on a
 * real LogManager with a MockTime and mocked MetadataCache / DelayedOperations.
 *
 * The finding (docs/kafka-findings/README.md, "kraft-reelected-leader-stale-follower-leo"):
 * in KRaft a broker that led a partition in epoch 0 can learn in one metadata delta that it leads
 * in epoch 2, having missed epoch 1 (in which another broker led and follower F2 truncated).
 * MetadataLoader.handleCommit loads every batch of a commit and MetadataBatchLoader.maybeFlushBatches
 * publishes them as one delta, so ReplicaManager applies only the final state of the partition:
 * Partition.makeLeader(epoch 2) on a partition that is already leader in epoch 0.
 * Partition.makeLeader computes isNewLeader = !isLeader == false, and for a new leader epoch calls
 * Replica.resetReplicaState(isNewLeader = false) (org.apache.kafka.server.replica.Replica), which
 * keeps each follower's logEndOffsetMetadata from epoch 0. Partition.maybeIncrementLeaderHW then
 * takes F2's stale log end offset as if it were current, and checkEnoughReplicasReachOffset
 * acknowledges an acks=all write that ISR member F2 no longer has.
 */
package kafka.cluster

import org.apache.kafka.common.{DirectoryId, Uuid}
import org.apache.kafka.common.compress.Compression
import org.apache.kafka.common.config.TopicConfig
import org.apache.kafka.common.message.FetchResponseData
import org.apache.kafka.common.record.TimestampType
import org.apache.kafka.common.record.internal.{DefaultRecordBatch, MemoryRecords, RecordBatch, SimpleRecord}
import org.apache.kafka.common.requests.FetchRequest
import org.apache.kafka.metadata.{LeaderRecoveryState, MetadataCache, PartitionRegistration}
import org.apache.kafka.server.common.RequestLocal
import org.apache.kafka.server.storage.log.{FetchIsolation, FetchParams}
import org.apache.kafka.storage.internals.log.{AppendOrigin, LogAppendInfo, LogReadInfo}
import org.junit.jupiter.api.Assertions._
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.function.Executable
import org.mockito.Mockito.when

import java.lang
import java.nio.ByteBuffer
import java.util
import java.util.Optional
import java.util.Properties
import scala.jdk.CollectionConverters._
import scala.jdk.OptionConverters.RichOption

class ReelectedLeaderSkippedEpochTest extends AbstractPartitionTest {

  // Leader L is the local broker (AbstractPartitionTest.brokerId); F2 and F3 are followers.
  private val leader = brokerId
  private val f2 = brokerId + 1
  private val f3 = brokerId + 2
  private val replicas = Array(leader, f2, f3)

  /** min.insync.replicas = 2, so an acks=all produce needs the HW to pass it with ISR >= 2. */
  override def createLogProperties(overrides: Map[String, String]): Properties =
    super.createLogProperties(overrides + (TopicConfig.MIN_IN_SYNC_REPLICAS_CONFIG -> "2"))

  @Test
  def testLeaderReelectedAcrossSkippedEpochMustNotKeepStaleFollowerLogEndOffsets(): Unit = {
    leadInEpoch0WithF2AheadOfF3()

    // Epoch 1 never reached this broker: F3 was elected leader in epoch 1 while L was cut off
    // from the controller (but still registered), F2 followed F3 and truncated offset 1
    // (DivergingEpoch: only L had written it), so F2 now holds offset 0 only (LEO 1). Before L
    // heard of epoch 1, L was elected again (epoch 2); when its link came back it caught up on the
    // metadata log in one delta (MetadataLoader.handleCommit), so the only transition it applies
    // is "leader in epoch 0" -> "leader in epoch 2". F2's own first fetch of epoch 2 reached L
    // before L knew epoch 2 (UNKNOWN_LEADER_EPOCH) and F2 is backing off, so L hears nothing
    // from F2 in what follows.
    val isNewLeader = becomeLeaderInEpoch2()

    f3CatchesUpInEpoch2()

    // What a fixed Kafka must do: F2 (in the ISR) has offset 0 only, so the HW must not pass
    // offset 1, and an acks=all produce of offset 1 (requiredOffset 2) must not be acknowledged.
    val f2LogEndOffsetSeenByLeader = partition.getReplica(f2).get.stateSnapshot.logEndOffset
    val hw = partition.localLogOrException.highWatermark
    val (enoughReplicas, ackError) = partition.checkEnoughReplicasReachOffset(2L)
    val context = s"makeLeader(epoch 2) returned isNewLeader=$isNewLeader; the leader still holds F2's log end " +
      s"offset $f2LogEndOffsetSeenByLeader from epoch 0 (Replica.resetReplicaState(isNewLeader = false)), " +
      s"while F2 truncated offset 1 in epoch 1 and holds offset 0 only (log end offset 1)"
    assertAll("re-elected leader across a skipped epoch",
      (() => assertEquals(1L, hw,
        s"high watermark passed offset 1, which ISR member F2 lacks: $context")): Executable,
      (() => assertFalse(enoughReplicas,
        s"checkEnoughReplicasReachOffset(2) acknowledged the acks=all produce of offset 1 " +
          s"(error $ackError) while ISR member F2 lacks it: $context")): Executable
    )
  }

  /**
   * The control: the same sequence, but F2's first fetch of epoch 2, from its real log end offset 1,
   * reaches L before F3 catches up. That fetch overwrites the stale state and the HW stays at 1
   * until F2 has offset 1 again. This passes on Kafka 4.3.1.
   */
  @Test
  def testLeaderReelectedAcrossSkippedEpochWaitsForFollowerThatFetchedInNewEpoch(): Unit = {
    leadInEpoch0WithF2AheadOfF3()
    becomeLeaderInEpoch2()

    // F2 truncated offset 1 in epoch 1 (no record of epoch 1 was written, so its latest epoch is 0).
    val f2Fetch = fetchFollower(partition, f2, fetchOffset = 1L, leaderEpoch = Some(2), lastFetchedEpoch = Some(0))
    assertEquals(Optional.empty(), f2Fetch.divergingEpoch)
    assertEquals(1L, partition.getReplica(f2).get.stateSnapshot.logEndOffset)

    f3CatchesUpInEpoch2()

    assertEquals(1L, partition.localLogOrException.highWatermark,
      "high watermark must wait for ISR member F2, which has offset 0 only")
    val (enoughReplicas, _) = partition.checkEnoughReplicasReachOffset(2L)
    assertFalse(enoughReplicas, "the acks=all produce of offset 1 must wait for F2")

    // Once F2 has fetched offset 1 again, the produce is acknowledged.
    fetchFollower(partition, f2, fetchOffset = 1L, leaderEpoch = Some(2), lastFetchedEpoch = Some(0))
    fetchFollower(partition, f2, fetchOffset = 2L, leaderEpoch = Some(2), lastFetchedEpoch = Some(0))
    assertEquals(2L, partition.localLogOrException.highWatermark)
    assertEquals((true, org.apache.kafka.common.protocol.Errors.NONE), partition.checkEnoughReplicasReachOffset(2L))
  }

  /**
   * Epoch 0, led by L, replicas and ISR [L, F2, F3]: m1 at offset 0 reaches F2 and F3; m2 at offset 1
   * reaches F2 (which then reports LEO 2) but F3's copy is still in flight (F3 reports LEO 1): HW 1.
   */
  private def leadInEpoch0WithF2AheadOfF3(): Unit = {
    assertTrue(makeLeader(topicId, leaderEpoch = 0, isr = replicas, replicas = replicas, partitionEpoch = 0, isNew = true))
    addBrokerEpochToMockMetadataCache(metadataCache, replicas)

    val m1 = appendAcksAll("m1")
    assertEquals(0L, m1.firstOffset)
    fetchFollower(partition, f2, fetchOffset = 0L, leaderEpoch = Some(0))
    fetchFollower(partition, f3, fetchOffset = 0L, leaderEpoch = Some(0))

    val m2 = appendAcksAll("m2")
    assertEquals(1L, m2.firstOffset)
    fetchFollower(partition, f2, fetchOffset = 1L, leaderEpoch = Some(0), lastFetchedEpoch = Some(0))
    fetchFollower(partition, f2, fetchOffset = 2L, leaderEpoch = Some(0), lastFetchedEpoch = Some(0))
    fetchFollower(partition, f3, fetchOffset = 1L, leaderEpoch = Some(0), lastFetchedEpoch = Some(0))

    assertEquals(2L, partition.localLogOrException.logEndOffset)
    assertEquals(2L, partition.getReplica(f2).get.stateSnapshot.logEndOffset)
    assertEquals(1L, partition.getReplica(f3).get.stateSnapshot.logEndOffset)
    assertEquals(1L, partition.localLogOrException.highWatermark)
  }

  /** Partition.makeLeader(epoch 2) on a partition that is leader in epoch 0, same replicas and ISR. */
  private def becomeLeaderInEpoch2(): Boolean =
    makeLeader(topicId, leaderEpoch = 2, isr = replicas, replicas = replicas, partitionEpoch = 2, isNew = false)

  /**
   * F3 led epoch 1 (its leader epoch cache ends with epoch 1 at offset 1), so its first fetch of
   * epoch 2 carries lastFetchedEpoch 1: L answers DivergingEpoch(epoch 0, end offset 2), the start of
   * L's epoch 2. F3 truncates to its own end of epoch 0 (offset 1) and fetches offset 1, then offset 2.
   */
  private def f3CatchesUpInEpoch2(): Unit = {
    val diverging = fetchFollower(partition, f3, fetchOffset = 1L, leaderEpoch = Some(2), lastFetchedEpoch = Some(1))
    assertEquals(Optional.of(new FetchResponseData.EpochEndOffset().setEpoch(0).setEndOffset(2L)), diverging.divergingEpoch)
    assertEquals(0, diverging.fetchedData.records.sizeInBytes)

    fetchFollower(partition, f3, fetchOffset = 1L, leaderEpoch = Some(2), lastFetchedEpoch = Some(0))
    // This fetch reports F3's log end offset 2: Partition.maybeIncrementLeaderHW takes the minimum
    // log end offset over the (maximal) ISR [L, F2, F3], with whatever L holds for F2 at this point.
    fetchFollower(partition, f3, fetchOffset = 2L, leaderEpoch = Some(2), lastFetchedEpoch = Some(0))
    assertEquals(2L, partition.getReplica(f3).get.stateSnapshot.logEndOffset)
  }

  /** A producer's acks=all batch of one record; the leader assigns its offset. */
  private def appendAcksAll(value: String): LogAppendInfo =
    partition.appendRecordsToLeader(
      createRecords(util.List.of(new SimpleRecord(value.getBytes)), baseOffset = 0L),
      origin = AppendOrigin.CLIENT,
      requiredAcks = -1,
      RequestLocal.withThreadConfinedCaching
    )

  // The helpers below are PartitionTest's own (private there), as in Kafka 4.3.1.

  private def makeLeader(
    topicId: Option[Uuid],
    leaderEpoch: Int,
    isr: Array[Int],
    replicas: Array[Int],
    partitionEpoch: Int,
    isNew: Boolean,
    partition: Partition = partition
  ): Boolean = {
    partition.createLogIfNotExists(
      isNew = isNew,
      isFutureReplica = false,
      offsetCheckpoints,
      topicId
    )
    val partitionRegistration = new PartitionRegistration.Builder()
      .setLeader(brokerId)
      .setLeaderRecoveryState(LeaderRecoveryState.RECOVERED)
      .setLeaderEpoch(leaderEpoch)
      .setIsr(isr)
      .setPartitionEpoch(partitionEpoch)
      .setReplicas(replicas)
      .setDirectories(DirectoryId.unassignedArray(replicas.length))
      .build()
    val newLeader = partition.makeLeader(partitionRegistration, isNew = isNew, offsetCheckpoints, topicId)
    assertTrue(partition.isLeader)
    assertFalse(partition.partitionState.isInflight)
    assertEquals(topicId, partition.topicId)
    assertEquals(leaderEpoch, partition.getLeaderEpoch)
    assertEquals(isr.toSet.asJava, partition.partitionState.isr)
    assertEquals(isr.toSet.asJava, partition.partitionState.maximalIsr)
    assertEquals(partitionEpoch, partition.getPartitionEpoch)
    newLeader
  }

  private def followerFetchParams(
    replicaId: Int,
    replicaEpoch: Long = 1L,
    maxWaitMs: Long = 0L,
    minBytes: Int = 1,
    maxBytes: Int = Int.MaxValue
  ): FetchParams = {
    new FetchParams(
      replicaId,
      replicaEpoch,
      maxWaitMs,
      minBytes,
      maxBytes,
      FetchIsolation.LOG_END,
      Optional.empty()
    )
  }

  private def fetchFollower(
    partition: Partition,
    replicaId: Int,
    fetchOffset: Long,
    logStartOffset: Long = 0L,
    maxBytes: Int = Int.MaxValue,
    leaderEpoch: Option[Int] = None,
    lastFetchedEpoch: Option[Int] = None,
    fetchTimeMs: Long = time.milliseconds(),
    topicId: Uuid = Uuid.ZERO_UUID,
    replicaEpoch: Option[Long] = Option.empty
  ): LogReadInfo = {
    val fetchParams = followerFetchParams(
      replicaId,
      maxBytes = maxBytes,
      replicaEpoch = if (replicaEpoch.isEmpty) defaultBrokerEpoch(replicaId) else replicaEpoch.get
    )

    val fetchPartitionData = new FetchRequest.PartitionData(
      topicId,
      fetchOffset,
      logStartOffset,
      maxBytes,
      leaderEpoch.map(Int.box).toJava,
      lastFetchedEpoch.map(Int.box).toJava
    )

    partition.fetchRecords(
      fetchParams,
      fetchPartitionData,
      fetchTimeMs,
      maxBytes,
      minOneMessage = true,
      updateFetchState = true
    )
  }

  private def addBrokerEpochToMockMetadataCache(metadataCache: MetadataCache, brokers: Array[Int]): Unit = {
    brokers.foreach { broker =>
      when(metadataCache.getAliveBrokerEpoch(broker)).thenReturn(Optional.of(defaultBrokerEpoch(broker)))
    }
  }

  private def createRecords(records: lang.Iterable[SimpleRecord], baseOffset: Long, partitionLeaderEpoch: Int = 0): MemoryRecords = {
    val buf = ByteBuffer.allocate(DefaultRecordBatch.sizeInBytes(records))
    val builder = MemoryRecords.builder(
      buf, RecordBatch.CURRENT_MAGIC_VALUE, Compression.NONE, TimestampType.LOG_APPEND_TIME,
      baseOffset, time.milliseconds, partitionLeaderEpoch)
    records.forEach(builder.append)
    builder.build()
  }
}
