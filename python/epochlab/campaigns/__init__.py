"""Spark campaigns: distributed fuzzing and configuration sweeps, measured against the seeds.

* :mod:`~epochlab.campaigns.grid` - grid files (TOML/JSON), validation, the default grid
* :mod:`~epochlab.campaigns.runs` - one run: workload schedule, execution, one flat result row
* :mod:`~epochlab.campaigns.spark` - session, run descriptions, ``mapInArrow``, Parquet, resume
* :mod:`~epochlab.campaigns.aggregate` - Spark aggregations per configuration, state, violation
* :mod:`~epochlab.campaigns.report` - Markdown/HTML report and PNG plots, the seed 002 tables
* :mod:`~epochlab.campaigns.driver` - a whole campaign: batches, summary, shrinking, report
* :mod:`~epochlab.campaigns.standalone` - a standalone Spark cluster on this machine (a master
  and workers from pyspark's own ``spark-class``), started and stopped by a context manager
* :mod:`~epochlab.campaigns.cli` - ``epochlab campaign``

PySpark is optional (``pip install "epochlab[spark]"``): only ``spark``, ``aggregate`` and
``driver`` import it, when called. See ``docs/campaigns.md``.
"""

from epochlab.campaigns.grid import DEFAULT_GRID, Grid, RunConfig, default_grid, load_grid, parse_grid
from epochlab.campaigns.runs import ROW_FIELDS, build_schedule, run_one, run_seed

__all__ = [
    "DEFAULT_GRID",
    "Grid",
    "ROW_FIELDS",
    "RunConfig",
    "build_schedule",
    "default_grid",
    "load_grid",
    "parse_grid",
    "run_one",
    "run_seed",
]
