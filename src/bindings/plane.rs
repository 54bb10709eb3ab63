//! `FetchPlane`: the replication traffic of brokers whose replicas are Rust replicas (the
//! `rust` backend), run without Python frames. The decisions are the engine's
//! ([`crate::sim::fetcher`]: the follower's fetcher, the leader's fetch serving with its long
//! poll, OffsetsForLeaderEpoch); this file turns Python messages and the broker's state into
//! the engine's inputs, asks the Rust replica (`crate::replica`) what the engine needs of it,
//! and carries out the engine's effects as Python calls, in order, so every run is
//! byte-identical to the `reference` backend's (`epochlab.sim.broker.Broker`'s own methods).
//!
//! Python is called only where the broker's own state is involved, and only when the Python
//! statement would do something there:
//!
//! * `_drain_events()` when the replica holds events;
//! * `_note_state()` when the log's `state_key()` differs from the broker's `_seen_state`
//!   (the method returns at once when they are equal);
//! * `_try_complete_delayed()` when a purgatory holds something (`_parked_produces`,
//!   `_parked_markers`, `_parked_reads`), else the `_note_state()` rule;
//! * `_check_parked_reads()` when `_parked_reads` is not empty;
//! * `_send_alter_partition(proposal)` and `_halt()` whenever the engine asks.
//!
//! The broker's message handlers (`on_fetch`, `on_fetch_response`,
//! `on_offsets_for_leader_epoch`, `on_offsets_for_leader_epoch_response`,
//! `on_connection_reset`) become `FetchPlaneHandler`s set on the broker instance
//! (`Broker.use_plane`), so a delivery calls into Rust directly; the timers are
//! `FetchPlaneTimer`s carrying the engine's [`Due`]. No lock is held while Python runs: a
//! callback may come back into the plane (a `_try_complete_delayed` answering parked fetches).

use std::sync::Mutex;

use pyo3::call::PyCallArgs;
use pyo3::exceptions::{PyAttributeError, PyTypeError};
use pyo3::gc::PyVisit;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use pyo3::PyTraverseError;
use rustc_hash::FxHashMap;

use super::args::lock;
use super::errors::IntoPyResult;
use super::messages::{self as msg, Builder};
use super::replica::PyReplica;
use super::sim::{PyKernel, PyNetwork, PyTimer};
use crate::replica::follower::FollowerRequest;
use crate::replica::messages::{Acks, ConsumerFetchRequest, ConsumerFetchResponse, IsolationLevel, KafkaError, WriteTxnMarkersResponse};
use crate::replica::Role;
use crate::sim::fetcher::{Due, Effect, FetchConfig, Fetcher, FollowerView, Liveness};
use crate::sim::produce::{self, Head, ProducePath, Reply};
use crate::sim::reads::{self, ConsumerReads, ReadHead, ReadOutcome, ReadRules};
use crate::types::{BrokerId, Offset};

/// A Python message object as the engine holds it: equal only to itself (answers echo their
/// request object, so identity tells which request an answer is for).
struct Obj(Py<PyAny>);

impl PartialEq for Obj {
    fn eq(&self, other: &Self) -> bool {
        self.0.is(&other.0)
    }
}

type Engine = Fetcher<Obj, Py<PyTimer>>;
type Effects = Vec<Effect<Obj, Py<PyTimer>>>;
type Produce = ProducePath<Obj, Py<PyTimer>, Obj>;
type ProduceEffects = Vec<produce::Effect<Obj, Py<PyTimer>, Obj>>;

/// A read for a consumer: its request id, the replica's answer, the preferred read replica.
struct ReadAnswer {
    request_id: i64,
    response: ConsumerFetchResponse,
    preferred: Option<u32>,
}

/// What the parked reads' completion depends on: role, leader epoch, HW, log end.
type ReadsKey = (Role, Option<u32>, u64, u64);
/// A consumer fetch as the read engine holds it: converted once, on arrival (a parked read is
/// read again from this, with no Python object kept).
struct ParsedRead {
    req: ConsumerFetchRequest,
    request_id: i64,
}

type Reads = ConsumerReads<ParsedRead, Py<PyTimer>, ReadAnswer, ReadsKey>;
type ReadEffects = Vec<reads::Effect<ParsedRead, Py<PyTimer>, ReadAnswer>>;


/// What a plane timer does: one of the two engines' [`Due`]s.
enum PlaneDue {
    Fetch(Due<Obj>),
    Produce(produce::Due<Obj>),
    Read(reads::Due<ParsedRead>),
}

/// One attached broker: its Python objects and its engine.
struct Attached {
    broker: Py<PyAny>,
    replica: Py<PyReplica>,
    /// The broker's node name (its id, a Python int).
    name: Py<PyAny>,
    engine: Engine,
    produce: Produce,
    reads: Reads,
}

/// The Python objects of one broker, cloned out of the lock for a run of effects.
struct Parts<'py> {
    b: i64,
    broker: Bound<'py, PyAny>,
    replica: Bound<'py, PyReplica>,
    name: Bound<'py, PyAny>,
}

#[pyclass(frozen, name = "FetchPlane", module = "epochlab._core")]
pub(crate) struct PyFetchPlane {
    kernel: Py<PyKernel>,
    network: Py<PyNetwork>,
    nodes: Py<PyDict>,
    config: FetchConfig,
    /// A generation before diverging-epoch: redirects and followers' empty reads wait out the
    /// whole wait (KAFKA-13767, KAFKA-14334).
    held_reads: bool,
    read_rules: ReadRules,
    brokers: Mutex<FxHashMap<i64, Attached>>,
}

#[derive(Clone, Copy)]
enum Handler {
    Fetch,
    FetchResponse,
    Offsets,
    OffsetsResponse,
    ConnectionReset,
    Produce,
    ClientDisconnect,
    ConsumerFetch,
}

