"""The fuzz loop's fast paths change no run.

The event loop and the network run in Rust (``epochlab._core.Kernel`` / ``Network``) on the
rust backend, with the fetch plane, the targeted change watch and the incremental checks; the
reference backend runs the pure-Python loop and network (``epochlab.sim.kernel`` /
``epochlab.sim.network``), which state the contract, the brokers' own fetcher, and the plain
checker. The differential tests below run the same schedules both ways and ask for
byte-identical histories, verdicts, final states and end times:

* the rust backend against the reference backend, on schedules of every generation with swarm
  faults, transactions and reads from followers;
* on the reference backend, the state checker's change detector (``ChangeWatch``,
  ``replica.state_key()`` once per broker) against the ten attribute reads it replaced (its
  plain form, ``_AttrWatch``), and the kernel's ``observe`` hook against a ``stop`` callback
  that checks ``last_quiet`` itself;
* messages posted as ``(nodes, dst, method, msg, src)`` (``Network.post``) against a closure
  per message (the Python network's ``post`` makes one).

Then the Rust network against the Python one on random operation sequences (duplication, loss,
reordering, partitions, coalescing, restarts: what fuzz schedules rarely reach), the Rust
network's random stream against ``random.Random``, the two kernels' contract, and the Rust
loop's hygiene: finished runs are freed, re-entrant Python cannot deadlock it.
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
from epochlab.sim import cluster as cluster_module
from epochlab.sim.kernel import Kernel
from epochlab.sim.network import Network
from epochlab.sim.messages import ConsumerFetchRequest, FetchRequest, ProduceResponse, evolve


class _AttrWatch(reference.ChangeWatch):
    """``ChangeWatch`` with the change key read attribute by attribute (the plain form)."""

    def __init__(self) -> None:
        self._keys: dict[int, tuple[Any, ...]] = {}
        self._ctrl_key: tuple[Any, ...] | None = None

    def changes(self, brokers: dict[int, Any], ctrl: Any) -> tuple[list[int], bool] | None:
        changed: list[int] = []
        for b, broker in brokers.items():
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
        return (changed, ctrl_changed) if changed or ctrl_changed else None

    def forget(self, b: int) -> None:
        self._keys.pop(b, None)


def _advance_with_a_stop_callback(self: Any, time_ms: int) -> None:
    """``Run.advance_to`` as it was before the kernel's ``observe`` hook: a Python ``stop``
    callback after every event that looks at ``last_quiet`` itself."""
    if time_ms > self.cluster.now_ms:
        self.cluster.kernel.run_until(time_ms, lambda: self._tick(self.cluster))


def _plain(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the reference backend: the change detector in its plain form, the checker called
    from a ``stop`` callback."""
    from epochlab.fuzz import executor as executor_module

    monkeypatch.setattr(reference, "ChangeWatch", _AttrWatch)
    monkeypatch.setattr(executor_module.Run, "advance_to", _advance_with_a_stop_callback)


def _fingerprint(result: Any) -> tuple[str, str, str, int]:
    import json
    return (result.history_jsonl, result.verdict_json(), json.dumps(result.final_state, sort_keys=True),
            result.end_ms)


SCHEDULES = [(seed, gen, txn) for gen in Generation for seed in (41, 42) for txn in (False,)] + [
    (43, Generation.STRICT_MIN_ISR, True), (44, Generation.STRICT_MIN_ISR, True)]


def test_the_fast_paths_change_no_run() -> None:
    """The rust backend (Rust loop, network, fetch plane, targeted change watch, incremental
    checks) against the reference backend (all of them in their plain Python form)."""
    for seed, gen, txn in SCHEDULES:
        schedule = generate_schedule(seed, gen, FuzzProfile(actions=60, transactions=txn))
        assert _fingerprint(execute(schedule, backend="rust")) == _fingerprint(execute(schedule, backend="reference")), \
            f"seed {seed}, {gen.name}: the fast paths changed the run"


def test_the_plain_change_watch_and_stop_callback_change_no_run(monkeypatch: pytest.MonkeyPatch) -> None:
    schedules = [generate_schedule(seed, gen, FuzzProfile(actions=60, transactions=txn))
                 for seed, gen, txn in SCHEDULES[::3]]
    fast = [_fingerprint(execute(s, backend="reference")) for s in schedules]
    _plain(monkeypatch)
    assert [_fingerprint(execute(s, backend="reference")) for s in schedules] == fast


def test_the_plain_forms_are_really_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """The differential tests above compare something: the reference backend runs every event
    through the Python kernel, the brokers' own fetcher and the plain checker, the rust
    backend none of them; under ``_plain`` the attribute-reading watch runs."""
    steps = [0]
    step = Kernel.step

    def counted(self: Kernel) -> bool:
        steps[0] += 1
        return step(self)

    monkeypatch.setattr(Kernel, "step", counted)
    from epochlab import _core
    from epochlab.fuzz.executor import Run

    for backend in ("reference", "rust"):
        steps[0] = 0
        c = Cluster(ClusterConfig.from_dict({"broker.startup.ms": [0, 0]}), "strict-min-isr", seed=3,
                    backend=backend)
        p = c.producer("p", ProducerConfig(acks="all"))
        c.run_for(300)
        p.send(1)
        c.run_until(lambda _c: not p.pending, 2000)
        plain = backend == "reference"
        assert isinstance(c.kernel, Kernel) is plain and isinstance(c.network, Network) is plain
        assert isinstance(c.kernel, _core.Kernel) is not plain
        assert all((b._plane is None) is plain for b in c.brokers.values())  # the brokers' Python fetcher
        assert (steps[0] == c.kernel.steps > 0) if plain else steps[0] == 0
        assert Run(generate_schedule(1, Generation.STRICT_MIN_ISR, FuzzProfile(actions=5)),
                   backend).checker.incremental is not plain
    _plain(monkeypatch)
    for backend in ("reference",):                 # the attribute-reading change detector,
        run = Run(generate_schedule(1, Generation.STRICT_MIN_ISR, FuzzProfile(actions=5)), backend)
        assert isinstance(run.checker._watch, _AttrWatch)
        calls = [0]
        tick = run._tick

        def counted_tick(cluster: Any, tick: Any = tick) -> bool:
            calls[0] += 1
            return bool(tick(cluster))
        run._tick = counted_tick  # type: ignore[method-assign]
        run.advance_to(500)
        assert calls[0] > 1                         # called back from a Python stop callback


