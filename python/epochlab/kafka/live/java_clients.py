"""Kafka's own Java producer as a live-run client, recording the history the checker reads.

The model's producer is the Java client (``epochlab.sim.producer``: its retries, its request
timeout that closes the connection, its epoch bumps); the harness's default clients are
librdkafka's (:mod:`epochlab.kafka.live.clients`), whose timing differs (``socket.timeout.ms``, a
delivery report per message). :class:`JavaRecordingProducer` runs
``org.apache.kafka.clients.producer.KafkaProducer`` of the cluster's own release in this
process's JVM (JPype, :func:`epochlab.kafka.jvm.ensure_jvm`) behind the interface of
:class:`~epochlab.kafka.live.clients.RecordingProducer`, so a run can use either (``epochlab kafka run
--client java``) and the model compares with the client that ran.

Recording: ``send`` ``invoke`` when the run sends the value; a thread of the producer's own
hands the values to ``KafkaProducer.send`` in the order sent. ``KafkaProducer.send`` blocks its
caller while the topic's partitions are missing from its metadata (``waitOnMetadata``, up to
``max.block.ms``), as after a re-bootstrap when no broker it knows is available
(``metadata.recovery.strategy``, ``rebootstrap`` by default since 4.0): with every broker down
that held a run's schedule for 60 s at each send, where it now holds only that thread, as it
would an application's sending thread. Transaction calls wait until the values sent before
them are handed over. The send's ``Callback`` records ``ok`` with the offset, or the error:
``fail`` when the record was certainly not written (refused whole by the broker; expired in the
accumulator before it was ever sent: Kafka's "Expiring N record(s)" before any attempt; or
refused inside ``send`` itself, which ``KafkaProducer.doSend`` reports through the callback,
not by throwing: ``max.block.ms`` passed waiting for metadata or
for buffer space, ``BUFFER_EXHAUSTED`` as the model names it),
``info`` otherwise (a timeout or a disconnection after it was sent may have written it). The
error name is the protocol error Kafka's ``Errors.forException`` gives the exception, and
``DELIVERY_TIMEOUT`` for ``delivery.timeout.ms`` expiring, as the model names it.

Settings: the scenario's :class:`~epochlab.sim.config.ProducerConfig` under the Java names.
``batch_size_records`` and ``buffer_memory_records`` count records; the Java client counts
bytes. A new batch's buffer is ``max(batch.size, the upper bound of its first record)``
(``RecordAccumulator.append``, ``AbstractRecords.estimateSizeInBytesUpperBound``) and a record
joins a batch while ``MemoryRecordsBuilder.hasRoomFor`` says it fits. The upper bound is loose
(21 bytes of record overhead where ours take 6), so with ``batch.size=1`` a second 8-byte
record still fits into the first one's buffer when both are appended before the sender drains
the batch: Kafka's Java client put m11 and m12 in one request where the model sent two
(``epochlab kafka fuzz`` run 1, docs/kafka-run.md). Each record therefore carries the
:data:`MARKER_HEADER` (3 bytes), which makes a second record overflow that slack, so
``batch.size=1`` is one record per batch, the model's default; ``n`` records per batch are
``batch.size`` = :data:`BATCH_OVERHEAD` + n x :data:`RECORD_BYTES`; ``buffer.memory`` holds the
model's ``buffer_memory_records`` in such batches (:func:`java_buffer_memory`), at least
Kafka's minimum (``tests/test_java_batches.py`` checks both with
Kafka's own classes). Values travel as 8-byte big-endian integers.
"""

from __future__ import annotations

import queue
import struct
import threading
import time
import uuid
from typing import Any

from epochlab.errors import ConfigError
from epochlab.kafka.live.clients import COMMIT_WAIT_S, CommitAnswers, History, decode_value, end_transaction
from epochlab.sim.config import ConsumerConfig, ProducerConfig

