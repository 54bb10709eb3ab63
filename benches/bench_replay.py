"""Trace replay at scale: Rust vs the pure-Python reference, vs a plain NumPy copy.

Run::

    python -m pytest benches/bench_replay.py -q                       # quick (200k batches)
    EPOCHLAB_BENCH_BATCHES=10000000 python -m pytest benches/bench_replay.py -q   # the 10M run

Groups (the summary prints mean time per operation and ratios):

* ``trace replay (per event)``: a generated trace (``EPOCHLAB_BENCH_BATCHES`` leader batches,
  one leader change per 100 batches, 3 replicas) replayed from memory with every invariant
  checked; the reference replays the first ``EPOCHLAB_BENCH_REFERENCE_ROWS`` rows (default
  20,000; it is pure Python) and the table compares per event.
* ``trace replay vs copy (per batch)``: the same Rust replay per leader batch against a plain
  NumPy copy of the same columns (every buffer of the table copied once): how far the replay
  is from the cost of touching the data at all.
* ``import vs replay (per 1,000-row batch)``: the fixed cost of importing a batch (Arrow C
  Data Interface through arrow-rs, every offset validated) against replaying a 1,000-row group.
* ``epoch cache lookup, N entries``: ``epoch_for_offset`` and ``end_offset_for`` on caches of
  10 to 1,000,000 entries (``EPOCHLAB_BENCH_CACHE_MAX``), Rust vs reference per lookup.
* ``divergence_point`` / ``first_mismatch`` at ``EPOCHLAB_BENCH_DIVERGENCE_BATCHES`` (default
  1M; 10M with the full run) one-record batches, the logs diverging 500 offsets before the
  end; ``copy`` for ``first_mismatch`` is NumPy comparing the two value arrays.
* memory: bytes per batch and per record of the replayed logs, and the process's peak RSS.

No timing is asserted.
"""

from __future__ import annotations

import gc
import os
import random
import resource
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
np = pytest.importorskip("numpy")

import epochlab._core as core  # noqa: E402
import epochlab.reference as reference  # noqa: E402
from epochlab import trace  # noqa: E402
from epochlab.trace.schema import KIND_CODES  # noqa: E402

BATCHES = int(os.environ.get("EPOCHLAB_BENCH_BATCHES", "200000"))
REFERENCE_ROWS = int(os.environ.get("EPOCHLAB_BENCH_REFERENCE_ROWS", "20000"))
CACHE_MAX = int(os.environ.get("EPOCHLAB_BENCH_CACHE_MAX", "1000000"))
DIV_N = int(os.environ.get("EPOCHLAB_BENCH_DIVERGENCE_BATCHES",
                           "10000000" if BATCHES >= 10_000_000 else "1000000"))


