"""Real run against model run: the same outcome summary for both, and their differences.

:func:`model_run` runs the scenario on the simulator in the generation a current Kafka
implements, with the cluster's timeouts in place of the scenario's
(:func:`epochlab.kafka.runs.scenario.cluster_settings`: a cluster started for the scenario has the
scenario's own, :func:`~epochlab.kafka.runs.scenario.broker_overrides`; a cluster that serves many
scenarios has fixed ones). :func:`summarize_real` / :func:`summarize_model` reduce each run to the same
shape: records acknowledged, lost (acknowledged and absent from the final surviving log),
duplicated (twice in it) and read; the leaders and epochs it went through; each replica's
final log and leader-epoch cache; detection, election and recovery times. :func:`compare`
lists every difference in words; ``agree`` is true when the outcomes and the expectation
verdicts are equal (times are reported, and a large gap is listed, but do not count: the
model's network is 1-10 ms per message, the real one a few hundred µs, and the Admin API is
sampled every 250 ms).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, Sequence

from epochlab.generations import Generation
from epochlab.scenarios.model import Scenario
from epochlab.observe import Snapshot
from epochlab.sim.config import ClusterConfig

__all__ = ["compare", "java_rebootstraps", "model_run", "model_scenario", "summarize_model", "summarize_real"]

#: The Java client's ``socket.connection.setup.timeout.ms`` by default
#: (``CommonClientConfigs.DEFAULT_SOCKET_CONNECTION_SETUP_TIMEOUT_MS``), which the live Java
#: producer runs with and the model's producer is given when it stands for that client.
JAVA_CONNECTION_SETUP_TIMEOUT_MS = 10_000
#: librdkafka's ``socket.connection.setup.timeout.ms`` by default (``CONFIGURATION.md``).
LIBRDKAFKA_CONNECTION_SETUP_TIMEOUT_MS = 30_000

#: Times within this many ms, or within half of the larger, are not listed as differences.
TIME_SLACK_MS = 1000

_FAULTS = ("crash", "isolate", "controlled_shutdown")


def _setting(key: object) -> str:
    """A setting's field name: ``request.timeout.ms`` and ``request_timeout_ms`` alike."""
    return str(key).replace(".", "_").replace("-", "_")


def java_rebootstraps(release: str | None) -> bool:
    """Whether Kafka's Java client of ``release`` (``None``: the default release,
    :data:`~epochlab.kafka.jars.DEFAULT_KAFKA_VERSION`) re-bootstraps by default:
    ``metadata.recovery.strategy`` is ``rebootstrap`` by default from 4.0 (KIP-1102;
    ``CommonClientConfigs.DEFAULT_METADATA_RECOVERY_STRATEGY``), ``none`` in 3.8 and 3.9, where
    KIP-899 added it, and absent before."""
    from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION

    major = (release or DEFAULT_KAFKA_VERSION).split(".")[0]
    return major.isdigit() and int(major) >= 4


