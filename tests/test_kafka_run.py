"""``epochlab kafka run``: two seed scenarios on one real three-broker cluster, compared with the
model, then teardown checked by pid (in the fixture: a JVM left running is a teardown error).

seed-002-acks1-acked-then-lost (cuts, a SIGKILL, an election: the acknowledged m11 is lost)
and seed-002-manual-commit-reprocessing (a consumer group, a commit, a consumer crash and
restart) map cleanly onto real operations; both run in a topic of their own on the same
cluster.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

pytest.importorskip("confluent_kafka", reason="needs confluent-kafka (pip install confluent-kafka)")

from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION, resolved  # noqa: E402

if not resolved(DEFAULT_KAFKA_VERSION):
    pytest.skip(f"Kafka {DEFAULT_KAFKA_VERSION}'s jars are not resolved (epochlab kafka jars)",
                allow_module_level=True)

from conftest import running_cluster, started_cluster  # noqa: E402
from epochlab.cli import main  # noqa: E402
from epochlab.kafka.live.cluster import LocalCluster  # noqa: E402
from epochlab.kafka.live.faults import firewall_available  # noqa: E402
from epochlab.kafka.runs.pipeline import execute  # noqa: E402
from epochlab.kafka.runs.scenario import broker_overrides, unmappable  # noqa: E402
from epochlab.scenarios import load_builtin  # noqa: E402

if firewall_available() is not None:
    pytest.skip(f"the seeds' link faults need it: {firewall_available()}", allow_module_level=True)

SCENARIOS = ("seed-002-acks1-acked-then-lost", "seed-002-manual-commit-reprocessing")
FETCH_FROM_FOLLOWER = "kip-392-fetch-from-follower"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    # the brokers also have the rack-aware replica selector (KIP-392): it acts only for
    # consumers with a client.rack, which the seed scenarios do not have
    overrides = broker_overrides(load_builtin(FETCH_FROM_FOLLOWER))
    assert all(broker_overrides(load_builtin(n)).items() <= overrides.items() for n in SCENARIOS)
    yield from started_cluster(tmp_path_factory.mktemp("kafka-run") / "cluster", overrides)


@pytest.mark.parametrize("name", SCENARIOS)
def test_seed_scenario_on_real_kafka_agrees_with_model(cluster: LocalCluster, tmp_path: Path, name: str) -> None:
    t0 = time.monotonic()
    code, payload = execute(load_builtin(name), cluster, compare=True, out=tmp_path / "run")
    print(f"\n{name}: {time.monotonic() - t0:.1f} s, exit {code}")
    assert set(payload) >= {"scenario", "real", "model", "agree", "differences"}
    assert payload["real"]["expectations_hold"], payload["real"]["checks"]
    assert payload["model"]["expectations_hold"]
    assert payload["agree"], [d["text"] for d in payload["differences"]]
    assert code == 0
    assert {c["status"] for c in payload["real"]["checks"]} == {"passed"}
    for f in ("steps.md", "history.jsonl", "real.json", "model.json", "compare.json", "inspect-broker-1.json",
              "client.log"):
        assert (tmp_path / "run" / f).is_file(), f
    json.loads((tmp_path / "run" / "compare.json").read_text())
    # librdkafka logs notices and above, so a run may log nothing; whatever it logged is its own
    lines = (tmp_path / "run" / "client.log").read_text().splitlines()
    assert all(re.match(r"^\d{13} [A-Z]+ \[librdkafka\] ", line) for line in lines), lines


def test_fetch_from_follower_on_real_kafka_agrees_with_model(cluster: LocalCluster, tmp_path: Path) -> None:
    """KIP-392 on live brokers: librdkafka (client.rack = 2) is sent by leader 1 to follower 2,
    reads there, goes back to the leader while broker 2 is down and reads everything once; the
    model's consumer does the same (``consumer_fetched_from``, judged on both runs)."""
    code, payload = execute(load_builtin(FETCH_FROM_FOLLOWER), cluster, compare=True, out=tmp_path / "run")
    statuses = {c["kind"]: c["status"] for c in payload["real"]["checks"]}
    assert statuses["consumer_fetched_from"] == "passed", payload["real"]["checks"]
    assert payload["real"]["expectations_hold"], payload["real"]["checks"]
    assert payload["model"]["expectations_hold"]
    assert payload["agree"], [d["text"] for d in payload["differences"]]
    assert code == 0


