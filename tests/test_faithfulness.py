"""The six places where the model once did what no Kafka release does, each run in
every generation where the rule applies and asserting what Kafka's code does (cited in
``docs/core-semantics.md``, "Faithfulness to Kafka's code"). Every test here failed on the
model before the fix (commit f71d793)."""

from __future__ import annotations

import pytest

from epochlab.sim import Cluster, ClusterConfig, ConsumerConfig, Generation, ProducerConfig

ALL = list(Generation)
BACKENDS = ("rust", "reference")

#: Restart at once: these tests are about a protocol rule around a restart, not the
#: broker's startup time (ClusterConfig.broker_startup_ms, on by default).
INSTANT = (0, 0)


def sends(c: Cluster, process: str = "p") -> dict[int, list]:
    """value -> the completed send ops of ``process`` for it."""
    out: dict[int, list] = {}
    for op in c.history:
        if op.process == process and op.f == "send" and op.type != "invoke":
            out.setdefault(op.value, []).append(op)
    return out


def invoked_at(c: Cluster, value: int) -> int:
    return next(op.time_ms for op in c.history if op.f == "send" and op.type == "invoke"
                and op.value == value)


def leader_values(c: Cluster) -> list[int]:
    state = c.state()
    assert state.leader is not None
    return state.replicas[state.leader].values()


# 1. A dead follower outside the ISR must not hold the leader's HW back.
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("generation", ALL)
def test_a_dead_follower_out_of_the_isr_does_not_hold_the_high_watermark(generation, backend):
    # Kafka resets a non-ISR follower's lastCaughtUpTimeMs to 0 (decades ago on its clock) on
    # every leadership change (Replica.resetReplicaState), and from 3.6 counts a caught-up
    # non-ISR follower only if it is ISR-eligible, i.e. not fenced (Partition.maybeIncrementLeaderHW,
    # isReplicaIsrEligible). So once broker 3 is out of the ISR, acks=all sends complete at once.
    c = Cluster(ClusterConfig(min_insync_replicas=2), generation, seed=3, backend=backend)
    p = c.producer("p", ProducerConfig(acks="all"))
    p.send(1)
    p.flush(5000)
    c.crash(3)
    assert c.run_until(lambda c: c.controller.isr == (1, 2), 20000)
    c.run_for(2500)  # the leader applies the smaller ISR
    p.send(2)
    assert p.flush(10000)
    done = sends(c)[2]
    assert [op.type for op in done] == ["ok"]
    assert done[0].time_ms - invoked_at(c, 2) < 1000, "the HW was held by the dead follower"
    assert leader_values(c).count(2) == 1


