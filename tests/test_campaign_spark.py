"""Spark campaigns end to end, on real PySpark in local mode (one session for the module).

A small grid (latest generation, RF=3, acks 1/all, clean/unclean, idempotence on/off: 6
configurations) and 96 runs in batches of 32. Checks: same seed -> identical rows; an
interrupted campaign resumed -> every (config, run) exactly once; a task failing on its first
attempt -> the same rows; ``local-cluster[2,1,1024]`` (separate executor processes, started in
a subprocess while the other tests run) -> the same rows as ``local[2]``; the report; and the
guarantees table ordered as Kafka's semantics demand.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from epochlab.errors import ConfigError

pyspark = pytest.importorskip("pyspark")

from epochlab.campaigns import parse_grid  # noqa: E402
from epochlab.campaigns.driver import run_campaign  # noqa: E402
from epochlab.campaigns.report import expectations, write_report  # noqa: E402
from epochlab.campaigns.spark import CampaignSpec, read_runs, run_batches  # noqa: E402
from epochlab.spark import build_session  # noqa: E402

GRID = {"axes": {"generation": ["strict-min-isr"], "acks": ["1", "all"], "min.insync.replicas": [2],
                 "replication.factor": [3], "unclean.leader.election.enable": [False, True],
                 "enable.idempotence": [False, True]}}
RUNS, BATCH, SEED = 96, 32, 3


def _spec(**kw: Any) -> CampaignSpec:
    return CampaignSpec(parse_grid(GRID, "test grid"), runs=RUNS, seed=SEED, batch_runs=BATCH,
                        tasks_per_batch=4, **kw)


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Start the local-cluster campaign in a subprocess first; the test collects it."""
    base = tmp_path_factory.mktemp("cluster")
    grid = base / "grid.json"
    grid.write_text(json.dumps(GRID))
    cmd = [sys.executable, "-m", "epochlab", "campaign", "--master", "local-cluster[2,1,1024]",
           "--grid", str(grid), "--runs", str(RUNS), "--batch-runs", str(BATCH), "--seed", str(SEED),
           "--out", str(base / "out"), "--no-shrink", "--json"]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    yield proc, base / "out"
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


