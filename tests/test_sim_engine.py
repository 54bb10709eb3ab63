"""Engine tests: determinism and the seeds' core facts (seeds 000-003) through the Cluster API."""

from __future__ import annotations

import json

import pytest

from epochlab.errors import ConfigError, ScenarioError
from epochlab.sim import (
    Cluster,
    ClusterConfig,
    ConsumerConfig,
    Generation,
    ProducerConfig,
)

LATEST = Generation.STRICT_MIN_ISR

#: Restart at once: these tests are about a protocol rule around a restart, not the
#: broker's startup time (ClusterConfig.broker_startup_ms, on by default).
INSTANT = (0, 0)


def acked(cluster: Cluster) -> dict[int, int]:
    """value -> acknowledged offset of every ok send (acks 1/all)."""
    return {op.value: op.offset for op in cluster.history
            if op.f == "send" and op.type == "ok" and op.offset is not None}


def leader_values(cluster: Cluster) -> list[int]:
    state = cluster.state()
    assert state.leader is not None
    return state.replicas[state.leader].values()


def busy_run(seed: int) -> Cluster:
    c = Cluster(ClusterConfig(min_insync_replicas=2), LATEST, seed=seed)
    p = c.producer("p", ProducerConfig(acks="all", enable_idempotence=True))
    cons = c.consumer("c", ConsumerConfig(auto_offset_reset="earliest"))
    p.send_many(range(20))
    c.run_for(300)
    c.crash(1)
    p.send_many(range(20, 30))
    c.run_for(8000)
    cons.poll()
    c.restart(1)
    c.isolate(2)
    p.send_many(range(30, 40))
    c.run_for(4000)
    c.heal()
    p.flush(20000)
    c.run_for(2000)
    cons.poll()
    return c


def test_same_seed_is_byte_identical() -> None:
    a, b = busy_run(11), busy_run(11)
    assert a.history_jsonl() == b.history_jsonl()
    assert a.state().to_dict() == b.state().to_dict()
    assert [e.to_dict() for e in a.events] == [e.to_dict() for e in b.events]
    json.dumps(a.state().to_dict())
    for line in a.history_jsonl().splitlines():
        assert list(json.loads(line)) == sorted(json.loads(line))


def test_different_seeds_may_differ() -> None:
    runs = {busy_run(seed).history_jsonl() for seed in (1, 2, 3)}
    assert len(runs) > 1


def test_config_errors_are_typed() -> None:
    with pytest.raises(ConfigError) as info:
        ClusterConfig.from_dict({"min.insync.replica": 2}, "cluster.yaml")
    assert info.value.where == "cluster.yaml"
    with pytest.raises(ConfigError):
        ProducerConfig(acks="1", enable_idempotence=True)
    with pytest.raises(ConfigError):
        Generation.parse("kip-999")
    assert ProducerConfig.from_dict({"acks": "-1"}).acks == "all"
    c = Cluster(ClusterConfig(), 0)
    with pytest.raises(ScenarioError):
        c.crash(9)


# -- seeds 000 / 003: the old leader's unreplicated tail is truncated on its return -------------

@pytest.mark.parametrize("generation", list(Generation))
def test_old_leader_truncates_unreplicated_tail(generation: Generation) -> None:
    c = Cluster(ClusterConfig(broker_startup_ms=INSTANT), generation, seed=3)
    p = c.producer("p", ProducerConfig(acks="1"))
    p.send_many(range(10))
    assert p.flush(5000)
    c.run_for(1000)
    c.partition([[1, "p"], [2, 3, "controller"]])  # followers stop fetching from 1
    p.send_many(range(100, 105))                    # acks=1: acknowledged by 1 alone
    assert p.flush(1000)
    assert c.state().replicas[1].log_end_offset == 15
    c.crash(1)
    c.heal()
    c.run_for(8000)
    assert c.state().leader == 2
    q = c.producer("q", ProducerConfig(acks="all"))
    q.send_many([200, 201])
    assert q.flush(5000)
    c.restart(1)
    c.run_for(3000)
    state = c.state()
    logs = {b: r.values() for b, r in state.replicas.items()}
    assert logs[1] == logs[2] == logs[3]
    assert not set(range(100, 105)) & set(logs[1])  # the acks=1 tail is gone everywhere
    assert any("broker 1: truncated 15 -> " in e.message for e in c.events)
    assert state.replicas[1].role == "follower" and 1 in state.controller["isr"]


