"""No caller mistake reaches Python as a panic.

Hypothesis calls every public callable of ``epochlab._core`` (constructors, methods, static
methods, module functions, property reads, ``==``/``hash``/``len``) with random arguments: ints
far outside every domain (beyond 2^64 both ways), ``None``, floats, strings, bytes, lists of
mixed junk and objects of the wrong class (including the reference twin's). Every failure must
be an :class:`~epochlab.errors.EpochlabError`, a ``TypeError`` or an ``OverflowError``. A
``pyo3_runtime.PanicException`` derives from ``BaseException`` so ``except Exception`` would
miss it; the harness catches ``BaseException`` and fails on anything else, ``SystemError``
included (a C-API misuse).

Checkpoint parsing gets its own inputs: random and almost-valid text for
``from_checkpoint_text`` and random bytes on disk for ``read_checkpoint``, which may only raise
``CorruptCheckpointError`` or ``StorageError``.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import epochlab._core as core
import epochlab.reference as reference
from epochlab.errors import CorruptCheckpointError, EpochlabError, StorageError

FUZZ_SETTINGS = settings(max_examples=300, deadline=None,
                         suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                HealthCheck.too_slow])

ALLOWED = (EpochlabError, TypeError, OverflowError)


def call_safely(label: str, call: Callable[[], Any],
                allowed: tuple[type[BaseException], ...] = ALLOWED) -> Any:
    """Run ``call``; return its result, or ``None`` after an allowed exception."""
    try:
        return call()
    except allowed:
        return None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - a panic is a BaseException
        kind = "a panic" if type(exc).__name__ == "PanicException" else "an unexpected exception"
        pytest.fail(f"{label} raised {kind}: {type(exc).__module__}.{type(exc).__name__}: {exc}")


# Boundaries of every value domain (docs/core-semantics.md), one beyond, and far beyond.
EDGES = [0, 1, 2**15 - 1, 2**15, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, 2**63,
         2**64 - 1, 2**64, 2**128, -1, -(2**31), -(2**63), -(2**63) - 1, -(2**64), -(2**200)]

scalars = st.one_of(
    st.integers(0, 20),
    st.sampled_from(EDGES),
    st.integers(-(2**70), 2**70),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.binary(max_size=6),
    st.sampled_from(["fenced_leader_epoch", "unknown_leader_epoch", "0", ""]),
)


def _objects() -> st.SearchStrategy[Any]:
    """Objects of the API's own classes, from both modules, used in the wrong places too."""
    def batch(m: Any, base: int) -> Any:
        return m.RecordBatch(base, 1, [1, 2])

    return st.sampled_from([
        lambda: core.RecordBatch(0, 0, [1]), lambda: batch(core, 3),
        lambda: core.RecordBatch(0, 1, [1], producer_id=1, producer_epoch=0, base_sequence=0),
        lambda: batch(reference, 0), lambda: core.ReplicaLog(), lambda: reference.ReplicaLog(),
        lambda: core.LeaderEpochCache([(0, 0), (2, 5)]), lambda: reference.LeaderEpochCache(),
        lambda: core.ProducerStateManager(), lambda: core.TruncationOutcome.fenced(),
        lambda: object(), lambda: core, lambda: [core.RecordBatch(0, 0, [1])],
    ]).map(lambda make: make())


junk = st.recursive(
    st.one_of(scalars, _objects()),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner),
                            st.dictionaries(st.text(max_size=2), inner, max_size=2)),
    max_leaves=6,
)

# Keyword parameters per callable (by bare name); "bogus" is one nobody knows.
KEYWORDS = {
    "RecordBatch": ["producer_id", "producer_epoch", "base_sequence", "is_transactional",
                    "is_control"],
    "append_as_leader": ["producer_id", "producer_epoch", "base_sequence", "is_transactional"],
    "ReplicaLog": ["kip101_epoch_cache"], "read": ["max_batches", "max_offset"],
    "kip320_truncation": ["request_epoch", "current_epoch", "error"], "flush": ["up_to"],
    "Replayer": ["checks", "collect", "min_insync_replicas", "kip101_epoch_cache", "max_violations"],
    "replay_batch": ["start", "stop", "pause_kinds"],
    "Timer": ["quiet"], "schedule": ["quiet"], "schedule_at": ["quiet"], "run_until": ["stop", "observe"],
    "set_link": ["delay_ms", "drop", "duplicate", "reorder"], "send": ["kind", "coalesce", "quiet"],
    "post": ["kind", "coalesce", "quiet"],
}

