//! Whole-log scans used by tests, fuzzers and the checker (each O(batches + records)), and the
//! state invariants of PROTOCOL section 4 as pure functions, each stated once here for both of
//! their Rust callers: the simulator's state checker (`StateScan` in the bindings, the passing
//! cases of `epochlab.checks.state.StateChecker`'s per-event checks, over a plain view of the
//! cluster: [`ReplicaView`], [`ControllerView`]) and the trace replay (`crate::replay`, which
//! reports what they find). The Python statements (`epochlab.checks.state`,
//! `epochlab.trace.reference`) are the oracles the differential tests compare them with.
//!
//! For the checker a `false` is the cue to run the Python statement of that part, which
//! reports (the messages are made in one place); the replay words its own reports from what
//! the `first_*` forms return. Log comparisons are the caller's: it passes them as closures,
//! so that it may keep what it has already verified between calls (`StateScan` and the replay
//! both do).

use crate::log::ReplicaLog;
use crate::types::Offset;

/// The first offset in `[max(log starts), min(log ends))` where the two logs differ in batch
/// boundaries, batch epoch, record value or hole; `None` if that common range is identical.
/// A two-pointer walk over both batch columns comparing record slices: one linear pass.
pub fn first_mismatch(a: &ReplicaLog, b: &ReplicaLog) -> Option<Offset> {
    first_mismatch_between(a, b, Offset(0), Offset(u64::MAX))
}

/// [`first_mismatch`] restricted to `[from, limit)` (intersected with the common range): the
/// incremental form the trace replay uses, comparing only what changed since the last check.
/// Batch boundaries and epochs are compared as in the whole-log scan, so the first mismatch
/// below `limit` is the same offset the whole-log scan reports.
pub fn first_mismatch_between(a: &ReplicaLog, b: &ReplicaLog, from: Offset, limit: Offset) -> Option<Offset> {
    let start = a.log_start_offset().max(b.log_start_offset()).max(from).0;
    let limit = a.log_end_offset().min(b.log_end_offset()).min(limit).0;
    let (sa, sb) = (a.store(), b.store());
    let (mut ia, mut ib) = (sa.first_ending_at_or_after(start), sb.first_ending_at_or_after(start));
    let mut o = start;
    while o < limit {
        // The batch holding `o` in each log, if any (`ia`/`ib` point at the first batch
        // ending at or after `o`).
        let at_a = (ia < sa.len() && sa.base(ia) <= o).then_some(ia);
        let at_b = (ib < sb.len() && sb.base(ib) <= o).then_some(ib);
        match (at_a, at_b) {
            (None, None) => {
                let next = |s: &super::log::BatchStore, i: usize| if i < s.len() { s.base(i) } else { u64::MAX };
                o = next(sa, ia).min(next(sb, ib)).min(limit);
            }
            (Some(i), Some(j)) => {
                if (sa.base(i), sa.last(i), sa.epoch(i)) != (sb.base(j), sb.last(j), sb.epoch(j)) {
                    return Some(Offset(o));
                }
                let (base, last) = (sa.base(i), sa.last(i));
                let upto = last.min(limit - 1);
                let (from, to) = ((o - base) as usize, (upto - base) as usize + 1);
                if let Some(k) = sa.records(i)[from..to].iter().zip(&sb.records(j)[from..to]).position(|(x, y)| x != y) {
                    return Some(Offset(o + k as u64));
                }
                o = upto + 1;
                ia += 1;
                ib += 1;
            }
            _ => return Some(Offset(o)),
        }
    }
    None
}

/// Offsets where the log's batch epochs decrease (Inv-EpochMonotone): the base offset of each
/// batch whose epoch is below its predecessor's.
pub fn epoch_regressions(log: &ReplicaLog) -> Vec<Offset> {
    let s = log.store();
    (1..s.len()).filter(|&i| epoch_goes_back(s.epoch(i - 1), s.epoch(i))).map(|i| Offset(s.base(i))).collect()
}