const HANDLERS: [(&str, Handler); 8] = [
    ("on_fetch", Handler::Fetch),
    ("on_fetch_response", Handler::FetchResponse),
    ("on_offsets_for_leader_epoch", Handler::Offsets),
    ("on_offsets_for_leader_epoch_response", Handler::OffsetsResponse),
    ("on_connection_reset", Handler::ConnectionReset),
    ("on_produce", Handler::Produce),
    ("on_client_disconnect", Handler::ClientDisconnect),
    ("on_consumer_fetch", Handler::ConsumerFetch),
];

/// A broker id that was not attached: the caller's mistake, a `TypeError` as for any argument
/// of the wrong kind (the convention of every class of this module).
fn unknown(b: i64) -> PyErr {
    PyTypeError::new_err(format!("FetchPlane: broker {b} is not attached"))
}

/// `broker.<name>`; a missing attribute means the object is not a broker: a `TypeError`.
fn attr<'py>(broker: &Bound<'py, PyAny>, name: &Bound<'py, PyString>) -> PyResult<Bound<'py, PyAny>> {
    broker.getattr(name).map_err(|e| {
        if e.is_instance_of::<PyAttributeError>(broker.py()) {
            PyTypeError::new_err(format!("FetchPlane: the broker has no attribute {name}"))
        } else {
            e
        }
    })
}

/// `broker.<name>(*args)`: the method looked up as [`attr`] does; what it raises passes.
fn call<'py>(broker: &Bound<'py, PyAny>, name: &Bound<'py, PyString>, args: impl PyCallArgs<'py>) -> PyResult<()> {
    attr(broker, name)?.call1(args)?;
    Ok(())
}

/// Whether the Python broker is alive, and its incarnation.
fn liveness(broker: &Bound<'_, PyAny>) -> PyResult<Liveness> {
    let py = broker.py();
    let incarnation = attr(broker, intern!(py, "incarnation"))?;
    let incarnation = incarnation.extract().map_err(|_| {
        PyTypeError::new_err(format!("FetchPlane: the broker's incarnation is not an int: {incarnation:?}"))
    })?;
    Ok(Liveness { alive: attr(broker, intern!(py, "alive"))?.is_truthy()?, incarnation })
}

/// `Broker._drain_events()`, when the replica holds events.
fn drain(p: &Parts<'_>) -> PyResult<()> {
    if p.replica.get().with(p.broker.py(), |r, _| !r.events.is_empty()) {
        call(&p.broker, intern!(p.broker.py(), "_drain_events"), ())?;
    }
    Ok(())
}

/// `Broker._note_state()`, when it has something to do.
fn note_state(p: &Parts<'_>) -> PyResult<()> {
    let py = p.broker.py();
    let now = p.replica.get().with(py, |_, log| {
        (log.log_end_offset().0, log.high_watermark().0, log.batch_count(), log.log_start_offset().0)
    });
    let seen = attr(&p.broker, intern!(py, "_seen_state"))?;
    let same = match seen.extract::<(u64, u64, usize, u64)>() {
        Ok(s) => s == now && seen.is_exact_instance_of::<PyTuple>(),
        Err(_) => false,
    };
    if !same {
        call(&p.broker, intern!(py, "_note_state"), ())?;
    }
    Ok(())
}

/// The node a reset came from, as a broker id (`None`: not a broker, so not a leader).
fn peer_id(peer: &Bound<'_, PyAny>) -> Option<BrokerId> {
    peer.extract::<u32>().ok().map(BrokerId)
}