def model_scenario(scenario: Scenario, settings: dict[str, int], client: str = "librdkafka",
                   release: str | None = None) -> tuple[Scenario, dict[str, Any]]:
    """The scenario with the cluster's ``settings``, and producers that time requests out as
    the client that ran does: for librdkafka's (``client="librdkafka"``) ``socket.timeout.ms``
    = :data:`~epochlab.kafka.live.clients.SOCKET_TIMEOUT_MS` on the client and ``request.timeout.ms``
    only at the broker; for Kafka's Java producer (``"java"``) the model's own producer, which
    is that client (:class:`~epochlab.sim.config.ProducerConfig`), with its connection set-up
    (``socket.connection.setup.timeout.ms`` = :data:`JAVA_CONNECTION_SETUP_TIMEOUT_MS`, Kafka's
    default, where the scenario sets none; librdkafka's :data:`LIBRDKAFKA_CONNECTION_SETUP_TIMEOUT_MS`
    for a librdkafka run, whose model then has librdkafka's connection timing), re-bootstrapping as that release's client does where the scenario does
    not say (``metadata.recovery.strategy``, :func:`java_rebootstraps`; a librdkafka run's model
    goes without a scenario's value), and without a scenario's ``socket.timeout.ms``, which is
    librdkafka's;
    also what changed (name ->
    [scenario's value, the value used]). ``release``: the cluster's Kafka release, which the
    model then follows (``kafka.release``: the rules a generation's releases differ on, e.g.
    KAFKA-7414's halting follower in 2.0.0 but not 2.0.1) where the scenario names none. The
    model's network releases what a cut held at TCP's next retransmission
    (``tcp.retransmission.backoff``), as the harness's packet-dropping cuts do, unless the
    scenario says otherwise."""
    from epochlab.kafka.live.clients import SOCKET_TIMEOUT_MS
    from epochlab.sim.config import ClusterConfig

    cfg = ClusterConfig.from_dict(scenario.cluster, f"{scenario.where}: cluster")
    cluster = {k: v for k, v in scenario.cluster.items()
               if _setting(k) not in settings}
    replaced = {name: [getattr(cfg, name), value] for name, value in sorted(settings.items())
                if getattr(cfg, name) != value}
    cluster.update(settings)
    if release is not None and cfg.kafka_release is None:
        cluster["kafka.release"] = release
        replaced["kafka_release"] = [None, release]
    if not any(_setting(k) == "tcp_retransmission_backoff" for k in scenario.cluster):
        # the harness cuts links by dropping packets (nft), so what a cut held goes at TCP's
        # next retransmission after the heal, not at once (ClusterConfig.tcp_retransmission_backoff)
        cluster["tcp.retransmission.backoff"] = True
        replaced["tcp_retransmission_backoff"] = [False, True]
    producers: dict[str, dict[str, Any]] = {}
    for name, config in scenario.producers.items():
        own = {_setting(k): v for k, v in config.items()}
        producers[name] = dict(config)
        if client != "java" and "socket_timeout_ms" not in own:
            producers[name]["socket.timeout.ms"] = SOCKET_TIMEOUT_MS
            replaced[f"producer {name}: socket_timeout_ms"] = [None, SOCKET_TIMEOUT_MS]
        if client != "java":
            # librdkafka's connection set-up (its setting has the Java name; the live producer
            # takes a scenario's value, else its default): the model's librdkafka timing has
            # it too (epochlab.sim.producer); the maximum is a Java client setting
            for key in [k for k in producers[name] if _setting(k) == "socket_connection_setup_timeout_max_ms"]:
                replaced[f"producer {name}: socket_connection_setup_timeout_max_ms"] = [producers[name].pop(key), None]
            if "socket_connection_setup_timeout_ms" not in own:
                producers[name]["socket.connection.setup.timeout.ms"] = LIBRDKAFKA_CONNECTION_SETUP_TIMEOUT_MS
                replaced[f"producer {name}: socket_connection_setup_timeout_ms"] = [
                    None, LIBRDKAFKA_CONNECTION_SETUP_TIMEOUT_MS]
        if client == "java" and "socket_timeout_ms" in own:
            # librdkafka's own setting (a scenario sets it for librdkafka runs): Kafka's Java
            # client has none, so the model of a Java run goes without it (else it would time
            # requests out as librdkafka does)
            for key in [k for k in producers[name] if _setting(k) == "socket_timeout_ms"]:
                replaced[f"producer {name}: socket_timeout_ms"] = [producers[name].pop(key), None]
        if client == "java" and "socket_connection_setup_timeout_ms" not in own:
            producers[name]["socket.connection.setup.timeout.ms"] = JAVA_CONNECTION_SETUP_TIMEOUT_MS
            replaced[f"producer {name}: socket_connection_setup_timeout_ms"] = [None, JAVA_CONNECTION_SETUP_TIMEOUT_MS]
        if client != "java" and "metadata_recovery_strategy" in own:
            # a Java client setting the model's librdkafka timing does not have
            for key in [k for k in producers[name] if _setting(k) == "metadata_recovery_strategy"]:
                replaced[f"producer {name}: metadata_recovery_strategy"] = [producers[name].pop(key), None]
        if client == "java" and own.get("metadata_at_start") is not True:
            # the harness's Java producer looks the topic up as it is made, whatever the
            # scenario says (partitionsFor in epochlab.kafka.live.java_clients), so its first
            # send finds the leader known
            for key in [k for k in producers[name] if _setting(k) == "metadata_at_start"]:
                producers[name].pop(key)
            producers[name]["metadata_at_start"] = True
            replaced[f"producer {name}: metadata_at_start"] = [own.get("metadata_at_start", False), True]
        if client != "java" and "metadata_at_start" in own:
            # librdkafka's harness does not look the topic up first: its model asks at the send
            for key in [k for k in producers[name] if _setting(k) == "metadata_at_start"]:
                replaced[f"producer {name}: metadata_at_start"] = [producers[name].pop(key), False]
        if client == "java" and "metadata_recovery_strategy" not in own and java_rebootstraps(release):
            producers[name]["metadata.recovery.strategy"] = "rebootstrap"
            replaced[f"producer {name}: metadata_recovery_strategy"] = [None, "rebootstrap"]
    return dataclasses.replace(scenario, cluster=cluster, producers=producers), replaced


