"""Run a scenario's steps on a real cluster: the step mapper.

:func:`run_on_cluster` creates a topic for the run (one partition, replicas in the scenario's
broker order so its first broker is the preferred and initial leader, topic configs from the
scenario's cluster settings), executes the steps at their wall-clock times (``at_ms`` from the
start of the run, ``after_ms`` after the previous step ended), samples the cluster while time
passes (:class:`~epochlab.kafka.runs.state.RealView`), and judges the scenario's expectations
on the real run. Values travel as 8-byte big-endian integers, what ``epochlab inspect`` reads
back.

Mapping (``docs/kafka-run.md`` has the table and what differs from the model):

=================== ==========================================================================
action              real operation
=================== ==========================================================================
produce / flush     the producer's ``send`` per value / ``flush`` (``RecordingProducer`` or
                    ``JavaRecordingProducer``, consumers likewise, with ``--client``)
consume / commit    the consumer's ``poll`` (fetches until quiet) / asynchronous commit,
                    waited for up to 0.5 s; auto-commit as the Java client does it: in
                    ``poll``, once per interval
crash / restart     SIGKILL and abort its sockets (a machine crash) / start again
partition / heal    nft cuts between the groups (the scenario's unlisted nodes form one more
                    group, as in the model) / remove the partition's cuts (dropped links stay)
isolate             the broker cut from every other node and the harness
set_link drop 1/0   cut / uncut the pair (both ways)
set_link delay_ms   Toxiproxy latency on the pair's proxied connections, both directions
                    (:mod:`epochlab.kafka.live.proxy`, planned by :mod:`epochlab.kafka.runs.links`)
slow_follower       Toxiproxy latency on what the follower sends to the other brokers
controlled_shutdown SIGTERM and wait
elect_preferred     Admin ``electLeaders(PREFERRED)`` at the controllers
elect               the replicas reordered with the broker first, ``electLeaders(PREFERRED)``
                    (``UNCLEAN`` with ``unclean``), the order restored
                    (:mod:`epochlab.kafka.live.controller_admin`)
wait / wait_until   sleep / poll the condition through the Admin API and the data directories
transactions        ``begin`` / ``commit`` / ``abort`` (commit blocks until it has an outcome)
crash_consumer      drop the consumer without a commit; ``restart_consumer``: a new one in the
                    same group, from the committed offset
list_offsets        the consumer's ``list_offsets`` (librdkafka's ``query_watermark_offsets``, the
                    Java ``endOffsets``/``beginningOffsets``, retried until answered; it blocks,
                    the model's answer comes later)
=================== ==========================================================================

``crash`` with ``lose_unflushed`` is a power cut: the broker's log directory is on the lossy
filesystem (:mod:`epochlab.kafka.live.lossyfs`, decided up front by :func:`lossy_brokers`), the
step SIGKILLs the JVM, aborts its sockets, then cuts the filesystem's power (every write not
fsynced is lost) and mounts it again before a restart.

Not mapped (the scenario is *not runnable on real Kafka*, :func:`unmappable` says why):
``set_link`` with a fractional drop or duplicates (the kernel here has no netem), the
coordinator actions; ``elect`` on a release before 3.7. Link delays and slow followers need
Toxiproxy (``scripts/kafka-proxy-setup``), power cuts the lossy filesystem
(``scripts/kafka-fuse-setup``), each refused up front when missing.
"""

from __future__ import annotations

import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from epochlab.errors import ConfigError
from epochlab.generations import Generation, parse_release
from epochlab.kafka.live.clients import History, KafkaAdmin
from epochlab.kafka.live.client_log import ClientLog, capture
from epochlab.kafka.live import lossyfs
from epochlab.kafka.live.cluster import LocalCluster, process_age_s
from epochlab.kafka.live.controller_admin import controller_admin_available
from epochlab.kafka.live.faults import firewall_available
from epochlab.kafka.live.proxy import proxy_missing
from epochlab.kafka.live.zookeeper import release_tuple
from epochlab.kafka.runs.driver import Driver
from epochlab.kafka.runs.links import delayed_clients, uses_proxy
from epochlab.kafka.runs.state import DiskReplica
from epochlab.observe import Observer, StepRecord
from epochlab.scenarios.expectations import Check, Facts, evaluate
from epochlab.scenarios.model import Scenario
from epochlab.scenarios.runner import step_checks
from epochlab.sim.config import FLUSH_CHECK_INTERVAL_MS, ClusterConfig
from epochlab.steps import STEPS, Unmapped