# -- seed 002 --------------------------------------------------------------------------------

def _crash_leader_with_slow_followers(acks: str, seed: int = 2) -> Cluster:
    c = Cluster(ClusterConfig(min_insync_replicas=2), LATEST, seed=seed)
    p = c.producer("p", ProducerConfig(acks=acks, request_timeout_ms=5000))
    p.send_many(range(10))
    assert p.flush(5000)
    c.run_for(1000)
    c.slow_follower(2, 20000)
    c.slow_follower(3, 20000)
    c.run_for(600)
    p.send_many(range(1000, 1005))
    c.run_for(50)
    c.crash(1)
    c.slow_follower(2, 0)
    c.slow_follower(3, 0)
    p.flush(60000)
    c.run_for(8000)
    assert c.state().leader in (2, 3)
    return c


def test_acks_1_write_lost_on_leader_crash() -> None:
    c = _crash_leader_with_slow_followers("1")
    ok = acked(c)
    assert set(range(1000, 1005)) <= set(ok)          # acknowledged by the old leader alone
    assert not set(range(1000, 1005)) & set(leader_values(c))  # ... and lost


def test_acks_all_min_isr_2_loses_no_acknowledged_write() -> None:
    c = _crash_leader_with_slow_followers("all")
    values = leader_values(c)
    for value, offset in acked(c).items():
        assert values[offset] == value


def test_rf1_partition_goes_offline_and_unavailability_is_recorded() -> None:
    c = Cluster(ClusterConfig(broker_startup_ms=INSTANT, replicas=(1,)), LATEST, seed=5)
    p = c.producer("p", ProducerConfig(acks="1", delivery_timeout_ms=20000, request_timeout_ms=5000))
    p.send(1)
    assert p.flush(5000)
    c.crash(1)
    c.run_for(10000)
    state = c.state()
    assert state.controller["offline"] and state.leader is None
    assert state.controller["unavailable_ms"] > 0
    p.send(2)
    p.flush(30000)
    assert [op.type for op in c.history if op.f == "send" and op.value == 2][-1] == "fail"
    c.restart(1)
    c.run_for(3000)
    assert c.state().leader == 1 and not c.state().controller["offline"]


def test_unclean_election_loses_the_suffix_and_reuses_offsets() -> None:
    config = ClusterConfig(min_insync_replicas=1, unclean_leader_election_enable=True,
                           replica_lag_time_max_ms=2000)
    c = Cluster(config, LATEST, seed=7)
    p = c.producer("p", ProducerConfig(acks="1"))
    p.send_many(range(20))
    assert p.flush(5000)
    c.run_for(1000)
    c.isolate(3)                    # 3 lags and leaves the ISR
    p.send_many(range(20, 40))
    p.flush(5000)
    c.run_for(3000)
    assert 3 not in c.state().controller["isr"]
    c.crash(1)
    c.crash(2)
    c.heal()
    c.run_for(8000)
    state = c.state()
    assert state.leader == 3 and state.controller["isr"] == [3]
    assert any("UNCLEAN" in e.message for e in c.events)
    q = c.producer("q", ProducerConfig(acks="1"))
    q.send(500)
    assert q.flush(5000)
    assert acked(c)[500] == 20      # offset 20 reused for a new record
    c.restart(1)
    c.restart(2)
    c.run_for(5000)
    logs = {b: r.values() for b, r in c.state().replicas.items()}
    assert logs[1] == logs[2] == logs[3] == list(range(20)) + [500]


def test_clean_election_keeps_partition_offline_instead() -> None:
    config = ClusterConfig(min_insync_replicas=1, replica_lag_time_max_ms=2000)
    c = Cluster(config, LATEST, seed=7)
    p = c.producer("p", ProducerConfig(acks="1"))
    p.send_many(range(5))
    p.flush(5000)
    c.isolate(3)
    c.run_for(4000)
    c.crash(1)
    c.crash(2)
    c.heal()
    c.run_for(8000)
    assert c.state().controller["offline"]