def model_run(scenario: Scenario, generation: str, settings: dict[str, int], client: str = "librdkafka",
              release: str | None = None) -> Any:
    from epochlab.scenarios.runner import run_scenario

    sc, _ = model_scenario(scenario, settings, client, release)
    return run_scenario(sc, generation, write=False)


def _surviving(snap: Snapshot) -> list[int]:
    r = snap.leader_replica()
    if r is not None:
        return r.values()
    return sorted({v for rep in snap.replicas for v in rep.values()})


def _summary(history: list[dict[str, Any]], final: Snapshot, epochs: dict[int, list[list[int]]],
             points: list[tuple[int, int | None, int | None, tuple[int, ...], bool]],
             steps: list[tuple[int, str, dict[str, Any]]], checks: Sequence[Any],
             unavailable: list[list[int]]) -> dict[str, Any]:
    acked: dict[str, dict[int, int | None]] = {}
    sent: dict[str, list[int]] = {}
    read: dict[str, list[list[int]]] = {}
    for op in history:
        if op.get("f") == "send" and op.get("type") == "invoke":
            sent.setdefault(op["process"], []).append(op["value"])
        elif op.get("f") == "send" and op.get("type") == "ok":
            acked.setdefault(op["process"], {})[op["value"]] = op.get("offset")
        elif op.get("f") == "poll" and op.get("type") == "ok":
            read.setdefault(op["process"], []).extend([list(pair) for pair in op.get("value") or ()])
    all_acked = {v for a in acked.values() for v in a}
    survivors = _surviving(final)
    counts = Counter(survivors)
    leaders = leader_runs(points)
    return {
        "acked": {p: {str(v): o for v, o in sorted(a.items())} for p, a in sorted(acked.items())},
        "not_acked": {p: [v for v in vs if v not in acked.get(p, {})] for p, vs in sorted(sent.items())},
        "lost": sorted(v for v in all_acked if v not in counts),
        "duplicated": sorted(v for v, n in counts.items() if n > 1),
        "read": read,
        "leaders": leaders,
        "final": {"leader": final.leader, "epoch": final.leader_epoch, "isr": sorted(final.isr),
                  "offline": final.offline},
        "logs": {str(r.broker): {"records": [[o, e, v] for o, e, v in r.records()],
                                 "epochs": epochs.get(r.broker, []), "log_end_offset": r.log_end_offset,
                                 "alive": r.alive} for r in final.replicas},
        "times": _times(points, steps, unavailable),
        "isr_returns": isr_returns(points, steps),
        "expectations": {str(c.index if c.index is not None else f"step:{c.description}"): c.status for c in checks},
    }


def leader_runs(points: list[tuple[int, int | None, int | None, tuple[int, ...], bool]]) -> list[list[Any]]:
    """The run's leaderships in order, ``[leader, epoch]`` (``[None, None]`` while offline),
    from its sampled ``points``. A sample can pair a broker's stale epoch with the new leader
    (a new leader that has not yet applied its election reports the epoch before it): an
    epoch below one already seen, or a new leader with its predecessor's epoch (each election
    bumps the epoch, so two leaders never share one), is left out; so is a leader whose epoch
    is unknown (dead)."""
    leaders: list[list[Any]] = []
    top = -1
    for _t, leader, epoch, _isr, _off in points:
        if epoch is None and leader is not None:
            continue  # a dead leader's epoch is unknown: not a new leadership
        if epoch is not None and epoch < top:
            continue  # the controller's epochs only grow: an older one is a stale answer
        if leaders and leader is not None and leaders[-1][0] not in (None, leader) and epoch == leaders[-1][1]:
            continue  # a new leader with its predecessor's epoch: not yet applied
        top = max(top, epoch if epoch is not None else -1)
        entry = [leader, epoch if leader is not None else None]  # no epoch shows while offline
        if not leaders or leaders[-1] != entry:
            leaders.append(entry)
    return leaders


