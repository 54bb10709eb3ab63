//! The optional journal of a [`super::ReplicaLog`]: one compact entry per state change, in
//! columns, so that a simulation run can be exported as a trace (`docs/trace-format.md`).
//!
//! Entries record *effects*, not calls: an append records the batch as stored, a high
//! watermark change the resulting value, an `assign_epoch` only when the cache changed. A
//! call that changes nothing (a duplicate append, a refused append, an HW update to the same
//! value) leaves no entry. Recording never alters what the log does: the journal is written
//! after the operation, from its result.
//!
//! Storage: per entry a kind (1 byte), an offset (8), an epoch (4) and a record count (4);
//! the record values of appends go to one flat vector and the producer fields of idempotent
//! batches to a side vector, so a plain append costs 17 bytes plus 8 per record and no heap
//! allocation of its own.

use crate::batch::ProducerFields;

/// What an entry records. The numeric values are the trace format's `kind` codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum JournalKind {
    /// A batch appended as leader: `offset` = base offset, `epoch` = its leader epoch.
    AppendLeader = 0,
    /// A replicated batch appended as follower (same fields).
    AppendFollower = 1,
    /// `truncate_to(offset)` (also the no-op at/after the log end that drops a data-less
    /// trailing epoch entry).
    Truncate = 2,
    /// `truncate_fully_and_start_at(offset)`.
    TruncateFully = 3,
    /// The high watermark became `offset`.
    HighWatermark = 4,
    /// The epoch cache took `(epoch, offset)`.
    AssignEpoch = 5,
    /// The recovery point became `offset`.
    Flush = 6,
    /// `drop_unflushed()`: the unflushed tail was lost; `offset` = the new log end offset.
    DropUnflushed = 7,
}

/// Flag bits stored with an append entry (the trace format's `flags` column).
pub const FLAG_TRANSACTIONAL: u8 = 4;
/// See [`FLAG_TRANSACTIONAL`].
pub const FLAG_CONTROL: u8 = 8;

/// The recorded entries, column by column; see the module docs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Journal {
    pub kind: Vec<u8>,
    pub offset: Vec<u64>,
    pub epoch: Vec<u32>,
    /// Records of an append (0 for other kinds); its values are the next `record_count`
    /// entries of `values`.
    pub record_count: Vec<u32>,
    pub flags: Vec<u8>,
    pub values: Vec<u64>,
    /// `(entry index, producer fields)` for appends of batches with producer fields.
    pub producers: Vec<(u64, ProducerFields)>,
}

impl Journal {
    pub fn len(&self) -> usize {
        self.kind.len()
    }
    pub fn is_empty(&self) -> bool {
        self.kind.is_empty()
    }

    /// Records a non-append entry.
    pub(crate) fn note(&mut self, kind: JournalKind, offset: u64, epoch: u32) {
        self.kind.push(kind as u8);
        self.offset.push(offset);
        self.epoch.push(epoch);
        self.record_count.push(0);
        self.flags.push(0);
    }

    /// Records an append of `records` at `base` in `epoch`.
    pub(crate) fn append(&mut self, kind: JournalKind, base: u64, epoch: u32, records: &[u64], producer: Option<ProducerFields>, flags: u8) {
        if let Some(p) = producer {
            self.producers.push((self.kind.len() as u64, p));
        }
        self.kind.push(kind as u8);
        self.offset.push(base);
        self.epoch.push(epoch);
        self.record_count.push(records.len() as u32);
        self.flags.push(flags);
        self.values.extend_from_slice(records);
    }

    /// Heap bytes held (capacities), for memory reports.
    pub fn heap_bytes(&self) -> usize {
        self.kind.capacity() + self.offset.capacity() * 8 + self.epoch.capacity() * 4 + self.record_count.capacity() * 4
            + self.flags.capacity() + self.values.capacity() * 8 + self.producers.capacity() * std::mem::size_of::<(u64, ProducerFields)>()
    }
}

#[cfg(test)]
mod tests {
    use crate::log::ReplicaLog;
    use crate::types::{LeaderEpoch, Offset};

    /// Every kind of change is journaled once, after it happened, and a log without a
    /// journal behaves identically.
    #[test]
    fn journal_records_effects_without_changing_behaviour() {
        let run = |journal: bool| {
            let mut log = ReplicaLog::new(Offset(0), false);
            if journal {
                log.enable_journal();
            }
            log.append_as_leader(vec![1, 2], LeaderEpoch(0), None, false).unwrap();
            log.append_many_as_leader(LeaderEpoch(1), &[1, 2], &[3, 4, 5]).unwrap();
            log.maybe_increment_high_watermark(Offset(4));
            log.maybe_increment_high_watermark(Offset(4)); // no change: no entry
            log.flush(Some(Offset(3)));
            log.assign_epoch(LeaderEpoch(2), Offset(5));
            log.truncate_to(Offset(3));
            log.drop_unflushed();
            (log.take_journal(), log.log_end_offset(), log.high_watermark(), log.batches())
        };
        let (j, leo, hw, batches) = run(true);
        let (none, leo2, hw2, batches2) = run(false);
        assert!(none.is_empty());
        assert_eq!((leo, hw, batches), (leo2, hw2, batches2));
        // append, append x2, HW, flush, assign, truncate, HW (clamped by truncate), drop.
        assert_eq!(j.kind, vec![0, 0, 0, 4, 6, 5, 2, 4, 7]);
        assert_eq!(j.offset, vec![0, 2, 3, 4, 3, 5, 3, 3, 3]);
        assert_eq!(j.values, vec![1, 2, 3, 4, 5]);
    }
}