# name -> number of positional parameters; keyword parameters come from KEYWORDS at random.
MODULE_CALLABLES = {
    "RecordBatch": 3, "ReplicaLog": 1, "LeaderEpochCache": 1, "ProducerStateManager": 0,
    "truncate_to_high_watermark": 2, "kip101_truncation": 3, "kip279_truncation": 4,
    "kip320_truncation": 4, "diverging_epoch_truncation": 4, "leader_fetch_check": 5,
    "check_current_leader_epoch": 2, "divergence_point": 2, "first_mismatch": 2, "Replica": 5,
    "Replayer": 0, "check_trace_batch": 1,
    "parse_segment": 2, "parse_leader_epoch_checkpoint": 2, "parse_offset_checkpoint": 2,
    "parse_partition_metadata": 2, "parse_producer_snapshot": 2, "parse_offset_index": 2,
    "parse_time_index": 2, "parse_txn_index": 2,
    "Kernel": 1, "Network": 3, "Timer": 1, "RTO_MIN_MS": 0, "RTO_MAX_MS": 0, "RECONNECT_MS": 0,
    "ChangeWatch": 0, "StateScan": 3, "FetchPlane": 7, "ProtocolCoverage": 1,
}
#: Constants of the module: read, not called.
MODULE_CONSTANTS = {"RTO_MIN_MS", "RTO_MAX_MS", "RECONNECT_MS"}
STATIC_METHODS = {
    ("TruncationOutcome", "truncate"): 1, ("TruncationOutcome", "truncate_and_retry"): 1,
    ("TruncationOutcome", "fenced"): 0, ("TruncationOutcome", "unknown_leader_epoch"): 0,
    ("TruncationOutcome", "discard"): 0, ("FetchCheck", "read"): 0,
    ("FetchCheck", "diverging"): 2, ("FetchCheck", "offset_out_of_range"): 0,
    ("LeaderEpochCache", "from_checkpoint_text"): 2,
}
METHODS = {
    "ReplicaLog": {
        "append_as_leader": 2, "append_many_as_leader": 3, "append_as_follower": 1,
        "append_batches_as_follower": 1, "read": 1, "batches": 0, "batch_containing": 1,
        "value_at": 1, "set_time": 1, "offset_for_timestamp": 1, "holes": 0, "truncate_to": 1, "truncate_fully_and_start_at": 1,
        "flush": 1, "drop_unflushed": 0, "update_high_watermark": 1,
        "maybe_increment_high_watermark": 1, "assign_epoch": 2, "end_offset_for_epoch": 1,
        "epoch_for_offset": 1, "epoch_cache": 0, "epoch_entries": 0, "producer_state": 0,
        "rebuild_producer_state": 0, "copy": 0, "append_end_txn_marker": 5,
        "aborted_transactions": 2, "ongoing_transactions": 0, "unreplicated_transactions": 0,
        "enable_journal": 0, "take_journal": 0,
        "take_producer_snapshot": 0, "producer_snapshot_offsets": 0, "reload": 0,
        "state_key": 0, "epoch_boundaries": 0,
    },
    "Replayer": {
        "replay_batch": 2, "violations": 0, "replicas": 0, "log": 2, "true_high_watermark": 1,
        "log_heap_bytes": 0,
    },
    "LeaderEpochCache": {
        "assign": 2, "assign_kip101": 2, "end_offset_for": 2, "end_offset_for_kip279": 2,
        "end_offset_for_kip101": 2, "truncate_from_end": 1, "truncate_from_start": 1,
        "epoch_for_offset": 1, "entries": 0, "clear": 0, "copy": 0, "to_checkpoint_text": 0,
    },
    "ProducerStateManager": {
        "check_leader_append": 1, "update": 1, "entry": 1, "coordinator_epoch": 1,
        "producer_ids": 0, "snapshot": 0,
        "clear": 0, "copy": 0,
    },
    "RecordBatch": {"with_base_offset": 1},
    # The event loop and the network (callbacks of junk fail as TypeError when run).
    "Kernel": {"rng": 1, "schedule": 2, "schedule_at": 2, "next_time": 0, "step": 0,
               "run_until": 1, "call_as": 2},
    "Timer": {"cancel": 0},
    "Network": {"set_alive": 2, "peers": 1, "is_alive": 1, "partition": 1, "heal": 0, "set_link": 2,
                "set_retransmission_backoff": 1, "slow_node": 2, "connected": 2, "usable": 2, "send": 3,
                "post": 5, "discard_held": 2, "close_connection": 2},
    "ChangeWatch": {"changes": 2, "forget": 1, "watching": 3}, "Watcher": {},
    "StateScan": {"replica": 3, "log_matching": 2, "leaders": 3, "strong_isr": 3, "check": 3},
    "ProtocolCoverage": {"observe": 7, "features": 0, "first_steps": 0, "first_times": 0, "first_brokers": 0},
    "FetchPlane": {"attach": 2, "start_fetcher": 1, "answer_parked_fetches": 1,
                   "clear_parked_fetches": 1, "stop_fetcher": 1, "abandon_fetcher": 1, "fetch_timeout": 2,
                   "answers_in_flight": 2, "fetch_state": 1, "try_complete_delayed": 1,
                   "answer_parked_produces": 2, "append_produce": 2, "answer_produce": 3,
                   "forget_produces": 1, "reset_produce_connections": 1, "parked_produces": 1,
                   "check_parked_reads": 1, "drop_parked_reads": 1, "parked_reads": 1,
                   "park_marker": 5, "answer_parked_markers": 2, "clear_markers": 1, "parked_markers": 1},
    "FetchPlaneHandler": {}, "FetchPlaneTimer": {},
    "LogAppendInfo": {}, "TruncationOutcome": {}, "FetchCheck": {},
    # Messages are the simulator's dataclasses; junk in their place must still fail cleanly.
    "Replica": {
        "take_events": 0, "apply_leader_and_isr": 2, "handle_produce": 2, "handle_write_txn_markers": 2,
        "produce_completion": 1, "maybe_increment_high_watermark": 1, "maybe_shrink_isr": 1,
        "pending_alter_partition": 0, "handle_alter_partition_response": 2,
        "checkpoint_high_watermark": 0, "flush": 0, "crash": 1, "clean_shutdown": 0,
        "next_request": 0, "handle_fetch": 2, "handle_offsets_for_leader_epoch": 1,
        "handle_consumer_fetch": 1, "handle_fetch_response": 1, "preferred_read_replica": 2,
        "handle_offsets_for_leader_epoch_response": 1, "state_key": 0, "follower_log_end_offset": 1,
    },
}
# Fuzzed with paths confined to a temporary directory (see test_checkpoint_files_*).
FILE_METHODS = {("LeaderEpochCache", "write_checkpoint"), ("LeaderEpochCache", "read_checkpoint")}


