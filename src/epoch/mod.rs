//! The leader-epoch cache (Kafka's `LeaderEpochFileCache`) and its checkpoint file.
//!
//! An entry `(epoch, start_offset)` says that the first offset written in `epoch` is
//! `start_offset`. Epochs are strictly increasing and start offsets non-decreasing. The current
//! assign rule keeps start offsets strictly increasing too; the 0.11-2.0 rule
//! ([`LeaderEpochCache::assign_kip101`]) could record two epochs at the same start offset (a
//! leader elected twice with no write in between), so equal starts are representable.
//! Lookups are binary searches, O(log entries).

pub mod checkpoint;

use crate::types::{LeaderEpoch, Offset};

/// One cache entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EpochEntry {
    pub epoch: LeaderEpoch,
    pub start_offset: Offset,
}

/// Kafka's leader-epoch cache.
///
/// ```
/// use epochlab::{LeaderEpochCache, LeaderEpoch, Offset};
/// let mut c = LeaderEpochCache::new();
/// c.assign(LeaderEpoch(0), Offset(0));
/// c.assign(LeaderEpoch(1), Offset(120));
/// assert_eq!(c.end_offset_for(Some(LeaderEpoch(0)), Offset(200)), Some((LeaderEpoch(0), Offset(120))));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaderEpochCache {
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// A cache holding `entries`, or `Err(index)` of the first entry whose epoch is not greater
    /// than its predecessor's or whose start offset is smaller.
    pub fn from_entries(entries: Vec<EpochEntry>) -> Result<Self, usize> {
        for i in 1..entries.len() {
            let (a, b) = (entries[i - 1], entries[i]);
            if b.epoch <= a.epoch || b.start_offset < a.start_offset {
                return Err(i);
            }
        }
        Ok(Self { entries })
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    pub fn latest(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }
    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.entries.last().map(|e| e.epoch)
    }
    pub fn earliest_epoch(&self) -> Option<LeaderEpoch> {
        self.entries.first().map(|e| e.epoch)
    }
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Current rule (KAFKA-7415, Kafka 2.1+). A no-op when `epoch` is already the latest and
    /// `start_offset` is not below its start (every later batch of the same epoch). Otherwise
    /// the new entry evicts trailing entries with an epoch >= `epoch` or a start offset >=
    /// `start_offset`, which keeps the cache monotone: a follower that truncated and now
    /// re-learns an epoch from its new leader, or a leader re-elected at a smaller log end
    /// offset, replaces what it knew. Returns whether the cache changed.
    pub fn assign(&mut self, epoch: LeaderEpoch, start_offset: Offset) -> bool {
        if let Some(last) = self.latest() {
            if last.epoch == epoch && start_offset >= last.start_offset {
                return false;
            }
        }
        while let Some(last) = self.entries.last() {
            if last.epoch >= epoch || last.start_offset >= start_offset {
                self.entries.pop();
            } else {
                break;
            }
        }
        self.entries.push(EpochEntry { epoch, start_offset });
        true
    }

    /// The 0.11-2.0 rule: append only if `epoch` is newer than the latest and `start_offset`
    /// is not below its start; anything else is ignored (Kafka logged a warning). Returns
    /// whether the cache changed.
    pub fn assign_kip101(&mut self, epoch: LeaderEpoch, start_offset: Offset) -> bool {
        match self.latest() {
            Some(last) if !(epoch > last.epoch && start_offset >= last.start_offset) => false,
            _ => {
                self.entries.push(EpochEntry { epoch, start_offset });
                true
            }
        }
    }

    /// Index of the first entry with an epoch greater than `epoch`.
    fn higher_index(&self, epoch: LeaderEpoch) -> usize {
        self.entries.partition_point(|e| e.epoch <= epoch)
    }

    /// Current `endOffsetFor`: `(epoch, end_offset)` where `end_offset` is exclusive: the start
    /// of the next known epoch, or `log_end_offset` for the latest epoch. `None` where Kafka
    /// answers UNDEFINED: `requested` is `None`, or no epoch above `requested` is known (the
    /// requester is ahead of this replica). Below every known epoch the requested epoch is
    /// echoed with the first start offset (the requester's epoch predates this log).
    pub fn end_offset_for(&self, requested: Option<LeaderEpoch>, log_end_offset: Offset) -> Option<(LeaderEpoch, Offset)> {
        let requested = requested?;
        if self.latest_epoch() == Some(requested) {
            return Some((requested, log_end_offset));
        }
        let hi = self.higher_index(requested);
        let higher = self.entries.get(hi)?;
        match hi.checked_sub(1).map(|i| self.entries[i]) {
            None => Some((requested, higher.start_offset)),
            Some(floor) => Some((floor.epoch, higher.start_offset)),
        }
    }

    /// Kafka 2.0 (KIP-279): as [`Self::end_offset_for`] but a requested epoch below every known
    /// epoch answers UNDEFINED, which sends the follower back to its high watermark.
    pub fn end_offset_for_kip279(&self, requested: Option<LeaderEpoch>, log_end_offset: Offset) -> Option<(LeaderEpoch, Offset)> {
        let answer = self.end_offset_for(requested, log_end_offset)?;
        match (requested, self.earliest_epoch()) {
            (Some(r), Some(first)) if r < first => None,
            _ => Some(answer),
        }
    }

    /// Kafka 0.11 (KIP-101): an end offset only. For an UNDEFINED request an empty cache
    /// answers `log_end_offset`: the KAFKA-6857 bug (fixed in 2.0), kept because it is what
    /// that generation did.
    pub fn end_offset_for_kip101(&self, requested: Option<LeaderEpoch>, log_end_offset: Offset) -> Option<Offset> {
        let Some(requested) = requested else {
            return self.is_empty().then_some(log_end_offset);
        };
        if self.latest_epoch() == Some(requested) {
            return Some(log_end_offset);
        }
        let first = self.earliest_epoch()?;
        if requested < first {
            return None;
        }
        self.entries.get(self.higher_index(requested)).map(|e| e.start_offset)
    }

    /// Removes every entry starting at or after `end_offset` (the log was truncated there).
    pub fn truncate_from_end(&mut self, end_offset: Offset) {
        let keep = self.entries.partition_point(|e| e.start_offset < end_offset);
        self.entries.truncate(keep);
    }

    /// The log start moved to `start_offset`: entries starting at or before it are removed and
    /// the last of them is re-inserted at `start_offset`, so `epoch_for_offset(start_offset)`
    /// still answers.
    pub fn truncate_from_start(&mut self, start_offset: Offset) {
        let removed = self.entries.partition_point(|e| e.start_offset <= start_offset);
        if removed == 0 {
            return;
        }
        let epoch = self.entries[removed - 1].epoch;
        self.entries.drain(..removed);
        self.entries.insert(0, EpochEntry { epoch, start_offset });
    }

    /// Epoch of the entry with the greatest start offset <= `offset`.
    pub fn epoch_for_offset(&self, offset: Offset) -> Option<LeaderEpoch> {
        let i = self.entries.partition_point(|e| e.start_offset <= offset);
        i.checked_sub(1).map(|i| self.entries[i].epoch)
    }

    /// The entry for exactly `epoch`, if known.
    pub fn entry_for_epoch(&self, epoch: LeaderEpoch) -> Option<EpochEntry> {
        self.entries.binary_search_by(|e| e.epoch.cmp(&epoch)).ok().map(|i| self.entries[i])
    }

    /// Start offset of the entry following `epoch`'s, if any.
    pub fn next_start_after(&self, epoch: LeaderEpoch) -> Option<Offset> {
        self.entries.get(self.higher_index(epoch)).map(|e| e.start_offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(u32, u64)]) -> LeaderEpochCache {
        LeaderEpochCache::from_entries(
            entries.iter().map(|&(e, s)| EpochEntry { epoch: LeaderEpoch(e), start_offset: Offset(s) }).collect(),
        )
        .unwrap()
    }
    fn pairs(c: &LeaderEpochCache) -> Vec<(u32, u64)> {
        c.entries().iter().map(|e| (e.epoch.0, e.start_offset.0)).collect()
    }

    #[test]
    fn assign_evicts_conflicting_tail() {
        let mut c = cache(&[(0, 0), (2, 10), (4, 20)]);
        assert!(!c.assign(LeaderEpoch(4), Offset(25)));
        assert!(c.assign(LeaderEpoch(3), Offset(15)));
        assert_eq!(pairs(&c), vec![(0, 0), (2, 10), (3, 15)]);
        assert!(c.assign(LeaderEpoch(5), Offset(5)));
        assert_eq!(pairs(&c), vec![(0, 0), (5, 5)]);
        // same epoch, smaller start offset: replaced
        assert!(c.assign(LeaderEpoch(5), Offset(3)));
        assert_eq!(pairs(&c), vec![(0, 0), (5, 3)]);
    }

    #[test]
    fn kip101_assign_never_evicts() {
        let mut c = cache(&[(0, 0), (2, 10)]);
        assert!(!c.assign_kip101(LeaderEpoch(1), Offset(12)));
        assert!(!c.assign_kip101(LeaderEpoch(3), Offset(5)));
        assert!(c.assign_kip101(LeaderEpoch(3), Offset(10)));
        assert_eq!(pairs(&c), vec![(0, 0), (2, 10), (3, 10)]);
    }

    #[test]
    fn end_offset_for_generations() {
        let c = cache(&[(1, 0), (3, 2)]);
        let leo = Offset(9);
        assert_eq!(c.end_offset_for(Some(LeaderEpoch(3)), leo), Some((LeaderEpoch(3), leo)));
        assert_eq!(c.end_offset_for(Some(LeaderEpoch(2)), leo), Some((LeaderEpoch(1), Offset(2))));
        assert_eq!(c.end_offset_for(Some(LeaderEpoch(0)), leo), Some((LeaderEpoch(0), Offset(0))));
        assert_eq!(c.end_offset_for(Some(LeaderEpoch(4)), leo), None);
        assert_eq!(c.end_offset_for(None, leo), None);
        assert_eq!(c.end_offset_for_kip279(Some(LeaderEpoch(0)), leo), None);
        assert_eq!(c.end_offset_for_kip279(Some(LeaderEpoch(2)), leo), Some((LeaderEpoch(1), Offset(2))));
        assert_eq!(c.end_offset_for_kip101(Some(LeaderEpoch(2)), leo), Some(Offset(2)));
        assert_eq!(c.end_offset_for_kip101(Some(LeaderEpoch(0)), leo), None);
        assert_eq!(LeaderEpochCache::new().end_offset_for_kip101(None, leo), Some(leo));
        assert_eq!(c.end_offset_for_kip101(None, leo), None);
    }

    #[test]
    fn truncation_from_both_ends() {
        let mut c = cache(&[(0, 0), (1, 4), (2, 8)]);
        c.truncate_from_end(Offset(8));
        assert_eq!(pairs(&c), vec![(0, 0), (1, 4)]);
        c.truncate_from_start(Offset(6));
        assert_eq!(pairs(&c), vec![(1, 6)]);
        assert_eq!(c.epoch_for_offset(Offset(5)), None);
        assert_eq!(c.epoch_for_offset(Offset(6)), Some(LeaderEpoch(1)));
    }
}
