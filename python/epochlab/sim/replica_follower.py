"""Follower side of fetch handling for :class:`epochlab.sim.replica.Replica`.

The follower builds its next request from its fetch state and applies one response per call
(``docs/core-semantics.md`` rules 1.4 by generation, 1.5, 1.6). Each handler returns what the fetcher does next:

* ``"continue"``: send the next request now,
* ``"backoff"``: retry after replica.fetch.backoff.ms (leader unknown/behind, stuck append),
* ``"fenced"``: stop until newer metadata arrives (KIP-320 FENCED_LEADER_EPOCH),
* ``"discard"``: the response belongs to an abandoned fetcher session; do nothing.
"""

from __future__ import annotations

from types import ModuleType

from epochlab import ReplicaLog, TruncationOutcome
from epochlab.errors import UnexpectedAppendOffsetError
from epochlab.generations import Generation
from epochlab.sim.messages import (
    FetchRequest,
    FetchResponse,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
)

__all__ = ["FollowerFetchMixin"]

_EPOCH_ERRORS = {"FENCED_LEADER_EPOCH": "fenced_leader_epoch",
                 "UNKNOWN_LEADER_EPOCH": "unknown_leader_epoch"}


def wrapper_event(leo: int, base: int, last: int) -> str:
    """The event of a v0/v1 follower taking a wrapper that does not start at its log end
    offset (the Rust follower writes the same text)."""
    if base < leo:
        return (f"took wrapper [{base}, {last}] at log end offset {leo}: offsets {base}-{leo - 1} "
                f"are now twice in the log (v0/v1 follower checks the wrapper's own offset, "
                f"KAFKA-3919)")
    return (f"took wrapper [{base}, {last}] at log end offset {leo}: offsets {leo}-{base - 1} "
            f"are missing from the log (v0/v1 follower checks the wrapper's own offset)")


