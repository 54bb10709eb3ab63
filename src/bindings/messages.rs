//! Conversion between the simulator's message dataclasses (`epochlab.sim.messages`) and the
//! core's message structs. Attribute names are the dataclasses' field names.

use std::sync::Mutex;

use rustc_hash::FxHashMap as HashMap;

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple};
use pyo3::BoundObject;

use super::args::{self, lock, Int, Seq};
use super::batch::PyRecordBatch;
use super::errors::IntoPyResult;
use crate::error::ArgumentError;
use crate::replica::messages::*;
use crate::types::{BrokerId, LeaderEpoch, Offset};

/// The interned Python string of a field name, made once (a fresh string per `getattr` or
/// dict key misses the type's attribute cache and is compared by content: measured, it was a
/// third of a fetch's round trip through this module).
/// Keyed by the name's address and length (a `'static` literal's address does not move; two
/// copies of one literal are two entries of the same string), so a look-up hashes two words
/// instead of the text.
pub(crate) fn interned<'py>(py: Python<'py>, name: &'static str) -> Bound<'py, PyString> {
    type Names = Mutex<HashMap<(usize, usize), Py<PyString>>>; // (address, length) -> string
    static NAMES: PyOnceLock<Names> = PyOnceLock::new();
    let names = NAMES.get_or_init(py, || Mutex::new(HashMap::default()));
    let key = (name.as_ptr() as usize, name.len());
    if let Some(s) = lock(names).get(&key) {
        return s.bind(py).clone();
    }
    let s = PyString::intern(py, name);
    lock(names).insert(key, s.clone().unbind());
    s
}

/// A message field, `obj.<name>` with the name interned once per call site (`pyo3::intern!`:
/// no look-up at all after the first call). A missing attribute means the caller passed
/// something that is not the message this method handles: a `TypeError`, as for any argument
/// of the wrong type.
macro_rules! field {
    ($obj:expr, $name:literal) => {
        $crate::bindings::messages::field_named($obj, ::pyo3::intern!($obj.py(), $name), $name)
    };
}
pub(crate) use field;

/// A message field extracted as `T` (inferred, or the third argument).
macro_rules! attr {
    ($obj:expr, $name:literal) => {
        $crate::bindings::messages::field!($obj, $name).and_then($crate::bindings::messages::extract)
    };
    ($obj:expr, $name:literal, $t:ty) => {
        $crate::bindings::messages::field!($obj, $name).and_then($crate::bindings::messages::extract::<$t>)
    };
}
pub(crate) use attr;

pub(crate) fn extract<'py, T: for<'a> FromPyObject<'a, 'py, Error = PyErr>>(value: Bound<'py, PyAny>) -> PyResult<T> {
    value.extract::<T>()
}

pub(crate) fn field_named<'py>(obj: &Bound<'py, PyAny>, name: &Bound<'py, PyString>, text: &'static str) -> PyResult<Bound<'py, PyAny>> {
    obj.getattr(name).map_err(|_| {
        let type_name = obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
        PyTypeError::new_err(format!("expected a message with a '{text}' field, got {type_name}"))
    })
}

pub(crate) fn broker(v: Int, name: &'static str) -> PyResult<BrokerId> {
    match v {
        Int::Fits(x) => BrokerId::try_new(x, name).py(),
        Int::Huge(_) => Err(ArgumentError::OutOfDomain { argument: name, value: i128::MAX, domain: "0..=2^31-1" }).py(),
    }
}

fn brokers(ids: Seq<Int>, name: &'static str) -> PyResult<Vec<BrokerId>> {
    ids.0.into_iter().map(|v| broker(v, name)).collect()
}

fn session(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    Ok(args::offset(attr!(obj, "session")?, "session")?.0)
}

