//! Whole-log scans used by tests, fuzzers and the checker. Each is O(batches + records).

use crate::log::ReplicaLog;
use crate::types::Offset;

/// Per-offset identity of a log position: `None` for a hole, else the containing batch's
/// `(base, last, epoch)` and the record value.
fn key_at(log: &ReplicaLog, offset: u64) -> Option<(u64, u64, u32, u64)> {
    let s = log.store();
    let i = s.containing(offset)?;
    Some((s.base(i), s.last(i), s.epoch(i), s.records(i)[(offset - s.base(i)) as usize]))
}

/// The first offset in `[max(log starts), min(log ends))` where the two logs differ in batch
/// boundaries, batch epoch, record value or hole; `None` if that common range is identical.
/// Walks batch by batch and compares record slices, so identical logs cost one pass.
pub fn first_mismatch(a: &ReplicaLog, b: &ReplicaLog) -> Option<Offset> {
    let start = a.log_start_offset().max(b.log_start_offset()).0;
    let limit = a.log_end_offset().min(b.log_end_offset()).0;
    let mut o = start;
    while o < limit {
        let (ka, kb) = (key_at(a, o), key_at(b, o));
        if ka != kb {
            return Some(Offset(o));
        }
        match ka {
            // Both hold the same batch at `o`: compare the rest of it at once.
            Some((base, last, _, _)) => {
                let (sa, sb) = (a.store(), b.store());
                let (ia, ib) = (sa.containing(o).unwrap_or_default(), sb.containing(o).unwrap_or_default());
                let upto = last.min(limit - 1);
                let from = (o - base) as usize;
                let to = (upto - base) as usize + 1;
                let (ra, rb) = (&sa.records(ia)[from..to], &sb.records(ib)[from..to]);
                if let Some(k) = ra.iter().zip(rb).position(|(x, y)| x != y) {
                    return Some(Offset(o + k as u64));
                }
                o = upto + 1;
            }
            // Both have a hole at `o`: skip to the next batch start in either log.
            None => {
                let next = |log: &ReplicaLog| {
                    let s = log.store();
                    let i = s.first_ending_at_or_after(o);
                    if i < s.len() { s.base(i) } else { u64::MAX }
                };
                o = next(a).min(next(b)).min(limit);
            }
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
