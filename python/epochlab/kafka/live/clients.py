"""Real clients (confluent-kafka, i.e. librdkafka) that record a history epochlab's checker judges.

The history is the simulator's (:class:`epochlab.sim.history.HistoryOp`, one partition, integer
values): a producer records ``send`` ``invoke`` when it hands a value to librdkafka, then ``ok``
with the acknowledged offset, ``fail`` when the record was certainly not written, or ``info``
when it may have been (a timeout after it was sent); transactions add ``begin_txn`` /
``commit_txn`` / ``abort_txn``; a consumer records ``poll`` ``ok`` with ``[offset, value]``
pairs and ``commit``. Values travel as decimal strings. ``time_ms`` counts from the history's
creation (monotonic clock).

Clients are configured from the scenario's own dataclasses
(:class:`epochlab.sim.config.ProducerConfig`, :class:`~epochlab.sim.config.ConsumerConfig`),
mapped to librdkafka's names (:func:`producer_settings`, :func:`consumer_settings`).

:func:`judge` runs :func:`epochlab.checks.check_history` on a real run: the final log is what a
fresh consumer reads from the start (:func:`read_partition`), every offset in it is taken as
committed (it was below the high watermark), and loss is allowed only when the topic permits
unclean leader election.

>>> history = History()                                              # doctest: +SKIP
>>> p = RecordingProducer(bootstrap, "t", history, ProducerConfig(acks="all",
...                       enable_idempotence=True))                  # doctest: +SKIP
>>> p.send(1); p.flush()                                             # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import struct
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from epochlab.errors import ConfigError
from epochlab.sim.config import ConsumerConfig, ProducerConfig
from epochlab.sim.history import Event, HistoryOp, history_to_jsonl

__all__ = ["VALUE_FORMATS", "CommitAnswers", "History", "KafkaAdmin", "end_transaction", "PartitionState", "RecordingConsumer", "RecordingProducer",
           "consumer_settings", "decode_value", "encode_value", "judge", "producer_settings", "read_partition"]

#: librdkafka's own log lines go to this logger (silent unless the application configures it).
RDKAFKA_LOG = logging.getLogger("epochlab.kafka.rdkafka")
RDKAFKA_LOG.addHandler(logging.NullHandler())

#: Delivery errors after which the record was certainly not written (never sent, or refused
#: whole by the leader); every other error leaves the outcome unknown (``info``), among them
#: ``_PURGE_INFLIGHT``: a request purged while in flight may have been written (librdkafka's
#: ``rd_kafka_purge``: "the message may still have been delivered").
_DEFINITE = frozenset({"_PURGE_QUEUE", "_INVALID_ARG", "_UNKNOWN_PARTITION",
                       "_UNKNOWN_TOPIC", "MSG_SIZE_TOO_LARGE", "INVALID_MSG_SIZE",
                       "RECORD_LIST_TOO_LARGE", "TOPIC_AUTHORIZATION_FAILED",
                       "INVALID_RECORD", "INVALID_REQUIRED_ACKS"})


#: How record values travel: ``decimal`` (the integer as ASCII digits) or ``int64`` (8 bytes,
#: big-endian: what ``epochlab inspect`` and the trace converter read back as the value).
VALUE_FORMATS = ("decimal", "int64")


def _check_format(value_format: str) -> str:
    if value_format not in VALUE_FORMATS:
        raise ConfigError(f"value_format: expected one of {VALUE_FORMATS}, got {value_format!r}",
                          where="value_format", field="value_format", expected=VALUE_FORMATS, got=value_format)
    return value_format


def encode_value(value: int, value_format: str = "decimal") -> bytes:
    """The record value for ``value`` (:data:`VALUE_FORMATS`)."""
    return struct.pack(">q", value) if value_format == "int64" else str(value).encode()


def decode_value(raw: bytes | None, value_format: str = "decimal") -> int:
    """The integer a record value holds; ``ValueError`` when it is not one in that format."""
    if value_format == "int64":
        if raw is None or len(raw) != 8:
            raise ValueError(f"not an 8-byte value: {raw!r}")
        return int(struct.unpack(">q", raw)[0])
    return int(raw if raw is not None else b"")


class History:
    """A thread-safe, append-only client history plus fault events (the harness's notes:
    ``kill``, ``restart``, ``partition`` ...), and which processes are idempotent producers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        #: the run clock's 0 in wall-clock ms, to place the brokers' log lines on it
        self.clock_epoch_ms = time.time() * 1000
        self.ops: list[HistoryOp] = []
        self.events: list[Event] = []
        self.idempotent: set[str] = set()

    @property
    def started(self) -> float:
        """``time.monotonic()`` at the history's time 0."""
        return self._t0

    def now_ms(self) -> int:
        return int((time.monotonic() - self._t0) * 1000)

    def record(self, process: str, type_: str, f: str, value: Any = None, offset: int | None = None,
               error: str | None = None, acks: str | None = None) -> HistoryOp:
        with self._lock:
            op = HistoryOp(len(self.ops), self.now_ms(), process, type_, f, value, offset, error, acks)
            self.ops.append(op)
            return op

    def record_poll(self, process: str, pairs: list[tuple[int, int]], error: str | None) -> None:
        """A consumer's poll ending: ``info`` with the error when it read nothing, else ``ok``
        with the ``[offset, value]`` pairs it took (both clients' consumers record it so)."""
        if error and not pairs:
            self.record(process, "info", "poll", error=error)
        else:
            self.record(process, "ok", "poll", value=[[o, v] for o, v in pairs])

    def event(self, kind: str, message: str) -> Event:
        """Note a fault or other harness action (``kind`` as in :class:`Event`)."""
        with self._lock:
            e = Event(self.now_ms(), kind, message)
            self.events.append(e)
            return e

    def start_session(self, process: str) -> None:
        """A client named ``process`` starts: if one of that name ran before, record ``info``
        ``restart`` (the checker then starts a new session for it: polls may go back, an
        idempotent producer has a new producer id)."""
        with self._lock:
            seen = any(op.process == process for op in self.ops)
        if seen:
            self.record(process, "info", "restart")

    def dicts(self) -> list[dict[str, Any]]:
        with self._lock:
            return [op.to_dict() for op in self.ops]

    def to_jsonl(self) -> str:
        with self._lock:
            return history_to_jsonl(self.ops)

    def acked(self) -> dict[int, int]:
        """value -> acknowledged offset, for every ``send`` that ended ``ok``."""
        return {d["value"]: d["offset"] for d in self.dicts()
                if d["f"] == "send" and d["type"] == "ok" and d["offset"] is not None}