PLANE_SCHEDULES = [(seed, gen, profile) for gen in Generation for seed in (50, 51, 52)
                   for profile in ("default", "fetch-from-follower")
                   if profile == "default" or gen >= Generation.KIP_320]  # KIP-392: Kafka 2.4


def _plane_schedule(seed: int, generation: Generation, profile: str) -> Any:
    """A 100-action schedule of ``PLANE_SCHEDULES`` (``profile``: default, or one of
    docs/profiles)."""
    from pathlib import Path

    from epochlab.fuzz.generator import load_profile

    docs = Path(__file__).resolve().parents[1] / "docs" / "profiles"
    base = FuzzProfile() if profile == "default" else load_profile(docs / f"{profile}.json")
    return generate_schedule(seed, generation, dataclasses.replace(base, actions=100))


@pytest.mark.parametrize("seed, generation, profile", PLANE_SCHEDULES)
def test_the_fetch_plane_is_the_brokers_fetcher(seed: int, generation: Generation, profile: str) -> None:
    """``_core.FetchPlane`` (the follower's fetcher and the leader's fetch serving in Rust) is
    the broker's Python fetcher (the reference backend's), run for run: the same history,
    verdict, final state and end time, on 100-action schedules with swarm faults, and with
    reads from followers (KIP-392: consumer reads parked on a follower that a fetch answer
    completes)."""
    schedule = _plane_schedule(seed, generation, profile)
    assert _fingerprint(execute(schedule, backend="rust")) == _fingerprint(execute(schedule, backend="reference"))


@pytest.mark.parametrize("generation", list(Generation))
@pytest.mark.parametrize("seed", [50, 51, 52])
def test_the_produce_path_is_the_brokers(seed: int, generation: Generation) -> None:
    """The produce engine (src/sim/produce.rs, driven by ``_core.FetchPlane``) is the broker's
    Python produce path, run for run, on 100-action schedules with transactions: connections
    read one request at a time, requests behind a client's close, acks=all timeouts, and
    KIP-890 verification handing its verdict back to the engine. (Over these 18 schedules the
    reference backend sees 39 client closes, 37 answers on a closed connection, 19 writes that
    fail after one, 57 purgatory timeouts and 36 verifications: each rule is exercised.)"""
    schedule = generate_schedule(seed, generation, FuzzProfile(actions=100, transactions=True))
    assert _fingerprint(execute(schedule, backend="rust")) == _fingerprint(execute(schedule, backend="reference"))


@pytest.mark.parametrize("commit", [True, False])
def test_the_markers_purgatory_answers_the_coordinator_alike(commit: bool) -> None:
    """The transaction markers' answers (error and offset, which the coordinator does not
    read, so no run shows them) are the same from the produce engine as from the broker's
    Python purgatory: a marker is answered with its own offset once the HW passes it."""
    from epochlab.sim.config import ProducerConfig

    answers = {}
    for backend in ("rust", "reference"):
        c = Cluster(ClusterConfig.from_dict({"broker.startup.ms": [0, 0]}), "strict-min-isr", seed=4,
                    backend=backend)
        seen: list[tuple[int, str | None, int | None]] = []
        take = c.coordinator.on_write_txn_markers_response

        def note(resp: Any, src: object, take: Any = take, seen: list[Any] = seen) -> None:
            seen.append((resp.request_id, resp.error, resp.offset))
            take(resp, src)
        c.coordinator.on_write_txn_markers_response = note  # type: ignore[method-assign]
        p = c.producer("tx", ProducerConfig.from_dict({"acks": "all", "transactional.id": "t1"}))
        c.run_for(2000)
        for value in (1, 2):
            p.begin_transaction()
            p.send(value)
            p.send(value + 10)
            c.run_for(500)
            if commit:
                p.commit_transaction()
            else:
                p.abort_transaction()
            c.run_for(1000)
        answers[backend] = seen
    assert answers["rust"] == answers["reference"]
    assert [offset for _, error, offset in answers["rust"]] == [2, 5] and \
        all(error is None for _, error, _ in answers["rust"])


def test_the_produce_path_is_taken_with_rust_replicas_only() -> None:
    c = Cluster(ClusterConfig(), "strict-min-isr", seed=1)
    assert all(type(b.on_produce).__name__ == "FetchPlaneHandler"
               and type(b.on_client_disconnect).__name__ == "FetchPlaneHandler" for b in c.brokers.values())
    c = Cluster(ClusterConfig(), "strict-min-isr", seed=1, backend="reference")
    assert all(type(b.on_produce).__name__ == "method" for b in c.brokers.values())


def test_the_fetch_plane_is_taken_with_rust_replicas_only() -> None:
    c = Cluster(ClusterConfig(), "strict-min-isr", seed=1)
    assert all(b._plane is not None and type(b.on_fetch).__name__ == "FetchPlaneHandler"
               for b in c.brokers.values())
    c = Cluster(ClusterConfig(), "strict-min-isr", seed=1, backend="reference")
    assert all(b._plane is None for b in c.brokers.values())


def test_the_fetch_plane_names_the_callers_mistakes() -> None:
    """An id never attached, an object that is not a broker, a message that is not one: a
    ``TypeError`` saying what is wrong, and the plane keeps working."""
    from epochlab import _core

    c = Cluster(ClusterConfig(broker_startup_ms=(0, 0)), "strict-min-isr", seed=2)
    plane = c.brokers[1]._plane
    with pytest.raises(TypeError, match="broker 9 is not attached"):
        plane.start_fetcher(9)
    with pytest.raises(TypeError, match="not an epochlab._core.Replica"):
        plane.attach(7, type("Python", (), {"replica": reference.ReplicaLog()})())
    with pytest.raises(TypeError, match="no attribute"):
        plane.attach(8, object())
    hollow = type("Hollow", (), {"replica": _core.Replica(8, [8], 5, 1, 100)})()
    plane.attach(8, hollow)
    with pytest.raises(TypeError, match="has no attribute incarnation"):
        plane.start_fetcher(8)
    with pytest.raises(TypeError, match="'replica_id' field"):
        c.brokers[1].on_fetch(object(), 2)
    with pytest.raises(TypeError, match="'request' field"):
        c.brokers[2].on_fetch_response("junk", 1)
    p = c.producer("p", ProducerConfig(acks="all"))
    p.send(1)
    assert c.run_until(lambda _c: not p.pending, 5000)
    assert c.state().replicas[2].values() == [1]  # replicated through the plane all the same


