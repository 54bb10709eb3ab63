"""Per-generation behaviour: the two KIP-101 problems of seed 004 and generation flags.

Seed 004 (KIP-101 "Motivation"): in Generation.TRUNCATE_TO_HW the exact interleavings lose a
committed message (problem 1) or leave two replicas with different records at the same
offsets (problem 2); every later generation survives the same schedule.
"""

from __future__ import annotations

import pytest

from epochlab import first_mismatch
from epochlab.sim import Cluster, ClusterConfig, Generation, ProducerConfig

LATER = [g for g in Generation if g != Generation.TRUNCATE_TO_HW]

#: Restart at once: these tests are about a protocol rule around a restart, not the
#: broker's startup time (ClusterConfig.broker_startup_ms, on by default).
INSTANT = (0, 0)


def problem_1(generation: Generation) -> Cluster:
    """B = broker 1 leads, A = broker 2 follows. A fetched m2 (committed on B: acks=all) but
    its HW, and its HW checkpoint, still say 1. A restarts, B fails before A re-fetches, A
    becomes leader."""
    c = Cluster(ClusterConfig(broker_startup_ms=INSTANT, brokers=(1, 2)), generation, seed=4)
    p = c.producer("p", ProducerConfig(acks="all"))
    p.send(1)                       # m1
    assert p.flush(5000)
    c.run_for(5500 - c.now_ms)      # HW checkpoint at 5000 holds HW 1
    p.send(2)                       # m2, acknowledged once A has fetched it
    assert p.flush(5000)
    state = c.state()
    assert state.replicas[1].high_watermark == 2 and state.replicas[2].log_end_offset == 2
    c.crash(2)
    c.restart(2)                    # fast restart: registers once its old session expired
    c.crash(1)                      # the leader fails before A fetched again
    c.run_for(10000)
    return c


def test_problem_1_loses_committed_message_in_g0() -> None:
    """In 0.10 only ``makeFollowers`` truncates to the HW, and a restarted broker registers
    only after its old session expired: A, cut off from B, comes back as B's follower and
    truncates m2; B then fails and A, the only broker left, is elected (unclean, 0.10's
    default): the acknowledged m2 is gone."""
    c = Cluster(ClusterConfig(broker_startup_ms=INSTANT, brokers=(1, 2)), Generation.TRUNCATE_TO_HW, seed=4)
    p = c.producer("p", ProducerConfig(acks="all"))
    p.send(1)
    assert p.flush(5000)
    c.run_for(5500 - c.now_ms)      # HW checkpoint at 5000 holds HW 1
    p.send(2)
    assert p.flush(5000)
    c.set_link(1, 2, drop=1.0)      # A cannot fetch m2 again
    c.crash(2)
    c.restart(2)
    c.run_for(8000)
    assert any("truncate to local HW" in e.message for e in c.events)
    assert c.state().replicas[2].values() == [1]
    c.crash(1)
    c.run_for(10000)
    assert c.state().leader == 2
    acked = {op.value: op.offset for op in c.history if op.type == "ok" and op.f == "send"}
    assert acked == {1: 0, 2: 1}
    assert c.state().replicas[2].values() == [1]          # m2 lost for good


def test_problem_1_schedule_keeps_m2_in_g0_when_a_leads_first() -> None:
    """The same crash with B failing at once: A registers after its old session expired and
    is made leader directly (unclean), never a follower, so it never truncates to its HW and
    keeps m2 (0.10: ``makeLeader`` does not truncate). Before 958974e the model let A's
    restart register at once and handed it the follower role on a heartbeat answer."""
    c = problem_1(Generation.TRUNCATE_TO_HW)
    assert c.state().leader == 2 and c.state().replicas[2].values() == [1, 2]
    assert not any("truncate to local HW" in e.message for e in c.events)


