"""Atheris harness: coverage-guided search over failure interleavings (schedules).

The fuzzer's bytes are decoded as a sequence of bounded choices into a schedule
(``epochlab.fuzz.decode_schedule``: a header for the configuration and the swarm of fault
classes, then one fixed-size record per action), run on the simulator and judged by every
invariant of ``docs/invariants.md``. Each new protocol violation is written to
``<out>/violations/<signature>/`` before anything is raised; a simulator exception is written
to ``<out>/crashes/`` before it propagates. The corpus lives in ``<out>/corpus``.

    pip install atheris
    python fuzz/fuzz_schedules.py --generation kip-101 --out runs/fuzz-kip101 -max_total_time=300
    python fuzz/fuzz_schedules.py --generation hw-truncation --out DIR --stop-on-violation

Replay or shrink a finding with ``epochlab replay`` / ``epochlab shrink``. Importable without
atheris: ``test_one_input`` is what ``tests/`` exercises.
"""

from __future__ import annotations

import os
import tempfile

from epochlab.fuzz.harness import ScheduleHarness, ViolationFound, main

_DEFAULT: ScheduleHarness | None = None


def test_one_input(data: bytes) -> None:
    """One input against the latest generation, findings under ``$EPOCHLAB_FUZZ_OUT`` (or a
    temporary directory)."""
    global _DEFAULT
    if _DEFAULT is None:
        out = os.environ.get("EPOCHLAB_FUZZ_OUT") or tempfile.mkdtemp(prefix="epochlab-fuzz-")
        _DEFAULT = ScheduleHarness("strict-min-isr", out)
    _DEFAULT.test_one_input(data)


__all__ = ["ScheduleHarness", "ViolationFound", "main", "test_one_input"]

if __name__ == "__main__":
    main()
