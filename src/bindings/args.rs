//! Conversion of Python arguments into core domain types. Arguments arrive as `i128` so that
//! a negative or too-wide `int` becomes `InvalidArgumentError` naming the argument, not a bare
//! `OverflowError`; a non-`int` is pyo3's `TypeError`, which names the argument too.

use std::sync::{Mutex, MutexGuard};

use pyo3::prelude::*;

use super::errors::IntoPyResult;
use crate::error::ArgumentError;
use crate::log::ProducerFields;
use crate::types::{LeaderEpoch, Offset, ProducerEpoch, ProducerId, Sequence};

pub(crate) fn offset(v: i128, name: &'static str) -> PyResult<Offset> {
    Offset::try_new(v, name).py()
}
pub(crate) fn epoch(v: i128, name: &'static str) -> PyResult<LeaderEpoch> {
    LeaderEpoch::try_new(v, name).py()
}
pub(crate) fn opt_epoch(v: Option<i128>, name: &'static str) -> PyResult<Option<LeaderEpoch>> {
    v.map(|v| epoch(v, name)).transpose()
}
pub(crate) fn opt_offset(v: Option<i128>, name: &'static str) -> PyResult<Option<Offset>> {
    v.map(|v| offset(v, name)).transpose()
}

/// A count (`max_batches`, batch sizes): 0..=2^32-1.
pub(crate) fn count(v: i128, name: &'static str) -> PyResult<u32> {
    if !(0..=u32::MAX as i128).contains(&v) {
        return Err(ArgumentError::OutOfDomain { argument: name, value: v, domain: "0..=2^32-1" }).py();
    }
    Ok(v as u32)
}

/// Producer fields: all three or none (`InvalidRecordBatchError` otherwise).
pub(crate) fn producer_fields(
    producer_id: Option<i128>,
    producer_epoch: Option<i128>,
    base_sequence: Option<i128>,
) -> PyResult<Option<ProducerFields>> {
    match (producer_id, producer_epoch, base_sequence) {
        (None, None, None) => Ok(None),
        (Some(id), Some(ep), Some(seq)) => Ok(Some(ProducerFields {
            producer_id: ProducerId::try_new(id, "producer_id").py()?,
            producer_epoch: ProducerEpoch::try_new(ep, "producer_epoch").py()?,
            base_sequence: Sequence::try_new(seq, "base_sequence").py()?,
        })),
        _ => Err(crate::error::LogError::InvalidRecordBatch {
            reason: "producer_id, producer_epoch and base_sequence must be given together".into(),
        })
        .py(),
    }
}

/// Record values (`0..=2^64-1`). The fast path extracts a `Vec<u64>`; on failure each item is
/// examined so the error names the bad value.
pub(crate) fn records(obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<Vec<u64>> {
    if let Ok(v) = obj.extract::<Vec<u64>>() {
        return Ok(v);
    }
    for item in obj.try_iter()? {
        let value: i128 = item?.extract()?;
        if !(0..=u64::MAX as i128).contains(&value) {
            return Err(ArgumentError::OutOfDomain { argument: name, value, domain: "0..=2^64-1" }).py();
        }
    }
    obj.extract::<Vec<u64>>()
}

/// Counts for the bulk path.
pub(crate) fn counts(obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<Vec<u32>> {
    if let Ok(v) = obj.extract::<Vec<u32>>() {
        return Ok(v);
    }
    let mut out = Vec::new();
    for item in obj.try_iter()? {
        out.push(count(item?.extract()?, name)?);
    }
    Ok(out)
}

/// Locks a wrapped core value. A poisoned mutex means an earlier panic inside the core, which
/// is a bug in epochlab, so it is a panic here too.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().expect("epochlab core state poisoned by an earlier panic")
}