def producer_settings(config: ProducerConfig) -> dict[str, Any]:
    """librdkafka settings for a scenario's producer configuration."""
    out: dict[str, Any] = {
        "acks": config.acks, "enable.idempotence": config.enable_idempotence,
        "retries": config.retries, "retry.backoff.ms": config.retry_backoff_ms,
        "request.timeout.ms": config.request_timeout_ms,
        "delivery.timeout.ms": config.delivery_timeout_ms,
        "max.in.flight.requests.per.connection": config.max_in_flight_requests_per_connection,
        "linger.ms": config.linger_ms, "batch.num.messages": config.batch_size_records,
        "queue.buffering.max.messages": config.buffer_memory_records,
    }
    if config.socket_timeout_ms is not None:  # the client-side limit of a request (else SOCKET_TIMEOUT_MS)
        out["socket.timeout.ms"] = config.socket_timeout_ms
    if config.socket_connection_setup_timeout_ms is not None:  # librdkafka's has the Java name (default 30 s)
        out["socket.connection.setup.timeout.ms"] = config.socket_connection_setup_timeout_ms
    if config.transactional_id is not None:
        out["transactional.id"] = config.transactional_id
        out["transaction.timeout.ms"] = config.transaction_timeout_ms
        # librdkafka refuses a delivery timeout (message.timeout.ms) above the transaction
        # timeout; the Java client has no such rule. The Java defaults (120 s and 60 s) break it.
        out["delivery.timeout.ms"] = min(config.delivery_timeout_ms, config.transaction_timeout_ms)
    return out


