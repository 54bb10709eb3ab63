//! The record batch value: what a producer sends, a leader appends and a follower copies.
//! A value below the log and the producer state, which both read it (`crate::log` re-exports it).

use crate::error::LogError;
use crate::types::{LeaderEpoch, Offset, ProducerEpoch, ProducerId, Sequence};

/// Producer fields of an idempotent or transactional batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProducerFields {
    pub producer_id: ProducerId,
    pub producer_epoch: ProducerEpoch,
    pub base_sequence: Sequence,
}

/// Control record values with coordinator epoch 0 (see [`crate::txn::marker_value`]).
pub const ABORT_MARKER: u64 = 0;
/// See [`ABORT_MARKER`].
pub const COMMIT_MARKER: u64 = 1;

/// One record batch. Offsets `[base_offset, last_offset]` are inclusive (Kafka's naming);
/// `last_offset = base_offset + records.len() - 1`. A record is a 64-bit value (the unique
/// value a producer wrote, as in Jepsen's Kafka workload).
///
/// ```
/// use epochlab::{RecordBatch, Offset, LeaderEpoch};
/// let b = RecordBatch::new(Offset(10), LeaderEpoch(3), vec![7, 8, 9], None, false, false).unwrap();
/// assert_eq!(b.last_offset(), Offset(12));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RecordBatch {
    base_offset: Offset,
    partition_leader_epoch: LeaderEpoch,
    producer: Option<ProducerFields>,
    is_transactional: bool,
    is_control: bool,
    records: Vec<u64>,
    max_timestamp: i64,
}

/// `RecordBatch.NO_TIMESTAMP`: a batch built outside a leader's append carries no timestamp.
pub const NO_TIMESTAMP: i64 = -1;

impl RecordBatch {
    /// Builds a batch, refusing one that cannot exist: no records, a last offset past the
    /// offset domain, a transactional or control batch without producer fields, a control
    /// batch that is not exactly one marker record (`coordinator_epoch << 1 | commit`, the
    /// coordinator epoch within Int32).
    pub fn new(
        base_offset: Offset,
        partition_leader_epoch: LeaderEpoch,
        records: Vec<u64>,
        producer: Option<ProducerFields>,
        is_transactional: bool,
        is_control: bool,
    ) -> Result<Self, LogError> {
        validate_shape(base_offset, records.len(), producer.is_some(), is_transactional, is_control)?;
        if is_control && records[0] >> 1 > i32::MAX as u64 {
            return Err(invalid(format!(
                "control record {} encodes coordinator epoch {}, beyond 2^31-1",
                records[0],
                records[0] >> 1
            )));
        }
        Ok(Self { base_offset, partition_leader_epoch, producer, is_transactional, is_control, records, max_timestamp: NO_TIMESTAMP })
    }

