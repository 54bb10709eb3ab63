"""High-volume replay: the ``epochlab-trace`` format, bulk replay in Rust with invariant
checks, a pure-Python reference replay, synthetic traces and simulation export
(``docs/trace-format.md``). Needs ``pyarrow`` (``pip install epochlab[trace]``).

>>> from epochlab import trace
>>> t = trace.generate(1000, leader_changes=10, replicas=3, seed=1)
>>> report = trace.replay(t)
>>> report.verdict, report.rows == t.num_rows
('ok', True)
"""

from epochlab.trace.generate import generate
from epochlab.trace.io import open_trace, read_trace, write_trace
from epochlab.trace.record import TraceRecorder, export_cluster, recording_traces
from epochlab.trace.reference import reference_replay
from epochlab.trace.replay import ReplayReport, replay
from epochlab.trace.schema import (
    FLAG_CONTROL,
    FLAG_LOSE_UNFLUSHED,
    FLAG_TRANSACTIONAL,
    FLAG_UNCLEAN,
    KIND_CODES,
    KINDS,
    VERSION,
    normalize,
    schema,
)

__all__ = [
    "FLAG_CONTROL", "FLAG_LOSE_UNFLUSHED", "FLAG_TRANSACTIONAL", "FLAG_UNCLEAN", "KINDS",
    "KIND_CODES", "ReplayReport", "TraceRecorder", "VERSION", "export_cluster", "generate",
    "normalize", "open_trace", "read_trace", "recording_traces", "reference_replay", "replay",
    "schema", "write_trace",
]
