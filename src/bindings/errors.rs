//! The one mapping from core errors to `epochlab.errors` classes: a `match` with no wildcard,
//! so a new core variant does not compile until it has a Python class.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::error::{
    ArgumentError, CheckpointError, Error, FencingError, FormatError, LogError, ProducerStateError, TraceError,
};

/// Builds an instance of `epochlab.errors.<class>(message, **details)`.
fn raise(py: Python<'_>, class: &str, message: String, details: &[(&str, Py<PyAny>)]) -> PyErr {
    let built = (|| -> PyResult<PyErr> {
        let kwargs = PyDict::new(py);
        for (k, v) in details {
            kwargs.set_item(*k, v)?;
        }
        let cls = py.import("epochlab.errors")?.getattr(class)?;
        Ok(PyErr::from_value(cls.call((message,), Some(&kwargs))?))
    })();
    built.unwrap_or_else(|e| e)
}

macro_rules! kv {
    ($py:expr; $($k:literal => $v:expr),* $(,)?) => {
        [$(($k, $v.into_pyobject($py).map(|o| o.into_any().unbind()).unwrap_or_else(|_| $py.None()))),*]
    };
}

/// Converts any core error into its Python exception.
pub(crate) fn to_py_err(err: impl Into<Error>) -> PyErr {
    let err = err.into();
    let message = err.to_string();
    Python::attach(|py| match err {
        Error::Argument(ArgumentError::OutOfDomain { argument, value, domain }) => raise(
            py, "InvalidArgumentError", message, &kv!(py; "argument" => argument, "value" => value, "domain" => domain),
        ),
        Error::Argument(ArgumentError::Invalid { argument, value, reason }) => raise(
            py, "InvalidArgumentError", message, &kv!(py; "argument" => argument, "value" => value, "reason" => reason),
        ),
        Error::Argument(ArgumentError::InvalidText { argument, value, reason }) => raise(
            py, "InvalidArgumentError", message, &kv!(py; "argument" => argument, "value" => value, "reason" => reason),
        ),
        Error::Log(LogError::OffsetOutOfRange { offset, log_start_offset, log_end_offset }) => raise(
            py, "OffsetOutOfRangeError", message,
            &kv!(py; "offset" => offset, "log_start_offset" => log_start_offset, "log_end_offset" => log_end_offset),
        ),
        Error::Log(LogError::UnexpectedAppendOffset { first_offset, log_end_offset }) => raise(
            py, "UnexpectedAppendOffsetError", message,
            &kv!(py; "first_offset" => first_offset, "log_end_offset" => log_end_offset),
        ),
        Error::Log(LogError::OutOfOrderOffsets { offset, log_end_offset }) => raise(
            py, "UnexpectedAppendOffsetError", message,
            &kv!(py; "first_offset" => offset, "log_end_offset" => log_end_offset),
        ),
        Error::Log(LogError::InvalidRecordBatch { reason }) => {
            raise(py, "InvalidRecordBatchError", message, &kv!(py; "reason" => reason))
        }
        Error::ProducerState(ProducerStateError::OutOfOrderSequence { producer_id, producer_epoch, base_sequence, expected_sequence }) => raise(
            py, "OutOfOrderSequenceError", message,
            &kv!(py; "producer_id" => producer_id, "producer_epoch" => producer_epoch,
                 "base_sequence" => base_sequence, "expected_sequence" => expected_sequence),
        ),
        Error::ProducerState(ProducerStateError::InvalidProducerEpoch { producer_id, producer_epoch, current_epoch }) => raise(
            py, "InvalidProducerEpochError", message,
            &kv!(py; "producer_id" => producer_id, "producer_epoch" => producer_epoch, "current_epoch" => current_epoch),
        ),
        Error::ProducerState(ProducerStateError::InvalidTxnState { producer_id, transaction_first_offset }) => raise(
            py, "InvalidTxnStateError", message,
            &kv!(py; "producer_id" => producer_id, "transaction_first_offset" => transaction_first_offset),
        ),
        Error::ProducerState(ProducerStateError::TransactionCoordinatorFenced { producer_id, coordinator_epoch, current_coordinator_epoch }) => raise(
            py, "TransactionCoordinatorFencedError", message,
            &kv!(py; "producer_id" => producer_id, "coordinator_epoch" => coordinator_epoch,
                 "current_coordinator_epoch" => current_coordinator_epoch),
        ),
        Error::Fencing(FencingError::FencedLeaderEpoch { request_epoch, current_epoch }) => raise(
            py, "FencedLeaderEpochError", message,
            &kv!(py; "request_epoch" => request_epoch, "current_epoch" => current_epoch),
        ),
        Error::Fencing(FencingError::UnknownLeaderEpoch { request_epoch, current_epoch }) => raise(
            py, "UnknownLeaderEpochError", message,
            &kv!(py; "request_epoch" => request_epoch, "current_epoch" => current_epoch),
        ),
        Error::Checkpoint(CheckpointError::Corrupt { path, line, reason }) => raise(
            py, "CorruptCheckpointError", message, &kv!(py; "path" => path, "line" => line, "reason" => reason),
        ),
        Error::Checkpoint(CheckpointError::Io { path, reason }) => {
            raise(py, "StorageError", message, &kv!(py; "path" => path, "reason" => reason))
        }
        Error::Trace(TraceError::Malformed { row, reason }) => raise(
            py, "TraceError", message, &kv!(py; "path" => Option::<String>::None, "row" => row, "reason" => reason),
        ),
        Error::Format(FormatError::Malformed { file, offset, reason }) => raise(
            py, "KafkaFormatError", message, &kv!(py; "file" => file, "offset" => offset, "reason" => reason),
        ),
    })
}

/// `InvalidArgumentError` for an `int` too large for any domain, carrying the object as given.
pub(crate) fn out_of_domain_object(argument: &'static str, value: Py<PyAny>, domain: &'static str) -> PyErr {
    Python::attach(|py| {
        let message = format!("argument '{argument}' = {} is outside its domain {domain}", value.bind(py));
        raise(py, "InvalidArgumentError", message, &kv!(py; "argument" => argument, "value" => value, "domain" => domain))
    })
}

/// `result.map_err(to_py_err)` as a method.
pub(crate) trait IntoPyResult<T> {
    fn py(self) -> PyResult<T>;
}

impl<T, E: Into<Error>> IntoPyResult<T> for Result<T, E> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py_err)
    }
}