class FollowerFetchMixin:
    """Methods of :class:`~epochlab.sim.replica.Replica` that act as a follower."""

    broker_id: int
    core: ModuleType
    generation: Generation
    log: ReplicaLog
    role: str
    leader_epoch: int | None
    fetch_state: str
    fetcher_session: int
    events: list[str]

    def next_request(self) -> FetchRequest | OffsetsForLeaderEpochRequest | None:
        """The request the fetcher sends next: OffsetsForLeaderEpoch for the latest local
        epoch while ``truncating``, a fetch from the LEO while ``fetching`` (G3+ with the
        current leader epoch, G4+ with ``last_fetched_epoch``), else ``None``."""
        if self.role != "follower":
            return None
        g = self.generation
        current = self.leader_epoch if g.fences_current_epoch else None
        if self.fetch_state == "truncating":
            return OffsetsForLeaderEpochRequest(self.broker_id, self.fetcher_session,
                                                self.log.latest_epoch, current)
        if self.fetch_state == "fetching":
            last = self.log.latest_epoch if g.truncate_on_fetch else None
            return FetchRequest(self.broker_id, self.fetcher_session, self.log.log_end_offset,
                                current, last, self.log.log_start_offset)
        return None

    def _stale(self, session: int, state: str) -> bool:
        return self.role != "follower" or session != self.fetcher_session or self.fetch_state != state

    def handle_offsets_for_leader_epoch_response(self, resp: OffsetsForLeaderEpochResponse) -> str:
        """Apply the divergence search of this generation (G1 ``kip101_truncation``, G2
        ``kip279_truncation``, G3 ``kip320_truncation``) and truncate; ``truncate_and_retry``
        asks again (KIP-279 loop), ``truncate`` moves to ``fetching``."""
        if self._stale(resp.request.session, "truncating"):
            return "discard"
        g, log = self.generation, self.log
        leo, hw = log.log_end_offset, log.high_watermark
        if g >= Generation.KIP_320:
            error = _EPOCH_ERRORS.get(resp.error or "")
            if resp.error is not None and error is None:
                return "backoff"
            assert self.leader_epoch is not None and resp.request.current_leader_epoch is not None
            outcome = self.core.kip320_truncation(resp.answer, log.epoch_cache(), leo, hw,
                                        request_epoch=resp.request.current_leader_epoch,
                                        current_epoch=self.leader_epoch, error=error)
        elif resp.error is not None:
            return "backoff"
        elif g == Generation.KIP_279:
            outcome = self.core.kip279_truncation(resp.answer, log.epoch_cache(), leo, hw)
        else:
            outcome = self.core.kip101_truncation(resp.end_offset, leo, hw)
        return self._apply_outcome(outcome, "OffsetsForLeaderEpoch")

    def _apply_outcome(self, outcome: TruncationOutcome, why: str) -> str:
        if outcome.kind == "fenced":
            self.fetch_state = "fenced"
            return "fenced"
        if outcome.kind == "unknown_leader_epoch":
            return "backoff"
        if outcome.kind == "discard":
            return "continue"
        assert outcome.offset is not None
        self._truncate(min(outcome.offset, self.log.log_end_offset), why)  # type: ignore[attr-defined]
        if outcome.kind == "truncate":
            self.fetch_state = "fetching"
        return "continue"

    def handle_fetch_response(self, resp: FetchResponse) -> str:
        """Apply one fetch response: errors (FENCED -> ``fenced``; NOT_LEADER / UNKNOWN epoch ->
        ``backoff``; OFFSET_OUT_OF_RANGE -> truncate to the leader's LEO if ours is larger, or
        restart at the leader's log start if ours is below it), a DivergingEpoch (G4+, records
        and HW ignored, KAFKA-14704), else append and set ``HW := min(leader HW, LEO)``."""
        if self._stale(resp.request.session, "fetching"):
            return "discard"
        log = self.log
        if resp.request.fetch_offset != log.log_end_offset:
            return "continue"
        if resp.error == "FENCED_LEADER_EPOCH":
            self.fetch_state = "fenced"
            return "fenced"
        if resp.error == "OFFSET_OUT_OF_RANGE":
            return self._handle_offset_out_of_range(resp)
        if resp.error is not None:
            return "backoff"
        if resp.diverging_epoch is not None:
            outcome = self.core.diverging_epoch_truncation(resp.diverging_epoch, log.epoch_cache(),
                                                 log.log_end_offset, log.high_watermark)
            return self._apply_outcome(outcome, f"DivergingEpoch{resp.diverging_epoch}")
        if resp.batches:
            leo, first = log.log_end_offset, resp.batches[0]
            try:
                log.append_batches_as_follower(list(resp.batches))
            except UnexpectedAppendOffsetError:
                self.events.append(
                    f"cannot append at {leo}: leader batch starts at "
                    f"{first.base_offset} (replica cannot make progress)")
                return "backoff"
            expected = leo
            for batch in resp.batches:  # v0/v1: each wrapper that does not start where expected
                if batch.base_offset != expected:
                    self.events.append(wrapper_event(expected, batch.base_offset, batch.last_offset))
                expected = batch.last_offset + 1
        log.update_high_watermark(min(resp.high_watermark, log.log_end_offset))
        return "continue"

    def _handle_offset_out_of_range(self, resp: FetchResponse) -> str:
        """``handleOutOfRangeError`` / ``fetchOffsetAndTruncate`` (1.4a)."""
        log = self.log
        if resp.log_end_offset < log.log_end_offset and self.truncation_halts:  # type: ignore[attr-defined]
            # Kafka before 2.0.1 (ReplicaFetcherThread.handleOffsetOutOfRange): with unclean
            # leader election disabled for the topic the broker exits instead (0.10: System.exit;
            # 0.11-2.0: FatalExitError); the Rust follower writes the same text
            self.events.append(
                f"halts: log truncation is not allowed (the leader's log end offset "
                f"{resp.log_end_offset} is below ours, {log.log_end_offset}, and unclean leader "
                f"election is disabled)")
            self.fetch_state = "idle"
            return "halt"
        if resp.log_end_offset < log.log_end_offset:
            self._truncate(resp.log_end_offset, "OFFSET_OUT_OF_RANGE: leader LEO below ours")  # type: ignore[attr-defined]
        elif resp.log_start_offset > log.log_end_offset:
            log.truncate_fully_and_start_at(resp.log_start_offset)
            self.events.append(f"restarted log at leader log start {resp.log_start_offset}")
        else:
            return "backoff"
        return "continue"