@pytest.mark.parametrize("generation", LATER)
def test_problem_1_keeps_committed_message_later(generation: Generation) -> None:
    c = problem_1(generation)
    assert c.state().replicas[2].values() == [1, 2]
    # A's new incarnation cannot register while its old session lives (ZooKeeper: the old
    # session's ephemeral /brokers/ids/<id>: before 2.2 the start fails, "restarted it
    # faster than the zookeeper timeout", from 2.2 KafkaZkClient.registerBroker; KRaft:
    # DuplicateBrokerRegistration), so when B fails
    # the controller elects A's old registration; that session expires too, the partition
    # waits OFFLINE, and A, registered again, is elected: it has both records.
    # Which session expires first depends on the brokers' heartbeat phases (as in Kafka):
    # B's first, and A (old registration, then new) ends as leader; A's first, and A's new
    # incarnation, out of the ISR after its unclean shutdown, waits with the partition
    # offline for B, the last ISR member (Kafka 4.3.1 did that in seed-004-kip101-problem-1).
    ctrl = c.state().controller
    assert ctrl["leader"] in (2, None) and ctrl["unavailable_ms"] > 0
    assert any("registration waits for the old session to expire" in e.message for e in c.events)
    if generation.kraft and ctrl["leader"] == 2:
        # Kafka 4.x: A, registered after its unclean shutdown (so in no ELR), is elected as
        # the last known leader (canElectLastKnownLeader)
        assert any("(last known leader)" in e.message for e in c.events)


def problem_2(generation: Generation) -> Cluster:
    """Both brokers go down: A (2) first, so B (1) leads alone; B then crashes losing its
    unflushed m2, comes back first, is re-elected and writes m3 at m2's offset; A returns
    with m2 under its checkpointed HW."""
    c = Cluster(ClusterConfig(broker_startup_ms=INSTANT, brokers=(1, 2), flush_interval_ms=30000), generation, seed=5)
    p = c.producer("p", ProducerConfig(acks="all"))
    p.send(1)                       # m1, flushed at 30000
    assert p.flush(5000)
    c.run_for(30500 - c.now_ms)
    p.send(2)                       # m2: committed on both, in the HW checkpoint at 35000
    assert p.flush(5000)
    c.run_for(35500 - c.now_ms)
    c.crash(2)
    c.run_for(7000)
    c.crash(1, lose_unflushed=True)
    c.run_for(7000)
    c.restart(1)
    c.run_for(1000)
    p.send(3)                       # m3 at offset 1 in B's new epoch
    assert p.flush(5000)
    c.restart(2)
    c.run_for(3000)
    return c


def test_problem_2_replicas_diverge_in_g0() -> None:
    c = problem_2(Generation.TRUNCATE_TO_HW)
    state = c.state()
    a, b = state.replicas[2], state.replicas[1]
    assert (b.values(), a.values()) == ([1, 3], [1, 2])
    mismatch = first_mismatch(c.brokers[1].replica.log, c.brokers[2].replica.log)
    assert mismatch == 1 < min(a.high_watermark, b.high_watermark)   # Log Matching broken
    assert 2 in state.controller["isr"]                                # silently back in ISR


@pytest.mark.parametrize("generation", LATER)
def test_problem_2_replicas_agree_later(generation: Generation) -> None:
    c = problem_2(generation)
    state = c.state()
    assert state.replicas[1].values() == state.replicas[2].values() == [1, 3]
    assert first_mismatch(c.brokers[1].replica.log, c.brokers[2].replica.log) is None


def test_generation_flags() -> None:
    assert [g.label for g in Generation] == ["hw-truncation", "kip-101", "kip-279", "kip-320",
                                             "diverging-epoch", "strict-min-isr"]
    assert Generation.parse("2") is Generation.KIP_279
    assert Generation.KIP_101.kip101_epoch_cache and not Generation.KIP_320.kip101_epoch_cache
    assert Generation.TRUNCATE_TO_HW.unclean_default and not Generation.KIP_101.unclean_default
    assert Generation.STRICT_MIN_ISR.strict_min_isr and Generation.DIVERGING_EPOCH.truncate_on_fetch


@pytest.mark.parametrize("generation", [Generation.DIVERGING_EPOCH, Generation.STRICT_MIN_ISR])
def test_strict_min_isr_holds_the_high_watermark(generation: Generation) -> None:
    c = Cluster(ClusterConfig(min_insync_replicas=2), generation, seed=13)
    p = c.producer("p", ProducerConfig(acks="1"))
    c.crash(2)
    c.crash(3)
    c.run_for(8000)
    assert c.state().controller["isr"] == [1]
    p.send(5)
    assert p.flush(5000)
    c.run_for(1000)
    hw = c.state().replicas[1].high_watermark
    assert hw == (0 if generation.strict_min_isr else 1)


