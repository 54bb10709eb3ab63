"""Rust core vs pure-Python reference on the same work, in one run.

Run (not part of the default ``pytest`` run, whose testpaths is ``tests``)::

    python -m pytest benches/bench_core.py -q     # or: python -m pytest benches -q
    EPOCHLAB_BENCH_OUT=1 python -m pytest benches/bench_core.py -q   # also benches/results.json
    EPOCHLAB_BENCH_OUT=/tmp/r.json python -m pytest benches/bench_core.py -q  # or elsewhere

The summary at the end prints, per group, the mean time per operation of each implementation
and the ratio. Groups:

* ``append_many_as_leader``: 1M one-record batches through the bulk path, on a fresh log each
  round; ``copy`` is ``array('Q', records)``, a plain copy of the same values (the floor for
  any path that must read a Python list). The reference takes ~5 s, so it runs one round
  (``benchmark.pedantic(rounds=1)``).
* ``end_offset_for``: random epochs against caches of 10 / 10k / 1M entries, many lookups per
  round. The reference scans its entries, so it does fewer lookups per round on the large
  caches; the table compares per lookup.
* ``truncate_to``: a 1M-batch log truncated to its middle and to 100 batches before its end, on
  a fresh copy each round (the copy is setup, not timed).
* ``divergence_point`` / ``first_mismatch``: two 1M-batch logs (1000 epochs) that diverge 500
  offsets before the end; the reference's ``first_mismatch`` runs one round.

Memory: the Rust log stores columns (``src/log/store.rs``): 35 bytes per batch plus 8 per
record. The summary prints that layout next to the RSS growth measured while building a 1M-batch
log, and the reference's footprint measured with ``tracemalloc``.

No timing is asserted anywhere; the asserts only check that each round did the work.
"""

from __future__ import annotations

import gc
import random
import tracemalloc
from array import array
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import epochlab._core as core
import epochlab.reference as reference

IMPLS: dict[str, ModuleType] = {"rust": core, "reference": reference}
N = 1_000_000
EPOCHS = 1000
DIVERGE_BEFORE_END = 500
SEED = 20240601


def one_round_for_reference(impl: str, rust_rounds: int) -> int:
    return rust_rounds if impl == "rust" else 1


@pytest.mark.benchmark(group="append_many_as_leader")
@pytest.mark.parametrize("impl", ["rust", "reference"])
def test_append_many_as_leader(benchmark: Any, record_ratio: Any, impl: str) -> None:
    module = IMPLS[impl]
    sizes, records = [1] * N, list(range(N))
    end = benchmark.pedantic(
        lambda log: log.append_many_as_leader(0, sizes, records),
        setup=lambda: ((module.ReplicaLog(),), {}),
        rounds=one_round_for_reference(impl, 5), iterations=1,
    )
    assert end == N
    record_ratio(benchmark, "append_many_as_leader, 1M batches (per batch)", impl, ops=N)


@pytest.mark.benchmark(group="append_many_as_leader")
def test_append_plain_copy(benchmark: Any, record_ratio: Any) -> None:
    records = list(range(N))
    copied = benchmark.pedantic(lambda: array("Q", records), rounds=5, iterations=1)
    assert len(copied) == N
    record_ratio(benchmark, "append_many_as_leader, 1M batches (per batch)", "copy", ops=N)


CACHE_SIZES = {"10": 10, "10k": 10_000, "1M": 1_000_000}
# Lookups per round; the reference's lookup is linear in the cache size.
LOOKUPS = {("rust", n): 10_000 for n in CACHE_SIZES.values()} | {
    ("reference", 10): 10_000, ("reference", 10_000): 200, ("reference", 1_000_000): 3,
}


@pytest.fixture(scope="module")
def caches() -> dict[tuple[str, int], Any]:
    built = {}
    for n in CACHE_SIZES.values():
        entries = [(epoch, epoch * 10) for epoch in range(n)]
        for impl, module in IMPLS.items():
            built[(impl, n)] = module.LeaderEpochCache(entries)
    return built


@pytest.mark.benchmark(group="end_offset_for")
@pytest.mark.parametrize("size", list(CACHE_SIZES))
@pytest.mark.parametrize("impl", ["rust", "reference"])
def test_end_offset_for(benchmark: Any, record_ratio: Any, caches: Any, impl: str,
                        size: str) -> None:
    n = CACHE_SIZES[size]
    cache, lookups = caches[(impl, n)], LOOKUPS[(impl, n)]
    rng = random.Random(SEED)
    # n - 1 is the latest epoch (answered with the LEO), n is above every entry (None).
    epochs = [rng.randrange(n + 1) for _ in range(lookups)]
    leo = n * 10 + 5
    end_offset_for = cache.end_offset_for

    def lookup_all() -> int:
        found = 0
        for epoch in epochs:
            found += end_offset_for(epoch, leo) is not None
        return found

    if impl == "rust":
        found = benchmark(lookup_all)
    else:
        found = benchmark.pedantic(lookup_all, rounds=3, iterations=1)
    assert found > 0
    record_ratio(benchmark, f"end_offset_for, {size} entries (per lookup)", impl, ops=lookups)


