"""Campaigns on Apache Spark: the DataFrame of run descriptions, the parallel map, the Parquet
layout, resume and progress (the session: ``epochlab.spark``).

A campaign of ``runs`` runs is cut into *batches* of ``batch_runs`` consecutive run ids; run
``r`` uses configuration ``configs[r % len(configs)]`` and seed
:func:`~epochlab.campaigns.runs.run_seed` ``(campaign seed, r)``. Each batch is one Spark job:

1. ``spark.range`` over the batch's run ids, with ``campaign_seed``, ``run_id``, ``config_id``
   and ``batch`` columns (the run descriptions; built by Spark, not shipped from the driver);
2. ``mapInArrow`` over it: each task rebuilds the grid from its JSON, runs its rows with
   :func:`~epochlab.campaigns.runs.run_one` and yields Arrow batches of result rows (nothing
   the task needs is pickled but strings and integers, docs/architecture.md style habit 8);
3. a shuffle by ``config_id`` into at most 8 shards, sorted by ``(config_id, run_id)`` within
   each, written as Parquet under ``<out>/runs/batch=<k>/`` (one file per shard) with *dynamic
   partition overwrite*: a batch run twice (a retried job, a resumed campaign) replaces its own
   directory and nothing else. Before cfa6e19 the rows were partitioned by ``config_id`` too:
   one small file per configuration and batch, 120 per batch with the default grid, whose
   writing cost more than a fifth of a 2,000-run batch and did not scale with cores; a
   directory in that layout is not resumed (:class:`~epochlab.errors.ConfigError`).

Rows are a pure function of (configuration, run id, campaign seed, build), so a retried or
speculative task produces identical rows, and Spark keeps the output of exactly one attempt.
``--resume`` reads what is there, treats a batch as done when it holds exactly its expected
(config, run) pairs, and runs the others again; readers deduplicate on ``(config_id, run_id)``
as a last line of defence. ``<out>/campaign.json`` records the seed, batch size and grid; a
resume with a different one is refused (:class:`~epochlab.errors.ConfigError` naming it).

Progress: a ``rich`` bar fed by polling ``SparkContext.statusTracker()`` (completed tasks of
the batch's map stage), no ``SparkListener``; under Spark Connect it advances per batch.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from epochlab.campaigns.grid import Grid
from epochlab.campaigns.runs import ROW_FIELDS
from epochlab.errors import ConfigError

__all__ = ["CampaignSpec", "DEFAULT_BATCH_RUNS", "batch_ranges", "read_runs", "run_batches",
           "spark_schema"]

DEFAULT_BATCH_RUNS = 2500
META = "campaign.json"
ROWS_PER_ARROW_BATCH = 64


#: Tasks of a batch per core (``defaultParallelism``) unless ``CampaignSpec.tasks_per_batch``
#: says: each task costs about 15 ms of the JVM's CPU and as much of the Python worker's in
#: local mode, which share the cores with the runs; two per core keep the cores busy to the
#: end of a batch (56ea8f2, docs/measurements.md: local[2] / local[1] 1.76-1.77x with eight
#: per core, 1.85-1.91x with two).
TASKS_PER_CORE = 2


@dataclass(frozen=True)
class CampaignSpec:
    """What a campaign runs: ``runs`` runs of ``grid`` from ``seed``, in batches of
    ``batch_runs``. ``inject_failure`` (tests only): a directory; the first attempt of task 0
    of every batch fails after it has produced some rows, leaving a marker file there."""

    grid: Grid
    runs: int
    seed: int = 0
    batch_runs: int = DEFAULT_BATCH_RUNS
    tasks_per_batch: int | None = None
    inject_failure: str | None = None

    def meta(self) -> dict[str, Any]:
        return {"format": "epochlab-campaign", "version": 1, "seed": self.seed,
                "runs": self.runs, "batch_runs": self.batch_runs, "grid": self.grid.to_dict()}


# -- layout -------------------------------------------------------------------------------

def batch_ranges(runs: int, batch_runs: int) -> list[tuple[int, int, int]]:
    """``(batch, first run id, end run id)``, half-open ``[first, end)``, covering
    ``[0, runs)``."""
    return [(k, lo, min(lo + batch_runs, runs)) for k, lo in enumerate(range(0, runs, batch_runs))]


def spark_schema() -> str:
    """The result rows' Spark DDL schema (``ROW_FIELDS`` plus ``batch``)."""
    types = {"string": "string", "int64": "bigint", "bool": "boolean",
             "list<int64>": "array<bigint>", "list<string>": "array<string>"}
    return ", ".join([f"{name} {types[t]}" for name, t in ROW_FIELDS.items()] + ["batch int"])


def _arrow_schema() -> Any:
    import pyarrow as pa

    types = {"string": pa.string(), "int64": pa.int64(), "bool": pa.bool_(),
             "list<int64>": pa.list_(pa.int64()), "list<string>": pa.list_(pa.string())}
    return pa.schema([(name, types[t]) for name, t in ROW_FIELDS.items()] + [("batch", pa.int32())])