@pytest.mark.parametrize("generation", list(Generation))
def test_zombie_leader_writes_in_old_epoch_then_truncates(generation: Generation) -> None:
    c = Cluster(ClusterConfig(broker_startup_ms=INSTANT), generation, seed=14)
    p = c.producer("p", ProducerConfig(acks="1"))
    c.run_for(500)                  # leaders known: no retry reorders the first batches
    p.send_many(range(5))
    assert p.flush(5000)
    c.run_for(6000)                 # every replica has HW 5 checkpointed
    c.partition([[1, "p"], [2, 3, "controller"]])
    p.send_many(range(50, 53))      # accepted by the isolated old leader in epoch 0
    assert p.flush(2000)
    c.run_for(8000)
    assert c.state().leader == 2 and c.state().replicas[1].role == "leader"   # zombie
    assert c.state().replicas[1].leader_epoch == 0
    c.heal()
    c.run_for(5000)
    state = c.state()
    assert state.replicas[1].role == "follower"
    assert state.replicas[1].values() == state.replicas[2].values() == list(range(5))


@pytest.mark.parametrize("generation", [Generation.TRUNCATE_TO_HW, Generation.KIP_101, Generation.KIP_279])
def test_zookeeper_era_restart_waits_for_the_session_and_a_missed_bounce_leads_nothing(
        generation: Generation) -> None:
    """Before 2.2 a broker restarted within its ZooKeeper session fails to register
    ("... restarted it faster than the zookeeper timeout so it appears to be re-registering")
    until the old session expires; if it registers between the expiry and the controller's
    read of /brokers/ids, the controller takes it for the same broker (the ABA restart KIP-380
    fixed) and sends it nothing: the new process leads and follows nothing, while the
    controller still counts it live and in the ISR. ZooKeeper session pings carry no state.
    (Before, the model let the restart register at once and resent it the partition state on
    every heartbeat, so a missed bounce resumed its old role: an impossible step.)"""
    slow_watch = ClusterConfig(broker_startup_ms=INSTANT, controller_delay_ms=(3000, 3000),
                               heartbeat_interval_ms=500, session_timeout_ms=3000)
    c = Cluster(slow_watch, generation, seed=1)
    c.run_for(8000)
    c.crash(3)
    c.restart(3)
    c.run_for(20000)
    messages = [e.message for e in c.events if e.kind == "controller"]
    assert any("broker 3 restarted; its registration waits for the old session" in m for m in messages)
    assert any("broker 3's session expired but it registered again" in m for m in messages)
    assert c.brokers[3].replica.role == "none" and c.controller.live[3]
    assert 3 in c.state().controller["isr"]

    quick_watch = Cluster(ClusterConfig(broker_startup_ms=INSTANT, heartbeat_interval_ms=500,
                                        session_timeout_ms=3000), generation, seed=1)
    quick_watch.run_for(8000)
    quick_watch.crash(3)
    quick_watch.restart(3)
    quick_watch.run_for(20000)      # the usual case: failure handled, then a noticed start
    messages = [e.message for e in quick_watch.events if e.kind == "controller"]
    assert "controller: broker 3 session expired" in messages and "controller: broker 3 registered" in messages
    assert quick_watch.brokers[3].replica.role == "follower"


@pytest.mark.parametrize(("fixture", "was"), [
    ("g0-liveness-converge-model-defect.json", "Liveness-Converge"),
    ("g0-inv-epochmonotone-model-defect.json", "Inv-EpochMonotone"),
    ("g1-liveness-converge-clean-shutdown-model-defect.json", "Liveness-Converge"),
])
def test_zookeeper_era_findings_that_were_model_defects(fixture: str, was: str) -> None:
    """Two hw-truncation findings of the campaign on 867d9c2 (seed 5101), both model defects:
    (1) a broker whose bounce had been missed restarted again and was taken for the missed
    incarnation at every session expiry, so it never registered (Liveness-Converge); (2) a
    LeaderAndIsr held by a partition reached a broker after the controller had declared it
    dead and it had registered again, making it leader of an old epoch (Inv-EpochMonotone).
    A ZooKeeper controller drops a dead broker's request queue (``onBrokerFailure`` ->
    ``ControllerChannelManager.removeBroker``). And a kip-101 one: (3) a broker shut down
    cleanly kept its session until it timed out, so its restart, waiting for that, could land
    in the window of a missed bounce; a ZooKeeper-era broker closes its session on shutdown
    (``KafkaServer.shutdown``), so the restart is a noticed start."""
    from pathlib import Path

    from epochlab.fuzz import execute
    from epochlab.fuzz.schedule import load_schedule

    schedule = load_schedule(Path(__file__).parent / "fixtures" / "schedules" / fixture)
    verdict = execute(schedule).verdict
    assert verdict.first(was) is None, [(v.invariant, v.verdict) for v in verdict.violations]
    assert verdict.ok


