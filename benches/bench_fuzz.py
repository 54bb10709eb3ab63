"""Runs per second of the fuzzer on short schedules: 3 replicas, ~100 actions, every invariant
checked after every engine event, healing phase and history/liveness checks included.

    python -m pytest benches/bench_fuzz.py -q

Implementations compared in one run (``Cluster(..., backend=...)``):

* ``rust``: the replica protocol and the log in the Rust core (the default);
* ``reference``: the replica protocol and the log in pure Python (``epochlab.reference``).

The summary line of group ``fuzz-run`` gives the mean time per run of each and the ratio
(rust vs reference). The same 8 generated schedules (generation ``kip-320``) are run by each
implementation; a backend the simulator does not accept is skipped with its error.
No timing is asserted.
"""

from __future__ import annotations

from typing import Any

import pytest

from epochlab.fuzz import FuzzProfile, execute, generate_schedule

SCHEDULES = [generate_schedule(seed, "kip-320", FuzzProfile(actions=100)) for seed in range(8)]


@pytest.mark.benchmark(group="fuzz-run")
@pytest.mark.parametrize("impl", ["rust", "reference"])
def test_runs_per_second(benchmark: Any, record_ratio: Any, impl: str) -> None:
    try:
        execute(SCHEDULES[0], backend=impl)
    except (TypeError, ValueError) as exc:
        pytest.skip(f"backend {impl!r} not available: {exc}")

    def run_all() -> int:
        return sum(len(execute(s, backend=impl).verdict.violations) >= 0 for s in SCHEDULES)

    done = benchmark.pedantic(run_all, rounds=3, iterations=1)
    assert done == len(SCHEDULES)
    record_ratio(benchmark, "fuzz-run (100 actions, 3 replicas)", impl, ops=len(SCHEDULES))


LATEST = [generate_schedule(seed, "strict-min-isr", FuzzProfile(actions=100)) for seed in range(6)]
LOOP: dict[str, dict[str, float]] = {}


def _loop_counts(schedule: Any, impl: str) -> tuple[int, int]:
    """(engine events, calls from Python into the Rust extension) of one run of ``schedule``:
    events counted on the kernel, crossings by a profiler hook on C calls into ``epochlab._core``
    (method calls; property reads do not show to the hook, so this is a floor. The Rust event
    loop raised the count while the cost fell: the kernel and the network are Rust classes, so
    every ``schedule`` and ``post`` is a call into the extension, while the loop's own pops and
    deliveries cross nothing; the state checker's change detector is one
    ``ChangeWatch.changes`` call per event that is not quiet, and the checker is called from
    the kernel's loop, not from a Python ``stop`` callback; slow, so measured on two runs apart
    from the timing)."""
    import sys

    from epochlab.sim import cluster as cluster_module

    clusters: list[Any] = []
    init = cluster_module.Cluster.__init__

    def noting_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        clusters.append(self)

    crossings = [0]

    def profile(_frame: Any, event: str, arg: Any) -> None:
        if event == "c_call":
            owner = getattr(arg, "__self__", None)
            module = getattr(arg, "__module__", None) or getattr(type(owner), "__module__", "")
            if module == "epochlab._core":
                crossings[0] += 1

    cluster_module.Cluster.__init__ = noting_init  # type: ignore[method-assign]
    sys.setprofile(profile)
    try:
        execute(schedule, backend=impl)
    finally:
        sys.setprofile(None)
        cluster_module.Cluster.__init__ = init  # type: ignore[method-assign]
    return sum(c.kernel.steps for c in clusters), crossings[0]  # Kernel.steps: the events it ran


@pytest.mark.benchmark(group="fuzz-loop latest")
@pytest.mark.parametrize("impl", ["rust", "reference"])
def test_fuzz_loop_latest_generation(benchmark: Any, record_ratio: Any, impl: str) -> None:
    """The fuzz loop (docs/measurements.md, "The fuzz loop"): runs/s on the latest generation (swarm faults, 100 actions),
    with engine events and Python/Rust crossings per run printed beside it."""
    done = benchmark.pedantic(lambda: [execute(s, backend=impl) for s in LATEST], rounds=2, iterations=1)
    assert len(done) == len(LATEST)
    record_ratio(benchmark, "fuzz-loop latest (100 actions)", impl, ops=len(LATEST))
    counts = [_loop_counts(s, impl) for s in LATEST[:2]]
    LOOP[impl] = {"events_per_run": sum(e for e, _ in counts) / len(counts),
                  "crossings_per_run": sum(c for _, c in counts) / len(counts)}
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        LOOP[impl]["runs_per_s"] = len(LATEST) / stats.stats.mean
        benchmark.extra_info.update(LOOP[impl])
    print(f"\nfuzz loop, {impl}: {LOOP[impl]}")
