//! Idempotent-producer state: per producer id, its epoch and its last 5 batches.
//!
//! Mirrors Kafka's `ProducerStateManager` / `ProducerAppendInfo`: the leader validates client
//! batches (duplicate -> original offsets, fenced epoch, out-of-order sequence); followers and
//! log recovery apply batches without checks; truncation and restarts reload it from a
//! [`ProducerSnapshot`] and replay the log after it (`crate::log::ReplicaLog`).

use std::collections::{BTreeMap, VecDeque};

use crate::error::ProducerStateError;
use crate::batch::RecordBatch;
use crate::types::{Offset, ProducerEpoch, ProducerId, Sequence};

/// Batches retained per producer id for deduplication (`NUM_BATCHES_TO_RETAIN`, KAFKA-5494).
pub const NUM_BATCHES_TO_RETAIN: usize = 5;

/// What a retained batch remembers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_seq: Sequence,
    pub last_seq: Sequence,
    pub base_offset: Offset,
    pub last_offset: Offset,
}

/// State of one producer id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerStateEntry {
    pub producer_epoch: ProducerEpoch,
    /// Oldest first, at most [`NUM_BATCHES_TO_RETAIN`].
    pub batches: VecDeque<BatchMetadata>,
    /// Coordinator epoch of the producer's latest transaction marker.
    pub coordinator_epoch: Option<u32>,
}

/// One producer's entry in a producer snapshot: what Kafka's snapshot file keeps of it
/// (`ProducerStateManager.writeSnapshot` / `readSnapshot`, `ProducerSnapshot.ProducerEntry`):
/// its epoch, its **last** batch only (none if its epoch has written no data batch), the
/// coordinator epoch of its latest marker and the first offset of its ongoing transaction
/// (`currentTxnFirstOffset`). Unreplicated (ended) transactions are not in a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotEntry {
    pub producer_epoch: ProducerEpoch,
    pub last_batch: Option<BatchMetadata>,
    pub coordinator_epoch: Option<u32>,
    pub current_txn_first_offset: Option<Offset>,
}

/// A producer snapshot: every producer's [`SnapshotEntry`], by producer id.
pub type ProducerSnapshot = BTreeMap<ProducerId, SnapshotEntry>;

impl SnapshotEntry {
    /// The entry `readSnapshot` rebuilds: the one batch (`ProducerStateEntry.addBatch`).
    pub(crate) fn to_entry(self) -> ProducerStateEntry {
        ProducerStateEntry {
            producer_epoch: self.producer_epoch,
            batches: self.last_batch.into_iter().collect(),
            coordinator_epoch: self.coordinator_epoch,
        }
    }
}

/// Verdict on a client batch that passed validation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendCheck {
    /// Append it.
    Fresh,
    /// A retry of a batch already in the log: answer with these offsets, append nothing.
    Duplicate { base_offset: Offset, last_offset: Offset },
}

/// Producer state of one partition replica.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerStateManager {
    entries: BTreeMap<ProducerId, ProducerStateEntry>,
}