def _times(points: list[tuple[int, int | None, int | None, tuple[int, ...], bool]],
           steps: list[tuple[int, str, dict[str, Any]]], unavailable: list[list[int]]) -> dict[str, int | None]:
    """ms from the first fault step to the controller noticing (ISR or leader changed), to a
    new leader, and from the first restart to the broker back in the ISR (after a heal: to
    the ISR as large as it ever was); the total time the partition had no leader (OFFLINE)."""
    out: dict[str, int | None] = {"detection_ms": None, "election_ms": None, "recovery_ms": None,
                                  "unavailable_ms": sum(b - a for a, b in unavailable)}

    def state_at(t: int) -> tuple[int, int | None, int | None, tuple[int, ...], bool] | None:
        before = [p for p in points if p[0] <= t]
        return before[-1] if before else None

    fault = next(((t, p) for t, a, p in steps if a in _FAULTS or a == "partition"), None)
    if fault is not None:
        t0, p = fault
        was = state_at(t0)
        broker = p.get("broker", was[1] if was else None)
        for t, leader, _e, isr, offline in points:
            if t <= t0 or was is None:
                continue
            if out["detection_ms"] is None and (isr != was[3] or leader != was[1] or offline != was[4]):
                out["detection_ms"] = t - t0
            if out["election_ms"] is None and broker == was[1] and leader not in (None, broker):
                out["election_ms"] = t - t0
    back = next(((t, p) for t, a, p in steps if a in ("restart", "heal")), None)
    if back is not None:
        t0, p = back
        broker = p.get("broker")
        full = max((len(isr) for _t, _l, _e, isr, _o in points), default=0)
        for t, _l, _e, isr, _o in points:
            if t > t0 and (broker in isr if broker is not None else len(isr) == full):
                out["recovery_ms"] = t - t0
                break
    return out


def isr_returns(points: list[tuple[int, int | None, int | None, tuple[int, ...], bool]],
                steps: list[tuple[int, str, dict[str, Any]]]) -> list[list[int | None]]:
    """For every restart step, ``[step time, broker, ms to the broker's return to the ISR]``.
    A broker still in the ISR when restarted returns once it has left it and come back (a
    KRaft broker that registers again is fenced first); one that never left has 0; the ms
    are ``None`` when it left and did not return before the next step that stopped it (a
    crash, an isolation or a controlled shutdown of the same broker) or the run's end.
    ``times`` has one return only (``recovery_ms``: of the run's first restart or heal,
    whichever comes first); a run's restarts are compared one by one with this."""
    out: list[list[int | None]] = []
    for i, (t0, action, params) in enumerate(steps):
        broker = params.get("broker")
        if action != "restart" or not isinstance(broker, int):
            continue
        end = next((t for t, a, p in steps[i + 1:] if a in _FAULTS and p.get("broker") == broker), None)
        before = [isr for t, _l, _e, isr, _o in points if t <= t0]
        left = not before or broker not in before[-1]
        back: int | None = None
        for t, _l, _e, isr, _o in points:
            if t <= t0 or (end is not None and t > end):
                continue
            if broker not in isr:
                left = True
            elif left:
                back = t - t0
                break
        out.append([t0, broker, back if left else 0])
    return out


def silences(steps: list[tuple[int, str, dict[str, Any]]], brokers: Iterable[int]) -> list[tuple[int, int, int | None]]:
    """``(step time, broker, time the silence ended or None)`` for each step that silenced a
    broker's session towards the controller. A crash (SIGKILL) of a running broker silences
    its incarnation for good: a restart registers a new one, which the controller refuses
    until the old session has expired and been fenced, so the silence ends only where the
    next crash of that broker begins another. An isolation, or a partition that puts a live
    broker on another side than the controller (nodes a partition does not list are on one
    side together), silences it until the heal or partition that joins it to the controller
    again, or until it crashes. A controlled shutdown leaves through the controller and is no
    silence."""
    brokers = tuple(brokers)         # read at every partition step: not a one-pass iterable
    down: set[int] = set()
    cut: set[int] = set()
    open_cut: dict[int, int] = {}    # broker -> index into out of its partition silence
    last_crash: dict[int, int] = {}  # broker -> index into out of its last crash silence
    out: list[list[Any]] = []

    def side(groups: list[list[Any]], node: Any) -> int:
        return next((i for i, g in enumerate(groups) if node in g), -1)

    for t, action, params in steps:
        if action in ("partition", "isolate", "heal"):
            if action == "partition":
                groups = params.get("groups") or []
                now = {b for b in brokers if side(groups, b) != side(groups, "controller")}
            elif action == "isolate":
                now = cut | {int(params["broker"])}
            else:
                now = set()
            was, cut = cut, now
            for b in sorted(now - was):
                if b not in down:
                    open_cut[b] = len(out)
                    out.append([t, b, None])
            for b in sorted(was - now):
                if b in open_cut:
                    out[open_cut.pop(b)][2] = t
        elif action in ("crash", "controlled_shutdown"):
            b = int(params["broker"])
            if b in down:
                continue
            down.add(b)
            if b in open_cut:
                out[open_cut.pop(b)][2] = t
            if action == "crash":
                if b in last_crash:
                    out[last_crash[b]][2] = t
                last_crash[b] = len(out)
                out.append([t, b, None])
        elif action == "restart":
            b = int(params["broker"])
            down.discard(b)
            if b in cut and b not in open_cut:
                open_cut[b] = len(out)
                out.append([t, b, None])
    return [(t, b, end) for t, b, end in out]