@pytest.mark.parametrize("backend", ["rust", "reference"])
def test_a_fetcher_ignores_answers_to_requests_it_gave_up_on(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A latest-generation finding of the campaign on d2deee1 (seed 8101, transactions on),
    reported as Inv-StrongIsr and matched by signature to the catalogued KRaft bug, was a
    model defect: a follower cut from its leader timed out fetch after fetch; when the link
    came back the leader served every held request and the follower applied each answer, so an
    old DivergingEpoch answer truncated records it had meanwhile fetched legitimately, while
    the leader, having seen its newer fetch, had put it back into the ISR. A Kafka fetcher
    has one request in flight and closes the connection of one that timed out
    (``NetworkClient.handleTimedOutRequests``): answers to abandoned requests never reach it.
    With stale answers applied again (the old behaviour) the violation comes back. Run seed 6
    (the campaign run's seed until the KRaft controller published its decisions after the
    metadata log's append linger; then seed 4, until the controller fenced silent brokers at
    its periodic check; each found by trying seeds on the shrunk actions)."""
    from pathlib import Path

    from epochlab.fuzz import execute
    from epochlab.fuzz.schedule import load_schedule
    from epochlab.sim import broker

    schedule = load_schedule(Path(__file__).parent / "fixtures" / "schedules"
                             / "g5-inv-strongisr-stale-fetch-answer-model-defect.json")
    verdict = execute(schedule, backend=backend).verdict
    assert verdict.ok, [(v.invariant, v.verdict) for v in verdict.violations]
    if backend == "rust":
        # the Rust FetchPlane runs this check itself (src/sim/fetcher.rs, ``take_answer``): the
        # backends' differential tests hold it to the Python statement mutated below
        return
    original = broker.Broker._answers_request_in_flight

    def every_answer(self: broker.Broker, resp: object) -> bool:
        original(self, resp)
        return True
    monkeypatch.setattr(broker.Broker, "_answers_request_in_flight", every_answer)
    stale = execute(schedule, backend=backend).verdict
    assert stale.first("Inv-StrongIsr") is not None


@pytest.mark.parametrize("backend", ["rust", "reference"])
def test_a_fetch_given_up_on_is_not_answered_during_the_backoff(backend: str) -> None:
    """After a fetch times out the fetcher backs off (``replica.fetch.backoff.ms``) before it
    sends the next one; an answer to the timed-out request arriving in that window is not
    taken either (its connection was closed), nor one to a fetch abandoned by a leader change.
    ``rust``: the fetcher in ``_core.FetchPlane``; ``reference``: the broker's own methods."""
    from types import SimpleNamespace

    from epochlab.sim import Cluster, ClusterConfig

    c = Cluster(ClusterConfig(broker_startup_ms=(0, 0)), "strict-min-isr", seed=1, backend=backend)
    c.run_for(3000)
    follower = c.brokers[2]
    assert (follower._plane is not None) is (backend == "rust")

    def in_flight() -> object:
        while follower.fetch_state()[1] is None:
            assert c.kernel.step()
        return follower.fetch_state()[1]

    abandoned = in_flight()
    follower._fetch_timeout(follower.fetch_state()[0])
    assert follower.fetch_state()[1] is None
    assert not follower._answers_request_in_flight(SimpleNamespace(request=abandoned))
    current = in_flight()
    assert current is not abandoned
    follower._start_fetcher()
    assert not follower._answers_request_in_flight(SimpleNamespace(request=current))
    newest = in_flight()
    assert follower._answers_request_in_flight(SimpleNamespace(request=newest))
    assert follower.fetch_state()[1] is None  # taken: no longer in flight


@pytest.mark.parametrize("backend", ["rust", "reference"])
def test_a_batch_renumbered_after_a_stateless_leader_took_it_first_is_allowed_out_of_order(backend: str) -> None:
    """A finding of the campaign on e87310a (strict-min-isr, fetch-from-follower profile, seed 11004):
    idempotent p3 sends 4 (seq 0) and 5 (seq 1) to a leader that has just been elected; 4 is
    answered NOT_LEADER_OR_FOLLOWER (the broker had not applied its leadership yet), 5 arrives
    a moment later and is written (a leader with no state for the producer takes a first
    batch at any sequence: ``ProducerAppendInfo.checkSequence``); its answer is lost to a
    partition. The retry of 4 is answered OUT_OF_ORDER_SEQUENCE_NUMBER, which for the next
    sequence bumps the epoch (``TransactionManager.canRetry``) and renumbers both batches
    (``startSequencesAtBeginning``, KAFKA-14034): the log holds 5, 4, 5. Kafka's Java client
    does exactly this, so the duplicate and the order are classified as allowed, with the
    mechanism named; the renumbered copies keep the send order. The interleaving hangs on the
    network's delay draws: the run seed is 2789 (486 before the KRaft controller published its
    decisions after the metadata log's append linger, 1514 before it fenced silent brokers at
    its periodic check), found by trying seeds on the shrunk actions (the origin block keeps
    the campaign run's seed)."""
    from pathlib import Path

    from epochlab.fuzz import execute
    from epochlab.fuzz.schedule import load_schedule

    schedule = load_schedule(Path(__file__).parent / "fixtures" / "schedules"
                             / "g5-nonmonotonic-send-renumbered-batch-written-first-by-a-stateless-leader.json")
    verdict = execute(schedule, backend=backend).verdict
    assert verdict.ok, [(v.invariant, v.verdict, v.message) for v in verdict.violations]
    order = next(v for v in verdict.violations if v.invariant == "nonmonotonic-send")
    assert "ProducerAppendInfo.checkSequence" in (order.reason or "") and "KAFKA-14034" in (order.reason or "")
    assert {v.invariant for v in verdict.allowed} == {"duplicate", "nonmonotonic-send"}


def test_hw_truncation_has_no_epochs_in_its_batches_to_check() -> None:
    """A finding of the bug hunt on a652835 (hw-truncation, random engine, seed 1): Inv-EpochMonotone with no
    catalogued match, shrunk to 8 actions: a slow controller link delivers LeaderAndIsr of
    epochs 2, 3, 4 to broker 1 seconds late and in order, so broker 1 leads in epoch 2 after
    fetching records leader 3 wrote in epoch 3, and its batches' epoch labels go back. Kafka
    0.10.2 acts on a LeaderAndIsr of a higher epoch the same way, but its batches (formats
    v0 / v1) carry no leader epoch and it has no epoch cache (both came with 0.11, KIP-101):
    the label is the model's. The checker evaluates Inv-EpochMonotone from kip-101 on."""
    import re
    from pathlib import Path

    from epochlab.fuzz import execute
    from epochlab.fuzz.schedule import load_schedule

    schedule = load_schedule(Path(__file__).parent / "fixtures" / "schedules"
                             / "g0-stale-leaderandisr-epoch-label-only.json")
    result = execute(schedule)
    assert result.verdict.ok and result.verdict.first("Inv-EpochMonotone") is None
    # the late LeaderAndIsr is there: broker 1 leads in epoch 2 after the controller reached 4
    late = [e["message"] for e in result.events if e["kind"] == "role"
            and re.search(r"broker 1 is leader in epoch 2 ", e["message"])]
    assert late and result.events.index(next(e for e in result.events if "epoch 4" in e["message"]
                                              and e["kind"] == "election")) < \
        result.events.index(next(e for e in result.events if e["message"] == late[0]))
    from epochlab.checks.state import StateChecker
    from epochlab.sim import Cluster, ClusterConfig

    assert [StateChecker(Cluster(ClusterConfig(), g)).epochs_in_batches
            for g in ("hw-truncation", "kip-101", "strict-min-isr")] == [False, True, True]
