"""The invariant checker: ``docs/invariants.md`` over cluster state, client history and
liveness, each violation classified as a protocol violation or as allowed by the configuration.

* :mod:`~epochlab.checks.verdict` - :class:`Violation`, :class:`Verdict`
* :mod:`~epochlab.checks.state` - :class:`StateChecker` (items 1-12, after every engine event;
  whole-log comparisons are ``first_mismatch`` / ``holes`` scans in the Rust core)
* :mod:`~epochlab.checks.history` - :func:`check_history` (Jepsen's Kafka vocabulary, 13-23)
* :mod:`~epochlab.checks.transactions` - :func:`check_transactions` (15 read_committed part,
  20, 21)
* :mod:`~epochlab.checks.liveness` - :func:`check_liveness` (24-26, after a healing phase)

Running a schedule and collecting its verdict is :func:`epochlab.fuzz.execute`.
"""

from epochlab.checks.history import HISTORY_INVARIANTS, check_history
from epochlab.checks.liveness import LIVENESS_INVARIANTS, check_liveness, converged, lso_settled
from epochlab.checks.state import STATE_INVARIANTS, StateChecker
from epochlab.checks.transactions import TXN_INVARIANTS, check_transactions
from epochlab.checks.verdict import ALLOWED, PROTOCOL, Verdict, Violation

ALL_INVARIANTS = STATE_INVARIANTS + HISTORY_INVARIANTS + tuple(
    i for i in TXN_INVARIANTS if i not in HISTORY_INVARIANTS) + LIVENESS_INVARIANTS

__all__ = [
    "ALLOWED",
    "ALL_INVARIANTS",
    "HISTORY_INVARIANTS",
    "LIVENESS_INVARIANTS",
    "PROTOCOL",
    "STATE_INVARIANTS",
    "StateChecker",
    "TXN_INVARIANTS",
    "check_transactions",
    "lso_settled",
    "Verdict",
    "Violation",
    "check_history",
    "check_liveness",
    "converged",
]
