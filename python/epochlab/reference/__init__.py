"""Pure-Python twin of ``epochlab._core``: the readable oracle for differential tests.

It implements exactly the surface of ``epochlab/_core.pyi`` and the rules of
``docs/core-semantics.md`` (same results, same exception classes), written plainly rather than
fast.

Modules:

* :mod:`.batch`: :class:`RecordBatch`, :class:`LogAppendInfo`.
* :mod:`.epoch_cache`: :class:`LeaderEpochCache` and its checkpoint file.
* :mod:`.producer_state`: :class:`ProducerStateManager` (deduplication, sequence order).
* :mod:`.log`: :class:`ReplicaLog`.
* :mod:`.divergence`: :class:`TruncationOutcome`, :class:`FetchCheck` and the truncation
  decision of each protocol generation, the leader's fetch check, KIP-320 fencing, and log
  comparison (:func:`divergence_point`, :func:`first_mismatch`).
* :mod:`.watch`: :class:`ChangeWatch`, the state checker's change detector.
* :mod:`._validate`: argument domains shared by all of the above.
"""

from ._build import BUILD, __version__
from .batch import LogAppendInfo, RecordBatch
from .divergence import (
    FetchCheck,
    TruncationOutcome,
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
from .epoch_cache import LeaderEpochCache
from .log import ReplicaLog
from .producer_state import ProducerStateManager
from .watch import ChangeWatch

__all__ = [
    "BUILD",
    "__version__",
    "RecordBatch",
    "LogAppendInfo",
    "LeaderEpochCache",
    "ProducerStateManager",
    "ReplicaLog",
    "TruncationOutcome",
    "FetchCheck",
    "truncate_to_high_watermark",
    "kip101_truncation",
    "kip279_truncation",
    "kip320_truncation",
    "diverging_epoch_truncation",
    "leader_fetch_check",
    "check_current_leader_epoch",
    "divergence_point",
    "first_mismatch",
    "ChangeWatch",
]