/// Inv-EpochMonotone between two neighbouring batches: a batch whose epoch is below the one
/// before it breaks it.
pub fn epoch_goes_back(before: u32, next: u32) -> bool {
    next < before
}

// -- the state checker's predicates ------------------------------------------------------------

/// What the state checks read of one broker and its replica.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplicaView {
    /// The broker's id.
    pub id: i64,
    pub alive: bool,
    /// Its role is leader.
    pub leader: bool,
    /// Its role is leader or follower (not none).
    pub replicating: bool,
    pub leader_epoch: Option<u32>,
    /// It has a partition epoch (KRaft).
    pub has_partition_epoch: bool,
    pub high_watermark: u64,
    pub log_end_offset: u64,
    /// The size of its ISR.
    pub isr_len: usize,
    /// Its maximal ISR (the ISR and a pending one), read for a leader only.
    pub maximal_isr: Vec<i64>,
}

/// What the state checks read of the controller.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControllerView {
    pub leader: Option<i64>,
    pub leader_epoch: Option<i64>,
    pub isr: Vec<i64>,
    pub elr: Vec<i64>,
}

/// Inv-EpochMonotone's passing case (`StateChecker._check_epochs`): batch epochs never go
/// down, and the cache is the log's epoch boundaries plus at most one data-less entry at the
/// LEO with a newer epoch, or (the log start moved) ends with those boundaries.
pub fn epoch_cache_matches(log: &ReplicaLog) -> bool {
    let (bounds, bad) = log.epoch_boundaries();
    if bad.is_some() {
        return false;
    }
    let derived: Vec<(u32, u64)> = bounds.iter().map(|(e, o)| (e.0, o.0)).collect();
    let entries: Vec<(u32, u64)> = log.epoch_cache().entries().iter().map(|e| (e.epoch.0, e.start_offset.0)).collect();
    let n = derived.len();
    let last_epoch = derived.last().map_or(-1, |d| i64::from(d.0));
    let leo = log.log_end_offset().0;
    let head = entries.len() >= n && entries[..n] == derived[..];
    let extra = &entries[n.min(entries.len())..];
    let ok = head && (extra.is_empty() || (extra.len() == 1 && extra[0].1 == leo && i64::from(extra[0].0) > last_epoch));
    if !ok && n > 0 && !entries.is_empty() && log.log_start_offset().0 > 0 {
        return entries.len() >= n && entries[entries.len() - n..] == derived[..];
    }
    ok
}

/// A replica's own log passes (`StateChecker._check_replica`, its log part): log start <= HW
/// <= LEO (Inv-HW-bounds), no offset without a batch (Inv-OffsetMonotone) and, when batches
/// carry epochs, [`epoch_cache_matches`].
pub fn replica_log_ok(log: &ReplicaLog, epochs_in_batches: bool) -> bool {
    let (start, hw, leo) = (log.log_start_offset(), log.high_watermark(), log.log_end_offset());
    hw_within_log(start.0, hw.0, leo.0) && log.holes().is_empty() && (!epochs_in_batches || epoch_cache_matches(log))
}

/// Inv-HW-bounds for one replica: its HW lies between its log start and its log end.
pub fn hw_within_log(log_start_offset: u64, high_watermark: u64, log_end_offset: u64) -> bool {
    log_start_offset <= high_watermark && high_watermark <= log_end_offset
}

/// A leader's HW in one epoch of one incarnation, against the highest seen `before`: it never
/// goes down (Inv-HW-bounds), and with `min_isr` (generations that refuse to commit below
/// `min.insync.replicas`) it goes up only with at least that many in its ISR (Inv-MinIsr).
pub fn leader_hw_ok(before: Option<u64>, hw: u64, isr_len: usize, min_isr: Option<usize>) -> bool {
    match before {
        None => true,
        Some(before) => hw >= before && !(hw > before && min_isr.is_some_and(|m| isr_len < m)),
    }
}