@pytest.fixture(scope="module")
def generated() -> Any:
    return trace.generate(BATCHES, leader_changes=BATCHES // 100, replicas=3, seed=1)


def test_replay_rust(benchmark: Any, record_ratio: Any, record_memory: Any, generated: Any) -> None:
    batch = generated.combine_chunks().to_batches()[0]
    holder: dict[str, Any] = {}

    def run() -> None:
        r = core.Replayer()
        r.replay_batch(batch, 0)
        holder["r"] = r

    rounds = 1 if BATCHES >= 5_000_000 else 3
    benchmark.pedantic(run, rounds=rounds, iterations=1)
    r = holder["r"]
    assert r.rows == generated.num_rows and r.violation_count == 0
    record_ratio(benchmark, "trace replay (per event)", "rust", ops=generated.num_rows)
    events_per_s = generated.num_rows / benchmark.stats.stats.mean
    replicas = r.replicas()
    batches = sum(x["batch_count"] for x in replicas)
    records = sum(x["record_count"] for x in replicas)
    record_memory("trace replay", {
        "events": generated.num_rows, "leader_batches": BATCHES,
        "rust_events_per_s": f"{events_per_s:,.0f}",
        "log_bytes_total": r.log_heap_bytes(),
        "log_bytes_per_stored_batch (incl. its records, truth log included)":
            f"{r.log_heap_bytes() / (batches * 4 / 3):.1f}",
        "records_per_batch": f"{records / batches:.2f}",
        "trace_table_bytes": generated.nbytes,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    })
    holder.clear()
    gc.collect()


def test_replay_reference(benchmark: Any, record_ratio: Any, generated: Any) -> None:
    part = generated.slice(0, min(REFERENCE_ROWS, generated.num_rows))
    report = benchmark.pedantic(lambda: trace.reference_replay(part), rounds=1, iterations=1)
    assert report.rows == part.num_rows and report.verdict == "ok"
    record_ratio(benchmark, "trace replay (per event)", "reference", ops=part.num_rows)


def test_import_vs_replay_of_a_row_group(benchmark: Any, record_ratio: Any, generated: Any) -> None:
    """The fixed cost of importing one batch through the C Data Interface (arrow-rs's FFI and
    ``validate_full``), against replaying a 1,000-row group: what a small row group pays."""
    group = generated.combine_chunks().to_batches()[0].slice(0, 1000)
    benchmark.pedantic(lambda: core.check_trace_batch(group), rounds=200, iterations=10)
    record_ratio(benchmark, "import vs replay (per 1,000-row batch)", "import")


def test_replay_of_a_row_group(benchmark: Any, record_ratio: Any, generated: Any) -> None:
    group = generated.combine_chunks().to_batches()[0].slice(0, 1000)
    benchmark.pedantic(lambda: core.Replayer().replay_batch(group, 0), rounds=50, iterations=5)
    record_ratio(benchmark, "import vs replay (per 1,000-row batch)", "replay (import included)")


def test_replay_vs_copy_rust(benchmark: Any, record_ratio: Any, generated: Any) -> None:
    batch = generated.combine_chunks().to_batches()[0]
    rounds = 1 if BATCHES >= 5_000_000 else 3
    benchmark.pedantic(lambda: core.Replayer(checks=[]).replay_batch(batch, 0), rounds=rounds, iterations=1)
    record_ratio(benchmark, "trace replay vs copy (per batch, checks off)", "rust", ops=BATCHES)


def test_replay_vs_copy_numpy(benchmark: Any, record_ratio: Any, generated: Any) -> None:
    batch = generated.combine_chunks().to_batches()[0]
    buffers = [np.frombuffer(b, dtype=np.uint8) for col in batch.columns for b in col.buffers() if b is not None]

    def copy() -> int:
        return sum(int(b.copy().nbytes) for b in buffers)

    benchmark.pedantic(copy, rounds=3, iterations=1)
    record_ratio(benchmark, "trace replay vs copy (per batch, checks off)", "copy", ops=BATCHES)


def _cache(module: Any, n: int) -> Any:
    return module.LeaderEpochCache([(e, e * 10) for e in range(n)])


SIZES = [s for s in (10, 1000, 100_000, 1_000_000) if s <= CACHE_MAX]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("impl", ["rust", "reference"])
def test_epoch_cache_lookup(benchmark: Any, record_ratio: Any, impl: str, size: int) -> None:
    module = core if impl == "rust" else reference
    cache = _cache(module, size)
    rng = random.Random(size)
    # The reference scans its entries: fewer lookups (one round) on the large caches.
    lookups = 20_000 if impl == "rust" or size <= 1000 else 20
    offsets = [rng.randrange(size * 10) for _ in range(lookups)]
    epochs = [rng.randrange(size) for _ in range(lookups)]
    leo = size * 10

    def run() -> int:
        n = 0
        for o, e in zip(offsets, epochs):
            n += cache.epoch_for_offset(o) is not None
            n += cache.end_offset_for(e, leo) is not None
        return n

    rounds = 3 if impl == "rust" or size <= 1000 else 1
    assert benchmark.pedantic(run, rounds=rounds, iterations=1) == 2 * lookups
    record_ratio(benchmark, f"epoch cache lookup, {size:,} entries", impl, ops=2 * lookups)


@pytest.fixture(scope="module")
def big_logs() -> tuple[Any, Any]:
    """Two DIV_N one-record-batch logs in 1000 epochs; b rewrote the last 500 offsets."""
    epochs = 1000
    per = DIV_N // epochs
    a = core.ReplicaLog()
    values = list(range(per))
    sizes = [1] * per
    for e in range(epochs):
        a.append_many_as_leader(e, sizes, values)
    b = a.copy()
    b.truncate_to(DIV_N - 500)
    b.append_many_as_leader(epochs, [1] * 500, [7] * 500)
    return a, b


def test_divergence_point_big(benchmark: Any, record_ratio: Any, big_logs: Any) -> None:
    a, b = big_logs
    assert benchmark(core.divergence_point, a, b) == DIV_N - 500
    record_ratio(benchmark, f"divergence_point, {DIV_N:,} batches", "rust")


def test_first_mismatch_big(benchmark: Any, record_ratio: Any, big_logs: Any) -> None:
    a, b = big_logs
    assert benchmark.pedantic(core.first_mismatch, (a, b), rounds=3, iterations=1) == DIV_N - 500
    record_ratio(benchmark, f"first_mismatch, {DIV_N:,} batches", "rust")


def test_first_mismatch_big_numpy_floor(benchmark: Any, record_ratio: Any) -> None:
    x = np.arange(DIV_N, dtype=np.uint64)
    y = x.copy()
    y[-500:] = 7

    def compare() -> int:
        return int(np.argmax(x != y))

    assert benchmark.pedantic(compare, rounds=3, iterations=1) == DIV_N - 500
    record_ratio(benchmark, f"first_mismatch, {DIV_N:,} batches", "copy")


def test_memory_per_batch_and_record(record_memory: Any) -> None:
    """Heap bytes of a replayed single-replica log: batches of 1 and of 10 records give the
    per-batch and per-record figures."""
    def heap(batches: int, per_batch: int) -> int:
        kinds = pa.array([KIND_CODES["append_leader"]] * batches, pa.uint8())
        offsets = pa.array(np.arange(batches + 1, dtype=np.int32) * per_batch)
        values = pa.ListArray.from_arrays(offsets, pa.array(np.arange(batches * per_batch, dtype=np.uint64)))
        t = pa.record_batch({"kind": kinds, "broker": pa.array(np.ones(batches, dtype=np.uint32)),
                             "epoch": pa.array(np.zeros(batches, dtype=np.uint32)), "values": values})
        r = core.Replayer(checks=[])
        r.replay_batch(t, 0)
        return r.log_heap_bytes()

    n = 1_000_000
    one, ten = heap(n, 1), heap(n, 10)
    per_record = (ten - one) / (9 * n)
    record_memory("replica log (columnar store)", {
        "bytes_per_batch": f"{one / n - per_record:.1f}", "bytes_per_record": f"{per_record:.1f}",
        "layout": "35 B/batch + 8 B/record, Vec growth included in the measurement"})
