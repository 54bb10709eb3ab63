//! Divergence search functions and their outcome values.

use pyo3::prelude::*;

use super::args::{self, lock, Int};
use super::epoch_cache::PyLeaderEpochCache;
use super::errors::IntoPyResult;
use super::log::PyReplicaLog;
use crate::divergence::{self as core, FetchCheck, LeaderAnswerError, TruncationOutcome};
use crate::error::ArgumentError;
use crate::invariants;
use crate::log::ReplicaLog;
use crate::types::{LeaderEpoch, Offset};

#[pyclass(frozen, eq, hash, name = "TruncationOutcome", module = "epochlab._core")]
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct PyTruncationOutcome(TruncationOutcome);

#[pymethods]
impl PyTruncationOutcome {
    #[getter]
    fn kind(&self) -> &'static str {
        match self.0 {
            TruncationOutcome::Truncate(_) => "truncate",
            TruncationOutcome::TruncateAndRetry(_) => "truncate_and_retry",
            TruncationOutcome::Fenced => "fenced",
            TruncationOutcome::UnknownLeaderEpoch => "unknown_leader_epoch",
            TruncationOutcome::Discard => "discard",
        }
    }
    #[getter]
    fn offset(&self) -> Option<u64> {
        match self.0 {
            TruncationOutcome::Truncate(o) | TruncationOutcome::TruncateAndRetry(o) => Some(o.0),
            _ => None,
        }
    }
    #[staticmethod]
    fn truncate(offset: Int) -> PyResult<Self> {
        Ok(Self(TruncationOutcome::Truncate(args::offset(offset, "offset")?)))
    }
    #[staticmethod]
    fn truncate_and_retry(offset: Int) -> PyResult<Self> {
        Ok(Self(TruncationOutcome::TruncateAndRetry(args::offset(offset, "offset")?)))
    }
    #[staticmethod]
    fn fenced() -> Self {
        Self(TruncationOutcome::Fenced)
    }
    #[staticmethod]
    fn unknown_leader_epoch() -> Self {
        Self(TruncationOutcome::UnknownLeaderEpoch)
    }
    #[staticmethod]
    fn discard() -> Self {
        Self(TruncationOutcome::Discard)
    }
    fn __repr__(&self) -> String {
        match self.offset() {
            Some(o) => format!("TruncationOutcome.{}({o})", self.kind()),
            None => format!("TruncationOutcome.{}()", self.kind()),
        }
    }
}

#[pyclass(frozen, eq, hash, name = "FetchCheck", module = "epochlab._core")]
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct PyFetchCheck(FetchCheck);

#[pymethods]
impl PyFetchCheck {
    #[getter]
    fn kind(&self) -> &'static str {
        match self.0 {
            FetchCheck::Read => "read",
            FetchCheck::Diverging { .. } => "diverging",
            FetchCheck::OffsetOutOfRange => "offset_out_of_range",
        }
    }
    #[getter]
    fn diverging_epoch(&self) -> Option<(u32, u64)> {
        match self.0 {
            FetchCheck::Diverging { epoch, end_offset } => Some((epoch.0, end_offset.0)),
            _ => None,
        }
    }
    #[staticmethod]
    fn read() -> Self {
        Self(FetchCheck::Read)
    }
    #[staticmethod]
    fn diverging(epoch: Int, end_offset: Int) -> PyResult<Self> {
        Ok(Self(FetchCheck::Diverging { epoch: args::epoch(epoch, "epoch")?, end_offset: args::offset(end_offset, "end_offset")? }))
    }
    #[staticmethod]
    fn offset_out_of_range() -> Self {
        Self(FetchCheck::OffsetOutOfRange)
    }
    fn __repr__(&self) -> String {
        match self.diverging_epoch() {
            Some((e, o)) => format!("FetchCheck.diverging({e}, {o})"),
            None => format!("FetchCheck.{}()", self.kind()),
        }
    }
}

fn answer(a: Option<(Int, Int)>) -> PyResult<Option<(LeaderEpoch, Offset)>> {
    a.map(|(e, o)| Ok((args::epoch(e, "leader_answer")?, args::offset(o, "leader_answer")?))).transpose()
}

fn leo_hw(leo: Int, hw: Int) -> PyResult<(Offset, Offset)> {
    Ok((args::offset(leo, "log_end_offset")?, args::offset(hw, "high_watermark")?))
}

#[pyfunction]
fn truncate_to_high_watermark(high_watermark: Int, log_end_offset: Int) -> PyResult<PyTruncationOutcome> {
    let (leo, hw) = leo_hw(log_end_offset, high_watermark)?;
    core::truncate_to_high_watermark(hw, leo).py().map(PyTruncationOutcome)
}

#[pyfunction]
fn kip101_truncation(leader_end_offset: Option<Int>, log_end_offset: Int, high_watermark: Int) -> PyResult<PyTruncationOutcome> {
    let off = args::opt_offset(leader_end_offset, "leader_end_offset")?;
    let (leo, hw) = leo_hw(log_end_offset, high_watermark)?;
    core::kip101_truncation(off, leo, hw).py().map(PyTruncationOutcome)
}

#[pyfunction]
fn kip279_truncation(
    leader_answer: Option<(Int, Int)>,
    follower: &PyLeaderEpochCache,
    log_end_offset: Int,
    high_watermark: Int,
) -> PyResult<PyTruncationOutcome> {
    let a = answer(leader_answer)?;
    let (leo, hw) = leo_hw(log_end_offset, high_watermark)?;
    core::kip279_truncation(a, &lock(&follower.inner), leo, hw).py().map(PyTruncationOutcome)
}