impl PyFetchPlane {
    /// Broker `b`'s Python objects, cloned out of the lock.
    fn parts<'py>(&self, py: Python<'py>, b: i64) -> PyResult<Parts<'py>> {
        let brokers = lock(&self.brokers);
        let a = brokers.get(&b).ok_or_else(|| unknown(b))?;
        Ok(Parts { b, broker: a.broker.bind(py).clone(), replica: a.replica.bind(py).clone(), name: a.name.bind(py).clone() })
    }

    /// Broker `b`'s engine, under the lock (no Python runs in `f`).
    fn edit<T>(&self, b: i64, f: impl FnOnce(&mut Engine) -> T) -> PyResult<T> {
        let mut brokers = lock(&self.brokers);
        Ok(f(&mut brokers.get_mut(&b).ok_or_else(|| unknown(b))?.engine))
    }

    /// Broker `b`'s consumer reads, under the lock (no Python runs in `f`).
    fn edit_reads<T>(&self, b: i64, f: impl FnOnce(&mut Reads) -> T) -> PyResult<T> {
        let mut brokers = lock(&self.brokers);
        Ok(f(&mut brokers.get_mut(&b).ok_or_else(|| unknown(b))?.reads))
    }

    /// Broker `b`'s produce path, under the lock (no Python runs in `f`).
    fn edit_produce<T>(&self, b: i64, f: impl FnOnce(&mut Produce) -> T) -> PyResult<T> {
        let mut brokers = lock(&self.brokers);
        Ok(f(&mut brokers.get_mut(&b).ok_or_else(|| unknown(b))?.produce))
    }

    fn now(&self, py: Python<'_>) -> u64 {
        u64::try_from(self.kernel.bind(py).get().now()).unwrap_or(0)
    }

    /// A `FetchPlaneTimer` of broker `b` carrying `due`, armed `delay_ms` from now.
    fn schedule(me: &Bound<'_, Self>, b: i64, delay_ms: i64, incarnation: i64, due: PlaneDue) -> PyResult<Py<PyTimer>> {
        let py = me.py();
        let timer = PlaneTimer { plane: me.clone().unbind(), broker: b, incarnation, due: Mutex::new(Some(due)) };
        let callback = Py::new(py, timer)?.into_any();
        let kernel = me.get().kernel.bind(py).get();
        let at = kernel.now().saturating_add(delay_ms.max(0));
        kernel.schedule_call(py, at, callback, None)
    }

    fn post(&self, src: &Bound<'_, PyAny>, dst: BrokerId, method: &'static str, message: &Bound<'_, PyAny>, kind: &str) -> PyResult<()> {
        let py = src.py();
        let dst = dst.0.into_pyobject(py)?.into_any();
        self.network.bind(py).get().post(src, &dst, self.nodes.bind(py), &msg::interned(py, method), message, kind, None, None)?;
        Ok(())
    }

    /// What [`Fetcher::send_next`] reads: the broker's liveness, the replica's next request and
    /// leader, and, when both are there, whether the leader is up on the network.
    fn follower_view(&self, p: &Parts<'_>) -> PyResult<FollowerView> {
        let py = p.broker.py();
        let live = liveness(&p.broker)?;
        let (request, leader) = p.replica.get().with(py, |r, log| (r.next_request(log), r.leader_id));
        let leader_reachable = match (&request, leader) {
            (Some(_), Some(l)) => self.network.bind(py).get().is_alive(&l.0.into_pyobject(py)?.into_any())?,
            _ => false,
        };
        Ok(FollowerView { live, request, leader, leader_reachable })
    }

    /// Broker `b`'s engine step `step`, then its effects.
    fn step(me: &Bound<'_, Self>, b: i64, step: impl FnOnce(&mut Engine) -> Effects) -> PyResult<()> {
        let effects = me.get().edit(b, step)?;
        if effects.is_empty() {
            return Ok(());
        }
        let p = me.get().parts(me.py(), b)?;
        Self::run(me, &p, effects)
    }

    /// Carry out `effects` in order, a continuation's own effects before the next one.
    fn run(me: &Bound<'_, Self>, p: &Parts<'_>, effects: Effects) -> PyResult<()> {
        for effect in effects {
            Self::apply(me, p, effect)?;
        }
        Ok(())
    }

    fn apply(me: &Bound<'_, Self>, p: &Parts<'_>, effect: Effect<Obj, Py<PyTimer>>) -> PyResult<()> {
        let (this, py, b) = (me.get(), me.py(), p.b);
        match effect {
            Effect::Send { leader, request, token, timeout_ms, incarnation } => {
                let builder = Builder::new(py);
                let request = match request {
                    FollowerRequest::Fetch(f) => {
                        let request = builder.fetch_request(&f)?;
                        this.post(&p.name, leader, "on_fetch", &request, "fetch")?;
                        request
                    }
                    FollowerRequest::OffsetsForLeaderEpoch(o) => {
                        let request = builder.offsets_request(&o)?;
                        this.post(&p.name, leader, "on_offsets_for_leader_epoch", &request, "fetch")?;
                        request
                    }
                };
                let timer = Self::schedule(me, b, timeout_ms, incarnation, PlaneDue::Fetch(Due::Timeout(token)))?;
                this.edit(b, |e| e.sent(Obj(request.unbind()), timer))
            }
            Effect::Backoff { token, delay_ms } => {
                let incarnation = liveness(&p.broker)?.incarnation;
                let timer = Self::schedule(me, b, delay_ms, incarnation, PlaneDue::Fetch(Due::Retry(token)))?;
                this.edit(b, |e| e.armed(timer))
            }
            Effect::Cancel(timer) => {
                timer.get().cancel();
                Ok(())
            }
            Effect::SendNext => {
                let view = this.follower_view(p)?;
                let incarnation = view.live.incarnation;
                let effects = this.edit(b, |e| e.send_next(view))?.map_err(|_| {
                    PyTypeError::new_err(format!("FetchPlane: broker {b} has incarnation {incarnation}"))
                })?;
                Self::run(me, p, effects)
            }
            Effect::Settle(action) => {
                let effects = this.edit(b, |e| e.settle(action))?;
                Self::run(me, p, effects)
            }
            Effect::Park { request, wait_ms } => {
                let incarnation = liveness(&p.broker)?.incarnation;
                let due = PlaneDue::Fetch(Due::Expire(Obj(request.0.clone_ref(py))));
                let timer = Self::schedule(me, b, wait_ms, incarnation, due)?;
                this.edit(b, |e| e.parked(request, timer))
            }
            Effect::Complete(request) => {
                let req = msg::fetch_request(request.0.bind(py))?;
                let response = p.replica.get().with(py, |r, log| r.complete_parked_fetch(log, &req));
                let effects = this.edit(b, |e| e.complete(request, req.replica_id, response))?;
                Self::run(me, p, effects)
            }
            Effect::Respond { to, request, response } => {
                let response = Builder::new(py).fetch_response(request.0.bind(py), response)?;
                this.post(&p.name, to, "on_fetch_response", &response, "")
            }
            Effect::RespondOffsets { to, request, response } => {
                let response = Builder::new(py).offsets_response(request.0.bind(py), response)?;
                this.post(&p.name, to, "on_offsets_for_leader_epoch_response", &response, "")
            }
            Effect::SendAlterPartition(proposal) => {
                let proposal = Builder::new(py).alter_partition_request(&proposal)?;
                call(&p.broker, intern!(py, "_send_alter_partition"), (proposal,))
            }
            Effect::DrainEvents => drain(p),
            Effect::NoteState => note_state(p),
            Effect::TryCompleteDelayed => Self::complete_delayed(me, p),
            Effect::CheckParkedReads => Self::check_reads(me, p),
            Effect::Halt => call(&p.broker, intern!(py, "_halt"), ()),
        }
    }

    /// `Broker._try_complete_delayed()`: the produce purgatory (acks=all writes, then
    /// transaction markers), then the consumer reads', then `_note_state()`.
    fn complete_delayed(me: &Bound<'_, Self>, p: &Parts<'_>) -> PyResult<()> {
        if me.get().edit_produce(p.b, |e| e.parked_count())? > 0 {
            Self::complete_produces(me, p, None)?;
        }
        if me.get().edit_produce(p.b, |e| e.parked_marker_count())? > 0 {
            Self::complete_markers(me, p, None)?;
        }
        Self::check_reads(me, p)?;
        note_state(p)
    }

    /// `Broker._answer_parked_produces(force)`, the completion asked of the Rust replica.
    fn complete_produces(me: &Bound<'_, Self>, p: &Parts<'_>, force: Option<KafkaError>) -> PyResult<()> {
        let (this, py) = (me.get(), me.py());
        let now = this.now_ms(py);
        let replica = p.replica.get();
        let effects = this.edit_produce(p.b, |e| {
            e.complete(force, |required| replica.with(py, |r, log| r.produce_completion(log, Offset(required))), now)
        })?;
        Self::run_produce(me, p, effects)
    }

    /// `Broker._answer_parked_markers(force)`, the completion asked of the Rust replica.
    fn complete_markers(me: &Bound<'_, Self>, p: &Parts<'_>, force: Option<KafkaError>) -> PyResult<()> {
        let (this, py) = (me.get(), me.py());
        let replica = p.replica.get();
        let effects = this.edit_produce(p.b, |e| {
            e.complete_markers(force, |required| replica.with(py, |r, log| r.produce_completion(log, Offset(required))))
        })?;
        Self::run_produce(me, p, effects)
    }

    fn now_ms(&self, py: Python<'_>) -> i64 {
        self.kernel.bind(py).get().now()
    }

    /// Carry out the produce path's `effects` in order.
    fn run_produce(me: &Bound<'_, Self>, p: &Parts<'_>, effects: ProduceEffects) -> PyResult<()> {
        for effect in effects {
            Self::apply_produce(me, p, effect)?;
        }
        Ok(())
    }

    fn apply_produce(me: &Bound<'_, Self>, p: &Parts<'_>, effect: produce::Effect<Obj, Py<PyTimer>, Obj>) -> PyResult<()> {
        let (this, py, b) = (me.get(), me.py(), p.b);
        match effect {
            produce::Effect::Handle { request, head } => {
                // `Broker._handle_produce`: KIP-890 verification is the broker's (Python) code;
                // it applies to transactional writes only (`Broker._needs_verification`)
                let req = request.0.bind(py);
                if msg::field!(req, "is_transactional")?.is_truthy()?
                    && attr(&p.broker, intern!(py, "_needs_verification"))?.call1((req,))?.is_truthy()? {
                    return call(&p.broker, intern!(py, "_verify"), (req,));
                }
                Self::append(me, p, req, head)
            }
            produce::Effect::Respond { head, reply } => {
                let response = match reply {
                    Reply::Response(r) => Builder::new(py).produce_response(&head.request_id.into_pyobject(py)?.into_any(), r)?,
                    Reply::Given(response) => response.0.into_bound(py),
                };
                let client = PyString::new(py, &head.client).into_any();
                this.network.bind(py).get().post(&p.name, &client, this.nodes.bind(py), &msg::interned(py, "on_produce_response"),
                                                 &response, "", None, None)?;
                Ok(())
            }
            produce::Effect::Park { token, timeout_ms } => {
                let incarnation = liveness(&p.broker)?.incarnation;
                let timer = Self::schedule(me, b, timeout_ms, incarnation, PlaneDue::Produce(produce::Due::Expire(token)))?;
                let unused = this.edit_produce(b, |e| e.parked(token, timer))?;
                drop(unused);
                Ok(())
            }
            produce::Effect::Next { request, head, gen } => {
                let incarnation = liveness(&p.broker)?.incarnation;
                let due = PlaneDue::Produce(produce::Due::Handle { request, head, gen });
                Self::schedule(me, b, 0, incarnation, due)?;
                Ok(())
            }
            produce::Effect::Cancel(timer) => {
                timer.get().cancel();
                Ok(())
            }
            produce::Effect::TryCompleteDelayed => Self::complete_delayed(me, p),
            produce::Effect::ParkMarker { token, timeout_ms } => {
                let incarnation = liveness(&p.broker)?.incarnation;
                let due = PlaneDue::Produce(produce::Due::ExpireMarker(token));
                let timer = Self::schedule(me, b, timeout_ms, incarnation, due)?;
                let unused = this.edit_produce(b, |e| e.marker_parked(token, timer))?;
                drop(unused);
                Ok(())
            }
            produce::Effect::AnswerMarker { to, request_id, error, offset } => {
                let answer = WriteTxnMarkersResponse { error, offset: offset.map(Offset) };
                let response = Builder::new(py).write_txn_markers_response(&request_id.into_pyobject(py)?.into_any(), answer)?;
                let to = PyString::new(py, &to).into_any();
                this.network.bind(py).get().post(&p.name, &to, this.nodes.bind(py),
                                                 &msg::interned(py, "on_write_txn_markers_response"), &response, "", None, None)?;
                Ok(())
            }
        }
    }

    /// `Broker._append_produce`: the Rust replica appends (or refuses) the request, the
    /// broker sees its events, new data answers the parked follower fetches, and the produce
    /// path answers or parks the request.
    fn append(me: &Bound<'_, Self>, p: &Parts<'_>, request: &Bound<'_, PyAny>, head: Head) -> PyResult<()> {
        let (this, py) = (me.get(), me.py());
        let req = msg::produce_request(request)?;
        let now = this.now(py);
        let written = p.replica.get().with(py, |r, log| r.handle_produce(log, &req, now)).py()?;
        drain(p)?;
        if written.error.is_none() && !written.duplicate {
            Self::step(me, p.b, |e| e.answer_parked())?;
        }
        let effects = this.edit_produce(p.b, |e| e.appended(head, written, this.now_ms(py)))?;
        Self::run_produce(me, p, effects)
    }

    /// `Broker.on_produce`.
    fn on_produce(me: &Bound<'_, Self>, b: i64, request: &Bound<'_, PyAny>) -> PyResult<()> {
        let head = produce_head(request)?;
        let effects = me.get().edit_produce(b, |e| e.arrive(Obj(request.clone().unbind()), head))?;
        if effects.is_empty() {
            return Ok(());
        }
        let p = me.get().parts(me.py(), b)?;
        Self::run_produce(me, &p, effects)
    }

    /// `Broker.on_client_disconnect`.
    fn on_client_disconnect(me: &Bound<'_, Self>, b: i64, message: &Bound<'_, PyAny>) -> PyResult<()> {
        let client: String = msg::attr!(message, "client")?;
        let closed_ms: i64 = msg::attr!(message, "closed_ms")?;
        me.get().edit_produce(b, |e| e.disconnect(&client, closed_ms))
    }

    /// `Broker._read_for_consumer` ([`reads::read_for_consumer`]) by the Rust replica.
    fn read_for_consumer(&self, replica: &PyReplica, py: Python<'_>, req: &ConsumerFetchRequest, request_id: i64)
                         -> (ReadOutcome, ReadAnswer) {
        let rules = self.read_rules;
        let (response, preferred) = replica.with(py, |r, log| reads::read_for_consumer(r, log, req, rules));
        (reads::outcome_of(&response, preferred), ReadAnswer { request_id, response, preferred: preferred.map(|b| b.0) })
    }

    /// What the parked reads' completion depends on (`Broker._reads_key`).
    fn reads_key(replica: &PyReplica, py: Python<'_>) -> ReadsKey {
        replica.with(py, |r, log| (r.role, r.leader_epoch.map(|e| e.0), log.high_watermark().0, log.log_end_offset().0))
    }

    /// `Broker.on_consumer_fetch`.
    fn on_consumer_fetch(me: &Bound<'_, Self>, b: i64, request: &Bound<'_, PyAny>) -> PyResult<()> {
        let (this, py) = (me.get(), me.py());
        let p = this.parts(py, b)?;
        let req = msg::consumer_fetch_request(request)?;
        let head = read_head(request, &req)?;
        let request_id: i64 = msg::attr!(request, "request_id")?;
        let replica = p.replica.get();
        let (outcome, answer) = this.read_for_consumer(replica, py, &req, request_id);
        let leader = replica.with(py, |r, _| r.role == Role::Leader);
        let held_reads = this.held_reads;
        let effects = this.edit_reads(b, |e| {
            e.arrive(ParsedRead { req, request_id }, head, outcome, answer, || Self::reads_key(replica, py), held_reads, leader)
        })?;
        Self::run_reads(me, &p, effects)
    }

    /// `Broker._check_parked_reads`.
    fn check_reads(me: &Bound<'_, Self>, p: &Parts<'_>) -> PyResult<()> {
        let (this, py) = (me.get(), me.py());
        if this.edit_reads(p.b, |e| e.parked_count())? == 0 {
            return Ok(());
        }
        let replica = p.replica.get();
        let key = Self::reads_key(replica, py);
        let effects = this.edit_reads(p.b, |e| e.check(key, |r, _| this.read_for_consumer(replica, py, &r.req, r.request_id)))?;
        Self::run_reads(me, p, effects)
    }

    /// Carry out the consumer reads' `effects` in order.
    fn run_reads(me: &Bound<'_, Self>, p: &Parts<'_>, effects: ReadEffects) -> PyResult<()> {
        let (this, py, b) = (me.get(), me.py(), p.b);
        for effect in effects {
            match effect {
                reads::Effect::Respond { client, response } => {
                    let id = response.request_id.into_pyobject(py)?.into_any();
                    let message = Builder::new(py).consumer_fetch_response_naming(&id, response.response, response.preferred)?;
                    let client = PyString::new(py, &client).into_any();
                    this.network.bind(py).get().post(&p.name, &client, this.nodes.bind(py), &msg::interned(py, "on_fetch_response"),
                                                     &message, "", None, None)?;
                }
                reads::Effect::Park { token, wait_ms } => {
                    let incarnation = liveness(&p.broker)?.incarnation;
                    let timer = Self::schedule(me, b, wait_ms, incarnation, PlaneDue::Read(reads::Due::Expire(token)))?;
                    let unused = this.edit_reads(b, |e| e.parked(token, timer))?;
                    drop(unused);
                }
                reads::Effect::Delay { request, head, wait_ms } => {
                    let incarnation = liveness(&p.broker)?.incarnation;
                    Self::schedule(me, b, wait_ms, incarnation, PlaneDue::Read(reads::Due::Answer(request, head)))?;
                }
                reads::Effect::Cancel(timer) => timer.get().cancel(),
            }
        }
        Ok(())
    }

    /// The request an answer echoes, as the engine compares it (`None` when it echoes `None`).
    fn echo(response: &Bound<'_, PyAny>) -> PyResult<Option<Obj>> {
        let request = msg::field!(response, "request")?;
        Ok((!request.is_none()).then(|| Obj(request.unbind())))
    }

    /// `Broker._answers_request_in_flight`: the engine's answer-identity rule.
    fn answers(&self, b: i64, response: &Bound<'_, PyAny>) -> PyResult<bool> {
        let echo = Self::echo(response)?;
        self.edit(b, |e| e.take_answer(echo.as_ref()))
    }

    fn on_fetch_response(me: &Bound<'_, Self>, b: i64, response: &Bound<'_, PyAny>) -> PyResult<()> {
        let this = me.get();
        if !this.answers(b, response)? {
            return Ok(());
        }
        let p = this.parts(me.py(), b)?;
        let request = msg::fetch_request(&msg::field!(response, "request")?)?;
        let answer = msg::fetch_response(response)?;
        let action = p.replica.get().with(me.py(), |r, log| r.handle_fetch_response(log, &request, &answer));
        let effects = this.edit(b, |e| e.after_fetch_response(action))?;
        Self::run(me, &p, effects)
    }

    fn on_offsets_response(me: &Bound<'_, Self>, b: i64, response: &Bound<'_, PyAny>) -> PyResult<()> {
        let this = me.get();
        if !this.answers(b, response)? {
            return Ok(());
        }
        let p = this.parts(me.py(), b)?;
        let request = msg::offsets_request(&msg::field!(response, "request")?)?;
        let answer = msg::offsets_response(response)?;
        let action = p.replica.get().with(me.py(), |r, log| r.handle_offsets_for_leader_epoch_response(log, &request, &answer));
        let effects = this.edit(b, |e| e.after_offsets_response(action))?;
        Self::run(me, &p, effects)
    }

    /// `Broker.on_connection_reset`: the engine decides whether the fetch in flight fails.
    fn on_connection_reset(me: &Bound<'_, Self>, b: i64, peer: &Bound<'_, PyAny>) -> PyResult<()> {
        let p = me.get().parts(me.py(), b)?;
        let alive = liveness(&p.broker)?.alive;
        let effects = me.get().edit(b, |e| e.reset(peer_id(peer), alive))?;
        Self::run(me, &p, effects)
    }

    /// `Broker.on_fetch`: the replica reads for the fetch; the engine answers or parks it.
    fn on_fetch(me: &Bound<'_, Self>, b: i64, request: &Bound<'_, PyAny>) -> PyResult<()> {
        let (this, py) = (me.get(), me.py());
        let p = this.parts(py, b)?;
        let req = msg::fetch_request(request)?;
        let now = this.now(py);
        let (response, proposal) = p.replica.get().with(py, |r, log| r.handle_fetch(log, &req, now));
        let effects = this.edit(b, |e| e.serve(Obj(request.clone().unbind()), req.replica_id, response, proposal))?;
        Self::run(me, &p, effects)
    }

    /// `Broker.on_offsets_for_leader_epoch`.
    fn on_offsets(me: &Bound<'_, Self>, b: i64, request: &Bound<'_, PyAny>) -> PyResult<()> {
        let (this, py) = (me.get(), me.py());
        let p = this.parts(py, b)?;
        let req = msg::offsets_request(request)?;
        let response = p.replica.get().with(py, |r, log| r.handle_offsets_for_leader_epoch(log, &req));
        let effects = this.edit(b, |e| e.serve_offsets(Obj(request.clone().unbind()), req.replica_id, response))?;
        Self::run(me, &p, effects)
    }

    fn handle(me: &Bound<'_, Self>, b: i64, handler: Handler, message: &Bound<'_, PyAny>) -> PyResult<()> {
        match handler {
            Handler::Fetch => Self::on_fetch(me, b, message),
            Handler::FetchResponse => Self::on_fetch_response(me, b, message),
            Handler::Offsets => Self::on_offsets(me, b, message),
            Handler::OffsetsResponse => Self::on_offsets_response(me, b, message),
            Handler::ConnectionReset => Self::on_connection_reset(me, b, message),
            Handler::Produce => Self::on_produce(me, b, message),
            Handler::ClientDisconnect => Self::on_client_disconnect(me, b, message),
            Handler::ConsumerFetch => Self::on_consumer_fetch(me, b, message),
        }
    }
}

