//! Follower side: the next request from the fetch state, and one response applied per call
//! (1.4 by generation, 1.5, 1.6).

use super::messages::*;
use super::{FetchState, Replica, Role};
use crate::divergence::{diverging_epoch_truncation, kip101_truncation, kip279_truncation, kip320_truncation, LeaderAnswerError, TruncationOutcome};
use crate::generation::Generation;
use crate::log::ReplicaLog;

/// What the fetcher does after a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FollowerAction {
    /// Send the next request now.
    Continue,
    /// Retry after replica.fetch.backoff.ms (leader unknown or behind, append stuck).
    Backoff,
    /// Stop until newer metadata arrives (FENCED_LEADER_EPOCH).
    Fenced,
    /// The response belongs to an abandoned fetcher session.
    Discard,
    /// The broker exits: a log truncation that is not allowed (before Kafka 2.0.1, unclean
    /// leader election disabled, the leader's log end offset below the follower's).
    Halt,
}

/// The next request of a follower.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FollowerRequest {
    Fetch(FetchRequest),
    OffsetsForLeaderEpoch(OffsetsForLeaderEpochRequest),
}

impl Replica {
    /// OffsetsForLeaderEpoch for the latest local epoch while Truncating, a fetch from the LEO
    /// while Fetching (G3+ with the current leader epoch, G4+ with the last fetched epoch).
    pub fn next_request(&self, log: &ReplicaLog) -> Option<FollowerRequest> {
        if self.role != Role::Follower {
            return None;
        }
        let g = self.generation;
        let current = self.leader_epoch.filter(|_| g.fences_current_epoch());
        match self.fetch_state {
            FetchState::Truncating => Some(FollowerRequest::OffsetsForLeaderEpoch(OffsetsForLeaderEpochRequest {
                replica_id: self.broker_id,
                session: self.fetcher_session,
                leader_epoch: log.latest_epoch(),
                current_leader_epoch: current,
            })),
            FetchState::Fetching => Some(FollowerRequest::Fetch(FetchRequest {
                broker_epoch: None,
                replica_id: self.broker_id,
                session: self.fetcher_session,
                fetch_offset: log.log_end_offset(),
                current_leader_epoch: current,
                last_fetched_epoch: log.latest_epoch().filter(|_| g.truncate_on_fetch()),
                log_start_offset: log.log_start_offset(),
            })),
            FetchState::Idle | FetchState::Fenced => None,
        }
    }

    fn stale(&self, session: u64, state: FetchState) -> bool {
        self.role != Role::Follower || session != self.fetcher_session || self.fetch_state != state
    }

    /// Applies this generation's divergence search (G1 KIP-101, G2 KIP-279, G3 KIP-320) to an
    /// OffsetsForLeaderEpoch answer and truncates; a partial answer asks again.
    pub fn handle_offsets_for_leader_epoch_response(
        &mut self,
        log: &mut ReplicaLog,
        req: &OffsetsForLeaderEpochRequest,
        resp: &OffsetsForLeaderEpochResponse,
    ) -> FollowerAction {
        if self.stale(req.session, FetchState::Truncating) {
            return FollowerAction::Discard;
        }
        let g = self.generation;
        let (leo, hw) = (log.log_end_offset(), log.high_watermark());
        let outcome = if g >= Generation::Kip320 {
            let error = match resp.error {
                None => None,
                Some(KafkaError::FencedLeaderEpoch) => Some(LeaderAnswerError::FencedLeaderEpoch),
                Some(KafkaError::UnknownLeaderEpoch) => Some(LeaderAnswerError::UnknownLeaderEpoch),
                Some(_) => return FollowerAction::Backoff,
            };
            let (Some(current), Some(sent)) = (self.leader_epoch, req.current_leader_epoch) else {
                return FollowerAction::Backoff;
            };
            kip320_truncation(resp.answer, log.epoch_cache(), leo, hw, sent, current, error)
        } else if resp.error.is_some() {
            return FollowerAction::Backoff;
        } else if g == Generation::Kip279 {
            kip279_truncation(resp.answer, log.epoch_cache(), leo, hw)
        } else {
            kip101_truncation(resp.end_offset, leo, hw)
        };
        match outcome {
            Ok(o) => self.apply_outcome(log, o, "OffsetsForLeaderEpoch"),
            // The log's own HW never exceeds its LEO; an error here is a bug in this crate.
            Err(e) => panic!("divergence search refused the log's own offsets: {e}"),
        }
    }

