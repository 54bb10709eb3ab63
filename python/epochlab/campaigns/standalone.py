"""A Spark standalone cluster on this machine, for tests and for campaigns on one host.

:func:`standalone_cluster` starts a master and ``workers`` workers with PySpark's own launcher
(``<pyspark package>/bin/spark-class``, the jars the pip package ships; no Spark download),
all on ``127.0.0.1``, waits until every worker has registered with the master, yields the
master URL ``spark://127.0.0.1:<port>`` and stops every process it started on the way out,
normal or not::

    from epochlab.spark import build_session
    from epochlab.campaigns.standalone import standalone_cluster

    with standalone_cluster(workers=2, cores=1, memory="1g") as master:
        spark = build_session(master)
        ...
        spark.stop()

Unlike ``local[N]`` (driver and executors in one JVM) and ``local-cluster[...]`` (a test mode
of Spark's own), this is the deployment a real cluster uses: a master JVM, worker JVMs, and
executor JVMs the workers launch for each application, each with its Python workers.

JVMs. Every JVM of the cluster, the executors' included, runs with :data:`JAVA_OPTIONS` (no
optimising JIT, serial collector: they share the cores with the Python workers) and the master
and workers with a heap of :data:`DAEMON_MEMORY`.

Processes. Each master and worker runs in its own process group (``start_new_session``), so
the executors a worker launches share its group; on exit every group gets ``SIGTERM``, then
``SIGKILL`` after :data:`STOP_GRACE` seconds, and every process started is waited for. With
util-linux's ``setpriv`` (Linux), the master and workers also get ``SIGTERM`` should the thread
that started them end without leaving the context (the process killed, say:
``PR_SET_PDEATHSIG``), so enter it in a thread that outlives the cluster, as a ``with`` block
in the main thread does; a worker's executors exit with their worker. Ports are free ports of
``127.0.0.1`` (bound to port 0, then released) and may not drift (``spark.port.maxRetries=0``):
a port taken in between fails the start, which is retried with new ports. The master's REST
submission server, which Spark binds to the fixed port 6066 and which nothing here uses (jobs
go through the master URL), is off (``spark.master.rest.enabled=false``): with it on, any
other process holding 6066 left the master standing by, registering no worker. Everything the
cluster writes (``SPARK_LOCAL_DIRS``, ``SPARK_WORKER_DIR``, the logs, an empty
``SPARK_CONF_DIR``) lives in a temporary directory removed on exit.

Python. Executors run the interpreter named by the *driver's* ``PYSPARK_PYTHON``;
:func:`~epochlab.spark.build_session` sets it only for ``local*`` masters, so while
the cluster is up ``PYSPARK_PYTHON`` defaults to this interpreter (``sys.executable``: the
executors import the same epochlab) and is restored on exit.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from epochlab.errors import ConfigError, InvalidArgumentError

__all__ = ["DAEMON_MEMORY", "JAVA_OPTIONS", "DEFAULT_START_TIMEOUT", "STOP_GRACE",
           "MasterURL", "standalone_cluster"]

#: Seconds to wait for every worker to register before giving up (JVM start-up on a loaded
#: two-core machine takes 5-20 s per process).
DEFAULT_START_TIMEOUT = 120.0
#: Seconds between ``SIGTERM`` and ``SIGKILL`` on exit.
STOP_GRACE = 10.0
#: Heap of the master and worker JVMs (``SPARK_DAEMON_MEMORY``; Spark's default is 1g): they
#: only keep the cluster's bookkeeping, the work happens in the executors.
DAEMON_MEMORY = "256m"
#: Every JVM of the cluster (master, workers, and the executors the workers launch) shares
#: this machine's cores with the executors' Python workers, which run the simulations: no
#: optimising JIT and the serial collector, as ``LOCAL_JAVA_OPTIONS`` for a local master's JVM.
#: Passed in ``JAVA_TOOL_OPTIONS`` (after the caller's own), which executors inherit from their
#: worker; options on a JVM's command line come later and win, so an application's
#: ``spark.executor.extraJavaOptions`` overrides them. The small campaign of
#: ``tests/test_spark_standalone.py`` (its batches and aggregation, the executors started) on
#: two workers of one core, on a two-core machine loaded by other work, alternate runs: 18-23 s
#: with these options, 37-66 s with the JVM's defaults.
JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

HOST = "127.0.0.1"
_MEMORY = re.compile(r"^[1-9][0-9]*([kmgtp]b?|b)?$", re.IGNORECASE)
_PORT_CLASH = ("BindException", "Address already in use", "Failed to bind", "could not bind")
_START_ATTEMPTS = 3
_LOG_TAIL_LINES = 25
_LOG_TAIL_BYTES = 16384


class MasterURL(str):
    """The master URL (``spark://127.0.0.1:<port>``), a plain ``str``, with what a caller may
    want to look at: ``web_ui`` (the master's web UI, ``http://127.0.0.1:<port>``), ``pids``
    (the master's, then each worker's; each leads its own process group) and ``directory``
    (scratch space and ``logs/``; removed on exit)."""

    web_ui: str
    pids: tuple[int, ...]
    directory: Path

    def __new__(cls, url: str, web_ui: str, pids: tuple[int, ...], directory: Path) -> MasterURL:
        self = super().__new__(cls, url)
        self.web_ui, self.pids, self.directory = web_ui, pids, directory
        return self

    def __reduce__(self) -> tuple[Any, ...]:  # pickles (to Spark tasks, say) as the plain URL
        return (str, (str(self),))


@dataclass
class _Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    handle: IO[bytes]


@contextlib.contextmanager
def standalone_cluster(workers: int = 2, cores: int = 1, memory: str = "1g", *,
                       timeout: float = DEFAULT_START_TIMEOUT) -> Iterator[str]:
    """A Spark standalone master and ``workers`` workers of ``cores`` cores and ``memory``
    (Spark's notation: ``512m``, ``1g``) each on ``127.0.0.1``; yields the master URL (a
    :class:`MasterURL`) once all of them have registered, and stops them all on exit.

    An application's executors ask for ``spark.executor.memory`` (1g unless set) and, in
    standalone mode, every core of a worker: with the defaults, one executor of one core per
    worker. A worker with less memory than an executor asks for never runs one (the
    application waits); give such applications a smaller ``spark.executor.memory``.

    Raises :class:`~epochlab.errors.InvalidArgumentError` for a bad argument and
    :class:`~epochlab.errors.ConfigError` when PySpark or Java is missing, or when the cluster
    is not up within ``timeout`` seconds or a process of it exits while it starts (the message
    ends with the tail of every log; ``err.logs`` maps each log's name to its tail)."""
    for name, value in (("workers", workers), ("cores", cores)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgumentError(f"argument {name!r} = {value!r} is invalid: expected an integer >= 1",
                                       argument=name, value=value, domain=">= 1")
    if not isinstance(memory, str) or not _MEMORY.match(memory):
        raise InvalidArgumentError(f"argument 'memory' = {memory!r} is invalid: expected a size such as "
                                   "'512m' or '1g'", argument="memory", value=memory,
                                   domain="<digits>[k|m|g|t|p][b]")
    if not timeout > 0:
        raise InvalidArgumentError(f"argument 'timeout' = {timeout!r} is invalid: expected seconds > 0",
                                   argument="timeout", value=timeout, domain="> 0")
    spark_home = _spark_home()
    _check_java()
    root = Path(tempfile.mkdtemp(prefix="epochlab-standalone-"))
    processes: list[_Process] = []
    set_python = "PYSPARK_PYTHON" not in os.environ
    try:
        url = _start(spark_home, root, processes, workers, cores, memory, timeout)
        if set_python:
            os.environ["PYSPARK_PYTHON"] = sys.executable
        yield url
    finally:
        try:
            _stop(processes)
        finally:
            if set_python and os.environ.get("PYSPARK_PYTHON") == sys.executable:
                del os.environ["PYSPARK_PYTHON"]
            shutil.rmtree(root, ignore_errors=True)


# -- start --------------------------------------------------------------------------------

def _spark_home() -> Path:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ConfigError("a Spark standalone cluster needs PySpark: pip install \"epochlab[spark]\"",
                          where="standalone_cluster", field="pyspark", expected="pyspark installed",
                          got=None)
    home = Path(spec.origin).parent
    if not (home / "bin" / "spark-class").exists() or not (home / "jars").is_dir():
        raise ConfigError(f"{home}: not a PySpark package with bin/spark-class and jars/",
                          where=str(home), field="pyspark", expected="bin/spark-class and jars/",
                          got=sorted(p.name for p in home.iterdir()))
    return home


def _check_java() -> None:
    java_home = os.environ.get("JAVA_HOME")
    java = Path(java_home) / "bin" / "java" if java_home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        raise ConfigError("a Spark standalone cluster needs Java (17 or 21): none on PATH"
                          + (f" nor at $JAVA_HOME/bin/java ({java_home})" if java_home else ""),
                          where="standalone_cluster", field="java", expected="java on PATH or JAVA_HOME",
                          got=java_home)


def _free_ports(count: int) -> list[int]:
    """``count`` distinct ports of ``127.0.0.1`` free a moment ago (bound together to port 0)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((HOST, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _environment(spark_home: Path, root: Path) -> dict[str, str]:
    env = dict(os.environ)
    for key in ("SPARK_ENV_LOADED", "SPARK_MASTER_HOST", "SPARK_MASTER_PORT", "SPARK_WORKER_PORT"):
        env.pop(key, None)
    env.update({
        "SPARK_HOME": str(spark_home),
        "SPARK_CONF_DIR": str(root / "conf"),       # empty: no stray spark-env.sh or defaults
        "SPARK_LOCAL_IP": HOST,
        "SPARK_LOCAL_DIRS": str(root / "local"),
        "SPARK_LOG_DIR": str(root / "logs"),
        "SPARK_PID_DIR": str(root),
        "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
        "SPARK_DAEMON_JAVA_OPTS": (env.get("SPARK_DAEMON_JAVA_OPTS", "")
                                   + " -Dspark.port.maxRetries=0 -Dspark.master.rest.enabled=false").strip(),
        "JAVA_TOOL_OPTIONS": (env.get("JAVA_TOOL_OPTIONS", "") + " " + JAVA_OPTIONS).strip(),
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
    })
    return env


def _start(spark_home: Path, root: Path, processes: list[_Process], workers: int, cores: int,
           memory: str, timeout: float) -> MasterURL:
    """Start the master and the workers (again with new ports, at most
    :data:`_START_ATTEMPTS` times, when a port was taken in between) and wait for them."""
    for sub in ("conf", "local", "logs", "work"):
        (root / sub).mkdir(exist_ok=True)
    env = _environment(spark_home, root)
    spark_class = str(spark_home / "bin" / "spark-class")
    deadline = time.monotonic() + timeout
    for attempt in range(1, _START_ATTEMPTS + 1):
        port, web_port, *worker_ports = _free_ports(2 + workers)
        url, web_ui = f"spark://{HOST}:{port}", f"http://{HOST}:{web_port}"
        tag = f"-{attempt}" if attempt > 1 else ""
        processes.append(_launch(f"master{tag}", [
            spark_class, "org.apache.spark.deploy.master.Master",
            "--host", HOST, "--port", str(port), "--webui-port", str(web_port)], env, root))
        for i, worker_port in enumerate(worker_ports, 1):
            worker_env = dict(env, SPARK_WORKER_DIR=str(root / "work" / f"worker-{i}"))
            processes.append(_launch(f"worker-{i}{tag}", [
                spark_class, "org.apache.spark.deploy.worker.Worker",
                "--cores", str(cores), "--memory", memory,
                "--host", HOST, "--webui-port", str(worker_port), url], worker_env, root))
        started = processes[-(1 + workers):]
        failure = _wait(web_ui, url, workers, started, deadline, timeout)
        if failure is None:
            return MasterURL(url, web_ui, tuple(p.popen.pid for p in started), root)
        clash = any(p.popen.poll() is not None and any(s in _tail(p.log) for s in _PORT_CLASH)
                    for p in started)
        if not clash or attempt == _START_ATTEMPTS or time.monotonic() >= deadline:
            raise _start_error(failure, url, workers, processes)
        stale = list(started)
        _stop(started)
        processes[:] = [p for p in processes if p not in stale]
    raise AssertionError("unreachable")  # pragma: no cover


def _launch(name: str, argv: list[str], env: dict[str, str], root: Path) -> _Process:
    """Start one process of the cluster in its own session and process group, logging to
    ``logs/<name>.log``. util-linux's ``setpriv`` sets ``PR_SET_PDEATHSIG`` and execs on (no
    ``preexec_fn``: the driver's py4j threads may be running, and code between fork and exec
    could deadlock), as ``epochlab.kafka.live`` does for its brokers."""
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    die = [setpriv, "--pdeathsig", "TERM"] if setpriv else []
    log = root / "logs" / f"{name}.log"
    handle = open(log, "wb")  # noqa: SIM115 - closed by _stop
    try:
        popen = subprocess.Popen(die + argv, stdin=subprocess.DEVNULL, stdout=handle, stderr=subprocess.STDOUT,
                                 env=env, cwd=root, start_new_session=True)
    except BaseException:
        handle.close()
        raise
    return _Process(name, popen, log, handle)


def _state(web_ui: str) -> dict[str, Any] | None:
    """The master's ``/json/`` state, or ``None`` while it does not answer. No proxy: a
    ``http_proxy`` from the environment must not see requests to the loopback."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"{web_ui}/json/", timeout=5) as response:
            state = json.loads(response.read().decode("utf-8"))
            return state if isinstance(state, dict) else None
    except (OSError, ValueError, urllib.error.URLError):
        return None


def _wait(web_ui: str, url: str, workers: int, started: list[_Process], deadline: float,
          timeout: float) -> str | None:
    """``None`` once ``workers`` workers are alive on the master, else why not."""
    alive = 0
    while True:
        for p in started:
            code = p.popen.poll()
            if code is not None:
                return f"the {p.name.split('-')[0]} process ({p.name}) exited with status {code} while starting"
        state = _state(web_ui)
        if state is not None:
            alive = int(state.get("aliveworkers", 0))
            if alive >= workers and state.get("status", "ALIVE") == "ALIVE" and state.get("url", url) == url:
                return None
        if time.monotonic() >= deadline:
            answered = "answers" if state is not None else "does not answer"
            return (f"{alive} of {workers} workers registered within {timeout:g} s "
                    f"(the master's web UI {web_ui} {answered})")
        time.sleep(0.5)


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - _LOG_TAIL_BYTES))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    kept = [line for line in text.splitlines() if not line.startswith("Picked up JAVA_TOOL_OPTIONS")]
    return "\n".join(kept[-lines:])


def _start_error(failure: str, url: str, workers: int, processes: list[_Process]) -> ConfigError:
    logs = {p.name: _tail(p.log) for p in processes}
    text = "\n".join(f"--- {name}.log (last lines) ---\n{tail or '(empty)'}" for name, tail in logs.items())
    return ConfigError(f"Spark standalone cluster {url}: {failure}\n{text}",
                       where="standalone_cluster", field="workers", expected=workers,
                       got=failure, logs=logs)


# -- stop ---------------------------------------------------------------------------------

def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)  # each process leads its own group: pgid == pid


def _stop(processes: list[_Process], grace: float = STOP_GRACE) -> None:
    """``SIGTERM`` to every process group, ``grace`` seconds to exit, then ``SIGKILL`` to
    every group (also to the executors left in a group whose leader has exited), and wait
    for every process. A ``KeyboardInterrupt`` while waiting cuts the grace short; it is
    raised again once everything is killed."""
    interrupted: BaseException | None = None
    try:
        for p in processes:
            if p.popen.poll() is None:
                _signal_group(p.popen.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for p in processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.popen.wait(max(0.0, deadline - time.monotonic()))
    except KeyboardInterrupt as exc:
        interrupted = exc
    for p in processes:
        _signal_group(p.popen.pid, signal.SIGKILL)
    for p in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.popen.wait(30)
        p.handle.close()
    processes.clear()
    if interrupted is not None:
        raise interrupted