def consumer_settings(config: ConsumerConfig) -> dict[str, Any]:
    """librdkafka settings for a scenario's consumer configuration."""
    out: dict[str, Any] = {
        "enable.auto.commit": config.enable_auto_commit,
        "auto.commit.interval.ms": config.auto_commit_interval_ms,
        "auto.offset.reset": config.auto_offset_reset, "isolation.level": config.isolation_level,
        "fetch.wait.max.ms": config.fetch_max_wait_ms, "enable.partition.eof": False}
    if config.client_rack is not None:
        # KIP-392: the broker ids are the racks (LocalCluster sets broker.rack=<id>)
        out.update({"client.rack": str(config.client_rack), "statistics.interval.ms": STATS_INTERVAL_MS})
    return out


#: how often a consumer with a rack reads librdkafka's statistics for the broker it fetches from
STATS_INTERVAL_MS = 100


#: librdkafka's client-side limit of a request (``socket.timeout.ms``; its default is 60 s): the
#: model's producer gets the same when it stands for these clients (``run_compare.model_scenario``).
SOCKET_TIMEOUT_MS = 5000

#: How long a consumer's ``commit`` step waits for the acknowledgement before it goes on
#: (the commit itself goes on in the background: :meth:`RecordingConsumer.commit`).
COMMIT_WAIT_S = 0.5


class CommitAnswers:
    """A consumer's commits waiting for their answers, recorded into ``history`` as they come
    (``ok``, or ``fail`` with the error's name). A client answers one consumer's commits in
    the order they were made, so an answer belongs to the oldest commit still waiting."""

    def __init__(self, history: History, name: str) -> None:
        self.history, self.name = history, name
        self._waiting: list[int] = []
        self._last: bool | None = None

    def made(self, position: int) -> None:
        """A commit of ``position`` was made (its ``invoke`` recorded)."""
        self.history.record(self.name, "invoke", "commit", value=position)
        self._waiting.append(position)

    def answered(self, error: str | None) -> None:
        """The answer to the oldest commit still waiting: ``None`` when acknowledged."""
        if not self._waiting:
            return
        position = self._waiting.pop(0)
        self._last = error is None
        if error is None:
            self.history.record(self.name, "ok", "commit", value=position)
        else:
            self.history.record(self.name, "fail", "commit", value=position, error=error)

    def waiting(self) -> bool:
        """Whether the last commit made still waits for its answer."""
        return bool(self._waiting)

    def acknowledged(self) -> bool:
        """Whether the last commit made was answered, and acknowledged."""
        return not self._waiting and bool(self._last)


def _base(bootstrap: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "logger": RDKAFKA_LOG, "socket.timeout.ms": SOCKET_TIMEOUT_MS}