@pytest.fixture(scope="module")
def spark(cluster_run: Any) -> Any:
    session = build_session("local[2]", app_name="epochlab-tests")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def baseline(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    out = tmp_path_factory.mktemp("baseline")
    result = run_campaign(spark, _spec(), out, progress=False, shrink=False, report=False)
    return result, _rows(spark, out)


def _rows(spark: Any, out: Path) -> list[tuple[Any, ...]]:
    df = spark.read.parquet(str(out / "runs"))
    cols = sorted(df.columns)
    return sorted(tuple(json.dumps(r[c], sort_keys=True) for c in cols) for r in df.select(*cols).collect())


def _pairs(spark: Any, out: Path) -> list[tuple[str, int]]:
    return sorted((r["config_id"], r["run_id"]) for r in
                  spark.read.parquet(str(out / "runs")).select("config_id", "run_id").collect())


def test_every_run_written_once(spark: Any, baseline: Any) -> None:
    result, rows = baseline
    assert len(rows) == RUNS and result.complete
    grid = parse_grid(GRID)
    expected = sorted((grid.configs[r % len(grid.configs)].config_id, r) for r in range(RUNS))
    assert _pairs(spark, result.out) == expected


def test_same_seed_same_parquet_contents(spark: Any, baseline: Any, tmp_path: Path) -> None:
    run_batches(spark, _spec(), tmp_path, progress=False)
    assert _rows(spark, tmp_path) == baseline[1]
    # file by file: same batch directories, each holding the same shards (named by a per-job
    # id, so matched by their first row) with identical rows in identical order
    import pyarrow.parquet as pq

    def shards(root: Path) -> dict[tuple[str, Any], Any]:
        out = {}
        for path in root.glob("runs/batch=*/*.parquet"):
            table = pq.read_table(path)
            first = (table.column("config_id")[0].as_py(), table.column("run_id")[0].as_py())
            out[(path.parent.name, first)] = table
        return out

    a, b = shards(baseline[0].out), shards(tmp_path)
    assert a and sorted(a) == sorted(b)
    assert len({batch for batch, _ in a}) == len(list(baseline[0].out.glob("runs/batch=*")))
    for key in a:
        assert a[key].equals(b[key])
    assert not list(tmp_path.glob("runs/config_id=*"))  # one directory per batch, no more


def test_resume_after_interruption(spark: Any, baseline: Any, tmp_path: Path) -> None:
    spec = _spec()
    first = run_batches(spark, spec, tmp_path, progress=False, stop_after=2)
    assert first.ran == [0, 1]
    # a kill in the middle of batch 1's commit: some of its shards never landed
    victims = sorted(tmp_path.glob("runs/batch=1/*.parquet"))[:2]
    assert victims
    for victim in victims:
        victim.unlink()
    with pytest.raises(Exception, match="resume needs"):
        run_batches(spark, CampaignSpec(spec.grid, RUNS, seed=SEED + 1, batch_runs=BATCH),
                    tmp_path, resume=True, progress=False)
    second = run_batches(spark, spec, tmp_path, resume=True, progress=False)
    assert second.skipped == [0] and second.ran == [1, 2]
    assert _rows(spark, tmp_path) == baseline[1]
    assert read_runs(spark, tmp_path).count() == RUNS
    third = run_batches(spark, spec, tmp_path, resume=True, progress=False)
    assert third.ran == [] and _rows(spark, tmp_path) == baseline[1]


def test_a_directory_in_the_old_layout_is_not_resumed(spark: Any, tmp_path: Path) -> None:
    spec = _spec()
    run_batches(spark, spec, tmp_path, progress=False, stop_after=0)  # campaign.json only
    (tmp_path / "runs" / "config_id=g5-x" / "batch=0").mkdir(parents=True)
    with pytest.raises(ConfigError, match="earlier build"):
        run_batches(spark, spec, tmp_path, resume=True, progress=False)


def test_task_failure_loses_and_duplicates_nothing(spark: Any, baseline: Any, tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    run_batches(spark, _spec(inject_failure=str(markers)), tmp_path / "out", progress=False)
    assert sorted(p.name for p in markers.iterdir()) == ["failed-batch-0", "failed-batch-1",
                                                         "failed-batch-2"]
    assert _rows(spark, tmp_path / "out") == baseline[1]


def test_report_and_kafka_ordering(spark: Any, baseline: Any, tmp_path: Path) -> None:
    result, _ = baseline
    summary = result.summary
    checks = {e["name"]: e for e in expectations(summary)}
    assert checks["no committed loss with acks=all, min.insync.replicas=2, clean elections"]["ok"]
    assert checks["loss with acks=1 and unclean election"]["ok"], checks
    assert checks["no duplicates with idempotence"]["ok"]
    strong = [r for r in summary["by_config"] if r["acks"] == "all" and not r["unclean"]]
    weak = [r for r in summary["by_config"] if r["acks"] == "1" and r["unclean"]]
    assert max(r["acked_loss_rate"] or 0 for r in strong) < min(r["acked_loss_rate"] or 0 for r in weak)
    paths = write_report(summary, {"seed": SEED}, tmp_path)
    md = paths["md"].read_text()
    for title in ("Producer Guarantees Summary", "What Messages Are Lost When Leader Fails",
                  "Downtime During Leader Failure", "Disagreements with the seed"):
        assert title in md
    with_latency = [r for r in summary["by_config"] if r.get("latency_pct_ms")]
    assert with_latency and all(len(r["latency_ci_ms"]) == 2 for r in with_latency)
    assert all(lo <= hi for r in with_latency for lo, hi in r["latency_ci_ms"])
    assert "bootstrap over runs" in md
    page = paths["html"].read_text()
    assert page.startswith("<!doctype html>")
    # rendered from the markdown by a CommonMark library: emphasis and tables, no literal markup
    assert "<em>Acked writes lost</em>" in page and "*Acked" not in page
    assert page.count("<table>") == md.count("\n|---")
    assert '<img src="plots/loss_by_config.png"' in page
    for name in ("loss_by_config", "downtime_phases"):
        assert paths[name].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_local_cluster_gives_the_same_rows(spark: Any, baseline: Any, cluster_run: Any) -> None:
    proc, out = cluster_run
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode in (0, 1), stderr[-2000:]
    assert json.loads(stdout)["summary"]["runs"] == RUNS
    assert _rows(spark, out) == baseline[1]


#: summary.json keys that measure the deployment, not the campaign (wall time and its rate).
_TIMINGS = ("seconds", "runs_per_second")


def _summary(out: Path) -> dict[str, Any]:
    data = json.loads((out / "summary.json").read_text())
    return {k: v for k, v in data.items() if k not in _TIMINGS}


def test_the_summary_is_a_function_of_seed_and_grid_alone(baseline: Any, cluster_run: Any) -> None:
    """The same campaign in ``local[2]`` (4 tasks per batch) and in ``local-cluster[2,1,1024]``
    (separate executor processes, the CLI's own partitioning): every figure of ``summary.json``
    the same, the produce-latency bootstrap intervals included (their resampling follows the
    runs' ids, not the order rows reach the driver)."""
    proc, out = cluster_run
    if proc.poll() is None:
        proc.communicate(timeout=300)
    local, cluster = _summary(baseline[0].out), _summary(out)
    assert any(row.get("latency_ci_ms") for row in local["by_config"]), "no bootstrap interval was computed"
    assert json.dumps(local, sort_keys=True) == json.dumps(cluster, sort_keys=True)
