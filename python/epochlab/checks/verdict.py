"""Violations and verdicts: what the checker reports.

A :class:`Violation` names the invariant (its ``docs/invariants.md`` name, or Jepsen's Kafka
word where one exists: ``lost-write``, ``duplicate``, ``inconsistent-offsets``, ``poll-skip``,
``nonmonotonic-poll``, ``nonmonotonic-send``), the step at which it first failed (the index of
the last schedule action applied, ``None`` when not tied to one), the virtual time, and the
records, offsets, epochs and replicas involved. Its ``verdict`` separates

* ``"protocol-violation"``: the protocol broke a guarantee it gives under this configuration,
* ``"allowed-by-configuration"``: the configuration permits it (an unclean election happened,
  more than ``min.insync.replicas - 1`` crashes lost their unflushed tail, an acks=1 write was
  acknowledged before it was replicated, a non-idempotent producer retried), with the
  ``reason``.

>>> v = Violation("Inv-LogMatching", PROTOCOL, 3, 1200, "logs differ at 1", {"offset": 1})
>>> v.signature
'inv-logmatching'
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ALLOWED", "PROTOCOL", "Verdict", "Violation"]

PROTOCOL = "protocol-violation"
ALLOWED = "allowed-by-configuration"


@dataclass(frozen=True)
class Violation:
    """One invariant's first failure in a run."""

    invariant: str
    verdict: str
    step: int | None
    time_ms: int
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None

    @property
    def signature(self) -> str:
        """A file-name-safe identity: the invariant's name, lower-case."""
        return re.sub(r"[^a-z0-9]+", "-", self.invariant.lower()).strip("-")

    @property
    def is_protocol_violation(self) -> bool:
        return self.verdict == PROTOCOL

    def to_dict(self) -> dict[str, Any]:
        return {"invariant": self.invariant, "verdict": self.verdict, "step": self.step,
                "time_ms": self.time_ms, "message": self.message, "details": self.details,
                "reason": self.reason, "signature": self.signature}


@dataclass
class Verdict:
    """Every invariant's first failure, in the order found; ``ok`` when none is a protocol
    violation."""

    violations: list[Violation] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)

    @property
    def protocol_violations(self) -> list[Violation]:
        return [v for v in self.violations if v.is_protocol_violation]

    @property
    def allowed(self) -> list[Violation]:
        return [v for v in self.violations if not v.is_protocol_violation]

    @property
    def ok(self) -> bool:
        return not self.protocol_violations

    def first(self, invariant: str | None = None) -> Violation | None:
        """The first protocol violation (of ``invariant`` if given: name or signature)."""
        for v in self.protocol_violations:
            if invariant is None or invariant in (v.invariant, v.signature):
                return v
        return None

    def signatures(self) -> list[str]:
        return [v.signature for v in self.protocol_violations]

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok,
                "protocol_violations": [v.to_dict() for v in self.protocol_violations],
                "allowed_by_configuration": [v.to_dict() for v in self.allowed],
                "checked": list(self.checked)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, indent=1) + "\n"