def public_names(obj: Any) -> set[str]:
    return {name for name in dir(obj) if not name.startswith("_")}


def test_the_harness_reports_a_panic() -> None:
    """A PanicException is a BaseException: make sure call_safely does not let one pass."""
    panic = type("PanicException", (BaseException,), {})

    def explode() -> None:
        raise panic("boom")

    with pytest.raises(pytest.fail.Exception, match="panic"):
        call_safely("explode", explode)
    with pytest.raises(pytest.fail.Exception, match="SystemError"):
        call_safely("system error", lambda: (_ for _ in ()).throw(SystemError("bad")))


def test_every_public_callable_is_fuzzed() -> None:
    """A new function or method must be added to the tables above (properties are read)."""
    module_names = public_names(core) - {"BUILD"}
    classes = {name for name in module_names if isinstance(getattr(core, name), type)}
    assert module_names - classes <= set(MODULE_CALLABLES)
    assert classes <= set(METHODS)
    for name in classes:
        cls = getattr(core, name)
        callables = {attr for attr in public_names(cls) if callable(getattr(cls, attr))}
        covered = set(METHODS[name]) | {m for c, m in STATIC_METHODS if c == name} | \
            {m for c, m in FILE_METHODS if c == name}
        assert callables <= covered, f"{name}: not fuzzed: {sorted(callables - covered)}"