# 2. KIP-903: a fetch from a previous incarnation of a broker is ignored (G5).
@pytest.mark.parametrize("backend", BACKENDS)
def test_kip903_a_stale_fetch_does_not_put_an_empty_restarted_broker_back_in_the_isr(backend):
    c = Cluster(ClusterConfig(broker_startup_ms=INSTANT, min_insync_replicas=2), Generation.STRICT_MIN_ISR, seed=5, backend=backend)
    p = c.producer("p", ProducerConfig(acks="all"))
    p.send_many(range(10))
    assert p.flush(10000)
    c.run_for(1000)
    # broker 3's fetches reach the leader 9 s late: longer than the session timeout (6 s) after
    # which the controller registers the restarted incarnation (DuplicateBrokerRegistration
    # until then)
    c.slow_follower(3, 9000)
    c.run_for(1000)                             # a fetch of incarnation 1 (offset 10) is on the wire
    c.crash(3, lose_unflushed=True)             # nothing was flushed: the log is gone
    c.restart(3)
    assert c.state().replicas[3].log_end_offset == 0
    for _ in range(120):                        # the stale fetch arrives meanwhile
        c.run_for(100)
        # an ISR entry for broker 3 names the incarnation whose fetches put it there: the
        # restarted, empty one is never in it before it has caught up
        new_incarnation = c.controller.incarnation.get(3) == c.brokers[3].incarnation
        assert 3 not in c.controller.isr or not new_incarnation \
            or c.state().replicas[3].log_end_offset >= 10
    assert any("registration waits for the old session" in e.message for e in c.events)
    assert any("ignored fetch from broker 3: stale broker epoch 1" in e.message for e in c.events)
    c.slow_follower(3, 0)
    c.run_for(20000)
    c.crash(1)
    c.crash(2)
    c.run_for(20000)
    state = c.state()
    if state.leader is not None:                # only a replica holding every acked record leads
        assert set(range(10)) <= set(state.replicas[state.leader].values())


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_restarted_kraft_broker_follows_before_the_controller_registers_it(backend, seed):
    """A KRaft broker restarted while its old registration's session lives cannot register
    (DuplicateBrokerRegistration) but reads the metadata log and follows the leader named
    there (``BrokerServer.startup`` installs the metadata publishers before it waits for the
    controller; ``ReplicaManager.applyDelta``): its fetches, accepted by the leader, move the HW
    while its old incarnation is in the ISR, so acks=all writes are acknowledged before it
    registers. Kafka 4.3.1 here (``epochlab kafka fuzz`` campaign seed 3, run 16): broker 2,
    killed at 0.02 s and restarted at 0.7 s, started following at 2.7 s, m1-m3 sent at 0.8 s
    were acknowledged at 2.6 s, and the controller registered it only at 6.1 s. Before, the
    model's restarted broker followed nothing until registered, and the writes waited for
    the old session to expire."""
    c = Cluster(ClusterConfig(broker_startup_ms=(2000, 2000), min_insync_replicas=2, session_timeout_ms=9000),
                Generation.STRICT_MIN_ISR, seed=seed, backend=backend)
    c.run_for(1000)
    leader = c.state().leader
    follower = next(b for b in (1, 2, 3) if b != leader)
    c.crash(follower)
    c.run_for(700)
    c.restart(follower)
    c.run_for(100)
    assert follower in c.state().controller["isr"]   # the old incarnation: its session lives
    p = c.producer("p", ProducerConfig(acks="all"))
    p.send_many(range(3))
    assert p.flush(5000)
    acked_ms = c.now_ms
    c.run_for(15_000)
    registered = [e.time_ms for e in c.events if e.kind == "controller"
                  and e.message.startswith(f"controller: broker {follower} registered")]
    assert registered and registered[-1] > acked_ms, (registered, acked_ms)
    assert any("registration waits for the old session to expire" in e.message for e in c.events)
    assert c.state().replicas[follower].values() == [0, 1, 2]


def _restart_after_session(backend: str, seed: int, **config: object) -> tuple[Cluster, int, int]:
    """A KRaft cluster whose follower was killed and its session fenced, restarted now:
    (cluster, the follower, the restart's time)."""
    c = Cluster(ClusterConfig(broker_startup_ms=(2000, 2000), min_insync_replicas=2, **config),
                Generation.STRICT_MIN_ISR, seed=seed, backend=backend)
    c.run_for(1000)
    follower = next(b for b in (1, 2, 3) if b != c.state().leader)
    c.crash(follower)
    c.run_for(10_000)
    assert follower not in c.state().controller["isr"]
    c.restart(follower)
    return c, follower, c.now_ms


