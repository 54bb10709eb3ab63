//! Whole-log scans used by tests, fuzzers and the checker. Each is O(batches + records).

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
    (1..s.len()).filter(|&i| s.epoch(i) < s.epoch(i - 1)).map(|i| Offset(s.base(i))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
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
}
