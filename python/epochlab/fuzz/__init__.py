"""Fuzzing failure interleavings: schedules, their producers, execution, shrinking, campaigns.

* :mod:`~epochlab.fuzz.schedule` - the versioned JSON schedule format and its validation
* :mod:`~epochlab.fuzz.generator` - seeded random schedules with swarm testing, and the
  decoder from fuzzer bytes (bounded choices)
* :mod:`~epochlab.fuzz.convert` - scenario files to schedules
* :mod:`~epochlab.fuzz.executor` - run a schedule, get the checker's verdict
* :mod:`~epochlab.fuzz.shrink` - delta debugging to a minimal schedule with the same violation
* :mod:`~epochlab.fuzz.campaign` - the random engine's loop, artifacts on disk
"""

from epochlab.fuzz.executor import RunResult, execute
from epochlab.fuzz.generator import FuzzProfile, decode_schedule, generate_schedule, load_profile
from epochlab.fuzz.schedule import Action, Schedule, load_schedule

__all__ = [
    "Action",
    "FuzzProfile",
    "RunResult",
    "Schedule",
    "decode_schedule",
    "execute",
    "generate_schedule",
    "load_profile",
    "load_schedule",
]