def _event_ms(c: Cluster, message: str) -> list[int]:
    return [e.time_ms for e in c.events if e.message == message]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_restarted_kraft_broker_stays_fenced_until_its_startup_is_over(backend, seed):
    """The controller registers a restarted KRaft broker fenced (its heartbeats ask
    ``wantFence`` until ``BrokerServer.startup`` calls ``lifecycleManager.setReadyToUnfence``,
    after the first metadata publish) and unfences it at its first heartbeat that no longer
    asks. The broker follows meanwhile, but the leader does not take it into the ISR
    (``Partition.isBrokerEpochIsrEligible``: a fenced broker is not eligible) until it is
    unfenced. Kafka 4.3.1 here (``epochlab kafka fuzz`` seed 12, librdkafka run 1): broker 2
    took its role 2,784 ms after its restart and was unfenced 172 ms later; its fetch parked at
    the leader before the unfencing had not come back when the leader shut down, so no leader
    was elected. The model unfenced the broker at its registration and elected it."""
    c, follower, restarted = _restart_after_session(backend, seed, broker_unfence_ms=(400, 400))
    joined = None
    while c.now_ms < restarted + 6000:
        c.run_for(10)
        if joined is None and follower in c.state().controller["isr"]:
            joined = c.now_ms
    [registered] = _event_ms(c, f"controller: broker {follower} registered, fenced until it is ready")
    [ready] = _event_ms(c, f"broker {follower}: started; asks to be unfenced")
    [unfenced] = _event_ms(c, f"controller: broker {follower} unfenced")
    roles = [e.time_ms for e in c.events if e.kind == "role" and e.time_ms > restarted
             and e.message.startswith(f"broker {follower} is follower")]
    assert restarted + 2000 <= registered < roles[0] < ready < unfenced
    assert ready >= registered + 400
    assert joined is not None and joined > unfenced, (joined, unfenced)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_broker_killed_while_fenced_holds_its_session(backend):
    """A fenced registration's session is valid while its broker heartbeats
    (``ClusterControlManager.trackBrokerHeartbeat`` times every heartbeat, fenced or not), so a
    broker killed before it was unfenced and restarted at once waits for that session to expire
    (DuplicateBrokerRegistration) like one killed while unfenced; it was never unfenced."""
    c, follower, restarted = _restart_after_session(backend, 4, broker_unfence_ms=(3000, 3000))
    c.run_for(2500)
    assert _event_ms(c, f"controller: broker {follower} registered, fenced until it is ready")
    c.crash(follower)
    c.restart(follower, startup_ms=0)
    c.run_for(200)
    assert any(e.message == f"controller: broker {follower} restarted; its registration waits for "
               "the old session to expire (DuplicateBrokerRegistration)" for e in c.events)
    c.run_for(15_000)
    assert len(_event_ms(c, f"controller: broker {follower} registered, fenced until it is ready")) == 2
    assert len(_event_ms(c, f"controller: broker {follower} unfenced")) == 1
    assert follower in c.state().controller["isr"]


@pytest.mark.parametrize("generation", [g for g in Generation if not g.kraft])
def test_zookeeper_brokers_register_unfenced(generation):
    """Only KRaft has a fenced registration: a ZooKeeper-era broker is live once registered."""
    c = Cluster(ClusterConfig(broker_startup_ms=(0, 0)), generation, seed=2)
    c.run_for(1000)
    follower = next(b for b in (1, 2, 3) if b != c.state().leader)
    c.crash(follower)
    c.run_for(12_000)
    c.restart(follower)
    c.run_for(5000)
    assert _event_ms(c, f"controller: broker {follower} registered")
    assert not any("fenced until" in e.message or "asks to be unfenced" in e.message for e in c.events)


def test_the_controller_channel_is_ordered_and_reliable():
    # AlterPartition travels on one ordered connection (NodeToControllerChannelManager), one
    # request at a time (AlterPartitionManager): duplication and reordering cannot happen there.
    c = Cluster(ClusterConfig(), Generation.STRICT_MIN_ISR, seed=1)
    c.set_link("controller", 1, delay_ms=(1, 500), duplicate=1.0, reorder=True)
    assert any("duplicate/reorder not applied" in e.message for e in c.events)
    c.set_link(2, 1, delay_ms=(1, 500), duplicate=1.0, reorder=True)  # broker links: allowed
    assert sum("not applied" in e.message for e in c.events) == 1


