"""Aggregations in Spark: per configuration, per fault kind, per record state, per violation.

Everything here is a DataFrame expression over the result rows (``read_runs``) and ends in a
small ``collect()`` of plain dicts, so the report never touches the raw rows. Rates are over
runs (``*_runs``: the share of runs where it happened) and over records (``*_rate``: lost
per acknowledged / per committed record); distributions are exact percentiles over the rows
(``percentile``), produce latency over every acknowledged record (``explode``).

:func:`summarize` returns a JSON-ready dict, written to ``<out>/summary.json`` by the
campaign driver; :mod:`~epochlab.campaigns.report` renders it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["by_config", "by_state", "downtime", "summarize", "violations"]

KEYS = ["config_id", "generation", "acks", "min_insync_replicas", "replication_factor",
        "unclean", "idempotence"]
STATES = ("committed", "replicated", "leader_only", "acked_unreplicated", "acked_isr", "unsent")
PHASES = ("detection_ms", "election_ms", "propagation_ms", "producer_recovery_ms",
          "consumer_recovery_ms", "offline_ms")


def _f() -> Any:
    from pyspark.sql import functions as F

    return F


def _ratio(num: Any, den: Any) -> Any:
    F = _f()
    return F.when(den > 0, num / den).otherwise(F.lit(None).cast("double"))


def by_config(df: Any, extra_keys: tuple[str, ...] = (), latency: bool = True) -> list[dict[str, Any]]:
    """One dict per configuration (and per ``extra_keys``, e.g. ``("fault",)``): runs, the
    loss / duplication / order rates, offline time and produce latency distributions, protocol
    violations."""
    F = _f()
    keys = KEYS + list(extra_keys)
    base = df.groupBy(*keys).agg(
        F.count("*").alias("runs"),
        F.sum("sent").alias("sent"), F.sum("acked").alias("acked"),
        F.sum("acked_lost").alias("acked_lost"),
        F.avg((F.col("acked_lost") > 0).cast("int")).alias("acked_loss_runs"),
        F.sum("committed").alias("committed"), F.sum("committed_lost").alias("committed_lost"),
        F.avg((F.col("committed_lost") > 0).cast("int")).alias("committed_loss_runs"),
        F.sum("duplicates").alias("duplicates"),
        F.avg((F.col("duplicates") > 0).cast("int")).alias("duplicate_runs"),
        F.sum("out_of_order").alias("out_of_order"),
        F.avg((F.col("out_of_order") > 0).cast("int")).alias("out_of_order_runs"),
        F.avg("offline_ms").alias("offline_mean_ms"),
        F.percentile("offline_ms", [0.5, 0.9, 0.99]).alias("offline_pct_ms"),
        F.max("offline_ms").alias("offline_max_ms"),
        F.avg((F.col("offline_ms") > 0).cast("int")).alias("offline_runs"),
        F.percentile("producer_recovery_ms", [0.5, 0.9]).alias("write_outage_pct_ms"),
        F.sum(F.col("protocol_violation").cast("int")).alias("violation_runs"),
        F.sum(F.when(F.size("allowed") > 0, 1).otherwise(0)).alias("allowed_runs"),
    )
    if latency:
        lat = (df.select(*keys, F.explode("latency_ms").alias("latency"))
               .groupBy(*keys).agg(F.percentile("latency", [0.5, 0.99]).alias("latency_pct_ms"),
                                   F.avg("latency").alias("latency_mean_ms")))
        base = base.join(lat, keys, "left")
        # per run: its latencies, for the bootstrap over runs (cluster bootstrap: the sends of
        # one run are not independent, the runs are), in run id order: collect_list gathers
        # rows in the order they arrive, which depends on the partitioning (local[1],
        # local[2] and a cluster resampled the same runs differently), the draws must not
        runs = df.groupBy(*keys).agg(
            F.sort_array(F.collect_list(F.struct("run_id", "latency_ms"))).alias("_latency_by_run"))
        base = base.join(runs, keys, "left")
    joined = (base
              .withColumn("acked_loss_rate", _ratio(F.col("acked_lost"), F.col("acked")))
              .withColumn("committed_loss_rate", _ratio(F.col("committed_lost"), F.col("committed")))
              .withColumn("duplicate_rate", _ratio(F.col("duplicates"), F.col("acked")))
              .withColumn("out_of_order_rate", _ratio(F.col("out_of_order"), F.col("acked")))
              .orderBy(*keys))
    rows = [_plain(r.asDict(recursive=True)) for r in joined.collect()]
    for row in rows:
        by_run = row.pop("_latency_by_run", None)
        if by_run is not None:
            row["latency_ci_ms"] = bootstrap_percentiles([r["latency_ms"] for r in by_run], (0.5, 0.99))
    return rows


BOOTSTRAP_RESAMPLES = 200


def _percentile(sorted_values: list[int], q: float) -> float:
    """Linear interpolation between closest ranks (Spark's ``percentile``)."""
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def bootstrap_percentiles(latency_by_run: list[list[int]], qs: tuple[float, ...],
                          resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> list[list[float]] | None:
    """95% intervals ``[[lo, hi], ...]`` of the percentiles ``qs`` of the pooled latencies, by a
    bootstrap over runs (resample runs with replacement, pool their latencies, take the
    percentile; the 2.5th and 97.5th of ``resamples`` such values). ``None`` without data.
    The resampling runs in Rust (``epochlab._core._bootstrap_draws``: the draws and numbers
    of :func:`bootstrap_draws_plain`, 6.5 s of the default campaign's summary in Python)."""
    import random

    from epochlab import _core

    runs = [r for r in latency_by_run if r]
    if not runs:
        return None
    draws = _core._bootstrap_draws(runs, list(qs), resamples, random.Random(seed))
    out = []
    for values in draws:
        values.sort()
        out.append([round(values[int(0.025 * (resamples - 1))], 1), round(values[int(0.975 * (resamples - 1))], 1)])
    return out


def bootstrap_draws_plain(runs: list[list[int]], qs: tuple[float, ...], resamples: int,
                          rng: Any) -> list[list[float]]:
    """The resampling loop of :func:`bootstrap_percentiles`, plainly: per quantile, the
    ``resamples`` pooled percentiles in draw order (``runs`` without empty ones; ``rng`` a
    ``random.Random``, drawn from)."""
    runs = [sorted(r) for r in runs]
    draws: list[list[float]] = [[] for _ in qs]
    for _ in range(resamples):
        pooled = sorted(v for _ in runs for v in runs[rng.randrange(len(runs))])
        for i, q in enumerate(qs):
            draws[i].append(_percentile(pooled, q))
    return draws


def by_state(df: Any, keys: tuple[str, ...] = ("acks", "min_insync_replicas", "replication_factor",
                                                "unclean", "idempotence")) -> list[dict[str, Any]]:
    """Record states at the instant of the fault and how many of each were lost, per group
    (default: per configuration in the latest generation; filter ``df`` first)."""
    F = _f()
    aggs = []
    for s in STATES:
        aggs += [F.sum(f"at_fault_{s}").alias(s), F.sum(f"at_fault_{s}_lost").alias(f"{s}_lost")]
    aggs.append(F.sum("at_fault_unsent_failed").alias("unsent_failed"))
    rows = df.groupBy(*keys).agg(F.count("*").alias("runs"), *aggs).orderBy(*keys).collect()
    return [_plain(r.asDict()) for r in rows]


def downtime(df: Any, keys: tuple[str, ...] = ("fault",)) -> list[dict[str, Any]]:
    """Distribution (min, p50, p90, max, and how many runs had the phase) of every failover
    phase, per group."""
    F = _f()
    aggs = []
    for p in PHASES:
        aggs += [F.count(p).alias(f"{p}_n"), F.min(p).alias(f"{p}_min"),
                 F.percentile(p, [0.5, 0.9]).alias(f"{p}_pct"), F.max(p).alias(f"{p}_max")]
    rows = df.groupBy(*keys).agg(F.count("*").alias("runs"), *aggs).orderBy(*keys).collect()
    return [_plain(r.asDict(recursive=True)) for r in rows]


def violations(df: Any) -> list[dict[str, Any]]:
    """Distinct protocol violations by signature: runs, configurations, generations, and the
    first run (lowest run id) to reproduce and shrink."""
    F = _f()
    exploded = df.select("config_id", "generation", "run_id", "seed",
                         F.explode("violations").alias("signature"))
    rows = (exploded.groupBy("signature")
            .agg(F.count("*").alias("runs"),
                 F.sort_array(F.collect_set("generation")).alias("generations"),
                 F.countDistinct("config_id").alias("configs"),
                 F.min(F.struct("run_id", "config_id", "seed")).alias("first"))
            .orderBy(F.desc("runs"), "signature").collect())
    return [_plain(r.asDict(recursive=True)) for r in rows]


def allowed(df: Any) -> list[dict[str, Any]]:
    """Findings the configuration allows, by signature and generation (counts only)."""
    F = _f()
    rows = (df.select("generation", F.explode("allowed").alias("signature"))
            .groupBy("signature").agg(F.count("*").alias("runs")).orderBy(F.desc("runs")).collect())
    return [_plain(r.asDict()) for r in rows]


def summarize(df: Any) -> dict[str, Any]:
    """Everything the report needs, as plain JSON data."""
    F = _f()
    df = df.cache()
    totals = df.agg(F.count("*").alias("runs"), F.countDistinct("config_id").alias("configs"),
                    F.sum(F.col("error").isNotNull().cast("int")).alias("errors")).collect()[0]
    from epochlab.generations import Generation

    generations = sorted((Generation.parse(r["generation"]) for r in
                          df.select("generation").distinct().collect()))
    latest = generations[-1].label if generations else None
    strong = df.filter((F.col("generation") == latest) & (F.col("replication_factor") == 3)
                       & ~F.col("unclean") & (F.col("acks") == "all")
                       & (F.col("min_insync_replicas") == 2))
    out = {
        "latest_generation": latest, "generations": [g.label for g in generations],
        "downtime_latest": downtime(strong, ("fault",)),
        "runs": totals["runs"], "configs": totals["configs"], "errors": totals["errors"],
        "by_config": by_config(df),
        "by_config_fault": by_config(df, ("fault",), latency=False),
        "by_state": by_state(df, ("generation", "acks", "min_insync_replicas",
                                  "replication_factor", "unclean", "idempotence")),
        "downtime": downtime(df, ("generation", "fault")),
        "violations": violations(df),
        "allowed": allowed(df),
        "faults": [_plain(r.asDict()) for r in df.groupBy("fault").count().orderBy("fault").collect()],
    }
    df.unpersist()
    return out


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    """Spark Row values to JSON-ready values (floats rounded, lists kept)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, float):
            out[k] = round(v, 6)
        elif isinstance(v, list):
            out[k] = [round(x, 6) if isinstance(x, float) else x for x in v]
        elif isinstance(v, dict):
            out[k] = _plain(v)
        else:
            out[k] = v
    return out
