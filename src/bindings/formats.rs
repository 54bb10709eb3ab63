//! `epochlab._core.parse_*`: Kafka's on-disk formats (`crate::formats`) as plain Python
//! objects (dicts, lists, tuples, ints, bytes, str, None). Each function takes
//! `(data, file)`: any C-contiguous-able byte buffer (`bytes`, `bytearray`, `memoryview`),
//! copied once, then parsed with the GIL released; `file` is only echoed in errors.

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use super::errors::IntoPyResult;
use crate::error::FormatError;
use crate::formats::{self, BatchDump, ControlInfo, RecordDump, SegmentDump};

/// The bytes of a buffer-protocol object, or `KafkaFormatError` naming the type.
fn bytes_of(data: &Bound<'_, PyAny>, file: &str) -> PyResult<Vec<u8>> {
    let not_bytes = || FormatError::Malformed {
        file: file.to_string(),
        offset: 0,
        reason: format!(
            "expected bytes, bytearray or memoryview of bytes, got {}",
            data.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
        ),
    };
    let buffer = PyBuffer::<u8>::get(data).map_err(|_| not_bytes()).py()?;
    buffer.to_vec(data.py())
}

fn opt_bytes<'py>(py: Python<'py>, b: &Option<Vec<u8>>) -> Bound<'py, PyAny> {
    match b {
        Some(b) => PyBytes::new(py, b).into_any(),
        None => py.None().into_bound(py),
    }
}

macro_rules! dict {
    ($py:expr; $($k:literal => $v:expr),* $(,)?) => {{
        let d = PyDict::new($py);
        $(d.set_item($k, $v)?;)*
        d
    }};
}

fn record<'py>(py: Python<'py>, r: &RecordDump) -> PyResult<Bound<'py, PyDict>> {
    let headers = PyList::empty(py);
    for h in &r.headers {
        let key = match std::str::from_utf8(&h.key) {
            Ok(s) => s.into_pyobject(py)?.into_any(),
            Err(_) => PyBytes::new(py, &h.key).into_any(),
        };
        headers.append(PyList::new(py, [key, opt_bytes(py, &h.value)])?)?;
    }
    let out = dict!(py;
        "offset" => r.offset, "offset_delta" => r.offset_delta, "timestamp" => r.timestamp,
        "key" => opt_bytes(py, &r.key), "value" => opt_bytes(py, &r.value),
        "headers" => headers, "size" => r.size,
    );
    if let Some((crc, valid)) = r.legacy_crc {
        out.set_item("crc", crc)?;
        out.set_item("crc_valid", valid)?;
    }
    Ok(out)
}

fn control<'py>(py: Python<'py>, c: &Option<ControlInfo>) -> PyResult<Bound<'py, PyAny>> {
    Ok(match c {
        None => py.None().into_bound(py),
        Some(c) => dict!(py;
            "type" => c.kind.name(), "type_id" => c.type_id, "version" => c.version,
            "coordinator_epoch" => c.coordinator_epoch,
        )
        .into_any(),
    })
}

fn batch<'py>(py: Python<'py>, b: &BatchDump) -> PyResult<Bound<'py, PyDict>> {
    let records = PyList::empty(py);
    for r in &b.records {
        records.append(record(py, r)?)?;
    }
    Ok(dict!(py;
        "position" => b.position, "base_offset" => b.base_offset, "last_offset" => b.last_offset,
        "last_offset_delta" => b.last_offset_delta, "count" => b.count,
        "base_sequence" => b.base_sequence, "last_sequence" => b.last_sequence,
        "producer_id" => b.producer_id, "producer_epoch" => b.producer_epoch,
        "partition_leader_epoch" => b.partition_leader_epoch,
        "is_transactional" => b.is_transactional, "is_control" => b.is_control,
        "delete_horizon_ms" => b.delete_horizon_ms, "magic" => b.magic, "attributes" => b.attributes,
        "compression" => b.compression.name(), "timestamp_type" => b.timestamp_type.name(),
        "base_timestamp" => b.base_timestamp, "max_timestamp" => b.max_timestamp,
        "crc" => b.crc, "crc_valid" => b.crc_valid, "size" => b.size,
        "records" => records, "control" => control(py, &b.control)?,
    ))
}

fn error_dict<'py>(py: Python<'py>, e: &Option<FormatError>) -> PyResult<Bound<'py, PyAny>> {
    Ok(match e {
        None => py.None().into_bound(py),
        Some(FormatError::Malformed { file, offset, reason }) => {
            dict!(py; "file" => file, "offset" => offset, "reason" => reason).into_any()
        }
    })
}

/// A segment `.log` file: never raises for corrupt content (see `SegmentDump`).
#[pyfunction]
fn parse_segment<'py>(py: Python<'py>, data: &Bound<'py, PyAny>, file: &str) -> PyResult<Bound<'py, PyDict>> {
    let bytes = bytes_of(data, file)?;
    let dump: SegmentDump = py.detach(|| formats::parse_segment(&bytes, file));
    let batches = PyList::empty(py);
    for b in &dump.batches {
        batches.append(batch(py, b)?)?;
    }
    Ok(dict!(py;
        "file" => file, "size" => dump.size, "valid_bytes" => dump.valid_bytes,
        "batches" => batches, "error" => error_dict(py, &dump.error)?,
    ))
}

