//! Producer snapshots of a [`ReplicaLog`] and the producer-state reload that uses them, as
//! Kafka's `ProducerStateManager` (`takeSnapshot`, `truncateAndReload`, `loadFromSnapshot`,
//! `removeStraySnapshots`) and `UnifiedLog.rebuildProducerState` do them. The model has one
//! segment and no producer-id expiration; segment rolls (which also take snapshots) are not
//! modelled.

use super::ReplicaLog;
use crate::producer_state::{ProducerSnapshot, SnapshotEntry};
use crate::types::Offset;

impl ReplicaLog {
    /// Kafka's `ProducerStateManager.takeSnapshot` at the log end offset (the map end offset):
    /// per producer its epoch, its last batch, its coordinator epoch and its ongoing
    /// transaction's first offset ([`SnapshotEntry`]). Takes nothing, and returns `false`, unless
    /// the log end offset is above the newest snapshot (and the log start offset): Kafka's
    /// `lastMapOffset > lastSnapOffset`.
    pub fn take_producer_snapshot(&mut self) -> bool {
        self.snapshot_at(self.log_end_offset)
    }

    /// Offsets of the producer snapshots held, increasing.
    pub fn producer_snapshot_offsets(&self) -> Vec<Offset> {
        self.producer_snapshots.keys().copied().collect()
    }

    /// The producer snapshot taken at `offset`, if one is held.
    pub fn producer_snapshot(&self, offset: Offset) -> Option<&ProducerSnapshot> {
        self.producer_snapshots.get(&offset)
    }

    pub(super) fn snapshot_at(&mut self, at: Offset) -> bool {
        let last = self.producer_snapshots.keys().next_back().copied().unwrap_or(self.log_start_offset);
        if at <= last.max(self.log_start_offset) {
            return false;
        }
        let snapshot: ProducerSnapshot = self
            .producer_state
            .entries()
            .map(|(pid, e)| {
                let entry = SnapshotEntry {
                    producer_epoch: e.producer_epoch,
                    last_batch: e.batches.back().copied(),
                    coordinator_epoch: e.coordinator_epoch,
                    current_txn_first_offset: self.txn.ongoing_first_offset(*pid),
                };
                (*pid, entry)
            })
            .collect();
        self.producer_snapshots.insert(at, snapshot);
        true
    }

    /// Kafka's `ProducerStateManager.removeStraySnapshots` at a restart, for a log of one
    /// segment: every snapshot but the newest (the one a clean shutdown wrote) is deleted.
    pub(super) fn remove_stray_producer_snapshots(&mut self) {
        if let Some((at, newest)) = self.producer_snapshots.pop_last() {
            self.producer_snapshots.clear();
            self.producer_snapshots.insert(at, newest);
        }
    }

    /// Deletes the snapshots a reload at `target` may not use (`truncateAndReload`: above
    /// `target`, or at or below the log start offset); whether one is left.
    pub(super) fn retain_producer_snapshots(&mut self, target: Offset) -> bool {
        let start = self.log_start_offset;
        self.producer_snapshots.retain(|at, _| *at <= target && *at > start);
        !self.producer_snapshots.is_empty()
    }

    /// Producer state and transaction index rebuilt at `target` (the stored batches already
    /// end below it), as `UnifiedLog.rebuildProducerState` does: delete the snapshots above
    /// `target` or at/below the log start; load the newest one left (`loadFromSnapshot`: each
    /// producer with its one batch, ongoing transactions from `currentTxnFirstOffset`, no
    /// unreplicated one; aborted transactions below it kept, as the `.txnindex` files keep
    /// them), or start empty from the log start without one; replay the batches from there
    /// into a state merged into the loaded one ([`ProducerStateManager::merge`](crate::producer_state::ProducerStateManager::merge));
    /// take a snapshot at `target` (`updateMapEndOffset(lastOffset); takeSnapshot()`).
    pub(super) fn reload_producer_state(&mut self, target: Offset) {
        self.retain_producer_snapshots(target);
        self.producer_state.clear();
        let from = match self.producer_snapshots.iter().next_back() {
            Some((at, snapshot)) => {
                let at = *at;
                self.txn.reset_to_snapshot(at);
                for (pid, entry) in snapshot {
                    self.producer_state.insert(*pid, entry.to_entry());
                    if let Some(first) = entry.current_txn_first_offset {
                        self.txn.on_transactional_data(*pid, first);
                    }
                }
                self.store.first_ending_at_or_after(at.0)
            }
            None => {
                self.txn.clear();
                0
            }
        };
        // The replay after the snapshot goes into one ProducerAppendInfo per producer, merged
        // into the loaded entries at the end (UnifiedLog.loadProducersFromRecords).
        let loaded = std::mem::take(&mut self.producer_state);
        self.producer_state = loaded.without_batches();
        for i in from..self.store.len() {
            self.apply_producer_state(i);
        }
        let replayed = std::mem::replace(&mut self.producer_state, loaded);
        self.producer_state.merge(replayed);
        self.snapshot_at(target);
    }
}