__all__ = ["BROKER_SETTINGS", "GENERATION", "JAVA_ERROR_NAMES", "NOT_EVALUABLE", "RealRun", "broker_overrides", "cluster_settings",
           "lossy_brokers", "restore", "run_on_cluster", "unmappable"]

#: The protocol generation a current Kafka release (4.x) implements.
GENERATION = "strict-min-isr"
#: librdkafka's local error names -> the Java client's error for the same event, which the
#: scenarios name. Applied to what the expectations read; ``history.jsonl`` keeps librdkafka's.
JAVA_ERROR_NAMES = {
    "_TRANSPORT": "NETWORK_EXCEPTION",        # the connection broke with the request in flight
    "_TIMED_OUT": "REQUEST_TIMED_OUT",        # no response within request.timeout.ms
    # a transactional producer fenced by a newer session: librdkafka folds the broker's
    # INVALID_PRODUCER_EPOCH and PRODUCER_FENCED into one local error (rdkafka_txnmgr.c,
    # rd_kafka_txn_normalize_err); the Java client throws ProducerFencedException
    "_FENCED": "PRODUCER_FENCED",
}
#: Expectation kinds the real run cannot judge, and why.
NOT_EVALUABLE = {"event_seen": "a real run has no engine event log (the brokers' server.log is not mapped "
                                "onto the model's event strings)"}


def unmappable(scenario: Scenario, cluster: LocalCluster | None = None, version: str | None = None) -> list[str]:
    """Why ``scenario`` cannot run faithfully on a real cluster (empty: it can): ``cluster``'s,
    or before it starts one of Kafka ``version``. A scenario that names a ``kafka.release`` runs
    only on a cluster of that very release (without a ``+patch``: no cluster runs a proposed fix)."""
    why = []
    version = cluster.version if cluster is not None else version
    lossy_fs = lossyfs.available() if lossy_brokers(scenario) else None
    for step in scenario.steps:
        p, where = step.params, f"step {step.index + 1} ({step.describe()})"
        if step.action == "crash" and p.get("lose_unflushed"):
            if lossy_fs is not None:
                why.append(f"{where}: a power loss needs the lossy filesystem: {lossy_fs}")
            elif cluster is not None and p["broker"] not in cluster.lossy_mounted:
                why.append(f"{where}: broker {p['broker']}'s log directory is not on a lossy filesystem this "
                           "process mounted (let `epochlab kafka run` start the cluster, without --cluster-dir)")
        elif step.action == "set_link":
            if p.get("delay_ms") is not None and "coordinator" in (p["a"], p["b"]):
                why.append(f"{where}: the coordinator is a broker chosen by Kafka, its link cannot be proxied")
            if p.get("duplicate"):
                why.append(f"{where}: duplicated packets need netem")
            if p.get("drop") not in (0.0, 1.0, 0, 1):
                why.append(f"{where}: a fractional drop needs netem")
        elif step.action == "list_offsets" and isinstance(p.get("spec"), int):
            why.append(f"{where}: a ListOffsets by timestamp asks for model time (ms since the run "
                       "began, records stamped with the leader's append time); a real cluster's "
                       "timestamps are wall-clock (not mapped)")
        elif step.action == "elect" and cluster is not None and not controller_admin_available(cluster):
            why.append(f"{where}: electing a chosen broker needs Kafka's Admin client at the controllers "
                       f"(Kafka 3.7+, KIP-919); this cluster runs {cluster.version}")
        elif step.action in _NO_MAPPING:
            why.append(f"{where}: {_NO_MAPPING[step.action]}")
    cfg = ClusterConfig.from_dict(scenario.cluster, f"{scenario.where}: cluster")
    if cfg.kafka_release is not None and cfg.kafka_release != version:
        how = ("it names a proposed fix, which no released cluster runs" if cfg.release_patches
               else f"run it on a cluster of that release, --kafka-version {cfg.kafka_release}")
        why.append(f"kafka.release {cfg.kafka_release}: the model follows that release's rules; a real "
                   f"cluster runs its own release's ({how})")
    uses_links = any(s.action in ("partition", "heal", "isolate", "set_link", "slow_follower") for s in scenario.steps)
    link_tools = firewall_available() if uses_links else None
    if link_tools is not None:  # refused before any broker starts, naming what installs it
        why.append(f"its link faults cannot be applied on this machine: {link_tools}")
    proxy_tools = proxy_missing() if uses_proxy(scenario) and link_tools is None else None
    if proxy_tools is not None:  # delays and slow followers go through Toxiproxy (epochlab.kafka.live.proxy)
        why.append(f"its delayed links cannot be applied on this machine: {proxy_tools}")
    if cluster is not None:
        missing = [b for b in cfg.brokers if b not in cluster.broker_ids]
        if missing:
            why.append(f"the scenario needs brokers {list(cfg.brokers)}; the cluster has {cluster.broker_ids}")
        if cfg.replica_selector_class is not None and "replica.selector.class" not in _broker_properties(cluster):
            why.append("fetch from follower needs brokers started with replica.selector.class "
                       f"(this cluster's have none; start one for the scenario: {RACK_AWARE_SELECTOR})")
        if uses_links and link_tools is None and cluster.network != "netns":
            why.append("link faults need the cluster's netns network (root and nft)")
        clients = delayed_clients(scenario)
        if len(clients) > cluster.proxied_listeners:
            why.append(f"delaying the links of clients {clients} needs brokers with {len(clients)} proxied "
                       f"listener(s) (this cluster's have {cluster.proxied_listeners}; start one for the scenario)")
    return why