def test_unmappable_scenario_is_refused_with_its_reason(capsys: pytest.CaptureFixture[str]) -> None:
    unmapped = "kafka-6082-zombie-controller-write"  # a controller failover: not mapped live
    assert any("controller_failover" in w for w in unmappable(load_builtin(unmapped)))
    assert main(["kafka", "run", unmapped, "--compare", "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["runnable"] is False


def test_a_lossy_crash_is_refused_on_a_cluster_whose_disks_keep_everything(cluster: LocalCluster) -> None:
    """The shared cluster's log directories are plain directories: a power cut cannot be given."""
    why = unmappable(load_builtin("seed-002-rf1-power-loss"), cluster)
    assert any("not on a lossy filesystem" in w for w in why), why


def test_kafka_fuzz_runs_a_schedule_on_the_cluster_and_on_the_model(cluster: LocalCluster, tmp_path: Path) -> None:
    """``epochlab kafka fuzz``: one short fuzzer schedule of real-cluster faults, on the cluster
    and on the model; the run directory, its schedule (replayable on the model) and the summary."""
    from epochlab.fuzz.schedule import load_schedule
    from epochlab.kafka.runs.fuzz import REAL_FAULT_CLASSES, fuzz_cluster, schedule_scenario

    runs = fuzz_cluster(cluster, runs=1, seed=3, out=tmp_path / "kf", actions=6)
    assert len(runs) == 1 and runs[0].error is None, runs[0].to_dict()
    run = runs[0]
    schedule = load_schedule(run.directory / "schedule.json")
    assert {a.op for a in schedule.actions} <= {"produce", "consume", "commit", "crash", "restart", "partition",
                                                "heal", "isolate", "controlled_shutdown", "restart_producer",
                                                "crash_consumer", "restart_consumer"}
    assert not unmappable(schedule_scenario(schedule, "x"))
    assert all(REAL_FAULT_CLASSES[c] == 0 for c in ("lossy-crash", "broker-link", "controller-link", "slow"))
    for f in ("steps.md", "history.jsonl", "real.json", "model.json", "compare.json", "README.md"):
        assert (run.directory / f).is_file(), f
    summary = json.loads((tmp_path / "kf" / "summary.json").read_text())
    assert summary["runs"] == 1 and summary["per_run"][0]["seed"] == run.seed
    # acks=all, min.insync.replicas=2, clean elections, no lossy crash: nothing acknowledged is lost
    assert run.real_lost == [] and run.model_lost == [], run.to_dict()


def test_kafka_downtime_measures_a_leader_failure_on_the_cluster_and_the_model(cluster: LocalCluster) -> None:
    """``epochlab kafka downtime``: one SIGKILL of the leader under a producer and a consumer,
    its phases read from the brokers' own logs (log4j 2, ms timestamps) and the clients'
    history, and the same workload on the model with the cluster's settings."""
    from epochlab.kafka.runs.downtime import PHASES, measure_model, measure_real, parse_log, summarize, table_markdown
    from epochlab.kafka.runs.scenario import cluster_settings

    assert all(parse_log(cluster.nodes[i].server_log) for i in cluster.nodes)  # every node logs
    settings = cluster_settings(cluster)
    (row,) = measure_real(cluster, 1)
    session = settings["session_timeout_ms"]
    assert row["detection_ms"] is not None and 0 < row["detection_ms"] <= session + 1000, row
    assert row["election_ms"] == 0 and row["offline_ms"] == 0, row      # KRaft: in the fencing's records
    assert row["new_leader"] not in (None, row["leader"]) and row["propagation_ms"] is not None, row
    for key in ("producer_recovery_ms", "consumer_recovery_ms"):
        assert row[key] is not None and row[key] >= row["detection_ms"], row   # nothing before the failover
    assert row["leader"] in admin_isr(cluster, row["topic"])                    # restarted and back in the ISR
    model = measure_model(settings, 3)
    assert all(m["detection_ms"] is not None and m["consumer_recovery_ms"] is not None for m in model), model
    assert summarize(model)["detection_ms"]["n"] == 3
    table = table_markdown([row], model)
    assert all(name in table for name, _key in PHASES) and "not measured" not in table


def admin_isr(cluster: LocalCluster, topic: str) -> tuple[int, ...]:
    from epochlab.kafka.live.clients import KafkaAdmin

    return KafkaAdmin(cluster.bootstrap_servers).describe_partition(topic).isr


JAVA_CONSUMER_SCENARIOS = ("seed-002-manual-commit-reprocessing", "seed-002-read-committed-lso")


@pytest.mark.parametrize("name", JAVA_CONSUMER_SCENARIOS)
def test_seed_scenario_with_the_java_clients_agrees_with_model(cluster: LocalCluster, tmp_path: Path,
                                                                name: str) -> None:
    """``--client java``: Kafka's own producer and consumer of the cluster's release
    (JavaRecordingConsumer: assign, poll, commitSync from the committed offset after a
    consumer restart; read_committed against read_uncommitted), judged and compared as the
    librdkafka run is."""
    from epochlab.kafka.runs.driver import Driver

    assert broker_overrides(load_builtin(name)).items() <= broker_overrides(load_builtin(FETCH_FROM_FOLLOWER)).items()
    made: list[str] = []
    original = Driver.consumer

    def consumer(self: Driver, consumer_name: str):  # type: ignore[no-untyped-def]
        c = original(self, consumer_name)
        made.append(type(c).__name__)
        return c

    Driver.consumer = consumer  # type: ignore[method-assign]
    try:
        code, payload = execute(load_builtin(name), cluster, compare=True, out=tmp_path / "run", client="java")
    finally:
        Driver.consumer = original  # type: ignore[method-assign]
    assert set(made) == {"JavaRecordingConsumer"}
    assert payload["real"]["client"] == "java"
    assert payload["real"]["expectations_hold"], [c for c in payload["real"]["checks"] if c["status"] != "passed"]
    assert payload["model"]["expectations_hold"]
    assert payload["agree"], [d["text"] for d in payload["differences"]]
    assert code == 0
    polls = [json.loads(line) for line in (tmp_path / "run" / "history.jsonl").read_text().splitlines()]
    assert any(op["f"] == "poll" and op["type"] == "ok" and op["value"] for op in polls)
    # the Java clients' own log (client.log): this run's producer and consumers, from their
    # configuration to their close, and nothing logged before the run or after it
    text = (tmp_path / "run" / "client.log").read_text()
    producers = {op["process"] for op in polls if op["f"] in ("send", "txn_begin")}
    assert producers
    for producer in producers:
        assert f"client.id = {producer}\n" in text, producer
        assert re.search(rf"\[Producer clientId={producer}[],].* Closing the Kafka producer", text), producer
    assert "ConsumerConfig values" in text
    start_ms = payload["real"]["clock_epoch_ms"]
    stamps = [int(line.split(" ", 1)[0]) for line in text.splitlines() if re.match(r"^\d{13} ", line)]
    # (the driver makes its clients as the run starts: their first lines come up to a few seconds earlier)
    assert "Config values" in text.splitlines()[0] and start_ms - 10_000 <= min(stamps), (start_ms, min(stamps))
    assert max(stamps) <= start_ms + payload["real"]["seconds"] * 1000 + 1000, (start_ms, max(stamps))


def test_the_java_producer_waits_on_a_connection_to_a_cut_leader_as_the_model_does(cluster: LocalCluster,
                                                                                  tmp_path: Path) -> None:
    """``tests/fixtures/scenarios/java-connection-set-up-to-a-cut-leader.toml`` with Kafka's
    Java producer: after its request to the cut-off leader timed out, its new connection
    attempt waits for ``socket.connection.setup.timeout.ms`` (the client's log says so), and
    m2 expires meanwhile, as the model's producer with its connection set-up has it
    (``tests/test_producer_connections.py`` shows the model without the rule acknowledging m2)."""
    from epochlab.scenarios.loader import load_file

    scenario = load_file(Path(__file__).parent / "fixtures" / "scenarios" / "java-connection-set-up-to-a-cut-leader.toml")
    code, payload = execute(scenario, cluster, compare=True, out=tmp_path / "run", client="java")
    assert payload["real"]["expectations_hold"], [c for c in payload["real"]["checks"] if c["status"] != "passed"]
    assert payload["model"]["expectations_hold"]
    assert payload["agree"], [d["text"] for d in payload["differences"]]
    assert code == 0
    log = (tmp_path / "run" / "client.log").read_text()
    timeouts = re.findall(r"Disconnecting from node 1 due to socket connection setup timeout. The timeout value is (\d+) ms", log)
    assert timeouts and 8000 <= int(timeouts[0]) <= 12_000, timeouts
    # the isolation and the heal keep when each node's rules took effect (the model is given
    # them in that order: epochlab.kafka.runs.fuzz.at_real_times), each within the step
    steps = json.loads((tmp_path / "run" / "steps.json").read_text())
    changed = {s["action"]: s for s in steps if s.get("applied_ms")}
    assert set(changed) == {"isolate", "heal"}, [(s["action"], s.get("applied_ms")) for s in steps]
    for s in changed.values():
        times = {int(n): ms for n, ms in s["applied_ms"].items()}
        assert set(times) <= set(cluster.nodes) and 1 in times, times
        assert all(s["executed_at_ms"] <= ms <= s["executed_at_ms"] + 5000 for ms in times.values()), (s, times)


def _epochs_in_state_change_log(text: str) -> tuple[set[int], set[int]]:
    """The leader epochs the brokers' state-change log shows: ``(leaderless, led)``, a follower
    starting at an epoch whose current leader is -1, and a leader starting at an epoch."""
    leaderless = {int(m.group(1)) for m in re.finditer(
        r"Follower \S+ starts at leader epoch (\d+) .* Current leader is -1\.", text)}
    led = {int(m.group(1)) for m in re.finditer(r"Leader \S+ with topic id .* starts at leader epoch (\d+) ", text)}
    return leaderless, led


#: How many times the rebootstrap scenario is run for a real client that re-bootstraps before m2
REBOOTSTRAP_ATTEMPTS = 3


def test_the_java_producer_rebootstraps_with_every_broker_down_as_the_model_does(cluster: LocalCluster,
                                                                                 tmp_path: Path) -> None:
    """``tests/fixtures/scenarios/java-rebootstrap-with-every-broker-down.toml`` with Kafka's
    Java producer: with every broker killed, the client re-bootstraps (its log says so) before
    m2 is sent, so m2 waits for metadata and is acknowledged once the brokers are back, past
    its delivery timeout from the send, as the model of a 4.x Java run has it
    (``tests/test_producer_rebootstrap.py`` shows the model without the rule expiring m2).

    Whether the real client re-bootstraps within the outage is a draw: it still knows two
    brokers and re-bootstraps only when a metadata update finds both in their (jittered)
    reconnect backoff at once; one run here alternated its attempts between them for 33 s and
    never did. A run without a re-bootstrap before m2 must show the other branch of the rule
    (m2 queued at once and expired, not acknowledged), and the scenario is run again, up to
    :data:`REBOOTSTRAP_ATTEMPTS` times, for a run that re-bootstraps, which must then agree
    with the model."""
    from epochlab.scenarios.loader import load_file

    scenario = load_file(Path(__file__).parent / "fixtures" / "scenarios" / "java-rebootstrap-with-every-broker-down.toml")
    without = []
    for attempt in range(REBOOTSTRAP_ATTEMPTS):
        run_dir = tmp_path / f"run-{attempt}"
        _, payload = execute(scenario, cluster, compare=True, out=run_dir, client="java")
        log = (run_dir / "client.log").read_text()
        # when the client re-bootstrapped and when m2 was sent, on the run's clock: m2 is
        # acknowledged only if it was sent after the re-bootstrap (the scenario's description)
        epoch = payload["real"]["clock_epoch_ms"]
        rebootstraps = [int(t) - epoch for t in re.findall(r"^(\d+) .*Rebootstrapping with", log, re.MULTILINE)]
        steps = json.loads((run_dir / "steps.json").read_text())
        m2_sent = [s["executed_at_ms"] for s in steps if s["action"] == "produce"][-1]
        if rebootstraps and rebootstraps[0] < m2_sent:
            break
        # no re-bootstrap before m2: the client kept the topic, so m2 went to the accumulator
        # and expired after its delivery timeout, never written
        history = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
        m2 = [h for h in history if h["f"] == "send" and h["value"] == 2 and h["type"] != "invoke"]
        assert payload["real"]["not_acked"] == {"p1": [2]} and m2 and m2[0]["error"] == "DELIVERY_TIMEOUT", (
            payload["real"]["not_acked"], m2, rebootstraps, m2_sent)
        without.append((rebootstraps, m2_sent))
    else:
        raise AssertionError(f"the real client never re-bootstrapped before m2 in {REBOOTSTRAP_ATTEMPTS} runs: "
                             f"(re-bootstraps, m2 sent) {without}")
    assert payload["real"]["expectations_hold"], (
        [c for c in payload["real"]["checks"] if c["status"] != "passed"],
        {"not_acked": payload["real"]["not_acked"], "rebootstraps_ms": rebootstraps, "m2_sent_ms": m2_sent})
    assert payload["model"]["expectations_hold"]
    # every write, read and log agrees; the leaders may not: with every broker down the
    # harness has no broker to read the partition from, so the real run never sees the
    # leaderless epoch the model shows between the last shutdown and the restart
    outcome = [d for d in payload["differences"] if d["kind"] == "outcome" and d["what"] != "leaders"]
    # nor, on a loaded machine, the epoch numbers: brokers 2 and 3 start together right after
    # broker 1 is back, and broker 1 may miss its 3 s broker session meanwhile; the controller
    # fences it (a leaderless epoch) and elects it again. Such epochs are tolerated only when
    # the brokers' state-change log shows each of them, and the logs' offsets and values agree.
    leaderless, led = _epochs_in_state_change_log((run_dir / "state-change.log").read_text())
    model_epoch = payload["model"]["final"]["epoch"]
    extra = sorted(e for e in leaderless | led if e > model_epoch)
    explained = bool(extra) and all(e in leaderless or e - 1 in leaderless for e in extra)
    if explained:
        outcome = [d for d in outcome if d["what"] != "final" and not d["what"].endswith("final log record epochs")
                   and not d["what"].endswith("leader-epoch cache")]
    assert not outcome, ([d["text"] for d in outcome], {"leaderless_epochs": sorted(leaderless),
                                                        "led_epochs": sorted(led)})
    assert re.search(r"\[Producer clientId=p1\] Rebootstrapping with", log)


def test_java_consumer_reads_commits_and_resumes_as_recorded(cluster: LocalCluster) -> None:
    """JavaRecordingConsumer on its own: a committed and an aborted transaction of Kafka's Java
    producer; read_committed skips the aborted records and stops at the last stable offset,
    read_uncommitted reads them, ``fetch_max_records`` bounds a poll (the rest comes with the
    next one), a commit is what a new consumer of the group resumes from, and every call is in
    the history as the librdkafka consumer records it."""
    import uuid

    from epochlab.kafka.live.clients import History, KafkaAdmin
    from epochlab.kafka.live.java_clients import JavaRecordingConsumer, JavaRecordingProducer
    from epochlab.sim.config import ConsumerConfig, ProducerConfig

    topic = f"el-java-consumer-{uuid.uuid4().hex[:6]}"
    KafkaAdmin(cluster.bootstrap_servers).create_topic(topic)
    history = History()
    p = JavaRecordingProducer(cluster.bootstrap_servers, topic, history,
                              ProducerConfig(acks="all", transactional_id=f"tx-{topic}"), name="p",
                              version=cluster.version)
    try:
        for values, commit in (([1, 2], True), ([3], False), ([4], True)):
            p.begin_transaction()
            for v in values:
                p.send(v)
            assert p.flush(30) == 0  # written before the end: an abort then leaves its records and marker
            assert (p.commit_transaction() if commit else p.abort_transaction())
    finally:
        p.close()
    group = f"{topic}-g"

    def consumer(isolation: str, records: int = 500, group_id: str | None = group) -> JavaRecordingConsumer:
        return JavaRecordingConsumer(cluster.bootstrap_servers, topic, history,
                                     ConsumerConfig(auto_offset_reset="earliest", enable_auto_commit=False,
                                                    isolation_level=isolation, fetch_max_records=records),
                                     name=f"c-{isolation}-{records}", group_id=group_id, version=cluster.version)

    rc = consumer("read_committed")
    try:
        assert rc.committed(30) is None
        got = rc.read_to_end(30)
        # markers at 2 (commit), 4 (abort), 6 (commit): values 1, 2 at 0, 1; 3 aborted at 3; 4 at 5
        assert got == [(0, 1), (1, 2), (5, 4)]
        assert rc.list_offsets("latest") == 7 and rc.list_offsets("earliest") == 0
        assert rc.commit() and rc.committed(30) == 6
    finally:
        rc.close()
    again = consumer("read_committed")
    try:
        assert again.poll(3.0, quiet_s=0.5) == []  # resumes at the committed 6: nothing after it
    finally:
        again.close()
    ru = consumer("read_uncommitted", records=2, group_id=None)
    try:
        first = ru.poll(5.0, quiet_s=0.5)
        second = ru.poll(5.0, quiet_s=0.5)
        assert first == [(0, 1), (1, 2)] and second == [(3, 3), (5, 4)]
    finally:
        ru.close()
    ops = history.dicts()
    assert {"name": "rc", "ops": [(o["type"], o["f"], o["value"]) for o in ops if o["process"] == "c-read_committed-500"
                                  and o["f"] in ("commit", "list_offsets")]} == {
        "name": "rc", "ops": [("invoke", "list_offsets", "latest-committed"),
                              ("ok", "list_offsets", ["latest-committed", 7]),
                              ("invoke", "list_offsets", "earliest"), ("ok", "list_offsets", ["earliest", 0]),
                              ("invoke", "commit", 6), ("ok", "commit", 6)]}


def test_a_consumer_closes_within_its_wait_while_a_commit_hangs() -> None:
    """With no broker to answer, librdkafka's commit stays in flight and the consumer's
    ``close`` would wait for its answer (a ``kafka fuzz`` run once hung 14 min in a consumer
    restart): the close gives up after its wait and the run goes on."""
    from epochlab.kafka.live.clients import History, RecordingConsumer

    consumer = RecordingConsumer("127.0.0.1:9", "nowhere", History(), name="c1", group_id="g1")
    consumer.position = 3
    assert consumer.commit(wait_s=0.2) is False  # still trying: nothing answers on port 9
    assert consumer.close(timeout_s=1.0) is False  # returned, the close left to its thread


def test_commit_answers_go_to_the_oldest_commit_waiting() -> None:
    """Both clients answer one consumer's commits in the order they were made: an answer
    belongs to the oldest commit still waiting, and a step's commit counts as acknowledged
    only once nothing older waits and its own answer was an acknowledgement."""
    from epochlab.kafka.live.clients import CommitAnswers, History

    history = History()
    answers = CommitAnswers(history, "c")
    answers.made(3)
    answers.made(5)
    assert answers.waiting() and not answers.acknowledged()
    answers.answered("REQUEST_TIMED_OUT")  # the answer to 3
    assert answers.waiting() and not answers.acknowledged()
    answers.answered(None)  # the answer to 5
    assert not answers.waiting() and answers.acknowledged()
    answers.answered(None)  # an answer with no commit waiting: nothing to record
    answers.made(7)
    answers.answered("_WAIT_COORD")
    assert not answers.waiting() and not answers.acknowledged()
    assert [(o["type"], o["value"], o["error"]) for o in history.dicts() if o["f"] == "commit"] == [
        ("invoke", 3, None), ("invoke", 5, None), ("fail", 3, "REQUEST_TIMED_OUT"), ("ok", 5, None),
        ("invoke", 7, None), ("fail", 7, "_WAIT_COORD")]


@pytest.mark.parametrize("client", ["librdkafka", "java"])
def test_a_poll_goes_on_while_a_commit_waits_for_its_answer(tmp_path: Path, client: str) -> None:
    """A commit that gets no answer (its coordinator paused) must not hold the run. On a
    ``kafka fuzz`` run with every broker down, librdkafka's synchronous commit, run on a
    thread of its own, held the same consumer's next ``consume`` 45 s until its answer
    (``_WAIT_COORD``), and Kafka's ``commitSync`` would hold the step itself up to
    ``default.api.timeout.ms``. The asynchronous commits of both clients do not: the step
    waits its half second, the polls after it end, and the answer (a request timeout, 5 s
    for librdkafka's ``socket.timeout.ms`` here and 30 s for the Java consumer's
    ``request.timeout.ms``) enters the history when it comes."""
    import signal
    import uuid

    from epochlab.kafka.live.clients import History, KafkaAdmin, RecordingConsumer
    from epochlab.kafka.live.java_clients import JavaRecordingConsumer

    with running_cluster(tmp_path / "cluster", brokers=1, grace_s=5) as cluster:
        topic = f"el-commit-{uuid.uuid4().hex[:6]}"
        KafkaAdmin(cluster.bootstrap_servers).create_topic(topic, replication_factor=1, min_insync_replicas=1)
        history = History()
        c = RecordingConsumer(cluster.bootstrap_servers, topic, history, name="c", group_id=f"{topic}-g") \
            if client == "librdkafka" else \
            JavaRecordingConsumer(cluster.bootstrap_servers, topic, history, name="c", group_id=f"{topic}-g",
                                  version=cluster.version)
        try:
            # a healthy commit, answered in the step's wait: retried while the fresh cluster's
            # group coordinator loads (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS)
            c.position, deadline = 3, time.monotonic() + 60
            while not c.commit(wait_s=5.0) and time.monotonic() < deadline:
                time.sleep(0.5)
            assert c.committed(30) == 3, history.dicts()
            cluster.signal_nodes(cluster.broker_ids, signal.SIGSTOP)
            try:
                c.position = 2
                assert c.commit() is False, history.dicts()  # no answer within the step's wait
                assert c.poll(1.0) == [] and c.poll(1.0) == []
            finally:
                cluster.signal_nodes(cluster.broker_ids, signal.SIGCONT)
        finally:
            c.close(timeout_s=1.0)
        ops = [(o["type"], o["f"], o["value"]) for o in history.dicts() if o["process"] == "c"]
        after = ops[ops.index(("invoke", "commit", 2)) + 1:]
        assert after[:4] == [("invoke", "poll", None), ("ok", "poll", []), ("invoke", "poll", None), ("ok", "poll", [])], ops


def test_a_java_send_blocked_in_kafka_holds_only_the_producers_own_thread(tmp_path: Path) -> None:
    """``KafkaProducer.send`` blocks its caller up to ``max.block.ms`` when the producer's buffer
    is full (``BufferPool.allocate``) or the topic's metadata is missing (``waitOnMetadata``).
    With the one broker paused, 200 records fill a 200-record buffer (each in a batch of its
    own); the 201st send returns to the run at once, and its outcome (refused once
    ``max.block.ms`` passed: not written) comes later from the producer's sending thread."""
    import signal
    import uuid

    from epochlab.kafka.live.clients import History, KafkaAdmin
    from epochlab.kafka.live.java_clients import JavaRecordingProducer
    from epochlab.sim.config import ProducerConfig

    with running_cluster(tmp_path / "cluster", brokers=1, grace_s=5) as cluster:
        topic = f"el-java-block-{uuid.uuid4().hex[:6]}"
        KafkaAdmin(cluster.bootstrap_servers).create_topic(topic, replication_factor=1, min_insync_replicas=1)
        history = History()
        p = JavaRecordingProducer(cluster.bootstrap_servers, topic, history,
                                  ProducerConfig(acks="1", buffer_memory_records=200, max_block_ms=2000),
                                  name="p", version=cluster.version)
        try:
            cluster.signal_nodes(cluster.broker_ids, signal.SIGSTOP)
            for v in range(1, 202):
                p.send(v)
            outcomes = [o for o in history.dicts() if o["value"] == 201 and o["type"] != "invoke"]
            assert outcomes == []  # send() returned while the Java send still waits for buffer space
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not outcomes:
                time.sleep(0.1)
                outcomes = [o for o in history.dicts() if o["value"] == 201 and o["type"] != "invoke"]
            assert [(o["type"], o["error"]) for o in outcomes] == [("fail", "BUFFER_EXHAUSTED")], outcomes
            assert p.poll() >= 200  # the first 200 wait in the buffer for the paused broker
        finally:
            cluster.signal_nodes(cluster.broker_ids, signal.SIGCONT)
            p.close(timeout_s=5.0)
        assert not p._sender.is_alive()  # close stopped the sending thread
