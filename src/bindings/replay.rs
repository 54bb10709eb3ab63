//! `Replayer`, `generate_trace` and the trace vocabulary: the bulk replay path.
//!
//! A replay call takes one Arrow record batch, maps its buffers onto the core's
//! [`TraceColumns`] without copying ([`super::arrow`]), releases the GIL and applies the rows.
//! The class is `frozen` and keeps the core replayer in a `Mutex`: a call holds it for its
//! whole chunk, so two threads replaying into one object serialise instead of interleaving.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use super::args::{self, lock, Int, Seq};
use super::arrow::ImportedBatch;
use super::errors::{to_py_err, IntoPyResult};
use super::log::PyReplicaLog;
use crate::error::ArgumentError;
use crate::replay::generate::{generate, GenerateOptions};
use crate::replay::{Collect, EventKind, Invariant, Progress, ReplayOptions, Replayer, Violation};

/// `"log-matching"`, `"Inv-LogMatching"`, `"log_matching"` all name Inv-LogMatching.
fn invariant_by_name(name: &str) -> Option<Invariant> {
    let squash = |s: &str| {
        let s: String = s.chars().filter(char::is_ascii_alphanumeric).collect::<String>().to_ascii_lowercase();
        s.strip_prefix("inv").map(str::to_string).unwrap_or(s)
    };
    let key = squash(name);
    Invariant::ALL.into_iter().find(|i| squash(i.name()) == key)
}

fn kind_by_name(name: &str) -> Option<EventKind> {
    EventKind::ALL.into_iter().find(|k| k.name() == name)
}

fn invalid_text(argument: &'static str, value: &str, reason: String) -> PyErr {
    to_py_err(ArgumentError::InvalidText { argument, value: value.to_string(), reason })
}

fn violation_dict<'py>(py: Python<'py>, v: &Violation) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("invariant", v.invariant.name())?;
    d.set_item("verdict", if v.allowed.is_some() { "allowed-by-configuration" } else { "protocol-violation" })?;
    d.set_item("reason", &v.allowed)?;
    d.set_item("row", v.row)?;
    d.set_item("event", v.event)?;
    d.set_item("time_ms", v.time_ms)?;
    d.set_item("kind", v.kind.name())?;
    d.set_item("partition", v.partition)?;
    d.set_item("broker", v.broker)?;
    d.set_item("offset", v.offset)?;
    d.set_item("epoch", v.epoch)?;
    d.set_item("message", &v.message)?;
    let records = PyList::empty(py);
    for r in &v.records {
        let rd = PyDict::new(py);
        rd.set_item("broker", r.broker)?;
        rd.set_item("offset", r.offset)?;
        rd.set_item("value", r.value)?;
        rd.set_item("epoch", r.epoch)?;
        records.append(rd)?;
    }
    d.set_item("records", records)?;
    Ok(d)
}

#[pyclass(frozen, name = "Replayer", module = "epochlab._core")]
pub(crate) struct PyReplayer {
    inner: Mutex<Replayer>,
}

#[pymethods]
impl PyReplayer {
    #[new]
    #[pyo3(signature = (*, checks=None, collect="first", min_insync_replicas=Int::Fits(1), kip101_epoch_cache=false, max_violations=Int::Fits(10000), eligible_leader_replicas=false, wrapper_batches=false))]
    #[pyo3(text_signature = "(*, checks=None, collect='first', min_insync_replicas=1, kip101_epoch_cache=False, max_violations=10000, eligible_leader_replicas=False, wrapper_batches=False)")]
    #[allow(clippy::too_many_arguments)]
    fn new(checks: Option<Seq<String>>, collect: &str, min_insync_replicas: Int, kip101_epoch_cache: bool, max_violations: Int, eligible_leader_replicas: bool, wrapper_batches: bool) -> PyResult<Self> {
        let checks = checks.map(|s| s.0);
        let mut opts = ReplayOptions { kip101_epoch_cache, eligible_leader_replicas, wrapper_batches, ..ReplayOptions::default() };
        if let Some(names) = checks {
            let mut set = Vec::new();
            for n in &names {
                let inv = invariant_by_name(n).ok_or_else(|| {
                    let known: Vec<_> = Invariant::ALL.iter().map(|i| i.name()).collect();
                    invalid_text("checks", n, format!("unknown invariant; expected one of {}", known.join(", ")))
                })?;
                set.push(inv);
            }
            opts.checks = ReplayOptions::check_set(&set);
        }
        opts.collect = match collect {
            "first" => Collect::FirstPerInvariant,
            "all" => Collect::All,
            "stop" => Collect::Stop,
            other => return Err(invalid_text("collect", other, "expected 'first', 'all' or 'stop'".into())),
        };
        opts.min_insync_replicas = args::count(min_insync_replicas, "min_insync_replicas")?;
        opts.max_violations = args::count(max_violations, "max_violations")? as usize;
        Ok(Self { inner: Mutex::new(Replayer::new(opts)) })
    }