def silence_fences(steps: list[tuple[int, str, dict[str, Any]]], brokers: Iterable[int],
                   fences: list[tuple[int, int]], session_timeout_ms: int) -> list[list[int | None]]:
    """For each of the run's :func:`silences`, ``[step time, broker, ms to the controller
    fencing it]``, ``None`` when the silence ended (or the run did) first. ``fences``: the
    times (run clock) and brokers the controller fenced for a timed-out session: Kafka's
    "Fencing broker N ... because its session has timed out" lines (:func:`fence_lines`), the
    model's "broker N session expired" events. The silenced session's last heartbeat came
    before the step, so its fence comes within a session timeout and one check period
    (Kafka 4.0+: a session timeout / 8) of it; a later fence, with 1 s to spare, is another
    incarnation's (a restarted broker that crashed before it registered has no session to
    fence). With 2 s heartbeats and a 6 s session a controller that fences at the session's
    end gives 4-6 s, Kafka 4.0+ up to 6.75 s (``docs/core-semantics.md``, fencing a silent
    broker)."""
    within = session_timeout_ms + session_timeout_ms // 8 + 1000
    out: list[list[int | None]] = []
    for t0, broker, end in silences(steps, brokers):
        after = [t for t, b in fences
                 if b == broker and t0 <= t <= t0 + within and (end is None or t <= end)]
        out.append([t0, broker, min(after) - t0 if after else None])
    return out


_SESSION_EXPIRED = re.compile(r"^(\d+) ms: controller: broker (\d+) session expired")


def model_fences(events: list[str]) -> list[tuple[int, int]]:
    """``(time, broker)`` of each session expiry the model's controller acted on."""
    return [(int(m[1]), int(m[2])) for m in map(_SESSION_EXPIRED.match, events) if m]


def summarize_real(run: Any) -> dict[str, Any]:
    final = run.records[-1].snapshot
    epochs = {b: [list(e) for e in d.epochs] for b, d in run.final_disk.items()}
    steps = [(r.executed_at_ms, r.step.action, dict(r.step.params)) for r in run.records[1:]]
    offline, since = [], None
    for t, _l, _e, _i, off in run.timeline:
        if off and since is None:
            since = t
        elif not off and since is not None:
            offline.append([since, t])
            since = None
    if since is not None:
        offline.append([since, final.time_ms])
    return _summary(run.history.dicts(), final, epochs, run.timeline, steps, run.checks, offline)


_CONTROLLER = re.compile(r"^(\d+) ms: controller: .*leader (\d+|None) epoch (\d+) ISR \[([\d, ]*)\]")
_OFFLINE = re.compile(r"^(\d+) ms: partition OFFLINE")


def model_points(events: list[str]) -> list[tuple[int, int | None, int | None, tuple[int, ...], bool]]:
    """The controller's view over time, from the model's event texts."""
    points: list[tuple[int, int | None, int | None, tuple[int, ...], bool]] = []
    for text in events:
        m = _CONTROLLER.match(text)
        if m:
            isr = tuple(int(x) for x in m[4].split(",") if x.strip())
            leader = None if m[2] == "None" else int(m[2])
            points.append((int(m[1]), leader, int(m[3]), isr, leader is None))
            continue
        m = _OFFLINE.match(text)
        if m:
            last = points[-1] if points else (0, None, None, (), True)
            points.append((int(m[1]), None, last[2], last[3], True))
    return points


def summarize_model(result: Any, session_timeout_ms: int = ClusterConfig.session_timeout_ms) -> dict[str, Any]:
    epochs = {int(r["broker"]): [list(e) for e in r.get("epoch_entries") or []]
              for r in result.final_state["replicas"].values()}
    steps = [(r.executed_at_ms, r.step.action, dict(r.step.params)) for r in result.records[1:]]
    history = [json.loads(line) for line in result.history_lines]
    out = _summary(history, result.final, epochs, model_points(result.events), steps, result.checks, [])
    out["times"]["unavailable_ms"] = int(result.final_state["controller"].get("unavailable_ms") or 0)
    out["silence_fences"] = silence_fences(steps, [r.broker for r in result.final.replicas],
                                           model_fences(result.events), session_timeout_ms)
    return out