#[pymethods]
impl PyFetchPlane {
    /// The plane of one simulated cluster: its kernel and network, the context's node table
    /// (`SimContext._nodes`, what posts are routed by), the replica request timeout, and the
    /// brokers' `replica.fetch.backoff.ms`, `replica.fetch.wait.max.ms` and whether fetches
    /// carry the broker epoch (KRaft, KIP-903).
    ///
    /// For consumer reads: `held_reads` (a generation before diverging-epoch, whose redirects
    /// and followers' empty reads wait out the whole wait),
    /// `no_timestamp_lookup` (a release before 0.10.1) and `rack_selector`
    /// (`replica.selector.class` set).
    #[new]
    #[pyo3(signature = (kernel, network, nodes, request_timeout_ms, backoff_ms, wait_max_ms, kraft, *,
                        held_reads=false, no_timestamp_lookup=false, rack_selector=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(kernel: Py<PyKernel>, network: Py<PyNetwork>, nodes: Py<PyDict>, request_timeout_ms: i64,
           backoff_ms: i64, wait_max_ms: i64, kraft: bool, held_reads: bool, no_timestamp_lookup: bool,
           rack_selector: bool) -> Self {
        let config = FetchConfig { request_timeout_ms, backoff_ms, wait_max_ms, kraft };
        let read_rules = ReadRules { no_timestamp_lookup, rack_selector };
        Self { kernel, network, nodes, config, held_reads, read_rules, brokers: Mutex::new(FxHashMap::default()) }
    }