    /// Applies rows `[start, stop)` of `batch` (trace rows `first_row + start ...`). Returns
    /// `("done", stop)`, or `("paused", i)` / `("stopped", i)` after row `i` of the batch.
    #[pyo3(signature = (batch, first_row, *, start=0, stop=None, pause_kinds=None))]
    fn replay_batch(
        &self,
        py: Python<'_>,
        batch: &Bound<'_, PyAny>,
        first_row: Int,
        start: usize,
        stop: Option<usize>,
        pause_kinds: Option<Seq<String>>,
    ) -> PyResult<(&'static str, usize)> {
        let first_row = args::offset(first_row, "first_row")?.0;
        let mut mask = 0u32;
        for k in pause_kinds.map(|s| s.0).unwrap_or_default().iter() {
            let kind = kind_by_name(k).ok_or_else(|| invalid_text("pause_kinds", k, "unknown event kind".into()))?;
            mask |= 1 << kind as u32;
        }
        let imported = ImportedBatch::import(batch)?;
        let cols = imported.columns(first_row).py()?;
        let stop = stop.unwrap_or(cols.len).min(cols.len);
        let start = start.min(stop);
        // Bulk work: the buffers stay alive in `imported` (held here) while the GIL is free.
        let progress = py.detach(|| lock(&self.inner).replay_pausing(&cols, first_row, start..stop, mask)).py()?;
        Ok(match progress {
            Progress::Done => ("done", stop),
            Progress::Paused(i) => ("paused", i),
            Progress::Stopped(i) => ("stopped", i),
        })
    }

    /// Rows applied so far.
    #[getter]
    fn rows(&self) -> u64 {
        lock(&self.inner).rows()
    }
    #[getter]
    fn violation_count(&self) -> u64 {
        lock(&self.inner).violation_count()
    }
    fn violations<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        lock(&self.inner).violations().iter().map(|v| violation_dict(py, v)).collect()
    }

    /// Every replica's final state: partition, broker, alive, role, epoch and its log's
    /// offsets, counts and epoch entries.
    fn replicas<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let r = lock(&self.inner);
        let mut out = Vec::new();
        for v in r.replicas() {
            let d = PyDict::new(py);
            d.set_item("partition", v.partition)?;
            d.set_item("broker", v.broker)?;
            d.set_item("alive", v.alive)?;
            d.set_item("role", v.role)?;
            d.set_item("epoch", v.epoch)?;
            d.set_item("log_start_offset", v.log.log_start_offset().0)?;
            d.set_item("log_end_offset", v.log.log_end_offset().0)?;
            d.set_item("high_watermark", v.log.high_watermark().0)?;
            d.set_item("batch_count", v.log.batch_count())?;
            d.set_item("record_count", v.log.record_count())?;
            let entries: Vec<(u32, u64)> = v.log.epoch_cache().entries().iter().map(|e| (e.epoch.0, e.start_offset.0)).collect();
            d.set_item("epoch_entries", entries)?;
            out.push(d);
        }
        Ok(out)
    }

    /// A copy of one replica's log (`None` if the trace never mentioned it).
    fn log(&self, partition: Int, broker: Int) -> PyResult<Option<PyReplicaLog>> {
        let p = args::count(partition, "partition")?;
        let b = args::count(broker, "broker")?;
        Ok(lock(&self.inner).log(p, b).map(|l| PyReplicaLog { inner: Mutex::new(l.clone()) }))
    }

    fn true_high_watermark(&self, partition: Int) -> PyResult<Option<u64>> {
        let p = args::count(partition, "partition")?;
        Ok(lock(&self.inner).true_high_watermark(p))
    }

    /// Heap bytes held by every replica log (batch columns and records).
    fn log_heap_bytes(&self) -> usize {
        lock(&self.inner).log_heap_bytes()
    }
}