class RecordingProducer:
    """A confluent-kafka producer for one partition that records each send and its outcome.

    ``extra``: further librdkafka settings, applied last. Call :meth:`poll` or :meth:`flush`
    to receive acknowledgements (librdkafka delivers them from those calls). ``value_format``:
    how a value travels (:data:`VALUE_FORMATS`).
    """

    def __init__(self, bootstrap: str, topic: str, history: History, config: ProducerConfig | None = None,
                 name: str = "producer", partition: int = 0, extra: Mapping[str, Any] | None = None,
                 value_format: str = "decimal") -> None:
        from confluent_kafka import Producer

        self.config = config or ProducerConfig()
        self.topic, self.partition, self.name, self.history = topic, partition, name, history
        self.value_format = _check_format(value_format)
        history.start_session(name)
        settings = {**_base(bootstrap), **producer_settings(self.config), **(extra or {})}
        self._producer = Producer(settings)
        self._txn_number = 0
        self._txn_values: list[int] | None = None
        if self.config.enable_idempotence or self.config.transactional_id:
            history.idempotent.add(name)
        if self.config.transactional_id is not None:
            self._producer.init_transactions(30)

    def send(self, value: int) -> None:
        """Hand ``value`` to librdkafka (``send`` ``invoke``); its outcome is recorded when the
        delivery report arrives. A full local queue is recorded as ``fail`` (never sent)."""
        acks = self.config.acks
        self.history.record(self.name, "invoke", "send", value=value, acks=acks)
        if self._txn_values is not None:
            self._txn_values.append(value)
        try:
            self._producer.produce(self.topic, encode_value(value, self.value_format), partition=self.partition,
                                   on_delivery=self._on_delivery(value))
        except BufferError:
            self.history.record(self.name, "fail", "send", value=value, error="QUEUE_FULL", acks=acks)
        self._producer.poll(0)

    def _on_delivery(self, value: int) -> Callable[[Any, Any], None]:
        def done(err: Any, msg: Any) -> None:
            acks = self.config.acks
            if err is None:
                offset = msg.offset() if acks != "0" and msg.offset() >= 0 else None
                self.history.record(self.name, "ok", "send", value=value, offset=offset, acks=acks)
            else:
                kind = "fail" if err.name() in _DEFINITE else "info"
                self.history.record(self.name, kind, "send", value=value, error=err.name(), acks=acks)
        return done

    def poll(self, timeout_s: float = 0.0) -> int:
        return int(self._producer.poll(timeout_s))

    def flush(self, timeout_s: float = 30.0) -> int:
        """Wait for outstanding deliveries; the number still outstanding after ``timeout_s``."""
        return int(self._producer.flush(timeout_s))

    def begin_transaction(self) -> None:
        from confluent_kafka import KafkaException

        self.history.record(self.name, "invoke", "begin_txn")
        try:
            self._producer.begin_transaction()
        except KafkaException as exc:
            self.history.record(self.name, "fail", "begin_txn", error=exc.args[0].name())
            raise
        self._txn_number += 1
        self._txn_values = []
        self.history.record(self.name, "ok", "begin_txn", value=self._txn_number)

    def commit_transaction(self, timeout_s: float = 30.0) -> bool:
        """Commit; True when committed. A failure that requires an abort is ``fail`` (the
        caller should :meth:`abort_transaction`); any other failure is ``info``: the commit
        may have happened."""
        return self._end("commit", timeout_s)

    def abort_transaction(self, timeout_s: float = 30.0) -> bool:
        return self._end("abort", timeout_s)

    def _end(self, end: str, timeout_s: float) -> bool:
        from confluent_kafka import KafkaException

        def call() -> tuple[str, str] | None:
            try:
                getattr(self._producer, f"{end}_transaction")(timeout_s)
            except KafkaException as exc:
                err = exc.args[0]
                return ("fail" if err.txn_requires_abort() or end == "abort" else "info"), err.name()
            return None

        done = end_transaction(self.history, self.name, end, list(self._txn_values or []), call)
        if done:
            self._txn_values = None
        return done

    def close(self, timeout_s: float = 10.0) -> None:
        """Flush what is outstanding (up to ``timeout_s``), then drop the client."""
        self.flush(timeout_s)
        del self._producer

    def abandon(self) -> None:
        """The producer process dies (a producer restart): every send still outstanding gets
        its outcome now, as the model's ``Producer.restart`` gives them ``PRODUCER_RESTARTED``:
        ``purge`` of the queue (``_PURGE_QUEUE``, ``fail``: never sent) and of the requests in
        flight (``_PURGE_INFLIGHT``, ``info``: maybe written), their delivery reports served,
        then the client dropped. Without it the sends would stay without an outcome."""
        self._producer.purge(in_queue=True, in_flight=True, blocking=False)
        self._producer.flush(5)
        del self._producer


def end_transaction(history: History, name: str, end: str, values: list[int],
                    call: Callable[[], tuple[str, str] | None]) -> bool:
    """Record a transaction's ``commit_txn`` / ``abort_txn`` (``end``) around ``call``, which
    ends it and returns ``None``, or the outcome kind (``fail``: it did not commit, ``info``:
    it may have) and the error name; True when it ended."""
    f = f"{end}_txn"
    history.record(name, "invoke", f, value=values)
    failure = call()
    if failure is not None:
        history.record(name, failure[0], f, value=values, error=failure[1])
        return False
    history.record(name, "ok", f, value=values)
    return True


