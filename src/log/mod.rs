//! One replica's partition log, as Kafka's `UnifiedLog` holds it: batches, log start and end
//! offsets, high watermark, recovery point, leader-epoch cache and producer state.

mod journal;
mod snapshots;
mod store;

pub use crate::batch::{ProducerFields, RecordBatch, ABORT_MARKER, COMMIT_MARKER, NO_TIMESTAMP};
pub use journal::{Journal, JournalKind, FLAG_CONTROL, FLAG_TRANSACTIONAL};

use crate::epoch::LeaderEpochCache;
use crate::error::{ArgumentError, Error, LogError, ProducerStateError};
use std::collections::BTreeMap;

use crate::producer_state::{AppendCheck, BatchMetadata, ProducerSnapshot, ProducerStateManager};
use crate::txn::{marker_value, AbortedTxn, ControlType, TxnIndex};
use crate::types::{LeaderEpoch, Offset, ProducerEpoch, ProducerId, Sequence};
pub(crate) use store::BatchStore;

/// What an append did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LogAppendInfo {
    pub base_offset: Offset,
    pub last_offset: Offset,
    /// A retried batch recognised by producer state: nothing appended, original offsets.
    pub duplicate: bool,
}

/// A partition log replica.
///
/// Offsets below the log end offset are contiguous, with one exception kept because Kafka has
/// it: a truncation target inside a batch removes the whole batch but sets the log end offset
/// to the target (`LocalLog.truncateTo`), leaving a hole ([`ReplicaLog::holes`]). In record
/// format v2 targets are batch-aligned unless the protocol itself went wrong (seed 004's
/// second KIP-101 problem), which is why the hole is modelled rather than refused.
///
/// ```
/// use epochlab::{ReplicaLog, LeaderEpoch, Offset};
/// let mut log = ReplicaLog::new(Offset(0), false);
/// let info = log.append_as_leader(vec![1, 2, 3], LeaderEpoch(0), None, false).unwrap();
/// assert_eq!((info.base_offset, info.last_offset), (Offset(0), Offset(2)));
/// assert_eq!(log.log_end_offset(), Offset(3));
/// ```
#[derive(Clone, Debug)]
pub struct ReplicaLog {
    store: BatchStore,
    log_start_offset: Offset,
    log_end_offset: Offset,
    high_watermark: Offset,
    recovery_point: Offset,
    epoch_cache: LeaderEpochCache,
    producer_state: ProducerStateManager,
    txn: TxnIndex,
    /// Producer snapshots by offset (Kafka's `<offset>.snapshot` files), see `snapshots.rs`.
    producer_snapshots: BTreeMap<Offset, ProducerSnapshot>,
    kip101_epoch_cache: bool,
    /// Record format v0/v1 with compressed wrappers ([`ReplicaLog::with_wrapper_batches`]).
    wrapper_batches: bool,
    /// Off unless [`ReplicaLog::enable_journal`] was called; boxed so that a log without one
    /// grows by one pointer only.
    journal: Option<Box<Journal>>,
    /// The broker's clock as last set ([`ReplicaLog::set_time`]; Kafka's `UnifiedLog` reads
    /// its `Time`): the LogAppendTime a leader stamps on what it appends.
    time_ms: i64,
}

impl ReplicaLog {
    /// An empty log starting at `log_start_offset`. `kip101_epoch_cache` selects the 0.11-2.0
    /// epoch-cache assign rule (no eviction of conflicting entries).
    pub fn new(log_start_offset: Offset, kip101_epoch_cache: bool) -> Self {
        Self {
            store: BatchStore::default(),
            log_start_offset,
            log_end_offset: log_start_offset,
            high_watermark: log_start_offset,
            recovery_point: log_start_offset,
            epoch_cache: LeaderEpochCache::new(),
            producer_state: ProducerStateManager::new(),
            txn: TxnIndex::default(),
            producer_snapshots: BTreeMap::new(),
            kip101_epoch_cache,
            wrapper_batches: false,
            journal: None,
            time_ms: NO_TIMESTAMP,
        }
    }

    /// The log of a message format v0/v1 topic whose producer compresses (Kafka before 0.11;
    /// the model's G0): each batch is a compressed wrapper message whose offset is its last
    /// inner offset, and a follower checks only that offset against its log end offset
    /// (0.10.2 `Log.append` with `assignOffsets = false`: `analyzeAndValidateRecords` reads the
    /// shallow entries, "Out of order offsets" only if the first wrapper's offset is below
    /// the log end offset or the wrappers' offsets do not increase). A wrapper whose inner
    /// offsets start below the log end offset is taken whole, so the log holds those offsets
    /// twice (KAFKA-3919); one starting above it leaves a gap.
    pub fn with_wrapper_batches(mut self, on: bool) -> Self {
        self.wrapper_batches = on;
        self
    }
    pub fn wrapper_batches(&self) -> bool {
        self.wrapper_batches
    }
    /// Whether a replicated batch `[base, last]` may be appended where the log (or the
    /// previous batch of the same append) ends, at `end`: starting there in v2; with
    /// wrappers, its own (last) offset at or past it.
    pub fn follows(&self, end: Offset, base: Offset, last: Offset) -> bool {
        if self.wrapper_batches { last >= end } else { base == end }
    }

    /// Sets the clock a leader's appends are stamped with (the broker's time now). Until it is
    /// set, appended batches carry [`NO_TIMESTAMP`].
    pub fn set_time(&mut self, now_ms: i64) {
        self.time_ms = now_ms.max(NO_TIMESTAMP);
    }

    /// `UnifiedLog.fetchOffsetByTimestamp` for a target timestamp: the first offset at or
    /// after the log start whose record's timestamp is at least `timestamp`, with that
    /// timestamp; `None` if no record has one. Every record carries its batch's append time
    /// (LogAppendTime), so the answer is the base offset of the first such batch
    /// (`LogSegment.findOffsetByTimestamp` scans batches for `maxTimestamp >= target`).
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Option<(Offset, i64)> {
        let first = self.store.first_ending_at_or_after(self.log_start_offset.0);
        (first..self.store.len())
            .find(|&i| self.store.max_timestamp(i) >= timestamp)
            .map(|i| (Offset(self.store.base(i).max(self.log_start_offset.0)), self.store.max_timestamp(i)))
    }