#: The steps no live cluster takes, whatever their parameters, and why (``epochlab.steps``:
#: ``live`` is ``Unmapped``).
_NO_MAPPING = {s.name: s.live.reason for s in STEPS.values() if isinstance(s.live, Unmapped)}


@dataclass
class RealRun:
    """Everything one real run produced."""

    scenario: Scenario
    topic: str
    records: list[StepRecord]
    history: History
    observer: Observer
    timeline: list[tuple[int, int | None, int | None, tuple[int, ...], bool]]
    final_disk: dict[int, DiskReplica]
    checks: list[Check]
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    inspect: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: what the run's clients logged (:mod:`epochlab.kafka.live.client_log`)
    client_log: ClientLog | None = None

    @property
    def expectations_hold(self) -> bool:
        return all(c.passed or c.status == "not evaluable" for c in self.checks)


#: scenario cluster setting -> the broker (or controller) property it stands for
BROKER_SETTINGS = {
    "session_timeout_ms": "broker.session.timeout.ms",
    "heartbeat_interval_ms": "broker.heartbeat.interval.ms",
    "replica_lag_time_max_ms": "replica.lag.time.max.ms",
    "replica_fetch_wait_max_ms": "replica.fetch.wait.max.ms",
    "replica_fetch_backoff_ms": "replica.fetch.backoff.ms",
    "high_watermark_checkpoint_interval_ms": "replica.high.watermark.checkpoint.interval.ms",
}


def lossy_brokers(scenario: Scenario) -> tuple[int, ...]:
    """The brokers a ``crash`` with ``lose_unflushed`` hits: their log directories go on the
    lossy filesystem."""
    return tuple(sorted({s.params["broker"] for s in scenario.steps
                         if s.action == "crash" and s.params.get("lose_unflushed")}))


def broker_overrides(scenario: Scenario) -> dict[str, str]:
    """``server.properties`` entries that give a cluster the scenario's broker settings (the
    model's defaults where it sets none), for a cluster started for this scenario."""
    return cluster_overrides(scenario.cluster, f"{scenario.where}: cluster")


def cluster_overrides(cluster: dict[str, Any], where: str = "cluster") -> dict[str, str]:
    """:func:`broker_overrides` for a scenario's or schedule's ``cluster`` table alone."""
    cfg = ClusterConfig.from_dict(cluster, where)
    out = {prop: str(getattr(cfg, name)) for name, prop in BROKER_SETTINGS.items()}
    if cfg.replica_selector_class is not None:  # KIP-392; the brokers' racks are their ids
        out["replica.selector.class"] = RACK_AWARE_SELECTOR
    if cfg.flush_interval_ms is not None:
        # a topic's flush.ms acts only when LogManager's "kafka-log-flusher" task runs
        # (flushDirtyLogs, every log.flush.scheduler.interval.ms, default Long.MAX_VALUE: never),
        # and that task first runs log.initial.task.delay.ms (30 s) after the broker started;
        # the model's checks run from the start, every FLUSH_CHECK_INTERVAL_MS
        out["log.flush.scheduler.interval.ms"] = str(FLUSH_CHECK_INTERVAL_MS)
        out["log.initial.task.delay.ms"] = "0"
    return out