# 3. KIP-320 position validation answers the leader's LEO for the epoch, not capped at the HW.
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("generation", [g for g in ALL if g.fences_current_epoch])
def test_position_validation_is_not_capped_at_a_stale_high_watermark(generation, backend):
    c = Cluster(ClusterConfig(min_insync_replicas=1), generation, seed=2, backend=backend)
    p = c.producer("p", ProducerConfig(acks="all"))
    cons = c.consumer("c", ConsumerConfig(auto_offset_reset="earliest", enable_auto_commit=False))
    p.send_many(range(10))
    assert p.flush(10000)
    # The follower learns the HW one fetch late (the answer to its fetch at offset 10, parked
    # at the leader): cut it off before it does, so its HW stays below 10.
    c.set_link(1, 2, drop=1.0)
    got: list[tuple[int, int]] = []
    assert c.run_until(lambda c: bool(got.extend(cons.poll()) or len(got) >= 10), 10000)
    c.slow_follower(3, 8000)  # the new leader's HW then waits for broker 3's next fetch
    c.crash(1)
    assert c.run_until(lambda c: c.controller.leader == 2, 20000)
    assert c.state().replicas[2].high_watermark < 10
    c.set_link(1, 2)
    c.run_for(3000)           # the consumer validates its position meanwhile
    c.slow_follower(3, 0)
    p.send_many(range(10, 15))
    assert p.flush(20000)
    c.run_until(lambda c: bool(got.extend(cons.poll()) or len(got) >= 15), 20000)
    c.run_for(2000)
    got.extend(cons.poll())
    offsets = [o for o, _ in got]
    assert offsets == list(range(15)), "a false LOG_TRUNCATION rewound the consumer"
    assert not any(op.error == "LOG_TRUNCATION" for op in c.history if op.process == "c")


# 4. Committed offsets carry their leader epoch and are validated after a restart.
def _truncated_under_committed_offset(generation: Generation, reset: str, backend: str) -> Cluster:
    c = Cluster(ClusterConfig(brokers=(1, 2), min_insync_replicas=1,
                              unclean_leader_election_enable=True), generation, seed=4, backend=backend)
    p = c.producer("p", ProducerConfig(acks="1"))
    cons = c.consumer("c", ConsumerConfig(auto_offset_reset=reset, enable_auto_commit=False))
    c.run_for(50)
    cons.seek(0)                                  # no committed offset yet: start at 0
    c.isolate(2)                                  # broker 2 falls out of the ISR, holds nothing
    p.send_many(range(10))
    assert p.flush(20000)
    got: list[tuple[int, int]] = []
    assert c.run_until(lambda c: bool(got.extend(cons.poll()) or len(got) >= 10), 20000)
    cons.commit()
    c.run_for(500)
    assert cons.committed == 10
    c.crash(1)
    c.heal()
    assert c.run_until(lambda c: c.controller.leader == 2, 30000)   # unclean: offsets 0-9 gone
    p.send_many(range(100, 115))                                     # new offsets 0-14
    assert p.flush(20000)
    cons.restart()
    for _ in range(40):
        c.run_for(500)
        got.extend(cons.poll())
    c.got = got  # type: ignore[attr-defined]
    return c


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("generation", [g for g in ALL if g.fences_current_epoch])
def test_a_committed_offset_truncated_away_is_detected_not_silently_skipped(generation, backend):
    c = _truncated_under_committed_offset(generation, "earliest", backend)
    after = [v for _, v in c.got[10:]]  # type: ignore[attr-defined]
    assert after == list(range(100, 115)), "records written after the truncation were skipped"
    assert any(op.error == "LOG_TRUNCATION" for op in c.history if op.process == "c")


@pytest.mark.parametrize("generation", [g for g in ALL if g.fences_current_epoch])
def test_log_truncation_with_no_reset_policy_stops_the_consumer(generation):
    c = _truncated_under_committed_offset(generation, "none", "rust")
    assert c.got[10:] == []  # type: ignore[attr-defined]
    errors = [op.error for op in c.history if op.process == "c" and op.type == "info"]
    assert "LOG_TRUNCATION" in errors


