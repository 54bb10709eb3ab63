"""Progress bars for the long commands (fuzz, shrink; trace replay and Spark campaigns have
their own): drawn with rich on standard error, only when it is a terminal and the command
was not asked for JSON, so pipes, logs and tests see nothing but the results."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["progress_bar"]

Update = Callable[..., None]


@contextmanager
def progress_bar(label: str, total: int | None = None, unit: str = "runs",
                 enabled: bool = True) -> Iterator[Update]:
    """Yields ``update(done, total=None, note="")``; a no-op when not drawing."""
    if not enabled or not sys.stderr.isatty():
        yield lambda *_args, **_kwargs: None
        return
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn(unit),
                   TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[note]}"),
                   console=Console(stderr=True), transient=True)
    task = bar.add_task(label, total=total, note="")

    def update(done: int, total: int | None = None, note: str = "") -> None:
        bar.update(task, completed=done, note=note, **({"total": total} if total else {}))

    with bar:
        yield update
