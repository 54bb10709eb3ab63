"""The fuzz loop's fast paths (issue 14, session 13) change no run.

Each fast path has a plain form it replaced; the differential test below runs the same
schedules once as shipped and once with every fast path swapped for its plain form, and asks
for byte-identical histories, verdicts, final states and end times:

* ``Kernel.run_until`` steps inline; the plain form calls :meth:`Kernel.step` per event (a
  ``step`` set on the instance switches to it, as trace recording does);
* ``Kernel.post_at`` pushes a message's delivery without a :class:`Timer`; plain: ``schedule_at``;
* ``Network`` memoises each route (keys, incarnations, direction, link) until a node's life or
  a link changes; plain: the memo never keeps anything;
* ``Network._schedule`` draws a delay as ``lo + _randbelow(hi - lo + 1)``; plain: ``randint``;
* the state checker's change detector asks ``replica.state_key()`` once per broker; plain: the
  ten attribute reads it replaced.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import epochlab
from epochlab import reference
from epochlab.checks import state as state_module
from epochlab.fuzz import FuzzProfile, execute, generate_schedule
from epochlab.generations import Generation
from epochlab.sim import Cluster, ClusterConfig, ProducerConfig
from epochlab.sim import network as network_module
from epochlab.sim.kernel import Kernel
from epochlab.sim.messages import ConsumerFetchRequest, FetchRequest, ProduceResponse, evolve


class _Forgetful(dict):  # type: ignore[type-arg]
    """A memo that keeps nothing."""

    def __setitem__(self, key: Any, value: Any) -> None:
        pass


def _plain_observe(self: Any) -> None:
    """``StateChecker.observe`` with the change key read attribute by attribute."""
    c = self.cluster
    ctrl = c.controller
    changed: list[int] = []
    for b, broker in c.brokers.items():
        r, log = broker.replica, broker.replica.log
        pending = r.pending_isr
        key = (broker.alive, broker.incarnation, (r.role, r.leader_epoch, r.partition_epoch,
               None if pending is None else list(pending), log.log_end_offset, log.high_watermark,
               log.batch_count, log.log_start_offset))
        if self._keys.get(b) != key:
            self._keys[b] = key
            changed.append(b)
    ctrl_key = (ctrl.leader, ctrl.leader_epoch, ctrl.partition_epoch, ctrl.isr, ctrl.elr,
                len(ctrl.elections))
    ctrl_changed = ctrl_key != self._ctrl_key
    self._ctrl_key = ctrl_key
    if not changed and not ctrl_changed:
        return
    for b in changed:
        self._check_replica(b)
    self._advance_true_hw()
    self._check_leaders()
    self._check_log_matching(changed)
    self._check_isr(ctrl_changed)


def _plain(monkeypatch: pytest.MonkeyPatch) -> None:
    init = Kernel.__init__

    def kernel_init(self: Kernel, seed: int) -> None:
        init(self, seed)
        self.step = self.step  # type: ignore[method-assign]  # an instance step: the plain loop

    monkeypatch.setattr(Kernel, "__init__", kernel_init)
    monkeypatch.setattr(Kernel, "post_at", lambda self, t, cb, quiet: self.schedule_at(t, cb, quiet))
    net_init = network_module.Network.__init__

    def network_init(self: Any, *args: Any) -> None:
        net_init(self, *args)
        self._routes = _Forgetful()
        self._randbelow = None  # -> rng.randint

    monkeypatch.setattr(network_module.Network, "__init__", network_init)
    monkeypatch.setattr(state_module.StateChecker, "observe", _plain_observe)


def _fingerprint(result: Any) -> tuple[str, str, str, int]:
    import json
    return (result.history_jsonl, result.verdict_json(), json.dumps(result.final_state, sort_keys=True),
            result.end_ms)


SCHEDULES = [(seed, gen, txn) for gen in Generation for seed in (41, 42) for txn in (False,)] + [
    (43, Generation.STRICT_MIN_ISR, True), (44, Generation.STRICT_MIN_ISR, True)]


@pytest.mark.parametrize("backend", ["rust", "reference"])
def test_the_fast_paths_change_no_run(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    schedules = [generate_schedule(seed, gen, FuzzProfile(actions=60, transactions=txn))
                 for seed, gen, txn in SCHEDULES]
    fast = [_fingerprint(execute(s, backend=backend)) for s in schedules]
    _plain(monkeypatch)
    plain = [_fingerprint(execute(s, backend=backend)) for s in schedules]
    for (seed, gen, _), a, b in zip(SCHEDULES, fast, plain):
        assert a == b, f"seed {seed}, {gen.name}: the fast paths changed the run"


def test_the_plain_forms_are_really_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """The differential test above compares something: under ``_plain`` each replaced path runs."""
    _plain(monkeypatch)
    steps = [0]
    step = Kernel.step

    def counted(self: Kernel) -> bool:
        steps[0] += 1
        return step(self)

    monkeypatch.setattr(Kernel, "step", counted)
    c = Cluster(ClusterConfig.from_dict({"broker.startup.ms": [0, 0]}), "strict-min-isr", seed=3)
    p = c.producer("p", ProducerConfig(acks="all"))
    c.run_for(300)
    p.send(1)
    c.run_until(lambda _c: not p.pending, 2000)
    assert steps[0] == c.kernel.steps > 0           # every event through the instance's step
    assert not c.network._routes                     # the memo kept nothing
    assert c.network._randbelow is None


def test_kernel_counts_steps_and_honours_a_step_set_on_the_instance() -> None:
    k = Kernel(seed=5)
    out: list[str] = []
    k.schedule(2, lambda: out.append("timer"))
    k.post_at(1, lambda: out.append("message"), quiet=True)
    k.post_at(2, lambda: out.append("message 2"), quiet=False)
    k.schedule(0, lambda: out.append("now")).cancel()
    k.run_until(5)
    assert out == ["message", "timer", "message 2"] and k.steps == 3 and k.now_ms == 5
    watched: list[int] = []
    step = k.step

    def watching() -> bool:
        watched.append(k.now_ms)
        return step()

    k.step = watching  # type: ignore[method-assign]
    k.post_at(7, lambda: None, quiet=False)
    k.schedule_at(3, lambda: out.append("the past runs now"))
    k.run_until(10)
    assert watched == [5, 5] and out[-1] == "the past runs now" and k.steps == 5 and k.now_ms == 10


@pytest.mark.parametrize("backend", ["rust", "python", "reference"])
def test_state_key_is_the_attributes_it_stands_for(backend: str) -> None:
    c = Cluster(ClusterConfig.from_dict({"broker.startup.ms": [0, 0]}), "strict-min-isr", seed=4,
                backend=backend)
    p = c.producer("p", ProducerConfig(acks="all"))
    c.run_for(300)
    p.send_many([1, 2, 3])
    c.run_for(2000)
    c.crash(2)
    c.run_for(200)
    for b, broker in c.brokers.items():
        r, log = broker.replica, broker.replica.log
        pending = r.pending_isr
        expected = (r.role, r.leader_epoch, r.partition_epoch, pending, log.log_end_offset,
                    log.high_watermark, log.batch_count, log.log_start_offset)
        key = r.state_key()
        assert key[:3] + key[4:] == expected[:3] + expected[4:], f"broker {b}"
        assert (None if key[3] is None else list(key[3])) == (None if pending is None else list(pending))
        assert log.state_key() == expected[4:]
    assert c.brokers[1].replica.log.state_key()[0] > 0  # the run appended something


@pytest.mark.parametrize("make", [lambda: epochlab.ReplicaLog(), lambda: reference.ReplicaLog()])
def test_log_state_key_follows_appends_and_truncation(make: Any) -> None:
    log = make()
    assert log.state_key() == (0, 0, 0, 0)
    log.append_as_leader([1, 2, 3], 0)
    log.append_as_leader([4], 1)
    log.update_high_watermark(3)
    assert log.state_key() == (4, 3, 2, 0)
    log.truncate_to(3)
    assert log.state_key() == (3, 3, 1, 0)


def test_evolve_is_replace() -> None:
    fetch = FetchRequest(1, 7, 10, 3, 2, 0)
    assert evolve(fetch, broker_epoch=4) == dataclasses.replace(fetch, broker_epoch=4)
    assert fetch.broker_epoch is None  # the original is untouched
    consumer = ConsumerFetchRequest("c", 1, 5, 2, 10, rack=2, max_wait_ms=500)
    assert evolve(consumer, max_records=0) == dataclasses.replace(consumer, max_records=0)
    resp = ProduceResponse(1, None, 3, 3)
    assert evolve(resp) == resp and evolve(resp) is not resp
    with pytest.raises(TypeError, match="no field 'nope'"):
        evolve(fetch, nope=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        evolve(fetch, broker_epoch=1).broker_epoch = 2  # type: ignore[misc]


@pytest.mark.parametrize("impl", [epochlab, reference], ids=["rust", "reference"])
def test_epoch_boundaries_stop_at_the_first_epoch_that_goes_down(impl: Any) -> None:
    log = impl.ReplicaLog()
    assert log.epoch_boundaries() == ([], None)
    log.append_as_leader([1, 2], 0)
    log.append_as_leader([3], 0)
    log.append_as_leader([4], 2)
    assert log.epoch_boundaries() == ([(0, 0), (2, 3)], None)
    log.append_as_follower(impl.RecordBatch(4, 1, [5]))   # epoch 1 after epoch 2
    log.append_as_follower(impl.RecordBatch(5, 3, [6]))
    bounds, bad = log.epoch_boundaries()
    assert bounds == [(0, 0), (2, 3)]
    assert (bad.base_offset, bad.partition_leader_epoch, list(bad.records)) == (4, 1, [5])


def test_gc_for_many_runs_changes_no_run_and_restores_the_collector() -> None:
    import gc

    from epochlab.fuzz.executor import MANY_RUNS_GC_THRESHOLD, gc_for_many_runs

    schedule = generate_schedule(45, Generation.STRICT_MIN_ISR, FuzzProfile(actions=40))
    before = gc.get_threshold()
    outside = _fingerprint(execute(schedule))
    with pytest.raises(RuntimeError, match="inside"):
        with gc_for_many_runs():
            assert gc.get_threshold()[0] == max(before[0], MANY_RUNS_GC_THRESHOLD)
            assert gc.get_freeze_count() > 0
            assert _fingerprint(execute(schedule)) == outside
            raise RuntimeError("inside")
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