__all__ = ["BATCH_OVERHEAD", "FIRST_RECORD_BOUND", "MARKER_HEADER", "RECORD_BYTES", "JavaRecordingConsumer", "JavaRecordingProducer", "java_consumer_settings",
           "java_producer_settings"]

#: A header every record of the Java producer carries (key ``"e"``, empty value: 3 bytes in a
#: v2 record), so that the batch buffer ``batch.size=1`` gives holds one record (module doc).
MARKER_HEADER = ("e", b"")

#: A v2 record batch's header (``DefaultRecordBatch.RECORD_BATCH_OVERHEAD``).
BATCH_OVERHEAD = 61

#: The bytes one of our records takes in a v2 batch, rounded up: 18 (an 8-byte value, no key,
#: the marker header, the varint framing with a timestamp delta under 64 ms), 19 with a
#: delta from the batch's first record of 64 ms to 8.2 s; at 19 per record a batch holds n of
#: either kind for n up to 17.
RECORD_BYTES = 19


#: Kafka's upper bound of one of our records in a batch of its own (with the marker header):
#: the buffer a new batch takes when ``batch.size`` is smaller
#: (``AbstractRecords.estimateSizeInBytesUpperBound``).
FIRST_RECORD_BOUND = 96


def java_batch_size(records: int) -> int:
    """``batch.size`` for batches of ``records`` of ours."""
    return 1 if records <= 1 else BATCH_OVERHEAD + records * RECORD_BYTES


