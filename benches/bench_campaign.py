"""Runs per second of a Spark campaign with ``local[1]`` and ``local[2]``, and the ratio.

    python -m pytest benches/bench_campaign.py -q -s      (or: python benches/bench_campaign.py)

The same small campaign (default grid, 600 runs in batches of 300, seed 0) runs on each master
after a warm-up campaign of 60 runs (JVM, Python workers, imports); the wall time covers the
Spark jobs that run, map and write the batches (not the aggregation or the report). A new
SparkSession is built for each master. Prints one line per master and the ratio; no timing is
asserted (the machine is shared).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

RUNS, BATCH, WARMUP = 600, 300, 60


def measure(master: str) -> float:
    from epochlab.campaigns import default_grid
    from epochlab.campaigns.spark import CampaignSpec, build_session, run_batches

    spark = build_session(master, app_name=f"epochlab-bench-{master}")
    try:
        with tempfile.TemporaryDirectory(prefix="epochlab-bench-") as tmp:
            grid = default_grid()
            run_batches(spark, CampaignSpec(grid, WARMUP, seed=99, batch_runs=WARMUP), Path(tmp) / "warm",
                        progress=False)
            start = time.monotonic()
            run_batches(spark, CampaignSpec(grid, RUNS, seed=0, batch_runs=BATCH), Path(tmp) / "out",
                        progress=False)
            return RUNS / (time.monotonic() - start)
    finally:
        spark.stop()


def report() -> list[str]:
    one, two = measure("local[1]"), measure("local[2]")
    return [f"campaign {RUNS} runs: local[1] {one:.1f} runs/s, local[2] {two:.1f} runs/s, "
            f"local[2] / local[1]: {two / one:.2f}x"]


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
