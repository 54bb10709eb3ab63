//! Truncation and divergence search: one pure function per protocol generation.
//!
//! A follower that learns of a new leader epoch must cut its log back to where it agrees with
//! the new leader before fetching. How it finds that point is what changed between Kafka
//! generations (`docs/core-semantics.md` rule 1.4):
//!
//! | generation | function | Kafka |
//! |---|---|---|
//! | G0 | [`truncate_to_high_watermark`] | <= 0.10.2 |
//! | G1 | [`kip101_truncation`] | 0.11 (OffsetsForLeaderEpoch v0) |
//! | G2 | [`kip279_truncation`] | 2.0 (v1, epoch in the answer, iterative) |
//! | G3 | [`kip320_truncation`] | 2.1-2.7 (current leader epoch fencing) |
//! | G4 | [`diverging_epoch_truncation`] + [`leader_fetch_check`] | 2.8+ (truncate on fetch) |

use crate::epoch::LeaderEpochCache;
use crate::error::{ArgumentError, FencingError};
use crate::log::ReplicaLog;
use crate::types::{LeaderEpoch, Offset};

/// The follower's decision after the leader's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TruncationOutcome {
    /// Truncate to the offset and start fetching: reconciliation is done.
    Truncate(Offset),
    /// Truncate to the offset and ask the leader again (KIP-279's loop: the follower lacked
    /// the leader's epoch, so its answer is only an upper bound).
    TruncateAndRetry(Offset),
    /// The leader answered FENCED_LEADER_EPOCH: wait for newer metadata.
    Fenced,
    /// The leader answered UNKNOWN_LEADER_EPOCH: it is behind; retry later.
    UnknownLeaderEpoch,
    /// The partition's epoch changed while the request was in flight; ignore the answer.
    Discard,
}

/// The leader's verdict on a fetch that carries the follower's last fetched epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FetchCheck {
    /// Serve records from the fetch offset.
    Read,
    /// Answer DivergingEpoch with no records and no follower-state update.
    Diverging { epoch: LeaderEpoch, end_offset: Offset },
    /// OFFSET_OUT_OF_RANGE.
    OffsetOutOfRange,
}

/// The leader's answer code to OffsetsForLeaderEpoch under KIP-320.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaderAnswerError {
    FencedLeaderEpoch,
    UnknownLeaderEpoch,
}

fn check_hw(high_watermark: Offset, log_end_offset: Offset) -> Result<(), ArgumentError> {
    if high_watermark > log_end_offset {
        return Err(ArgumentError::Invalid {
            argument: "high_watermark",
            value: high_watermark.0 as i128,
            reason: format!("exceeds the log end offset {log_end_offset}"),
        });
    }
    Ok(())
}

/// G0: a new follower truncates to its local high watermark, which lags the leader's by a
/// fetch round trip and after a restart comes from a checkpoint: the root of KIP-101's
/// first problem (seed 004).
pub fn truncate_to_high_watermark(high_watermark: Offset, log_end_offset: Offset) -> Result<TruncationOutcome, ArgumentError> {
    check_hw(high_watermark, log_end_offset)?;
    Ok(TruncationOutcome::Truncate(high_watermark))
}

/// G1: the follower sent its latest epoch; `leader_end_offset` is the leader's v0 answer.
/// UNDEFINED falls back to the high watermark; otherwise the follower trusts the answer even
/// when the leader never had its epoch (the weakness KIP-279 fixed).
pub fn kip101_truncation(leader_end_offset: Option<Offset>, log_end_offset: Offset, high_watermark: Offset) -> Result<TruncationOutcome, ArgumentError> {
    check_hw(high_watermark, log_end_offset)?;
    Ok(TruncationOutcome::Truncate(match leader_end_offset {
        None => high_watermark,
        Some(off) => off.min(log_end_offset),
    }))
}

type Lookup = fn(&LeaderEpochCache, Option<LeaderEpoch>, Offset) -> Option<(LeaderEpoch, Offset)>;

/// The KIP-279 decision procedure (`AbstractFetcherThread.getOffsetTruncationState`), with the
/// follower's own lookup rule `lookup` and whether a partial answer may be retried.
fn epoch_search(
    answer: Option<(LeaderEpoch, Offset)>,
    follower: &LeaderEpochCache,
    leo: Offset,
    hw: Offset,
    lookup: Lookup,
    may_retry: bool,
) -> TruncationOutcome {
    let Some((leader_epoch, leader_end)) = answer else {
        return TruncationOutcome::Truncate(hw);
    };
    match lookup(follower, Some(leader_epoch), leo) {
        // The follower knows nothing at or below the leader's epoch: trust the leader.
        None => TruncationOutcome::Truncate(leader_end.min(leo)),
        // The follower never had the leader's epoch: its own end of the largest smaller epoch
        // is an upper bound; truncate there and ask again with that epoch.
        Some((follower_epoch, follower_end)) if follower_epoch != leader_epoch => {
            if may_retry {
                TruncationOutcome::TruncateAndRetry(follower_end.min(leo))
            } else {
                TruncationOutcome::Truncate(follower_end.min(leo))
            }
        }
        Some((_, follower_end)) => TruncationOutcome::Truncate(follower_end.min(leader_end).min(leo)),
    }
}

