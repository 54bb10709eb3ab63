"""The clients' own log of a live run (``client.log``, :mod:`epochlab.kafka.live.client_log`):
the in-process JVM logs Kafka's classes only while a run asks it to, in the brokers' line
format; librdkafka's lines are kept only during the capture. The live runs' logs are checked
in ``tests/test_kafka_run.py``."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from epochlab.errors import ConfigError
from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION, resolved
from epochlab.kafka.live.client_log import ClientLog, capture
from epochlab.kafka.live.clients import RDKAFKA_LOG

LINE = re.compile(r"^\d{13} [A-Z]+ \[[\w.]+\] ")


@pytest.mark.skipif(not resolved(DEFAULT_KAFKA_VERSION), reason="Kafka's jars not resolved (epochlab kafka jars)")
def test_the_jvm_logs_kafkas_classes_only_between_log_to_and_its_end(tmp_path: Path) -> None:
    # a JVM of its own: the test process's may carry another release, and log_to changes it
    script = textwrap.dedent(f"""
        from pathlib import Path
        from epochlab.kafka.jvm import ensure_jvm, log_to, logs
        jpype = ensure_jvm({DEFAULT_KAFKA_VERSION!r})
        assert logs()
        factory = jpype.JClass("org.slf4j.LoggerFactory")
        kafka, other = factory.getLogger("org.apache.kafka.clients.NetworkClient"), factory.getLogger("com.example")
        kafka.warn("before")
        log_to(Path({str(tmp_path / "client.log")!r}))
        kafka.info("during, kept")
        kafka.debug("during, below INFO")
        other.warn("during, not Kafka's")
        log_to(None)
        kafka.warn("after")
        print("done")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "done\n" and proc.stderr == ""  # the JVM itself prints nothing
    lines = (tmp_path / "client.log").read_text().splitlines()
    assert len(lines) == 1, lines
    assert LINE.match(lines[0]) and lines[0].split(" ", 1)[1] == "INFO [org.apache.kafka.clients.NetworkClient] during, kept"


def test_a_log_level_that_log4j_lacks_is_refused() -> None:
    from epochlab.kafka.jvm import log_to

    with pytest.raises(ConfigError, match="log level"):
        log_to(Path("x.log"), level="LOUD")


def test_librdkafka_lines_are_kept_during_the_capture_only() -> None:
    level, handlers = RDKAFKA_LOG.level, list(RDKAFKA_LOG.handlers)
    RDKAFKA_LOG.warning("before")
    with capture("librdkafka", DEFAULT_KAFKA_VERSION) as log:
        RDKAFKA_LOG.info("FAIL [rdkafka#producer-1] [thrd:b1]: b1: Connect to ipv4#127.0.0.1:1 failed")
        RDKAFKA_LOG.log(logging.DEBUG, "during, debug")
    RDKAFKA_LOG.warning("after")
    assert [line.split(" ", 1)[1] for line in log.lines] == [
        "INFO [librdkafka] FAIL [rdkafka#producer-1] [thrd:b1]: b1: Connect to ipv4#127.0.0.1:1 failed",
        "DEBUG [librdkafka] during, debug"]
    assert all(LINE.match(line) for line in log.lines)
    assert (RDKAFKA_LOG.level, RDKAFKA_LOG.handlers) == (level, handlers)
    assert log.text() == "".join(f"{line}\n" for line in log.lines)


def test_a_log_that_could_not_be_kept_says_why() -> None:
    log = ClientLog("java", missing="no binding")
    assert log.text() == "# no java client log: no binding\n"
