"""A SparkSession as every epochlab job on Spark wants it: the fuzz engine's chunks
(``epochlab fuzz --master``) and the campaigns (``epochlab campaign``). It imports nothing of
epochlab, so both can use it whatever their place in the layers (``docs/architecture.md``).
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import sys
import tempfile
from typing import Any

__all__ = ["DEFAULT_MASTER", "LOCAL_JAVA_OPTIONS", "build_session"]

DEFAULT_MASTER = "local[*]"
_LOCAL = re.compile(r"^local(\[(\*|\d+)\])?$")

#: The JVM of a local master (``local[N]``: driver and executor in one process) shares the
#: machine's cores with the Python workers that run the simulations; its own work is small
#: (rows of ~600 bytes), most of its CPU went to the JIT's optimising compiler and the parallel
#: collector. With the client compiler only and the serial collector, a 2,000-run batch on
#: 2 cores cost the JVM 1.2 s of CPU instead of 2.7 s and the batch took 7.2 s instead of 7.7
#: (``local[1]``: 12.2 s instead of 13.0). Cluster masters keep the JVM's defaults.
LOCAL_JAVA_OPTIONS = " -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def build_session(master: str | None = None, app_name: str = "epochlab-campaign",
                  conf: dict[str, str] | None = None) -> Any:
    """A SparkSession for ``master`` (default ``local[*]``).

    ``local`` / ``local[N]`` / ``local[*]`` become ``local[N,4]``: Spark's local mode
    otherwise never retries a failed task, while a cluster retries it
    (``spark.task.maxFailures``, 4). Scratch space (``spark.local.dir``,
    ``spark.sql.warehouse.dir``) goes to a fresh temporary directory, never the working
    directory; a local master's JVM gets :data:`LOCAL_JAVA_OPTIONS`. ``PYSPARK_PYTHON``
    defaults to this interpreter, so executor processes
    (``local-cluster``) import the same epochlab; on a real cluster set it to the packed
    environment (``docs/campaigns.md``)."""
    from pyspark.sql import SparkSession

    master = master or DEFAULT_MASTER
    match = _LOCAL.match(master)
    if match:
        master = f"local[{match.group(2) or 1},4]"
    java_options = ""
    if "://" not in master or master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master.startswith("local"):
        java_options = LOCAL_JAVA_OPTIONS
    scratch = tempfile.mkdtemp(prefix="epochlab-spark-")
    atexit.register(shutil.rmtree, scratch, True)
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.local.dir", scratch)
               .config("spark.sql.warehouse.dir", os.path.join(scratch, "warehouse"))
               .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={scratch}{java_options}")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "8")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