/// G2 (Kafka 2.0): `leader_answer` is the leader's `(epoch, end_offset)` for the follower's
/// latest epoch, `None` for UNDEFINED (fall back to the high watermark, the initial fetch
/// offset). Follower lookups use the 2.0 cache rule.
pub fn kip279_truncation(
    leader_answer: Option<(LeaderEpoch, Offset)>,
    follower: &LeaderEpochCache,
    log_end_offset: Offset,
    high_watermark: Offset,
) -> Result<TruncationOutcome, ArgumentError> {
    check_hw(high_watermark, log_end_offset)?;
    Ok(epoch_search(leader_answer, follower, log_end_offset, high_watermark, LeaderEpochCache::end_offset_for_kip279, true))
}

/// G3: KIP-279's search fenced by the current leader epoch (KIP-320). An answer to a request
/// sent in another epoch is discarded (`truncateToEpochEndOffsets` filters on it); a fenced or
/// unknown epoch stops the search.
#[allow(clippy::too_many_arguments)]
pub fn kip320_truncation(
    leader_answer: Option<(LeaderEpoch, Offset)>,
    follower: &LeaderEpochCache,
    log_end_offset: Offset,
    high_watermark: Offset,
    request_epoch: LeaderEpoch,
    current_epoch: LeaderEpoch,
    error: Option<LeaderAnswerError>,
) -> Result<TruncationOutcome, ArgumentError> {
    check_hw(high_watermark, log_end_offset)?;
    if request_epoch != current_epoch {
        return Ok(TruncationOutcome::Discard);
    }
    Ok(match error {
        Some(LeaderAnswerError::FencedLeaderEpoch) => TruncationOutcome::Fenced,
        Some(LeaderAnswerError::UnknownLeaderEpoch) => TruncationOutcome::UnknownLeaderEpoch,
        None => epoch_search(leader_answer, follower, log_end_offset, high_watermark, LeaderEpochCache::end_offset_for, true),
    })
}

/// G4 (2.8+): applies a DivergingEpoch from a fetch response. Always a plain truncation: the
/// next fetch carries the new last fetched epoch and the leader answers again if needed.
pub fn diverging_epoch_truncation(
    diverging: (LeaderEpoch, Offset),
    follower: &LeaderEpochCache,
    log_end_offset: Offset,
    high_watermark: Offset,
) -> Result<TruncationOutcome, ArgumentError> {
    check_hw(high_watermark, log_end_offset)?;
    Ok(epoch_search(Some(diverging), follower, log_end_offset, high_watermark, LeaderEpochCache::end_offset_for, false))
}

/// Leader side of truncate-on-fetch (`Partition.readRecords`): the follower's last fetched
/// epoch must end at or after its fetch offset in the leader's history, otherwise the leader
/// answers where that epoch really ends.
pub fn leader_fetch_check(
    leader: &LeaderEpochCache,
    leader_log_end_offset: Offset,
    leader_log_start_offset: Offset,
    fetch_offset: Offset,
    last_fetched_epoch: LeaderEpoch,
) -> FetchCheck {
    let Some((epoch, end_offset)) = leader.end_offset_for(Some(last_fetched_epoch), leader_log_end_offset) else {
        return FetchCheck::OffsetOutOfRange;
    };
    if fetch_offset < leader_log_start_offset {
        return FetchCheck::OffsetOutOfRange;
    }
    if epoch < last_fetched_epoch || end_offset < fetch_offset {
        return FetchCheck::Diverging { epoch, end_offset };
    }
    if fetch_offset > leader_log_end_offset {
        return FetchCheck::OffsetOutOfRange;
    }
    FetchCheck::Read
}

/// KIP-320's check of a request's current leader epoch against the replica's. `None` (a
/// client too old to send one) always passes.
pub fn check_current_leader_epoch(request_epoch: Option<LeaderEpoch>, current_epoch: LeaderEpoch) -> Result<(), FencingError> {
    match request_epoch {
        Some(r) if r < current_epoch => Err(FencingError::FencedLeaderEpoch { request_epoch: r.0, current_epoch: current_epoch.0 }),
        Some(r) if r > current_epoch => Err(FencingError::UnknownLeaderEpoch { request_epoch: r.0, current_epoch: current_epoch.0 }),
        _ => Ok(()),
    }
}

