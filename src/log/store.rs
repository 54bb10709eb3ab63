//! Columnar batch storage: one vector per batch field, one flat vector of record values.
//!
//! Per batch: base offset (8 bytes), leader epoch (4), end index into the values (8), producer
//! id (8), producer epoch (2), base sequence (4), flags (1), max timestamp (8): 43 bytes, plus
//! 8 bytes per record.
//! Batches are sorted by last offset (strictly increasing), so offset lookups are binary
//! searches and truncation is a `Vec::truncate` of every column. In record format v2 batches
//! never overlap; a v0/v1 follower log may hold a compressed wrapper whose inner offsets start
//! below the previous wrapper's last offset (the follower checks only the wrapper's own, last,
//! offset: KAFKA-3919), so a lookup takes the first batch in log order that holds the offset,
//! as Kafka's offset index and segment scan do.

use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use crate::batch::{ProducerFields, RecordBatch};
use crate::types::{LeaderEpoch, Offset, ProducerEpoch, ProducerId, Sequence};

const HAS_PRODUCER: u8 = 1;
const TRANSACTIONAL: u8 = 2;
const CONTROL: u8 = 4;

#[derive(Debug)]
pub(crate) struct BatchStore {
    /// Unique to this store's content below its end: new for every store made (and every
    /// clone) and after every truncation, never reused in the process. Appends keep it, so
    /// two stamps equal to earlier ones mean both logs hold what they held then, plus appends
    /// (the checker's verified prefixes, `bindings::checks`).
    stamp: u64,
    base: Vec<u64>,
    epoch: Vec<u32>,
    rec_end: Vec<u64>,
    producer_id: Vec<u64>,
    producer_epoch: Vec<u16>,
    base_sequence: Vec<u32>,
    flags: Vec<u8>,
    timestamp: Vec<i64>,
    values: Vec<u64>,
}

static STAMPS: AtomicU64 = AtomicU64::new(1);

fn fresh_stamp() -> u64 {
    STAMPS.fetch_add(1, AtomicOrdering::Relaxed)
}

impl Default for BatchStore {
    fn default() -> Self {
        BatchStore {
            stamp: fresh_stamp(),
            base: Vec::new(),
            epoch: Vec::new(),
            rec_end: Vec::new(),
            producer_id: Vec::new(),
            producer_epoch: Vec::new(),
            base_sequence: Vec::new(),
            flags: Vec::new(),
            timestamp: Vec::new(),
            values: Vec::new(),
        }
    }
}

impl Clone for BatchStore {
    fn clone(&self) -> Self {
        BatchStore {
            stamp: fresh_stamp(), // a copy may change apart from its original
            base: self.base.clone(),
            epoch: self.epoch.clone(),
            rec_end: self.rec_end.clone(),
            producer_id: self.producer_id.clone(),
            producer_epoch: self.producer_epoch.clone(),
            base_sequence: self.base_sequence.clone(),
            flags: self.flags.clone(),
            timestamp: self.timestamp.clone(),
            values: self.values.clone(),
        }
    }
}

impl BatchStore {
    /// See the field: equal stamps, the same content below the end then, appends since.
    pub fn stamp(&self) -> u64 {
        self.stamp
    }
    pub fn len(&self) -> usize {
        self.base.len()
    }
    pub fn record_count(&self) -> usize {
        self.values.len()
    }
    pub fn clear(&mut self) {
        self.truncate_batches(0);
    }
    pub fn reserve(&mut self, batches: usize, records: usize) {
        self.base.reserve(batches);
        self.epoch.reserve(batches);
        self.rec_end.reserve(batches);
        self.producer_id.reserve(batches);
        self.producer_epoch.reserve(batches);
        self.base_sequence.reserve(batches);
        self.flags.reserve(batches);
        self.timestamp.reserve(batches);
        self.values.reserve(records);
    }