# 5. An idempotent producer recovers from an expired batch (epoch bump, or a new producer id).
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("generation", ALL)
def test_an_idempotent_producer_recovers_after_an_expired_batch(generation, backend):
    c = Cluster(ClusterConfig(min_insync_replicas=2), generation, seed=6, backend=backend)
    p = c.producer("p", ProducerConfig(acks="all", enable_idempotence=True, request_timeout_ms=2000,
                                       delivery_timeout_ms=5000))
    p.send_many(range(3))
    assert p.flush(10000)
    c.partition([["p"], [1, 2, 3, "controller"]])  # the producer cannot reach the leader
    p.send(3)
    c.run_for(8000)
    assert [op.type for op in sends(c)[3]] == ["info"]
    c.heal()
    p.send_many(range(4, 8))
    assert p.flush(20000)
    for v in range(4, 8):
        assert [op.type for op in sends(c)[v]] == ["ok"], f"send {v}: {sends(c)[v]}"
    how = "bumps its epoch" if generation >= Generation.DIVERGING_EPOCH else "asks for a new producer id"
    assert any(how in e.message for e in c.events)


# 6. min.insync.replicas above the replication factor.
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("generation", ALL)
def test_min_insync_replicas_above_the_replication_factor(generation, backend):
    c = Cluster(ClusterConfig(broker_startup_ms=INSTANT, brokers=(1, 2), min_insync_replicas=3), generation, seed=7, backend=backend)
    p = c.producer("p", ProducerConfig(acks="all", delivery_timeout_ms=5000))
    p.send(1)
    p.flush(20000)
    done = sends(c)[1]
    if generation == Generation.STRICT_MIN_ISR:
        # 3.7+: the effective minimum min(min.insync.replicas, replicas) in both checks.
        assert [op.type for op in done] == ["ok"]
        assert leader_values(c) == [1]
    else:
        # <= 3.6: NOT_ENOUGH_REPLICAS before anything is appended, retried until it expires
        # (a definite failure, or unknown when the expiry finds a retry in flight).
        assert [(op.type in ("fail", "info"), op.error) for op in done] == [(True, "NOT_ENOUGH_REPLICAS")]
        assert leader_values(c) == []


# Smaller gaps the audit noted.
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("generation", ALL)
def test_kip207_latest_offset_is_not_available_while_the_new_leaders_hw_lags(generation, backend):
    # Partition.fetchOffsetForTimestamp (2.2+): ListOffsets(latest) answers OFFSET_NOT_AVAILABLE
    # while the HW is below the leader epoch start offset, so a consumer starting at "latest"
    # right after a failover does not start below the end of the previous epoch.
    c = Cluster(ClusterConfig(min_insync_replicas=1), generation, seed=2, backend=backend)
    p = c.producer("p", ProducerConfig(acks="all"))
    p.send_many(range(10))
    assert p.flush(10000)
    c.set_link(1, 2, drop=1.0)       # broker 2's HW stays below 10 (see the validation test)
    c.run_for(1000)
    c.slow_follower(3, 8000)
    c.crash(1)
    assert c.run_until(lambda c: c.controller.leader == 2, 20000)
    stale_hw = c.state().replicas[2].high_watermark
    assert stale_hw < 10
    late = c.consumer("late", ConsumerConfig(auto_offset_reset="latest"))
    c.run_for(3000)
    if generation >= Generation.KIP_320:
        assert late.position is None, "reset to a HW below the start of the leader's epoch"
    else:
        assert late.position == stale_hw  # 2.1 and before: the lagging HW is the answer
    c.slow_follower(3, 0)
    c.set_link(1, 2)
    c.run_for(10000)
    assert late.position is not None and late.position >= (10 if generation >= Generation.KIP_320 else stale_hw)



# Client backoff: KIP-580 (Java clients 3.7+, G5), every wait retry.backoff.ms before.
def test_exponential_backoff_is_kafkas():
    """``ExponentialBackoff(100, 2, 1000, 0.2)``: attempt n waits 100 * 2**n ms times a factor
    in [0.8, 1.2), at most 1000 ms (from attempt 4 on: 2**log2(10) * 100 = 1000 * factor)."""
    from random import Random

    from epochlab.sim.backoff import ExponentialBackoff

    b = ExponentialBackoff(100, 1000, Random(1))
    for attempts, term in [(0, 100), (1, 200), (2, 400), (3, 800)]:
        waits = [b.backoff(attempts) for _ in range(200)]
        assert int(0.8 * term) <= min(waits) and max(waits) < int(1.2 * term) + 1
    capped = [b.backoff(n) for n in (4, 10, 1000) for _ in range(100)]
    assert max(capped) == 1000 and min(capped) >= 800
    assert ExponentialBackoff(100, 100, Random(1)).backoff(7) == 100  # no range: no growth


