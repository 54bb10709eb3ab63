"""A real Spark standalone cluster on this machine (one master, two workers of one core each,
started once for the module with :func:`epochlab.campaigns.standalone.standalone_cluster`):
a campaign's numbers do not depend on the deployment.

* the small grid campaign of ``tests/test_campaign_spark.py`` on ``local[1]``, ``local[2]`` and
  the cluster: the same ``summary.json`` byte for byte apart from timings and paths;
* the random and the guided fuzz engines on the cluster: the same summary (and for the guided
  engine the same corpus) as one process;
* leaving the context manager, with an application's executors running, leaves no process of
  the cluster behind (master, workers, executors, their Python workers);
* the cluster comes up while another process holds Spark's REST submission port (6066), as
  the module's fixture starts it.

The cluster is stopped by the last test (the module fixture stops it otherwise).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from epochlab.campaigns import parse_grid  # noqa: E402
from epochlab.campaigns.driver import run_campaign  # noqa: E402
from epochlab.campaigns.spark import CampaignSpec  # noqa: E402
from epochlab.campaigns.standalone import MasterURL, standalone_cluster  # noqa: E402
from epochlab.fuzz.campaign import Campaign  # noqa: E402
from epochlab.generations import Generation  # noqa: E402
from epochlab.spark import build_session  # noqa: E402

GRID = {"axes": {"generation": ["strict-min-isr"], "acks": ["1", "all"], "min.insync.replicas": [2],
                 "replication.factor": [3], "unclean.leader.election.enable": [False, True],
                 "enable.idempotence": [False, True]}}
RUNS, BATCH, SEED = 96, 48, 3
APP = "epochlab-standalone-tests"
#: summary.json keys that measure the deployment, not the campaign (wall time and its rate).
_TIMINGS = ("seconds", "runs_per_second")


@contextlib.contextmanager
def _port_held(port: int) -> Iterator[None]:
    """``port`` of every address held by this process while the block runs (if another
    process holds it already, that serves as well)."""
    with socket.socket() as s:
        with contextlib.suppress(OSError):
            s.bind(("0.0.0.0", port))
            s.listen()
        yield


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[MasterURL, contextlib.ExitStack]]:
    stack = contextlib.ExitStack()
    # started while Spark's REST submission port (6066) is taken: the master runs without
    # that server and must come up all the same (a master that needed the port stood by
    # and registered no worker when a process beside the tests held it)
    with _port_held(6066):
        url = stack.enter_context(standalone_cluster(workers=2, cores=1, memory="1g"))
    assert isinstance(url, MasterURL)
    with stack:
        yield url, stack


def _master_state(url: MasterURL) -> dict[str, Any]:
    """The master's ``/json/`` (no proxy for the loopback)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"{url.web_ui}/json/", timeout=10) as response:
        state: dict[str, Any] = json.loads(response.read())
    return state


def _campaign_summary(master: str, out: Path, check: Any = None) -> str:
    """``summary.json`` of the campaign run on ``master``, without timings, ``out`` as OUT."""
    spec = CampaignSpec(parse_grid(GRID, "test grid"), runs=RUNS, seed=SEED, batch_runs=BATCH)
    spark = build_session(master, app_name=APP)
    try:
        result = run_campaign(spark, spec, out, progress=False, shrink=False, report=False)
        assert result.complete
        if check is not None:
            check(spark)
    finally:
        spark.stop()
    data = json.loads((out / "summary.json").read_text())
    assert data["runs"] == RUNS
    kept = {k: v for k, v in data.items() if k not in _TIMINGS}
    return json.dumps(kept, sort_keys=True, indent=1).replace(str(out), "OUT")


def test_a_campaign_summary_is_the_same_on_local_and_standalone(cluster: Any, tmp_path: Path) -> None:
    url, _ = cluster

    def on_the_cluster(spark: Any) -> None:
        assert spark.sparkContext.master == url
        state = _master_state(url)
        assert state["aliveworkers"] == 2
        # the application ran there, with an executor of one core on each worker
        apps = [a for a in state["activeapps"] if a["name"] == APP]
        assert len(apps) == 1 and apps[0]["cores"] == 2, apps

    # local first: this process's driver JVM starts with the first session, and a local
    # master's gets LOCAL_JAVA_OPTIONS (the standalone application's driver only schedules)
    one = _campaign_summary("local[1]", tmp_path / "local1")
    two = _campaign_summary("local[2]", tmp_path / "local2")
    standalone = _campaign_summary(url, tmp_path / "standalone", on_the_cluster)
    assert '"latency_ci_ms"' in one, "no bootstrap interval was computed"
    assert two == one
    assert standalone == one


def test_the_fuzz_engine_on_the_cluster_finds_what_one_process_finds(cluster: Any, tmp_path: Path) -> None:
    url, _ = cluster

    def summary(**kw: Any) -> str:
        out = tmp_path / f"out-{len(kw)}"
        c = Campaign(Generation.KIP_279, seed=2, seconds=None, runs=45, out=out, **kw)
        c.run()
        return json.dumps(c.summary(deployment=False), sort_keys=True)

    one = summary()
    assert '"runs": 45' in one
    assert summary(master=url) == one


def test_the_guided_engine_on_the_cluster_runs_what_one_process_runs(cluster: Any, tmp_path: Path) -> None:
    from epochlab.fuzz.guided import BATCH, INITIAL, GuidedSearch

    url, _ = cluster

    def summary(**kw: Any) -> tuple[str, str]:
        out = tmp_path / f"guided-{len(kw)}"
        search = GuidedSearch(Generation.KIP_279, seed=4, seconds=None, runs=INITIAL + BATCH + 5,
                              out=out, **kw)
        search.run()
        return (json.dumps(search.summary(deployment=False), sort_keys=True),
                (out / "corpus" / "inputs.jsonl").read_text())

    assert summary(master=url) == summary()


def _processes() -> dict[int, tuple[int, str, str]]:
    """Every process: pid -> (process group, state letter, working directory)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cwd = os.readlink(entry / "cwd")
        except OSError:  # gone meanwhile, or not ours to look at
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        found[int(entry.name)] = (int(fields[2]), fields[0], cwd)
    return found


def _ours(pids: tuple[int, ...], directory: Path) -> dict[int, tuple[int, str, str]]:
    """Live processes of the cluster: in the group of its master or a worker, or running in
    its directory (executors and their Python workers run in a worker's work directory)."""
    return {pid: info for pid, info in _processes().items()
            if info[1] != "Z" and (info[0] in pids or info[2].startswith(str(directory)))}


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_leaving_the_context_stops_every_process(cluster: Any) -> None:
    url, stack = cluster
    pids, directory = url.pids, url.directory
    assert set(pids) <= set(_ours(pids, directory))
    spark = build_session(url, app_name=APP)
    try:
        # an application with live executors and Python workers when the cluster stops
        assert sorted(spark.sparkContext.parallelize(range(8), 4).map(lambda x: x * x).collect()) == \
            [x * x for x in range(8)]
        running = _ours(pids, directory)
        executors = [pid for pid, (group, _, _) in running.items() if group in pids[1:] and pid not in pids]
        assert len(executors) >= 2, running
        stack.close()
        left = _ours(pids, directory)
        deadline = time.monotonic() + 30  # Python workers exit when their executor's pipe closes
        while left and time.monotonic() < deadline:
            time.sleep(0.5)
            left = _ours(pids, directory)
        assert not left, left
        for pid in pids:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
        assert not directory.exists()
    finally:
        spark.stop()