/// Where two logs stop agreeing according to their epoch caches: the end of the last epoch
/// entry both hold identically. `None` if, by epochs, one is a prefix of the other. Trusts
/// that an equal `(epoch, start_offset)` entry implies an equal prefix (the property the
/// leader-epoch protocol relies on), which makes the shared entries a prefix of `b`'s entries:
/// a binary search over them, each probe a binary search in `a`, O(log^2 epochs). Use
/// [`crate::invariants::first_mismatch`] to check the data itself.
pub fn divergence_point(a: &ReplicaLog, b: &ReplicaLog) -> Option<Offset> {
    let start = a.log_start_offset().max(b.log_start_offset());
    let limit = a.log_end_offset().min(b.log_end_offset());
    if start >= limit {
        return None;
    }
    let (ca, eb) = (a.epoch_cache(), b.epoch_cache().entries());
    let shared = |j: usize| ca.entry_for_epoch(eb[j].epoch) == Some(eb[j]);
    let (mut lo, mut hi) = (0usize, eb.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if shared(mid) { lo = mid + 1 } else { hi = mid }
    }
    if lo == 0 {
        return Some(start);
    }
    let common = eb[lo - 1].epoch;
    let end_b = eb.get(lo).map_or(b.log_end_offset(), |e| e.start_offset);
    let end_a = ca.next_start_after(common).unwrap_or(a.log_end_offset());
    let p = end_a.min(end_b);
    (p < limit).then_some(p.max(start))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::epoch::EpochEntry;

    fn cache(entries: &[(u32, u64)]) -> LeaderEpochCache {
        LeaderEpochCache::from_entries(entries.iter().map(|&(e, s)| EpochEntry { epoch: LeaderEpoch(e), start_offset: Offset(s) }).collect()).unwrap()
    }

    #[test]
    fn vanlightly_case_e() {
        // Follower {1:0, 2:2} LEO 4; leader {1:0, 3:2}.
        let follower = cache(&[(1, 0), (2, 2)]);
        let leader = cache(&[(1, 0), (3, 2)]);
        let check = leader_fetch_check(&leader, Offset(6), Offset(0), Offset(4), LeaderEpoch(2));
        assert_eq!(check, FetchCheck::Diverging { epoch: LeaderEpoch(1), end_offset: Offset(2) });
        let out = diverging_epoch_truncation((LeaderEpoch(1), Offset(2)), &follower, Offset(4), Offset(0)).unwrap();
        assert_eq!(out, TruncationOutcome::Truncate(Offset(2)));
    }

    #[test]
    fn kip279_retries_when_follower_lacks_leader_epoch() {
        let follower = cache(&[(0, 0), (2, 5)]);
        let out = kip279_truncation(Some((LeaderEpoch(1), Offset(8))), &follower, Offset(9), Offset(3)).unwrap();
        assert_eq!(out, TruncationOutcome::TruncateAndRetry(Offset(5)));
        let out = kip279_truncation(Some((LeaderEpoch(0), Offset(4))), &follower, Offset(5), Offset(3)).unwrap();
        assert_eq!(out, TruncationOutcome::Truncate(Offset(4)));
        assert_eq!(kip279_truncation(None, &follower, Offset(5), Offset(3)).unwrap(), TruncationOutcome::Truncate(Offset(3)));
    }

    #[test]
    fn fencing() {
        assert!(matches!(check_current_leader_epoch(Some(LeaderEpoch(1)), LeaderEpoch(2)), Err(FencingError::FencedLeaderEpoch { .. })));
        assert!(matches!(check_current_leader_epoch(Some(LeaderEpoch(3)), LeaderEpoch(2)), Err(FencingError::UnknownLeaderEpoch { .. })));
        assert!(check_current_leader_epoch(None, LeaderEpoch(2)).is_ok());
        let c = cache(&[(0, 0)]);
        let out = kip320_truncation(None, &c, Offset(1), Offset(0), LeaderEpoch(1), LeaderEpoch(2), None).unwrap();
        assert_eq!(out, TruncationOutcome::Discard);
    }

    #[test]
    fn divergence_point_by_epochs() {
        let mut a = ReplicaLog::new(Offset(0), false);
        let mut b = ReplicaLog::new(Offset(0), false);
        a.append_as_leader(vec![1, 2, 3], LeaderEpoch(0), None, false).unwrap();
        b.append_as_leader(vec![1, 2, 3], LeaderEpoch(0), None, false).unwrap();
        a.append_as_leader(vec![4, 5], LeaderEpoch(1), None, false).unwrap();
        b.append_as_leader(vec![6], LeaderEpoch(2), None, false).unwrap();
        assert_eq!(divergence_point(&a, &b), Some(Offset(3)));
        b.truncate_to(Offset(3));
        assert_eq!(divergence_point(&a, &b), None);
    }
}