def test_metadata_backoff_counts_equivalent_answers_and_failures():
    """``Metadata.timeToAllowUpdate``: after an answer the next request waits by the number of
    equivalent answers in a row (no higher leader epoch); a higher epoch or a failure resets
    that count; failures back off by their own count."""
    from random import Random

    from epochlab.sim.backoff import ExponentialBackoff, MetadataBackoff

    m = MetadataBackoff(ExponentialBackoff(100, 1000, Random(2)))
    assert m.wait_ms(0) == 0                      # nothing asked yet
    m.answered(0, 5)                              # first answer: new information
    assert m.wait_ms(0) == 0
    m.answered(10, 5)                             # the same epoch again: backoff(0)
    assert 80 <= m.wait_ms(10) <= 120
    m.answered(200, 5)
    m.answered(500, 5)                            # third equivalent answer in a row: backoff(2)
    assert 320 <= m.wait_ms(500) <= 480
    m.answered(600, 6)                            # a newer leader epoch resets the count
    assert m.wait_ms(600) == 0
    m.failed(700)
    m.failed(800)                                 # two failures: backoff(1)
    assert 160 <= m.wait_ms(800) <= 240


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("generation", [Generation.DIVERGING_EPOCH, Generation.STRICT_MIN_ISR])
def test_a_producer_waiting_for_a_leader_backs_off_from_3_7(generation, backend):
    """With every broker down and fenced (no leader, the same epoch in every answer) the
    producer asks the controller for a leader: every
    ``retry.backoff.ms`` (100 ms) up to 3.6, about 100, 200, 400, 800 then 1,000 ms apart from
    3.7 (KIP-580). Over 10 s that is about 100 requests against about 14."""
    c = Cluster(ClusterConfig(broker_startup_ms=INSTANT), generation, seed=3, backend=backend)
    p = c.producer("p", ProducerConfig(acks="all", delivery_timeout_ms=60000))
    p.send(1)
    assert p.flush(10000)
    for b in (1, 2, 3):
        c.crash(b)
    c.run_for(c.config.session_timeout_ms + 3000)   # every broker fenced: no leader at all
    assert c.state().leader is None
    p.send(2)
    before = c.network.sent
    c.run_for(10000)
    requests = (c.network.sent - before) // 2   # each request and its answer
    if generation == Generation.STRICT_MIN_ISR:
        assert 8 <= requests <= 20, requests
    else:
        assert 80 <= requests <= 110, requests


# The time-based flush (LogManager.flushDirtyLogs): a log is fsynced at the first check once
# flush.ms has passed since its creation or its last flush that wrote something.
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_log_is_flushed_flush_ms_after_its_last_flush_that_wrote_something(backend):
    c = Cluster(ClusterConfig(broker_startup_ms=INSTANT, flush_interval_ms=2000), Generation.STRICT_MIN_ISR,
                seed=3, backend=backend)
    p = c.producer("p", ProducerConfig(acks="1"))

    def flushed_at(ms: int) -> int:
        c.run_for(ms - c.now_ms)
        leader = c.state().leader
        assert leader is not None
        return c.brokers[leader].replica.log.recovery_point

    c.run_for(100)
    p.send(1)
    assert flushed_at(1950) == 0  # the log was created at 0: nothing before 2 s
    assert flushed_at(2150) == 1
    c.run_for(5000 - c.now_ms)    # idle for longer than flush.ms
    p.send(2)
    assert flushed_at(5150) == 2  # flushed at the next check, not on a 2 s grid (6 s)
    p.send(3)                     # soon after a flush: waits out the rest of the interval
    assert flushed_at(7050) == 2
    assert flushed_at(7250) == 3
