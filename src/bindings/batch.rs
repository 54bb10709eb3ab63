//! `RecordBatch` and `LogAppendInfo`: frozen values, hashable, compared by content.

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::args::{self, Int};
use super::errors::IntoPyResult;
use crate::log::{LogAppendInfo, RecordBatch, NO_TIMESTAMP};

#[pyclass(frozen, eq, hash, name = "RecordBatch", module = "epochlab._core")]
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct PyRecordBatch(pub(crate) RecordBatch);

#[pymethods]
impl PyRecordBatch {
    #[new]
    #[pyo3(signature = (base_offset, partition_leader_epoch, records, *, producer_id=None, producer_epoch=None, base_sequence=None, is_transactional=false, is_control=false, max_timestamp=Int::Fits(-1)))]
    #[pyo3(text_signature = "(base_offset, partition_leader_epoch, records, *, producer_id=None, producer_epoch=None, base_sequence=None, is_transactional=False, is_control=False, max_timestamp=-1)")]
    #[allow(clippy::too_many_arguments)]
    fn new(
        base_offset: Int,
        partition_leader_epoch: Int,
        records: &Bound<'_, PyAny>,
        producer_id: Option<Int>,
        producer_epoch: Option<Int>,
        base_sequence: Option<Int>,
        is_transactional: bool,
        is_control: bool,
        max_timestamp: Int,
    ) -> PyResult<Self> {
        let base = args::offset(base_offset, "base_offset")?;
        let epoch = args::epoch(partition_leader_epoch, "partition_leader_epoch")?;
        let values = args::records(records, "records")?;
        let producer = args::producer_fields(producer_id, producer_epoch, base_sequence)?;
        let timestamp = args::timestamp(max_timestamp, "max_timestamp")?;
        RecordBatch::new(base, epoch, values, producer, is_transactional, is_control)
            .py()
            .map(|b| Self(b.with_max_timestamp(timestamp)))
    }

    /// The largest record timestamp (the leader's append time), -1 if none.
    #[getter]
    fn max_timestamp(&self) -> i64 {
        self.0.max_timestamp()
    }

    #[getter]
    fn base_offset(&self) -> u64 {
        self.0.base_offset().0
    }
    #[getter]
    fn last_offset(&self) -> u64 {
        self.0.last_offset().0
    }
    #[getter]
    fn partition_leader_epoch(&self) -> u32 {
        self.0.partition_leader_epoch().0
    }
    #[getter]
    fn producer_id(&self) -> Option<u64> {
        self.0.producer().map(|p| p.producer_id.0)
    }
    #[getter]
    fn producer_epoch(&self) -> Option<u16> {
        self.0.producer().map(|p| p.producer_epoch.0)
    }
    #[getter]
    fn base_sequence(&self) -> Option<u32> {
        self.0.producer().map(|p| p.base_sequence.0)
    }
    #[getter]
    fn last_sequence(&self) -> Option<u32> {
        self.0.last_sequence().map(|s| s.0)
    }
    #[getter]
    fn is_transactional(&self) -> bool {
        self.0.is_transactional()
    }
    #[getter]
    fn is_control(&self) -> bool {
        self.0.is_control()
    }
    #[getter]
    fn records<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.0.records())
    }
    #[getter]
    fn control_type(&self) -> Option<&'static str> {
        self.0.marker().map(|(c, _)| match c {
            crate::txn::ControlType::Abort => "abort",
            crate::txn::ControlType::Commit => "commit",
        })
    }
    #[getter]
    fn coordinator_epoch(&self) -> Option<u32> {
        self.0.marker().map(|(_, e)| e)
    }
    #[getter]
    fn record_count(&self) -> usize {
        self.0.record_count()
    }
    fn with_base_offset(&self, base_offset: Int) -> PyResult<Self> {
        self.0.with_base_offset(args::offset(base_offset, "base_offset")?).py().map(Self)
    }
    fn __len__(&self) -> usize {
        self.0.record_count()
    }
    fn __repr__(&self) -> String {
        let b = &self.0;
        let mut s = format!(
            "RecordBatch(base_offset={}, partition_leader_epoch={}, records={:?}",
            b.base_offset(), b.partition_leader_epoch(), b.records()
        );
        if let Some(p) = b.producer() {
            s.push_str(&format!(
                ", producer_id={}, producer_epoch={}, base_sequence={}",
                p.producer_id, p.producer_epoch, p.base_sequence
            ));
        }
        if b.is_transactional() {
            s.push_str(", is_transactional=True");
        }
        if b.is_control() {
            s.push_str(", is_control=True");
        }
        if b.max_timestamp() != NO_TIMESTAMP {
            s.push_str(&format!(", max_timestamp={}", b.max_timestamp()));
        }
        s.push(')');
        s
    }
}

#[pyclass(frozen, eq, hash, name = "LogAppendInfo", module = "epochlab._core")]
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct PyLogAppendInfo(pub(crate) LogAppendInfo);

#[pymethods]
impl PyLogAppendInfo {
    #[getter]
    fn base_offset(&self) -> u64 {
        self.0.base_offset.0
    }
    #[getter]
    fn last_offset(&self) -> u64 {
        self.0.last_offset.0
    }
    #[getter]
    fn duplicate(&self) -> bool {
        self.0.duplicate
    }
    fn __repr__(&self) -> String {
        format!(
            "LogAppendInfo(base_offset={}, last_offset={}, duplicate={})",
            self.0.base_offset,
            self.0.last_offset,
            if self.0.duplicate { "True" } else { "False" }
        )
    }
}