def java_buffer_memory(records: int, per_batch: int) -> int:
    """``buffer.memory`` that holds ``records`` of ours in batches of ``per_batch``: every
    batch takes a buffer of ``max(batch.size, FIRST_RECORD_BOUND)`` from the pool
    (``RecordAccumulator.append`` -> ``BufferPool.allocate``), at least Kafka's minimum."""
    per_batch = max(1, per_batch)
    batches = -(-max(1, records) // per_batch)
    return max(batches * max(java_batch_size(per_batch), FIRST_RECORD_BOUND), 16384)


#: Errors after which the record was certainly not written (the broker refused the batch whole).
_DEFINITE = frozenset({"MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "INVALID_RECORD", "CORRUPT_MESSAGE",
                       "TOPIC_AUTHORIZATION_FAILED", "INVALID_REQUIRED_ACKS", "UNKNOWN_TOPIC_OR_PARTITION"})


def java_producer_settings(config: ProducerConfig, bootstrap: str, client_id: str) -> dict[str, str]:
    """The Java client's properties for a scenario's producer configuration."""
    out = {
        "bootstrap.servers": bootstrap, "client.id": client_id,
        "acks": "all" if config.acks == "all" else config.acks,
        "enable.idempotence": str(bool(config.enable_idempotence or config.transactional_id)).lower(),
        "retries": str(config.retries), "retry.backoff.ms": str(config.retry_backoff_ms),
        "request.timeout.ms": str(config.request_timeout_ms),
        "delivery.timeout.ms": str(max(config.delivery_timeout_ms, config.request_timeout_ms + config.linger_ms)),
        "max.in.flight.requests.per.connection": str(config.max_in_flight_requests_per_connection),
        "linger.ms": str(config.linger_ms), "max.block.ms": str(config.max_block_ms),
        "batch.size": str(java_batch_size(config.batch_size_records)),
        "buffer.memory": str(java_buffer_memory(config.buffer_memory_records, config.batch_size_records)),
        "key.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
        "value.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
    }
    if config.socket_connection_setup_timeout_ms is not None:  # else Kafka's default, 10 s
        out["socket.connection.setup.timeout.ms"] = str(config.socket_connection_setup_timeout_ms)
        out["socket.connection.setup.timeout.max.ms"] = str(config.socket_connection_setup_timeout_max_ms)
    if config.metadata_recovery_strategy is not None:  # else the release's default (4.0+: rebootstrap)
        out["metadata.recovery.strategy"] = config.metadata_recovery_strategy
    if config.transactional_id is not None:
        out["transactional.id"] = config.transactional_id
        out["transaction.timeout.ms"] = str(config.transaction_timeout_ms)
    return out


class JavaRecordingProducer:
    """Kafka's Java producer of release ``version`` for one partition, recording each send and
    its outcome into ``history``. Same methods as
    :class:`~epochlab.kafka.live.clients.RecordingProducer` (``send``, ``poll``, ``flush``, the
    transaction calls, ``close``)."""

    def __init__(self, bootstrap: str, topic: str, history: History, config: ProducerConfig | None = None,
                 name: str = "producer", partition: int = 0, version: str | None = None) -> None:
        from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION
        from epochlab.kafka.jvm import ensure_jvm

        self.config = config or ProducerConfig()
        self.topic, self.partition, self.name, self.history = topic, partition, name, history
        self._jpype = jpype = ensure_jvm(version or DEFAULT_KAFKA_VERSION)
        j = jpype.JClass
        history.start_session(name)
        props = j("java.util.Properties")()
        for k, v in java_producer_settings(self.config, bootstrap, name).items():
            props.setProperty(k, v)
        self._producer = j("org.apache.kafka.clients.producer.KafkaProducer")(props)
        self._record = j("org.apache.kafka.clients.producer.ProducerRecord")
        self._errors = j("org.apache.kafka.common.protocol.Errors")
        self._bytes = jpype.JArray(jpype.JByte)
        self._integer = j("java.lang.Integer")
        self._headers = j("java.util.List").of(j("org.apache.kafka.common.header.internals.RecordHeader")(
            MARKER_HEADER[0], self._bytes(MARKER_HEADER[1])))
        self._outstanding = 0
        self._cond = threading.Condition()
        self._txn_number = 0
        self._txn_values: list[int] | None = None
        self._sends: queue.Queue[int | None] = queue.Queue()
        if self.config.enable_idempotence or self.config.transactional_id:
            history.idempotent.add(name)
        # The topic's metadata now: the first send() of a producer that has none blocks the
        # caller until a broker gives it (KafkaProducer.waitOnMetadata, up to max.block.ms),
        # 8.9 s in a kafka fuzz run whose leader was cut off, while the model's producer asks
        # for it without holding up the sends. The model of a Java run is told so
        # (ProducerConfig.metadata_at_start, set by epochlab.kafka.runs.compare.model_scenario),
        # so that its first send, too, finds the leader known.
        self._producer.partitionsFor(topic)
        if self.config.transactional_id is not None:
            self._producer.initTransactions()
        self._sender = threading.Thread(target=self._send_loop, name=f"{name}-send", daemon=True)
        self._sender.start()

    # -- sends ------------------------------------------------------------------------------
    def send(self, value: int) -> None:
        """Record the send and queue the value for the sending thread; returns at once."""
        self.history.record(self.name, "invoke", "send", value=value, acks=self.config.acks)
        if self._txn_values is not None:
            self._txn_values.append(value)
        with self._cond:
            self._outstanding += 1
        self._sends.put(value)

    def _send_loop(self) -> None:
        """The sending thread: each queued value to ``KafkaProducer.send``, in order, until the
        ``None`` that :meth:`close` queues. Attached to the JVM as a daemon thread, so a send
        still blocked when the process ends does not hold the JVM up."""
        thread = self._jpype.JClass("java.lang.Thread")
        thread.attachAsDaemon()
        try:
            while True:
                value = self._sends.get()
                try:
                    if value is None:
                        return
                    self._hand_over(value)
                finally:
                    self._sends.task_done()
        finally:
            thread.detach()

    def _hand_over(self, value: int) -> None:
        """``KafkaProducer.send`` of one value. A send that throws (the producer closed) or
        fails on this side before reaching Java is recorded ``fail``: it was certainly not
        written. One refused through the callback inside ``send`` (``max.block.ms`` passed) is
        recorded by the callback (:meth:`_callback`)."""
        try:
            record = self._record(self.topic, self._integer(self.partition), None, None,  # no timestamp, no key
                                  self._bytes(struct.pack(">Q", value)), self._headers)
            self._producer.send(record, self._callback(value))
        except Exception as exc:  # noqa: BLE001 - recorded, and the thread goes on with the next value
            error = self._name(exc) if isinstance(exc, self._jpype.JException) else type(exc).__name__
            self._done()
            self.history.record(self.name, "fail", "send", value=value, error=error, acks=self.config.acks)

    def _callback(self, value: int) -> Any:
        acks = self.config.acks

        def on_completion(metadata: Any, exc: Any) -> None:
            try:
                if exc is None:
                    offset = int(metadata.offset()) if acks != "0" and metadata.hasOffset() else None
                    self.history.record(self.name, "ok", "send", value=value, offset=offset, acks=acks)
                else:
                    name = self._name(exc)
                    # called back on the sending thread, so inside send() itself: KafkaProducer.
                    # doSend hands an ApiException raised before the record reached the accumulator
                    # (max.block.ms passed in waitOnMetadata or BufferPool.allocate) to the
                    # callback instead of throwing it; every other callback runs on its I/O thread
                    refused = threading.current_thread() is self._sender
                    kind = "fail" if refused or name in _DEFINITE else "info"
                    self.history.record(self.name, kind, "send", value=value, error=name, acks=acks)
            finally:
                self._done()

        return self._jpype.JProxy("org.apache.kafka.clients.producer.Callback",
                                  dict={"onCompletion": on_completion})

    def _name(self, exc: Any) -> str:
        message = str(exc.getMessage() or "")
        if "Expiring" in message and "record" in message:
            return "DELIVERY_TIMEOUT"
        if str(exc.getClass().getSimpleName()) == "BufferExhaustedException":
            return "BUFFER_EXHAUSTED"  # the model's name; Errors.forException says REQUEST_TIMED_OUT
        return str(self._errors.forException(exc).name())

    def _done(self) -> None:
        with self._cond:
            self._outstanding -= 1
            self._cond.notify_all()

    def poll(self, timeout_s: float = 0.0) -> int:
        """Outcomes are recorded by the Java client's own thread as they come: nothing to
        serve here (librdkafka's client needs its ``poll``); waits ``timeout_s`` and returns
        the number of sends still outstanding."""
        if timeout_s > 0:
            time.sleep(timeout_s)
        with self._cond:
            return self._outstanding

    def flush(self, timeout_s: float = 30.0) -> int:
        """Wait up to ``timeout_s`` for outstanding sends; the number still outstanding."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._outstanding and time.monotonic() < deadline:
                self._cond.wait(min(0.05, max(0.0, deadline - time.monotonic())))
            return self._outstanding

    # -- transactions -----------------------------------------------------------------------
    def _handed_over(self) -> None:
        """Wait until every value sent so far has been handed to ``KafkaProducer.send`` (or the
        sending thread has ended)."""
        with self._sends.all_tasks_done:
            while self._sends.unfinished_tasks and self._sender.is_alive():
                self._sends.all_tasks_done.wait(0.1)

    def begin_transaction(self) -> None:
        self._handed_over()
        self.history.record(self.name, "invoke", "begin_txn")
        try:
            self._producer.beginTransaction()
        except self._jpype.JException as exc:
            self.history.record(self.name, "fail", "begin_txn", error=self._name(exc))
            raise ConfigError(f"beginTransaction failed: {exc}", where=self.name, field="transaction",
                              expected="a transaction", got=self._name(exc)) from None
        self._txn_number += 1
        self._txn_values = []
        self.history.record(self.name, "ok", "begin_txn", value=self._txn_number)

    def commit_transaction(self, timeout_s: float = 30.0) -> bool:
        return self._end("commit")

    def abort_transaction(self, timeout_s: float = 30.0) -> bool:
        return self._end("abort")

    def _end(self, end: str) -> bool:
        self._handed_over()  # the transaction's values reach the producer before it ends

        def call() -> tuple[str, str] | None:
            try:
                getattr(self._producer, f"{end}Transaction")()
            except self._jpype.JException as exc:
                abortable = "Abortable" in str(exc.getClass().getSimpleName())
                return ("fail" if abortable or end == "abort" else "info"), self._name(exc)
            return None

        done = end_transaction(self.history, self.name, end, list(self._txn_values or []), call)
        if done:
            self._txn_values = None
        return done

    def close(self, timeout_s: float = 10.0) -> None:
        """Flush, close the Java producer (which also ends a send blocked on metadata: its wait
        raises once the producer is closed), and stop the sending thread."""
        self._sends.put(None)
        self.flush(timeout_s)
        duration = self._jpype.JClass("java.time.Duration").ofMillis(int(timeout_s * 1000))
        self._producer.close(duration)
        self._sender.join(timeout_s)



def java_consumer_settings(config: ConsumerConfig, bootstrap: str, client_id: str, group_id: str) -> dict[str, str]:
    """The Java client's properties for a scenario's consumer configuration
    (:func:`epochlab.kafka.live.clients.consumer_settings` is librdkafka's). ``fetch_max_records``
    is ``max.poll.records`` (ConsumerConfig.MAX_POLL_RECORDS_CONFIG: the most one ``poll``
    returns); ``client_rack`` the broker id, each broker its own rack (KIP-392, as
    ``LocalCluster`` sets ``broker.rack``); ``auto.offset.reset`` ``none`` is Kafka's own value
    (``poll`` then raises NoOffsetForPartitionException, ``OffsetResetStrategy.NONE``).
    ``enable.auto.commit`` is the scenario's value; the driver passes it off and commits in
    ``poll`` itself, at the interval, as ``ConsumerCoordinator.maybeAutoCommitOffsetsAsync``
    does."""
    out = {
        "bootstrap.servers": bootstrap, "client.id": client_id, "group.id": group_id,
        "enable.auto.commit": str(bool(config.enable_auto_commit)).lower(),
        "auto.commit.interval.ms": str(config.auto_commit_interval_ms),
        "auto.offset.reset": config.auto_offset_reset, "isolation.level": config.isolation_level,
        "max.poll.records": str(config.fetch_max_records), "fetch.max.wait.ms": str(config.fetch_max_wait_ms),
        "metadata.max.age.ms": str(config.metadata_max_age_ms),
        "key.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
        "value.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
    }
    if config.client_rack is not None:
        out["client.rack"] = str(config.client_rack)
    return out


class JavaRecordingConsumer:
    """Kafka's Java consumer of release ``version`` assigned one partition (``assign``, no
    group rebalancing), recording its polls and commits into ``history`` exactly as
    :class:`~epochlab.kafka.live.clients.RecordingConsumer` does (same methods: ``poll``,
    ``committed``, ``commit``, ``list_offsets``, ``read_to_end``, ``close``, and ``position``).

    ``group_id``: the group whose committed offset it resumes from and commits to (the Java
    consumer fetches it on its first ``poll`` after ``assign``, ``ConsumerCoordinator.
    refreshCommittedOffsetsIfNeeded``, and falls back to ``auto.offset.reset`` without one);
    without a group of the caller's it seeks to the beginning or the end at once, without a
    group coordinator, as the librdkafka consumer does. Not thread-safe (neither is
    ``KafkaConsumer``): one thread calls it. Without a ``fetch_from`` record for a consumer
    with a rack: the Java client does not expose the replica it fetches from."""

    def __init__(self, bootstrap: str, topic: str, history: History, config: ConsumerConfig | None = None,
                 name: str = "consumer", partition: int = 0, group_id: str | None = None,
                 version: str | None = None) -> None:
        from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION
        from epochlab.kafka.jvm import ensure_jvm

        self.config = config or ConsumerConfig(auto_offset_reset="earliest", enable_auto_commit=False)
        self.topic, self.partition, self.name, self.history = topic, partition, name, history
        self._jpype = jpype = ensure_jvm(version or DEFAULT_KAFKA_VERSION)
        j = jpype.JClass
        history.start_session(name)
        self.group_id = group_id or f"epochlab-{uuid.uuid4().hex[:8]}"
        props = j("java.util.Properties")()
        for k, v in java_consumer_settings(self.config, bootstrap, name, self.group_id).items():
            props.setProperty(k, v)
        self._consumer = j("org.apache.kafka.clients.consumer.KafkaConsumer")(props)
        self._tp = j("org.apache.kafka.common.TopicPartition")(topic, partition)
        self._tps = j("java.util.List").of(self._tp)
        self._offset_and_metadata = j("org.apache.kafka.clients.consumer.OffsetAndMetadata")
        self._map_of = j("java.util.Map").of
        self._set_of = j("java.util.Set").of
        self._duration = j("java.time.Duration").ofMillis
        self._errors = j("org.apache.kafka.common.protocol.Errors")
        self._commits = CommitAnswers(history, name)
        self._commit_callback = jpype.JProxy("org.apache.kafka.clients.consumer.OffsetCommitCallback",
                                             dict={"onComplete": self._on_commit})
        self._consumer.assign(self._tps)
        if group_id is None:
            if self.config.auto_offset_reset == "earliest":
                self._consumer.seekToBeginning(self._tps)
            else:
                self._consumer.seekToEnd(self._tps)
        self.position: int | None = None

    def _ms(self, seconds: float) -> Any:
        return self._duration(max(0, int(seconds * 1000)))

    def _name(self, exc: Any) -> str:
        """The protocol error name of a Java exception (``Errors.forException``); Kafka's
        client-side exceptions without one (NoOffsetForPartitionException ...) by class name."""
        name = str(self._errors.forException(exc).name())
        return str(exc.getClass().getSimpleName()) if name == "UNKNOWN_SERVER_ERROR" else name

    def poll(self, timeout_s: float = 1.0, quiet_s: float | None = None) -> list[tuple[int, int]]:
        """One poll of up to ``fetch_max_records`` records, recorded as the librdkafka
        consumer's (``invoke`` then ``ok`` with the ``[offset, value]`` pairs, or ``info`` with
        the error). Without ``quiet_s`` one ``KafkaConsumer.poll`` that waits ``timeout_s``;
        with it, polls are gathered until one brings nothing for ``quiet_s`` after a record
        arrived, or ``timeout_s`` passes. Records past ``fetch_max_records`` in a gathered poll
        are given back (``seek`` to the first one not taken)."""
        self.history.record(self.name, "invoke", "poll")
        limit = self.config.fetch_max_records
        deadline = time.monotonic() + timeout_s
        pairs: list[tuple[int, int]] = []
        error = None
        while len(pairs) < limit:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            wait = left if quiet_s is None else min(left, quiet_s if pairs else 0.1)
            try:
                records = list(self._consumer.poll(self._ms(wait)).records(self._tp))
            except self._jpype.JException as exc:
                error = error or self._name(exc)
                time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
                continue
            for i, record in enumerate(records):
                offset = int(record.offset())
                if len(pairs) == limit:
                    self._consumer.seek(self._tp, offset)  # not taken: the next poll returns it
                    break
                self.position = offset + 1
                raw = record.value()
                try:
                    pairs.append((offset, decode_value(None if raw is None else bytes(raw), "int64")))
                except ValueError:  # not written by a recording producer: not in the history
                    error = error or "NOT_AN_INTEGER_VALUE"
            if quiet_s is None or (pairs and not records):
                break
        self.history.record_poll(self.name, pairs, error)
        return pairs

    def committed(self, timeout_s: float = 30.0) -> int | None:
        """The group's committed offset (``None`` when there is none, or the coordinator did
        not answer within ``timeout_s``)."""
        try:
            got = self._consumer.committed(self._set_of(self._tp), self._ms(timeout_s)).get(self._tp)
        except self._jpype.JException:
            return None
        return None if got is None else int(got.offset())

    def commit(self, wait_s: float = COMMIT_WAIT_S) -> bool:
        """Commit the position after the last record polled; whether it was acknowledged
        within ``wait_s``. ``commitAsync``, as the model's commit and the librdkafka
        consumer's are: ``commitSync`` would hold the run up to ``default.api.timeout.ms``
        (60 s) with no group coordinator. Its outcome enters the history when the consumer
        calls the callback, which it does inside a ``poll`` (``ConsumerCoordinator.
        invokeCompletedOffsetCommitCallbacks``): the step polls for it for ``wait_s``, and
        records those polls bring are given back (``seek`` to the first one) for the next
        :meth:`poll`."""
        if self.position is None:
            return False
        self._commits.made(self.position)
        self._consumer.commitAsync(self._map_of(self._tp, self._offset_and_metadata(self.position)),
                                   self._commit_callback)
        deadline = time.monotonic() + wait_s
        while self._commits.waiting() and (left := deadline - time.monotonic()) > 0:
            try:
                records = list(self._consumer.poll(self._ms(min(left, 0.05))).records(self._tp))
            except self._jpype.JException:  # the next poll of the run meets it again
                time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
                continue
            if records:
                self._consumer.seek(self._tp, int(records[0].offset()))
        return self._commits.acknowledged()

    def _on_commit(self, offsets: Any, exception: Any) -> None:
        """``OffsetCommitCallback.onComplete``: the answer to a commit (:class:`CommitAnswers`)."""
        self._commits.answered(None if exception is None else self._name(exception))

    def list_offsets(self, spec: str = "latest", timeout_s: float = 60.0) -> int | None:
        """ListOffsets at the leader: ``beginningOffsets`` or ``endOffsets`` (the last stable
        offset for ``read_committed``: ``OffsetFetcher`` asks with the consumer's isolation
        level), retried every 100 ms on an error for up to ``timeout_s``, recorded as the
        librdkafka consumer's (``latest-committed`` for the LSO)."""
        if spec not in ("latest", "earliest"):
            raise ConfigError(f"list_offsets: spec must be 'latest' or 'earliest', got {spec!r}",
                              where=self.name, field="spec", expected="latest or earliest", got=spec)
        ask = self._consumer.beginningOffsets if spec == "earliest" else self._consumer.endOffsets
        if spec == "latest" and self.config.isolation_level == "read_committed":
            spec = "latest-committed"
        self.history.record(self.name, "invoke", "list_offsets", value=spec)
        deadline, error = time.monotonic() + timeout_s, "TIMEOUT"
        while time.monotonic() < deadline:
            try:
                got = ask(self._tps, self._ms(max(0.1, min(5.0, deadline - time.monotonic())))).get(self._tp)
            except self._jpype.JException as exc:
                error = self._name(exc)
                time.sleep(0.1)
                continue
            offset = int(got)
            self.history.record(self.name, "ok", "list_offsets", value=[spec, offset])
            return offset
        self.history.record(self.name, "info", "list_offsets", value=spec, error=error)
        return None

    def read_to_end(self, timeout_s: float = 30.0) -> list[tuple[int, int]]:
        """Poll until the consumer's position reaches the partition's end offset (as it is
        when each poll returns nothing; the LSO for ``read_committed``) or ``timeout_s``
        passes; every pair read. The position is ``KafkaConsumer.position``, past a trailing
        transaction marker (the fetcher moves over control batches)."""
        deadline = time.monotonic() + timeout_s
        out: list[tuple[int, int]] = []
        while time.monotonic() < deadline:
            got = self.poll(0.5)
            out += got
            if got:
                continue
            try:
                high = int(self._consumer.endOffsets(self._tps, self._ms(5)).get(self._tp))
                position = int(self._consumer.position(self._tp, self._ms(5)))
            except self._jpype.JException:  # no leader right now: poll again
                continue
            if high >= 0 and position >= high:
                break
        return out

    def close(self, timeout_s: float = 5.0) -> None:
        """Close without committing (``enable.auto.commit`` is off in a run)."""
        self._consumer.close(self._ms(timeout_s))