def test_not_enough_replicas_when_isr_below_min_isr() -> None:
    c = Cluster(ClusterConfig(min_insync_replicas=2), LATEST, seed=8)
    p = c.producer("p", ProducerConfig(acks="all", retries=0))
    p.send(1)
    assert p.flush(5000)
    c.crash(2)
    c.crash(3)
    c.run_for(8000)
    assert c.state().controller["isr"] == [1]
    p.send(2)
    p.flush(5000)
    outcome = [op for op in c.history if op.f == "send" and op.value == 2][-1]
    assert (outcome.type, outcome.error) == ("fail", "NOT_ENOUGH_REPLICAS")
    assert 2 not in leader_values(c)


def test_consumer_never_reads_beyond_high_watermark() -> None:
    c = Cluster(ClusterConfig(), LATEST, seed=9)
    p = c.producer("p", ProducerConfig(acks="1"))
    cons = c.consumer("c", ConsumerConfig(auto_offset_reset="earliest"))
    seen: list[tuple[int, int]] = []
    for round_ in range(6):
        if round_ == 2:
            c.slow_follower(2, 3000)
            c.slow_follower(3, 3000)
        p.send_many(range(round_ * 10, round_ * 10 + 10))
        c.run_for(400)
        leader = c.state().replicas[c.state().leader or 1]
        polled = cons.poll()
        assert all(offset < leader.high_watermark for offset, _ in polled)
        seen += polled
    assert c.state().replicas[1].log_end_offset > c.state().replicas[1].high_watermark
    offsets = [o for o, _ in seen]
    assert offsets == list(range(len(offsets)))


def test_auto_commit_reprocesses_after_consumer_crash() -> None:
    c = Cluster(ClusterConfig(), LATEST, seed=10)
    p = c.producer("p", ProducerConfig(acks="all"))
    cons = c.consumer("c", ConsumerConfig(auto_offset_reset="earliest", auto_commit_interval_ms=5000))
    p.send_many(range(10))
    p.flush(5000)
    c.run_for(6000 - c.now_ms)      # the auto-commit at 5000 commits nothing yet
    first = cons.poll()
    c.run_for(4500)                 # auto-commit at 10000 commits offset 10
    p.send_many(range(10, 15))
    p.flush(5000)
    c.run_for(500)
    second = cons.poll()
    cons.crash()                    # before the auto-commit at 15000
    cons.restart()
    c.run_for(1000)
    again = cons.poll()
    assert [v for _, v in first] == list(range(10))
    assert [v for _, v in second] == list(range(10, 15))
    assert again == second          # processed twice
    assert [op.f for op in c.history if op.process == "c" and op.type == "info"] == ["crash", "restart"]


# -- seed 001: idempotence across failover ---------------------------------------------------

def _retry_after_lost_response(idempotent: bool) -> Cluster:
    c = Cluster(ClusterConfig(min_insync_replicas=2), Generation.DIVERGING_EPOCH, seed=6)
    p = c.producer("p", ProducerConfig(acks="all", enable_idempotence=idempotent,
                                       request_timeout_ms=3000))
    p.send(1)
    assert p.flush(5000)
    p.send(7)
    assert c.run_until(lambda cl: all(b.replica.log.log_end_offset >= 2
                                      for b in cl.brokers.values()), 1000)
    c.set_link(1, "p", drop=1.0)    # the acknowledgement never arrives
    c.crash(1)                      # failover while the producer retries
    assert p.flush(60000)
    return c


def test_idempotent_retry_across_failover_is_deduplicated() -> None:
    c = _retry_after_lost_response(idempotent=True)
    assert c.state().leader != 1
    assert leader_values(c).count(7) == 1
    assert acked(c)[7] == 1          # the original offset


def test_retry_without_idempotence_duplicates() -> None:
    c = _retry_after_lost_response(idempotent=False)
    assert leader_values(c).count(7) == 2


def test_transactional_restart_fences_the_old_session() -> None:
    """A transactional producer restarted while a batch of its open transaction is on a slow
    link: the new session's InitProducerId bumps the epoch and aborts that transaction, so the
    old batch, arriving late with the old epoch, is refused (KIP-890's verification at the
    partition leader) and never written; the new session's transaction commits."""
    c = Cluster(ClusterConfig(), LATEST, seed=12)
    p = c.producer("p", ProducerConfig(acks="all", transactional_id="tx"))
    p.begin_transaction()
    p.send(1)
    p.commit_transaction()
    assert p.wait_for_transactions(5000)
    old_epoch = p.producer_epoch
    c.set_link("p", 1, delay_ms=(3000, 3000))   # the next produce request arrives late
    p.begin_transaction()
    p.send(2)
    c.run_for(300)                               # AddPartitionsToTxn done, the batch on the wire
    p.restart()
    c.set_link("p", 1, delay_ms=(1, 5))
    p.begin_transaction()
    p.send(3)
    p.commit_transaction()
    c.run_for(5000)
    assert old_epoch is not None and p.producer_epoch is not None and p.producer_epoch > old_epoch
    assert leader_values(c) == [1, 3]
    assert any("INVALID_PRODUCER_EPOCH" in e.message for e in c.events)
    assert [op.type for op in c.history if op.f == "send" and op.value == 2] == ["invoke", "info"]


