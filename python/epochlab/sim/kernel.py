"""The deterministic kernel: virtual clock, event queue, per-component random streams.

Events are ordered by ``(time_ms, sequence)``: two events scheduled for the same millisecond
run in the order they were scheduled, so a run depends only on the root seed and the calls
made. Randomness comes from :meth:`Kernel.rng`, one ``random.Random(f"{seed}:{name}")`` per
component name, never from the global ``random`` module or the wall clock.

Two implementations with one contract: this class, which the pure-Python reference backend
runs and which states the rules, and ``epochlab._core.Kernel`` (``src/sim/kernel.rs``, wrapped
by ``src/bindings/sim.rs``), the same loop in Rust, which the rust backend runs
(``Cluster``) so that popping, ordering and dispatching an event costs no Python;
``tests/test_fast_paths.py`` runs schedules of every generation on both and asks for
byte-identical runs.

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
from typing import Any, TypeVar

__all__ = ["Kernel", "Timer"]

_T = TypeVar("_T")


class Timer:
    """Handle of a scheduled callback; :meth:`cancel` makes it a no-op. ``quiet``: the
    callback changes no broker or controller state (:class:`Kernel`)."""

    __slots__ = ("cancelled", "quiet", "time_ms")

    def __init__(self, time_ms: int, quiet: bool = False) -> None:
        self.time_ms = time_ms
        self.cancelled = False
        self.quiet = quiet

    def cancel(self) -> None:
        self.cancelled = True


class Kernel:
    """Virtual time in integer milliseconds and a heap of pending callbacks.

    Quiet events: a callback that runs only a client's code (a producer, a consumer, the
    transaction coordinator: what an invariant check does not read) is scheduled ``quiet``;
    :attr:`last_quiet` tells the state checker it has nothing new to look at after it. A
    message's delivery is quiet when its destination is such a node (``SimContext.post``);
    a timer is quiet when the event that scheduled it was. Quietness changes no order and no
    outcome of a run."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.now_ms = 0
        self.last_quiet = False   # the last event run was quiet
        self._in_quiet = False    # a quiet event is running
        self._sequence = 0
        self.steps = 0            # events run so far
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

    def schedule(self, delay_ms: int, callback: Callable[[], None], quiet: bool | None = None) -> Timer:
        """Run ``callback`` ``delay_ms`` (>= 0) after now."""
        return self.schedule_at(self.now_ms + max(0, int(delay_ms)), callback, quiet)

    def schedule_at(self, time_ms: int, callback: Callable[[], None], quiet: bool | None = None) -> Timer:
        """Run ``callback`` at ``time_ms`` (clamped to now: the past cannot be scheduled);
        ``quiet`` (class doc) defaults to whether the event scheduling it is quiet."""
        timer = Timer(max(time_ms, self.now_ms), self._in_quiet if quiet is None else quiet)
        self._sequence += 1
        heapq.heappush(self._queue, (timer.time_ms, self._sequence, timer, callback))
        return timer

    def call_as(self, node: object, callback: Callable[..., _T], *args: Any) -> _T:
        """``callback(*args)`` as an event of ``node`` (the Rust kernel passes that on to the
        timers it schedules, for the state checker's watcher; this kernel keeps no owners)."""
        return callback(*args)

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
        self.steps += 1
        self._in_quiet = self.last_quiet = timer.quiet
        try:
            callback()
        finally:
            self._in_quiet = False
        return True

    def run_until(self, time_ms: int, stop: Callable[[], bool] | None = None,
                  observe: Callable[[], object] | None = None) -> bool:
        """Run every event due at or before ``time_ms``; the clock ends at ``time_ms`` unless
        ``stop`` (checked first and after each event) returned true first. Returns whether it
        stopped. ``observe`` is called first and after each event that is not quiet, before
        ``stop`` (the invariant checker's hook)."""
        self.last_quiet = False  # what happened before this call is news to ``stop``
        if observe is not None:
            observe()
        if stop is not None and stop():
            return True
        while True:
            nxt = self.next_time()
            if nxt is None or nxt > time_ms:
                break
            self.step()
            if observe is not None and not self.last_quiet:
                observe()
            if stop is not None and stop():
                return True
        self.now_ms = max(self.now_ms, time_ms)
        return False
