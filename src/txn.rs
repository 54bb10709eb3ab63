//! Transaction index of one partition replica: ongoing and unreplicated transactions, aborted
//! transactions, the first unstable offset (Kafka's `ProducerStateManager.ongoingTxns` /
//! `unreplicatedTxns` and the per-segment `.txnindex`; `docs/core-semantics.md` rule 1.12).
//!
//! A transaction starts at its first transactional data batch and ends at its COMMIT or ABORT
//! control batch (the *marker*). It is *ongoing* until the marker is appended, *unreplicated*
//! while the marker is at or above the high watermark, and stable after that. As in Kafka, an
//! ended transaction is forgotten once the HW passes its marker and not relearned if the HW
//! goes back (`ProducerStateManager.onHighWatermarkUpdated`), and a reload from a producer
//! snapshot forgets every ended one (`truncateAndReload`). Kafka forgets at its next HW update;
//! the model's answers filter by the current HW at once (the same value at every HW update,
//! where Kafka's cached unstable offset is refreshed). The first unstable
//! offset is the smallest first offset of an ongoing or unreplicated transaction; the last
//! stable offset (LSO) is `min(first unstable offset, HW)`: what a read_committed consumer may
//! read up to.

use std::collections::BTreeMap;

use crate::types::{Offset, ProducerId};

/// An aborted transaction as recorded in the transaction index: its producer, its data range
/// `[first_offset, last_offset]` (`last_offset` is the ABORT marker) and the LSO when it ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AbortedTxn {
    pub producer_id: ProducerId,
    pub first_offset: Offset,
    pub last_offset: Offset,
    pub last_stable_offset: Offset,
}

/// Marker types: the lowest bit of a control record's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ControlType {
    Abort,
    Commit,
}

/// A control record's value: Kafka's `EndTransactionMarker` (type and coordinator epoch)
/// packed as `coordinator_epoch << 1 | type` (COMMIT = 1).
pub fn marker_value(control: ControlType, coordinator_epoch: u32) -> u64 {
    ((coordinator_epoch as u64) << 1) | (control == ControlType::Commit) as u64
}

/// The inverse of [`marker_value`].
pub fn decode_marker(value: u64) -> (ControlType, u64) {
    let control = if value & 1 == 1 { ControlType::Commit } else { ControlType::Abort };
    (control, value >> 1)
}

/// The transaction index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxnIndex {
    /// First offset -> producer of each ongoing transaction.
    ongoing: BTreeMap<Offset, ProducerId>,
    /// Producer -> first offset of its ongoing transaction.
    ongoing_by_producer: BTreeMap<ProducerId, Offset>,
    /// Marker offset -> (first offset, producer) of each ended transaction.
    completed: BTreeMap<Offset, (Offset, ProducerId)>,
    /// Aborted transactions in marker order.
    aborted: Vec<AbortedTxn>,
}

impl TxnIndex {
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// The index as a reload from a producer snapshot taken at `snapshot_offset` starts it
    /// (`ProducerStateManager.truncateAndReload`): no ongoing transaction (the snapshot's are
    /// added back by the caller), no ended one (`unreplicatedTxns.clear()`), and the aborted
    /// transactions whose marker is below `snapshot_offset`, which Kafka's `.txnindex` files
    /// keep (the replay after the snapshot records the later ones again).
    pub fn reset_to_snapshot(&mut self, snapshot_offset: Offset) {
        self.ongoing.clear();
        self.ongoing_by_producer.clear();
        self.completed.clear();
        self.aborted.retain(|t| t.last_offset < snapshot_offset);
    }

    /// First offset of `producer_id`'s ongoing transaction.
    pub fn ongoing_first_offset(&self, producer_id: ProducerId) -> Option<Offset> {
        self.ongoing_by_producer.get(&producer_id).copied()
    }

    /// A transactional data batch at `base_offset`: starts the producer's transaction unless
    /// one is ongoing.
    pub fn on_transactional_data(&mut self, producer_id: ProducerId, base_offset: Offset) {
        if let std::collections::btree_map::Entry::Vacant(e) = self.ongoing_by_producer.entry(producer_id) {
            e.insert(base_offset);
            self.ongoing.insert(base_offset, producer_id);
        }
    }