def read_runs(spark: Any, out: str | Path) -> Any:
    """Every result row under ``<out>/runs``, one per ``(config_id, run_id)``."""
    return spark.read.parquet(str(Path(out) / "runs")).dropDuplicates(["config_id", "run_id"])


# -- the task -----------------------------------------------------------------------------

def _task(grid_json: str, campaign_seed: int, inject_failure: str | None) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function ``mapInArrow`` ships: it captures two strings-or-ints and a flag, and
    builds everything else inside the task."""

    def run_rows(batches: Iterator[Any]) -> Iterator[Any]:
        from epochlab.fuzz.executor import gc_for_many_runs

        with gc_for_many_runs():  # the task runs schedule after schedule
            yield from _rows(batches)

    def _rows(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        from epochlab.campaigns.runs import run_one

        grid = Grid.from_json(grid_json)
        configs = {c.config_id: c for c in grid.configs}
        schema = _arrow_schema()
        attempt_zero, first_task = _attempt()
        produced = 0
        for batch in batches:
            ids = batch.column("run_id").to_pylist()
            cids = batch.column("config_id").to_pylist()
            ks = batch.column("batch").to_pylist()
            for lo in range(0, len(ids), ROWS_PER_ARROW_BATCH):
                rows = []
                for run_id, cid, k in zip(ids[lo:lo + ROWS_PER_ARROW_BATCH],
                                          cids[lo:lo + ROWS_PER_ARROW_BATCH],
                                          ks[lo:lo + ROWS_PER_ARROW_BATCH]):
                    row = run_one(configs[cid], run_id, campaign_seed, grid)
                    row["batch"] = k
                    rows.append(row)
                yield pa.RecordBatch.from_pylist(rows, schema=schema)
                produced += len(rows)
                if inject_failure and attempt_zero and first_task and produced > 0:
                    marker = Path(inject_failure) / f"failed-batch-{ks[0]}"
                    marker.parent.mkdir(parents=True, exist_ok=True)
                    marker.write_text(f"{produced} rows produced before the failure\n")
                    raise RuntimeError("epochlab: injected task failure (first attempt)")

    return run_rows


def _attempt() -> tuple[bool, bool]:
    """(first attempt of this task?, first partition of its stage?)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:  # pragma: no cover - outside Spark
        return True, True
    return ctx.attemptNumber() == 0, ctx.partitionId() == 0


def _descriptions(spark: Any, spec: CampaignSpec, batch: int, lo: int, hi: int) -> Any:
    """The run descriptions of run ids ``[lo, hi)``: ``campaign_seed, run_id, config_id,
    batch``."""
    from pyspark.sql import functions as F

    ids = spec.grid.config_ids
    tasks = spec.tasks_per_batch or max(2, min(hi - lo, TASKS_PER_CORE * _parallelism(spark)))
    return (spark.range(lo, hi, 1, numPartitions=tasks)
            .select(F.lit(spec.seed).cast("bigint").alias("campaign_seed"),
                    F.col("id").alias("run_id"),
                    F.element_at(F.array(*[F.lit(c) for c in ids]),
                                 (F.col("id") % len(ids) + 1).cast("int")).alias("config_id"),
                    F.lit(batch).cast("int").alias("batch")))


def _parallelism(spark: Any) -> int:
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:  # Spark Connect: no SparkContext
        return 2


# -- driver -------------------------------------------------------------------------------

@dataclass
class BatchReport:
    ran: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)