    /// Starts recording every state change in a [`Journal`] (no effect if already on).
    pub fn enable_journal(&mut self) {
        self.journal.get_or_insert_with(Box::default);
    }
    pub fn journal_enabled(&self) -> bool {
        self.journal.is_some()
    }
    /// The entries recorded since the last call (empty when the journal is off); recording
    /// continues.
    pub fn take_journal(&mut self) -> Journal {
        self.journal.as_mut().map(|j| std::mem::take(&mut **j)).unwrap_or_default()
    }
    fn note(&mut self, kind: JournalKind, offset: Offset, epoch: u32) {
        if let Some(j) = self.journal.as_mut() {
            j.note(kind, offset.0, epoch);
        }
    }

    pub fn log_start_offset(&self) -> Offset {
        self.log_start_offset
    }
    pub fn log_end_offset(&self) -> Offset {
        self.log_end_offset
    }
    pub fn high_watermark(&self) -> Offset {
        self.high_watermark
    }
    pub fn recovery_point(&self) -> Offset {
        self.recovery_point
    }
    pub fn batch_count(&self) -> usize {
        self.store.len()
    }
    pub fn record_count(&self) -> usize {
        self.store.record_count()
    }
    pub fn kip101_epoch_cache(&self) -> bool {
        self.kip101_epoch_cache
    }
    pub fn epoch_cache(&self) -> &LeaderEpochCache {
        &self.epoch_cache
    }
    pub fn producer_state(&self) -> &ProducerStateManager {
        &self.producer_state
    }
    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.epoch_cache.latest_epoch()
    }
    pub(crate) fn store(&self) -> &BatchStore {
        &self.store
    }
    /// Approximate heap bytes of the batch columns and records.
    pub fn heap_bytes(&self) -> usize {
        self.store.heap_bytes()
    }

    /// Assigns `start_offset` to `epoch` in the cache with this log's rule.
    pub fn assign_epoch(&mut self, epoch: LeaderEpoch, start_offset: Offset) -> bool {
        let changed = self.assign_epoch_quietly(epoch, start_offset);
        if changed {
            self.note(JournalKind::AssignEpoch, start_offset, epoch.0);
        }
        changed
    }

    /// [`Self::assign_epoch`] as part of an append (the append's journal entry implies it).
    fn assign_epoch_quietly(&mut self, epoch: LeaderEpoch, start_offset: Offset) -> bool {
        if self.kip101_epoch_cache {
            self.epoch_cache.assign_kip101(epoch, start_offset)
        } else {
            self.epoch_cache.assign(epoch, start_offset)
        }
    }

    /// The cache's current `end_offset_for` with this log's end offset.
    pub fn end_offset_for_epoch(&self, requested: Option<LeaderEpoch>) -> Option<(LeaderEpoch, Offset)> {
        self.epoch_cache.end_offset_for(requested, self.log_end_offset)
    }

    pub fn epoch_for_offset(&self, offset: Offset) -> Option<LeaderEpoch> {
        self.epoch_cache.epoch_for_offset(offset)
    }

    /// Appends a client batch as the leader: offsets from the log end offset, `leader_epoch`
    /// stamped, producer state validated first (a duplicate appends nothing and answers the
    /// original offsets; a refused batch changes nothing).
    pub fn append_as_leader(
        &mut self,
        records: Vec<u64>,
        leader_epoch: LeaderEpoch,
        producer: Option<ProducerFields>,
        is_transactional: bool,
    ) -> Result<LogAppendInfo, Error> {
        let batch = RecordBatch::new(self.log_end_offset, leader_epoch, records, producer, is_transactional, false)?
            .with_max_timestamp(self.time_ms);
        // Kafka assigns the batch's epoch at its base offset before it validates producer
        // state (`UnifiedLog.append`: `maybeAssignEpochStartOffset`, then
        // `analyzeAndValidateProducerState`), so a refused or duplicate batch still moves the
        // epoch cache; the journal records it then, as it has no batch to imply it.
        let assigned = self.assign_epoch_quietly(leader_epoch, self.log_end_offset);
        let early: Option<Result<LogAppendInfo, Error>> = match self.producer_state.check_leader_append(&batch) {
            Ok(AppendCheck::Duplicate { base_offset, last_offset }) => Some(Ok(LogAppendInfo { base_offset, last_offset, duplicate: true })),
            Ok(_) => producer
                .filter(|_| !is_transactional)
                .and_then(|p| self.txn.ongoing_first_offset(p.producer_id).map(|first| (p, first)))
                .map(|(p, first)| Err(ProducerStateError::InvalidTxnState { producer_id: p.producer_id.0, transaction_first_offset: first.0 }.into())),
            Err(e) => Some(Err(e.into())),
        };
        if let Some(answer) = early {
            if assigned {
                self.note(JournalKind::AssignEpoch, self.log_end_offset, leader_epoch.0);
            }
            return answer;
        }
        self.push(&batch, JournalKind::AppendLeader);
        Ok(LogAppendInfo { base_offset: batch.base_offset(), last_offset: batch.last_offset(), duplicate: false })
    }

    /// Writes a transaction marker as the partition leader (WriteTxnMarkers, origin
    /// COORDINATOR): a control batch ending the producer's transaction, stamped `leader_epoch`.
    /// A marker from an older producer epoch is fenced (INVALID_PRODUCER_EPOCH), one from an
    /// older coordinator epoch too (TRANSACTION_COORDINATOR_FENCED); sequences are not checked.
    ///
    /// `transaction_version` is the marker's (WriteTxnMarkers v2 carries it). Below 2 the
    /// marker's epoch may equal the producer's. From 2 (KIP-890 part 2) the coordinator bumps
    /// the epoch before writing markers, so a marker must carry a *greater* epoch: an equal one
    /// is a late marker of an earlier transaction and is fenced, unless no transaction is
    /// ongoing (a retried marker of the transaction that just ended, which is written again).
    /// Kafka 4.2+ (KAFKA-19446, KAFKA-19999): `ProducerAppendInfo.checkProducerEpoch` in
    /// kafka-storage; 4.0 and 4.1 applied the legacy rule to every version.
    pub fn append_end_txn_marker(
        &mut self,
        producer_id: ProducerId,
        producer_epoch: ProducerEpoch,
        coordinator_epoch: u32,
        control: ControlType,
        leader_epoch: LeaderEpoch,
        transaction_version: u8,
    ) -> Result<LogAppendInfo, Error> {
        if coordinator_epoch > i32::MAX as u32 {
            return Err(ArgumentError::OutOfDomain { argument: "coordinator_epoch", value: coordinator_epoch as i128, domain: "0..=2^31-1" }.into());
        }
        // As for data batches, Kafka assigns the marker's leader epoch before it validates the
        // producer (`UnifiedLog.append`): a refused marker still moves the epoch cache.
        let fields = ProducerFields { producer_id, producer_epoch, base_sequence: Sequence(0) };
        let value = marker_value(control, coordinator_epoch);
        let batch = RecordBatch::new(self.log_end_offset, leader_epoch, vec![value], Some(fields), true, true)?
            .with_max_timestamp(self.time_ms);
        let assigned = self.assign_epoch_quietly(leader_epoch, self.log_end_offset);
        if let Err(refused) = self.check_marker(producer_id, producer_epoch, coordinator_epoch, transaction_version) {
            if assigned {
                self.note(JournalKind::AssignEpoch, self.log_end_offset, leader_epoch.0);
            }
            return Err(refused);
        }
        self.push(&batch, JournalKind::AppendLeader);
        Ok(LogAppendInfo { base_offset: batch.base_offset(), last_offset: batch.last_offset(), duplicate: false })
    }

    /// Producer-epoch and coordinator-epoch fencing of a leader's marker
    /// (`ProducerAppendInfo.appendEndTxnMarker`: `checkProducerEpoch`, `checkCoordinatorEpoch`).
    fn check_marker(&self, producer_id: ProducerId, producer_epoch: ProducerEpoch, coordinator_epoch: u32, transaction_version: u8) -> Result<(), Error> {
        if let Some(entry) = self.producer_state.entry(producer_id) {
            let fenced = if transaction_version >= 2 {
                let retried_marker = producer_epoch == entry.producer_epoch && self.txn.ongoing_first_offset(producer_id).is_none();
                producer_epoch <= entry.producer_epoch && !retried_marker
            } else {
                producer_epoch < entry.producer_epoch
            };
            if fenced {
                return Err(ProducerStateError::InvalidProducerEpoch {
                    producer_id: producer_id.0,
                    producer_epoch: producer_epoch.0,
                    current_epoch: entry.producer_epoch.0,
                }
                .into());
            }
            if let Some(current) = entry.coordinator_epoch.filter(|c| *c > coordinator_epoch) {
                return Err(ProducerStateError::TransactionCoordinatorFenced {
                    producer_id: producer_id.0,
                    coordinator_epoch,
                    current_coordinator_epoch: current,
                }
                .into());
            }
        }
        Ok(())
    }

    /// The smallest first offset of an ongoing or unreplicated transaction.
    pub fn first_unstable_offset(&self) -> Option<Offset> {
        self.txn.first_unstable_offset(self.high_watermark)
    }

    /// Kafka's last stable offset: `min(first unstable offset, HW)`; what a read_committed
    /// consumer may read up to.
    pub fn last_stable_offset(&self) -> Offset {
        self.first_unstable_offset().map_or(self.high_watermark, |f| f.min(self.high_watermark))
    }

    /// Aborted transactions overlapping `[from_offset, upper_bound)`, in marker order: what a
    /// read_committed fetch returns beside its records.
    pub fn aborted_transactions(&self, from_offset: Offset, upper_bound: Offset) -> Vec<AbortedTxn> {
        self.txn.aborted_between(from_offset, upper_bound)
    }

    pub fn txn_index(&self) -> &TxnIndex {
        &self.txn
    }

    /// Appends a batch the caller built with its own offsets after leader-side validation
    /// (control markers written by a coordinator, batches rebuilt by a replay). The batch
    /// must start at the log end offset.
    pub fn append_validated(&mut self, batch: &RecordBatch) -> Result<(), LogError> {
        self.check_starts_at_end(batch.base_offset())?;
        self.push(batch, JournalKind::AppendLeader);
        Ok(())
    }

    /// The allocation-free append of the replay path: a batch of `records` at the log end
    /// offset, stamped `leader_epoch`, validated like [`RecordBatch::new`]. `flags` holds
    /// [`FLAG_TRANSACTIONAL`] / [`FLAG_CONTROL`]; `as_leader` selects the journal kind only.
    /// No producer-state validation happens (the caller replays appends a leader accepted);
    /// producer state and the epoch cache are updated as by any append.
    pub fn append_records(
        &mut self,
        records: &[u64],
        leader_epoch: LeaderEpoch,
        producer: Option<ProducerFields>,
        flags: u8,
        as_leader: bool,
    ) -> Result<LogAppendInfo, LogError> {
        let (transactional, control) = (flags & FLAG_TRANSACTIONAL != 0, flags & FLAG_CONTROL != 0);
        let base = self.log_end_offset;
        if producer.is_some() || transactional || control {
            // Rare on the replay path: the full validation of a batch value.
            let batch = RecordBatch::new(base, leader_epoch, records.to_vec(), producer, transactional, control)?;
            self.push(&batch, if as_leader { JournalKind::AppendLeader } else { JournalKind::AppendFollower });
            return Ok(LogAppendInfo { base_offset: base, last_offset: batch.last_offset(), duplicate: false });
        }
        if records.is_empty() || base.checked_add(records.len() as u64).is_none() {
            return Err(LogError::InvalidRecordBatch { reason: format!("{} records from base offset {base} do not make a batch", records.len()) });
        }
        self.store.push_plain(base.0, leader_epoch.0, records);
        self.log_end_offset = Offset(base.0 + records.len() as u64);
        self.assign_epoch_quietly(leader_epoch, base);
        if let Some(j) = self.journal.as_mut() {
            let kind = if as_leader { JournalKind::AppendLeader } else { JournalKind::AppendFollower };
            j.append(kind, base.0, leader_epoch.0, records, None, 0);
        }
        Ok(LogAppendInfo { base_offset: base, last_offset: Offset(self.log_end_offset.0 - 1), duplicate: false })
    }

    /// Bulk path: appends one plain batch per entry of `batch_sizes`, taking `records` in
    /// order, all stamped `leader_epoch`. All or nothing. Returns the new log end offset.
    pub fn append_many_as_leader(&mut self, leader_epoch: LeaderEpoch, batch_sizes: &[u32], records: &[u64]) -> Result<Offset, Error> {
        let total: u64 = batch_sizes.iter().map(|&s| s as u64).sum();
        if total != records.len() as u64 {
            return Err(ArgumentError::Invalid {
                argument: "batch_sizes",
                value: total as i128,
                reason: format!("batch sizes sum to {total} but {} records were given", records.len()),
            }
            .into());
        }
        if let Some(i) = batch_sizes.iter().position(|&s| s == 0) {
            return Err(ArgumentError::Invalid { argument: "batch_sizes", value: 0, reason: format!("batch {i} has no records") }.into());
        }
        if self.log_end_offset.checked_add(total).is_none() {
            return Err(LogError::InvalidRecordBatch { reason: format!("{total} records from offset {} overflow the offset domain", self.log_end_offset) }.into());
        }
        if batch_sizes.is_empty() {
            return Ok(self.log_end_offset);
        }
        self.store.reserve(batch_sizes.len(), records.len());
        let first = self.log_end_offset;
        let mut next = first.0;
        let mut consumed = 0usize;
        for &size in batch_sizes {
            let size = size as usize;
            let batch_records = &records[consumed..consumed + size];
            self.store.push_plain(next, leader_epoch.0, batch_records);
            // Per batch, exactly as single appends do (under the 0.11 rule a refused epoch can
            // be accepted at a later batch); after the first success each call is a no-op check.
            self.assign_epoch_quietly(leader_epoch, Offset(next));
            if let Some(j) = self.journal.as_mut() {
                j.append(JournalKind::AppendLeader, next, leader_epoch.0, batch_records, None, 0);
            }
            consumed += size;
            next += size as u64;
        }
        self.log_end_offset = Offset(next);
        Ok(self.log_end_offset)
    }

    /// Appends a replicated batch with its own offsets and epoch. No producer validation
    /// (origin REPLICATION, KAFKA-6003). The batch must start exactly at the log end offset.
    pub fn append_as_follower(&mut self, batch: &RecordBatch) -> Result<(), LogError> {
        self.append_batches_as_follower(std::slice::from_ref(batch)).map(|_| ())
    }

    /// Appends several replicated batches, all or nothing. Returns the new log end offset.
    /// In v2 each must start where the previous ended, the first at the log end offset; with
    /// [`Self::with_wrapper_batches`] only the wrappers' own (last) offsets are checked.
    pub fn append_batches_as_follower(&mut self, batches: &[RecordBatch]) -> Result<Offset, LogError> {
        let mut expected = self.log_end_offset;
        for b in batches {
            if !self.follows(expected, b.base_offset(), b.last_offset()) {
                return Err(if self.wrapper_batches {
                    LogError::OutOfOrderOffsets { offset: b.last_offset().0, log_end_offset: expected.0 }
                } else {
                    LogError::UnexpectedAppendOffset { first_offset: b.base_offset().0, log_end_offset: expected.0 }
                });
            }
            expected = Offset(b.last_offset().0 + 1);
        }
        for b in batches {
            self.push(b, JournalKind::AppendFollower);
        }
        Ok(self.log_end_offset)
    }

    fn check_starts_at_end(&self, base: Offset) -> Result<(), LogError> {
        if base != self.log_end_offset {
            return Err(LogError::UnexpectedAppendOffset { first_offset: base.0, log_end_offset: self.log_end_offset.0 });
        }
        Ok(())
    }

    fn push(&mut self, batch: &RecordBatch, kind: JournalKind) {
        self.store.push(batch);
        self.log_end_offset = Offset(batch.last_offset().0 + 1);
        self.assign_epoch_quietly(batch.partition_leader_epoch(), batch.base_offset());
        if let Some(j) = self.journal.as_mut() {
            let flags = if batch.is_transactional() { FLAG_TRANSACTIONAL } else { 0 } | if batch.is_control() { FLAG_CONTROL } else { 0 };
            j.append(kind, batch.base_offset().0, batch.partition_leader_epoch().0, batch.records(), batch.producer(), flags);
        }
        self.apply_producer_state(self.store.len() - 1);
    }

    /// Batch indices `[first, end)` that a read from `from_offset` returns: batches whose last
    /// offset is >= `from_offset`, stopping before the first whose last offset is >=
    /// `max_offset`, at most `max_batches`. Out of `[log_start, log_end]` is OFFSET_OUT_OF_RANGE.
    pub fn read_range(&self, from_offset: Offset, max_batches: Option<usize>, max_offset: Option<Offset>) -> Result<(usize, usize), LogError> {
        if from_offset < self.log_start_offset || from_offset > self.log_end_offset {
            return Err(LogError::OffsetOutOfRange {
                offset: from_offset.0,
                log_start_offset: self.log_start_offset.0,
                log_end_offset: self.log_end_offset.0,
            });
        }
        let first = self.store.first_ending_at_or_after(from_offset.0);
        let mut end = self.store.len();
        if let Some(m) = max_offset {
            end = end.min(self.store.first_ending_at_or_after(m.0)).max(first);
        }
        if let Some(n) = max_batches {
            end = end.min(first.saturating_add(n));
        }
        Ok((first, end))
    }

    /// The batches of [`Self::read_range`], materialised.
    pub fn read(&self, from_offset: Offset, max_batches: Option<usize>, max_offset: Option<Offset>) -> Result<Vec<RecordBatch>, LogError> {
        let (first, end) = self.read_range(from_offset, max_batches, max_offset)?;
        Ok((first..end).map(|i| self.store.batch(i)).collect())
    }

    pub fn batch(&self, index: usize) -> RecordBatch {
        self.store.batch(index)
    }
    pub fn batches(&self) -> Vec<RecordBatch> {
        (0..self.store.len()).map(|i| self.store.batch(i)).collect()
    }
    pub fn batch_containing(&self, offset: Offset) -> Option<RecordBatch> {
        self.store.containing(offset.0).map(|i| self.store.batch(i))
    }
    pub fn value_at(&self, offset: Offset) -> Option<u64> {
        let i = self.store.containing(offset.0)?;
        Some(self.store.records(i)[(offset.0 - self.store.base(i)) as usize])
    }

    /// The log's epoch boundaries: `(epoch, base offset)` of each batch whose epoch differs
    /// from the previous batch's, in log order, up to the first batch whose epoch is lower
    /// than its predecessor's; that batch's index, if any, comes second. One pass over the
    /// batch columns, no batch copied (the state checker's Inv-EpochMonotone input).
    pub fn epoch_boundaries(&self) -> (Vec<(LeaderEpoch, Offset)>, Option<usize>) {
        let mut out: Vec<(LeaderEpoch, Offset)> = Vec::new();
        let mut last: Option<u32> = None;
        for i in 0..self.store.len() {
            let e = self.store.epoch(i);
            match last {
                Some(l) if e < l => return (out, Some(i)),
                Some(l) if e == l => {}
                _ => {
                    out.push((LeaderEpoch(e), Offset(self.store.base(i))));
                    last = Some(e);
                }
            }
        }
        (out, None)
    }

    /// `[start, end)` ranges within `[log_start, log_end)` that no batch covers.
    pub fn holes(&self) -> Vec<(Offset, Offset)> {
        let mut holes = Vec::new();
        let mut next = self.log_start_offset.0;
        for i in 0..self.store.len() {
            let base = self.store.base(i);
            if base > next {
                holes.push((Offset(next), Offset(base)));
            }
            next = next.max(self.store.last(i) + 1);
        }
        if self.log_end_offset.0 > next {
            holes.push((Offset(next), self.log_end_offset));
        }
        holes
    }

    /// Kafka's `UnifiedLog.truncateTo`. Drops every batch whose last offset is >= `target`
    /// (a batch straddling the target goes whole), sets the log end offset to `target`,
    /// clamps HW and recovery point, truncates the epoch cache from the end and reloads
    /// producer state at `target` from the newest producer snapshot at or below it, taking a
    /// snapshot at `target` (`rebuildProducerState`, see [`Self::take_producer_snapshot`]). A target at or past the log end only drops a trailing data-less epoch
    /// entry (KAFKA-10706) and returns `false`; below the log start it truncates fully.
    pub fn truncate_to(&mut self, target: Offset) -> bool {
        self.note(JournalKind::Truncate, target, 0);
        self.truncate_to_quietly(target)
    }

    fn truncate_to_quietly(&mut self, target: Offset) -> bool {
        if target >= self.log_end_offset {
            self.epoch_cache.truncate_from_end(self.log_end_offset);
            return false;
        }
        if target < self.log_start_offset {
            self.truncate_fully_quietly(target);
            return true;
        }
        let keep = self.store.first_ending_at_or_after(target.0);
        self.truncate_batches_from(keep, target);
        self.log_end_offset = target;
        self.epoch_cache.truncate_from_end(target);
        // After the producer-state reload, and only when the HW is cut (UnifiedLog.truncateTo:
        // updateHighWatermark if highWatermark >= logEndOffset), so that the ended
        // transactions the reload replayed below a lower HW stay known, as in Kafka.
        if self.high_watermark >= target {
            self.set_high_watermark(target);
        }
        self.recovery_point = self.recovery_point.min(target);
        true
    }

    /// Deletes everything and restarts the log at `new_offset` (a follower whose fetch offset
    /// fell below the leader's log start).
    pub fn truncate_fully_and_start_at(&mut self, new_offset: Offset) {
        self.note(JournalKind::TruncateFully, new_offset, 0);
        self.truncate_fully_quietly(new_offset);
    }

    fn truncate_fully_quietly(&mut self, new_offset: Offset) {
        self.store.clear();
        self.log_start_offset = new_offset;
        self.log_end_offset = new_offset;
        self.high_watermark = new_offset;
        self.recovery_point = new_offset;
        self.epoch_cache.clear();
        self.producer_state.clear();
        self.txn.clear();
        // ProducerStateManager.truncateFullyAndStartAt deletes every snapshot.
        self.producer_snapshots.clear();
    }

    /// Advances the recovery point (flushed prefix) to `up_to`, default the log end offset.
    pub fn flush(&mut self, up_to: Option<Offset>) {
        let target = up_to.unwrap_or(self.log_end_offset).min(self.log_end_offset);
        let before = self.recovery_point;
        self.recovery_point = self.recovery_point.max(target);
        if self.recovery_point != before {
            self.note(JournalKind::Flush, self.recovery_point, 0);
        }
    }

    /// A crash that loses the page cache, and the restart after it: batches not wholly below
    /// the recovery point are gone (a torn batch whole), then recovery re-derives the end
    /// offset, epoch cache and producer state, the latter as after any unclean shutdown
    /// ([`Self::recover_producer_state`]: replayed from the log start, also when nothing was
    /// lost, and loaded back from a snapshot at the new log end offset). Returns the number
    /// of records lost.
    pub fn drop_unflushed(&mut self) -> usize {
        // Journaled first: the HW change it causes follows it, as on replay.
        self.note(JournalKind::DropUnflushed, self.recovery_point, 0);
        let keep = self.store.first_ending_at_or_after(self.recovery_point.0);
        let lost = self.store.records_in(keep, self.store.len());
        self.store.truncate_batches(keep);
        self.log_end_offset = self.data_end();
        self.recovery_point = self.log_end_offset;
        self.set_high_watermark(self.high_watermark.min(self.log_end_offset));
        self.epoch_cache.truncate_from_end(self.log_end_offset);
        self.recover_producer_state();
        lost
    }

    fn clamp(&self, offset: Offset) -> Offset {
        offset.max(self.log_start_offset).min(self.log_end_offset)
    }

    /// Sets HW to `offset` clamped into `[log_start, log_end]`; may go down (a follower
    /// taking a new leader's smaller HW). Returns the new HW.
    pub fn update_high_watermark(&mut self, offset: Offset) -> Offset {
        self.set_high_watermark(self.clamp(offset));
        self.high_watermark
    }

    /// Every HW change goes through here (and into the journal when one is kept).
    fn set_high_watermark(&mut self, hw: Offset) {
        if hw != self.high_watermark {
            self.note(JournalKind::HighWatermark, hw, 0);
        }
        self.high_watermark = hw;
        self.txn.on_high_watermark(hw);
    }

    /// Leader variant: raises HW to `offset` (clamped) only if that is larger.
    pub fn maybe_increment_high_watermark(&mut self, offset: Offset) -> bool {
        let c = self.clamp(offset);
        if c > self.high_watermark {
            self.set_high_watermark(c);
            true
        } else {
            false
        }
    }

    /// Drops batches `[keep, len)` (all end below `target`, the new log end offset) and
    /// reloads producer state at `target` as Kafka does ([`Self::truncate_to`]), taking a
    /// snapshot at `target`. The reload is needed even when no producer lost a batch: a
    /// state loaded from a snapshot earlier is not what replaying the log gives, and Kafka
    /// reloads every producer from the snapshot at or below the target.
    fn truncate_batches_from(&mut self, keep: usize, target: Offset) {
        self.store.truncate_batches(keep);
        self.reload_producer_state(target);
    }

    /// Recomputes producer state and the transaction index by replaying every batch from the
    /// log start, ignoring producer snapshots (Kafka's rebuild without a snapshot). Truncation
    /// and restarts do not call this: they reload from the newest snapshot at or below their
    /// target and replay only the log after it ([`Self::truncate_to`], [`Self::reload`]),
    /// which can leave less than this does (one batch per producer from the snapshot, no
    /// unreplicated transaction ended before it).
    pub fn rebuild_producer_state(&mut self) {
        self.producer_state.clear();
        self.txn.clear();
        for i in 0..self.store.len() {
            self.apply_producer_state(i);
        }
        self.txn.on_high_watermark(self.high_watermark);
    }

    /// The log as a restarted broker loads it (`LogLoader.load`), after a clean shutdown (which
    /// took a snapshot at the log end offset, `UnifiedLog.close`) or, with `clean_shutdown`
    /// false, after a crash that lost nothing. The log end offset becomes where the data ends
    /// (a truncation inside a batch had left it higher) and the epoch cache is truncated from
    /// the end there, dropping an epoch assigned with no data yet (`truncate_to(data end)`,
    /// KAFKA-10706 at the LEO).
    ///
    /// Clean: stray producer snapshots are removed (`ProducerStateManager.removeStraySnapshots`:
    /// all but the newest, the log being one segment) and producer state is reloaded at the
    /// data end from the newest snapshot at or below it (`UnifiedLog.rebuildProducerState`,
    /// as in [`Self::truncate_to`]). Unclean: see [`Self::recover_producer_state`].
    pub fn reload(&mut self, clean_shutdown: bool) {
        self.remove_stray_producer_snapshots();
        let data_end = self.data_end();
        let truncated = self.truncate_to(data_end.min(self.log_end_offset));
        if !clean_shutdown {
            self.recover_producer_state();
        } else if !truncated {
            self.reload_producer_state(self.log_end_offset);
        }
    }

    /// Where the stored data ends: the last batch's last offset + 1, or the log start.
    fn data_end(&self) -> Offset {
        match self.store.len() {
            0 => self.log_start_offset,
            n => Offset(self.store.last(n - 1) + 1),
        }
    }

    /// Producer state after an unclean shutdown, over batches that already end at the log end
    /// offset, as `LogLoader.load` leaves it for a log of one segment:
    /// `LogLoader.recoverSegment` builds a temporary `ProducerStateManager` over the same
    /// snapshot files, whose `rebuildProducerState` at the segment base deletes every snapshot
    /// (`truncateAndReload` removes those above the base and at or below the log start), then
    /// `LogSegment.recover` replays every batch into it and `takeSnapshot` writes it at the
    /// log end offset. The broker's own manager then loads that snapshot (`removeStraySnapshots`,
    /// `rebuildProducerState`): each producer with its last batch only, ongoing transactions,
    /// no unreplicated one; aborted transactions as the replay indexed them.
    fn recover_producer_state(&mut self) {
        self.producer_snapshots.clear();
        self.rebuild_producer_state();
        self.snapshot_at(self.log_end_offset);
        self.reload_producer_state(self.log_end_offset);
    }

    /// Producer state and transaction index effects of stored batch `i`.
    fn apply_producer_state(&mut self, i: usize) {
        let Some(p) = self.store.producer(i) else { return };
        let base = Offset(self.store.base(i));
        let n = self.store.records(i).len() as u32;
        let meta = BatchMetadata {
            first_seq: p.base_sequence,
            last_seq: p.base_sequence.increment(n - 1),
            base_offset: base,
            last_offset: Offset(self.store.last(i)),
        };
        let marker = self.store.is_control(i).then(|| crate::txn::decode_marker(self.store.records(i)[0]));
        self.producer_state.update_parts(p.producer_id, p.producer_epoch, meta, marker.map(|(_, e)| e as u32));
        match marker {
            Some((control, _)) => self.txn.on_marker(p.producer_id, base, control),
            None if self.store.is_transactional(i) => self.txn.on_transactional_data(p.producer_id, base),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(log: &mut ReplicaLog, n: usize, epoch: u32) -> LogAppendInfo {
        log.append_as_leader(vec![7; n], LeaderEpoch(epoch), None, false).unwrap()
    }

    #[test]
    fn a_store_stamp_survives_appends_only() {
        let mut log = ReplicaLog::new(Offset(0), false);
        let first = log.store().stamp();
        plain(&mut log, 2, 0);
        plain(&mut log, 3, 1);
        assert_eq!(log.store().stamp(), first); // appends keep what was below the end
        let copy = log.clone();
        assert_ne!(copy.store().stamp(), first); // a copy changes apart from its original
        assert!(!log.truncate_to(Offset(9)));   // nothing cut: nothing rewritten
        assert_eq!(log.store().stamp(), first);
        log.truncate_to(Offset(2));
        let cut = log.store().stamp();
        assert!(cut != first && cut != copy.store().stamp());
        assert_ne!(ReplicaLog::new(Offset(0), false).store().stamp(), cut);
    }

    #[test]
    fn appends_carry_the_leader_clock_and_lookups_by_time_find_the_first_batch() {
        let mut log = ReplicaLog::new(Offset(0), false);
        plain(&mut log, 2, 0); // no clock yet: no timestamp
        log.set_time(100);
        plain(&mut log, 3, 0);
        log.set_time(250);
        log.append_end_txn_marker(ProducerId(9), ProducerEpoch(0), 0, ControlType::Abort, LeaderEpoch(0), 0).unwrap();
        let stamps: Vec<i64> = log.batches().iter().map(|b| b.max_timestamp()).collect();
        assert_eq!(stamps, vec![NO_TIMESTAMP, 100, 250]);
        assert_eq!(log.offset_for_timestamp(0), Some((Offset(2), 100)));
        assert_eq!(log.offset_for_timestamp(101), Some((Offset(5), 250)));
        assert_eq!(log.offset_for_timestamp(251), None);
        let mut follower = ReplicaLog::new(Offset(0), false);
        follower.append_batches_as_follower(&log.batches()).unwrap();
        assert_eq!(follower.batches(), log.batches());
        assert!(log.truncate_to(Offset(5)));
        assert_eq!(log.offset_for_timestamp(101), None);
    }

    #[test]
    fn mid_batch_truncation_leaves_a_hole_like_kafka() {
        let mut log = ReplicaLog::new(Offset(0), false);
        plain(&mut log, 5, 0);
        plain(&mut log, 5, 1);
        assert!(log.truncate_to(Offset(7)));
        assert_eq!(log.log_end_offset(), Offset(7));
        assert_eq!(log.batch_count(), 1);
        assert_eq!(log.holes(), vec![(Offset(5), Offset(7))]);
        assert_eq!(log.epoch_cache().latest_epoch(), Some(LeaderEpoch(1)));
    }

    #[test]
    fn truncate_at_end_drops_dataless_epoch() {
        let mut log = ReplicaLog::new(Offset(0), false);
        plain(&mut log, 3, 0);
        log.assign_epoch(LeaderEpoch(1), Offset(3));
        assert!(!log.truncate_to(Offset(3)));
        assert_eq!(log.latest_epoch(), Some(LeaderEpoch(0)));
    }

    #[test]
    fn crash_drops_unflushed_tail_and_torn_batch() {
        let mut log = ReplicaLog::new(Offset(0), false);
        plain(&mut log, 3, 0);
        plain(&mut log, 3, 0);
        log.flush(Some(Offset(4)));
        plain(&mut log, 2, 1);
        log.update_high_watermark(Offset(8));
        assert_eq!(log.drop_unflushed(), 5);
        assert_eq!((log.log_end_offset(), log.high_watermark(), log.recovery_point()), (Offset(3), Offset(3), Offset(3)));
        assert_eq!(log.latest_epoch(), Some(LeaderEpoch(0)));
    }

    /// Without a producer snapshot a truncation replays from the log start: a full replay,
    /// also across epoch changes and regressions (a follower follows whatever the leader wrote).
    #[test]
    fn truncation_without_snapshot_equals_full_replay() {
        use crate::types::{ProducerEpoch, ProducerId, Sequence};
        // (producer id, producer epoch, control marker?) per batch, epochs regressing at 4.
        let batches = [(0, 0, false), (1, 0, false), (2, 1, false), (0, 1, false), (1, 0, false), (2, 0, false),
                       (0, 1, false), (1, 1, true), (2, 1, false), (0, 1, false), (0, 1, false), (0, 1, false),
                       (0, 1, false), (0, 1, false), (1, 2, false)];
        let mut log = ReplicaLog::new(Offset(0), false);
        let mut seq = [0u32; 3];
        for (pid, epoch, control) in batches {
            let p = ProducerFields { producer_id: ProducerId(pid), producer_epoch: ProducerEpoch(epoch), base_sequence: Sequence(seq[pid as usize]) };
            let records = if control { vec![1] } else { vec![7, 8] };
            seq[pid as usize] += records.len() as u32;
            let b = RecordBatch::new(log.log_end_offset(), LeaderEpoch(0), records, Some(p), control, control).expect("valid batch");
            log.append_as_follower(&b).expect("contiguous");
        }
        for target in (0..log.log_end_offset().0).rev() {
            let mut cut = log.clone();
            cut.truncate_to(Offset(target));
            let incremental = cut.producer_state().clone();
            cut.rebuild_producer_state();
            assert_eq!(&incremental, cut.producer_state(), "truncate_to({target})");
        }
    }

    /// A restart reloads the snapshot taken at the clean shutdown: one batch per producer, so
    /// a retry of an older batch is out of order (Kafka), not a duplicate; a truncation takes
    /// a snapshot at its target and deletes those above it.
    #[test]
    fn restart_and_truncation_reload_the_newest_snapshot() {
        use crate::types::{ProducerEpoch, ProducerId, Sequence};
        let mut log = ReplicaLog::new(Offset(0), false);
        let write = |log: &mut ReplicaLog, seq: u32| {
            let p = ProducerFields { producer_id: ProducerId(1), producer_epoch: ProducerEpoch(0), base_sequence: Sequence(seq) };
            log.append_as_leader(vec![seq as u64], LeaderEpoch(0), Some(p), false)
        };
        for seq in 0..3 {
            write(&mut log, seq).unwrap();
        }
        assert!(write(&mut log, 1).unwrap().duplicate);
        assert!(log.take_producer_snapshot());
        assert!(!log.take_producer_snapshot());
        log.reload(true);
        assert_eq!(log.producer_state().entry(ProducerId(1)).map(|e| e.batches.len()), Some(1));
        assert!(matches!(write(&mut log, 1), Err(Error::ProducerState(ProducerStateError::OutOfOrderSequence { .. }))));
        assert!(write(&mut log, 2).unwrap().duplicate);
        write(&mut log, 3).unwrap();
        assert!(log.truncate_to(Offset(2)));
        assert_eq!(log.producer_snapshot_offsets(), vec![Offset(2)]);
        assert_eq!(log.producer_state().entry(ProducerId(1)).map(|e| e.batches.len()), Some(2));
    }

    fn txn_write(log: &mut ReplicaLog, pid: u64, seq: u32, values: Vec<u64>) -> Result<LogAppendInfo, Error> {
        use crate::types::{ProducerEpoch, ProducerId, Sequence};
        let p = ProducerFields { producer_id: ProducerId(pid), producer_epoch: ProducerEpoch(0), base_sequence: Sequence(seq) };
        log.append_as_leader(values, LeaderEpoch(0), Some(p), true)
    }

    #[test]
    fn transactions_drive_the_last_stable_offset_and_the_aborted_index() {
        use crate::types::{ProducerEpoch, ProducerId};
        let mut log = ReplicaLog::new(Offset(0), false);
        plain(&mut log, 1, 0); // offset 0
        txn_write(&mut log, 1, 0, vec![10, 11]).unwrap(); // 1..2, txn of producer 1
        txn_write(&mut log, 2, 0, vec![20]).unwrap(); // 3, txn of producer 2
        log.update_high_watermark(Offset(4));
        assert_eq!((log.first_unstable_offset(), log.last_stable_offset()), (Some(Offset(1)), Offset(1)));
        log.append_end_txn_marker(ProducerId(1), ProducerEpoch(0), 0, ControlType::Abort, LeaderEpoch(0), 0).unwrap(); // 4
        let aborted = log.aborted_transactions(Offset(0), Offset(100));
        assert_eq!(aborted, vec![AbortedTxn { producer_id: ProducerId(1), first_offset: Offset(1), last_offset: Offset(4), last_stable_offset: Offset(3) }]);
        assert_eq!(log.last_stable_offset(), Offset(1)); // the marker is not replicated yet
        log.append_end_txn_marker(ProducerId(2), ProducerEpoch(0), 0, ControlType::Commit, LeaderEpoch(0), 0).unwrap(); // 5
        log.update_high_watermark(Offset(6));
        assert_eq!((log.first_unstable_offset(), log.last_stable_offset()), (None, Offset(6)));
        // Truncating the COMMIT marker reopens producer 2's transaction.
        log.truncate_to(Offset(5));
        assert_eq!(log.first_unstable_offset(), Some(Offset(3)));
        assert_eq!(log.txn_index().ongoing_first_offset(ProducerId(2)), Some(Offset(3)));
    }

    #[test]
    fn transaction_fencing_and_state_errors() {
        use crate::types::{ProducerEpoch, ProducerId, Sequence};
        let mut log = ReplicaLog::new(Offset(0), false);
        txn_write(&mut log, 1, 0, vec![1]).unwrap();
        let plain_write = ProducerFields { producer_id: ProducerId(1), producer_epoch: ProducerEpoch(0), base_sequence: Sequence(1) };
        let err = log.append_as_leader(vec![2], LeaderEpoch(0), Some(plain_write), false).unwrap_err();
        assert!(matches!(err, Error::ProducerState(ProducerStateError::InvalidTxnState { transaction_first_offset: 0, .. })));
        log.append_end_txn_marker(ProducerId(1), ProducerEpoch(0), 3, ControlType::Commit, LeaderEpoch(0), 0).unwrap();
        let stale = log.append_end_txn_marker(ProducerId(1), ProducerEpoch(0), 2, ControlType::Abort, LeaderEpoch(0), 0).unwrap_err();
        assert!(matches!(stale, Error::ProducerState(ProducerStateError::TransactionCoordinatorFenced { current_coordinator_epoch: 3, .. })));
        // A bumped producer epoch fences markers of the old one.
        txn_write(&mut log, 1, 1, vec![3]).unwrap();
        let bump = ProducerFields { producer_id: ProducerId(1), producer_epoch: ProducerEpoch(1), base_sequence: Sequence(0) };
        log.append_end_txn_marker(ProducerId(1), ProducerEpoch(0), 3, ControlType::Abort, LeaderEpoch(0), 0).unwrap();
        log.append_as_leader(vec![4], LeaderEpoch(0), Some(bump), true).unwrap();
        let zombie = log.append_end_txn_marker(ProducerId(1), ProducerEpoch(0), 3, ControlType::Commit, LeaderEpoch(0), 0).unwrap_err();
        assert!(matches!(zombie, Error::ProducerState(ProducerStateError::InvalidProducerEpoch { current_epoch: 1, .. })));
    }

    #[test]
    fn transaction_version_2_fences_equal_epoch_markers() {
        use crate::types::{ProducerEpoch, ProducerId};
        let marker = |log: &mut ReplicaLog, epoch: u16, version: u8| {
            log.append_end_txn_marker(ProducerId(1), ProducerEpoch(epoch), 0, ControlType::Commit, LeaderEpoch(0), version)
        };
        // TV2: transaction 1 is written with epoch 0 and ended by a marker bumped to epoch 1.
        let mut log = ReplicaLog::new(Offset(0), false);
        txn_write(&mut log, 1, 0, vec![1]).unwrap();
        marker(&mut log, 1, 2).unwrap();
        // A retry of that marker (epoch 1, nothing ongoing) is written again (KAFKA-19999).
        marker(&mut log, 1, 2).unwrap();
        // Transaction 2 writes with epoch 1; a late marker of transaction 1 (epoch 1) is fenced.
        let second = ProducerFields { producer_id: ProducerId(1), producer_epoch: ProducerEpoch(1), base_sequence: crate::types::Sequence(0) };
        log.append_as_leader(vec![2], LeaderEpoch(0), Some(second), true).unwrap();
        let late = marker(&mut log, 1, 2).unwrap_err();
        assert!(matches!(late, Error::ProducerState(ProducerStateError::InvalidProducerEpoch { producer_epoch: 1, current_epoch: 1, .. })));
        assert_eq!(log.txn_index().ongoing_first_offset(ProducerId(1)), Some(Offset(3)));
        // The legacy rule (TV0/1) takes it, ending transaction 2: what 4.0 and 4.1 did.
        marker(&mut log, 1, 0).unwrap();
        assert_eq!(log.txn_index().ongoing_first_offset(ProducerId(1)), None);
    }

    #[test]
    fn read_bounds() {
        let mut log = ReplicaLog::new(Offset(0), false);
        plain(&mut log, 3, 0);
        plain(&mut log, 3, 0);
        let (a, b) = log.read_range(Offset(1), None, Some(Offset(4))).unwrap();
        assert_eq!((a, b), (0, 1));
        assert!(log.read(Offset(7), None, None).is_err());
        assert!(log.read(Offset(6), None, None).unwrap().is_empty());
    }

    #[test]
    fn v0_v1_follower_takes_a_wrapper_below_its_log_end_whole() {
        let mut leader = ReplicaLog::new(Offset(0), false);
        plain(&mut leader, 3, 0);
        leader.append_as_leader(vec![1, 2, 3, 4, 5, 6, 7], LeaderEpoch(1), None, false).unwrap(); // 3-9
        let mut follower = ReplicaLog::new(Offset(0), false).with_wrapper_batches(true);
        plain(&mut follower, 3, 0);
        plain(&mut follower, 5, 0); // 3-7, LEO 8
        let wrapper = leader.read(Offset(8), None, None).unwrap();
        assert_eq!(wrapper[0].base_offset(), Offset(3));
        let mut v2 = follower.clone().with_wrapper_batches(false);
        assert!(matches!(v2.append_batches_as_follower(&wrapper), Err(LogError::UnexpectedAppendOffset { first_offset: 3, log_end_offset: 8 })));
        assert_eq!(follower.append_batches_as_follower(&wrapper).unwrap(), Offset(10));
        // offsets 3-7 twice: lookups find the first wrapper holding them
        assert_eq!(follower.value_at(Offset(5)), Some(7));
        assert_eq!(follower.value_at(Offset(8)), Some(6));
        assert_eq!(follower.read_range(Offset(4), None, None).unwrap(), (1, 3));
        // a wrapper ending below the log end offset is refused, nothing appended
        let stale = leader.read(Offset(0), Some(1), None).unwrap();
        assert_eq!(follower.append_batches_as_follower(&stale), Err(LogError::OutOfOrderOffsets { offset: 2, log_end_offset: 10 }));
        assert_eq!(follower.batch_count(), 3);
        // truncation drops every wrapper whose last offset reaches the target
        assert!(follower.truncate_to(Offset(8)));
        assert_eq!(follower.batch_count(), 2);
        assert!(follower.truncate_to(Offset(5)));
        assert_eq!((follower.batch_count(), follower.log_end_offset()), (1, Offset(5)));
        assert_eq!(follower.holes(), vec![(Offset(3), Offset(5))]);
    }
}