def read_everything(obj: Any, label: str) -> None:
    """Every property, ``len``, ``hash``, ``repr`` and ``==``: none may fail on any state."""
    for attr in sorted(public_names(type(obj))):
        if not callable(getattr(type(obj), attr)):
            call_safely(f"{label}.{attr}", lambda: getattr(obj, attr), allowed=())
    for name, probe in (("len", len), ("repr", repr), ("eq", lambda o: o == o)):
        if name != "len" or hasattr(obj, "__len__"):
            call_safely(f"{name}({label})", lambda: probe(obj), allowed=())
    if type(obj).__hash__ is not None:
        call_safely(f"hash({label})", lambda: hash(obj), allowed=())
    for reader in ("batches", "holes", "entries", "snapshot", "epoch_entries", "producer_ids",
                   "state_key", "epoch_boundaries"):
        if hasattr(obj, reader):
            call_safely(f"{label}.{reader}()", getattr(obj, reader), allowed=())


def draw_arguments(data: st.DataObject, name: str, arity: int,
                   extra: st.SearchStrategy[Any]) -> tuple[list[Any], dict[str, Any]]:
    """Mostly the right number of positional arguments, sometimes one more or one less, and
    some of the callable's keyword arguments. Two values in three are nearly valid, so that
    calls get past argument conversion into the core."""
    count = data.draw(st.sampled_from([arity] * 6 + [max(0, arity - 1), arity + 1]), "arity")
    values = st.one_of(extra, extra, junk)
    args = [data.draw(values, f"arg {i}") for i in range(count)]
    names = KEYWORDS.get(name, []) + ["bogus"] * (data.draw(st.integers(0, 9)) == 0)
    kwargs = data.draw(st.dictionaries(st.sampled_from(names), values, max_size=3)
                       if names else st.just({}), "kwargs")
    return args, kwargs


def populated_instances() -> dict[str, Any]:
    """Instances with state worth corrupting: batches, epochs, producers, a hole."""
    log = core.ReplicaLog(2)
    log.append_as_leader([1, 2, 3], 0, producer_id=5, producer_epoch=1, base_sequence=0)
    log.append_many_as_leader(2, [2, 1], [7, 8, 9])
    log.append_as_leader([4], 3, producer_id=5, producer_epoch=1, base_sequence=3,
                         is_transactional=True)
    log.truncate_to(log.log_end_offset - 1)
    log.append_as_leader([4, 5], 4)
    log.flush(5)
    producers = core.ProducerStateManager()
    producers.update(core.RecordBatch(0, 0, [1], producer_id=3, producer_epoch=2, base_sequence=9))
    return {
        "ReplicaLog": log,
        "LeaderEpochCache": core.LeaderEpochCache([(0, 0), (3, 4), (7, 20)]),
        "ProducerStateManager": producers,
        "RecordBatch": core.RecordBatch(4, 1, [1, 2], producer_id=1, producer_epoch=1,
                                        base_sequence=2**31 - 1),
        "LogAppendInfo": core.ReplicaLog().append_as_leader([1], 0),
        "TruncationOutcome": core.TruncationOutcome.truncate(3),
        "FetchCheck": core.FetchCheck.diverging(1, 2),
        "Replica": core.Replica(1, [1, 2, 3], 3, 2, 10_000),
        "Replayer": core.Replayer(),
        **_event_loop(),
    }


def _event_loop() -> dict[str, Any]:
    """A kernel with events pending and a network with live nodes, a held message and a link."""
    kernel = core.Kernel(3)
    net = core.Network(kernel, (1, 5), (1, 2))
    for node in (1, 2, "controller", "p"):
        net.set_alive(node, True)
    net.set_link(1, "p", (0, 3), 0.2, 0.3, True)
    net.send("p", 1, lambda: None, "fetch", "metadata", False)
    net.partition([[1], [2, "p"]])
    net.send(2, 1, lambda: None)
    timer = kernel.schedule(7, lambda: None)
    kernel.schedule_at(9, lambda: None, True)
    net.post(1, 2, {2: kernel}, "schedule", 5)  # arrives as kernel.schedule(5, 1): a TypeError
    watch = core.ChangeWatch()
    controller = type("Controller", (), {"leader": 1, "leader_epoch": 0, "partition_epoch": 0,
                                         "isr": (1,), "elr": (), "elections": []})()
    watch.changes({}, controller)
    watcher = watch.watching({}, controller, lambda changed, moved: None)
    scan = core.StateScan(True, True, 2)
    coverage = core.ProtocolCoverage(2)
    broker = _PlaneBroker()
    plane = core.FetchPlane(kernel, net, {1: broker, 2: broker}, 30_000, 1000, 500, True)
    handler = plane.attach(1, broker)["on_fetch"]
    plane.attach(2, type("NotABroker", (), {"replica": core.Replica(2, [1, 2], 5, 1, 100)})())
    return {"Kernel": kernel, "Network": net, "Timer": timer, "ChangeWatch": watch, "Watcher": watcher,
            "StateScan": scan, "ProtocolCoverage": coverage, "FetchPlane": plane,
            "FetchPlaneHandler": handler}


