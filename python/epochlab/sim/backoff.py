"""Client backoff of the latest generation: KIP-580's exponential backoff with jitter, which the
Java clients have from 3.7.0 (KAFKA-9800, ``b49013b``), the first release of G5.

* :class:`ExponentialBackoff` is ``org.apache.kafka.common.utils.ExponentialBackoff``: attempt
  ``n`` waits ``initial * 2**min(n, exp_max)`` times a random factor in ``[0.8, 1.2)``, at most
  ``retry.backoff.max.ms`` (``CommonClientConfigs``: 100 ms, base 2, 1,000 ms, jitter 0.2).
  The producer backs a batch's ``n``-th retry off by ``backoff(n - 1)``
  (``RecordAccumulator.shouldBackoff``).
* :class:`MetadataBackoff` is when ``org.apache.kafka.clients.Metadata`` lets the next
  metadata request go (``timeToAllowUpdate``): after a failed request (no answer) by the count
  of failed attempts; after an answer by the count of *equivalent* answers in a row, those
  that told nothing new (``update`` counts every answer, ``updateLatestMetadata`` resets the
  count when the partition's leader epoch went up). A client waiting for a leader to be
  elected (the answers say "no leader" in the same epoch) asks again after about 100, 200,
  400, 800, then 1,000 ms; before 3.7 it asked every ``retry.backoff.ms``.

The random factors come from the client's own random stream, so runs stay deterministic.
"""

from __future__ import annotations

import math
from random import Random

__all__ = ["ExponentialBackoff", "MetadataBackoff", "RETRY_BACKOFF_MAX_MS"]

RETRY_BACKOFF_MAX_MS = 1000
"""``retry.backoff.max.ms``'s default (``CommonClientConfigs.DEFAULT_RETRY_BACKOFF_MAX_MS``)."""

_BASE = 2
_JITTER = 0.2


class ExponentialBackoff:
    """``ExponentialBackoff(initial, 2, maximum, 0.2)`` drawing from ``rng``."""

    def __init__(self, initial_ms: int, maximum_ms: int, rng: Random) -> None:
        self.initial = min(maximum_ms, initial_ms)
        self.maximum = maximum_ms
        self.rng = rng
        self.exp_max = (math.log(maximum_ms / max(self.initial, 1)) / math.log(_BASE)
                        if maximum_ms > self.initial else 0.0)

    def backoff(self, attempts: int) -> int:
        """The wait before attempt ``attempts + 1`` (``attempts`` >= 0), in ms."""
        if self.exp_max == 0:
            return self.initial
        term = self.initial * _BASE ** min(attempts, self.exp_max)
        factor = self.rng.uniform(1 - _JITTER, 1 + _JITTER)
        return min(int(factor * term), self.maximum)


class MetadataBackoff:
    """When a client may send its next metadata request (module doc)."""

    def __init__(self, backoff: ExponentialBackoff) -> None:
        self.backoff = backoff
        self.last_ms: int | None = None   # the last answer or failure (``lastRefreshMs``)
        self.failures = 0                 # ``attempts``
        self.equivalent = 0               # ``equivalentResponseCount``
        self.epoch: int | None = None     # the leader epoch last seen (``lastSeenLeaderEpochs``)
        self._allowed_at: int | None = None

    def wait_ms(self, now_ms: int) -> int:
        """How long the next request must wait from ``now_ms`` (0: it may go now). The wait
        is drawn once per answer or failure, as Kafka's poll loop sees one value per refresh."""
        if self.last_ms is None:
            return 0
        if self._allowed_at is None:
            waits = [0]
            if self.failures > 0:
                waits.append(self.backoff.backoff(self.failures - 1))
            if self.equivalent > 0:
                waits.append(self.backoff.backoff(self.equivalent - 1))
            self._allowed_at = self.last_ms + max(waits)
        return max(0, self._allowed_at - now_ms)

    def answered(self, now_ms: int, epoch: int | None) -> None:
        """An answer arrived; ``epoch`` is the partition's leader epoch in it."""
        self.last_ms, self.failures, self._allowed_at = now_ms, 0, None
        self.equivalent += 1
        if epoch is None or self.epoch is None or epoch > self.epoch:
            self.equivalent = 0
        if epoch is not None and (self.epoch is None or epoch > self.epoch):
            self.epoch = epoch

    def failed(self, now_ms: int) -> None:
        """A request got no answer (``failedUpdate``)."""
        self.last_ms, self._allowed_at = now_ms, None
        self.failures += 1
        self.equivalent = 0
