"""The clients' own log of a live run, kept in its run directory as ``client.log``.

When a real run and the model differ, what the client did in between (a connection it gave up
on, a request it timed out, a metadata refresh, a re-bootstrap) is often the difference, and
neither the history nor the brokers' logs show it. :func:`capture` keeps it for the length of
a run:

* **Kafka's Java clients**: what ``org.apache.kafka`` logs at INFO and above in this process's
  JVM (:func:`epochlab.kafka.jvm.log_to`), which the producer's ``NetworkClient``, ``Sender``
  and ``Metadata`` use for connections set up, timed out and closed, retried and expired
  batches and re-bootstraps. The controller's Admin client, when a run uses it, shares that
  JVM, so its lines are there too, each marked with its client id as Kafka marks them. A
  release whose JVM cannot log (before 4.0) leaves a note instead.
* **librdkafka**: what it hands to :data:`epochlab.kafka.live.clients.RDKAFKA_LOG` (its
  ``logger``; at its default ``log_level``, notices and above: connection failures, request
  timeouts, broker state changes), served on the clients' polls.

Each line starts with the wall-clock milliseconds since the epoch, as the brokers' ``server.log``
lines do (``epochlab.kafka.live.cluster.LOG_PATTERN``), so the three can be merged by time; the
run's clock starts at ``clock_epoch_ms`` of ``real.json``.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ClientLog", "capture"]

#: One line of a Java client's log: the brokers' ``server.log`` pattern with the thread's name.
JAVA_PATTERN = "%d{UNIX_MILLIS} %p [%c] [%t] %m%n"


@dataclass
class ClientLog:
    """What the clients of one run logged (``lines``, complete once :func:`capture` returns),
    or why there is nothing (``missing``)."""

    client: str
    lines: list[str] = field(default_factory=list)
    missing: str | None = None

    def text(self) -> str:
        """The file's text: the lines, or one line saying why there are none."""
        if self.missing is not None:
            return f"# no {self.client} client log: {self.missing}\n"
        return "".join(f"{line}\n" for line in self.lines)


class _Lines(logging.Handler):
    """Keeps librdkafka's records as lines of the brokers' format."""

    def __init__(self, into: list[str]) -> None:
        super().__init__(level=logging.DEBUG)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(f"{int(record.created * 1000)} {record.levelname} [librdkafka] {record.getMessage()}")


@contextmanager
def capture(client: str, version: str) -> Iterator[ClientLog]:
    """Keep what ``client`` (``librdkafka`` or ``java``, of Kafka release ``version``) logs
    until the block ends; the returned :class:`ClientLog` holds it then. The Java client's JVM is
    started here if it was not (the run's clients would start it)."""
    log = ClientLog(client)
    if client == "java":
        from epochlab.kafka.jvm import ensure_jvm, log_to, logs

        ensure_jvm(version)
        if not logs():
            log.missing = (f"the JVM of Kafka {version}'s clients has no log binding here (log4j 2's, "
                           "which releases from 4.0 use)")
            yield log
            return
        with tempfile.TemporaryDirectory(prefix="epochlab-client-log-") as scratch:
            path = Path(scratch) / "client.log"
            log_to(path, pattern=JAVA_PATTERN)
            try:
                yield log
            finally:
                log_to(None)  # closes the file
                if path.exists():
                    log.lines = path.read_text(errors="replace").splitlines()
        return
    from epochlab.kafka.live.clients import RDKAFKA_LOG

    handler = _Lines(log.lines)
    level = RDKAFKA_LOG.level
    RDKAFKA_LOG.addHandler(handler)
    RDKAFKA_LOG.setLevel(logging.DEBUG)
    try:
        yield log
    finally:
        RDKAFKA_LOG.removeHandler(handler)
        RDKAFKA_LOG.setLevel(level)
