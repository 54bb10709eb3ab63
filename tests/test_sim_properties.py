"""Hypothesis properties of the engine on random short schedules, latest generation, clean
elections, RF=3, min.insync.replicas=2, acks=all, at most one broker down (crashed without
losing its page cache, or isolated) at a time.

Checked after every step: Log Matching below min(HW) between live replicas (``docs/invariants.md``
5), ``log_start <= HW <= LEO`` (Inv-8), strictly increasing epoch-cache entries and
non-decreasing batch epochs (Inv-6). At the end, after healing: no acknowledged acks=all write
is missing from the leader's log at its acknowledged offset (Inv-1).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochlab import first_mismatch
from epochlab.sim import Cluster, ClusterConfig, ConsumerConfig, Generation, ProducerConfig
from epochlab.sim.producer import Producer

BROKERS = (1, 2, 3)

actions = st.one_of(
    st.tuples(st.just("produce"), st.integers(1, 4)),
    st.tuples(st.just("poll"), st.just(0)),
    st.tuples(st.just("run"), st.integers(5, 4000)),
    st.tuples(st.just("crash"), st.sampled_from(BROKERS)),
    st.tuples(st.just("restart"), st.sampled_from(BROKERS)),
    st.tuples(st.just("isolate"), st.sampled_from(BROKERS)),
    st.tuples(st.just("heal"), st.just(0)),
    st.tuples(st.just("slow"), st.sampled_from(BROKERS)),
)


def check_invariants(c: Cluster) -> None:
    state = c.state()
    for r in state.replicas.values():
        assert r.log_start_offset <= r.high_watermark <= r.log_end_offset, r
        entries = list(r.epoch_entries)
        assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(entries, entries[1:])), entries
        epochs = [batch[2] for batch in r.batches]
        assert epochs == sorted(epochs), epochs
    live = [b for b in BROKERS if c.brokers[b].alive]
    for i, a in enumerate(live):
        for b in live[i + 1:]:
            la, lb = c.brokers[a].replica.log, c.brokers[b].replica.log
            mismatch = first_mismatch(la, lb)
            bound = min(la.high_watermark, lb.high_watermark)
            assert mismatch is None or mismatch >= bound, (a, b, mismatch, bound, c.now_ms)


def run_schedule(schedule: list[tuple[str, int]], seed: int) -> Cluster:
    c = Cluster(ClusterConfig(min_insync_replicas=2), Generation.STRICT_MIN_ISR, seed=seed)
    p = c.producer("p", ProducerConfig(acks="all", enable_idempotence=True,
                                       request_timeout_ms=5000, delivery_timeout_ms=30000))
    cons = c.consumer("c", ConsumerConfig(auto_offset_reset="earliest"))
    down: int | None = None            # the one broker crashed or isolated
    crashed = False
    value = 0
    for kind, arg in schedule:
        if kind == "produce":
            for _ in range(arg):
                value += 1
                p.send(value)
        elif kind == "poll":
            cons.poll()
        elif kind == "run":
            c.run_for(arg)
        elif kind == "crash" and down is None:
            c.crash(arg)
            down, crashed = arg, True
        elif kind == "restart" and crashed and down == arg:
            c.restart(arg)
            down, crashed = None, False
        elif kind == "isolate" and down is None:
            c.isolate(arg)
            down = arg
        elif kind == "heal" and down is not None and not crashed:
            c.heal()
            down = None
        elif kind == "slow":
            c.slow_follower(arg, 300)
        check_invariants(c)
    c.heal()
    for b in BROKERS:
        c.restart(b)
        c.slow_follower(b, 0)
    p.flush(40000)
    c.run_for(15000)
    check_invariants(c)
    return c


def _duplicates_allowed(c: Cluster) -> set[int]:
    """Values the idempotent producer renumbered under a bumped epoch after sending them once:
    the Java client may write those twice (docs/kafka-findings/README.md)."""
    p = c.clients["p"]
    assert isinstance(p, Producer)
    return p.rewritten_values


def test_an_idempotent_duplicate_needs_a_renumbered_batch() -> None:
    """A counterexample hypothesis drew: three pipelined batches reach the new
    leader around its election, the third is appended first, the retry of the first gets
    OUT_OF_ORDER_SEQUENCE_NUMBER with nothing unresolved, the producer bumps its epoch and
    renumbers all three (the Java client's `startSequencesAtBeginning`): value 3 twice. Broker 2
    stays down 3 s before the closing restarts: a KRaft broker restarted at once follows the
    leader within its startup time, before it can register, and its fetches move the HW, so
    no batch waits for its old session to expire (``Broker.on_leader_and_isr``)."""
    c = run_schedule([("produce", 1)] * 3 + [("crash", 2), ("run", 3000)], 1013)
    state = c.state()
    assert state.leader is not None
    assert state.replicas[state.leader].values() == [3, 1, 2, 3]
    assert _duplicates_allowed(c) == {1, 2, 3}


# derandomize: the same 60 examples in every run (CI reproducible). A random example drew the
# idempotent duplicate above; duplicates are now accepted only for renumbered values.
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow],
          derandomize=True)
@given(st.lists(actions, min_size=1, max_size=25), st.integers(0, 2**16))
def test_random_schedules_keep_replication_invariants(schedule: list[tuple[str, int]],
                                                      seed: int) -> None:
    c = run_schedule(schedule, seed)
    state = c.state()
    assert state.leader is not None
    leader = c.brokers[state.leader].replica.log
    for op in c.history:
        if op.f == "send" and op.type == "ok":
            assert leader.value_at(op.offset) == op.value, (op, state.to_dict())
    values = state.replicas[state.leader].values()
    twice = {v for v in values if values.count(v) > 1}
    assert twice <= _duplicates_allowed(c), twice     # idempotence: no other duplicates
