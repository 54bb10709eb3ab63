"""Configuration of a simulated cluster and its clients, with Kafka's names and defaults.

Every dataclass is frozen. ``from_dict(mapping, where)`` accepts Kafka's dotted names
(``"min.insync.replicas"``) or the snake_case field names and raises
:class:`~epochlab.errors.ConfigError` (``where``, ``field``, ``expected``, ``got``) for an
unknown key or a bad value; constructing a dataclass directly validates the same way.

>>> ClusterConfig.from_dict({"min.insync.replicas": 2}, "example").min_insync_replicas
2
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from epochlab.errors import ConfigError
from epochlab.generations import parse_release

__all__ = ["ClusterConfig", "ConsumerConfig", "ProducerConfig"]

_T = TypeVar("_T")


def _fail(where: str, field: str, expected: str, got: object) -> ConfigError:
    return ConfigError(
        f"{where}: {field} must be {expected}, got {got!r}",
        where=where,
        field=field.replace("_", "."),
        expected=expected,
        got=repr(got),
    )


#: Upper bounds: a virtual time (``*_ms``) at most one day, like every file format
#: (``epochlab.formats.MAX_MS``); any other number in Kafka's ``int`` range.
MAX_MS = 86_400_000
INT32 = 2**31 - 1

#: How often a broker checks whether a log's ``flush.interval.ms`` (Kafka's topic ``flush.ms``)
#: has passed since its last flush: Kafka's ``log.flush.scheduler.interval.ms``, whose default
#: (``Long.MAX_VALUE``) would leave ``flush.ms`` without effect. Live runs configure their
#: brokers with this value (``epochlab.kafka.runs.scenario.cluster_overrides``).
FLUSH_CHECK_INTERVAL_MS = 100


def _int(where: str, field: str, value: object, lo: int = 0) -> int:
    hi = MAX_MS if field.endswith("_ms") else INT32
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise _fail(where, field, f"an integer from {lo} to {hi}", value)
    return value


def _bool(where: str, field: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise _fail(where, field, "a boolean", value)
    return value


#: Patches a ``kafka.release`` may name after ``+`` (``"4.3.1+skipped-epoch-reset"``): builds of
#: a release with a proposed fix, to show in the model what the fix changes.
RELEASE_PATCHES = {
    "skipped-epoch-reset": "Partition.makeLeader treats a leader re-elected across a skipped leader "
                           "epoch as a new leader and resets its followers' state "
                           "(docs/kafka-findings/kraft-reelected-leader-stale-follower-state.md)",
}


def _split_release(where: str, value: object) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """A Kafka release ``"X.Y.Z"`` (before 1.0 ``"0.X.Y.Z"``), optionally followed by
    ``+patch`` names of :data:`RELEASE_PATCHES`: ``((X, Y, Z), patches)``."""
    text, *patches = value.split("+") if isinstance(value, str) else [""]
    release = parse_release(text)
    if release is None:
        raise _fail(where, "kafka_release", 'a Kafka release "X.Y.Z" (before 1.0 "0.X.Y.Z"), e.g. "2.8.0", '
                    'optionally with "+patch"', value)
    for patch in patches:
        if patch not in RELEASE_PATCHES:
            raise _fail(where, "kafka_release", "a patch named after '+': " + ", ".join(sorted(RELEASE_PATCHES)),
                        value)
    return release, tuple(patches)


def _release(where: str, value: object) -> tuple[int, ...]:
    """A Kafka release ``"X.Y.Z"`` as ``(X, Y, Z)``; releases before 1.0 have four parts
    (``"0.11.0.3"``), accepted as such; a ``+patch`` suffix is checked and left out."""
    return _split_release(where, value)[0]


def _range(where: str, field: str, value: object) -> tuple[int, int]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise _fail(where, field, "a pair [min, max] of integers", value)
    lo, hi = (_int(where, field, v) for v in value)
    if lo > hi:
        raise _fail(where, field, "a pair with min <= max", value)
    return (lo, hi)


def _from_dict(cls: type[_T], mapping: Mapping[str, Any], where: str) -> _T:
    """Map dotted or snake_case keys to fields; unknown keys are a ConfigError."""
    if not isinstance(mapping, Mapping):
        raise _fail(where, cls.__name__, "a mapping", mapping)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    for key in sorted(mapping):
        name = str(key).replace(".", "_").replace("-", "_")
        if name not in names:
            raise ConfigError(
                f"{where}: unknown configuration key {key!r}",
                where=where,
                field=str(key),
                expected="one of " + ", ".join(sorted(n.replace("_", ".") for n in names)),
                got=repr(key),
            )
        value = mapping[key]
        kwargs[name] = tuple(value) if isinstance(value, list) and name.endswith("_ms") else value
    try:
        return cls(**kwargs, _where=where)  # type: ignore[call-arg]
    except TypeError as exc:  # pragma: no cover - guarded by the names check above
        raise _fail(where, cls.__name__, "valid keys", str(exc)) from exc


def _by_broker_ms(where: str, name: str, value: Any, brokers: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """A mapping (or pairs) of broker id -> ms (negative allowed), as pairs sorted by broker."""
    expected = "a mapping of broker id to milliseconds (an integer, negative allowed)"
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in value):
        items = [tuple(p) for p in value]
    else:
        raise _fail(where, name, expected, value)
    out: dict[int, int] = {}
    for key, ms in items:
        broker = int(key) if isinstance(key, str) and key.lstrip("-").isdigit() else key
        if isinstance(broker, bool) or not isinstance(broker, int) or broker not in brokers:
            raise _fail(where, name, "keys among the brokers' ids", key)
        if isinstance(ms, bool) or not isinstance(ms, int):
            raise _fail(where, name, expected, ms)
        out[broker] = ms
    return tuple(sorted(out.items()))


@dataclasses.dataclass(frozen=True)
class ClusterConfig:
    """Brokers, replica assignment and broker/controller settings (``docs/core-semantics.md`` rules 1.5-1.10).

    ``replicas`` is the assignment order used by elections (default: ``brokers``);
    ``flush_interval_ms=None`` means Kafka's default of never fsyncing (1.10), so a lossy crash
    drops everything written since start; ``network_delay_ms`` / ``controller_delay_ms`` are the
    ``(min, max)`` one-way delay of broker/client links and of controller links.
    ``controller_quorum_append_linger_ms`` (``controller.quorum.append.linger.ms``, Kafka's
    default 25): in the KRaft generation, how long a metadata record waits in the controller's
    batch before it is written, committed and seen (:mod:`epochlab.sim.controller`); 0
    publishes every decision at once.
    ``established``: the run begins on a cluster whose brokers registered long before (a live
    cluster that serves one run after another): no broker registers at time 0, each one's last
    heartbeat was up to one ``heartbeat_interval_ms`` before (its phase, drawn per boot), so a
    broker cut off at once is fenced ``session_timeout_ms`` after that heartbeat (in KRaft from
    Kafka 4.0, at the controller's next periodic check after it), not after 0; and its
    brokers follow the earlier runs' partitions, led by every broker, so each broker's fetcher
    thread to each other one already runs, blocked in its long poll: a follower that starts
    fetching from a leader joins that thread's next fetch, a phase drawn in
    ``0..replica_fetch_wait_max_ms`` later (:meth:`epochlab.sim.broker.Broker._start_fetcher`),
    except on its first start after a restart, which makes the threads anew and fetches at once
    (at the run's start the wait is shortened by how long before time 0 the harness made the
    run's topic, :data:`epochlab.sim.broker.ESTABLISHED_PARTITION_LEAD_MS`);
    ``False`` (the default): every broker starts and registers at time 0 and fetches at once.
    ``first_role_ms`` (established clusters only): broker id -> the run-clock ms (negative:
    before time 0) at which that broker took its first role in the partition as the topic was
    made: a follower then joined its fetcher thread, and if that thread's fetch reached the
    leader before the leader's own first role, it was refused and waits
    ``replica_fetch_backoff_ms`` (:meth:`epochlab.sim.broker.Broker._start_fetcher`). A live
    run's own, read from its brokers' state-change log, is given to the model asked to
    reproduce it; without it a follower's start is
    :data:`epochlab.sim.broker.ESTABLISHED_PARTITION_LEAD_MS` before time 0 and the leader's
    lag behind it a draw from :data:`epochlab.sim.broker.FIRST_LEADER_LAG_MS`.
    ``tcp_retransmission_backoff`` (``tcp.retransmission.backoff``): messages a partition or a
    cut link held between brokers go at TCP's next retransmission after the path is usable
    again (200 ms after the hold began, doubling:
    :func:`epochlab.sim.network.retransmission_after`), as on a live cluster whose cuts drop
    packets; and in KRaft a broker's heartbeat unanswered for ``session_timeout_ms / 2`` closes
    its controller channel, whose next connection gets through at its SYN's next resend after
    a heal (:meth:`epochlab.sim.broker.Broker._heartbeat`); ``False`` (the default): at once,
    so a heal delivers what was held within a link delay.
    ``broker_startup_ms`` (``broker.startup.ms``) is the ``(min, max)`` time from a restart to
    the broker's registration (process start, log loading), drawn per restart: Kafka 4.3.1 on
    this machine took 2.2-4.3 s from restart to the ISR (``docs/kafka-run.md``), the model
    about 0.01-0.5 s after the broker is up; ``(0, 0)`` restarts at once.
    ``broker_unfence_ms`` (``broker.unfence.ms``, KRaft) is the ``(min, max)`` time from a
    restarted broker's accepted registration to its being ready to be unfenced, drawn per
    restart: the rest of ``BrokerServer.startup`` before ``setReadyToUnfence``. Until then the
    controller holds it fenced: it follows, but may not lead or join the ISR. Kafka 4.3.1 on
    this machine logged "The broker has been unfenced" 100-390 ms after the restarted broker's
    first role (median 180 ms, 159 restarts registered at once, ``docs/kafka-run.md``);
    ``(0, 0)`` unfences at the registration's first answer.
    ``transaction_pre_kip890`` (``transaction.pre_kip890``): ``True`` models transactions as
    before KIP-890 (no partition verification, no epoch bump per transaction), ``False`` as
    Kafka 4.0 with transaction.version 2; ``None`` = generation default (KIP-890 only in the
    latest generation). ``transaction_abort_timed_out_transaction_cleanup_interval_ms`` is how
    often the coordinator looks for transactions past ``transaction.timeout.ms``.
    ``replica_selector_class`` (``replica.selector.class``, KIP-392, 2.4+ so G3 on): ``None``
    (Kafka's default: consumers read from the leader) or ``"RackAwareReplicaSelector"``
    (consumers with a ``client_rack`` read from the follower in their rack; each broker is its
    own rack; ``docs/core-semantics.md``).
    ``kafka_release`` (``kafka.release``, e.g. ``"2.8.0"``): the release of the generation to
    model where a rule changed inside the generation's range; ``None``: the generation's
    latest behaviour. Today it matters in diverging-epoch only: before 2.8.1 the leader took
    the offset of a fetch it answered with DivergingEpoch as the follower's log end offset
    (KAFKA-13141). It must be a release of the run's generation (``ConfigError``). A
    ``+patch`` suffix (:data:`RELEASE_PATCHES`) models that release with a proposed fix.
    """

    brokers: tuple[int, ...] = (1, 2, 3)
    replicas: tuple[int, ...] | None = None
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool | None = None
    replica_lag_time_max_ms: int = 30000
    session_timeout_ms: int = 6000
    heartbeat_interval_ms: int = 2000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_backoff_ms: int = 1000
    high_watermark_checkpoint_interval_ms: int = 5000
    flush_interval_ms: int | None = None
    eligible_leader_replicas_enable: bool | None = None
    broker_startup_ms: tuple[int, int] = (2000, 3800)
    broker_unfence_ms: tuple[int, int] = (100, 300)
    network_delay_ms: tuple[int, int] = (1, 5)
    controller_delay_ms: tuple[int, int] = (1, 10)
    controller_quorum_append_linger_ms: int = 25
    established: bool = False
    first_role_ms: tuple[tuple[int, int], ...] = ()
    tcp_retransmission_backoff: bool = False
    transaction_pre_kip890: bool | None = None
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10000
    replica_selector_class: str | None = None
    kafka_release: str | None = None
    _where: dataclasses.InitVar[str] = "ClusterConfig"

    def __post_init__(self, _where: str) -> None:
        w = _where
        brokers = self.brokers
        if not isinstance(brokers, (list, tuple)) or not brokers:
            raise _fail(w, "brokers", "a non-empty list of broker ids", brokers)
        ids = tuple(_int(w, "brokers", b) for b in brokers)
        if len(set(ids)) != len(ids):
            raise _fail(w, "brokers", "distinct broker ids", brokers)
        object.__setattr__(self, "brokers", ids)
        replicas = ids if self.replicas is None else self.replicas
        if not isinstance(replicas, (list, tuple)) or not replicas:
            raise _fail(w, "replicas", "a non-empty list of broker ids", replicas)
        reps = tuple(_int(w, "replicas", r) for r in replicas)
        if len(set(reps)) != len(reps) or any(r not in ids for r in reps):
            raise _fail(w, "replicas", "distinct ids among brokers", replicas)
        object.__setattr__(self, "replicas", reps)
        _int(w, "min_insync_replicas", self.min_insync_replicas, 1)
        if self.unclean_leader_election_enable is not None:
            _bool(w, "unclean_leader_election_enable", self.unclean_leader_election_enable)
        for name in ("replica_lag_time_max_ms", "session_timeout_ms", "heartbeat_interval_ms",
                     "replica_fetch_backoff_ms", "high_watermark_checkpoint_interval_ms"):
            _int(w, name, getattr(self, name), 1)
        _int(w, "replica_fetch_wait_max_ms", self.replica_fetch_wait_max_ms, 0)
        _int(w, "controller_quorum_append_linger_ms", self.controller_quorum_append_linger_ms, 0)
        _bool(w, "established", self.established)
        object.__setattr__(self, "first_role_ms", _by_broker_ms(w, "first_role_ms", self.first_role_ms, ids))
        _bool(w, "tcp_retransmission_backoff", self.tcp_retransmission_backoff)
        if self.flush_interval_ms is not None:
            _int(w, "flush_interval_ms", self.flush_interval_ms, 1)
        if self.eligible_leader_replicas_enable is not None:
            _bool(w, "eligible_leader_replicas_enable", self.eligible_leader_replicas_enable)
        if self.transaction_pre_kip890 is not None:
            _bool(w, "transaction_pre_kip890", self.transaction_pre_kip890)
        if self.kafka_release is not None:
            _release(w, self.kafka_release)
        if self.replica_selector_class is not None:
            name = self.replica_selector_class
            if name not in ("RackAwareReplicaSelector", "org.apache.kafka.common.replica.RackAwareReplicaSelector"):
                raise _fail(w, "replica_selector_class", "null or \"RackAwareReplicaSelector\"", name)
        _int(w, "transaction_abort_timed_out_transaction_cleanup_interval_ms",
             self.transaction_abort_timed_out_transaction_cleanup_interval_ms, 1)
        object.__setattr__(self, "broker_startup_ms", _range(w, "broker_startup_ms", self.broker_startup_ms))
        object.__setattr__(self, "broker_unfence_ms", _range(w, "broker_unfence_ms", self.broker_unfence_ms))
        object.__setattr__(self, "network_delay_ms", _range(w, "network_delay_ms", self.network_delay_ms))
        object.__setattr__(
            self, "controller_delay_ms", _range(w, "controller_delay_ms", self.controller_delay_ms)
        )

    @property
    def replication_factor(self) -> int:
        return len(self.replicas or ())

    @property
    def release(self) -> tuple[int, ...] | None:
        """``kafka_release`` as a version tuple (``(2, 8, 0)``), ``None`` if not set."""
        return None if self.kafka_release is None else _release("cluster", self.kafka_release)

    @property
    def release_patches(self) -> tuple[str, ...]:
        """The ``+patch`` names of ``kafka_release`` (:data:`RELEASE_PATCHES`)."""
        return () if self.kafka_release is None else _split_release("cluster", self.kafka_release)[1]

    @classmethod
    def from_dict(cls, mapping: Mapping[str, Any], where: str = "cluster") -> ClusterConfig:
        """Build from Kafka dotted names or snake_case (``replication.factor`` is accepted and
        must equal the number of ``replicas``)."""
        data = dict(mapping)
        rf = data.pop("replication.factor", data.pop("replication_factor", None))
        config = _from_dict(cls, data, where)
        if rf is not None and rf != config.replication_factor:
            raise _fail(where, "replication_factor", f"{config.replication_factor} (len(replicas))", rf)
        return config


_ACKS = {"0": "0", "1": "1", "all": "all", "-1": "all", 0: "0", 1: "1", -1: "all"}


@dataclasses.dataclass(frozen=True)
class ProducerConfig:
    """Producer settings (``docs/core-semantics.md`` rules 1.8, 1.11). ``acks`` is normalised to ``"0"``,
    ``"1"`` or ``"all"``. As in the Java client (3.x), explicitly enabling idempotence requires
    ``acks=all`` and at most 5 in-flight requests; a transactional id implies idempotence.
    ``buffer_memory_records`` / ``batch_size_records`` count records instead of bytes.
    ``socket_timeout_ms`` (librdkafka's ``socket.timeout.ms``): unset, the producer is the Java
    client, which gives up on a request after ``request_timeout_ms`` itself and closes the
    connection; set, it is librdkafka, for which ``request.timeout.ms`` is only the broker's
    timeout of an acks=all wait and the client gives up after the lesser of
    ``socket_timeout_ms`` and the batch's remaining delivery timeout (then disconnects,
    ``socket.max.fails`` = 1). ``socket_connection_setup_timeout_ms`` (the Java client's
    ``socket.connection.setup.timeout.ms``, Kafka's default 10,000): set, the producer opens a
    connection to a broker before its first request there and after a closed one, and an
    attempt whose packets a cut link drops waits for this timeout (growing to
    ``socket_connection_setup_timeout_max_ms`` with each failed attempt) before the client
    gives up on the broker and asks for metadata again (:mod:`epochlab.sim.producer`); its
    metadata requests go over those connections too, to the least loaded broker, which answers
    from its metadata cache; unset, a connection is there as soon as it is needed and the
    controller answers metadata requests. Set together with ``socket_timeout_ms`` it is
    librdkafka's setting of the same name (default 30,000): the connections with librdkafka's
    timing (a fixed set-up timeout, its reconnect backoff; :mod:`epochlab.sim.producer`),
    metadata still from the controller. ``metadata_recovery_strategy`` (the Java
    client's ``metadata.recovery.strategy``, 3.8+: ``"none"``, or ``"rebootstrap"``, its default
    from 4.0, KIP-1102; unset, the model's producer does not re-bootstrap and a live Java client
    runs with its release's default): with ``"rebootstrap"`` a producer that finds no broker
    available forgets the topic's partitions, and a send then waits up to ``max_block_ms`` for
    metadata before its record enters the accumulator (:mod:`epochlab.sim.producer`); a Java
    client setting, so not with ``socket_timeout_ms``. ``metadata_at_start`` (an epochlab
    setting, no Kafka one): the producer asks for the topic's metadata (and an idempotent one
    for its producer id) as soon as it starts, and again when it is restarted, as an
    application that looks the topic up before it sends does (``KafkaProducer.partitionsFor``:
    the live harness's Java producer does, ``epochlab.kafka.live.java_clients``); unset, it
    asks at its first send."""

    acks: str = "1"
    retries: int = 2147483647
    retry_backoff_ms: int = 100
    request_timeout_ms: int = 30000
    delivery_timeout_ms: int = 120000
    max_in_flight_requests_per_connection: int = 5
    enable_idempotence: bool = False
    transactional_id: str | None = None
    buffer_memory_records: int = 10000
    max_block_ms: int = 60000
    linger_ms: int = 0
    batch_size_records: int = 1
    transaction_timeout_ms: int = 60000
    socket_timeout_ms: int | None = None
    socket_connection_setup_timeout_ms: int | None = None
    socket_connection_setup_timeout_max_ms: int = 30000
    metadata_recovery_strategy: str | None = None
    metadata_at_start: bool = False
    _where: dataclasses.InitVar[str] = "ProducerConfig"

    def __post_init__(self, _where: str) -> None:
        w = _where
        # bool is an int in Python: acks = true must not pass as acks=1
        acks = _ACKS.get(self.acks) if isinstance(self.acks, (str, int)) and not isinstance(self.acks, bool) else None
        if acks is None:
            raise _fail(w, "acks", '"0", "1", "all" or "-1"', self.acks)
        object.__setattr__(self, "acks", acks)
        _int(w, "retries", self.retries)
        for name in ("retry_backoff_ms", "request_timeout_ms", "delivery_timeout_ms",
                     "max_in_flight_requests_per_connection", "buffer_memory_records",
                     "batch_size_records", "transaction_timeout_ms"):
            _int(w, name, getattr(self, name), 1)
        _int(w, "max_block_ms", self.max_block_ms)
        _int(w, "linger_ms", self.linger_ms)
        if self.socket_timeout_ms is not None:
            _int(w, "socket_timeout_ms", self.socket_timeout_ms, 1)
        if self.socket_connection_setup_timeout_ms is not None:
            _int(w, "socket_connection_setup_timeout_ms", self.socket_connection_setup_timeout_ms, 1)
        _int(w, "socket_connection_setup_timeout_max_ms", self.socket_connection_setup_timeout_max_ms, 1)
        if self.metadata_recovery_strategy not in (None, "none", "rebootstrap"):
            raise _fail(w, "metadata_recovery_strategy", '"none" or "rebootstrap"', self.metadata_recovery_strategy)
        if self.metadata_recovery_strategy == "rebootstrap" and self.socket_timeout_ms is not None:
            raise _fail(w, "metadata_recovery_strategy",
                        '"none" with socket_timeout_ms (a Java client setting; socket_timeout_ms makes '
                        'the producer librdkafka)', self.metadata_recovery_strategy)
        _bool(w, "enable_idempotence", self.enable_idempotence)
        _bool(w, "metadata_at_start", self.metadata_at_start)
        if self.transactional_id is not None:
            if not isinstance(self.transactional_id, str) or not self.transactional_id:
                raise _fail(w, "transactional_id", "a non-empty string", self.transactional_id)
            object.__setattr__(self, "enable_idempotence", True)
        if self.enable_idempotence and acks != "all":
            raise _fail(w, "acks", '"all" when enable.idempotence is true', self.acks)
        if self.enable_idempotence and self.max_in_flight_requests_per_connection > 5:
            raise _fail(w, "max_in_flight_requests_per_connection",
                        "<= 5 when enable.idempotence is true",
                        self.max_in_flight_requests_per_connection)

    @classmethod
    def from_dict(cls, mapping: Mapping[str, Any], where: str = "producer") -> ProducerConfig:
        return _from_dict(cls, mapping, where)


@dataclasses.dataclass(frozen=True)
class ConsumerConfig:
    """Consumer settings. ``isolation_level="read_committed"`` reads up to the last stable
    offset and drops aborted transactional data (``docs/core-semantics.md`` rule 1.12); ``read_uncommitted``
    reads up to the HW. Control records are never delivered. ``client_rack`` (``client.rack``):
    the broker id whose rack the consumer shares (each broker is its own rack); with a
    cluster's ``replica_selector_class`` the leader may send it to that follower (KIP-392),
    for ``metadata_max_age_ms`` (``metadata.max.age.ms``) at most before asking again.
    ``fetch_max_wait_ms`` (``fetch.max.wait.ms``): how long a broker holds a fetch that finds
    nothing new to read (``fetch.min.bytes`` is Kafka's default, one byte: any record
    completes it); 0 answers every fetch at once. ``poll_interval_ms``: how soon the fetcher
    tries again when it cannot fetch (no leader known, an error, an answer that came back
    empty without waiting)."""

    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    auto_offset_reset: str = "latest"
    isolation_level: str = "read_uncommitted"
    fetch_max_records: int = 500
    poll_interval_ms: int = 100
    client_rack: int | None = None
    metadata_max_age_ms: int = 300000
    fetch_max_wait_ms: int = 500
    _where: dataclasses.InitVar[str] = "ConsumerConfig"

    def __post_init__(self, _where: str) -> None:
        w = _where
        _bool(w, "enable_auto_commit", self.enable_auto_commit)
        _int(w, "auto_commit_interval_ms", self.auto_commit_interval_ms, 1)
        if self.auto_offset_reset not in ("earliest", "latest", "none"):
            raise _fail(w, "auto_offset_reset", '"earliest", "latest" or "none"', self.auto_offset_reset)
        if self.isolation_level not in ("read_uncommitted", "read_committed"):
            raise _fail(w, "isolation_level", '"read_uncommitted" or "read_committed"',
                        self.isolation_level)
        _int(w, "fetch_max_records", self.fetch_max_records, 1)
        _int(w, "poll_interval_ms", self.poll_interval_ms, 1)
        if self.client_rack is not None:
            _int(w, "client_rack", self.client_rack)
        _int(w, "metadata_max_age_ms", self.metadata_max_age_ms, 1)
        _int(w, "fetch_max_wait_ms", self.fetch_max_wait_ms, 0)

    @classmethod
    def from_dict(cls, mapping: Mapping[str, Any], where: str = "consumer") -> ConsumerConfig:
        return _from_dict(cls, mapping, where)