def test_a_transactional_producer_sends_only_inside_a_transaction() -> None:
    """Kafka's clients refuse a transactional producer's send outside a transaction (the Java
    client throws, librdkafka answers ERR__STATE): the send fails at once with
    INVALID_TXN_STATE and nothing of it is written, before the first transaction, between two
    and after the last; the sends inside transactions are written."""
    c = Cluster(ClusterConfig(), LATEST, seed=3)
    p = c.producer("p", ProducerConfig(acks="all", transactional_id="tx"))
    p.send(10)
    p.begin_transaction()
    p.send(1)
    p.commit_transaction()
    p.send(11)
    assert p.wait_for_transactions(5000)
    p.send(12)
    p.begin_transaction()
    p.send(2)
    p.commit_transaction()
    assert p.wait_for_transactions(5000)
    c.run_for(500)
    assert leader_values(c) == [1, 2]
    refused = [(op.value, op.error) for op in c.history if op.f == "send" and op.type == "fail"]
    assert refused == [(10, "INVALID_TXN_STATE"), (11, "INVALID_TXN_STATE"), (12, "INVALID_TXN_STATE")]


def _session_expiries(seed: int) -> dict[int, int]:
    c = Cluster(ClusterConfig(), LATEST, seed=seed)
    c.run_for(10_000)
    for broker in (1, 2, 3):
        c.crash(broker)
    c.run_for(10_000)
    return {int(e.message.split()[2]): e.time_ms for e in c.events if "session expired" in e.message}


def test_heartbeats_run_at_a_phase_of_each_boot() -> None:
    """Brokers heartbeat every interval from a phase drawn per boot (Kafka's
    BrokerLifecycleManager counts from the broker's own registration): three brokers that
    crash together are fenced at different times, the same ones for a seed. With timers aligned
    to the common start they expired within the links' jitter of each other, so the order of
    two failures a second apart was decided by jitter (docs/kafka-run.md, model note 1)."""
    expiries = _session_expiries(1)
    assert sorted(expiries) == [1, 2, 3]
    assert max(expiries.values()) - min(expiries.values()) > 100
    assert _session_expiries(1) == expiries


def test_kip101_problem_1_goes_offline_like_kafka_4_3_1() -> None:
    """seed-004-kip101-problem-1 on Kafka 4.3.1 (6 of 6 runs, docs/kafka-run.md): A's old
    session, 1.1 s older, expires first, so when B fails the partition goes offline and B leads
    in epoch 2 when it returns. With aligned heartbeats the model elected A's dead incarnation
    in epoch 1 instead."""
    from epochlab.scenarios.loader import load_builtin
    from epochlab.scenarios.runner import run_scenario

    result = run_scenario(load_builtin("seed-004-kip101-problem-1"), "strict-min-isr", write=False)
    elections = [e for e in result.events if "controller: elect" in e]
    assert "leader None epoch 1" in elections[0], elections
    assert "leader 2 epoch 2" in elections[-1], elections


def test_a_restarted_broker_is_down_for_its_startup_time() -> None:
    """``broker_startup_ms``: a restart takes a process start and log loading before the broker
    registers (Kafka 4.3.1 here: restart -> ISR in 2.2-4.3 s, docs/kafka-run.md); a crash
    meanwhile cancels the start; ``(0, 0)`` restarts at once."""
    c = Cluster(ClusterConfig(broker_startup_ms=(2000, 2000)), LATEST, seed=1)
    c.run_for(1000)
    c.crash(3)
    c.run_for(10_000)
    c.restart(3)
    c.run_for(1990)
    assert not c.brokers[3].alive and c.brokers[3].starting
    c.run_for(20)
    assert c.brokers[3].alive
    c.run_for(2000)
    assert 3 in c.state().controller["isr"]

    c.crash(3)
    c.run_for(10_000)
    c.restart(3)
    c.run_for(500)
    c.crash(3)                       # killed while starting: it never comes up
    c.run_for(5000)
    assert not c.brokers[3].alive and not c.brokers[3].starting
    assert any("crashed while starting" in e.message for e in c.events)

    instant = Cluster(ClusterConfig(broker_startup_ms=(0, 0)), LATEST, seed=1)
    instant.run_for(1000)
    instant.crash(3)
    instant.restart(3)
    assert instant.brokers[3].alive