/// No two live leaders of one epoch (Inv-EpochFencing).
pub fn one_leader_per_epoch(replicas: &[ReplicaView]) -> bool {
    let mut acting: Vec<u32> = Vec::new();
    for r in replicas.iter().filter(|r| r.alive && r.leader) {
        if let Some(epoch) = r.leader_epoch {
            if other_leader_of_epoch(acting.iter().map(|&e| (true, Some(e))), epoch) {
                return false;
            }
            acting.push(epoch);
        }
    }
    true
}

/// Inv-EpochFencing for a replica that leads `epoch`: whether any of the `others` (each
/// `(alive, the epoch it leads, if it leads)`) is a live leader of the same epoch.
pub fn other_leader_of_epoch(others: impl IntoIterator<Item = (bool, Option<u32>)>, epoch: u32) -> bool {
    others.into_iter().any(|(alive, leads)| alive && leads == Some(epoch))
}

/// Whether `r` is the live leader of the controller's epoch (what the controller's leader
/// must be for Inv-Durability and the quorum check to apply).
pub fn leads_controllers_epoch(r: &ReplicaView, controller: &ControllerView) -> bool {
    r.alive && r.leader && r.leader_epoch.map(i64::from) == controller.leader_epoch
}

/// A log holds everything committed (`StateChecker._missing_committed` finds nothing): below
/// `true_hw` it does not differ from the truth (`mismatch`, asked only when `true_hw > 0`,
/// is the first offset where they differ) and it reaches `true_hw`.
pub fn holds_committed(true_hw: u64, log_end_offset: u64, mismatch: impl FnOnce() -> Option<Offset>) -> bool {
    true_hw == 0 || first_missing_committed(true_hw, log_end_offset, mismatch).is_none()
}

/// Inv-Durability's finding: the first offset below `true_hw` that a log does not hold as
/// committed, the first where it differs from the truth (`mismatch`, asked only when
/// `true_hw > 0`) or else its log end if that is below `true_hw`; `None` if it holds
/// everything committed ([`holds_committed`]).
pub fn first_missing_committed(true_hw: u64, log_end_offset: u64, mismatch: impl FnOnce() -> Option<Offset>) -> Option<u64> {
    if true_hw == 0 {
        return None;
    }
    match mismatch() {
        Some(m) if m.0 < true_hw => Some(m.0),
        _ if log_end_offset < true_hw => Some(log_end_offset),
        _ => None,
    }
}

