"""Elect a chosen broker on a live KRaft cluster, with Kafka's own client classes.

Kafka has no "make this broker the leader" request: an operator reorders the partition's
replica list so the chosen broker comes first (``AlterPartitionReassignments`` with the same
replicas, so no data moves), asks for a preferred election (``ElectLeaders(PREFERRED)``), and
puts the original order back. :func:`elect_broker` does exactly that.

Where the requests go matters when a scenario has cut a broker off from the controller: a broker
forwards both requests to the active controller (``KafkaApis.handleAlterPartitionReassignmentsRequest``
/ ``handleElectLeaders`` -> ``ForwardingManager``), and a client sends them to the "controller"
its metadata names, which a KRaft broker picks at random among the live brokers
(``KRaftMetadataCache.getRandomAliveBrokerId``): possibly the cut-off one. So:

* ``AlterPartitionReassignments`` goes to the controllers directly: Kafka's Java ``Admin``
  bootstrapped with ``bootstrap.controllers`` (KIP-919, Kafka 3.7+; the request lists the
  ``controller`` listener in ``AlterPartitionReassignmentsRequest.json``);
* ``ElectLeaders`` is not served on the controller listener to clients (the controller answers
  ``UnsupportedEndpointTypeException``, measured on 4.3.1), so it goes to a broker the caller
  names (one still connected to the controller): the request and its answer are serialized
  and parsed by Kafka's own classes (``ElectLeadersRequest.Builder``, ``RequestHeader``,
  ``AbstractResponse.parseResponse``) and carried over a plain socket.

What the controller does with them (``ReplicationControlManager.alterPartitionReassignment``,
``electLeaders``; ``PartitionChangeBuilder``): a new order of the same replicas is applied at
once as a ``PartitionChangeRecord`` that bumps the partition epoch but not the leader epoch
(``triggerLeaderEpochBumpForReplicaReassignmentIfNeeded`` bumps it only when a replica is
removed); a preferred election then elects the first replica if it is in the ISR and active
(registered, unfenced, not shutting down), bumping the leader epoch once. An unclean election
(``ElectionType.UNCLEAN``) elects the first live ISR member in replica order, and only when
none is live, the first live replica outside it (``PartitionChangeBuilder.electAnyLeader``).

The classes are those of the cluster's own release, in this process's JVM
(:func:`epochlab.kafka.jvm.ensure_jvm`, JPype: the ``kafka`` extra).
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import Any

from epochlab.errors import ConfigError
from epochlab.kafka.live.cluster import LocalCluster

__all__ = ["ControllerAdmin", "Election", "MIN_RELEASE", "controller_admin_available", "elect_broker"]

#: The first release whose Admin client can bootstrap from the controllers (KIP-919).
MIN_RELEASE = (3, 7)

#: Seconds each Admin call may take before it is a failed step.
_TIMEOUT_S = 15


@dataclass(frozen=True)
class Election:
    """What :func:`elect_broker` did: the order it set, the election's answer (``None``: a
    leader was elected; otherwise Kafka's error name, e.g. ``ELECTION_NOT_NEEDED`` when the
    broker already led, ``PREFERRED_LEADER_NOT_AVAILABLE`` when it is not an acceptable
    leader) and the order it restored."""

    broker: int
    election_type: str
    reordered: tuple[int, ...]
    error: str | None
    restored: tuple[int, ...]

    def describe(self) -> str:
        how = "unclean " if self.election_type == "UNCLEAN" else ""
        if self.error is None:
            outcome = f"{how}election of broker {self.broker} done"
        else:
            outcome = f"{how}election of broker {self.broker}: {self.error}"
        return (f"replicas reordered to {list(self.reordered)}, {outcome}, order "
                f"{list(self.restored)} restored")


def _release_tuple(version: str) -> tuple[int, int]:
    major, minor = (int(p) for p in version.split(".")[:2])
    return major, minor


def controller_admin_available(cluster: LocalCluster) -> bool:
    """Whether :class:`ControllerAdmin` can reach ``cluster``'s controllers: a release with
    KIP-919 and at least one dedicated controller, in KRaft mode (a ZooKeeper-mode cluster's
    controller is a broker: no controller listener)."""
    return (_release_tuple(cluster.version) >= MIN_RELEASE and bool(cluster.controller_ids)
            and getattr(cluster, "mode", "kraft") == "kraft")


class ControllerAdmin:
    """Kafka's Java ``Admin`` bootstrapped at ``cluster``'s controllers. Close it when done
    (:meth:`close`, or use it as a context manager)."""

    def __init__(self, cluster: LocalCluster) -> None:
        if _release_tuple(cluster.version) < MIN_RELEASE:
            raise ConfigError(f"electing a chosen broker needs an Admin client that reaches the controllers "
                              f"(Kafka 3.7+, KIP-919); this cluster runs {cluster.version}",
                              where="elect", field="version", expected="3.7 or later", got=cluster.version)
        if not cluster.controller_ids:
            raise ConfigError("the cluster has no dedicated controller to send the election to",
                              where="elect", field="controllers", expected="1 or more", got=0)
        from epochlab.kafka.jvm import ensure_jvm

        self._jpype = ensure_jvm(cluster.version)
        j = self._jpype.JClass
        props = j("java.util.Properties")()
        props.put("bootstrap.controllers", ",".join(cluster.nodes[c].address for c in cluster.controller_ids))
        props.put("request.timeout.ms", "10000")
        props.put("default.api.timeout.ms", str(_TIMEOUT_S * 1000))
        props.put("client.id", "epochlab-controller-admin")
        self._admin = j("org.apache.kafka.clients.admin.Admin").create(props)
        self._unit = j("java.util.concurrent.TimeUnit").SECONDS
        self.cluster = cluster
        self._correlation = 0

    def __enter__(self) -> ControllerAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def _tp(self, topic: str, partition: int) -> Any:
        return self._jpype.JClass("org.apache.kafka.common.TopicPartition")(topic, partition)

    def reorder(self, topic: str, partition: int, replicas: tuple[int, ...]) -> None:
        """Set the partition's replica list to ``replicas`` (the same brokers in another order:
        applied at once, nothing to copy) and wait until the controller committed it."""
        j = self._jpype.JClass
        order = j("java.util.ArrayList")()
        for r in replicas:
            order.add(j("java.lang.Integer")(r))
        change = j("java.util.HashMap")()
        change.put(self._tp(topic, partition),
                   j("java.util.Optional").of(j("org.apache.kafka.clients.admin.NewPartitionReassignment")(order)))
        self._get(self._admin.alterPartitionReassignments(change).all(), f"reordering replicas to {list(replicas)}")

    def elect(self, topic: str, partition: int, via: int, unclean: bool = False) -> str | None:
        """Ask broker ``via`` for a preferred (or unclean) election; ``None`` when the
        controller elected a leader, else the name of Kafka's error for the partition (or for
        the whole request)."""
        j = self._jpype.JClass
        kind = j("org.apache.kafka.common.ElectionType").UNCLEAN if unclean else \
            j("org.apache.kafka.common.ElectionType").PREFERRED
        partitions = j("java.util.HashSet")()
        partitions.add(self._tp(topic, partition))
        keys = j("org.apache.kafka.common.protocol.ApiKeys")
        version = keys.ELECT_LEADERS.latestVersion()
        self._correlation += 1
        header = j("org.apache.kafka.common.requests.RequestHeader")(
            keys.ELECT_LEADERS, version, "epochlab-controller-admin", self._correlation)
        request = j("org.apache.kafka.common.requests.ElectLeadersRequest$Builder")(
            kind, partitions, _TIMEOUT_S * 1000).build(version)
        payload = bytes(_buffer_bytes(self._jpype, request.serializeWithHeader(header)))
        answer = _round_trip(self.cluster.nodes[via].host, self.cluster.nodes[via].port, payload)
        buffer = j("java.nio.ByteBuffer").wrap(self._jpype.JArray(self._jpype.JByte)(answer))
        response = j("org.apache.kafka.common.requests.AbstractResponse").parseResponse(buffer, header)
        data = response.data()
        errors = j("org.apache.kafka.common.protocol.Errors")
        if data.errorCode() != 0:
            return str(errors.forCode(data.errorCode()).name())
        for result in data.replicaElectionResults():
            if str(result.topic()) != topic:
                continue
            for p in result.partitionResult():
                if p.partitionId() == partition:
                    code = p.errorCode()
                    return None if code == 0 else str(errors.forCode(code).name())
        raise ConfigError(f"the election answer of broker {via} does not name {topic}-{partition}", where="elect",
                          field="answer", expected=f"{topic}-{partition}", got=str(data))

    def _get(self, future: Any, what: str) -> Any:
        try:
            return future.get(_TIMEOUT_S, self._unit)
        except Exception as exc:  # noqa: BLE001 - ExecutionException / TimeoutException from Java
            cause = exc.getCause() if hasattr(exc, "getCause") and exc.getCause() is not None else exc
            raise ConfigError(f"{what} through the controllers failed: {cause}", where="elect",
                              field="admin", expected="the controller's answer", got=str(cause)) from None


def _buffer_bytes(jpype: Any, buffer: Any) -> Any:
    """The remaining bytes of a Java ``ByteBuffer`` as a Java ``byte[]``."""
    out = jpype.JArray(jpype.JByte)(int(buffer.remaining()))
    buffer.get(out)
    return out


def _round_trip(host: str, port: int, payload: bytes, timeout_s: float = _TIMEOUT_S) -> bytes:
    """Send one size-prefixed Kafka request and read the size-prefixed answer."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as conn:
            conn.sendall(struct.pack(">i", len(payload)) + payload)
            size = struct.unpack(">i", _read(conn, 4))[0]
            return _read(conn, size)
    except OSError as exc:
        raise ConfigError(f"no answer from {host}:{port} to the election request: {exc}", where="elect",
                          field="broker", expected="an answer", got=f"{host}:{port}") from exc


def _read(conn: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = conn.recv(left)
        if not chunk:
            raise OSError(f"connection closed with {left} of {n} bytes unread")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def elect_broker(admin: ControllerAdmin, topic: str, partition: int, replicas: tuple[int, ...], broker: int,
                 via: int, unclean: bool = False) -> Election:
    """Make ``broker`` the leader the way an operator does: replicas reordered with ``broker``
    first, a preferred (``unclean``: unclean) election asked of broker ``via``, then
    ``replicas`` (the order to keep) restored, also when the election failed."""
    if broker not in replicas:
        raise ConfigError(f"elect: broker {broker} is not a replica of {topic}-{partition} ({list(replicas)})",
                          where="elect", field="broker", expected=list(replicas), got=broker)
    first = (broker, *(r for r in replicas if r != broker))
    admin.reorder(topic, partition, first)
    try:
        error = admin.elect(topic, partition, via, unclean)
    finally:
        if first != tuple(replicas):
            admin.reorder(topic, partition, tuple(replicas))
    return Election(broker, "UNCLEAN" if unclean else "PREFERRED", first, error, tuple(replicas))
