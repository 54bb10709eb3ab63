"""Coverage instrumentation shared by the atheris harnesses in this folder.

A harness imports epochlab inside ``instrumentation(__name__ == "__main__")``: only the process
that fuzzes instruments the imports, and only when atheris is installed, so the harness modules
stay importable (and testable) without it.
"""

from __future__ import annotations

import contextlib
from typing import Any


def instrumentation(fuzzing: bool) -> contextlib.AbstractContextManager[Any]:
    """``atheris.instrument_imports()`` when ``fuzzing`` and atheris is available, else a no-op."""
    if not fuzzing:
        return contextlib.nullcontext()
    try:
        import atheris
    except ImportError:
        return contextlib.nullcontext()
    return atheris.instrument_imports()
