//! `ReplicaLog`.

use std::sync::Mutex;

use pyo3::prelude::*;

use super::args::{self, lock, Int, Seq};
use super::batch::{PyLogAppendInfo, PyRecordBatch};
use super::epoch_cache::{entry_pairs, PyLeaderEpochCache};
use super::errors::IntoPyResult;
use super::producer_state::PyProducerStateManager;
use crate::log::{RecordBatch, ReplicaLog};
use crate::txn::ControlType;

#[pyclass(frozen, name = "ReplicaLog", module = "epochlab._core")]
pub(crate) struct PyReplicaLog {
    pub(crate) inner: Mutex<ReplicaLog>,
}

#[pymethods]
impl PyReplicaLog {
    #[new]
    #[pyo3(signature = (log_start_offset=Int::Fits(0), *, kip101_epoch_cache=false, wrapper_batches=false))]
    #[pyo3(text_signature = "(log_start_offset=0, *, kip101_epoch_cache=False, wrapper_batches=False)")]
    fn new(log_start_offset: Int, kip101_epoch_cache: bool, wrapper_batches: bool) -> PyResult<Self> {
        let start = args::offset(log_start_offset, "log_start_offset")?;
        Ok(Self { inner: Mutex::new(ReplicaLog::new(start, kip101_epoch_cache).with_wrapper_batches(wrapper_batches)) })
    }

    #[getter]
    fn log_start_offset(&self) -> u64 {
        lock(&self.inner).log_start_offset().0
    }
    #[getter]
    fn log_end_offset(&self) -> u64 {
        lock(&self.inner).log_end_offset().0
    }
    #[getter]
    fn high_watermark(&self) -> u64 {
        lock(&self.inner).high_watermark().0
    }
    #[getter]
    fn recovery_point(&self) -> u64 {
        lock(&self.inner).recovery_point().0
    }
    /// `(log_end_offset, high_watermark, batch_count, log_start_offset)` in one call: what a
    /// state checker compares to tell whether the log changed.
    fn state_key(&self) -> (u64, u64, usize, u64) {
        let log = lock(&self.inner);
        (log.log_end_offset().0, log.high_watermark().0, log.batch_count(), log.log_start_offset().0)
    }
    #[getter]
    fn batch_count(&self) -> usize {
        lock(&self.inner).batch_count()
    }
    #[getter]
    fn record_count(&self) -> usize {
        lock(&self.inner).record_count()
    }
    #[getter]
    fn latest_epoch(&self) -> Option<u32> {
        lock(&self.inner).latest_epoch().map(|e| e.0)
    }
    #[getter]
    fn kip101_epoch_cache(&self) -> bool {
        lock(&self.inner).kip101_epoch_cache()
    }
    #[getter]
    fn wrapper_batches(&self) -> bool {
        lock(&self.inner).wrapper_batches()
    }

    #[pyo3(signature = (records, leader_epoch, *, producer_id=None, producer_epoch=None, base_sequence=None, is_transactional=false))]
    fn append_as_leader(
        &self,
        records: &Bound<'_, PyAny>,
        leader_epoch: Int,
        producer_id: Option<Int>,
        producer_epoch: Option<Int>,
        base_sequence: Option<Int>,
        is_transactional: bool,
    ) -> PyResult<PyLogAppendInfo> {
        let values = args::records(records, "records")?;
        let epoch = args::epoch(leader_epoch, "leader_epoch")?;
        let producer = args::producer_fields(producer_id, producer_epoch, base_sequence)?;
        lock(&self.inner).append_as_leader(values, epoch, producer, is_transactional).py().map(PyLogAppendInfo)
    }

    fn append_many_as_leader(
        &self,
        py: Python<'_>,
        leader_epoch: Int,
        batch_sizes: &Bound<'_, PyAny>,
        records: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        let epoch = args::epoch(leader_epoch, "leader_epoch")?;
        let sizes = args::counts(batch_sizes, "batch_sizes")?;
        let values = args::records(records, "records")?;
        // Bulk work: release the GIL once the arguments are extracted.
        py.detach(|| lock(&self.inner).append_many_as_leader(epoch, &sizes, &values)).py().map(|o| o.0)
    }

    #[pyo3(signature = (producer_id, producer_epoch, coordinator_epoch, commit, leader_epoch, transaction_version=None))]
    fn append_end_txn_marker(
        &self,
        producer_id: Int,
        producer_epoch: Int,
        coordinator_epoch: Int,
        commit: bool,
        leader_epoch: Int,
        transaction_version: Option<Int>,
    ) -> PyResult<PyLogAppendInfo> {
        let transaction_version = transaction_version.map_or(Ok(0), |v| args::transaction_version(v, "transaction_version"))?;
        let fields = args::producer_fields(Some(producer_id), Some(producer_epoch), Some(Int::Fits(0)))?
            .ok_or_else(|| pyo3::exceptions::PyTypeError::new_err("producer fields are required"))?;
        let coordinator_epoch = args::epoch(coordinator_epoch, "coordinator_epoch")?.0;
        let epoch = args::epoch(leader_epoch, "leader_epoch")?;
        let control = if commit { ControlType::Commit } else { ControlType::Abort };
        lock(&self.inner)
            .append_end_txn_marker(fields.producer_id, fields.producer_epoch, coordinator_epoch, control, epoch, transaction_version)
            .py()
            .map(PyLogAppendInfo)
    }