class _PlaneBroker:
    """What ``FetchPlane`` reads and calls of a broker (``epochlab.sim.broker.Broker``), no more."""

    alive, incarnation, _seen_state = True, 1, None
    _parked_produces: tuple[()] = ()

    def __init__(self) -> None:
        self.replica = core.Replica(1, [1, 2], 5, 1, 100)

    def _drain_events(self) -> None:
        self.replica.take_events()

    def _note_state(self) -> None:
        self._seen_state = self.replica.log.state_key()

    def _try_complete_delayed(self) -> None:
        self._note_state()

    def _needs_verification(self, req: Any) -> bool:
        return False

    def _verify(self, req: Any) -> None: ...

    def _send_alter_partition(self, proposal: Any) -> None: ...

    def _halt(self) -> None: ...


# Arguments that are close to valid, so calls get past argument conversion into the core.
near_valid = st.one_of(
    st.integers(0, 30),
    st.lists(st.integers(0, 5), max_size=4),
    st.tuples(st.integers(0, 8), st.integers(0, 30)),
    st.lists(st.tuples(st.integers(0, 8), st.integers(0, 30)), max_size=3),
    st.builds(lambda b, e, n: core.RecordBatch(b, e, list(range(n))),
              st.integers(0, 30), st.integers(0, 8), st.integers(1, 3)),
    st.lists(st.builds(lambda b: core.RecordBatch(b, 0, [1]), st.integers(0, 30)), max_size=3),
    st.sampled_from(["fenced_leader_epoch", "unknown_leader_epoch", None]),
    st.sampled_from(EDGES),
)

targets = st.sampled_from(
    [("module", name) for name in MODULE_CALLABLES if name not in MODULE_CONSTANTS]
    + [("static", key) for key in STATIC_METHODS]
    + [("method", (cls, name)) for cls, methods in METHODS.items() for name in methods]
)


@FUZZ_SETTINGS
@given(data=st.data(), steps=st.integers(1, 8))
def test_random_calls_never_panic(data: st.DataObject, steps: int) -> None:
    instances = populated_instances()
    for step in range(steps):
        kind, target = data.draw(targets, f"target {step}")
        instance_pool = st.sampled_from(list(instances.values()))
        if kind == "module":
            assert isinstance(target, str)
            arity = MODULE_CALLABLES[target]
            function, label = getattr(core, target), target
        else:
            assert isinstance(target, tuple)
            owner, name = target
            if kind == "static":
                arity = STATIC_METHODS[(owner, name)]
                function = getattr(getattr(core, owner), name)
            else:
                arity = METHODS[owner][name]
                function = getattr(instances[owner], name)
            label = f"{owner}.{name}"
        bare = label.rsplit(".", 1)[-1]
        args, kwargs = draw_arguments(data, bare, arity,
                                      st.one_of(near_valid, near_valid, instance_pool))
        result = call_safely(f"{label}(*{args!r}, **{kwargs!r})", lambda: function(*args, **kwargs))
        for name, obj in instances.items():
            read_everything(obj, name)
        if result is not None and type(result).__module__.startswith("epochlab"):
            read_everything(result, f"result of {label}")
            if type(result).__name__ in instances:
                instances[type(result).__name__] = result  # keep fuzzing what came back


@FUZZ_SETTINGS
@given(other=junk)
def test_comparisons_with_anything_never_fail(other: Any) -> None:
    for name, obj in populated_instances().items():
        call_safely(f"{name} == {other!r}", lambda: obj == other, allowed=())
        call_safely(f"{name} != {other!r}", lambda: obj != other, allowed=())


