"""Kafka's on-disk data, read by the Rust parsers (``src/formats/``): ``epochlab inspect``.

- :mod:`~epochlab.ondisk.reader`: a broker's log directory or one partition directory as
  :class:`LogDirView` / :class:`PartitionView` (segments, batches with every header field,
  indexes, checkpoints, producer snapshots), damaged files as :class:`FileProblem`.
- :mod:`~epochlab.ondisk.forensics`: several replicas of a partition side by side: where they
  diverge, what each holds, what rejoining the leader truncates, which acknowledged records
  survive nowhere.
- :mod:`~epochlab.ondisk.totrace`: the same data as an ``epochlab-trace`` for ``trace replay``.
- :mod:`~epochlab.ondisk.render`: the text view (``DumpLogSegments``' words) and JSON.

See ``docs/inspect.md``.
"""

from epochlab.ondisk.forensics import AckedRecord, Forensics, Rejoin, Replica, compare_replicas, read_acked
from epochlab.ondisk.reader import FileProblem, LogDirView, PartitionView, Segment, read_log_dir, read_partition_dir
from epochlab.ondisk.totrace import record_value, to_trace_table

__all__ = [
    "AckedRecord", "FileProblem", "Forensics", "LogDirView", "PartitionView", "Rejoin", "Replica", "Segment",
    "compare_replicas", "read_acked", "read_log_dir", "read_partition_dir", "record_value", "to_trace_table",
]