    fn apply_outcome(&mut self, log: &mut ReplicaLog, outcome: TruncationOutcome, why: &str) -> FollowerAction {
        let (offset, done) = match outcome {
            TruncationOutcome::Fenced => {
                self.fetch_state = FetchState::Fenced;
                return FollowerAction::Fenced;
            }
            TruncationOutcome::UnknownLeaderEpoch => return FollowerAction::Backoff,
            TruncationOutcome::Discard => return FollowerAction::Continue,
            TruncationOutcome::Truncate(o) => (o, true),
            TruncationOutcome::TruncateAndRetry(o) => (o, false),
        };
        self.truncate(log, offset.min(log.log_end_offset()), why);
        if done {
            self.fetch_state = FetchState::Fetching;
        }
        FollowerAction::Continue
    }

    /// Applies one fetch response: FENCED -> Fenced; OFFSET_OUT_OF_RANGE -> truncate to the
    /// leader's LEO if ours is larger, or restart at its log start if ours is below it; other
    /// errors back off; a DivergingEpoch (G4+) ignores records and HW (KAFKA-14704); else
    /// append and set HW := min(leader HW, LEO).
    pub fn handle_fetch_response(&mut self, log: &mut ReplicaLog, req: &FetchRequest, resp: &FetchResponse) -> FollowerAction {
        if self.stale(req.session, FetchState::Fetching) {
            return FollowerAction::Discard;
        }
        if req.fetch_offset != log.log_end_offset() {
            return FollowerAction::Continue;
        }
        match resp.error {
            Some(KafkaError::FencedLeaderEpoch) => {
                self.fetch_state = FetchState::Fenced;
                return FollowerAction::Fenced;
            }
            Some(KafkaError::OffsetOutOfRange) => return self.handle_offset_out_of_range(log, resp),
            Some(_) => return FollowerAction::Backoff,
            None => {}
        }
        if let Some((epoch, end)) = resp.diverging_epoch {
            let outcome = diverging_epoch_truncation((epoch, end), log.epoch_cache(), log.log_end_offset(), log.high_watermark());
            return match outcome {
                Ok(o) => self.apply_outcome(log, o, &format!("DivergingEpoch({epoch}, {end})")),
                Err(e) => panic!("divergence search refused the log's own offsets: {e}"),
            };
        }
        if let Some(first) = resp.batches.first() {
            let leo = log.log_end_offset().0;
            let base = first.base_offset().0;
            if log.append_batches_as_follower(&resp.batches).is_err() {
                self.events.push(format!("cannot append at {leo}: leader batch starts at {base} (replica cannot make progress)"));
                return FollowerAction::Backoff;
            }
            // v0/v1: each wrapper that does not start where the previous one ended
            let mut expected = leo;
            for b in &resp.batches {
                if b.base_offset().0 != expected {
                    self.events.push(wrapper_event(expected, b.base_offset().0, b.last_offset().0));
                }
                expected = b.last_offset().0 + 1;
            }
        }
        log.update_high_watermark(resp.high_watermark.min(log.log_end_offset()));
        FollowerAction::Continue
    }

    /// `handleOutOfRangeError` / `fetchOffsetAndTruncate` (1.4a).
    fn handle_offset_out_of_range(&mut self, log: &mut ReplicaLog, resp: &FetchResponse) -> FollowerAction {
        if resp.log_end_offset < log.log_end_offset() && self.truncation_halts {
            // Kafka before 2.0.1 (ReplicaFetcherThread.handleOffsetOutOfRange); the Python
            // follower writes the same text
            self.events.push(format!(
                "halts: log truncation is not allowed (the leader's log end offset {} is below ours, {}, and unclean leader election is disabled)",
                resp.log_end_offset,
                log.log_end_offset()
            ));
            self.fetch_state = FetchState::Idle;
            return FollowerAction::Halt;
        }
        if resp.log_end_offset < log.log_end_offset() {
            self.truncate(log, resp.log_end_offset, "OFFSET_OUT_OF_RANGE: leader LEO below ours");
        } else if resp.log_start_offset > log.log_end_offset() {
            log.truncate_fully_and_start_at(resp.log_start_offset);
            self.events.push(format!("restarted log at leader log start {}", resp.log_start_offset));
        } else {
            return FollowerAction::Backoff;
        }
        FollowerAction::Continue
    }
}

/// The event of a v0/v1 follower taking a wrapper that does not start at its log end offset
/// ([`ReplicaLog::with_wrapper_batches`]; the Python follower writes the same text).
fn wrapper_event(leo: u64, base: u64, last: u64) -> String {
    if base < leo {
        format!(
            "took wrapper [{base}, {last}] at log end offset {leo}: offsets {base}-{} are now twice in the log (v0/v1 follower checks the wrapper's own offset, KAFKA-3919)",
            leo - 1
        )
    } else {
        format!(
            "took wrapper [{base}, {last}] at log end offset {leo}: offsets {leo}-{} are missing from the log (v0/v1 follower checks the wrapper's own offset)",
            base - 1
        )
    }
}