    /// A marker at `marker_offset` ends the producer's transaction. A marker without one ends
    /// nothing: Kafka emits a `CompletedTxn` only for a non-empty transaction, so an empty one
    /// neither holds back the LSO nor enters the transaction index
    /// (`ProducerAppendInfo.appendEndTxnMarker`, 4.3.1). An ABORT is recorded with the LSO it
    /// leaves: the first other ongoing transaction's start, or the offset after the marker.
    pub fn on_marker(&mut self, producer_id: ProducerId, marker_offset: Offset, control: ControlType) {
        let Some(first) = self.ongoing_by_producer.remove(&producer_id) else { return };
        self.ongoing.remove(&first);
        self.completed.insert(marker_offset, (first, producer_id));
        if control == ControlType::Abort {
            let last_stable_offset = self.ongoing.keys().next().copied().unwrap_or(Offset(marker_offset.0 + 1));
            self.aborted.push(AbortedTxn { producer_id, first_offset: first, last_offset: marker_offset, last_stable_offset });
        }
    }

    /// The log was truncated at `target` without removing any marker: transactions that
    /// started at or after it vanish.
    pub fn truncate_ongoing(&mut self, target: Offset) {
        for (_, pid) in self.ongoing.split_off(&target) {
            self.ongoing_by_producer.remove(&pid);
        }
    }

    /// The high watermark moved to `high_watermark`: ended transactions whose marker is below
    /// it are forgotten, and stay forgotten if the HW goes back (Kafka's
    /// `ProducerStateManager.onHighWatermarkUpdated` -> `removeUnreplicatedTransactions`).
    pub fn on_high_watermark(&mut self, high_watermark: Offset) {
        if self.completed.keys().next().is_some_and(|m| *m < high_watermark) {
            self.completed = self.completed.split_off(&high_watermark);
        }
    }

    /// The smallest first offset of an ongoing transaction or of one whose marker is at or
    /// above `high_watermark`. Costs the number of such ended transactions (few: those the
    /// followers have not yet replicated).
    pub fn first_unstable_offset(&self, high_watermark: Offset) -> Option<Offset> {
        let ongoing = self.ongoing.keys().next().copied();
        let unreplicated = self.completed.range(high_watermark..).map(|(_, (first, _))| *first).min();
        match (ongoing, unreplicated) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        }
    }

    /// Aborted transactions overlapping `[from_offset, upper_bound)`: those whose marker is at
    /// or after `from_offset` and whose first offset is below `upper_bound`
    /// (`UnifiedLog.collectAbortedTransactions`), in marker order.
    pub fn aborted_between(&self, from_offset: Offset, upper_bound: Offset) -> Vec<AbortedTxn> {
        self.aborted.iter().filter(|t| t.last_offset >= from_offset && t.first_offset < upper_bound).copied().collect()
    }

    pub fn ongoing(&self) -> impl Iterator<Item = (Offset, ProducerId)> + '_ {
        self.ongoing.iter().map(|(o, p)| (*o, *p))
    }

    /// Ended transactions whose marker is at or above `high_watermark`, as `(first offset,
    /// producer, marker offset)` by first offset.
    pub fn unreplicated(&self, high_watermark: Offset) -> Vec<(Offset, ProducerId, Offset)> {
        let mut out: Vec<_> = self.completed.range(high_watermark..).map(|(m, (f, p))| (*f, *p, *m)).collect();
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lso_follows_ongoing_and_unreplicated_transactions() {
        let mut t = TxnIndex::default();
        t.on_transactional_data(ProducerId(1), Offset(3));
        t.on_transactional_data(ProducerId(2), Offset(5));
        t.on_transactional_data(ProducerId(1), Offset(6));
        assert_eq!(t.first_unstable_offset(Offset(0)), Some(Offset(3)));
        t.on_marker(ProducerId(1), Offset(7), ControlType::Abort);
        assert_eq!(t.aborted_between(Offset(0), Offset(100))[0].last_stable_offset, Offset(5));
        assert_eq!(t.first_unstable_offset(Offset(7)), Some(Offset(3)));
        assert_eq!(t.first_unstable_offset(Offset(8)), Some(Offset(5)));
        t.on_marker(ProducerId(2), Offset(8), ControlType::Commit);
        assert_eq!(t.first_unstable_offset(Offset(9)), None);
        // Without a HW update a filter only: a HW back below the marker shows it again ...
        assert_eq!(t.first_unstable_offset(Offset(8)), Some(Offset(5)));
        // ... but once the HW passed it, it is forgotten, also when the HW goes back.
        t.on_high_watermark(Offset(9));
        assert_eq!(t.first_unstable_offset(Offset(8)), None);
        assert_eq!(decode_marker(marker_value(ControlType::Commit, 7)), (ControlType::Commit, 7));
    }
}
