"""Client history (Jepsen style) and the engine's event log.

A :class:`HistoryOp` is one client operation step: ``type`` is ``"invoke"`` when it starts,
then ``"ok"``, ``"fail"`` (definitely did not happen) or ``"info"`` (outcome unknown, or an
informational record such as a crash, a restart or a detected log truncation). ``f`` is
``"send"``, ``"poll"``, ``"commit"``, ``"crash"`` or ``"restart"``. One JSON object per line,
keys sorted, every key present (``null`` when not applicable).

>>> HistoryOp(0, 5, "p", "ok", "send", value=7, offset=0, acks="all").to_json()
'{"acks": "all", "error": null, "f": "send", "index": 0, "offset": 0, "process": "p", "time_ms": 5, "type": "ok", "value": 7}'
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from epochlab.sim.frozen import frozen

if TYPE_CHECKING:
    from epochlab.sim.kernel import Kernel

__all__ = ["Event", "HistoryOp", "Recorder", "history_to_jsonl"]


#: ``json.dumps(x, sort_keys=True)`` without building an encoder per call (the same text).
_SORTED_JSON = json.JSONEncoder(sort_keys=True)


@frozen
class HistoryOp:
    """One history entry. ``value``: the sent value (send), a list of ``[offset, value]``
    pairs (poll), the committed offset (commit). ``offset``: the acknowledged offset of a
    send (``None`` for acks=0), or the truncation point of a ``"LOG_TRUNCATION"`` info."""

    index: int
    time_ms: int
    process: str
    type: str
    f: str
    value: Any = None
    offset: int | None = None
    error: str | None = None
    acks: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The fields in declaration order (a copy of the instance dict), a tuple or list
        ``value`` as a list with its tuples as lists (the JSON shape)."""
        out = dict(self.__dict__)
        value = out["value"]
        if isinstance(value, (tuple, list)):
            out["value"] = [list(v) if isinstance(v, tuple) else v for v in value]
        return out

    def to_json(self) -> str:
        """One JSON line (no newline), keys sorted."""
        return _SORTED_JSON.encode(self.to_dict())


@frozen
class Event:
    """A notable engine event: ``kind`` is one of ``"crash"``, ``"restart"``, ``"shutdown"``,
    ``"election"``, ``"controller"``, ``"offline"``, ``"isr"``, ``"role"``, ``"replica"``
    (truncations, lost tails, stuck appends, rejected produces), ``"network"``, ``"client"``."""

    time_ms: int
    kind: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"time_ms": self.time_ms, "kind": self.kind, "message": self.message}


def history_to_jsonl(ops: Iterable[HistoryOp]) -> str:
    """The whole history as JSON Lines (each line ends with ``\\n``)."""
    return "".join(op.to_json() + "\n" for op in ops)


class Recorder:
    """What a run records, stamped with the kernel's virtual time: the client history
    (:meth:`record`, indexed from 0 in call order) and the engine's event log (:meth:`log_event`).
    The lists are appended to, never replaced, so a reader may hold on to them.

    >>> from epochlab.sim.kernel import Kernel
    >>> r = Recorder(Kernel(seed=0))
    >>> r.record("p", "invoke", "send", value=1).index, r.log_event("network", "heal")
    (0, None)
    >>> r.events
    [Event(time_ms=0, kind='network', message='heal')]
    """

    __slots__ = ("_kernel", "events", "history", "stop_watchers")

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self.history: list[HistoryOp] = []
        self.events: list[Event] = []
        #: called just before a broker process stops (crash or clean shutdown), while its
        #: in-memory state is still there: a checker that looks after each engine event would
        #: otherwise miss what changed in the event that also stopped it (a leader whose HW
        #: rose on the last state it applied before a controlled shutdown let it exit)
        self.stop_watchers: list[Callable[[], None]] = []

    def before_stop(self) -> None:
        """Let the :attr:`stop_watchers` look at the state a stopping process leaves."""
        for watcher in self.stop_watchers:
            watcher()

    def log_event(self, kind: str, message: str) -> None:
        """Append an :class:`Event` (``kind``: see :class:`Event`) at the current time."""
        self.events.append(Event(self._kernel.now_ms, kind, message))

    def record(self, process: str, type_: str, f: str, value: Any = None, offset: int | None = None,
               error: str | None = None, acks: str | None = None) -> HistoryOp:
        """Append a :class:`HistoryOp` at the current time and return it."""
        op = HistoryOp(len(self.history), self._kernel.now_ms, process, type_, f, value, offset,
                       error, acks)
        self.history.append(op)
        return op