/// Inv-ReplicationQuorumSuperset: every member of the controller's ISR that `leader` does not
/// count in its maximal ISR has every offset below its HW. `Err(id)`: an ISR member that is
/// no broker.
pub fn quorum_superset(leader: &ReplicaView, controller: &ControllerView, replicas: &[ReplicaView]) -> Result<bool, i64> {
    for &x in &controller.isr {
        if leader.maximal_isr.contains(&x) {
            continue;
        }
        let member = replicas.iter().find(|r| r.id == x).ok_or(x)?;
        if member.log_end_offset < leader.high_watermark {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Inv-LogMatching over every pair with a member in `changed`: the two logs agree below the
/// smaller HW. `mismatch(i, j)` is the first offset where `replicas[i]`'s and `replicas[j]`'s
/// logs differ; pairs are taken in id order, and a pair whose smaller HW is 0 is not compared.
pub fn logs_match(replicas: &[ReplicaView], changed: &[i64], mut mismatch: impl FnMut(usize, usize) -> Option<Offset>) -> bool {
    let mut order: Vec<usize> = (0..replicas.len()).collect();
    order.sort_by_key(|&i| replicas[i].id);
    for (k, &a) in order.iter().enumerate() {
        for &b in &order[k + 1..] {
            if !changed.contains(&replicas[a].id) && !changed.contains(&replicas[b].id) {
                continue;
            }
            let (hw_a, hw_b) = (replicas[a].high_watermark, replicas[b].high_watermark);
            if differ_below_hws(hw_a, hw_b, |_| mismatch(a, b)).is_some() {
                return false;
            }
        }
    }
    true
}

/// Inv-LogMatching for one pair of replicas: the first offset below the smaller of their HWs
/// (the bound) where their logs differ, `None` if they agree there or the bound is 0.
/// `mismatch(bound)` is the first offset where the logs differ, looked for below `bound` at
/// least (asked only when the bound is above 0; an offset at or past the bound is ignored).
pub fn differ_below_hws(hw_a: u64, hw_b: u64, mismatch: impl FnOnce(Offset) -> Option<Offset>) -> Option<Offset> {
    let bound = hw_a.min(hw_b);
    if bound == 0 {
        return None;
    }
    mismatch(Offset(bound)).filter(|m| m.0 < bound)
}

/// Inv-StrongIsr: every live ISR or ELR member of `assigned` (the partition's replicas, in
/// order) that leads or follows, and is in `changed` unless `every`, holds everything
/// committed (`holds(i)` of `replicas[i]`, e.g. [`holds_committed`]). `Err(id)`: a member
/// that is no broker.
pub fn strong_isr(assigned: &[i64], controller: &ControllerView, replicas: &[ReplicaView], changed: &[i64], every: bool,
                  mut holds: impl FnMut(usize) -> bool) -> Result<bool, i64> {
    for &b in assigned {
        if !(controller.isr.contains(&b) || controller.elr.contains(&b)) || !(every || changed.contains(&b)) {
            continue;
        }
        let i = replicas.iter().position(|r| r.id == b).ok_or(b)?;
        let r = &replicas[i];
        if !r.alive || !r.replicating {
            continue;
        }
        if !holds(i) {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::RecordBatch;
    use crate::types::LeaderEpoch;

    #[test]
    fn finds_first_differing_record() {
        let mut a = ReplicaLog::new(Offset(0), false);
        let mut b = ReplicaLog::new(Offset(0), false);
        a.append_as_leader(vec![1, 2, 3], LeaderEpoch(0), None, false).unwrap();
        b.append_as_leader(vec![1, 2, 3], LeaderEpoch(0), None, false).unwrap();
        assert_eq!(first_mismatch(&a, &b), None);
        a.append_as_leader(vec![4, 5, 6], LeaderEpoch(1), None, false).unwrap();
        b.append_as_leader(vec![4, 9, 6], LeaderEpoch(1), None, false).unwrap();
        assert_eq!(first_mismatch(&a, &b), Some(Offset(4)));
        let mut c = ReplicaLog::new(Offset(0), false);
        c.append_as_leader(vec![1, 2], LeaderEpoch(0), None, false).unwrap();
        assert_eq!(first_mismatch(&a, &c), Some(Offset(0)));
    }

    fn view(id: i64, hw: u64, leo: u64) -> ReplicaView {
        ReplicaView { id, alive: true, replicating: true, high_watermark: hw, log_end_offset: leo, ..ReplicaView::default() }
    }

    fn leader(id: i64, epoch: u32) -> ReplicaView {
        ReplicaView { leader: true, leader_epoch: Some(epoch), ..view(id, 0, 0) }
    }

    #[test]
    fn a_replica_log_passes_within_bounds_and_with_matching_epochs() {
        let mut log = ReplicaLog::new(Offset(0), false);
        log.append_as_leader(vec![1, 2], LeaderEpoch(0), None, false).unwrap();
        log.append_as_leader(vec![3], LeaderEpoch(2), None, false).unwrap();
        assert!(replica_log_ok(&log, true));
        assert_eq!(epoch_regressions(&log), []);
        // a batch of a lower epoch after a higher one: the epochs fail, the bounds still pass
        let mut back = ReplicaLog::new(Offset(0), false);
        back.append_as_follower(&RecordBatch::new(Offset(0), LeaderEpoch(3), vec![1], None, false, false).unwrap()).unwrap();
        back.append_as_follower(&RecordBatch::new(Offset(1), LeaderEpoch(1), vec![2], None, false, false).unwrap()).unwrap();
        assert_eq!(epoch_regressions(&back), [Offset(1)]);
        assert!(!epoch_cache_matches(&back));
        assert!(!replica_log_ok(&back, true));
        assert!(replica_log_ok(&back, false));
    }

    #[test]
    fn a_leaders_hw_never_goes_down_nor_up_without_min_isr() {
        assert!(leader_hw_ok(None, 0, 0, Some(2)));
        assert!(leader_hw_ok(Some(5), 5, 1, Some(2)), "staying put needs no ISR");
        assert!(!leader_hw_ok(Some(5), 4, 3, None));
        assert!(leader_hw_ok(Some(5), 6, 1, None));
        assert!(!leader_hw_ok(Some(5), 6, 1, Some(2)));
        assert!(leader_hw_ok(Some(5), 6, 2, Some(2)));
    }

    #[test]
    fn two_live_leaders_of_one_epoch_fail() {
        assert!(one_leader_per_epoch(&[leader(1, 3), leader(2, 4), view(3, 0, 0)]));
        assert!(!one_leader_per_epoch(&[leader(1, 3), view(2, 0, 0), leader(3, 3)]));
        let dead = ReplicaView { alive: false, ..leader(3, 3) };
        assert!(one_leader_per_epoch(&[leader(1, 3), dead]));
        let no_epoch = ReplicaView { leader_epoch: None, ..leader(2, 0) };
        assert!(one_leader_per_epoch(&[no_epoch.clone(), no_epoch]));
    }

    #[test]
    fn the_controllers_leader_and_its_quorum() {
        let ctrl = ControllerView { leader: Some(1), leader_epoch: Some(3), isr: vec![1, 2, 3], elr: vec![] };
        let mut l = leader(1, 3);
        assert!(leads_controllers_epoch(&l, &ctrl));
        assert!(!leads_controllers_epoch(&leader(1, 2), &ctrl));
        l.high_watermark = 10;
        l.maximal_isr = vec![1, 2];
        let replicas = [l.clone(), view(2, 0, 4), view(3, 0, 10)];
        assert_eq!(quorum_superset(&l, &ctrl, &replicas), Ok(true), "3 is outside the maximal ISR but has every offset");
        let behind = [l.clone(), view(2, 0, 4), view(3, 0, 9)];
        assert_eq!(quorum_superset(&l, &ctrl, &behind), Ok(false));
        assert_eq!(quorum_superset(&l, &ctrl, &behind[..2]), Err(3));
    }

    #[test]
    fn committed_offsets_are_held_below_the_true_hw() {
        assert!(holds_committed(0, 0, || unreachable!("not asked when nothing is committed")));
        assert!(holds_committed(5, 5, || None));
        assert!(holds_committed(5, 7, || Some(Offset(5))), "a difference at the true HW is not committed");
        assert!(!holds_committed(5, 7, || Some(Offset(4))));
        assert!(!holds_committed(5, 4, || None), "the log ends before the true HW");
    }

    #[test]
    fn logs_match_below_the_smaller_hw_for_changed_pairs() {
        // brokers 1 and 2 differ at offset 3
        let replicas = [view(3, 5, 5), view(1, 5, 5), view(2, 4, 5)];
        let differs = |i: usize, j: usize| (replicas[i].id + replicas[j].id == 3).then_some(Offset(3));
        let mut asked = Vec::new();
        assert!(!logs_match(&replicas, &[1], |i, j| {
            asked.push((replicas[i].id, replicas[j].id));
            differs(i, j)
        }));
        assert_eq!(asked, [(1, 2)], "in id order, stopping at the first failure");
        assert!(logs_match(&replicas, &[3], differs), "1 and 2 are compared only when one of them changed");
        let low = [view(1, 5, 5), view(2, 3, 5)];
        assert!(logs_match(&low, &[2], |_, _| Some(Offset(3))), "a difference at the smaller HW is not below it");
        let zero = [view(1, 0, 5), view(2, 3, 5)];
        assert!(logs_match(&zero, &[1], |_, _| unreachable!("not compared below HW 0")));
    }

    #[test]
    fn strong_isr_asks_live_replicating_members() {
        let ctrl = ControllerView { leader: Some(1), leader_epoch: Some(1), isr: vec![1, 2], elr: vec![3] };
        let down = ReplicaView { alive: false, ..view(2, 0, 0) };
        let idle = ReplicaView { replicating: false, ..view(3, 0, 0) };
        let replicas = [view(1, 0, 0), down, idle, view(4, 0, 0)];
        let mut asked = Vec::new();
        let all = strong_isr(&[1, 2, 3, 4], &ctrl, &replicas, &[], true, |i| {
            asked.push(replicas[i].id);
            true
        });
        assert_eq!((all, asked), (Ok(true), vec![1]), "4 is in neither list, 2 is down, 3 has no role");
        assert_eq!(strong_isr(&[1, 2], &ctrl, &replicas, &[2], false, |_| false), Ok(true), "only changed members unless every");
        assert_eq!(strong_isr(&[1], &ctrl, &replicas, &[1], false, |_| false), Ok(false));
        assert_eq!(strong_isr(&[5, 1], &ControllerView { isr: vec![5], ..ctrl }, &replicas, &[], true, |_| true), Err(5));
    }

    #[test]
    fn single_statements_of_the_state_invariants() {
        // Inv-EpochMonotone: equal epochs are fine, a lower one is not
        assert!(!epoch_goes_back(3, 3) && !epoch_goes_back(3, 4) && epoch_goes_back(4, 3));
        // Inv-HW-bounds: both ends inclusive
        assert!(hw_within_log(2, 2, 5) && hw_within_log(2, 5, 5));
        assert!(!hw_within_log(2, 1, 5) && !hw_within_log(2, 6, 5));
        // Inv-EpochFencing: a dead leader or a leader of another epoch is no rival
        assert!(!other_leader_of_epoch([(false, Some(4)), (true, Some(3)), (true, None)], 4));
        assert!(other_leader_of_epoch([(true, Some(3)), (true, Some(4))], 4));
    }

    #[test]
    fn first_missing_committed_names_the_offset_holds_committed_rejects() {
        assert_eq!(first_missing_committed(0, 0, || unreachable!("nothing committed: no comparison")), None);
        assert_eq!(first_missing_committed(5, 7, || Some(Offset(3))), Some(3), "differs below trueHW");
        assert_eq!(first_missing_committed(5, 7, || Some(Offset(5))), None, "differs at trueHW: not committed");
        assert_eq!(first_missing_committed(5, 4, || None), Some(4), "too short");
        assert_eq!(first_missing_committed(5, 4, || Some(Offset(2))), Some(2), "the first of the two");
        for (hw, leo, m) in [(0, 0, None), (5, 7, Some(3)), (5, 7, Some(5)), (5, 4, None), (5, 7, None)] {
            let missing = first_missing_committed(hw, leo, || m.map(Offset));
            assert_eq!(holds_committed(hw, leo, || m.map(Offset)), missing.is_none());
        }
    }

    #[test]
    fn differ_below_hws_compares_below_the_smaller_hw_only() {
        assert_eq!(differ_below_hws(0, 9, |_| unreachable!("HW 0: nothing to compare")), None);
        let mut asked = None;
        assert_eq!(differ_below_hws(9, 4, |bound| {
            asked = Some(bound);
            Some(Offset(2))
        }), Some(Offset(2)));
        assert_eq!(asked, Some(Offset(4)));
        assert_eq!(differ_below_hws(9, 4, |_| Some(Offset(4))), None, "at the bound: above a HW");
        assert_eq!(differ_below_hws(9, 4, |_| None), None);
    }
}