def test_restarts_take_kafkas_startup_time_by_default() -> None:
    c = Cluster(ClusterConfig(), LATEST, seed=2)
    c.run_for(1000)
    c.crash(3)
    c.run_for(10_000)
    start = c.now_ms
    c.restart(3)
    while 3 not in c.state().controller["isr"] and c.now_ms < start + 20_000:
        c.run_for(10)
    assert 2000 <= c.now_ms - start <= 4400


def test_a_connection_is_handled_one_request_at_a_time() -> None:
    """Kafka's broker reads a connection's next request only after answering the previous one
    (``SocketServer`` mutes the channel: ``KafkaChannel.ChannelMuteState``), and the Java client
    closes a connection whose request timed out (``NetworkClient.handleTimedOutRequests``).
    Three acks=all requests wait behind an ISR that cannot shrink for seconds: m1 times out and
    is written twice. The broker sees the close only through its writes: the first response
    written after it goes out, so the next request (m2) is still read, written and then
    retried by the client (twice); the second write fails and the broker drops the rest
    unread (m3 once). The client, without idempotence, sends them again newest first
    (``RecordAccumulator.reenqueue``: each at the head of the queue), so the log ends m3, m2, m1,
    as on Kafka 4.3.1 here (``epochlab kafka fuzz``, docs/kafka-run.md). Before the broker went on reading the closed connection only until the
    FIN arrived, m3 was sometimes written twice; before that all three sat in the purgatory
    together and all three were written twice."""
    for seed in (1, 2, 3, 4, 5, 6, 7, 8):
        c = Cluster(ClusterConfig(min_insync_replicas=2, broker_startup_ms=INSTANT), LATEST, seed=seed)
        p = c.producer("p", ProducerConfig(acks="all", request_timeout_ms=3000))
        c.run_for(1000)
        c.partition([[2]])          # the follower 2 is cut off: acks=all waits for the ISR shrink
        p.send_many([1, 2, 3])
        c.run_for(30_000)
        values = leader_values(c)
        assert values == [1, 2, 3, 2, 1], (seed, values)
        assert sorted(acked(c)) == [1, 2, 3]


@pytest.mark.parametrize("backend", ["rust", "reference"])
def test_a_restarted_producers_requests_come_on_new_connections(backend: str) -> None:
    """A producer restart closes the old process's connections (the Java client's
    ``close(0)``, librdkafka's destroy, or the process's exit) and the new session opens its
    own, whose requests the broker reads at once, not behind the old session's request held in
    the purgatory of its muted channel. m1 waits for an ISR that cannot shrink; after the
    restart m2 is written at once, then m1's old connection is read no further (its response
    is the first write after the close; nothing was queued behind it). Seen on Kafka 4.3.1
    here (``epochlab kafka fuzz`` campaign seed 13, Java run 3): each producer session's first
    record was written while the previous one's still waited."""
    for seed in (1, 2, 3, 4):
        c = Cluster(ClusterConfig(min_insync_replicas=2, broker_startup_ms=INSTANT), LATEST, seed=seed,
                    backend=backend)
        p = c.producer("p", ProducerConfig(acks="all", request_timeout_ms=3000))
        c.run_for(1000)
        c.partition([[2]])
        p.send(1)
        c.run_for(300)
        assert leader_values(c) == [1], seed
        p.restart()
        p.send(2)
        c.run_for(300)
        assert leader_values(c) == [1, 2], (seed, leader_values(c))
        assert not acked(c)


