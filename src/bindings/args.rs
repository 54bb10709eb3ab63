//! Conversion of Python arguments into core domain types. Integer arguments arrive as [`Int`]
//! (any Python `int`, however large) so that a negative or too-wide value becomes
//! `InvalidArgumentError` naming the argument and carrying the value, never a bare
//! `OverflowError`; a non-`int` is pyo3's `TypeError`, which names the argument too.

use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyInt, PyString};

use super::errors::{out_of_domain_object, IntoPyResult};
use crate::error::ArgumentError;
use crate::log::ProducerFields;
use crate::types::{LeaderEpoch, Offset, ProducerEpoch, ProducerId, Sequence};


/// A Python `int` of any size: the `i128` it fits in, or the object itself when it does not
/// (it is then outside every domain, and the error shows it as given).
pub(crate) enum Int {
    Fits(i128),
    Huge(Py<PyAny>),
}

impl<'a, 'py> FromPyObject<'a, 'py> for Int {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        // an exact int as i64 first (PyLong_AsLongLong; the i128 conversion takes a slow path
        // under abi3); anything else, or a larger int, once through the i128 conversion, so an
        // `__index__` runs once
        if obj.is_exact_instance_of::<PyInt>() {
            if let Ok(v) = obj.extract::<i64>() {
                return Ok(Int::Fits(i128::from(v)));
            }
        }
        match obj.extract::<i128>() {
            Ok(v) => Ok(Int::Fits(v)),
            Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => Ok(Int::Huge(obj.to_owned().unbind())),
            Err(e) => Err(e),
        }
    }
}

/// The most items one sequence argument may hold (2^28: 2 GiB of record values), so that an
/// endless iterator ends in an error instead of exhausting memory.
pub(crate) const MAX_ITEMS: usize = 1 << 28;

/// A Python sequence (any iterable but `str`/`bytes`), read by iterating it: its `__len__` is
/// never trusted for an allocation, so a sequence that lies about its length cannot abort the
/// process, and an endless one is refused after [`MAX_ITEMS`] items.
pub(crate) struct Seq<T>(pub Vec<T>);

impl<'a, 'py, T> FromPyObject<'a, 'py> for Seq<T>
where
    T: for<'b> FromPyObject<'b, 'py>,
    for<'b> <T as FromPyObject<'b, 'py>>::Error: Into<PyErr>,
{
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() || obj.is_instance_of::<PyByteArray>() {
            return Err(PyTypeError::new_err(format!("expected a sequence, not {}", obj.get_type().name()?)));
        }
        // `__len__` only as a bounded capacity hint: it may lie.
        let hint = obj.len().unwrap_or(0).min(1 << 16);
        let mut items = Vec::with_capacity(hint);
        for item in obj.try_iter()? {
            if items.len() == MAX_ITEMS {
                return Err(ArgumentError::OutOfDomain { argument: "sequence", value: MAX_ITEMS as i128 + 1, domain: "at most 2^28 items" }).py();
            }
            items.push(item?.extract::<T>().map_err(Into::into)?);
        }
        Ok(Seq(items))
    }
}