    #[getter]
    fn first_unstable_offset(&self) -> Option<u64> {
        lock(&self.inner).first_unstable_offset().map(|o| o.0)
    }
    #[getter]
    fn last_stable_offset(&self) -> u64 {
        lock(&self.inner).last_stable_offset().0
    }
    fn aborted_transactions(&self, from_offset: Int, upper_bound_offset: Int) -> PyResult<Vec<(u64, u64, u64, u64)>> {
        let from = args::offset(from_offset, "from_offset")?;
        let upper = args::offset(upper_bound_offset, "upper_bound_offset")?;
        Ok(lock(&self.inner)
            .aborted_transactions(from, upper)
            .into_iter()
            .map(|t| (t.producer_id.0, t.first_offset.0, t.last_offset.0, t.last_stable_offset.0))
            .collect())
    }
    fn ongoing_transactions(&self) -> Vec<(u64, u64)> {
        lock(&self.inner).txn_index().ongoing().map(|(o, p)| (o.0, p.0)).collect()
    }
    fn unreplicated_transactions(&self) -> Vec<(u64, u64, u64)> {
        let log = lock(&self.inner);
        log.txn_index().unreplicated(log.high_watermark()).into_iter().map(|(o, p, m)| (o.0, p.0, m.0)).collect()
    }

    fn append_as_follower(&self, batch: &PyRecordBatch) -> PyResult<()> {
        lock(&self.inner).append_as_follower(&batch.0).py()
    }

    fn append_batches_as_follower(&self, batches: Seq<PyRef<'_, PyRecordBatch>>) -> PyResult<u64> {
        let owned: Vec<RecordBatch> = batches.0.iter().map(|b| b.0.clone()).collect();
        lock(&self.inner).append_batches_as_follower(&owned).py().map(|o| o.0)
    }

    #[pyo3(signature = (from_offset, *, max_batches=None, max_offset=None))]
    fn read(&self, from_offset: Int, max_batches: Option<Int>, max_offset: Option<Int>) -> PyResult<Vec<PyRecordBatch>> {
        let from = args::offset(from_offset, "from_offset")?;
        let max_batches = max_batches.map(|n| args::count(n, "max_batches")).transpose()?;
        let max_offset = args::opt_offset(max_offset, "max_offset")?;
        let batches = lock(&self.inner).read(from, max_batches.map(|n| n as usize), max_offset).py()?;
        Ok(batches.into_iter().map(PyRecordBatch).collect())
    }