#: Before 3.8 (KAFKA-16552 made it ``log.initial.task.delay.ms``) LogManager's periodic tasks,
#: the time-based flush among them, first run a fixed 30 s after the broker started
#: (``LogManager.InitialTaskDelayMs``): measured on 0.10.2.2, where a power cut 3.6 s into a
#: run took records older than the scenario's 2 s ``flush.interval.ms``.
FIXED_FLUSHER_DELAY = ((3, 8), 30.0)


def await_flushers(cluster: LocalCluster, brokers: tuple[int, ...], cfg: ClusterConfig) -> float:
    """When the scenario sets ``flush.interval.ms`` on a release whose flusher first runs a
    fixed 30 s after the broker started (:data:`FIXED_FLUSHER_DELAY`), wait until the youngest
    of ``brokers`` is that old, so its flushes follow the interval from the run's start, as the
    model's do; returns the seconds waited."""
    settable_from, delay_s = FIXED_FLUSHER_DELAY
    if cfg.flush_interval_ms is None or release_tuple(cluster.version) >= settable_from:
        return 0.0
    ages = [age for age in (process_age_s(cluster.nodes[b].pid) for b in brokers) if age is not None]
    wait = delay_s + FLUSH_CHECK_INTERVAL_MS / 1000 - min(ages) if ages else 0.0
    if wait > 0:
        time.sleep(wait)
    return max(0.0, wait)


#: the class ``replica.selector.class = "RackAwareReplicaSelector"`` names
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def _broker_properties(cluster: LocalCluster) -> dict[str, str]:
    """The first broker's ``server.properties``."""
    props: dict[str, str] = {}
    for line in cluster.nodes[cluster.broker_ids[0]].config_path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props


def cluster_settings(cluster: LocalCluster) -> dict[str, int]:
    """The scenario setting names with the values a running cluster's brokers use (read from
    the first broker's ``server.properties``)."""
    props = _broker_properties(cluster)
    return {name: int(props[prop]) for name, prop in BROKER_SETTINGS.items() if prop in props}


def _topic_configs(cfg: ClusterConfig, generation: str) -> dict[str, str]:
    """The topic's configuration: the scenario's settings, and where it leaves unclean leader
    election unset the default of the generation the model runs in (on before 0.11, KIP-106)."""
    unclean = cfg.unclean_leader_election_enable
    if unclean is None:
        unclean = Generation.parse(generation).unclean_default
    out = {"min.insync.replicas": str(cfg.min_insync_replicas),
           "unclean.leader.election.enable": str(unclean).lower()}
    if cfg.flush_interval_ms is not None:
        out["flush.ms"] = str(cfg.flush_interval_ms)
    return out


#: The client families a live run can use, for its producers and consumers alike.
CLIENTS = ("librdkafka", "java")