@pytest.mark.parametrize("backend", ["rust", "reference"])
def test_a_closed_idle_connection_makes_the_producer_ask_for_metadata(backend: str) -> None:
    """A leader that shuts down closes its connections; a producer with nothing in flight asks
    for metadata all the same (the Java client's ``handleServerDisconnect``, librdkafka's
    "broker down" refresh), so its next send goes to the new leader at once. Before, the model's
    producer kept the old leader and sent there first. Seen on Kafka 4.3.1 here (``epochlab
    kafka fuzz`` campaign seed 13, Java run 18): m5-m7, sent 2.4 s after leader 1's controlled
    shutdown, acknowledged by leader 2 within 42 ms."""
    for seed in (1, 2, 3, 4):
        c = Cluster(ClusterConfig(min_insync_replicas=2, broker_startup_ms=INSTANT), LATEST, seed=seed,
                    backend=backend)
        p = c.producer("p", ProducerConfig(acks="all"))
        c.run_for(1000)
        p.send(1)
        c.run_for(500)
        c.controlled_shutdown(1)
        assert c.run_until(lambda c: not c.brokers[1].alive, 10_000)
        c.run_for(1000)
        sent = c.now_ms
        p.send(2)
        c.run_for(100)
        done = [op for op in c.history if op.f == "send" and op.type == "ok" and op.value == 2]
        assert done and done[0].time_ms - sent < 60, (seed, done)


def test_a_wake_in_a_deadlines_millisecond_is_a_draw_the_polls_own_is_not() -> None:
    """The Java client gives a request up when more than ``request.timeout.ms`` whole
    milliseconds have passed since its send (``InFlightRequests.hasExpiredRequest``). m1 goes
    out to a leader that cannot answer (acks=all, a follower cut off) at about 1,000 ms (after
    the producer's metadata). When the poll's own sleep of the timeout ends at m1's deadline
    (its last turn was m1's send), m1 is given up there in every seed. When m2, 500 ms later,
    moved that sleep's end 500 ms past the deadline and m3's send wakes the client in the
    deadline's millisecond, whether m1 is past its timeout is a draw: some seeds give it up
    at once, the others at the poll's own wake 500 ms later."""
    def run(seed: int, wake_at_deadline: bool) -> tuple[bool, bool]:
        c = Cluster(ClusterConfig(min_insync_replicas=2, broker_startup_ms=INSTANT), LATEST, seed=seed)
        p = c.producer("p", ProducerConfig(acks="all", request_timeout_ms=3000))
        c.run_for(1000)
        c.partition([[2]])
        p.send(1)
        while not p._in_flight:
            c.run_for(1)
        first = min(p._in_flight)
        deadline = p._deadline[first]
        assert deadline == c.now_ms + 3000
        if wake_at_deadline:
            c.run_for(500)
            p.send(2)
            c.run_for(deadline - 1 - c.now_ms)
            assert first in p._in_flight
            c.run_for(1)
            p.send(3)
        else:
            c.run_for(deadline - c.now_ms)
        assert c.now_ms == deadline
        at_deadline = first in p._in_flight
        c.run_for(500)
        return at_deadline, first in p._in_flight

    assert {run(seed, False) for seed in range(1, 11)} == {(False, False)}
    drawn = [run(seed, True) for seed in range(1, 21)]
    assert set(drawn) == {(False, False), (True, False)}, drawn


def test_a_closed_connection_is_read_until_a_write_fails() -> None:
    """What the broker model assumes of a connection its client closed, on this machine's
    loopback with plain sockets: the requests sent before the close wait in the receive buffer,
    the first write after the close succeeds (the peer's kernel answers it with a reset), the
    request behind it can still be read, and the second write fails with a broken pipe."""
    import socket
    import time

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    client = socket.create_connection(srv.getsockname())
    server, _ = srv.accept()
    try:
        for m in (b"A", b"B", b"C"):
            client.sendall(m * 10)
        assert server.recv(10) == b"A" * 10
        client.close()
        time.sleep(0.05)
        assert server.send(b"answer A") == 8
        time.sleep(0.05)
        assert server.recv(10) == b"B" * 10
        with pytest.raises((BrokenPipeError, ConnectionResetError)):
            server.send(b"answer B")
            time.sleep(0.05)
            server.send(b"answer B")
    finally:
        server.close()
        srv.close()