pub(crate) fn error_from_name(name: Option<String>) -> PyResult<Option<KafkaError>> {
    use KafkaError::*;
    let Some(name) = name else { return Ok(None) };
    let all = [
        NotLeaderOrFollower, FencedLeaderEpoch, UnknownLeaderEpoch, OffsetOutOfRange, NotEnoughReplicas,
        NotEnoughReplicasAfterAppend, InvalidProducerEpoch, OutOfOrderSequenceNumber, InvalidTxnState,
        TransactionCoordinatorFenced, OffsetNotAvailable,
    ];
    match all.into_iter().find(|e| e.name() == name) {
        Some(e) => Ok(Some(e)),
        None => Err(ArgumentError::InvalidText { argument: "error", value: name, reason: "not an error a replica answers with".into() }).py(),
    }
}

pub(crate) fn leader_and_isr(obj: &Bound<'_, PyAny>) -> PyResult<LeaderAndIsr> {
    let leader: Option<Int> = attr!(obj, "leader")?;
    Ok(LeaderAndIsr {
        leader: leader.map(|l| broker(l, "leader")).transpose()?,
        leader_epoch: args::epoch(attr!(obj, "leader_epoch")?, "leader_epoch")?,
        isr: brokers(attr!(obj, "isr")?, "isr")?,
        partition_epoch: args::count(attr!(obj, "partition_epoch")?, "partition_epoch")?,
        replicas: brokers(attr!(obj, "replicas")?, "replicas")?,
        brokers: broker_metadata(obj)?,
        metadata_version: count64(attr!(obj, "metadata_version")?, "metadata_version")?,
    })
}

fn count64(v: Int, name: &'static str) -> PyResult<u64> {
    Ok(args::offset(v, name)?.0)
}

fn broker_metadata(obj: &Bound<'_, PyAny>) -> PyResult<Vec<BrokerMetadata>> {
    let Seq(entries) = attr!(obj, "brokers", Seq<(Int, Int, bool)>)?;
    entries
        .into_iter()
        .map(|(b, epoch, shutting_down)| {
            Ok(BrokerMetadata { broker_id: broker(b, "brokers")?, broker_epoch: count64(epoch, "brokers")?, shutting_down })
        })
        .collect()
}