#[pyfunction]
fn parse_leader_epoch_checkpoint<'py>(py: Python<'py>, data: &Bound<'py, PyAny>, file: &str) -> PyResult<Bound<'py, PyDict>> {
    let bytes = bytes_of(data, file)?;
    let cp = py.detach(|| formats::parse_leader_epoch_checkpoint(&bytes, file)).py()?;
    let entries = PyList::empty(py);
    for e in &cp.entries {
        entries.append((e.epoch, e.start_offset))?;
    }
    Ok(dict!(py; "version" => cp.version, "entries" => entries))
}

#[pyfunction]
fn parse_offset_checkpoint<'py>(py: Python<'py>, data: &Bound<'py, PyAny>, file: &str) -> PyResult<Bound<'py, PyDict>> {
    let bytes = bytes_of(data, file)?;
    let cp = py.detach(|| formats::parse_offset_checkpoint(&bytes, file)).py()?;
    let entries = PyList::empty(py);
    for e in &cp.entries {
        entries.append((e.topic.as_str(), e.partition, e.offset))?;
    }
    Ok(dict!(py; "version" => cp.version, "entries" => entries))
}

#[pyfunction]
fn parse_partition_metadata<'py>(py: Python<'py>, data: &Bound<'py, PyAny>, file: &str) -> PyResult<Bound<'py, PyDict>> {
    let bytes = bytes_of(data, file)?;
    let pm = py.detach(|| formats::parse_partition_metadata(&bytes, file)).py()?;
    Ok(dict!(py; "version" => pm.version, "topic_id" => pm.topic_id))
}

#[pyfunction]
fn parse_producer_snapshot<'py>(py: Python<'py>, data: &Bound<'py, PyAny>, file: &str) -> PyResult<Bound<'py, PyDict>> {
    let bytes = bytes_of(data, file)?;
    let s = py.detach(|| formats::parse_producer_snapshot(&bytes, file)).py()?;
    let entries = PyList::empty(py);
    for e in &s.entries {
        entries.append(dict!(py;
            "producer_id" => e.producer_id, "epoch" => e.epoch, "last_sequence" => e.last_sequence,
            "last_offset" => e.last_offset, "offset_delta" => e.offset_delta, "timestamp" => e.timestamp,
            "coordinator_epoch" => e.coordinator_epoch, "current_txn_first_offset" => e.current_txn_first_offset,
        ))?;
    }
    Ok(dict!(py; "version" => s.version, "crc" => s.crc, "crc_valid" => s.crc_valid, "entries" => entries))
}

#[pyfunction]
fn parse_offset_index<'py>(py: Python<'py>, data: &Bound<'py, PyAny>, file: &str) -> PyResult<Bound<'py, PyList>> {
    let bytes = bytes_of(data, file)?;
    let entries = py.detach(|| formats::parse_offset_index(&bytes, file)).py()?;
    let items: Vec<Bound<'py, PyTuple>> = entries
        .iter()
        .map(|e| (e.relative_offset, e.position).into_pyobject(py))
        .collect::<PyResult<_>>()?;
    PyList::new(py, items)
}

#[pyfunction]
fn parse_time_index<'py>(py: Python<'py>, data: &Bound<'py, PyAny>, file: &str) -> PyResult<Bound<'py, PyList>> {
    let bytes = bytes_of(data, file)?;
    let entries = py.detach(|| formats::parse_time_index(&bytes, file)).py()?;
    let items: Vec<Bound<'py, PyTuple>> = entries
        .iter()
        .map(|e| (e.timestamp, e.relative_offset).into_pyobject(py))
        .collect::<PyResult<_>>()?;
    PyList::new(py, items)
}

#[pyfunction]
fn parse_txn_index<'py>(py: Python<'py>, data: &Bound<'py, PyAny>, file: &str) -> PyResult<Bound<'py, PyList>> {
    let bytes = bytes_of(data, file)?;
    let entries = py.detach(|| formats::parse_txn_index(&bytes, file)).py()?;
    let out = PyList::empty(py);
    for e in &entries {
        out.append(dict!(py;
            "version" => e.version, "producer_id" => e.producer_id, "first_offset" => e.first_offset,
            "last_offset" => e.last_offset, "last_stable_offset" => e.last_stable_offset,
        ))?;
    }
    Ok(out)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse_segment, m)?)?;
    m.add_function(wrap_pyfunction!(parse_leader_epoch_checkpoint, m)?)?;
    m.add_function(wrap_pyfunction!(parse_offset_checkpoint, m)?)?;
    m.add_function(wrap_pyfunction!(parse_partition_metadata, m)?)?;
    m.add_function(wrap_pyfunction!(parse_producer_snapshot, m)?)?;
    m.add_function(wrap_pyfunction!(parse_offset_index, m)?)?;
    m.add_function(wrap_pyfunction!(parse_time_index, m)?)?;
    m.add_function(wrap_pyfunction!(parse_txn_index, m)?)?;
    Ok(())
}