fn bytes_of<'py, T: Copy>(py: Python<'py>, v: &[T]) -> Bound<'py, PyBytes> {
    // SAFETY: T is a plain integer type (u8/u32/u64/i32/i64): every byte is initialised.
    let raw = unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) };
    PyBytes::new(py, raw)
}

/// Generates a synthetic trace (`epochlab.trace.generate` builds the Arrow table from it):
/// a dict of little-endian column buffers as `bytes`, plus `"len"`. Private: its arguments
/// can ask for any amount of memory, so callers go through `epochlab.trace.generate`.
#[pyfunction(name = "_generate_trace")]
#[pyo3(signature = (batches, *, leader_changes=Int::Fits(0), replicas=Int::Fits(3), partitions=Int::Fits(1), seed=Int::Fits(0), max_records=Int::Fits(3), crash_every=None))]
#[pyo3(text_signature = "(batches, *, leader_changes=0, replicas=3, partitions=1, seed=0, max_records=3, crash_every=None)")]
#[allow(clippy::too_many_arguments)]
fn generate_trace<'py>(
    py: Python<'py>,
    batches: Int,
    leader_changes: Int,
    replicas: Int,
    partitions: Int,
    seed: Int,
    max_records: Int,
    crash_every: Option<Int>,
) -> PyResult<Bound<'py, PyDict>> {
    let opts = GenerateOptions {
        batches: args::offset(batches, "batches")?.0,
        leader_changes: args::offset(leader_changes, "leader_changes")?.0,
        replicas: args::count(replicas, "replicas")?,
        partitions: args::count(partitions, "partitions")?,
        seed: args::offset(seed, "seed")?.0,
        max_records: args::count(max_records, "max_records")?,
        crash_every: crash_every.map(|c| args::offset(c, "crash_every")).transpose()?.map(|o| o.0.max(1)),
    };
    let b = py.detach(|| generate(&opts)).py()?;
    let d = PyDict::new(py);
    d.set_item("len", b.len)?;
    d.set_item("event", bytes_of(py, &b.event))?;
    d.set_item("time_ms", bytes_of(py, &b.time_ms))?;
    d.set_item("partition", bytes_of(py, &b.partition))?;
    d.set_item("kind", bytes_of(py, &b.kind))?;
    d.set_item("broker", (bytes_of(py, &b.broker), bytes_of(py, &b.broker_valid)))?;
    d.set_item("epoch", (bytes_of(py, &b.epoch), bytes_of(py, &b.epoch_valid)))?;
    d.set_item("offset", (bytes_of(py, &b.offset), bytes_of(py, &b.offset_valid)))?;
    d.set_item("leader", (bytes_of(py, &b.leader), bytes_of(py, &b.leader_valid)))?;
    d.set_item("record_count", bytes_of(py, &b.record_count))?;
    d.set_item("flags", bytes_of(py, &b.flags))?;
    d.set_item("values", (bytes_of(py, &b.values_offsets), bytes_of(py, &b.values), bytes_of(py, &b.values_valid)))?;
    Ok(d)
}

/// Checks that `obj` is an Arrow record batch the replay can read; returns its row count.
/// (For tests of the C data interface import and for early, typed input errors.)
#[pyfunction]
#[pyo3(signature = (batch, first_row=Int::Fits(0)))]
#[pyo3(text_signature = "(batch, first_row=0)")]
fn check_trace_batch(batch: &Bound<'_, PyAny>, first_row: Int) -> PyResult<usize> {
    let first_row = args::offset(first_row, "first_row")?.0;
    let imported = ImportedBatch::import(batch)?;
    let cols = imported.columns(first_row).py()?;
    Ok(cols.len)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyReplayer>()?;
    m.add_function(wrap_pyfunction!(generate_trace, m)?)?;
    m.add_function(wrap_pyfunction!(check_trace_batch, m)?)?;
    // The vocabulary, for the Python side's consistency test (`tests/test_trace_format.py`).
    m.add("_TRACE_KINDS", EventKind::ALL.iter().map(|k| k.name()).collect::<Vec<_>>())?;
    m.add("_TRACE_INVARIANTS", Invariant::ALL.iter().map(|i| i.name()).collect::<Vec<_>>())?;
    Ok(())
}