class RecordingConsumer:
    """A confluent-kafka consumer assigned one partition (no group rebalancing) that records
    its polls and commits. ``group_id``: the group whose committed offset it resumes from and
    commits to; without one it starts where ``auto_offset_reset`` points (a fresh group id
    still receives its commits)."""

    def __init__(self, bootstrap: str, topic: str, history: History, config: ConsumerConfig | None = None,
                 name: str = "consumer", partition: int = 0, group_id: str | None = None,
                 extra: Mapping[str, Any] | None = None, value_format: str = "decimal") -> None:
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, OFFSET_STORED, Consumer, TopicPartition

        self.config = config or ConsumerConfig(auto_offset_reset="earliest", enable_auto_commit=False)
        self.topic, self.partition, self.name, self.history = topic, partition, name, history
        self.value_format = _check_format(value_format)
        history.start_session(name)
        self.group_id = group_id or f"epochlab-{uuid.uuid4().hex[:8]}"
        settings = {**_base(bootstrap), "group.id": self.group_id, **consumer_settings(self.config),
                    **(extra or {})}
        self._fetch_from: int | None = None
        if self.config.client_rack is not None:
            settings["stats_cb"] = self._on_stats
        settings["on_commit"] = self._on_commit
        self._commits = CommitAnswers(history, name)
        #: messages taken from librdkafka while a commit step waited, for the next poll
        self._held: list[Any] = []
        self._consumer = Consumer(settings)
        # Without a group of the caller's there is no committed offset to fetch: start where
        # auto.offset.reset points, without waiting for a group coordinator (which may be on a
        # broker just killed: librdkafka then answers NOT_COORDINATOR for a long while).
        reset = OFFSET_BEGINNING if self.config.auto_offset_reset == "earliest" else OFFSET_END
        self._consumer.assign([TopicPartition(topic, partition, OFFSET_STORED if group_id else reset)])
        self.position: int | None = None

    def _on_stats(self, text: str) -> None:
        """librdkafka's statistics (a consumer with a rack): record ``info fetch_from`` with the
        broker the partition is fetched from (``toppars[].broker``) each time it changes, as
        the model's consumer does."""
        try:
            part = json.loads(text)["topics"][self.topic]["partitions"][str(self.partition)]
            broker = int(part["broker"])
        except (ValueError, KeyError, TypeError):
            return
        if broker >= 0 and broker != self._fetch_from:
            self._fetch_from = broker
            self.history.record(self.name, "info", "fetch_from", value=broker)

    def poll(self, timeout_s: float = 1.0, quiet_s: float | None = None) -> list[tuple[int, int]]:
        """One poll of up to ``fetch_max_records`` records: records ``poll`` ``invoke`` then
        ``ok`` with the ``[offset, value]`` pairs (or ``info`` with the error). Without
        ``quiet_s`` it is one ``consume`` call that waits ``timeout_s``; with it, fetches are
        gathered until one brings nothing for ``quiet_s`` after a record arrived, or
        ``timeout_s`` passes (what the model's poll returns: everything readable now)."""
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
            if self._held:
                msgs, self._held = self._held[:limit - len(pairs)], self._held[limit - len(pairs):]
            else:
                msgs = self._consumer.consume(num_messages=limit - len(pairs), timeout=wait)
            for m in msgs:
                err, offset, raw = m.error(), m.offset(), m.value()
                if err is not None:
                    error = error or err.name()
                    continue
                assert offset is not None  # a message without an error has an offset
                self.position = offset + 1
                try:
                    pairs.append((offset, decode_value(raw, self.value_format)))
                except ValueError:  # not written by a recording producer: not in the history
                    error = error or "NOT_AN_INTEGER_VALUE"
            if quiet_s is None or (pairs and not msgs):
                break
        self.history.record_poll(self.name, pairs, error)
        return pairs

    def committed(self, timeout_s: float = 30.0) -> int | None:
        """The group's committed offset (``None`` when there is none); waits for the group
        coordinator, so calling it first makes the first poll and commit quick."""
        from confluent_kafka import TopicPartition

        got = self._consumer.committed([TopicPartition(self.topic, self.partition)], timeout=timeout_s)
        return got[0].offset if got and got[0].offset >= 0 else None

    def commit(self, wait_s: float = COMMIT_WAIT_S) -> bool:
        """Commit the position after the last record polled; whether it was acknowledged
        within ``wait_s``. The commit is librdkafka's asynchronous one, as the model's is: its
        outcome enters the history when librdkafka answers it (``ok``, or ``fail`` with the
        error), through the ``on_commit`` callback that the consumer's polls serve, so the
        step waits ``wait_s`` (a healthy commit takes milliseconds) polling for it and goes
        on. Messages those polls bring are held for the next :meth:`poll`: librdkafka had
        fetched them already, so holding them changes nothing the history shows.

        Not the synchronous commit on a thread of its own: with no group coordinator (every
        broker down) librdkafka answers it only after about 45 s (``_WAIT_COORD``), and a
        ``consume`` of the same consumer waits for it all that time (measured on this machine,
        confluent-kafka 2.x), which held a ``kafka fuzz`` run's next steps 45 s late."""
        from confluent_kafka import TopicPartition

        if self.position is None:
            return False
        self._commits.made(self.position)
        self._consumer.commit(offsets=[TopicPartition(self.topic, self.partition, self.position)], asynchronous=True)
        deadline = time.monotonic() + wait_s
        while self._commits.waiting() and (left := deadline - time.monotonic()) > 0:
            self._held.extend(self._consumer.consume(num_messages=1, timeout=min(left, 0.05)))
        return self._commits.acknowledged()

    def _on_commit(self, error: Any, partitions: list[Any]) -> None:
        """librdkafka's ``on_commit``: the answer to a commit (:class:`CommitAnswers`)."""
        error = error or next((p.error for p in partitions if p.error is not None), None)
        self._commits.answered(None if error is None else error.name())

    def list_offsets(self, spec: str = "latest", timeout_s: float = 60.0) -> int | None:
        """ListOffsets at the leader (librdkafka's ``query_watermark_offsets``: the earliest and
        the latest offset, the latter the LSO for read_committed), retried every 100 ms on an
        error (OFFSET_NOT_AVAILABLE from a new leader, KIP-207; no leader) for up to
        ``timeout_s``, as the model's consumer does. History: ``invoke`` ``list_offsets`` with
        the spec, then ``ok`` ``[spec, offset]`` or ``info`` with the last error."""
        from confluent_kafka import KafkaException, TopicPartition

        if spec not in ("latest", "earliest"):
            raise ConfigError(f"list_offsets: spec must be 'latest' or 'earliest', got {spec!r}",
                              where=self.name, field="spec", expected="latest or earliest", got=spec)
        if spec == "latest" and self.config.isolation_level == "read_committed":
            spec = "latest-committed"
        self.history.record(self.name, "invoke", "list_offsets", value=spec)
        deadline, error = time.monotonic() + timeout_s, "TIMEOUT"
        while time.monotonic() < deadline:
            try:
                low, high = self._consumer.get_watermark_offsets(
                    TopicPartition(self.topic, self.partition), timeout=max(0.1, min(5.0, deadline - time.monotonic())),
                    cached=False)
            except KafkaException as exc:
                error = exc.args[0].name()
                time.sleep(0.1)
                continue
            offset = low if spec == "earliest" else high
            self.history.record(self.name, "ok", "list_offsets", value=[spec, offset])
            return offset
        self.history.record(self.name, "info", "list_offsets", value=spec, error=error)
        return None

    def read_to_end(self, timeout_s: float = 30.0) -> list[tuple[int, int]]:
        """Poll until the position reaches the partition's high watermark (as it is when each
        poll returns nothing) or ``timeout_s`` passes; every pair read."""
        from confluent_kafka import TopicPartition

        deadline = time.monotonic() + timeout_s
        out: list[tuple[int, int]] = []
        while time.monotonic() < deadline:
            got = self.poll(0.5)
            out += got
            if got:
                continue
            try:
                _, high = self._consumer.get_watermark_offsets(
                    TopicPartition(self.topic, self.partition), timeout=5)
            except Exception:  # noqa: BLE001 - no leader right now: poll again
                continue
            if high >= 0 and (self.position or 0) >= high:
                break
        return out

    def close(self, timeout_s: float = 5.0) -> bool:
        """Close the consumer, waiting at most ``timeout_s``: librdkafka's ``close`` waits for
        the answer to a commit still in flight (:meth:`commit`), which with every broker down
        comes only after about 45 s. Past the wait the handle is left to its thread, as a
        killed process leaves its sockets; ``False`` then."""
        done = threading.Event()

        def run() -> None:
            try:
                self._consumer.close()
            except RuntimeError:  # closed already
                pass
            finally:
                done.set()

        threading.Thread(target=run, name=f"{self.name}-close", daemon=True).start()
        return done.wait(timeout_s)