def test_a_process_crash_resets_its_connections_a_machine_crash_does_not() -> None:
    """A broker process killed with its machine alive (``crash``): the kernel closes its
    sockets, so a consumer's fetch in flight to it fails at once and the consumer reads again
    right after the failover, as librdkafka did on Kafka 4.3.1 here (``epochlab kafka
    downtime``: consumer recovery 4-5 s after a SIGKILL with a 3 s session timeout). A lost
    machine (``lose_unflushed``: no kernel to send the FIN) leaves the fetch hanging until the
    consumer's 30 s request timeout. Before, both waited for the timeout."""
    from epochlab.campaigns.runs import execute_measured
    from epochlab.fuzz.schedule import Schedule
    from epochlab.kafka.runs.downtime import _recovery, model_schedule

    settings = {"session_timeout_ms": 3000, "heartbeat_interval_ms": 500}
    for seed in (1, 2, 3):
        for lossy in (False, True):
            schedule, index = model_schedule(settings, seed)
            raw = schedule.to_dict()
            raw["actions"][index]["lose_unflushed"] = lossy
            run, snapshot = execute_measured(Schedule.from_dict(raw, "test"), index)
            history = [op.to_dict() for op in run.cluster.history]
            producer_ms, consumer_ms = _recovery(history, snapshot["time_ms"])
            assert producer_ms is not None and producer_ms < 5000, (seed, lossy, producer_ms)
            if lossy:
                assert consumer_ms is None, (seed, consumer_ms)      # still waiting at 20 s
            else:
                assert consumer_ms is not None and consumer_ms < 4500, (seed, consumer_ms)


@pytest.mark.parametrize("generation", [Generation.KIP_320, LATEST])
def test_controlled_shutdown_exits_at_the_next_heartbeat_in_kraft(generation: Generation) -> None:
    """KRaft grants a controlled shutdown's exit in a heartbeat answer once leadership has
    moved (``BrokerHeartbeatManager``, ``BrokerLifecycleManager``): on Kafka 4.3.1 here the
    leader moved 40-80 ms after SIGTERM and the JVM exited 0.65-0.95 s after it (500 ms
    heartbeats). The ZooKeeper-era broker stops on the ControlledShutdown answer."""
    c = Cluster(ClusterConfig(heartbeat_interval_ms=500, session_timeout_ms=3000, broker_startup_ms=INSTANT),
                generation, seed=4)
    c.run_for(2000)
    leader = c.state().leader
    assert leader is not None
    c.controlled_shutdown(leader)
    c.run_for(40)
    assert c.state().leader not in (None, leader)
    assert c.brokers[leader].alive is (generation == LATEST)
    c.run_for(520)
    assert not c.brokers[leader].alive


def test_a_librdkafka_producer_times_requests_out_at_its_socket_timeout() -> None:
    """``socket_timeout_ms`` set: librdkafka's timing (``request.timeout.ms`` is the broker's
    acks wait only; the client gives up after the lesser of ``socket.timeout.ms`` and the
    remaining delivery timeout). Unset: the Java client, which gives up after
    ``request.timeout.ms`` and retries. A request held by a partition is still the first
    attempt at 3.5 s with librdkafka, a retry with the Java client; with a 4 s delivery
    timeout librdkafka ends it at 4 s with its own timeout."""
    seen = {}
    for sock in (None, 5000):
        c = Cluster(ClusterConfig(broker_startup_ms=INSTANT), LATEST, seed=1)
        p = c.producer("p", ProducerConfig(acks="1", request_timeout_ms=3000, delivery_timeout_ms=4000,
                                           socket_timeout_ms=sock))
        p.send(0)
        c.run_for(1000)
        c.partition([["p"]])
        p.send(1)
        c.run_for(10)
        first = set(p._in_flight)
        c.run_for(3500)
        seen[sock] = (set(p._in_flight) == first and bool(first),
                      [(op.time_ms, op.error) for op in c.history if op.f == "send" and op.value == 1 and op.type != "invoke"])
        c.run_for(10_000)
        seen[sock] += ([(op.time_ms, op.error) for op in c.history if op.f == "send" and op.value == 1
                        and op.type != "invoke"],)
    assert seen[None][0] is False and seen[5000][0] is True
    assert seen[5000][2] == [(5000, "REQUEST_TIMED_OUT")]
    assert seen[None][2] and seen[None][2][0][1] != "REQUEST_TIMED_OUT"
    with pytest.raises(ConfigError, match="socket_timeout_ms"):
        ProducerConfig(socket_timeout_ms=0)
