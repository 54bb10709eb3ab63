//! `LeaderEpochCache`.

use std::sync::Mutex;

use pyo3::prelude::*;

use super::args::{self, lock, Int, Seq};
use super::errors::IntoPyResult;
use crate::epoch::{checkpoint, EpochEntry, LeaderEpochCache};
use crate::error::ArgumentError;

/// Entries as Python tuples.
pub(crate) fn entry_pairs(c: &LeaderEpochCache) -> Vec<(u32, u64)> {
    c.entries().iter().map(|e| (e.epoch.0, e.start_offset.0)).collect()
}

#[pyclass(frozen, name = "LeaderEpochCache", module = "epochlab._core")]
pub(crate) struct PyLeaderEpochCache {
    pub(crate) inner: Mutex<LeaderEpochCache>,
}

impl PyLeaderEpochCache {
    pub(crate) fn wrap(c: LeaderEpochCache) -> Self {
        Self { inner: Mutex::new(c) }
    }
    pub(crate) fn snapshot(&self) -> LeaderEpochCache {
        lock(&self.inner).clone()
    }
}

#[pymethods]
impl PyLeaderEpochCache {
    #[new]
    #[pyo3(signature = (entries=None))]
    fn new(entries: Option<Seq<(Int, Int)>>) -> PyResult<Self> {
        let entries = entries.map(|s| s.0).unwrap_or_default();
        let mut parsed = Vec::with_capacity(entries.len());
        for (e, s) in entries {
            parsed.push(EpochEntry { epoch: args::epoch(e, "entries")?, start_offset: args::offset(s, "entries")? });
        }
        LeaderEpochCache::from_entries(parsed)
            .map_err(|i| ArgumentError::Invalid {
                argument: "entries",
                value: i as i128,
                reason: format!("entry {i} does not increase on its predecessor in both epoch and start offset"),
            })
            .py()
            .map(Self::wrap)
    }

    fn assign(&self, epoch: Int, start_offset: Int) -> PyResult<bool> {
        let (e, s) = (args::epoch(epoch, "epoch")?, args::offset(start_offset, "start_offset")?);
        Ok(lock(&self.inner).assign(e, s))
    }
    fn assign_kip101(&self, epoch: Int, start_offset: Int) -> PyResult<bool> {
        let (e, s) = (args::epoch(epoch, "epoch")?, args::offset(start_offset, "start_offset")?);
        Ok(lock(&self.inner).assign_kip101(e, s))
    }
    fn end_offset_for(&self, requested_epoch: Option<Int>, log_end_offset: Int) -> PyResult<Option<(u32, u64)>> {
        let r = args::requested_epoch(requested_epoch, "requested_epoch")?;
        let leo = args::offset(log_end_offset, "log_end_offset")?;
        Ok(lock(&self.inner).end_offset_for(r, leo).map(|(e, o)| (e.0, o.0)))
    }
    fn end_offset_for_kip279(&self, requested_epoch: Option<Int>, log_end_offset: Int) -> PyResult<Option<(u32, u64)>> {
        let r = args::requested_epoch(requested_epoch, "requested_epoch")?;
        let leo = args::offset(log_end_offset, "log_end_offset")?;
        Ok(lock(&self.inner).end_offset_for_kip279(r, leo).map(|(e, o)| (e.0, o.0)))
    }
    fn end_offset_for_kip101(&self, requested_epoch: Option<Int>, log_end_offset: Int) -> PyResult<Option<u64>> {
        let r = args::requested_epoch(requested_epoch, "requested_epoch")?;
        let leo = args::offset(log_end_offset, "log_end_offset")?;
        Ok(lock(&self.inner).end_offset_for_kip101(r, leo).map(|o| o.0))
    }
    fn truncate_from_end(&self, end_offset: Int) -> PyResult<()> {
        let o = args::offset(end_offset, "end_offset")?;
        lock(&self.inner).truncate_from_end(o);
        Ok(())
    }
    fn truncate_from_start(&self, start_offset: Int) -> PyResult<()> {
        let o = args::offset(start_offset, "start_offset")?;
        lock(&self.inner).truncate_from_start(o);
        Ok(())
    }
    fn epoch_for_offset(&self, offset: Int) -> PyResult<Option<u32>> {
        let o = args::offset(offset, "offset")?;
        Ok(lock(&self.inner).epoch_for_offset(o).map(|e| e.0))
    }
    #[getter]
    fn latest_epoch(&self) -> Option<u32> {
        lock(&self.inner).latest_epoch().map(|e| e.0)
    }
    #[getter]
    fn earliest_epoch(&self) -> Option<u32> {
        lock(&self.inner).earliest_epoch().map(|e| e.0)
    }
    fn entries(&self) -> Vec<(u32, u64)> {
        entry_pairs(&lock(&self.inner))
    }
    fn clear(&self) {
        lock(&self.inner).clear();
    }
    fn copy(&self) -> Self {
        Self::wrap(self.snapshot())
    }
    fn to_checkpoint_text(&self) -> String {
        checkpoint::format(&lock(&self.inner))
    }
    #[staticmethod]
    #[pyo3(signature = (text, path=None))]
    fn from_checkpoint_text(text: &str, path: Option<String>) -> PyResult<Self> {
        checkpoint::parse(text, path.as_deref()).py().map(Self::wrap)
    }
    fn write_checkpoint(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        let snapshot = self.snapshot();
        py.detach(|| checkpoint::write(&snapshot, &path)).py()
    }
    #[staticmethod]
    fn read_checkpoint(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Self> {
        py.detach(|| checkpoint::read(&path)).py().map(Self::wrap)
    }
    fn __len__(&self) -> usize {
        lock(&self.inner).len()
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        match other.cast::<PyLeaderEpochCache>() {
            Ok(o) if std::ptr::eq(self, o.get()) => true,
            Ok(o) => *lock(&self.inner) == o.get().snapshot(),
            Err(_) => false,
        }
    }
    fn __repr__(&self) -> String {
        format!("LeaderEpochCache({:?})", entry_pairs(&lock(&self.inner)))
    }
}