    fn batches(&self) -> Vec<PyRecordBatch> {
        lock(&self.inner).batches().into_iter().map(PyRecordBatch).collect()
    }
    fn batch_containing(&self, offset: Int) -> PyResult<Option<PyRecordBatch>> {
        let o = args::offset(offset, "offset")?;
        Ok(lock(&self.inner).batch_containing(o).map(PyRecordBatch))
    }
    /// The clock a leader's appends are stamped with (LogAppendTime), in ms; -1 for none.
    fn set_time(&self, now_ms: Int) -> PyResult<()> {
        let t = args::timestamp(now_ms, "now_ms")?;
        lock(&self.inner).set_time(t);
        Ok(())
    }
    /// ``(offset, timestamp)`` of the first record at or after the log start whose timestamp
    /// is at least ``timestamp``; ``None`` if there is none.
    fn offset_for_timestamp(&self, timestamp: Int) -> PyResult<Option<(u64, i64)>> {
        let t = args::offset(timestamp, "timestamp")?.0 as i64;
        Ok(lock(&self.inner).offset_for_timestamp(t).map(|(o, ts)| (o.0, ts)))
    }
    fn value_at(&self, offset: Int) -> PyResult<Option<u64>> {
        let o = args::offset(offset, "offset")?;
        Ok(lock(&self.inner).value_at(o))
    }
    fn holes(&self) -> Vec<(u64, u64)> {
        lock(&self.inner).holes().into_iter().map(|(a, b)| (a.0, b.0)).collect()
    }
    fn truncate_to(&self, target_offset: Int) -> PyResult<bool> {
        let t = args::offset(target_offset, "target_offset")?;
        Ok(lock(&self.inner).truncate_to(t))
    }
    fn truncate_fully_and_start_at(&self, new_offset: Int) -> PyResult<()> {
        let o = args::offset(new_offset, "new_offset")?;
        lock(&self.inner).truncate_fully_and_start_at(o);
        Ok(())
    }
    #[pyo3(signature = (up_to=None))]
    fn flush(&self, up_to: Option<Int>) -> PyResult<()> {
        let up_to = args::opt_offset(up_to, "up_to")?;
        lock(&self.inner).flush(up_to);
        Ok(())
    }
    fn drop_unflushed(&self) -> usize {
        lock(&self.inner).drop_unflushed()
    }
    fn update_high_watermark(&self, offset: Int) -> PyResult<u64> {
        let o = args::offset(offset, "offset")?;
        Ok(lock(&self.inner).update_high_watermark(o).0)
    }
    fn maybe_increment_high_watermark(&self, offset: Int) -> PyResult<bool> {
        let o = args::offset(offset, "offset")?;
        Ok(lock(&self.inner).maybe_increment_high_watermark(o))
    }
    fn assign_epoch(&self, epoch: Int, start_offset: Int) -> PyResult<bool> {
        let (e, s) = (args::epoch(epoch, "epoch")?, args::offset(start_offset, "start_offset")?);
        Ok(lock(&self.inner).assign_epoch(e, s))
    }
    fn end_offset_for_epoch(&self, requested_epoch: Option<Int>) -> PyResult<Option<(u32, u64)>> {
        let r = args::requested_epoch(requested_epoch, "requested_epoch")?;
        Ok(lock(&self.inner).end_offset_for_epoch(r).map(|(e, o)| (e.0, o.0)))
    }
    fn epoch_for_offset(&self, offset: Int) -> PyResult<Option<u32>> {
        let o = args::offset(offset, "offset")?;
        Ok(lock(&self.inner).epoch_for_offset(o).map(|e| e.0))
    }
    fn epoch_cache(&self) -> PyLeaderEpochCache {
        PyLeaderEpochCache::wrap(lock(&self.inner).epoch_cache().clone())
    }
    /// `([(epoch, base_offset)…], bad)`: the epoch of each batch that starts a new epoch, in
    /// log order, up to the first batch whose epoch is lower than the one before it; `bad`
    /// is that batch, or `None`. One call, no batch copied but the bad one.
    fn epoch_boundaries(&self) -> (Vec<(u32, u64)>, Option<PyRecordBatch>) {
        let log = lock(&self.inner);
        let (bounds, bad) = log.epoch_boundaries();
        (bounds.into_iter().map(|(e, o)| (e.0, o.0)).collect(), bad.map(|i| PyRecordBatch(log.batch(i))))
    }
    fn epoch_entries(&self) -> Vec<(u32, u64)> {
        entry_pairs(lock(&self.inner).epoch_cache())
    }
    fn producer_state(&self) -> PyProducerStateManager {
        PyProducerStateManager::wrap(lock(&self.inner).producer_state().clone())
    }
    fn rebuild_producer_state(&self) {
        lock(&self.inner).rebuild_producer_state();
    }
    fn take_producer_snapshot(&self) -> bool {
        lock(&self.inner).take_producer_snapshot()
    }
    fn producer_snapshot_offsets(&self) -> Vec<u64> {
        lock(&self.inner).producer_snapshot_offsets().into_iter().map(|o| o.0).collect()
    }
    fn reload(&self, clean_shutdown: bool) {
        lock(&self.inner).reload(clean_shutdown);
    }
    /// Starts recording every state change (see `take_journal`); behaviour is unchanged.
    fn enable_journal(&self) {
        lock(&self.inner).enable_journal();
    }
    #[getter]
    fn journal_enabled(&self) -> bool {
        lock(&self.inner).journal_enabled()
    }
    /// The entries recorded since the last call, column by column: `kind` (trace kind codes;
    /// 7 = `drop_unflushed`), `offset`, `epoch`, `record_count`, `flags`, `values` (the
    /// appends' records, concatenated), and for batches with producer fields `producer_index`
    /// (entry index), `producer_id`, `producer_epoch`, `base_sequence`.
    fn take_journal<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        let j = lock(&self.inner).take_journal();
        let d = pyo3::types::PyDict::new(py);
        d.set_item("kind", j.kind)?;
        d.set_item("offset", j.offset)?;
        d.set_item("epoch", j.epoch)?;
        d.set_item("record_count", j.record_count)?;
        d.set_item("flags", j.flags)?;
        d.set_item("values", j.values)?;
        d.set_item("producer_index", j.producers.iter().map(|(i, _)| *i).collect::<Vec<_>>())?;
        d.set_item("producer_id", j.producers.iter().map(|(_, p)| p.producer_id.0).collect::<Vec<_>>())?;
        d.set_item("producer_epoch", j.producers.iter().map(|(_, p)| p.producer_epoch.0).collect::<Vec<_>>())?;
        d.set_item("base_sequence", j.producers.iter().map(|(_, p)| p.base_sequence.0).collect::<Vec<_>>())?;
        Ok(d)
    }
    fn copy(&self) -> Self {
        Self { inner: Mutex::new(lock(&self.inner).clone()) }
    }
    fn __len__(&self) -> usize {
        lock(&self.inner).batch_count()
    }
    fn __repr__(&self) -> String {
        let l = lock(&self.inner);
        format!(
            "ReplicaLog(log_start_offset={}, log_end_offset={}, high_watermark={}, batches={}, epochs={:?})",
            l.log_start_offset(), l.log_end_offset(), l.high_watermark(), l.batch_count(), entry_pairs(l.epoch_cache())
        )
    }
}
