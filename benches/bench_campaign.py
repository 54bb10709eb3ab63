"""Runs per second of a Spark campaign with ``local[1]`` and ``local[2]``, and the ratio.

    python -m pytest benches/bench_campaign.py -q -s      (or: python benches/bench_campaign.py)

The default campaign's shape (``epochlab campaign``: the default grid, 2,000 runs, batches of
2,500 runs, so one Spark job; seed 0) runs on each master after a warm-up campaign of 60 runs
(JVM, Python workers, imports); the wall time covers the Spark job that runs, maps and writes
the batch (not the aggregation or the report). A new SparkSession is built for each master, and
the campaign is timed :data:`ROUNDS` times in it: the best of them is the master's figure (the
least disturbed by the rest of the machine; one round alone varied from 1.70x to 2.07x on
three identical runs here, b84b054). Prints one line per master and the ratio; no timing is
asserted (the machine is shared).
Before b31c757 this measured 600 runs in batches of 300, where each job's fixed cost
(scheduling, shuffle, Parquet) weighed more: 38 and 58 runs/s, 1.52x, on the same machine.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from epochlab.campaigns.cli import DEFAULT_RUNS as RUNS
from epochlab.campaigns.spark import DEFAULT_BATCH_RUNS as BATCH

WARMUP = 60
ROUNDS = 3


def measure(master: str, rounds: int = ROUNDS) -> list[float]:
    """Runs/s of ``rounds`` timed campaigns on ``master``, in one session after the warm-up."""
    from epochlab.campaigns import default_grid
    from epochlab.campaigns.spark import CampaignSpec, run_batches
    from epochlab.spark import build_session

    spark = build_session(master, app_name=f"epochlab-bench-{master}")
    try:
        with tempfile.TemporaryDirectory(prefix="epochlab-bench-") as tmp:
            grid = default_grid()
            run_batches(spark, CampaignSpec(grid, WARMUP, seed=99, batch_runs=WARMUP), Path(tmp) / "warm",
                        progress=False)
            rates = []
            for k in range(rounds):
                start = time.monotonic()
                run_batches(spark, CampaignSpec(grid, RUNS, seed=0, batch_runs=BATCH),
                            Path(tmp) / f"out{k}", progress=False)
                rates.append(RUNS / (time.monotonic() - start))
            return rates
    finally:
        spark.stop()


def report() -> list[str]:
    one, two = measure("local[1]"), measure("local[2]")
    shown = lambda rates: ", ".join(f"{r:.1f}" for r in rates)  # noqa: E731
    return [f"campaign {RUNS} runs, best of {ROUNDS}: local[1] {max(one):.1f} runs/s ({shown(one)}), "
            f"local[2] {max(two):.1f} runs/s ({shown(two)}), "
            f"local[2] / local[1]: {max(two) / max(one):.2f}x"]


def test_campaign_runs_per_second(capsys) -> None:  # type: ignore[no-untyped-def]
    import pytest

    pytest.importorskip("pyspark")
    lines = report()
    with capsys.disabled():
        print()
        for line in lines:
            print(line)


if __name__ == "__main__":
    for line in report():
        print(line)