impl ProducerStateManager {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn entry(&self, producer_id: ProducerId) -> Option<&ProducerStateEntry> {
        self.entries.get(&producer_id)
    }
    pub fn entries(&self) -> impl Iterator<Item = (&ProducerId, &ProducerStateEntry)> {
        self.entries.iter()
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    pub(crate) fn insert(&mut self, producer_id: ProducerId, entry: ProducerStateEntry) {
        self.entries.insert(producer_id, entry);
    }

    /// Every producer with its epoch and coordinator epoch but no batch: where the
    /// `ProducerAppendInfo` of a rebuild starts (`ProducerStateEntry.withProducerId` copies no
    /// batch metadata).
    pub(crate) fn without_batches(&self) -> Self {
        let entries = self
            .entries
            .iter()
            .map(|(pid, e)| (*pid, ProducerStateEntry { batches: VecDeque::new(), ..e.clone() }))
            .collect();
        Self { entries }
    }

    /// Merges the entries a replay built ([`Self::without_batches`] plus the replayed
    /// batches) into this state, as `UnifiedLog.loadProducersFromRecords` hands each
    /// producer's `ProducerAppendInfo` to `ProducerStateManager.update`
    /// (`ProducerStateEntry.update`): the replay's final epoch replaces the entry's, and
    /// forgets its batches, only if it differs; the replayed batches are appended (5 kept);
    /// the replay's coordinator epoch is taken. After epochs 2 -> 3 -> 2 in the replay the
    /// entry keeps its epoch-2 batches before the replayed ones.
    pub(crate) fn merge(&mut self, replayed: Self) {
        for (pid, next) in replayed.entries {
            let Some(entry) = self.entries.get_mut(&pid) else {
                self.entries.insert(pid, next);
                continue;
            };
            if entry.producer_epoch != next.producer_epoch {
                entry.producer_epoch = next.producer_epoch;
                entry.batches.clear();
            }
            for meta in next.batches {
                if entry.batches.len() == NUM_BATCHES_TO_RETAIN {
                    entry.batches.pop_front();
                }
                entry.batches.push_back(meta);
            }
            entry.coordinator_epoch = next.coordinator_epoch;
        }
    }

    /// Validates a client batch as the leader does, in Kafka's order, without changing state.
    ///
    /// An unknown producer id accepts any sequence (its state expired or was never here: the
    /// KIP-360 behaviour that makes a retry after state loss a duplicate in the log). A batch of
    /// the current epoch matching a retained batch's sequence range exactly is a duplicate.
    /// An older epoch is fenced; a newer epoch must start at sequence 0; the same epoch must
    /// continue at the last sequence + 1 (wrapping), or at 0 when no batch is retained.
    pub fn check_leader_append(&self, batch: &RecordBatch) -> Result<AppendCheck, ProducerStateError> {
        let Some(p) = batch.producer() else { return Ok(AppendCheck::Fresh) };
        let Some(entry) = self.entries.get(&p.producer_id) else { return Ok(AppendCheck::Fresh) };
        let last_seq = batch.last_sequence().unwrap_or(p.base_sequence);
        if p.producer_epoch == entry.producer_epoch {
            if let Some(m) = entry.batches.iter().find(|m| m.first_seq == p.base_sequence && m.last_seq == last_seq) {
                return Ok(AppendCheck::Duplicate { base_offset: m.base_offset, last_offset: m.last_offset });
            }
        }
        if p.producer_epoch < entry.producer_epoch {
            return Err(ProducerStateError::InvalidProducerEpoch {
                producer_id: p.producer_id.0,
                producer_epoch: p.producer_epoch.0,
                current_epoch: entry.producer_epoch.0,
            });
        }
        let expected = if p.producer_epoch != entry.producer_epoch {
            Sequence(0)
        } else {
            entry.batches.back().map_or(Sequence(0), |m| m.last_seq.increment(1))
        };
        if p.base_sequence != expected {
            return Err(ProducerStateError::OutOfOrderSequence {
                producer_id: p.producer_id.0,
                producer_epoch: p.producer_epoch.0,
                base_sequence: p.base_sequence.0,
                expected_sequence: expected.0,
            });
        }
        Ok(AppendCheck::Fresh)
    }

    /// Records an appended batch (any origin, no checks). A different producer epoch, even an
    /// older one on a follower, replaces the entry's epoch and forgets its batches, as Kafka's
    /// `ProducerStateEntry.addBatch` does. Control batches only move the epoch.
    pub fn update(&mut self, batch: &RecordBatch) {
        let Some(p) = batch.producer() else { return };
        let meta = BatchMetadata {
            first_seq: p.base_sequence,
            last_seq: batch.last_sequence().unwrap_or(p.base_sequence),
            base_offset: batch.base_offset(),
            last_offset: batch.last_offset(),
        };
        self.update_parts(p.producer_id, p.producer_epoch, meta, batch.marker().map(|(_, e)| e));
    }

    /// [`Self::update`] from column values (the log's rebuild path, no batch allocation);
    /// `marker_coordinator_epoch` is `Some` for a control batch.
    pub(crate) fn update_parts(&mut self, pid: ProducerId, epoch: ProducerEpoch, meta: BatchMetadata, marker_coordinator_epoch: Option<u32>) {
        let entry = self.entries.entry(pid).or_insert_with(|| ProducerStateEntry {
            producer_epoch: epoch,
            batches: VecDeque::with_capacity(NUM_BATCHES_TO_RETAIN),
            coordinator_epoch: None,
        });
        if entry.producer_epoch != epoch {
            entry.producer_epoch = epoch;
            entry.batches.clear();
        }
        if let Some(coordinator_epoch) = marker_coordinator_epoch {
            entry.coordinator_epoch = Some(coordinator_epoch);
            return;
        }
        if entry.batches.len() == NUM_BATCHES_TO_RETAIN {
            entry.batches.pop_front();
        }
        entry.batches.push_back(meta);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::ProducerFields;
    use crate::types::LeaderEpoch;

    fn batch(base: u64, n: usize, epoch: u16, seq: u32) -> RecordBatch {
        let pf = ProducerFields { producer_id: ProducerId(1), producer_epoch: ProducerEpoch(epoch), base_sequence: Sequence(seq) };
        RecordBatch::new(Offset(base), LeaderEpoch(0), vec![9; n], Some(pf), false, false).unwrap()
    }

    #[test]
    fn duplicate_fenced_and_out_of_order() {
        let mut s = ProducerStateManager::new();
        let b0 = batch(0, 3, 0, 0);
        assert_eq!(s.check_leader_append(&b0), Ok(AppendCheck::Fresh));
        s.update(&b0);
        assert_eq!(
            s.check_leader_append(&batch(10, 3, 0, 0)),
            Ok(AppendCheck::Duplicate { base_offset: Offset(0), last_offset: Offset(2) })
        );
        assert!(matches!(
            s.check_leader_append(&batch(3, 1, 0, 5)),
            Err(ProducerStateError::OutOfOrderSequence { expected_sequence: 3, .. })
        ));
        assert_eq!(s.check_leader_append(&batch(3, 1, 0, 3)), Ok(AppendCheck::Fresh));
        s.update(&batch(3, 1, 1, 0));
        assert!(matches!(s.check_leader_append(&batch(4, 1, 0, 4)), Err(ProducerStateError::InvalidProducerEpoch { .. })));
        assert!(matches!(
            s.check_leader_append(&batch(4, 1, 2, 1)),
            Err(ProducerStateError::OutOfOrderSequence { expected_sequence: 0, .. })
        ));
    }

    #[test]
    fn a_replay_merges_into_the_loaded_entry_by_its_final_epoch() {
        let mut loaded = ProducerStateManager::new();
        loaded.update(&batch(0, 1, 1, 0));
        // 1 -> 2 -> 1 in the replay: the final epoch is the loaded one, its batch stays.
        let mut replay = loaded.without_batches();
        replay.update(&batch(1, 1, 2, 0));
        replay.update(&batch(2, 1, 1, 5));
        let mut merged = loaded.clone();
        merged.merge(replay);
        let offsets: Vec<u64> = merged.entry(ProducerId(1)).unwrap().batches.iter().map(|m| m.base_offset.0).collect();
        assert_eq!(offsets, [0, 2]);
        // Ending in another epoch replaces the entry's batches.
        let mut replay = loaded.without_batches();
        replay.update(&batch(1, 1, 2, 0));
        let mut merged = loaded.clone();
        merged.merge(replay);
        let entry = merged.entry(ProducerId(1)).unwrap();
        assert_eq!((entry.producer_epoch, entry.batches.len()), (ProducerEpoch(2), 1));
    }

    #[test]
    fn only_five_batches_are_remembered() {
        let mut s = ProducerStateManager::new();
        for i in 0..6u32 {
            s.update(&batch(i as u64, 1, 0, i));
        }
        assert!(matches!(s.check_leader_append(&batch(9, 1, 0, 0)), Err(ProducerStateError::OutOfOrderSequence { .. })));
        assert!(matches!(s.check_leader_append(&batch(9, 1, 0, 1)), Ok(AppendCheck::Duplicate { .. })));
    }
}