def checkpoint_lines() -> st.SearchStrategy[str]:
    """Text that is often almost a checkpoint: the right tokens in slightly wrong places."""
    tokens = st.sampled_from(["0", "1", "2", "3", "00", "-1", "+1", "1_0", "0x1", "1e3", " ",
                              "\t", "\r", "\x0b", "\x0c", "\x00", "\u00a0", "\u0663", "\u2003",
                              str(2**31 - 1), str(2**31), str(2**63 - 1), str(2**63),
                              str(2**64), "9" * 30, "a"])
    line = st.lists(tokens, max_size=5).map("".join)
    structured = st.lists(line, max_size=6).map("\n".join)
    valid_prefix = st.builds(
        lambda n, lines, tail: "\n".join(["0", str(n)] + lines) + tail,
        st.integers(0, 4),
        st.lists(st.builds(lambda e, s, sep: f"{e}{sep}{s}", st.integers(0, 5),
                           st.integers(0, 50), st.sampled_from([" ", "  ", "\t", " \x0b"])),
                 max_size=5),
        st.sampled_from(["", "\n", "\n\n", "\r\n", " "]),
    )
    return st.one_of(st.text(max_size=40), structured, valid_prefix)


@FUZZ_SETTINGS
@given(text=checkpoint_lines(), path=st.one_of(st.none(), st.text(max_size=8), junk))
def test_checkpoint_text_parsing_raises_only_corrupt_checkpoint(text: str, path: Any) -> None:
    parsed = call_safely(
        f"from_checkpoint_text({text!r}, {path!r})",
        lambda: core.LeaderEpochCache.from_checkpoint_text(text, path),
        allowed=(CorruptCheckpointError, TypeError) if not isinstance(path, (str, type(None)))
        else (CorruptCheckpointError,),
    )
    if parsed is not None:
        # Whatever parses writes back to text that parses to the same cache.
        again = core.LeaderEpochCache.from_checkpoint_text(parsed.to_checkpoint_text())
        assert again == parsed


@FUZZ_SETTINGS
@given(content=st.one_of(st.binary(max_size=60), checkpoint_lines().map(str.encode),
                         checkpoint_lines().map(lambda t: t.encode("utf-16"))))
def test_checkpoint_files_raise_only_checkpoint_errors(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(content)
    for given_path in (path, str(path)):
        cache = call_safely(f"read_checkpoint of {content!r}",
                            lambda: core.LeaderEpochCache.read_checkpoint(given_path),
                            allowed=(CorruptCheckpointError, StorageError))
        if cache is not None:
            out = tmp_path / "rewritten"
            cache.write_checkpoint(out)
            assert core.LeaderEpochCache.read_checkpoint(out) == cache


@FUZZ_SETTINGS
@given(name=st.one_of(st.text(alphabet=string.ascii_letters + "._-\x00 ", max_size=8),
                      st.just(""), st.just(".")),
       entries=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 99)), max_size=4))
def test_checkpoint_paths_raise_only_storage_errors(tmp_path: Path, name: str,
                                                    entries: list[tuple[int, int]]) -> None:
    """Odd file names inside a temporary directory: NUL bytes, the directory itself, a
    missing parent. Paths never leave ``tmp_path``."""
    made = call_safely("LeaderEpochCache", lambda: core.LeaderEpochCache(entries))
    cache = made if made is not None else core.LeaderEpochCache()
    for target in (str(tmp_path / name), tmp_path / name, str(tmp_path / "missing" / name),
                   str(tmp_path)):
        call_safely(f"write_checkpoint({target!r})", lambda: cache.write_checkpoint(target),
                    allowed=(StorageError,))
        call_safely(f"read_checkpoint({target!r})",
                    lambda: core.LeaderEpochCache.read_checkpoint(target),
                    allowed=(StorageError, CorruptCheckpointError))


@FUZZ_SETTINGS
@given(path=junk)
def test_checkpoint_path_of_wrong_type_is_a_type_error(tmp_path: Path, path: Any) -> None:
    if isinstance(path, (str, bytes)):
        return  # text paths are the previous test, confined to tmp_path; bytes could be one too
    cache = core.LeaderEpochCache([(0, 0)])
    call_safely(f"write_checkpoint({path!r})", lambda: cache.write_checkpoint(path),
                allowed=(TypeError, StorageError))
    call_safely(f"read_checkpoint({path!r})", lambda: core.LeaderEpochCache.read_checkpoint(path),
                allowed=(TypeError, StorageError, CorruptCheckpointError))
