"""The deterministic kernel: virtual clock, event queue, per-component random streams.

Events are ordered by ``(time_ms, sequence)``: two events scheduled for the same millisecond
run in the order they were scheduled, so a run depends only on the root seed and the calls
made. Randomness comes from :meth:`Kernel.rng`, one ``random.Random(f"{seed}:{name}")`` per
component name, never from the global ``random`` module or the wall clock.

>>> k = Kernel(seed=7)
>>> out = []
>>> _ = k.schedule(5, lambda: out.append("b")); _ = k.schedule(5, lambda: out.append("c"))
>>> _ = k.schedule(1, lambda: out.append("a"))
>>> _ = k.run_until(10); out, k.now_ms
(['a', 'b', 'c'], 10)
"""

from __future__ import annotations

import heapq
from random import Random
from collections.abc import Callable

__all__ = ["Kernel", "Timer"]


class Timer:
    """Handle of a scheduled callback; :meth:`cancel` makes it a no-op."""

    __slots__ = ("cancelled", "time_ms")

    def __init__(self, time_ms: int) -> None:
        self.time_ms = time_ms
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Kernel:
    """Virtual time in integer milliseconds and a heap of pending callbacks."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.now_ms = 0
        self._sequence = 0
        self._queue: list[tuple[int, int, Timer, Callable[[], None]]] = []
        self._rngs: dict[str, Random] = {}

    def rng(self, name: str) -> Random:
        """The random stream of one component (created on first use from ``seed`` and
        ``name``; independent of every other component's draws)."""
        stream = self._rngs.get(name)
        if stream is None:
            stream = Random(f"{self.seed}:{name}")
            self._rngs[name] = stream
        return stream

    def schedule(self, delay_ms: int, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` ``delay_ms`` (>= 0) after now."""
        return self.schedule_at(self.now_ms + max(0, int(delay_ms)), callback)

    def schedule_at(self, time_ms: int, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` at ``time_ms`` (clamped to now: the past cannot be scheduled)."""
        timer = Timer(max(time_ms, self.now_ms))
        self._sequence += 1
        heapq.heappush(self._queue, (timer.time_ms, self._sequence, timer, callback))
        return timer

    def next_time(self) -> int | None:
        """Time of the earliest pending event, ``None`` if the queue is empty."""
        while self._queue and self._queue[0][2].cancelled:
            heapq.heappop(self._queue)
        return self._queue[0][0] if self._queue else None

    def step(self) -> bool:
        """Run the earliest pending event (advancing the clock to it); ``False`` if none."""
        if self.next_time() is None:
            return False
        time_ms, _, timer, callback = heapq.heappop(self._queue)
        self.now_ms = time_ms
        callback()
        return True

    def run_until(self, time_ms: int, stop: Callable[[], bool] | None = None) -> bool:
        """Run every event due at or before ``time_ms``; the clock ends at ``time_ms`` unless
        ``stop`` (checked after each event) returned true first. Returns whether it stopped."""
        if stop is not None and stop():
            return True
        while True:
            nxt = self.next_time()
            if nxt is None or nxt > time_ms:
                break
            self.step()
            if stop is not None and stop():
                return True
        self.now_ms = max(self.now_ms, time_ms)
        return False
