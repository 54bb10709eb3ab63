"""epochlab: model, replay and fuzz Apache Kafka partition replication.

The data plane (partition log, leader-epoch cache, divergence search, producer state) is the
Rust extension ``epochlab._core``; ``epochlab.reference`` is its pure-Python twin, used as the
differential-testing oracle and the benchmark baseline. Errors are in ``epochlab.errors``.
"""

from epochlab import errors
from epochlab._core import (
    BUILD,
    FetchCheck,
    LeaderEpochCache,
    LogAppendInfo,
    ProducerStateManager,
    RecordBatch,
    Replica,
    ReplicaLog,
    TruncationOutcome,
    __version__,
    check_current_leader_epoch,
    divergence_point,
    diverging_epoch_truncation,
    first_mismatch,
    kip101_truncation,
    kip279_truncation,
    kip320_truncation,
    leader_fetch_check,
    truncate_to_high_watermark,
)

__all__ = [
    "BUILD",
    "FetchCheck",
    "LeaderEpochCache",
    "LogAppendInfo",
    "ProducerStateManager",
    "RecordBatch",
    "Replica",
    "ReplicaLog",
    "TruncationOutcome",
    "__version__",
    "check_current_leader_epoch",
    "divergence_point",
    "diverging_epoch_truncation",
    "errors",
    "first_mismatch",
    "kip101_truncation",
    "kip279_truncation",
    "kip320_truncation",
    "leader_fetch_check",
    "truncate_to_high_watermark",
]