_OUTCOMES = ("acked", "not_acked", "lost", "duplicated", "read", "leaders", "final", "expectations")

#: ``Partition.makeLeader``'s state-change line (Kafka 3.x/4.x): broker, topic-partition, new
#: epoch, previous leader (``None`` or ``Some(id)``) and previous epoch.
_MAKE_LEADER = re.compile(r"\[Broker id=(\d+)\] Leader (\S+) with topic id .*? starts at leader epoch (\d+) "
                          r".*Previous leader (None|Some\((\d+)\)) and previous leader epoch was (-?\d+)")

def server_log_lines(cluster: Any, keep: Callable[[str], bool], nodes: list[int] | None = None) -> list[str]:
    """Every broker's (or ``nodes``') ``server.log`` lines that ``keep`` accepts, in time order,
    each as Kafka wrote it (its time in ms first)."""
    lines: list[str] = []
    for b in cluster.broker_ids if nodes is None else nodes:
        try:
            text = cluster.nodes[b].server_log.read_text(errors="replace")
        except OSError:
            continue
        lines += [ln for ln in text.splitlines() if keep(ln)]
    return sorted(lines, key=lambda ln: int(ln.split(" ", 1)[0]) if ln.split(" ", 1)[0].isdigit() else 0)


def state_change_lines(cluster: Any, topic: str) -> list[str]:
    """Every broker's ``state.change.logger`` lines naming ``topic``, in time order."""
    return server_log_lines(cluster, lambda ln: "[state.change.logger]" in ln and topic in ln)


#: ``BrokerLifecycleManager``'s line when the controller unfences a KRaft broker (Kafka
#: 3.x/4.x, ``BrokerLifecycleManager.HeartbeatResponseEvent``: "The broker has been unfenced.
#: Transitioning from RECOVERY to RUNNING."): its time and broker.
_UNFENCED = re.compile(r"^(\d+) .*\[BrokerLifecycleManager id=(\d+)\] The broker has been unfenced")


def unfenced_lines(cluster: Any) -> list[str]:
    """Every broker's unfencing lines (:data:`_UNFENCED`), in time order."""
    return server_log_lines(cluster, lambda ln: _UNFENCED.match(ln) is not None)


#: ``ReplicationControlManager.maybeFenceOneStaleBroker``'s line (Kafka 3.x/4.x) when the
#: controller fences a broker whose session timed out: its time and broker.
_FENCED = re.compile(r"^(\d+) .*Fencing broker (\d+) at epoch \d+ because its session has timed out")


def fence_lines(cluster: Any) -> list[str]:
    """The controller nodes' session-timeout fencing lines (:data:`_FENCED`), in time order."""
    return server_log_lines(cluster, lambda ln: _FENCED.match(ln) is not None,
                            list(getattr(cluster, "controller_ids", [])))


def real_fences(lines: list[str], clock_epoch_ms: float) -> list[tuple[int, int]]:
    """``(run-clock ms, broker)`` of each of :func:`fence_lines`."""
    return [(int(round(int(m[1]) - clock_epoch_ms)), int(m[2])) for m in map(_FENCED.match, lines) if m]


#: ``Partition.makeLeader`` / ``makeFollower``'s state-change line (KRaft: "[Broker id=N]
#: Leader <tp> with topic id ... starts at leader epoch E ...", "[Broker id=N] Follower <tp>
#: starts at leader epoch E ..."): a broker taking a role in the partition, its time and broker.
_ROLE = re.compile(r"^(\d+) .*\[Broker id=(\d+)\] (?:Leader|Follower) \S+ .*?starts at leader epoch")


def restarted(steps: list[dict[str, Any]]) -> list[tuple[int, int, int]]:
    """``(step index, run-clock ms it was executed at, broker)`` of each restart in ``steps``
    (a run's ``steps.json`` rows) that started a broker: executed, without error, and not of a
    broker already running."""
    return [(int(s["index"]), int(s["executed_at_ms"]), int(s["params"]["broker"])) for s in steps
            if s.get("action") == "restart" and s.get("index") is not None
            and s.get("executed_at_ms") is not None and not s.get("error")
            and not str(s.get("outcome") or "").startswith("already")]