    /// Take over broker `b`'s replication traffic (`broker.replica` must be a Rust replica).
    /// Returns the handlers to set on the broker instance, by method name.
    fn attach(slf: &Bound<'_, Self>, b: i64, broker: &Bound<'_, PyAny>) -> PyResult<Py<PyDict>> {
        let py = slf.py();
        let replica = attr(broker, intern!(py, "replica"))?;
        let replica = replica.cast::<PyReplica>().map_err(|_| {
            PyTypeError::new_err(format!("FetchPlane.attach: broker {b}'s replica is not an epochlab._core.Replica"))
        })?;
        let name = b.into_pyobject(py)?.into_any().unbind();
        let attached = Attached { broker: broker.clone().unbind(), replica: replica.clone().unbind(), name,
                                  engine: Fetcher::new(slf.get().config), produce: ProducePath::new(), reads: ConsumerReads::new() };
        let replaced = lock(&slf.get().brokers).insert(b, attached);
        drop(replaced);
        let handlers = PyDict::new(py);
        for (method, handler) in HANDLERS {
            handlers.set_item(method, PlaneHandler { plane: slf.clone().unbind(), broker: b, handler })?;
        }
        Ok(handlers.unbind())
    }

    /// `Broker._start_fetcher`: a fetch to the previous leader is abandoned; fetch anew.
    fn start_fetcher(me: &Bound<'_, Self>, b: i64) -> PyResult<()> {
        Self::step(me, b, |e| e.start())
    }