def build_log(module: ModuleType) -> Any:
    """N one-record batches, EPOCHS epochs of N / EPOCHS batches each."""
    log = module.ReplicaLog()
    per_epoch = N // EPOCHS
    sizes = [1] * per_epoch
    for epoch in range(EPOCHS):
        log.append_many_as_leader(epoch, sizes, list(range(epoch * per_epoch,
                                                           (epoch + 1) * per_epoch)))
    return log


@pytest.fixture(scope="module")
def diverged_logs() -> dict[str, tuple[Any, Any]]:
    """For each implementation, a log and a copy of it whose last DIVERGE_BEFORE_END offsets
    were rewritten in a new epoch by another leader."""
    logs = {}
    for impl, module in IMPLS.items():
        a = build_log(module)
        b = a.copy()
        b.truncate_to(N - DIVERGE_BEFORE_END)
        b.append_many_as_leader(EPOCHS, [1] * DIVERGE_BEFORE_END, [7] * DIVERGE_BEFORE_END)
        logs[impl] = (a, b)
    return logs


@pytest.mark.benchmark(group="truncate_to")
@pytest.mark.parametrize("where", ["middle", "tail"])
@pytest.mark.parametrize("impl", ["rust", "reference"])
def test_truncate_to(benchmark: Any, record_ratio: Any, diverged_logs: Any, impl: str,
                     where: str) -> None:
    log = diverged_logs[impl][0]
    target = N // 2 if where == "middle" else N - 100
    removed = benchmark.pedantic(lambda fresh: fresh.truncate_to(target),
                                 setup=lambda: ((log.copy(),), {}),
                                 rounds=one_round_for_reference(impl, 10) * 3, iterations=1)
    assert removed
    record_ratio(benchmark, f"truncate_to, 1M batches, {where}", impl)


@pytest.mark.benchmark(group="divergence_point")
@pytest.mark.parametrize("impl", ["rust", "reference"])
def test_divergence_point(benchmark: Any, record_ratio: Any, diverged_logs: Any,
                          impl: str) -> None:
    a, b = diverged_logs[impl]
    point = benchmark(IMPLS[impl].divergence_point, a, b)
    assert point == N - DIVERGE_BEFORE_END
    record_ratio(benchmark, "divergence_point, 1M batches, 1000 epochs", impl)


@pytest.mark.benchmark(group="first_mismatch")
@pytest.mark.parametrize("impl", ["rust", "reference"])
def test_first_mismatch(benchmark: Any, record_ratio: Any, diverged_logs: Any,
                        impl: str) -> None:
    a, b = diverged_logs[impl]
    mismatch = benchmark.pedantic(IMPLS[impl].first_mismatch, args=(a, b),
                                  rounds=one_round_for_reference(impl, 5), iterations=1)
    assert mismatch == N - DIVERGE_BEFORE_END
    record_ratio(benchmark, "first_mismatch, 1M batches", impl)


def rss_bytes() -> int | None:
    statm = Path("/proc/self/statm")
    if not statm.exists():
        return None
    import resource
    return int(statm.read_text().split()[1]) * resource.getpagesize()


def test_memory_per_batch_and_record(record_memory: Any) -> None:
    """The Rust figure is the column layout; RSS growth while building 1M one-record batches is
    printed beside it as a rough check (the allocator may reuse freed pages or keep spare
    capacity). The reference's footprint is exact per tracemalloc, solved for per batch and per
    record from logs of 1 and 4 records per batch."""
    figures: dict[str, float | str] = {"layout": "35 B/batch + 8 B/record (src/log/store.rs)"}
    sizes, values = [1] * N, list(range(1000, 1000 + N))
    gc.collect()
    before = rss_bytes()
    log = core.ReplicaLog()
    log.append_many_as_leader(0, sizes, values)
    after = rss_bytes()
    assert log.batch_count == N
    if before is not None and after is not None:
        figures["RSS growth, 1M one-record batches"] = \
            f"{(after - before) / N:.1f} B/batch (layout: 43)"
    record_memory("rust", figures)

    def footprint(batches: int, per_batch: int) -> float:
        gc.collect()
        tracemalloc.start()
        # The values are made inside the window: the batches keep the int objects alive.
        values = list(range(1000, 1000 + batches * per_batch))
        log = reference.ReplicaLog()
        log.append_many_as_leader(0, [per_batch] * batches, values)
        del values
        current, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert log.batch_count == batches
        return float(current)

    batches = 100_000
    small, large = footprint(batches, 1), footprint(batches, 4)
    per_record = (large - small) / (3 * batches)
    record_memory("reference", {
        "tracemalloc": f"{small / batches - per_record:.0f} B/batch + {per_record:.0f} B/record"})