def read_partition(bootstrap: str, topic: str, partition: int = 0,
                   isolation_level: str = "read_uncommitted", timeout_s: float = 30.0,
                   value_format: str = "decimal") -> dict[int, int]:
    """offset -> value of every record a fresh consumer reads from the start up to the high
    watermark (the last stable offset for ``read_committed``): the "final log" for
    :func:`judge`. Nothing is recorded in any history."""
    config = ConsumerConfig(auto_offset_reset="earliest", enable_auto_commit=False,
                            isolation_level=isolation_level)
    c = RecordingConsumer(bootstrap, topic, History(), config, partition=partition, value_format=value_format)
    try:
        return dict(c.read_to_end(timeout_s))
    finally:
        c.close()


def judge(history: History, final_log: Mapping[int, int], *, unclean_leader_election: bool = False,
          ) -> list[Any]:
    """The checker's history invariants (:func:`epochlab.checks.check_history`) on a real run.

    What the simulator knows exactly and a real cluster does not show is approximated from the
    outside: ``committed`` is ``final_log`` (it was read below the high watermark), ``trueHW``
    is the end of ``final_log`` at every time (so ``Inv-ReadCommittedOnly`` only catches reads
    of records that vanished), no consumer resets are known. Loss is classified as allowed
    only with ``unclean_leader_election``. Returns the :class:`~epochlab.checks.Violation` list
    (empty when every invariant holds)."""
    from epochlab.checks import check_history

    ops = history.dicts()
    end_ms = max((op["time_ms"] for op in ops), default=0)
    hw = max(final_log, default=-1) + 1
    reason = "unclean.leader.election.enable=true" if unclean_leader_election else None
    return check_history(ops, dict(final_log), dict(final_log), lambda _t: hw, lambda _t: reason,
                         set(history.idempotent), lambda _t: None, {}, end_ms)