def restart_roles(lines: list[str], restarts: list[tuple[int, int, int]],
                  clock_epoch_ms: float) -> dict[str, int]:
    """For each restart ``(step index, run-clock ms it was executed at, broker)``, the ms from
    it to the broker's first role in the partition after it (``lines``:
    :func:`state_change_lines`, the run clock starting at ``clock_epoch_ms``, wall-clock ms):
    how long the real broker took to start, load its logs and replay the metadata log up to
    leading or following, the model's ``startup_ms`` for that restart
    (``epochlab.kafka.runs.fuzz.at_real_times``). A restarted KRaft broker sends its
    registration as it starts (``BrokerServer.startup``: ``lifecycleManager.start`` before the
    metadata publishers are installed), loads its logs at the first metadata publish
    (``BrokerMetadataPublisher.initializeManagers``) and takes its role in the same publish
    (``ReplicaManager.applyDelta``), whether or not the controller has accepted the
    registration yet; its fetches begin there. The model's broker, up after ``startup_ms``,
    registers and follows then (refused while its old registration stands, it follows all the
    same: ``docs/core-semantics.md``, "Broker registration"). Measured on this machine
    (``docs/kafka-run.md``, 63 restarts): 1.35-9.26 s, median 2.04 s; the unfencing
    (:func:`restart_startups`) came within 0.3 s of it when the registration was accepted at
    once and up to 20 s later when it waited for the old session to end, which the model's
    controller decides itself. A restart with no such line after it (the broker never came
    back) is left out, and the model draws its time."""
    return _first_after([(int(m.group(1)), int(m.group(2))) for m in map(_ROLE.match, lines) if m],
                        restarts, clock_epoch_ms)


#: :data:`_ROLE` in leader epoch 0: a broker taking the partition as the topic was made.
_FIRST_ROLE = re.compile(r"^(\d+) .*\[Broker id=(\d+)\] (?:Leader|Follower) \S+ .*?starts at leader epoch 0 ")


def first_roles(lines: list[str], restarts: list[tuple[int, int, int]], clock_epoch_ms: float) -> dict[str, int]:
    """Broker id -> the run-clock ms (negative: before the clock began) of its first role in
    the partition as the topic was made (``lines``: :func:`state_change_lines`; ``restarts``:
    :func:`restarted`, whose roles are left out), the model's ``first_role_ms``: the harness
    makes the topic, then starts the clock, and each broker applies the topic's creation at its
    own pace (here the leader made itself leader 48 ms before to 112 ms after a follower took
    the partition, 40 runs). A follower whose fetcher thread's fetch reached the leader before
    that was refused and held the partition back ``replica.fetch.backoff.ms``
    (``epochlab.sim.broker.Broker._start_fetcher``)."""
    out: dict[str, int] = {}
    for m in map(_FIRST_ROLE.match, lines):
        if m is None or m.group(2) in out:
            continue
        at, broker = int(m.group(1)), int(m.group(2))
        if any(b == broker and at >= clock_epoch_ms + t for _, t, b in restarts):
            continue  # a restarted broker's role, not the topic's making
        out[m.group(2)] = int(round(at - clock_epoch_ms))
    return out


def restart_startups(lines: list[str], restarts: list[tuple[int, int, int]],
                     clock_epoch_ms: float) -> dict[str, int]:
    """For each restart ``(step index, run-clock ms it was executed at, broker)``, the ms from
    it to the broker's first unfencing after it (``lines``: :func:`unfenced_lines`; the run
    clock starts at ``clock_epoch_ms``, wall-clock ms): how long the real broker took to start,
    load its logs and be let back in, kept in ``real.json`` (``restart_startup_ms``) beside
    the first role (:func:`restart_roles`). The model's ``startup_ms`` is the first role, not
    this: the unfencing adds the wait for the old registration's session, which the model's
    controller decides itself. A restart with no unfencing after it (the broker never came
    back, or a ZooKeeper-mode cluster, which has no such line) is left out."""
    return _first_after([(int(m.group(1)), int(m.group(2))) for m in map(_UNFENCED.match, lines) if m],
                        restarts, clock_epoch_ms)


def _first_after(marks: list[tuple[int, int]], restarts: list[tuple[int, int, int]],
                 clock_epoch_ms: float) -> dict[str, int]:
    """For each restart, the ms to the first of ``marks`` (wall-clock ms, broker) of its broker
    at or after it, by step index; a restart without one is left out."""
    out: dict[str, int] = {}
    for index, at_ms, broker in restarts:
        start = clock_epoch_ms + at_ms
        after = [t for t, b in marks if b == broker and t >= start]
        if after:
            out[str(index)] = int(round(min(after) - start))
    return out