/// Applies a domain constructor to `v`, turning a huge `int` into the same error.
fn domain<T>(
    v: Int,
    name: &'static str,
    domain: &'static str,
    check: impl FnOnce(i128, &'static str) -> Result<T, ArgumentError>,
) -> PyResult<T> {
    match v {
        Int::Fits(x) => check(x, name).py(),
        Int::Huge(obj) => Err(out_of_domain_object(name, obj, domain)),
    }
}

pub(crate) fn offset(v: Int, name: &'static str) -> PyResult<Offset> {
    domain(v, name, "0..=2^63-1", Offset::try_new)
}
/// A timestamp: -1 (`NO_TIMESTAMP`, none) or 0..=2^63-1 (the offset domain).
pub(crate) fn timestamp(v: Int, name: &'static str) -> PyResult<i64> {
    match v {
        Int::Fits(-1) => Ok(crate::log::NO_TIMESTAMP),
        v => Ok(offset(v, name)?.0 as i64),
    }
}
pub(crate) fn epoch(v: Int, name: &'static str) -> PyResult<LeaderEpoch> {
    domain(v, name, "0..=2^31-1", LeaderEpoch::try_new)
}
pub(crate) fn producer_id(v: Int, name: &'static str) -> PyResult<ProducerId> {
    domain(v, name, "0..=2^63-1", ProducerId::try_new)
}
pub(crate) fn opt_epoch(v: Option<Int>, name: &'static str) -> PyResult<Option<LeaderEpoch>> {
    v.map(|v| epoch(v, name)).transpose()
}
/// The epoch of an OffsetsForLeaderEpoch request: `None` or Kafka's UNDEFINED_EPOCH (-1) both
/// mean "undefined" and are answered UNDEFINED_EPOCH_OFFSET (`LeaderEpochFileCache.endOffsetFor`,
/// KAFKA-6857); any other negative value is outside the domain.
pub(crate) fn requested_epoch(v: Option<Int>, name: &'static str) -> PyResult<Option<LeaderEpoch>> {
    match v {
        Some(Int::Fits(-1)) | None => Ok(None),
        Some(v) => epoch(v, name).map(Some),
    }
}
pub(crate) fn opt_offset(v: Option<Int>, name: &'static str) -> PyResult<Option<Offset>> {
    v.map(|v| offset(v, name)).transpose()
}

/// A count (`max_batches`, batch sizes): 0..=2^32-1.
pub(crate) fn count(v: Int, name: &'static str) -> PyResult<u32> {
    domain(v, name, "0..=2^32-1", |x, name| {
        if !(0..=u32::MAX as i128).contains(&x) {
            return Err(ArgumentError::OutOfDomain { argument: name, value: x, domain: "0..=2^32-1" });
        }
        Ok(x as u32)
    })
}

/// A transaction version: 0, 1 or 2 (`TransactionVersion` in Kafka's server-common).
pub(crate) fn transaction_version(v: Int, name: &'static str) -> PyResult<u8> {
    domain(v, name, "0..=2", |x, name| {
        if !(0..=2).contains(&x) {
            return Err(ArgumentError::OutOfDomain { argument: name, value: x, domain: "0..=2" });
        }
        Ok(x as u8)
    })
}

/// Producer fields: all three or none (`InvalidRecordBatchError` otherwise).
pub(crate) fn producer_fields(
    producer_id: Option<Int>,
    producer_epoch: Option<Int>,
    base_sequence: Option<Int>,
) -> PyResult<Option<ProducerFields>> {
    match (producer_id, producer_epoch, base_sequence) {
        (None, None, None) => Ok(None),
        (Some(id), Some(ep), Some(seq)) => Ok(Some(ProducerFields {
            producer_id: domain(id, "producer_id", "0..=2^63-1", ProducerId::try_new)?,
            producer_epoch: domain(ep, "producer_epoch", "0..=32767", ProducerEpoch::try_new)?,
            base_sequence: domain(seq, "base_sequence", "0..=2^31-1", Sequence::try_new)?,
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
    if let Ok(Seq(v)) = obj.extract::<Seq<u64>>() {
        return Ok(v);
    }
    for item in obj.try_iter()? {
        domain(item?.extract::<Int>()?, name, "0..=2^64-1", |value, argument| {
            if !(0..=u64::MAX as i128).contains(&value) {
                return Err(ArgumentError::OutOfDomain { argument, value, domain: "0..=2^64-1" });
            }
            Ok(())
        })?;
    }
    obj.extract::<Seq<u64>>().map(|s| s.0)
}

/// Counts for the bulk path.
pub(crate) fn counts(obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<Vec<u32>> {
    if let Ok(Seq(v)) = obj.extract::<Seq<u32>>() {
        return Ok(v);
    }
    let mut out = Vec::new();
    for item in obj.try_iter()? {
        out.push(count(item?.extract::<Int>()?, name)?);
    }
    Ok(out)
}

/// Locks a wrapped core value. A poisoned mutex means an earlier panic inside the core, which
/// is a bug in epochlab, so it is a panic here too.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().expect("epochlab core state poisoned by an earlier panic")
}