    /// `Broker._answer_parked_fetches`: answer every parked fetch now.
    fn answer_parked_fetches(me: &Bound<'_, Self>, b: i64) -> PyResult<()> {
        Self::step(me, b, |e| e.answer_parked())
    }

    /// Forget the parked fetches (a crash or shutdown); their timers find nothing.
    fn clear_parked_fetches(&self, b: i64) -> PyResult<()> {
        let gone = self.edit(b, |e| e.clear_parked())?;
        drop(gone);
        Ok(())
    }

    /// `Broker._stop_fetching`: the request in flight is given up, nothing sent in its place.
    fn abandon_fetcher(me: &Bound<'_, Self>, b: i64) -> PyResult<()> {
        Self::step(me, b, |e| e.abandon())
    }

    /// The fetcher stops (`Broker._halt`): no request in flight, its timer cancelled.
    fn stop_fetcher(me: &Bound<'_, Self>, b: i64) -> PyResult<()> {
        Self::step(me, b, |e| e.stop())
    }

    /// `Broker._fetch_timeout(token)`: give up on the request in flight if `token` is the
    /// fetcher's current one.
    fn fetch_timeout(me: &Bound<'_, Self>, b: i64, token: u64) -> PyResult<()> {
        Self::step(me, b, |e| e.timeout(token))
    }

