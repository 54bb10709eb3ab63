"""The state checker's change detector, plainly (``epochlab._core.ChangeWatch`` in Rust)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["ChangeWatch"]


class ChangeWatch:
    """Which brokers' change keys, and whether the controller's, moved since the last call.

    A broker's key is ``(alive, incarnation, replica.state_key())`` (role, epochs, pending
    ISR, the log's end, HW, batch count and start); the controller's is ``(leader,
    leader_epoch, partition_epoch, isr, elr, len(elections))``. :meth:`changes` is ``None``
    when none moved, else ``(changed broker ids in the dict's order, controller changed)``;
    the keys are kept for the next call."""

    def __init__(self) -> None:
        self._keys: dict[int, tuple[Any, ...]] = {}
        self._controller: tuple[Any, ...] | None = None

    def changes(self, brokers: dict[int, Any], controller: Any) -> tuple[list[int], bool] | None:
        """A missing attribute is a ``TypeError`` naming the object (the caller's mistake)."""
        changed: list[int] = []
        for b, broker in brokers.items():
            if not isinstance(b, int):
                raise TypeError(f"ChangeWatch.changes: broker id {b!r} is not an int")
            try:
                key = (broker.alive, broker.incarnation, broker.replica.state_key())
            except AttributeError as e:
                raise TypeError(f"ChangeWatch.changes: brokers[{b}] has no attribute {e.name!r}") from e
            if self._keys.get(b) != key:
                self._keys[b] = key
                changed.append(b)
        c = controller
        try:
            key = (c.leader, c.leader_epoch, c.partition_epoch, c.isr, c.elr, len(c.elections))
        except AttributeError as e:
            raise TypeError(f"ChangeWatch.changes: the controller has no attribute {e.name!r}") from e
        controller_changed = key != self._controller
        self._controller = key
        return (changed, controller_changed) if changed or controller_changed else None

    def watching(self, brokers: dict[int, Any], controller: Any,
                 then: Callable[[list[int], bool], Any]) -> Callable[[], None]:
        """A callable for the kernel's ``observe`` hook: :meth:`changes` and, when something
        moved, ``then(changed, controller_changed)``."""
        if not callable(then):
            raise TypeError(f"ChangeWatch.watching: then must be callable, got {type(then).__name__}")

        def watch() -> None:
            found = self.changes(brokers, controller)
            if found is not None:
                then(*found)
        return watch

    def forget(self, b: int) -> None:
        """Broker ``b`` counts as changed at the next call."""
        self._keys.pop(b, None)