@dataclass(frozen=True)
class PartitionState:
    """What the Admin API shows of one partition. ``leader``: ``None`` when offline;
    ``leader_epoch``: from ListOffsets(latest) at the leader, ``None`` when it did not answer;
    ``high_watermark``: the same answer's offset (read_uncommitted); ``last_stable_offset``:
    ListOffsets(latest, read_committed), asked only with ``with_lso``."""

    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader_epoch: int | None
    high_watermark: int | None
    last_stable_offset: int | None = None


class KafkaAdmin:
    """Admin API helpers over one confluent-kafka ``AdminClient``.

    ``only_bootstrap``: ask only the ``bootstrap`` brokers for metadata (a fresh client per
    :meth:`describe_partition`, since a client sends metadata requests to any broker it has
    learned of). For the majority's view during a partition: a leader cut off from the
    controller keeps answering that it leads."""

    def __init__(self, bootstrap: str, only_bootstrap: bool = False) -> None:
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.only_bootstrap = only_bootstrap
        self._admin = AdminClient(_base(bootstrap))

    def _metadata_client(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient(_base(self.bootstrap)) if self.only_bootstrap else self._admin

    def create_topic(self, topic: str, partitions: int = 1, replication_factor: int = 3,
                     min_insync_replicas: int = 2, unclean_leader_election_enable: bool = False,
                     configs: Mapping[str, str] | None = None, timeout_s: float = 30.0,
                     replica_assignment: list[list[int]] | None = None) -> None:
        """Create ``topic`` and wait until every partition has a leader. ``replica_assignment``
        (one broker list per partition, the first the preferred leader) replaces
        ``partitions`` and ``replication_factor``."""
        from confluent_kafka.admin import NewTopic

        cfg = {"min.insync.replicas": str(min_insync_replicas),
               "unclean.leader.election.enable": str(unclean_leader_election_enable).lower(),
               **(configs or {})}
        if replica_assignment is not None:
            partitions = len(replica_assignment)
            new = NewTopic(topic, num_partitions=partitions, replica_assignment=replica_assignment, config=cfg)
        else:
            new = NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor, config=cfg)
        try:
            self._admin.create_topics([new], operation_timeout=timeout_s)[topic].result(timeout_s)
        except Exception as exc:  # noqa: BLE001 - KafkaException: a bad setting, an existing topic
            raise ConfigError(f"creating topic {topic}: {exc}", where="create_topic", field="topic",
                              expected="a new topic", got=topic) from exc
        for p in range(partitions):
            self.wait_for(topic, p, lambda s: s.leader is not None, timeout_s)

    def describe_partition(self, topic: str, partition: int = 0, timeout_s: float = 5.0,
                           with_lso: bool = False, ask_leader: bool = True) -> PartitionState:
        """Leader, replicas and ISR from a Metadata request (to any broker: Admin
        ``describe_topics`` waits for the broker the metadata names as controller, which may be
        the one just killed), leader epoch and high watermark from ListOffsets(latest) at the
        leader (not asked with ``ask_leader=False``: a leader known to be dead would only time
        out). Raises the client's ``KafkaException`` when no broker answers in ``timeout_s``
        and :class:`ConfigError` for an unknown partition."""
        client = self._metadata_client()
        meta = client.list_topics(topic, timeout=timeout_s).topics.get(topic)
        info = meta.partitions.get(partition) if meta is not None else None
        if info is None:
            raise ConfigError(f"no partition {topic}-{partition} in the metadata", where="describe_partition",
                              field="partition", expected="an existing partition", got=f"{topic}-{partition}")
        leader = info.leader if info.leader >= 0 else None
        epoch = high = lso = None
        if leader is not None and ask_leader:
            epoch, high = self._latest(client, topic, partition, timeout_s)
            lso = self._lso(client, topic, partition, timeout_s) if with_lso else None
        return PartitionState(leader, tuple(info.replicas), tuple(info.isrs), epoch, high, lso)

    @staticmethod
    def _latest(client: Any, topic: str, partition: int, timeout_s: float) -> tuple[int | None, int | None]:
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        try:
            tp = TopicPartition(topic, partition)
            got = client.list_offsets({tp: OffsetSpec.latest()}, request_timeout=timeout_s)
            answer = got[tp].result(timeout_s)
        except Exception:  # noqa: BLE001 - leader moving: the epoch is unknown right now
            return None, None
        epoch = answer.leader_epoch if answer.leader_epoch is not None and answer.leader_epoch >= 0 else None
        return epoch, (answer.offset if answer.offset >= 0 else None)

    @staticmethod
    def _lso(client: Any, topic: str, partition: int, timeout_s: float) -> int | None:
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        tp = TopicPartition(topic, partition)
        try:
            got = client.list_offsets({tp: OffsetSpec.latest()}, isolation_level=IsolationLevel.READ_COMMITTED,
                                      request_timeout=timeout_s)
            offset = got[tp].result(timeout_s).offset
        except Exception:  # noqa: BLE001 - leader moving: unknown right now
            return None
        return offset if offset >= 0 else None

    def wait_for(self, topic: str, partition: int, predicate: Callable[[PartitionState], bool],
                 timeout_s: float = 30.0, interval_s: float = 0.1) -> PartitionState:
        """Poll :meth:`describe_partition` until ``predicate`` holds; raise
        :class:`ConfigError` with the last state after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        last: PartitionState | None = None
        while True:
            try:
                last = self.describe_partition(topic, partition, timeout_s=min(2.0, timeout_s))
                if predicate(last):
                    return last
            except Exception:  # noqa: BLE001 - no answer during an election: try again
                pass
            if time.monotonic() >= deadline:
                raise ConfigError(f"{topic}-{partition}: condition not met after {timeout_s:.0f} s "
                                  f"(last state {last})", where="wait_for", field="partition",
                                  expected="condition", got=str(last))
            time.sleep(interval_s)

    def broker_ids(self, timeout_s: float = 5.0) -> list[int]:
        """The brokers in the metadata now."""
        return sorted(self._admin.list_topics(timeout=timeout_s).brokers)