    /// `Broker._answers_request_in_flight(response)`: whether `response.request` is the
    /// request in flight (then it no longer is).
    fn answers_in_flight(&self, b: i64, response: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.answers(b, response)
    }

    /// `(token, the request in flight or None, number of parked fetches)` of broker `b`.
    fn fetch_state(&self, py: Python<'_>, b: i64) -> PyResult<(u64, Option<Py<PyAny>>, usize)> {
        self.edit(b, |e| (e.token(), e.in_flight().map(|r| r.0.clone_ref(py)), e.parked_count()))
    }

    /// `Broker._try_complete_delayed`: every purgatory, then the broker's `_note_state`.
    fn try_complete_delayed(me: &Bound<'_, Self>, b: i64) -> PyResult<()> {
        let p = me.get().parts(me.py(), b)?;
        Self::complete_delayed(me, &p)
    }

    /// `Broker._answer_parked_produces(force_error)`: answer the parked produce requests that
    /// are done; with `force_error` (a Kafka error name) every one, with that error.
    #[pyo3(signature = (b, force_error=None))]
    fn answer_parked_produces(me: &Bound<'_, Self>, b: i64, force_error: Option<&str>) -> PyResult<()> {
        let force = forced(force_error)?;
        let p = me.get().parts(me.py(), b)?;
        Self::complete_produces(me, &p, force)
    }

    /// `Broker._append_produce(request)` (after a KIP-890 verification passed).
    fn append_produce(me: &Bound<'_, Self>, b: i64, request: &Bound<'_, PyAny>) -> PyResult<()> {
        let head = produce_head(request)?;
        let p = me.get().parts(me.py(), b)?;
        Self::append(me, &p, request, head)
    }

    /// `Broker._answer_produce(request, response)` with a response the broker made (a
    /// verification that failed or timed out).
    fn answer_produce(me: &Bound<'_, Self>, b: i64, request: &Bound<'_, PyAny>, response: &Bound<'_, PyAny>) -> PyResult<()> {
        let head = produce_head(request)?;
        let (this, py) = (me.get(), me.py());
        let now = this.now_ms(py);
        let reply = (!response.is_none()).then(|| Reply::Given(Obj(response.clone().unbind())));
        let effects = this.edit_produce(b, |e| e.answer(head, reply, now))?;
        let p = this.parts(py, b)?;
        Self::run_produce(me, &p, effects)
    }

    /// A crash: the parked produce requests are forgotten (their timers find a dead
    /// incarnation), and so are the open connections.
    fn forget_produces(&self, b: i64) -> PyResult<()> {
        let gone = self.edit_produce(b, |e| e.crash())?;
        drop(gone);
        Ok(())
    }

    /// `Broker._reset_connections`: a new process has no connection open.
    fn reset_produce_connections(&self, b: i64) -> PyResult<()> {
        let gone = self.edit_produce(b, |e| e.reset_connections())?;
        drop(gone);
        Ok(())
    }

    /// How many produce requests wait in broker `b`'s purgatory.
    fn parked_produces(&self, b: i64) -> PyResult<usize> {
        self.edit_produce(b, |e| e.parked_count())
    }

    /// `Broker._check_parked_reads`: answer the parked consumer fetches that have something
    /// to read now (tried again only when the replica's role, epoch, HW or log end moved).
    fn check_parked_reads(me: &Bound<'_, Self>, b: i64) -> PyResult<()> {
        let p = me.get().parts(me.py(), b)?;
        Self::check_reads(me, &p)
    }

    /// `Broker._drop_parked_reads` (a crash or shutdown): the parked consumer fetches are
    /// forgotten, their timers cancelled.
    fn drop_parked_reads(&self, b: i64) -> PyResult<()> {
        let (cancels, requests) = self.edit_reads(b, |e| e.drop_all())?;
        for effect in cancels {
            if let reads::Effect::Cancel(timer) = effect {
                timer.get().cancel();
            }
        }
        drop(requests);
        Ok(())
    }

    /// How many consumer fetches wait in broker `b`'s purgatory.
    fn parked_reads(&self, b: i64) -> PyResult<usize> {
        self.edit_reads(b, |e| e.parked_count())
    }

    /// `Broker.on_write_txn_markers` after the replica wrote the marker at `offset`: it waits
    /// in the produce purgatory up to `timeout_ms` for the high watermark; the answer goes to
    /// `to`.
    fn park_marker(me: &Bound<'_, Self>, b: i64, request: &Bound<'_, PyAny>, offset: u64, to: String, timeout_ms: i64) -> PyResult<()> {
        let request_id: i64 = msg::attr!(request, "request_id")?;
        let effects = me.get().edit_produce(b, |e| e.park_marker(request_id, to, offset, timeout_ms))?;
        let p = me.get().parts(me.py(), b)?;
        Self::run_produce(me, &p, effects)
    }

    /// `Broker._answer_parked_markers(force_error)`: answer the parked transaction markers
    /// that are done; with `force_error` (a Kafka error name) every one, with that error.
    #[pyo3(signature = (b, force_error=None))]
    fn answer_parked_markers(me: &Bound<'_, Self>, b: i64, force_error: Option<&str>) -> PyResult<()> {
        let force = forced(force_error)?;
        let p = me.get().parts(me.py(), b)?;
        Self::complete_markers(me, &p, force)
    }

