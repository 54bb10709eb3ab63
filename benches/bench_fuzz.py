"""Runs per second of the fuzzer on short schedules: 3 replicas, ~100 actions, every invariant
checked after every engine event, healing phase and history/liveness checks included.

    python -m pytest benches/bench_fuzz.py -q

Implementations compared in one run (``Cluster(..., backend=...)``):

* ``rust``: the replica protocol and the log in the Rust core (the default);
* ``python``: the replica state machine in Python over the Rust log;
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
@pytest.mark.parametrize("impl", ["rust", "python", "reference"])
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