def _check_meta(out: Path, spec: CampaignSpec, resume: bool) -> None:
    path = out / META
    if resume and path.exists():
        old = json.loads(path.read_text(encoding="utf-8"))
        new = spec.meta()
        for key in ("seed", "batch_runs", "grid"):
            if old.get(key) != new[key]:
                raise ConfigError(
                    f"{path}: {key}: --resume needs the campaign's own {key} "
                    f"(stored {json.dumps(old.get(key))[:80]}, given {json.dumps(new[key])[:80]})",
                    where=str(path), field=key, expected=old.get(key), got=new[key])
    elif not resume:
        for stale in ("runs", "violations"):
            if (out / stale).exists():
                shutil.rmtree(out / stale)
    out.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(META + ".tmp")
    tmp.write_text(json.dumps(spec.meta(), sort_keys=True, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)


def _done_batches(spark: Any, out: Path, spec: CampaignSpec) -> set[int]:
    """Batches whose rows are all there (exactly their (config, run) pairs, each once)."""
    from pyspark.sql import functions as F

    runs = out / "runs"
    if runs.exists() and any(runs.glob("config_id=*")):
        raise ConfigError(f"{runs}: written by an earlier build (runs/config_id=<id>/batch=<k>/); "
                          "this build writes runs/batch=<k>/ and cannot resume it: run the "
                          "campaign again without --resume, or with another --out",
                          where=str(runs), field="runs", expected="runs/batch=<k>/",
                          got="runs/config_id=<id>/batch=<k>/")
    if not runs.exists() or not any(runs.glob("batch=*")):
        return set()
    df = spark.read.parquet(str(runs)).select("batch", "config_id", "run_id")
    counts = {r["batch"]: (r["rows"], r["pairs"], r["lo"], r["hi"]) for r in
              df.groupBy("batch").agg(F.count("*").alias("rows"),
                                      F.countDistinct("config_id", "run_id").alias("pairs"),
                                      F.min("run_id").alias("lo"), F.max("run_id").alias("hi"))
              .collect()}
    done = set()
    for k, lo, hi in batch_ranges(spec.runs, spec.batch_runs):
        got = counts.get(k)
        if got is not None and got[0] == got[1] == hi - lo and got[2] == lo and got[3] == hi - 1:
            done.add(k)
    return done


def run_batches(spark: Any, spec: CampaignSpec, out: str | Path, *, resume: bool = False,
                progress: bool = True, stop_after: int | None = None) -> BatchReport:
    """Run every batch of ``spec`` not already complete under ``out`` (all of them unless
    ``resume``). ``stop_after`` (tests) stops after that many batches, as a killed campaign
    would. Returns which batches ran and which were skipped."""
    out = Path(out)
    _check_meta(out, spec, resume)
    done = _done_batches(spark, out, spec) if resume else set()
    report = BatchReport(skipped=sorted(done))
    todo = [b for b in batch_ranges(spec.runs, spec.batch_runs) if b[0] not in done]
    total = sum(hi - lo for _, lo, hi in todo)
    with _Progress(spark, total, enabled=progress) as bar:
        for k, lo, hi in todo:
            if stop_after is not None and len(report.ran) >= stop_after:
                break
            bar.start_batch(k, hi - lo)
            _run_batch(spark, spec, out, k, lo, hi)
            bar.finish_batch()
            report.ran.append(k)
    return report


def _run_batch(spark: Any, spec: CampaignSpec, out: Path, k: int, lo: int, hi: int) -> None:
    _set_job_group(spark, f"epochlab-batch-{k}", f"epochlab campaign batch {k}: runs [{lo}, {hi})")
    results = (_descriptions(spark, spec, k, lo, hi)
               .mapInArrow(_task(spec.grid.to_json(), spec.seed, spec.inject_failure), spark_schema()))
    shards = min(len(spec.grid.configs), 8)
    (results.repartition(shards, "config_id").sortWithinPartitions("config_id", "run_id")
     .write.mode("overwrite").option("partitionOverwriteMode", "dynamic")
     .partitionBy("batch").parquet(str(out / "runs")))


def _set_job_group(spark: Any, group: str, description: str) -> None:
    try:
        spark.sparkContext.setJobGroup(group, description)
    except Exception:  # Spark Connect: no SparkContext, no job groups
        pass


class _Progress:
    """A rich progress bar over runs; a thread polls the status tracker during a batch."""

    def __init__(self, spark: Any, total: int, enabled: bool) -> None:
        self.spark, self.total, self.enabled = spark, total, enabled
        self.base = 0
        self.size = 0
        self.group: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> _Progress:
        if not self.enabled:
            return self
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)

        self.bar = Progress(TextColumn("campaign"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("runs"), TimeElapsedColumn(), TimeRemainingColumn(),
                            transient=False)
        self.bar.start()
        self.task = self.bar.add_task("runs", total=self.total)
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self.enabled:
            if self._thread is not None:
                self._thread.join(timeout=2)
            self.bar.stop()

    def start_batch(self, k: int, size: int) -> None:
        self.group, self.size = f"epochlab-batch-{k}", size

    def finish_batch(self) -> None:
        self.base += self.size
        self.size = 0
        if self.enabled:
            self.bar.update(self.task, completed=self.base)

    def _poll(self) -> None:
        while not self._stop.wait(0.5):
            fraction = self._fraction()
            if fraction is not None:
                self.bar.update(self.task, completed=self.base + int(self.size * fraction))

    def _fraction(self) -> float | None:
        try:
            tracker = self.spark.sparkContext.statusTracker()
            group = self.group
            if group is None:
                return None
            stages = []
            for job_id in tracker.getJobIdsForGroup(group):
                job = tracker.getJobInfo(job_id)
                stages += list(job.stageIds) if job is not None else []
            if not stages:
                return None
            # the batch's first stage runs the simulations (range -> mapInArrow -> shuffle)
            stage = tracker.getStageInfo(min(stages))
            best = stage.numCompletedTasks / stage.numTasks if stage and stage.numTasks else 0.0
            return min(best, 1.0)
        except Exception:  # Spark Connect, or the context stopped
            return None