fn broker_epochs(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Option<u64>>> {
    let Seq(epochs) = attr!(obj, "broker_epochs", Seq<Option<Int>>)?;
    epochs.into_iter().map(|e| e.map(|e| count64(e, "broker_epochs")).transpose()).collect()
}

pub(crate) fn fetch_request(obj: &Bound<'_, PyAny>) -> PyResult<FetchRequest> {
    Ok(FetchRequest {
        replica_id: broker(attr!(obj, "replica_id")?, "replica_id")?,
        session: session(obj)?,
        fetch_offset: args::offset(attr!(obj, "fetch_offset")?, "fetch_offset")?,
        current_leader_epoch: args::opt_epoch(attr!(obj, "current_leader_epoch")?, "current_leader_epoch")?,
        last_fetched_epoch: args::opt_epoch(attr!(obj, "last_fetched_epoch")?, "last_fetched_epoch")?,
        log_start_offset: args::offset(attr!(obj, "log_start_offset")?, "log_start_offset")?,
        broker_epoch: attr!(obj, "broker_epoch", Option<Int>)?.map(|e| count64(e, "broker_epoch")).transpose()?,
    })
}

pub(crate) fn fetch_response(obj: &Bound<'_, PyAny>) -> PyResult<FetchResponse> {
    let Seq(batches) = attr!(obj, "batches", Seq<PyRef<'_, PyRecordBatch>>)?;
    let diverging: Option<(Int, Int)> = attr!(obj, "diverging_epoch")?;
    Ok(FetchResponse {
        error: error_from_name(attr!(obj, "error")?)?,
        batches: batches.iter().map(|b| b.0.clone()).collect(),
        high_watermark: args::offset(attr!(obj, "high_watermark")?, "high_watermark")?,
        log_start_offset: args::offset(attr!(obj, "log_start_offset")?, "log_start_offset")?,
        log_end_offset: args::offset(attr!(obj, "log_end_offset")?, "log_end_offset")?,
        diverging_epoch: diverging
            .map(|(e, o)| Ok::<_, PyErr>((args::epoch(e, "diverging_epoch")?, args::offset(o, "diverging_epoch")?)))
            .transpose()?,
    })
}

pub(crate) fn offsets_request(obj: &Bound<'_, PyAny>) -> PyResult<OffsetsForLeaderEpochRequest> {
    Ok(OffsetsForLeaderEpochRequest {
        replica_id: broker(attr!(obj, "replica_id")?, "replica_id")?,
        session: session(obj)?,
        leader_epoch: args::opt_epoch(attr!(obj, "leader_epoch")?, "leader_epoch")?,
        current_leader_epoch: args::opt_epoch(attr!(obj, "current_leader_epoch")?, "current_leader_epoch")?,
    })
}

pub(crate) fn offsets_response(obj: &Bound<'_, PyAny>) -> PyResult<OffsetsForLeaderEpochResponse> {
    let answer: Option<(Int, Int)> = attr!(obj, "answer")?;
    Ok(OffsetsForLeaderEpochResponse {
        error: error_from_name(attr!(obj, "error")?)?,
        end_offset: args::opt_offset(attr!(obj, "end_offset")?, "end_offset")?,
        answer: answer
            .map(|(e, o)| Ok::<_, PyErr>((args::epoch(e, "answer")?, args::offset(o, "answer")?)))
            .transpose()?,
    })
}

pub(crate) fn alter_partition_request(obj: &Bound<'_, PyAny>) -> PyResult<AlterPartitionRequest> {
    Ok(AlterPartitionRequest {
        broker_id: broker(attr!(obj, "broker_id")?, "broker_id")?,
        leader_epoch: args::epoch(attr!(obj, "leader_epoch")?, "leader_epoch")?,
        partition_epoch: args::count(attr!(obj, "partition_epoch")?, "partition_epoch")?,
        new_isr: brokers(attr!(obj, "new_isr")?, "new_isr")?,
        broker_epochs: broker_epochs(obj)?,
    })
}

pub(crate) fn alter_partition_response(obj: &Bound<'_, PyAny>) -> PyResult<AlterPartitionResponse> {
    let error = match attr!(obj, "error", Option<String>)? {
        None => None,
        Some(name) => Some(AlterPartitionError::from_name(&name).ok_or_else(|| ArgumentError::InvalidText {
            argument: "error",
            value: name,
            reason: "not an error an AlterPartition answer carries".into(),
        }).py()?),
    };
    Ok(AlterPartitionResponse {
        request: alter_partition_request(&field!(obj, "request")?)?,
        error,
        leader_epoch: args::epoch(attr!(obj, "leader_epoch")?, "leader_epoch")?,
        partition_epoch: args::count(attr!(obj, "partition_epoch")?, "partition_epoch")?,
        isr: brokers(attr!(obj, "isr")?, "isr")?,
    })
}

pub(crate) fn produce_request(obj: &Bound<'_, PyAny>) -> PyResult<ProduceRequest> {
    let acks: String = attr!(obj, "acks")?;
    let acks = match acks.as_str() {
        "0" => Acks::None,
        "1" => Acks::Leader,
        "all" | "-1" => Acks::All,
        _ => return Err(ArgumentError::InvalidText { argument: "acks", value: acks, reason: "expected \"0\", \"1\" or \"all\"".into() }).py(),
    };
    Ok(ProduceRequest {
        client: attr!(obj, "client")?,
        acks,
        records: args::records(&field!(obj, "records")?, "records")?,
        producer: args::producer_fields(attr!(obj, "producer_id")?, attr!(obj, "producer_epoch")?, attr!(obj, "base_sequence")?)?,
        is_transactional: attr!(obj, "is_transactional")?,
    })
}

pub(crate) fn write_txn_markers_request(obj: &Bound<'_, PyAny>) -> PyResult<WriteTxnMarkersRequest> {
    let fields = args::producer_fields(Some(attr!(obj, "producer_id")?), Some(attr!(obj, "producer_epoch")?), Some(Int::Fits(0)))?
        .ok_or_else(|| PyTypeError::new_err("producer fields are required"))?;
    Ok(WriteTxnMarkersRequest {
        producer_id: fields.producer_id,
        producer_epoch: fields.producer_epoch,
        coordinator_epoch: args::epoch(attr!(obj, "coordinator_epoch")?, "coordinator_epoch")?.0,
        commit: attr!(obj, "commit")?,
        transaction_version: args::transaction_version(attr!(obj, "transaction_version")?, "transaction_version")?,
    })
}

pub(crate) fn consumer_fetch_request(obj: &Bound<'_, PyAny>) -> PyResult<ConsumerFetchRequest> {
    let reset: String = attr!(obj, "reset")?;
    let reset = match reset.as_str() {
        "earliest" => OffsetReset::Earliest,
        "latest" => OffsetReset::Latest,
        "timestamp" => OffsetReset::Timestamp(count64(attr!(obj, "reset_timestamp")?, "reset_timestamp")? as i64),
        _ => {
            return Err(ArgumentError::InvalidText {
                argument: "reset",
                value: reset,
                reason: "expected \"earliest\", \"latest\" or \"timestamp\"".into(),
            })
            .py()
        }
    };
    let isolation: String = attr!(obj, "isolation_level")?;
    let isolation_level = match isolation.as_str() {
        "read_uncommitted" => IsolationLevel::ReadUncommitted,
        "read_committed" => IsolationLevel::ReadCommitted,
        _ => {
            return Err(ArgumentError::InvalidText {
                argument: "isolation_level",
                value: isolation,
                reason: "expected \"read_uncommitted\" or \"read_committed\"".into(),
            })
            .py()
        }
    };
    Ok(ConsumerFetchRequest {
        fetch_offset: args::opt_offset(attr!(obj, "fetch_offset")?, "fetch_offset")?,
        current_leader_epoch: args::opt_epoch(attr!(obj, "current_leader_epoch")?, "current_leader_epoch")?,
        max_records: args::count(attr!(obj, "max_records")?, "max_records")? as usize,
        reset,
        validate_epoch: args::opt_epoch(attr!(obj, "validate_epoch")?, "validate_epoch")?,
        isolation_level,
        client_rack: attr!(obj, "rack", Option<Int>)?.map(|v| broker(v, "rack")).transpose()?,
    })
}

/// Builds the message dataclasses of `epochlab.sim.messages` (see `build`).
pub(crate) struct Builder<'py> {
    py: Python<'py>,
}

/// A message class of `epochlab.sim.messages`, looked up once per builder method, with the
/// interned names of its fields in declaration order (the instance dict's keys).
struct MessageClass {
    class: Py<PyAny>,
    names: Vec<Py<PyString>>,
}

/// `Builder::build` with the class cell of this call site (`build!(self, "Class", &fields)`).
macro_rules! build {
    ($self:ident, $class:literal, $fields:expr) => {{
        static CLASS: PyOnceLock<MessageClass> = PyOnceLock::new();
        $self.build(&CLASS, $class, $fields)
    }};
}

fn epoch_offset(v: Option<(LeaderEpoch, Offset)>) -> Option<(u32, u64)> {
    v.map(|(e, o)| (e.0, o.0))
}

impl<'py> Builder<'py> {
    pub fn new(py: Python<'py>) -> Self {
        Self { py }
    }

    /// `epochlab.sim.messages.<class>(**fields)` for these plain frozen dataclasses (no
    /// `__post_init__`, no slots, as `messages.evolve` relies on too): `object.__new__` and
    /// the fields written into the instance dict in declaration order, without the frozen
    /// `__init__`'s `object.__setattr__` per field. `fields` must name every field of the
    /// class in its declaration order: checked against `dataclasses.fields` when `cell` (one
    /// per call site, whose field list is a constant) is filled.
    fn build(&self, cell: &'static PyOnceLock<MessageClass>, class: &'static str,
             fields: &[(&'static str, Bound<'py, PyAny>)]) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        static OBJECT_NEW: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
        let known = cell.get_or_try_init(py, || -> PyResult<MessageClass> {
            let cls = py.import("epochlab.sim.messages")?.getattr(class)?;
            let declared: Vec<String> = py
                .import("dataclasses")?
                .call_method1("fields", (&cls,))?
                .try_iter()?
                .map(|f| f?.getattr("name")?.extract::<String>())
                .collect::<PyResult<_>>()?;
            let ours: Vec<&'static str> = fields.iter().map(|(n, _)| *n).collect();
            if declared != ours {
                return Err(PyRuntimeError::new_err(format!(
                    "epochlab.sim.messages.{class} declares the fields {declared:?}; the Rust builder writes {ours:?}"
                )));
            }
            Ok(MessageClass { class: cls.unbind(), names: ours.iter().map(|n| PyString::intern(py, n).unbind()).collect() })
        })?;
        let object_new = OBJECT_NEW.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
            Ok(py.import("builtins")?.getattr("object")?.getattr("__new__")?.unbind())
        })?;
        let obj = object_new.bind(py).call1((known.class.bind(py),))?;
        let dict = obj.getattr(pyo3::intern!(py, "__dict__"))?.cast_into::<PyDict>()?;
        for (name, (_, value)) in known.names.iter().zip(fields) {
            dict.set_item(name.bind(py), value)?;
        }
        Ok(obj)
    }

    fn v<T: IntoPyObject<'py>>(&self, value: T) -> PyResult<Bound<'py, PyAny>>
    where
        PyErr: From<T::Error>,
    {
        Ok(value.into_pyobject(self.py)?.into_any().into_bound())
    }

    fn tuple(&self, ids: &[BrokerId]) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(self.py, ids.iter().map(|b| b.0))
    }

    pub fn fetch_request(&self, r: &FetchRequest) -> PyResult<Bound<'py, PyAny>> {
        let d = [
            ("replica_id", self.v(r.replica_id.0)?),
            ("session", self.v(r.session)?),
            ("fetch_offset", self.v(r.fetch_offset.0)?),
            ("current_leader_epoch", self.v(r.current_leader_epoch.map(|e| e.0))?),
            ("last_fetched_epoch", self.v(r.last_fetched_epoch.map(|e| e.0))?),
            ("log_start_offset", self.v(r.log_start_offset.0)?),
            ("broker_epoch", self.v(r.broker_epoch)?),
        ];
        build!(self, "FetchRequest", &d)
    }

    pub fn offsets_request(&self, r: &OffsetsForLeaderEpochRequest) -> PyResult<Bound<'py, PyAny>> {
        let d = [
            ("replica_id", self.v(r.replica_id.0)?),
            ("session", self.v(r.session)?),
            ("leader_epoch", self.v(r.leader_epoch.map(|e| e.0))?),
            ("current_leader_epoch", self.v(r.current_leader_epoch.map(|e| e.0))?),
        ];
        build!(self, "OffsetsForLeaderEpochRequest", &d)
    }

    pub fn fetch_response(&self, request: &Bound<'py, PyAny>, r: FetchResponse) -> PyResult<Bound<'py, PyAny>> {
        let batches: Vec<Bound<'py, PyRecordBatch>> =
            r.batches.into_iter().map(|b| Bound::new(self.py, PyRecordBatch(b))).collect::<PyResult<_>>()?;
        let d = [
            ("request", self.v(request)?),
            ("error", self.v(r.error.map(KafkaError::name))?),
            ("batches", self.v(PyTuple::new(self.py, batches)?)?),
            ("high_watermark", self.v(r.high_watermark.0)?),
            ("log_start_offset", self.v(r.log_start_offset.0)?),
            ("log_end_offset", self.v(r.log_end_offset.0)?),
            ("diverging_epoch", self.v(epoch_offset(r.diverging_epoch))?),
        ];
        build!(self, "FetchResponse", &d)
    }

    pub fn offsets_response(&self, request: &Bound<'py, PyAny>, r: OffsetsForLeaderEpochResponse) -> PyResult<Bound<'py, PyAny>> {
        let d = [
            ("request", self.v(request)?),
            ("error", self.v(r.error.map(KafkaError::name))?),
            ("end_offset", self.v(r.end_offset.map(|o| o.0))?),
            ("answer", self.v(epoch_offset(r.answer))?),
        ];
        build!(self, "OffsetsForLeaderEpochResponse", &d)
    }

    pub fn alter_partition_request(&self, r: &AlterPartitionRequest) -> PyResult<Bound<'py, PyAny>> {
        let d = [
            ("broker_id", self.v(r.broker_id.0)?),
            ("leader_epoch", self.v(r.leader_epoch.0)?),
            ("partition_epoch", self.v(r.partition_epoch)?),
            ("new_isr", self.v(self.tuple(&r.new_isr)?)?),
            ("broker_epochs", self.v(PyTuple::new(self.py, r.broker_epochs.iter().copied())?)?),
        ];
        build!(self, "AlterPartitionRequest", &d)
    }

    pub fn produce_response(&self, request_id: &Bound<'py, PyAny>, r: ProduceResponse) -> PyResult<Bound<'py, PyAny>> {
        let d = [
            ("request_id", self.v(request_id)?),
            ("error", self.v(r.error.map(KafkaError::name))?),
            ("base_offset", self.v(r.base_offset.map(|o| o.0))?),
            ("last_offset", self.v(r.last_offset.map(|o| o.0))?),
            ("duplicate", self.v(r.duplicate)?),
        ];
        build!(self, "ProduceResponse", &d)
    }

    pub fn consumer_fetch_response(&self, request_id: &Bound<'py, PyAny>, r: ConsumerFetchResponse) -> PyResult<Bound<'py, PyAny>> {
        self.consumer_fetch_response_naming(request_id, r, None)
    }

    /// A consumer fetch's answer naming `preferred` as the replica to read from (KIP-392: the
    /// broker sets it, the replica's read leaves it out).
    pub fn consumer_fetch_response_naming(&self, request_id: &Bound<'py, PyAny>, r: ConsumerFetchResponse,
                                          preferred: Option<u32>) -> PyResult<Bound<'py, PyAny>> {
        let records = r.records.into_iter().map(|(o, v, e, pid, kind)| (o, v, e, pid, kind as u8));
        let d = [
            ("request_id", self.v(request_id)?),
            ("error", self.v(r.error.map(KafkaError::name))?),
            ("leader_epoch", self.v(r.leader_epoch.map(|e| e.0))?),
            ("records", self.v(PyTuple::new(self.py, records)?)?),
            ("high_watermark", self.v(r.high_watermark.0)?),
            ("reset_offset", self.v(r.reset_offset.map(|o| o.0))?),
            ("epoch_end", self.v(epoch_offset(r.epoch_end))?),
            ("last_stable_offset", self.v(r.last_stable_offset.0)?),
            ("aborted_transactions", self.v(PyTuple::new(self.py, r.aborted_transactions)?)?),
            ("preferred_read_replica", self.v(preferred)?),
        ];
        build!(self, "ConsumerFetchResponse", &d)
    }

    pub fn write_txn_markers_response(&self, request_id: &Bound<'py, PyAny>, r: WriteTxnMarkersResponse) -> PyResult<Bound<'py, PyAny>> {
        let d = [
            ("request_id", self.v(request_id)?),
            ("error", self.v(r.error.map(KafkaError::name))?),
            ("offset", self.v(r.offset.map(|o| o.0))?),
        ];
        build!(self, "WriteTxnMarkersResponse", &d)
    }
}
