"""Kafka's own Java producer as a live-run client, recording the history the checker reads.

The model's producer is the Java client (``epochlab.sim.producer``: its retries, its request
timeout that closes the connection, its epoch bumps); the harness's default clients are
librdkafka's (:mod:`epochlab.kafka.live.clients`), whose timing differs (``socket.timeout.ms``, a
delivery report per message). :class:`JavaRecordingProducer` runs
``org.apache.kafka.clients.producer.KafkaProducer`` of the cluster's own release in this
process's JVM (JPype, :func:`epochlab.kafka.jvm.ensure_jvm`) behind the interface of
:class:`~epochlab.kafka.live.clients.RecordingProducer`, so a run can use either (``epochlab kafka run
--client java``) and the model compares with the client that ran.

Recording: ``send`` ``invoke`` when the value is handed to ``KafkaProducer.send``; the send's
``Callback`` (on the producer's I/O thread) records ``ok`` with the offset, or the error:
``fail`` when the record was certainly not written (refused whole by the broker, or expired in
the accumulator before it was ever sent: Kafka's "Expiring N record(s)" before any attempt),
``info`` otherwise (a timeout or a disconnection after it was sent may have written it). The
error name is the protocol error Kafka's ``Errors.forException`` gives the exception, and
``DELIVERY_TIMEOUT`` for ``delivery.timeout.ms`` expiring, as the model names it.

Settings: the scenario's :class:`~epochlab.sim.config.ProducerConfig` under the Java names.
``batch_size_records`` and ``buffer_memory_records`` count records; the Java client counts
bytes: one record per batch (the model's default) is ``batch.size=1`` (a record larger than
``batch.size`` is a batch of its own, ``RecordAccumulator.append``), several records per batch
are ``batch.size`` = records x :data:`RECORD_BYTES`, and the buffer likewise, at least Kafka's
minimum for one batch. Values travel as 8-byte big-endian integers.
"""

from __future__ import annotations

import struct
import threading
import time
from typing import Any

from epochlab.errors import ConfigError
from epochlab.kafka.live.clients import History, end_transaction
from epochlab.sim.config import ProducerConfig

__all__ = ["RECORD_BYTES", "JavaRecordingProducer", "java_producer_settings"]

#: The bytes one of our records takes in a v2 batch (an 8-byte value, no key, no headers, and
#: the record's varint framing), for the record counts the model's settings give.
RECORD_BYTES = 16

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
        "batch.size": str(1 if config.batch_size_records <= 1 else config.batch_size_records * RECORD_BYTES),
        "buffer.memory": str(max(config.buffer_memory_records * RECORD_BYTES, 16384)),
        "key.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
        "value.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
    }
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
        self._outstanding = 0
        self._cond = threading.Condition()
        self._txn_number = 0
        self._txn_values: list[int] | None = None
        if self.config.enable_idempotence or self.config.transactional_id:
            history.idempotent.add(name)
        if self.config.transactional_id is not None:
            self._producer.initTransactions()

    # -- sends ------------------------------------------------------------------------------
    def send(self, value: int) -> None:
        acks = self.config.acks
        self.history.record(self.name, "invoke", "send", value=value, acks=acks)
        if self._txn_values is not None:
            self._txn_values.append(value)
        record = self._record(self.topic, self._integer(self.partition), None,
                              self._bytes(struct.pack(">Q", value)))
        with self._cond:
            self._outstanding += 1
        try:
            self._producer.send(record, self._callback(value))
        except self._jpype.JException as exc:  # refused before it was queued (max.block.ms, buffer)
            self._done()
            self.history.record(self.name, "fail", "send", value=value, error=self._name(exc), acks=acks)

    def _callback(self, value: int) -> Any:
        acks = self.config.acks

        def on_completion(metadata: Any, exc: Any) -> None:
            try:
                if exc is None:
                    offset = int(metadata.offset()) if acks != "0" and metadata.hasOffset() else None
                    self.history.record(self.name, "ok", "send", value=value, offset=offset, acks=acks)
                else:
                    name = self._name(exc)
                    kind = "fail" if name in _DEFINITE else "info"
                    self.history.record(self.name, kind, "send", value=value, error=name, acks=acks)
            finally:
                self._done()

        return self._jpype.JProxy("org.apache.kafka.clients.producer.Callback",
                                  dict={"onCompletion": on_completion})

    def _name(self, exc: Any) -> str:
        message = str(exc.getMessage() or "")
        if "Expiring" in message and "record" in message:
            return "DELIVERY_TIMEOUT"
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
    def begin_transaction(self) -> None:
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
        self.flush(timeout_s)
        duration = self._jpype.JClass("java.time.Duration").ofMillis(int(timeout_s * 1000))
        self._producer.close(duration)