#[pyfunction]
#[pyo3(signature = (leader_answer, follower, log_end_offset, high_watermark, *, request_epoch, current_epoch, error=None))]
#[allow(clippy::too_many_arguments)]
fn kip320_truncation(
    leader_answer: Option<(Int, Int)>,
    follower: &PyLeaderEpochCache,
    log_end_offset: Int,
    high_watermark: Int,
    request_epoch: Int,
    current_epoch: Int,
    error: Option<&str>,
) -> PyResult<PyTruncationOutcome> {
    let a = answer(leader_answer)?;
    let (leo, hw) = leo_hw(log_end_offset, high_watermark)?;
    let req = args::epoch(request_epoch, "request_epoch")?;
    let cur = args::epoch(current_epoch, "current_epoch")?;
    let err = match error {
        None => None,
        Some("fenced_leader_epoch") => Some(LeaderAnswerError::FencedLeaderEpoch),
        Some("unknown_leader_epoch") => Some(LeaderAnswerError::UnknownLeaderEpoch),
        Some(other) => {
            return Err(ArgumentError::InvalidText {
                argument: "error",
                value: other.to_owned(),
                reason: format!("unknown answer code {other:?}; expected None, \"fenced_leader_epoch\" or \"unknown_leader_epoch\""),
            })
            .py()
        }
    };
    core::kip320_truncation(a, &lock(&follower.inner), leo, hw, req, cur, err).py().map(PyTruncationOutcome)
}

#[pyfunction]
fn diverging_epoch_truncation(
    diverging_epoch: (Int, Int),
    follower: &PyLeaderEpochCache,
    log_end_offset: Int,
    high_watermark: Int,
) -> PyResult<PyTruncationOutcome> {
    let d = (args::epoch(diverging_epoch.0, "diverging_epoch")?, args::offset(diverging_epoch.1, "diverging_epoch")?);
    let (leo, hw) = leo_hw(log_end_offset, high_watermark)?;
    core::diverging_epoch_truncation(d, &lock(&follower.inner), leo, hw).py().map(PyTruncationOutcome)
}

#[pyfunction]
fn leader_fetch_check(
    leader: &PyLeaderEpochCache,
    leader_log_end_offset: Int,
    leader_log_start_offset: Int,
    fetch_offset: Int,
    last_fetched_epoch: Int,
) -> PyResult<PyFetchCheck> {
    let leo = args::offset(leader_log_end_offset, "leader_log_end_offset")?;
    let start = args::offset(leader_log_start_offset, "leader_log_start_offset")?;
    let fetch = args::offset(fetch_offset, "fetch_offset")?;
    let last = args::epoch(last_fetched_epoch, "last_fetched_epoch")?;
    Ok(PyFetchCheck(core::leader_fetch_check(&lock(&leader.inner), leo, start, fetch, last)))
}

#[pyfunction]
fn check_current_leader_epoch(request_epoch: Option<Int>, current_epoch: Int) -> PyResult<()> {
    let r = args::opt_epoch(request_epoch, "request_epoch")?;
    let c = args::epoch(current_epoch, "current_epoch")?;
    core::check_current_leader_epoch(r, c).py()
}

/// Runs `f` on both logs, locking once when they are the same object and otherwise in one
/// global order (by address), so two threads comparing the same logs in opposite orders with
/// the GIL released cannot deadlock.
pub(crate) fn with_two<T>(a: &PyReplicaLog, b: &PyReplicaLog, f: impl Fn(&ReplicaLog, &ReplicaLog) -> T) -> T {
    if std::ptr::eq(a, b) {
        let g = lock(&a.inner);
        return f(&g, &g);
    }
    if (a as *const PyReplicaLog) < (b as *const PyReplicaLog) {
        let ga = lock(&a.inner);
        let gb = lock(&b.inner);
        f(&ga, &gb)
    } else {
        let gb = lock(&b.inner);
        let ga = lock(&a.inner);
        f(&ga, &gb)
    }
}

#[pyfunction]
fn divergence_point(a: &PyReplicaLog, b: &PyReplicaLog) -> Option<u64> {
    with_two(a, b, core::divergence_point).map(|o| o.0)
}

#[pyfunction]
fn first_mismatch(py: Python<'_>, a: &PyReplicaLog, b: &PyReplicaLog) -> Option<u64> {
    py.detach(|| with_two(a, b, invariants::first_mismatch)).map(|o| o.0)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTruncationOutcome>()?;
    m.add_class::<PyFetchCheck>()?;
    m.add_function(wrap_pyfunction!(truncate_to_high_watermark, m)?)?;
    m.add_function(wrap_pyfunction!(kip101_truncation, m)?)?;
    m.add_function(wrap_pyfunction!(kip279_truncation, m)?)?;
    m.add_function(wrap_pyfunction!(kip320_truncation, m)?)?;
    m.add_function(wrap_pyfunction!(diverging_epoch_truncation, m)?)?;
    m.add_function(wrap_pyfunction!(leader_fetch_check, m)?)?;
    m.add_function(wrap_pyfunction!(check_current_leader_epoch, m)?)?;
    m.add_function(wrap_pyfunction!(divergence_point, m)?)?;
    m.add_function(wrap_pyfunction!(first_mismatch, m)?)?;
    Ok(())
}
