//! `ProducerStateManager`.

use std::sync::Mutex;

use pyo3::prelude::*;

use super::args::{self, lock, Int};
use super::batch::PyRecordBatch;
use super::errors::IntoPyResult;
use crate::producer_state::{AppendCheck, ProducerStateEntry, ProducerStateManager};

type BatchTuple = (u32, u32, u64, u64);
type EntryTuple = (u16, Vec<BatchTuple>);
type SnapshotRow = (u64, u16, Vec<BatchTuple>);

fn entry_tuple(e: &ProducerStateEntry) -> EntryTuple {
    let batches = e.batches.iter().map(|m| (m.first_seq.0, m.last_seq.0, m.base_offset.0, m.last_offset.0)).collect();
    (e.producer_epoch.0, batches)
}

#[pyclass(frozen, name = "ProducerStateManager", module = "epochlab._core")]
pub(crate) struct PyProducerStateManager {
    inner: Mutex<ProducerStateManager>,
}

impl PyProducerStateManager {
    pub(crate) fn wrap(s: ProducerStateManager) -> Self {
        Self { inner: Mutex::new(s) }
    }
}

#[pymethods]
impl PyProducerStateManager {
    #[new]
    fn new() -> Self {
        Self::wrap(ProducerStateManager::new())
    }
    fn check_leader_append(&self, batch: &PyRecordBatch) -> PyResult<Option<(u64, u64)>> {
        match lock(&self.inner).check_leader_append(&batch.0).py()? {
            AppendCheck::Fresh => Ok(None),
            AppendCheck::Duplicate { base_offset, last_offset } => Ok(Some((base_offset.0, last_offset.0))),
        }
    }
    fn update(&self, batch: &PyRecordBatch) {
        lock(&self.inner).update(&batch.0);
    }
    fn entry(&self, producer_id: Int) -> PyResult<Option<EntryTuple>> {
        let pid = args::producer_id(producer_id, "producer_id")?;
        Ok(lock(&self.inner).entry(pid).map(entry_tuple))
    }
    fn coordinator_epoch(&self, producer_id: Int) -> PyResult<Option<u32>> {
        let pid = args::producer_id(producer_id, "producer_id")?;
        Ok(lock(&self.inner).entry(pid).and_then(|e| e.coordinator_epoch))
    }
    fn producer_ids(&self) -> Vec<u64> {
        lock(&self.inner).entries().map(|(p, _)| p.0).collect()
    }
    fn snapshot(&self) -> Vec<SnapshotRow> {
        lock(&self.inner)
            .entries()
            .map(|(p, e)| {
                let (epoch, batches) = entry_tuple(e);
                (p.0, epoch, batches)
            })
            .collect()
    }
    fn clear(&self) {
        lock(&self.inner).clear();
    }
    fn copy(&self) -> Self {
        Self::wrap(lock(&self.inner).clone())
    }
    fn __len__(&self) -> usize {
        lock(&self.inner).len()
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        match other.cast::<PyProducerStateManager>() {
            Ok(o) if std::ptr::eq(self, o.get()) => true,
            Ok(o) => {
                let theirs = lock(&o.get().inner).clone();
                *lock(&self.inner) == theirs
            }
            Err(_) => false,
        }
    }
    fn __repr__(&self) -> String {
        format!("ProducerStateManager({:?})", self.snapshot())
    }
}