    fn rec_start(&self, i: usize) -> usize {
        if i == 0 { 0 } else { self.rec_end[i - 1] as usize }
    }
    pub fn base(&self, i: usize) -> u64 {
        self.base[i]
    }
    pub fn last(&self, i: usize) -> u64 {
        self.base[i] + (self.rec_end[i] as usize - self.rec_start(i)) as u64 - 1
    }
    pub fn epoch(&self, i: usize) -> u32 {
        self.epoch[i]
    }
    pub fn records(&self, i: usize) -> &[u64] {
        &self.values[self.rec_start(i)..self.rec_end[i] as usize]
    }
    pub fn max_timestamp(&self, i: usize) -> i64 {
        self.timestamp[i]
    }
    pub fn is_control(&self, i: usize) -> bool {
        self.flags[i] & CONTROL != 0
    }
    pub fn is_transactional(&self, i: usize) -> bool {
        self.flags[i] & TRANSACTIONAL != 0
    }
    pub fn producer(&self, i: usize) -> Option<ProducerFields> {
        (self.flags[i] & HAS_PRODUCER != 0).then(|| ProducerFields {
            producer_id: ProducerId(self.producer_id[i]),
            producer_epoch: ProducerEpoch(self.producer_epoch[i]),
            base_sequence: Sequence(self.base_sequence[i]),
        })
    }

    pub fn batch(&self, i: usize) -> RecordBatch {
        RecordBatch::from_parts(
            Offset(self.base[i]),
            LeaderEpoch(self.epoch[i]),
            self.records(i).to_vec(),
            self.producer(i),
            self.flags[i] & TRANSACTIONAL != 0,
            self.is_control(i),
            self.timestamp[i],
        )
    }

    pub fn push(&mut self, b: &RecordBatch) {
        let mut flags = 0;
        let (pid, pepoch, seq) = match b.producer() {
            Some(p) => {
                flags |= HAS_PRODUCER;
                (p.producer_id.0, p.producer_epoch.0, p.base_sequence.0)
            }
            None => (0, 0, 0),
        };
        if b.is_transactional() {
            flags |= TRANSACTIONAL;
        }
        if b.is_control() {
            flags |= CONTROL;
        }
        self.push_columns(b.base_offset().0, b.partition_leader_epoch().0, b.records(), pid, pepoch, seq, flags, b.max_timestamp());
    }

    /// Appends a plain (non-idempotent) batch; the bulk path.
    pub fn push_plain(&mut self, base: u64, epoch: u32, records: &[u64]) {
        self.push_columns(base, epoch, records, 0, 0, 0, 0, crate::batch::NO_TIMESTAMP);
    }

    #[allow(clippy::too_many_arguments)]
    fn push_columns(&mut self, base: u64, epoch: u32, records: &[u64], pid: u64, pepoch: u16, seq: u32, flags: u8, timestamp: i64) {
        debug_assert!(!records.is_empty());
        debug_assert!(self.base.is_empty() || self.last(self.len() - 1) < base + records.len() as u64 - 1, "last offsets must increase");
        self.base.push(base);
        self.epoch.push(epoch);
        self.values.extend_from_slice(records);
        self.rec_end.push(self.values.len() as u64);
        self.producer_id.push(pid);
        self.producer_epoch.push(pepoch);
        self.base_sequence.push(seq);
        self.flags.push(flags);
        self.timestamp.push(timestamp);
    }

    /// Keeps the first `n` batches.
    pub fn truncate_batches(&mut self, n: usize) {
        if n < self.len() {
            self.stamp = fresh_stamp();
        }
        let keep_values = self.rec_start(n.min(self.len()));
        self.base.truncate(n);
        self.epoch.truncate(n);
        self.rec_end.truncate(n);
        self.producer_id.truncate(n);
        self.producer_epoch.truncate(n);
        self.base_sequence.truncate(n);
        self.flags.truncate(n);
        self.timestamp.truncate(n);
        self.values.truncate(keep_values);
    }

    /// Index of the first batch whose last offset is >= `offset` (`len()` if none).
    pub fn first_ending_at_or_after(&self, offset: u64) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.last(mid) < offset { lo = mid + 1 } else { hi = mid }
        }
        lo
    }

    /// Index of the first batch holding `offset`, if any.
    pub fn containing(&self, offset: u64) -> Option<usize> {
        let j = self.first_ending_at_or_after(offset);
        (j < self.len() && self.base[j] <= offset).then_some(j)
    }

    /// Record count of batches `[from, to)`.
    pub fn records_in(&self, from: usize, to: usize) -> usize {
        if from >= to { 0 } else { self.rec_end[to - 1] as usize - self.rec_start(from) }
    }

    /// Approximate heap bytes held per batch column set and per record, for reports.
    pub fn heap_bytes(&self) -> usize {
        self.base.capacity() * 8
            + self.epoch.capacity() * 4
            + self.rec_end.capacity() * 8
            + self.producer_id.capacity() * 8
            + self.producer_epoch.capacity() * 2
            + self.base_sequence.capacity() * 4
            + self.flags.capacity()
            + self.timestamp.capacity() * 8
            + self.values.capacity() * 8
    }
}