def real_epoch_skips(lines: list[str]) -> list[list[int]]:
    """``[broker, previous epoch, new epoch]`` for each broker that went from leader straight to
    leader across at least one epoch it never saw, read from ``Partition.makeLeader``'s lines."""
    out = []
    for ln in lines:
        m = _MAKE_LEADER.search(ln)
        if m and m.group(5) is not None and int(m.group(5)) == int(m.group(1)) \
                and int(m.group(3)) > int(m.group(6)) + 1:
            out.append([int(m.group(1)), int(m.group(6)), int(m.group(3))])
    return out


def model_epoch_skips(events: list[Any]) -> list[list[int]]:
    """:func:`real_epoch_skips` for a model run's engine events
    (:func:`epochlab.checks.catalogue.leader_epoch_skips`, the catalogue's witness)."""
    from epochlab.checks.catalogue import leader_epoch_skips

    return leader_epoch_skips(events)


def compare(real: dict[str, Any], model: dict[str, Any]) -> tuple[bool, list[dict[str, Any]]]:
    """``(agree, differences)``: each difference ``{"what", "real", "model", "kind", "text"}``,
    kind ``outcome`` (counts against ``agree``), ``timing`` or ``not comparable`` (an
    expectation one side cannot judge)."""
    diffs: list[dict[str, Any]] = []

    def add(what: str, r: Any, m: Any, kind: str = "outcome") -> None:
        diffs.append({"what": what, "real": r, "model": m, "kind": kind,
                      "text": f"{what}: real {_short(r)}, model {_short(m)}"})

    for key in _OUTCOMES:
        if key in ("read", "acked", "expectations"):
            for name in sorted(set(real[key]) | set(model[key])):
                r, m = real[key].get(name), model[key].get(name)
                if r != m:
                    # an expectation one run cannot judge (event_seen on real Kafka) is no
                    # evidence either way: listed, not counted against ``agree``
                    unjudged = key == "expectations" and "not evaluable" in (r, m)
                    add(f"{key} {name}", r, m, "not comparable" if unjudged else "outcome")
        elif real[key] != model[key]:
            add(key, real[key], model[key])
    skips_r, skips_m = real.get("epoch_skips"), model.get("epoch_skips")
    if skips_r != skips_m:
        # without the brokers' logs (releases before 4.0 here) the real run cannot tell
        add("leaders re-elected across a skipped epoch", skips_r, skips_m,
            "not comparable" if skips_r is None else "outcome")
    # before KIP-101 (0.11) Kafka writes no leader epoch into a batch (message format v1) and
    # keeps no leader-epoch-checkpoint: the model's epochs of that generation are its own
    # bookkeeping, with nothing on disk to compare them with
    generation = model.get("generation")
    epochs_kind = "not comparable" if generation and Generation.parse(generation) < Generation.KIP_101 \
        else "outcome"
    for b in sorted(set(real["logs"]) | set(model["logs"])):
        r, m = real["logs"].get(b, {}), model["logs"].get(b, {})
        rv = [(o, v) for o, _e, v in r.get("records", [])]
        mv = [(o, v) for o, _e, v in m.get("records", [])]
        if rv != mv:
            add(f"broker {b} final log (offset, value)", rv, mv)
        elif r.get("records") != m.get("records"):
            add(f"broker {b} final log record epochs", r.get("records"), m.get("records"), epochs_kind)
        if r.get("epochs") != m.get("epochs"):
            add(f"broker {b} leader-epoch cache", r.get("epochs"), m.get("epochs"), epochs_kind)
    real_returns, model_returns = real.get("isr_returns"), model.get("isr_returns")
    if real_returns is not None and model_returns is not None:
        for (t, b, r), (_t, _b, m) in zip(real_returns, model_returns):
            if _times_differ(r, m):
                add(f"restart of broker {b} at {t} ms: return to the ISR (ms)", r, m, "timing")
    fences_r, fences_m = real.get("silence_fences"), model.get("silence_fences")
    if fences_r is not None and fences_m is not None:
        for (t, b, r), (_t, _b, m) in zip(fences_r, fences_m):
            if _times_differ(r, m):
                add(f"silence of broker {b} at {t} ms: to its fence (ms)", r, m, "timing")
    for key in sorted(real["times"]):
        r, m = real["times"][key], model["times"][key]
        if _times_differ(r, m):
            add(key, r, m, "timing")
    return not any(d["kind"] == "outcome" for d in diffs), diffs


def _times_differ(r: int | None, m: int | None) -> bool:
    """A duration measured on one side only, or on both more than ``TIME_SLACK_MS`` and more
    than half the larger apart."""
    if r is None or m is None:
        return (r is None) != (m is None)
    return abs(r - m) > max(TIME_SLACK_MS, max(r, m) / 2)


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 160 else text[:157] + "..."