    /// The batch's largest record timestamp. The model's records carry the leader's append
    /// time (``message.timestamp.type=LogAppendTime``: every record of the batch has it), set
    /// when a leader appends; [`NO_TIMESTAMP`] otherwise.
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }

    /// The same batch stamped with `timestamp` (negative values mean [`NO_TIMESTAMP`]).
    pub fn with_max_timestamp(mut self, timestamp: i64) -> Self {
        self.max_timestamp = timestamp.max(NO_TIMESTAMP);
        self
    }

    pub fn base_offset(&self) -> Offset {
        self.base_offset
    }
    pub fn last_offset(&self) -> Offset {
        Offset(self.base_offset.0 + self.records.len() as u64 - 1)
    }
    pub fn partition_leader_epoch(&self) -> LeaderEpoch {
        self.partition_leader_epoch
    }
    pub fn producer(&self) -> Option<ProducerFields> {
        self.producer
    }
    /// `base_sequence + records - 1`, wrapping past `Sequence::MAX` to 0.
    pub fn last_sequence(&self) -> Option<Sequence> {
        self.producer.map(|p| p.base_sequence.increment(self.records.len() as u32 - 1))
    }
    pub fn is_transactional(&self) -> bool {
        self.is_transactional
    }
    pub fn is_control(&self) -> bool {
        self.is_control
    }
    pub fn records(&self) -> &[u64] {
        &self.records
    }
    /// For a control batch: the marker type and the coordinator epoch it carries.
    pub fn marker(&self) -> Option<(crate::txn::ControlType, u32)> {
        self.is_control.then(|| {
            let (control, epoch) = crate::txn::decode_marker(self.records[0]);
            (control, epoch as u32)
        })
    }
    pub fn record_count(&self) -> usize {
        self.records.len()
    }

    /// The same batch at another base offset (what a leader does when it assigns offsets).
    pub fn with_base_offset(&self, base_offset: Offset) -> Result<Self, LogError> {
        validate_shape(base_offset, self.records.len(), self.producer.is_some(), self.is_transactional, self.is_control)?;
        Ok(Self { base_offset, ..self.clone() })
    }

    /// Assembles a batch from trusted parts (the log's own columns).
    pub(crate) fn from_parts(
        base_offset: Offset,
        partition_leader_epoch: LeaderEpoch,
        records: Vec<u64>,
        producer: Option<ProducerFields>,
        is_transactional: bool,
        is_control: bool,
        max_timestamp: i64,
    ) -> Self {
        debug_assert!(!records.is_empty());
        Self { base_offset, partition_leader_epoch, producer, is_transactional, is_control, records, max_timestamp }
    }
}

fn invalid(reason: String) -> LogError {
    LogError::InvalidRecordBatch { reason }
}

fn validate_shape(
    base_offset: Offset,
    count: usize,
    has_producer: bool,
    is_transactional: bool,
    is_control: bool,
) -> Result<(), LogError> {
    if count == 0 {
        return Err(invalid("a batch needs at least one record".into()));
    }
    // The log end offset after this batch (last offset + 1) must itself be an offset.
    if count as u64 > u32::MAX as u64 || base_offset.checked_add(count as u64).is_none() {
        return Err(invalid(format!(
            "{count} records from base offset {base_offset} overflow the offset domain"
        )));
    }
    if (is_transactional || is_control) && !has_producer {
        return Err(invalid("transactional and control batches need producer_id, producer_epoch and base_sequence".into()));
    }
    if is_control && count != 1 {
        return Err(invalid(format!("a control batch holds exactly one record, got {count}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pf(seq: u32) -> Option<ProducerFields> {
        Some(ProducerFields { producer_id: ProducerId(7), producer_epoch: ProducerEpoch(0), base_sequence: Sequence(seq) })
    }

    #[test]
    fn last_offset_and_sequence() {
        let b = RecordBatch::new(Offset(10), LeaderEpoch(1), vec![1, 2, 3], pf(Sequence::MAX - 1), false, false).unwrap();
        assert_eq!(b.last_offset(), Offset(12));
        assert_eq!(b.last_sequence(), Some(Sequence(0)));
    }

    #[test]
    fn refuses_impossible_batches() {
        assert!(RecordBatch::new(Offset(0), LeaderEpoch(0), vec![], None, false, false).is_err());
        assert!(RecordBatch::new(Offset(0), LeaderEpoch(0), vec![1], None, true, false).is_err());
        assert!(RecordBatch::new(Offset(0), LeaderEpoch(0), vec![1, 0], pf(0), true, true).is_err());
        assert!(RecordBatch::new(Offset(0), LeaderEpoch(0), vec![1 << 32], pf(0), true, true).is_err());
        assert!(RecordBatch::new(Offset(0), LeaderEpoch(0), vec![5], pf(0), true, true).is_ok());
        assert!(RecordBatch::new(Offset(Offset::MAX), LeaderEpoch(0), vec![1, 2], None, false, false).is_err());
        assert!(RecordBatch::new(Offset(Offset::MAX - 1), LeaderEpoch(0), vec![1], None, false, false).is_ok());
        assert!(RecordBatch::new(Offset(Offset::MAX - 1), LeaderEpoch(0), vec![1, 2], None, false, false).is_err());
        assert!(RecordBatch::new(Offset(0), LeaderEpoch(0), vec![1], pf(0), true, true).is_ok());
    }
}