def run_on_cluster(scenario: Scenario, cluster: LocalCluster, generation: str = GENERATION,
                   client: str = "librdkafka") -> RealRun:
    """Run ``scenario`` on ``cluster`` (running, with the scenario's brokers) in a topic of its
    own, its producers and consumers ``client``'s (:data:`CLIENTS`); raises
    :class:`ConfigError` when :func:`unmappable` has reasons."""
    if client not in CLIENTS:
        raise ConfigError(f"--client: expected one of {', '.join(CLIENTS)}, got {client!r}", where="--client",
                          field="client", expected=list(CLIENTS), got=client)
    reasons = unmappable(scenario, cluster)
    if reasons:
        raise ConfigError("not runnable on real Kafka: " + "; ".join(reasons), where=scenario.name,
                          field="steps", expected="actions with a real counterpart", got=reasons)
    cfg = ClusterConfig.from_dict(scenario.cluster, f"{scenario.where}: cluster")
    topic = f"el-{scenario.name[:80]}-{uuid.uuid4().hex[:6]}"
    # before the topic exists: a log's first time-based flush comes flush.ms after its creation
    # (LocalLog's lastFlushedTime), and the model's log is created at the run's start
    flushers = await_flushers(cluster, tuple(cfg.replicas or cfg.brokers), cfg)
    created = time.monotonic()
    KafkaAdmin(cluster.bootstrap_servers).create_topic(
        topic, min_insync_replicas=cfg.min_insync_replicas, configs=_topic_configs(cfg, generation),
        replica_assignment=[list(cfg.replicas or cfg.brokers)])
    settle = getattr(cluster, "settle_topic", None)
    if settle is not None:  # ZooKeeper mode: each broker learns of the topic on its own
        settle(topic)
    driver = Driver(scenario, cluster, topic, tuple(cfg.replicas or cfg.brokers), client=client)
    if flushers:
        driver.notes.append(f"waited {flushers:.1f} s before the run for the brokers' first time-based flush "
                            f"(Kafka {cluster.version}: {FIXED_FLUSHER_DELAY[1]:.0f} s after a broker starts)")
    t0 = time.monotonic()
    try:
        with capture(client, cluster.version) as client_log:  # the clients' own log, closed clients included
            try:
                driver.run()
                if cfg.flush_interval_ms is not None:  # the model's log is created at the run's start
                    age = driver.history.started - created
                    driver.notes.append(f"the topic was created {age * 1000:.0f} ms before the run's start, the "
                                        "model's log at it: a log's first time-based flush comes flush.ms after "
                                        "its creation")
                # the end state, read before restore() restarts crashed brokers (which then catch up)
                final_disk, inspect = driver.view.disk(), _inspect(cluster, topic, driver.view.replicas)
            finally:
                driver.close()
    finally:
        # after Ctrl-C the cluster's own handler has stopped every node: nothing to bring back
        if not isinstance(sys.exc_info()[1], KeyboardInterrupt):
            restore(cluster)
    snap = driver.records[-1].snapshot
    assert snap is not None
    history = [{**op, "error": JAVA_ERROR_NAMES.get(op["error"], op["error"])} for op in driver.history.dicts()]
    facts = Facts(final=snap, after_step={i: r.snapshot for i, r in enumerate(driver.records[1:])},
                  history=history, observer=driver.observer, events=[])
    checks = []
    release = parse_release(cluster.version)
    for e in scenario.expectations:
        if not e.applies_to(generation, release):
            continue
        if e.kind in NOT_EVALUABLE:
            checks.append(Check(e.index, e.kind, e.describe(), "not evaluable", NOT_EVALUABLE[e.kind]))
        else:
            checks.append(evaluate(e, facts))
    checks += step_checks(driver.records, error_status="failed")
    return RealRun(scenario, topic, driver.records, driver.history, driver.observer, driver.timeline,
                   final_disk, checks, driver.notes, time.monotonic() - t0, inspect, client_log)


def _inspect(cluster: LocalCluster, topic: str, replicas: tuple[int, ...]) -> dict[int, dict[str, Any]]:
    """Each replica's partition directory as ``epochlab inspect --json`` shows it."""
    from epochlab.ondisk.reader import read_partition_dir
    from epochlab.ondisk.render import partition_json

    out: dict[int, dict[str, Any]] = {}
    for b in replicas:
        pdir = cluster.nodes[b].data_dir / f"{topic}-0"
        out[b] = partition_json(read_partition_dir(pdir)) if pdir.is_dir() else {"absent": str(pdir)}
    return out


def restore(cluster: LocalCluster, timeout_s: float = 60.0) -> None:
    """Bring every node back (resume paused, restart stopped ones) and wait until the Admin
    API lists every broker, so the next run starts from a whole cluster."""
    import signal

    for node_id, node in sorted(cluster.nodes.items()):
        if cluster.is_running(node_id):
            if node.paused:
                cluster.signal_nodes([node_id], signal.SIGCONT)
                node.paused = False
        else:
            cluster.restart_node(node_id)
    admin = KafkaAdmin(cluster.bootstrap_servers)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            # a ZooKeeper-mode cluster's metadata also lists its controller broker (node 100)
            if set(cluster.broker_ids) <= set(admin.broker_ids(timeout_s=2)):
                return
        except Exception:  # noqa: BLE001 - not answering yet
            pass
        if time.monotonic() >= deadline:
            raise ConfigError(f"cluster not whole {timeout_s:.0f} s after a run", where="restore",
                              field="brokers", expected=cluster.broker_ids, got=None)
        time.sleep(0.2)