def test_the_fast_forms_are_the_ones_the_executor_uses() -> None:
    """Without ``_plain``: the Rust change detector with the Rust core, the plain one with the
    reference backend (the benchmark's baseline stays pure Python)."""
    from epochlab import _core
    from epochlab.fuzz.executor import Run

    schedule = generate_schedule(1, Generation.STRICT_MIN_ISR, FuzzProfile(actions=5))
    assert isinstance(Run(schedule, "rust").checker._watch, _core.ChangeWatch)
    assert isinstance(Run(schedule, "reference").checker._watch, reference.ChangeWatch)


@pytest.mark.parametrize("kind", ["python", "rust"])
def test_the_observe_hook_runs_first_and_after_each_event_that_is_not_quiet(kind: str) -> None:
    from epochlab import _core

    k = Kernel(1) if kind == "python" else _core.Kernel(1)
    seen: list[Any] = []
    k.schedule_at(1, lambda: seen.append("loud 1"), quiet=False)
    k.schedule_at(2, lambda: seen.append("quiet 2"), quiet=True)
    k.schedule_at(3, lambda: seen.append("loud 3"), quiet=False)
    assert not k.run_until(5, lambda: bool(seen.append("stop")), lambda: seen.append(("observe", k.now_ms)))
    assert seen == [("observe", 0), "stop", "loud 1", ("observe", 1), "stop", "quiet 2", "stop",
                    "loud 3", ("observe", 3), "stop"]
    seen.clear()
    k.schedule_at(6, lambda: seen.append("quiet 6"), quiet=True)
    k.schedule_at(7, lambda: seen.append("loud 7"), quiet=False)
    k.schedule_at(8, lambda: seen.append("never"), quiet=False)
    assert k.run_until(9, lambda: "loud 7" in seen, lambda: seen.append("observe"))  # stopped
    assert seen == ["observe", "quiet 6", "loud 7", "observe"] and k.now_ms == 7
    with pytest.raises(ZeroDivisionError):  # an error in the hook ends the run, as in stop
        k.schedule_at(10, lambda: None, quiet=False)
        k.run_until(12, None, lambda: 1 // (k.now_ms - 10) if k.now_ms >= 10 else None)


@pytest.mark.parametrize("seed", range(6))
def test_the_rust_change_watch_is_the_plain_one(seed: int) -> None:
    """``_core.ChangeWatch`` against ``reference.ChangeWatch`` on random changes of brokers
    (Rust replicas and Python ones), the controller, and ``forget``."""
    import random
    import types

    from epochlab import _core
    from epochlab.sim.broker import make_replica

    draw = random.Random(seed)

    def replica(b: int) -> Any:
        backend = draw.choice(["rust", "reference"])
        return make_replica(backend, b, (1, 2, 3), Generation.STRICT_MIN_ISR, 2, 10_000)

    brokers = {b: types.SimpleNamespace(alive=True, incarnation=0, replica=replica(b)) for b in (1, 2, 3)}
    ctrl = types.SimpleNamespace(leader=1, leader_epoch=0, partition_epoch=0, isr=(1, 2, 3), elr=(),
                                 elections=[])
    fast, plain = _core.ChangeWatch(), reference.ChangeWatch()
    answers = []
    for step in range(300):
        op = draw.choice(["none"] * 4 + ["append", "hw", "crash", "restart", "ctrl", "isr", "forget",
                                         "same isr", "elect"])
        b = draw.choice([1, 2, 3])
        broker = brokers[b]
        if op == "append":
            broker.replica.log.append_as_leader([step], 0)
        elif op == "hw":
            log = broker.replica.log
            log.update_high_watermark(draw.randint(log.high_watermark, log.log_end_offset))
        elif op == "crash":
            broker.alive = False
        elif op == "restart":
            broker.alive, broker.incarnation, broker.replica = True, broker.incarnation + 1, replica(b)
        elif op == "ctrl":
            ctrl.leader, ctrl.leader_epoch = draw.choice([None, 1, 2, 3]), ctrl.leader_epoch + 1
        elif op == "isr":
            ctrl.isr = tuple(sorted(draw.sample([1, 2, 3], draw.randint(1, 3))))
        elif op == "same isr":
            ctrl.isr = tuple(ctrl.isr)  # an equal tuple, not the same object: no change
        elif op == "elect":
            ctrl.elections.append((step, ctrl.leader_epoch, b, False))
        elif op == "forget":
            fast.forget(b)
            plain.forget(b)
        got = fast.changes(brokers, ctrl)
        assert got == plain.changes(brokers, ctrl), (seed, step, op)
        answers.append(got)
    assert any(a is None for a in answers) and any(a and a[0] for a in answers)
    assert any(a and a[1] for a in answers)


def test_the_change_watch_passes_errors_on_and_keeps_working() -> None:
    import types

    from epochlab import _core

    ctrl = types.SimpleNamespace(leader=1, leader_epoch=0, partition_epoch=0, isr=(1,), elr=(), elections=[])
    good = {1: types.SimpleNamespace(alive=True, incarnation=0, replica=_core.Replica(1, [1], 5, 1, 100))}
    for watch in (_core.ChangeWatch(), reference.ChangeWatch()):
        assert watch.changes(good, ctrl) == ([1], True)
        with pytest.raises(TypeError, match=r"brokers\[2\] has no attribute 'incarnation'"):
            watch.changes({2: types.SimpleNamespace(alive=True)}, ctrl)
        with pytest.raises(TypeError, match="the controller has no attribute 'leader'"):
            watch.changes(good, types.SimpleNamespace())
        assert watch.changes(good, ctrl) is None  # what was kept before the errors still holds
        with pytest.raises(TypeError):
            watch.changes({"one": good[1]}, ctrl)  # broker ids are ints
        with pytest.raises(ZeroDivisionError):  # an error inside a property is passed on as it is
            watch.changes(good, type("C", (), {"leader": property(lambda self: 1 // 0)})())


@pytest.mark.parametrize("make", ["rust", "reference"])
def test_a_watcher_passes_on_what_moved_and_only_then(make: str) -> None:
    """``ChangeWatch.watching``: the kernel's observe hook, one call per event; ``then`` runs
    only when something moved, with what ``changes`` would have said; its errors pass."""
    import gc
    import types
    import weakref

    from epochlab import _core

    watch = _core.ChangeWatch() if make == "rust" else reference.ChangeWatch()
    ctrl = types.SimpleNamespace(leader=1, leader_epoch=0, partition_epoch=0, isr=(1,), elr=(), elections=[])
    brokers = {b: types.SimpleNamespace(alive=True, incarnation=0, replica=_core.Replica(b, [1, 2], 5, 1, 100))
               for b in (1, 2)}
    seen: list[tuple[list[int], bool]] = []
    hook = watch.watching(brokers, ctrl, lambda changed, moved: seen.append((changed, moved)))
    hook()
    hook()
    assert seen == [([1, 2], True)]
    brokers[2].alive = False
    ctrl.isr = (1, 2)
    hook()
    assert seen[-1] == ([2], True)
    brokers[1].replica.log.append_as_leader([5], 0)
    hook()
    assert seen[-1] == ([1], False) and len(seen) == 3
    watch.forget(2)
    hook()
    assert seen[-1] == ([2], False)

    def fail(changed: list[int], moved: bool) -> None:
        raise ZeroDivisionError
    failing = watch.watching(brokers, ctrl, fail)
    failing()  # nothing moved: ``then`` is not called
    ctrl.leader = 2
    with pytest.raises(ZeroDivisionError):
        failing()
    with pytest.raises(TypeError, match="then must be callable"):
        watch.watching(brokers, ctrl, 3)

    class Owner:  # a cycle through the watcher (owner -> watcher -> bound method -> owner)
        def then(self, changed: list[int], moved: bool) -> None:
            pass
    owner = Owner()
    owner.hook = watch.watching(brokers, ctrl, owner.then)  # type: ignore[attr-defined]
    gone = weakref.ref(owner)
    del owner
    gc.collect()
    assert gone() is None


def test_the_state_scan_leaves_python_replicas_to_python_and_names_mistakes() -> None:
    """``core.StateScan`` answers only for Rust replicas (``False``: the Python statement
    runs); an object without the attributes it reads is a ``TypeError`` naming the method."""
    import types

    from epochlab import _core

    scan = _core.StateScan(True, True, 2)
    c = Cluster(ClusterConfig(), "strict-min-isr", seed=1, backend="reference")
    assert not scan.replica(1, c.brokers[1], {})
    assert not scan.log_matching(c.brokers, [1])
    with pytest.raises(TypeError, match="StateScan.leaders"):
        scan.leaders(object(), [1], True)
    with pytest.raises(TypeError, match="StateScan.strong_isr"):
        scan.strong_isr(types.SimpleNamespace(cluster=object()), [], True)
    with pytest.raises(TypeError, match="StateScan.replica"):
        scan.replica(1, types.SimpleNamespace(), {})
    with pytest.raises(TypeError, match="StateScan.check"):
        scan.check(object(), [1], False)
    from epochlab.checks.state import StateChecker

    python_checker = StateChecker(c)
    assert scan.check(python_checker, [1], True) == (0, None)  # Python replicas: all in Python
    rust = Cluster(ClusterConfig(), "strict-min-isr", seed=1, backend="rust")
    assert scan.replica(1, rust.brokers[1], {}) and scan.log_matching(rust.brokers, [1])
    checker = StateChecker(rust)
    with pytest.raises(TypeError, match="StateScan.check"):  # a broker id that is none
        scan.check(checker, [9], False)
    assert scan.check(checker, [1, 2, 3], True) == (3, True)  # the controller moved: the ISR part in Python
    assert scan.check(checker, [1], False) is None            # every part passes in Rust
    with pytest.raises(TypeError):  # broker ids are ints
        scan.log_matching({"one": rust.brokers[1]}, [])


def test_the_state_scan_compares_again_what_a_truncation_rewrote() -> None:
    """The scan keeps, per pair of logs, the prefix it found equal and compares only what was
    appended since, while both logs' stores keep their stamps (``BatchStore::stamp``): a
    truncation and different records written at the same offsets are seen, and so are
    differing appends after a verified prefix."""
    from epochlab import _core

    scan = _core.StateScan(True, True, 2)
    c = Cluster(ClusterConfig(), "strict-min-isr", seed=1, backend="rust")
    a, b = c.brokers[1].replica.log, c.brokers[2].replica.log
    for log in (a, b):
        log.append_as_leader([1, 2, 3], 0)
        log.update_high_watermark(3)
    assert scan.log_matching(c.brokers, [1])          # equal below 3: verified
    b.truncate_to(1)
    b.append_as_leader([9, 9], 0)                     # offsets 1 and 2 rewritten
    b.update_high_watermark(3)
    assert not scan.log_matching(c.brokers, [2])
    c2 = Cluster(ClusterConfig(), "strict-min-isr", seed=1, backend="rust")
    a, b = c2.brokers[1].replica.log, c2.brokers[2].replica.log
    for log in (a, b):
        log.append_as_leader([1, 2], 0)
        log.update_high_watermark(2)
    assert scan.log_matching(c2.brokers, [1])
    a.append_as_leader([5], 0)
    b.append_as_leader([6], 0)                        # appended after the verified prefix
    for log in (a, b):
        log.update_high_watermark(3)
    assert not scan.log_matching(c2.brokers, [1])


def test_kernel_counts_steps_and_honours_a_step_set_on_the_instance() -> None:
    from epochlab import _core

    for make in (Kernel, _core.Kernel):
        _counts_steps_and_honours_a_step_set_on_the_instance(make(5))


def _counts_steps_and_honours_a_step_set_on_the_instance(k: Any) -> None:
    out: list[str] = []
    k.schedule(2, lambda: out.append("timer"))
    k.schedule_at(1, lambda: out.append("message"), quiet=True)
    k.schedule_at(2, lambda: out.append("message 2"), quiet=False)
    k.schedule(0, lambda: out.append("now")).cancel()
    k.run_until(5)
    assert out == ["message", "timer", "message 2"] and k.steps == 3 and k.now_ms == 5
    watched: list[int] = []
    step = k.step

    def watching() -> bool:
        watched.append(k.now_ms)
        return step()

    k.step = watching  # type: ignore[method-assign]
    k.schedule_at(7, lambda: None, quiet=False)
    k.schedule_at(3, lambda: out.append("the past runs now"))
    k.run_until(10)
    assert watched == [5, 5] and out[-1] == "the past runs now" and k.steps == 5 and k.now_ms == 10


@pytest.mark.parametrize("backend", ["rust", "reference"])
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


NODES: tuple[Any, ...] = (1, 2, 3, "controller", "p", "coordinator")


def _drive(kernel_type: Any, network_type: Any, seed: int, ops: int = 160, backoff: bool = False) -> list[Any]:
    """A random sequence of network operations (drawn from ``seed`` by the test, not by the
    network) on one implementation, held messages released at TCP's next retransmission with
    ``backoff``; returns everything observable, in order."""
    import random

    draw = random.Random(seed)
    kernel = kernel_type(seed)
    net = network_type(kernel, (1, 9), (2, 4))
    if backoff:
        net.set_retransmission_backoff(True)
    seen: list[Any] = []

    def deliver(label: str, src: Any, dst: Any, hops: int) -> Any:
        def run() -> None:
            seen.append(("got", kernel.now_ms, label, kernel.last_quiet))
            if hops and (len(label) + kernel.now_ms) % 3 == 0:  # an answer sent from a delivery
                net.send(dst, src, deliver(label + "'", dst, src, hops - 1), "", None, False)
        return run

    class Node:
        def __init__(self, name: Any) -> None:
            self.name = name

        @property
        def QUIET(self) -> bool:  # noqa: N802 - the attribute the simulator's nodes declare
            return len(str(self.name)) % 2 == 0

        def on_msg(self, msg: Any, src: Any) -> None:
            seen.append(("posted", kernel.now_ms, self.name, msg, src, kernel.last_quiet))

    targets = {n: Node(n) for n in NODES}
    for n in NODES:
        net.set_alive(n, True)
    for i in range(ops):
        op = draw.choice(["send"] * 6 + ["run"] * 3 + ["alive", "partition", "heal", "link", "slow",
                                                        "discard", "peers", "close"])
        a, b = draw.sample(NODES, 2)
        if op == "send":
            kind = draw.choice(["", "", "fetch"])
            coalesce = draw.choice([None, None, "metadata"])
            quiet = draw.random() < 0.3
            if draw.random() < 0.4:  # a call posted as (nodes, dst, method, msg, src)
                # quiet from the node's QUIET attribute, or given; a name nobody registered
                # gets nothing and takes no draw
                dst = draw.choice([b] * 5 + ["nobody"])
                seen.append(("post", net.post(a, dst, targets, "on_msg", (f"m{i}", i), kind, coalesce,
                                              draw.choice([quiet, None]))))
                if draw.random() < 0.2:
                    targets[b] = Node(f"{b} again")  # looked up on arrival
            else:
                net.send(a, b, deliver(f"m{i}", a, b, 2), kind, coalesce, quiet)
        elif op == "run":
            kernel.run_until(kernel.now_ms + draw.randint(0, 400))
        elif op == "alive":
            net.set_alive(a, draw.random() < 0.6)
        elif op == "partition":
            nodes = list(NODES)
            draw.shuffle(nodes)
            cut = draw.randint(1, len(nodes) - 1)
            net.partition([nodes[:cut], nodes[cut:cut + draw.randint(0, 2)]])
        elif op == "heal":
            net.heal()
        elif op == "link":
            lo = draw.randint(0, 20)
            delay = draw.choice([None, (lo, lo + draw.randint(0, 50))])
            seen.append(("link", net.set_link(a, b, delay, draw.choice([0.0, 0.0, 0.3, 1.0]),
                                              draw.choice([0.0, 0.4]), draw.random() < 0.3)))
        elif op == "slow":
            net.slow_node(a, draw.choice([0, 50, 300]))
        elif op == "discard":
            seen.append(("discard", net.discard_held(a, b)))
        elif op == "close":  # a client gave up on its connection: later sends go on a new one
            net.close_connection(a, b)
        elif op == "peers":
            seen.append(("peers", a, list(net.peers(a)), net.is_alive(a), net.connected(a, b),
                         net.usable(a, b)))
        seen.append((net.sent, net.delivered, net.dropped, net.held, kernel.now_ms, kernel.steps))
    net.heal()
    for n in NODES:
        net.set_alive(n, True)
    kernel.run_until(kernel.now_ms + 60_000)
    seen.append(("end", net.sent, net.delivered, net.dropped, net.held, kernel.now_ms, kernel.steps))
    return seen


@pytest.mark.parametrize("seed", range(40))
def test_the_rust_network_is_the_python_network(seed: int) -> None:
    from epochlab import _core

    rust = _drive(_core.Kernel, _core.Network, seed)
    python = _drive(Kernel, Network, seed)
    assert rust == python
    assert sum(1 for x in rust if x[0] == "got") > 5  # the sequence delivered something
    assert sum(1 for x in rust if x[0] == "posted") > 1


@pytest.mark.parametrize("seed", range(20))
def test_the_rust_network_is_the_python_network_with_retransmission_backoff(seed: int) -> None:
    """The same with held messages released at TCP's next retransmission (every link but the
    controller's) and closed connections starting new ones: both implementations alike, draw
    for draw."""
    from epochlab import _core

    rust = _drive(_core.Kernel, _core.Network, seed, backoff=True)
    python = _drive(Kernel, Network, seed, backoff=True)
    assert rust == python
    assert sum(1 for x in rust if x[0] == "got") > 5  # the sequence delivered something
    assert sum(1 for x in rust if x[0] == "posted") > 1


def test_the_rust_networks_stream_is_random_dot_random() -> None:
    import random

    from epochlab import _core

    draws = [("below", n) for n in (1, 2, 3, 7, 100, 2**31, 2**32, 2**32 + 5, 2**53, 2**63, 2**64 - 1)]
    draws = (draws + [("random", 0)] * 3) * 70  # past 624 words: the twister's refill
    rng = random.Random("3:network")
    got = _core._twister_draws(rng, draws)
    want = [float(rng._randbelow(n)) if kind == "below" else rng.random() for kind, n in draws]
    assert got == want
    with pytest.raises(ValueError, match="Mersenne"):
        _core._twister_draws(type("Liar", (), {"getstate": lambda self: (3, (1, 2), None)})(), [])


def test_the_rust_kernel_keeps_the_python_kernels_contract() -> None:
    from epochlab import _core
    from epochlab.sim import network as network_module

    for name in ("RTO_MIN_MS", "RTO_MAX_MS", "RECONNECT_MS"):  # one TCP model in both networks
        assert getattr(_core, name) == getattr(network_module, name), name

    for make in (Kernel, _core.Kernel):
        k = make(9)
        out: list[Any] = []
        t = k.schedule(5, lambda: out.append(("b", k.last_quiet)), quiet=True)
        k.schedule(5, lambda: out.append(("c", k.last_quiet)))
        k.schedule(1, lambda: (out.append(("a", k.last_quiet)),
                               k.schedule(0, lambda: out.append(("child", k.last_quiet)))))
        k.schedule(-3, lambda: out.append(("negative delay runs now", k.now_ms)))
        k.schedule(2.9, lambda: out.append(("float delay", k.now_ms)))
        k.schedule_at(3, lambda: None).cancel()
        assert t.time_ms == 5 and not t.cancelled and t.quiet
        assert k.next_time() == 0
        assert k.run_until(10) is False and k.now_ms == 10
        assert out == [("negative delay runs now", 0), ("a", False), ("child", False),
                       ("float delay", 2), ("b", True), ("c", False)], make
        assert k.steps == 6 and k.rng("x") is k.rng("x")
        assert k.rng("x").random() == make(9).rng("x").random()
        k.schedule(1, lambda: None)
        assert k.run_until(100, lambda: True) is True and k.now_ms == 10  # stop holds at once
        assert k.run_until(100, lambda: k.now_ms >= 11) is True and k.now_ms == 11

        def boom() -> None:
            raise RuntimeError("in a callback")
        k.schedule(1, boom, quiet=True)
        with pytest.raises(RuntimeError, match="in a callback"):
            k.run_until(200)
        k.schedule(1, lambda: out.append(("after", k.last_quiet)))
        k.run_until(300)
        assert out[-1] == ("after", False)  # the failed quiet event did not leak its quietness


def test_timers_belong_to_the_node_whose_event_scheduled_them() -> None:
    """The Rust kernel tells a ``Watcher`` whose event ran: a timer scheduled inside
    ``call_as(node, ...)`` or inside an event of ``node`` (the timer's callback, or a message
    delivered to it) is ``node``'s, so only its key is compared; a timer scheduled outside
    any event is nobody's (every key). ``call_as`` returns what the callback returns and
    gives the ownership back also when it raises; the Python kernel just calls."""
    import types

    from epochlab import _core

    for make in (Kernel, _core.Kernel):
        k = make(1)
        assert k.call_as("n", lambda a, b: a + b, 2, 3) == 5
        with pytest.raises(ZeroDivisionError):
            k.call_as("n", lambda: 1 // 0)

    k = _core.Kernel(1)
    brokers = {1: types.SimpleNamespace(alive=True, incarnation=1, replica=types.SimpleNamespace(state_key=lambda: 0)),
               2: types.SimpleNamespace(alive=True, incarnation=1, replica=types.SimpleNamespace(state_key=lambda: 0))}
    ctrl = types.SimpleNamespace(leader=1, leader_epoch=1, partition_epoch=1, isr=(1, 2), elr=(), elections=[])
    seen: list[tuple[list[int], bool]] = []
    watcher = _core.ChangeWatch().watching(brokers, ctrl, lambda changed, moved: seen.append((list(changed), moved)))

    def bump(b: int) -> None:  # broker b's own work, moving its key and, behind its back, 2's
        brokers[b].incarnation += 1
        brokers[3 - b].incarnation += 1

    def tick() -> None:  # broker 1's periodic task: bumps, then schedules its next turn
        bump(1)
        k.schedule(10, lambda: bump(1))
    k.call_as(brokers[1], k.schedule, 10, tick)  # owned by broker 1
    k.schedule(50, lambda: bump(2))              # scheduled by nobody's event
    k.run_until(0, None, watcher)
    assert seen == [([1, 2], True)]              # the first look sees everything
    k.run_until(100, None, watcher)
    # broker 1's two events compare broker 1 only (the move of broker 2 behind their back is
    # not looked for: components never do that); the unowned event compares every key
    assert seen[1:] == [([1], False), ([1], False), ([1, 2], False)], seen

@pytest.mark.parametrize("backend", ["rust", "reference"])
def test_a_finished_run_is_freed(backend: str) -> None:
    """A run's callbacks close over the cluster that owns the kernel: the Rust kernel shows
    them to the garbage collector (``__traverse__`` / ``__clear__``), or every run would leak
    (1.6 GB per Spark worker over a 20,000-run campaign before 8282551)."""
    import gc
    import weakref

    refs: list[Any] = []
    init = cluster_module.Cluster.__init__

    def noting(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        refs.append(weakref.ref(self))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cluster_module.Cluster, "__init__", noting)
        for seed in (46, 47, 48):
            execute(generate_schedule(seed, Generation.STRICT_MIN_ISR, FuzzProfile(actions=30)),
                    backend=backend)
    gc.collect()
    assert len(refs) == 3 and [r() for r in refs] == [None, None, None]
    from epochlab import _core

    kernel = _core.Kernel(1)
    net = _core.Network(kernel, (1, 2), (1, 2))
    net.set_alive(1, True)
    net.set_alive(2, True)
    box = type("Box", (), {})()
    box.kernel = kernel
    kernel.schedule(5, lambda: box)              # kernel -> callback -> box -> kernel
    net.send(1, 2, lambda: box)                  # and through a message in flight
    gone = weakref.ref(box)
    del kernel, net, box
    gc.collect()
    assert gone() is None


def test_python_code_run_from_inside_the_network_cannot_deadlock_it() -> None:
    """A node whose ``str()`` reads the kernel and the network (which lock their state), and a
    finaliser that schedules: the Rust network resolves names and drops objects with no lock
    held (in a subprocess, so a regression fails by its timeout instead of hanging the run;
    the API fuzzer hung on a Kernel passed as a node before c3c6154)."""
    import subprocess
    import sys

    code = """
from epochlab import _core
k = _core.Kernel(1)
net = _core.Network(k, (1, 2), (1, 2))
class Sneaky:
    def __str__(self):
        return f"sneaky {k!r} {net!r} {k.now_ms} {net.sent}"
class Finalised:
    def __del__(self):
        k.schedule(1, lambda: None)
for node in (1, 2, k, net):
    net.set_alive(node, True)
net.set_alive(Sneaky(), True)
net.send(Sneaky(), k, lambda: None)
net.send(1, 2, (lambda f: lambda: f)(Finalised()))
net.set_alive(2, False)                  # the held or in-flight message and its finaliser die
net.partition([[1], [k]]); net.send(1, k, lambda: None); net.set_alive(k, False)
k.run_until(100)
print("ok", net.sent, net.dropped)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok 3 ")


def test_the_collector_may_run_at_any_allocation() -> None:
    """The Rust kernel and network under a collector that runs at every allocation (in a
    subprocess: a crash fails by its exit code). Before 75a0e2c, with an instance ``__dict__`` the
    collector traversed a half-made Kernel and Python crashed; ``kernel.step = f`` is kept by
    ``__setattr__`` now."""
    import subprocess
    import sys

    code = """
import gc
from epochlab import _core
from epochlab.fuzz import FuzzProfile, execute, generate_schedule
gc.set_threshold(1, 1, 1)
for i in range(300):
    k = _core.Kernel(i)
    net = _core.Network(k, (1, 5), (1, 2))
    for node in (1, 2, "controller", "p"):
        net.set_alive(node, True)
    net.send("p", 1, lambda: None, "fetch", "metadata", False)
    net.partition([[1], [2, "p"]])
    net.send(2, 1, lambda: None)
    net.post(1, 2, {2: k}, "now_ms", k, "", None, True)
    w = _core.ChangeWatch()
    w.changes({}, type("C", (), {"leader": 1, "leader_epoch": 0, "partition_epoch": 0,
                                 "isr": (1,), "elr": (), "elections": [w]})())
    k.schedule(7, lambda: k)
    k.step = k.step
    k.run_until(10)
result = execute(generate_schedule(3, "strict-min-isr", FuzzProfile(actions=15)))
print("ok", len(result.history_jsonl) > 0)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok True"


def test_messages_built_in_rust_are_the_dataclasses_python_builds() -> None:
    """The Rust builder writes the instance dict in declaration order instead of calling the
    frozen ``__init__``: the objects must be the same ones, field for field, in repr, in
    equality and hash, and in their dict's order."""
    from epochlab import _core
    from epochlab.sim.messages import ConsumerFetchRequest, ConsumerFetchResponse, FetchRequest, \
        FetchResponse, LeaderAndIsr, ProduceRequest, ProduceResponse

    r = _core.Replica(1, [1, 2], 5, 1, 10_000)
    r.apply_leader_and_isr(LeaderAndIsr(1, 1, (1, 2), 1, (1, 2), ((1, 0, False), (2, 0, False)), 1), 0)
    produced = r.handle_produce(ProduceRequest("p", 7, "1", (10, 11), 1000), 5)
    assert produced == ProduceResponse(7, None, 0, 1, False)
    fetched, _ = r.handle_fetch(FetchRequest(2, 0, 0, 1, None, 0), 6)
    read = r.handle_consumer_fetch(ConsumerFetchRequest("c", 9, 0, 1, 10))
    for built in (produced, fetched, read):
        cls = type(built)
        fields = [f.name for f in dataclasses.fields(built)]
        assert list(built.__dict__) == fields                      # declaration order
        again = cls(**{name: getattr(built, name) for name in fields})  # through __init__
        assert again == built and hash(again) == hash(built) and repr(again) == repr(built)
        assert again.__dict__ == built.__dict__
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(built, fields[0], None)
    assert isinstance(fetched, FetchResponse) and isinstance(read, ConsumerFetchResponse)
    assert [list(b.records) for b in fetched.batches] == [[10, 11]] and read.preferred_read_replica is None


def test_the_rust_builder_refuses_a_message_class_whose_fields_changed() -> None:
    """A field added to a message dataclass (in a subprocess: the classes are looked up once)
    is an error naming both field lists, not a message with the field missing."""
    import subprocess
    import sys

    code = """
import dataclasses
import epochlab.sim.messages as m
from epochlab import _core

fields = [(f.name, f.type, f) for f in dataclasses.fields(m.ProduceResponse)]
m.ProduceResponse = dataclasses.make_dataclass(   # the same class and one field more
    "ProduceResponse", fields + [("throttle_time_ms", int, dataclasses.field(default=0))], frozen=True)
r = _core.Replica(1, [1], 5, 1, 10_000)
r.apply_leader_and_isr(m.LeaderAndIsr(1, 1, (1,), 1, (1,), ((1, 0, False),), 1), 0)
try:
    r.handle_produce(m.ProduceRequest("p", 7, "1", (10,), 1000), 5)
except RuntimeError as e:
    print(e)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ProduceResponse declares the fields" in out.stdout and "throttle_time_ms" in out.stdout


@pytest.mark.parametrize("kind", ["python", "rust"])
def test_a_post_to_a_name_nobody_registered_sends_nothing(kind: str) -> None:
    from epochlab import _core

    k = Kernel(2) if kind == "python" else _core.Kernel(2)
    net = Network(k, (1, 5), (1, 2)) if kind == "python" else _core.Network(k, (1, 5), (1, 2))
    got: list[Any] = []

    class Loud:
        def on_msg(self, msg: Any, src: Any) -> None:
            got.append((msg, src, k.last_quiet))

    class Quiet(Loud):
        QUIET = True

    nodes: dict[Any, Any] = {1: Loud(), 2: Quiet(), "reserved": None}
    for n in (1, 2, "p", "reserved"):
        net.set_alive(n, True)
    assert net.post("p", "nobody", nodes, "on_msg", "lost") is False
    assert net.sent == 0 and k.next_time() is None        # nothing sent, nothing drawn
    assert net.post("p", 1, nodes, "on_msg", "a") and net.post("p", 2, nodes, "on_msg", "b")
    assert net.post("p", 2, nodes, "on_msg", "c", quiet=False)  # given: the class is not asked
    k.run_until(100)
    assert sorted(got) == [("a", "p", False), ("b", "p", True), ("c", "p", False)]
    assert net.post("p", "reserved", nodes, "on_msg", "d")  # known, not yet a node: sent
    with pytest.raises(AttributeError):
        k.run_until(200)                                 # ... and it fails where it arrives


class _LoggedChecker(state_module.StateChecker):
    """A state checker that notes every distinct failure it sees (invariant and message: a
    message says everything the failure depends on) with the time and step it first saw it,
    not only each invariant's first."""

    def __init__(self, cluster: Any, step: Any) -> None:
        super().__init__(cluster, step)
        self.seen: dict[tuple[str, str], tuple[int, Any]] = {}

    def report(self, invariant: str, message: str, details: dict[str, Any],
               loss_like: bool = True, reason: str | None = None) -> None:
        self.seen.setdefault((invariant, message), (self.cluster.now_ms, self.step()))
        super().report(invariant, message, details, loss_like, reason)


class _TwinChecker(_LoggedChecker):
    """The incremental checker, with a plain one (every check at every change) beside it on
    the same cluster, told the same things at the same moments."""

    def __init__(self, cluster: Any, step: Any) -> None:
        super().__init__(cluster, step)
        # the skipping itself is checked on both backends (the reference backend's checker is
        # plain by default: with Python replicas this exercises the Python skipping alone)
        self.incremental = True
        self.plain = _LoggedChecker(cluster, step)
        self.plain.incremental = False

    def observe(self) -> None:
        super().observe()
        self.plain.observe()

    def hook(self) -> Any:
        return self.observe

    def note_lossy_crash(self, broker: int) -> None:
        super().note_lossy_crash(broker)
        self.plain.note_lossy_crash(broker)


def _bend(run: Any, rng: Any) -> None:
    """Bend a broker's state the way a model bug would (cut its log, write a batch it never
    fetched, rewind its HW), so that runs violate state invariants for the checkers to see."""
    brokers = run.cluster.brokers
    broker = brokers[rng.choice(sorted(brokers))]
    log = broker.replica.log
    what = rng.randrange(3)
    if what == 0 and log.log_end_offset > log.log_start_offset:
        log.truncate_to(rng.randrange(log.log_start_offset, log.log_end_offset))
    elif what == 1:
        log.append_as_leader([10_000 + rng.randrange(100)], (broker.replica.leader_epoch or 0))
    elif log.high_watermark > log.log_start_offset:
        log.update_high_watermark(rng.randrange(log.log_start_offset, log.high_watermark))


@pytest.mark.parametrize("backend", ["rust", "reference"])
def test_the_incremental_checks_find_what_checking_everything_finds(backend: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The state checker skips a check whose inputs did not move since its last evaluation
    (``StateChecker.incremental``); the plain checker evaluates every check at every change.
    Both watch the same runs of every generation, some bent at random moments so that the
    state invariants fail: the same violations, at the same step and time, with the same
    messages, details and verdicts; and every distinct failure (not only each invariant's
    first) seen first at the same time and step."""
    import random

    from epochlab.fuzz import executor as executor_module

    twins: list[_TwinChecker] = []

    def twin(cluster: Any, step: Any) -> _TwinChecker:
        twins.append(_TwinChecker(cluster, step))
        return twins[-1]
    monkeypatch.setattr(executor_module, "StateChecker", twin)
    apply = executor_module.Run.apply
    bends = random.Random(0)
    bend = [False]

    def bent_apply(self: Any, action: Any) -> None:
        apply(self, action)
        if bend[0] and bends.random() < 0.2:
            _bend(self, bends)
    monkeypatch.setattr(executor_module.Run, "apply", bent_apply)
    runs = found = 0
    kinds: set[str] = set()
    for gen in Generation:
        for seed in range(8):
            bend[0] = seed % 2 == 1
            execute(generate_schedule(seed, gen, FuzzProfile(actions=40, transactions=seed == 3)), backend)
            checker = twins[-1]
            got = [dataclasses.asdict(v) for v in checker.violations]
            want = [dataclasses.asdict(v) for v in checker.plain.violations]
            assert got == want, (gen.name, seed)
            assert checker.seen == checker.plain.seen, (gen.name, seed)
            assert (checker.true_hw, checker.true_hw_history) == (checker.plain.true_hw, checker.plain.true_hw_history)
            runs += 1
            found += bool(got)
            kinds.update(invariant for invariant, _ in checker.seen)
    # the comparison compared something: runs with violations of several invariants
    assert found >= runs // 4 and len(kinds) >= 5, (found, runs, kinds)


def _frozen_classes() -> list[type]:
    import epochlab.sim.history as h
    import epochlab.sim.messages as m

    classes = [getattr(m, n) for n in m.__all__ if isinstance(getattr(m, n), type)]
    return classes + [h.HistoryOp, h.Event]


@pytest.mark.parametrize("cls", _frozen_classes(), ids=lambda c: c.__name__)
def test_frozen_records_are_built_as_their_dataclass_builds_them(cls: type) -> None:
    """``@frozen``'s direct ``__init__`` against the ``__init__`` ``dataclass(frozen=True)``
    generates for the same fields: the same dict (values, order), equality, hash and repr,
    by position, by keyword and with defaults left out; and the record stays frozen."""
    import pickle

    fields = dataclasses.fields(cls)
    plain = dataclasses.make_dataclass(
        cls.__name__, [(f.name, f.type, dataclasses.field(default=f.default)) for f in fields], frozen=True)
    values = [(i, f"v{i}") for i in range(len(fields))]  # distinct, hashable
    required = sum(f.default is dataclasses.MISSING for f in fields)
    for n in range(required, len(fields) + 1):
        args = values[:n]
        a, b = cls(*args), plain(*args)
        assert list(a.__dict__.items()) == list(b.__dict__.items())
        assert repr(a) == repr(b) and hash(a) == hash(b) and a == cls(*args)
        kw = {f.name: v for f, v in zip(fields, args)}
        assert cls(**kw) == a and list(cls(**kw).__dict__) == [f.name for f in fields]
        assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(cls(*values), fields[0].name, 0)
    with pytest.raises(TypeError):
        cls(*values, "one too many")
    if required:
        with pytest.raises(TypeError):
            cls()


def test_frozen_refuses_what_it_does_not_build() -> None:
    from epochlab.sim.frozen import frozen

    class Later:
        x: int

        def __post_init__(self) -> None:
            pass
    with pytest.raises(TypeError, match="__post_init__"):
        frozen(Later)

    class Factory:
        x: list[int] = dataclasses.field(default_factory=list)
    with pytest.raises(TypeError, match=r"Factory\.x"):
        frozen(Factory)