    /// The parked transaction markers are forgotten, their timers cancelled (a crash or a
    /// shutdown: `Broker._clear_transactional`).
    fn clear_markers(&self, b: i64) -> PyResult<()> {
        for timer in self.edit_produce(b, |e| e.clear_markers())? {
            timer.get().cancel();
        }
        Ok(())
    }

    /// How many transaction markers wait in broker `b`'s purgatory.
    fn parked_markers(&self, b: i64) -> PyResult<usize> {
        self.edit_produce(b, |e| e.parked_marker_count())
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.kernel)?;
        visit.call(&self.network)?;
        visit.call(&self.nodes)?;
        let Ok(brokers) = self.brokers.try_lock() else { return Ok(()) };
        for a in brokers.values() {
            visit.call(&a.broker)?;
            visit.call(&a.replica)?;
            visit.call(&a.name)?;
            for request in a.engine.requests() {
                visit.call(&request.0)?;
            }
            for timer in a.engine.timers() {
                visit.call(timer)?;
            }
            for request in a.produce.requests() {
                visit.call(&request.0)?;
            }
            for timer in a.produce.timers() {
                visit.call(timer)?;
            }
            for timer in a.reads.timers() {
                visit.call(timer)?;
            }
        }
        Ok(())
    }

    fn __clear__(&self) {
        let gone = self.brokers.try_lock().map(|mut f| std::mem::take(&mut *f));
        drop(gone);
    }
}

/// A broker's message handler for one replication method: `handler(message, src)`.
#[pyclass(frozen, name = "FetchPlaneHandler", module = "epochlab._core")]
pub(crate) struct PlaneHandler {
    plane: Py<PyFetchPlane>,
    broker: i64,
    handler: Handler,
}

#[pymethods]
impl PlaneHandler {
    fn __call__(&self, py: Python<'_>, message: &Bound<'_, PyAny>, src: &Bound<'_, PyAny>) -> PyResult<()> {
        let _ = src;
        PyFetchPlane::handle(self.plane.bind(py), self.broker, self.handler, message)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.plane)
    }

    fn __repr__(&self) -> String {
        let name = HANDLERS.iter().find(|(_, h)| std::mem::discriminant(h) == std::mem::discriminant(&self.handler))
            .map_or("?", |(n, _)| n);
        format!("FetchPlaneHandler(broker={}, {name})", self.broker)
    }
}

/// A timer of the plane: hands its [`Due`] to the engine, which runs it only while the broker
/// is alive in the incarnation that set it (`Broker._if_alive`).
#[pyclass(frozen, name = "FetchPlaneTimer", module = "epochlab._core")]
pub(crate) struct PlaneTimer {
    plane: Py<PyFetchPlane>,
    broker: i64,
    incarnation: i64,
    due: Mutex<Option<PlaneDue>>,
}

#[pymethods]
impl PlaneTimer {
    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        let me = self.plane.bind(py);
        let p = me.get().parts(py, self.broker)?;
        let live = liveness(&p.broker)?;
        let Some(due) = lock(&self.due).take() else { return Ok(()) };
        match due {
            PlaneDue::Fetch(due) => {
                let effects = me.get().edit(self.broker, |e| e.fire(&due, self.incarnation, live))?;
                drop(due);
                PyFetchPlane::run(me, &p, effects)
            }
            PlaneDue::Produce(due) => {
                let now = me.get().now_ms(py);
                let effects = me.get().edit_produce(self.broker, |e| e.fire(due, self.incarnation, live, now))?;
                PyFetchPlane::run_produce(me, &p, effects)
            }
            PlaneDue::Read(due) => {
                let this = me.get();
                let replica = p.replica.get();
                let effects = this.edit_reads(self.broker, |e| {
                    e.fire(due, self.incarnation, live, |r, _| this.read_for_consumer(replica, py, &r.req, r.request_id))
                })?;
                PyFetchPlane::run_reads(me, &p, effects)
            }
        }
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.plane)?;
        if let Ok(due) = self.due.try_lock() {
            match &*due {
                Some(PlaneDue::Fetch(Due::Expire(request))) | Some(PlaneDue::Produce(produce::Due::Handle { request, .. })) => {
                    visit.call(&request.0)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn __clear__(&self) {
        let gone = self.due.try_lock().map(|mut d| d.take());
        drop(gone);
    }
}

/// What the produce path reads of a produce request (`epochlab.sim.messages.ProduceRequest`).
fn produce_head(request: &Bound<'_, PyAny>) -> PyResult<Head> {
    let acks: String = msg::attr!(request, "acks")?;
    let acks = match acks.as_str() {
        "0" => Acks::None,
        "1" => Acks::Leader,
        "all" | "-1" => Acks::All,
        _ => return Err(PyTypeError::new_err(format!("FetchPlane: acks {acks:?} is not \"0\", \"1\" or \"all\""))),
    };
    Ok(Head {
        client: msg::attr!(request, "client")?,
        request_id: msg::attr!(request, "request_id")?,
        acks,
        timeout_ms: msg::attr!(request, "timeout_ms")?,
    })
}

/// What the consumer reads read of a consumer fetch (`epochlab.sim.messages.ConsumerFetchRequest`).
fn read_head(request: &Bound<'_, PyAny>, req: &ConsumerFetchRequest) -> PyResult<ReadHead> {
    Ok(ReadHead {
        client: msg::attr!(request, "client")?,
        max_wait_ms: msg::attr!(request, "max_wait_ms")?,
        fetch_offset: req.fetch_offset.map(|o| o.0),
        validate_epoch: req.validate_epoch.is_some(),
        read_committed: req.isolation_level == IsolationLevel::ReadCommitted,
    })
}

/// The Kafka error a forced completion names (`None`: no force); an unknown name is a
/// `TypeError`.
fn forced(force_error: Option<&str>) -> PyResult<Option<KafkaError>> {
    force_error.map(|name| {
        KafkaError::named(name).ok_or_else(|| PyTypeError::new_err(format!("FetchPlane: no Kafka error named {name:?}")))
    }).transpose()
}
