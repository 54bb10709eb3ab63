//! `FetchPlane`: the replication traffic of brokers whose replicas are Rust replicas (the
//! `rust` backend), run without Python frames: the follower's fetcher (one request in flight,
//! the request timeout, `replica.fetch.backoff.ms`, a connection reset), the leader's fetch
//! serving with its long poll (`replica.fetch.wait.max.ms`) and OffsetsForLeaderEpoch.
//!
//! It is the statement of `epochlab.sim.broker.Broker`'s fetcher and fetch-serving methods,
//! step for step (the `python` and `reference` backends run those): the same replica calls,
//! posts and timers in the same order, so every run is byte-identical to theirs. Python is
//! called only where the broker's own state is involved, and only when the Python statement
//! would do something there:
//!
//! * `_drain_events()` when the replica holds events;
//! * `_note_state()` when the log's `state_key()` differs from the broker's `_seen_state`
//!   (the method returns at once when they are equal);
//! * `_try_complete_delayed()` when a purgatory holds something (`_parked_produces`,
//!   `_parked_markers`, `_parked_reads`), else the `_note_state()` rule;
//! * `_check_parked_reads()` when `_parked_reads` is not empty;
//! * `_send_alter_partition(proposal)` and `_halt()` whenever the statement calls them.
//!
//! The broker's message handlers (`on_fetch`, `on_fetch_response`,
//! `on_offsets_for_leader_epoch`, `on_offsets_for_leader_epoch_response`,
//! `on_connection_reset`) become `FetchPlaneHandler`s set on the broker instance
//! (`Broker.use_plane`), so a delivery calls into Rust directly; the timers are
//! `FetchPlaneTimer`s. No lock is held while Python runs: a callback may come back into the
//! plane (a `_try_complete_delayed` answering parked fetches).

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
use super::messages::{self as msg, Builder};
use super::replica::PyReplica;
use super::sim::{PyKernel, PyNetwork, PyTimer};
use crate::replica::follower::FollowerRequest;
use crate::replica::FollowerAction;

/// One broker's side of the traffic: the fields `Broker` keeps for it in Python.
struct Fetcher {
    broker: Py<PyAny>,
    replica: Py<PyReplica>,
    /// The broker's node name (its id, a Python int).
    name: Py<PyAny>,
    /// `_fetch_token`: counts the fetcher's requests and restarts; a timer of an older one
    /// does nothing.
    token: u64,
    /// `_fetch_timer`: the request timeout or the backoff of the fetch in flight.
    timer: Option<Py<PyTimer>>,
    /// `_fetch_dst`: (leader, token) of the request in flight.
    dst: Option<(u32, u64)>,
    /// `_fetch_sent`: that request (answers echo it; identity tells).
    sent: Option<Py<PyAny>>,
    /// `_parked_fetches`: follower fetches held by this leader, with their wait timers.
    parked: Vec<(Py<PyAny>, Py<PyTimer>)>,
}

#[pyclass(frozen, name = "FetchPlane", module = "epochlab._core")]
pub(crate) struct PyFetchPlane {
    kernel: Py<PyKernel>,
    network: Py<PyNetwork>,
    nodes: Py<PyDict>,
    request_timeout_ms: i64,
    backoff_ms: i64,
    wait_max_ms: i64,
    kraft: bool,
    fetchers: Mutex<FxHashMap<i64, Fetcher>>,
}

#[derive(Clone, Copy)]
enum Handler {
    Fetch,
    FetchResponse,
    Offsets,
    OffsetsResponse,
    ConnectionReset,
}

const HANDLERS: [(&str, Handler); 5] = [
    ("on_fetch", Handler::Fetch),
    ("on_fetch_response", Handler::FetchResponse),
    ("on_offsets_for_leader_epoch", Handler::Offsets),
    ("on_offsets_for_leader_epoch_response", Handler::OffsetsResponse),
    ("on_connection_reset", Handler::ConnectionReset),
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

/// `(alive, incarnation)` of the Python broker.
fn liveness(broker: &Bound<'_, PyAny>) -> PyResult<(bool, i64)> {
    let py = broker.py();
    let incarnation = attr(broker, intern!(py, "incarnation"))?;
    let incarnation = incarnation.extract().map_err(|_| {
        PyTypeError::new_err(format!("FetchPlane: the broker's incarnation is not an int: {incarnation:?}"))
    })?;
    Ok((attr(broker, intern!(py, "alive"))?.is_truthy()?, incarnation))
}

impl PyFetchPlane {
    /// `(broker, replica, name)` of broker `b`, cloned out of the lock.
    fn parts(&self, py: Python<'_>, b: i64) -> PyResult<(Py<PyAny>, Py<PyReplica>, Py<PyAny>)> {
        let fetchers = lock(&self.fetchers);
        let f = fetchers.get(&b).ok_or_else(|| unknown(b))?;
        Ok((f.broker.clone_ref(py), f.replica.clone_ref(py), f.name.clone_ref(py)))
    }

    fn edit<T>(&self, b: i64, f: impl FnOnce(&mut Fetcher) -> T) -> PyResult<T> {
        let mut fetchers = lock(&self.fetchers);
        Ok(f(fetchers.get_mut(&b).ok_or_else(|| unknown(b))?))
    }

    fn now(&self, py: Python<'_>) -> i64 {
        self.kernel.bind(py).get().now()
    }

    fn schedule(&self, py: Python<'_>, delay_ms: i64, timer: PlaneTimer) -> PyResult<Py<PyTimer>> {
        let callback = Py::new(py, timer)?.into_any();
        let at = self.now(py).saturating_add(delay_ms.max(0));
        self.kernel.bind(py).get().schedule_call(py, at, callback, None)
    }

    fn post(&self, src: &Bound<'_, PyAny>, dst: u32, method: &'static str, message: &Bound<'_, PyAny>, kind: &str) -> PyResult<()> {
        let py = src.py();
        let dst = dst.into_pyobject(py)?.into_any();
        self.network.bind(py).get().post(src, &dst, self.nodes.bind(py), &msg::interned(py, method), message, kind, None, None)?;
        Ok(())
    }

    /// `Broker._drain_events()`, when the replica holds events.
    fn drain(broker: &Bound<'_, PyAny>, replica: &Bound<'_, PyReplica>) -> PyResult<()> {
        if replica.get().with(broker.py(), |r, _| !r.events.is_empty()) {
            call(broker, intern!(broker.py(), "_drain_events"), ())?;
        }
        Ok(())
    }

    /// `Broker._note_state()`, when it has something to do.
    fn note_state(broker: &Bound<'_, PyAny>, replica: &Bound<'_, PyReplica>) -> PyResult<()> {
        let py = broker.py();
        let now = replica.get().with(py, |_, log| {
            (log.log_end_offset().0, log.high_watermark().0, log.batch_count(), log.log_start_offset().0)
        });
        let seen = attr(broker, intern!(py, "_seen_state"))?;
        let same = match seen.extract::<(u64, u64, usize, u64)>() {
            Ok(s) => s == now && seen.is_exact_instance_of::<PyTuple>(),
            Err(_) => false,
        };
        if !same {
            call(broker, intern!(py, "_note_state"), ())?;
        }
        Ok(())
    }

    /// `Broker._try_complete_delayed()`: the purgatories, then `_note_state()`.
    fn try_complete_delayed(broker: &Bound<'_, PyAny>, replica: &Bound<'_, PyReplica>) -> PyResult<()> {
        let py = broker.py();
        for name in [intern!(py, "_parked_produces"), intern!(py, "_parked_markers"), intern!(py, "_parked_reads")] {
            if attr(broker, name)?.is_truthy()? {
                call(broker, intern!(py, "_try_complete_delayed"), ())?;
                return Ok(());
            }
        }
        Self::note_state(broker, replica)
    }

    /// `Broker._check_parked_reads()`, when reads are held.
    fn check_parked_reads(broker: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = broker.py();
        if attr(broker, intern!(py, "_parked_reads"))?.is_truthy()? {
            call(broker, intern!(py, "_check_parked_reads"), ())?;
        }
        Ok(())
    }

    // -- follower ------------------------------------------------------------------------

    /// `Broker._send_next_fetch`.
    fn send_next_fetch(me: &Bound<'_, Self>, b: i64) -> PyResult<()> {
        let (this, py) = (me.get(), me.py());
        let (broker, replica, name) = this.parts(py, b)?;
        let (broker, replica, name) = (broker.bind(py), replica.bind(py), name.bind(py));
        let (alive, incarnation) = liveness(broker)?;
        if !alive {
            return Ok(());
        }
        let (next, leader) = replica.get().with(py, |r, log| (r.next_request(log), r.leader_id));
        let (Some(next), Some(leader)) = (next, leader) else { return Ok(()) };
        let token = this.edit(b, |f| {
            f.token += 1;
            f.token
        })?;
        let leader_name = leader.0.into_pyobject(py)?.into_any();
        if !this.network.bind(py).get().is_alive(&leader_name)? {
            return Self::backoff(me, b, token, incarnation);
        }
        let builder = Builder::new(py);
        let request = match next {
            FollowerRequest::Fetch(mut f) => {
                if this.kraft {
                    // KIP-903: fetches carry the broker epoch
                    f.broker_epoch = Some(u64::try_from(incarnation).map_err(|_| {
                        PyTypeError::new_err(format!("FetchPlane: broker {b} has incarnation {incarnation}"))
                    })?);
                }
                let request = builder.fetch_request(&f)?;
                this.post(name, leader.0, "on_fetch", &request, "fetch")?;
                request
            }
            FollowerRequest::OffsetsForLeaderEpoch(o) => {
                let request = builder.offsets_request(&o)?;
                this.post(name, leader.0, "on_offsets_for_leader_epoch", &request, "fetch")?;
                request
            }
        };
        this.edit(b, |f| {
            f.dst = Some((leader.0, token));
            f.sent = Some(request.unbind());
        })?;
        let timer = this.schedule(py, this.request_timeout_ms,
                                  PlaneTimer::new(me, b, incarnation, Due::Timeout(token))?)?;
        this.edit(b, |f| f.timer = Some(timer))
    }

    /// `Broker._backoff`: the next fetch after `replica.fetch.backoff.ms`.
    fn backoff(me: &Bound<'_, Self>, b: i64, token: u64, incarnation: i64) -> PyResult<()> {
        let (this, py) = (me.get(), me.py());
        let timer = this.schedule(py, this.backoff_ms, PlaneTimer::new(me, b, incarnation, Due::Retry(token))?)?;
        this.edit(b, |f| f.timer = Some(timer))
    }

    fn cancel_timer(&self, py: Python<'_>, b: i64) -> PyResult<()> {
        if let Some(timer) = self.edit(b, |f| f.timer.as_ref().map(|t| t.clone_ref(py)))? {
            timer.get().cancel();
        }
        Ok(())
    }

    /// `Broker._answers_request_in_flight`.
    fn answers(&self, b: i64, response: &Bound<'_, PyAny>) -> PyResult<bool> {
        let request = msg::field!(response, "request")?;
        // `request is _fetch_sent`, None included
        self.edit(b, |f| {
            let same = match &f.sent {
                Some(sent) => request.is(sent),
                None => request.is_none(),
            };
            if same {
                f.sent = None;
            }
            same
        })
    }

    /// `Broker._after_response`.
    fn after_response(me: &Bound<'_, Self>, b: i64, broker: &Bound<'_, PyAny>, replica: &Bound<'_, PyReplica>,
                      action: FollowerAction) -> PyResult<()> {
        let (this, py) = (me.get(), me.py());
        Self::drain(broker, replica)?;
        Self::note_state(broker, replica)?;
        match action {
            FollowerAction::Discard => return Ok(()),
            FollowerAction::Halt => {
                call(broker, intern!(py, "_halt"), ())?;
                return Ok(());
            }
            _ => {}
        }
        this.edit(b, |f| f.dst = None)?;
        this.cancel_timer(py, b)?;
        match action {
            FollowerAction::Continue => Self::send_next_fetch(me, b),
            FollowerAction::Backoff => {
                let token = this.edit(b, |f| f.token)?;
                let (_, incarnation) = liveness(broker)?;
                Self::backoff(me, b, token, incarnation)
            }
            _ => Ok(()),
        }
    }

    /// `_answers_request_in_flight`, then `_after_response` of what `step` makes of the answer
    /// (the replica's handling of it); the broker, when the answer was taken.
    fn on_answer<'py>(me: &Bound<'py, Self>, b: i64, response: &Bound<'py, PyAny>,
                      step: impl FnOnce(&Bound<'py, PyReplica>) -> PyResult<FollowerAction>)
                      -> PyResult<Option<Bound<'py, PyAny>>> {
        let (this, py) = (me.get(), me.py());
        if !this.answers(b, response)? {
            return Ok(None);
        }
        let (broker, replica, _) = this.parts(py, b)?;
        let (broker, replica) = (broker.into_bound(py), replica.into_bound(py));
        let action = step(&replica)?;
        Self::after_response(me, b, &broker, &replica, action)?;
        Ok(Some(broker))
    }

    fn on_fetch_response(me: &Bound<'_, Self>, b: i64, response: &Bound<'_, PyAny>) -> PyResult<()> {
        let taken = Self::on_answer(me, b, response, |replica| {
            let request = msg::fetch_request(&msg::field!(response, "request")?)?;
            let answer = msg::fetch_response(response)?;
            Ok(replica.get().with(replica.py(), |r, log| r.handle_fetch_response(log, &request, &answer)))
        })?;
        match taken {
            Some(broker) => Self::check_parked_reads(&broker), // a follower's HW moved: its fetch-from-follower reads
            None => Ok(()),
        }
    }

    fn on_offsets_response(me: &Bound<'_, Self>, b: i64, response: &Bound<'_, PyAny>) -> PyResult<()> {
        Self::on_answer(me, b, response, |replica| {
            let request = msg::offsets_request(&msg::field!(response, "request")?)?;
            let answer = msg::offsets_response(response)?;
            Ok(replica.get().with(replica.py(), |r, log| r.handle_offsets_for_leader_epoch_response(log, &request, &answer)))
        })?;
        Ok(())
    }

    /// `Broker.on_connection_reset`: the leader's process died; the fetch in flight to it
    /// fails at once and the fetcher backs off.
    fn on_connection_reset(me: &Bound<'_, Self>, b: i64, peer: &Bound<'_, PyAny>) -> PyResult<()> {
        let (this, py) = (me.get(), me.py());
        let (broker, _, _) = this.parts(py, b)?;
        let (token, dst) = this.edit(b, |f| (f.token, f.dst))?;
        let Some((leader, sent_token)) = dst else { return Ok(()) };
        if sent_token != token || !peer.eq(leader)? {
            return Ok(());
        }
        let (alive, incarnation) = liveness(broker.bind(py))?;
        if !alive {
            return Ok(());
        }
        this.cancel_timer(py, b)?;
        this.edit(b, |f| {
            f.dst = None;
            f.sent = None;
        })?;
        Self::backoff(me, b, token, incarnation)
    }

    // -- leader --------------------------------------------------------------------------

    /// `Broker.on_fetch`: serve a follower fetch now, or park it while it would return no data.
    fn on_fetch(me: &Bound<'_, Self>, b: i64, request: &Bound<'_, PyAny>) -> PyResult<()> {
        let (this, py) = (me.get(), me.py());
        let (broker, replica, name) = this.parts(py, b)?;
        let (broker, replica, name) = (broker.bind(py), replica.bind(py), name.bind(py));
        let req = msg::fetch_request(request)?;
        let now = u64::try_from(this.now(py)).unwrap_or(0);
        let (resp, proposal) = replica.get().with(py, |r, log| r.handle_fetch(log, &req, now));
        let refused = resp.error.is_some() || resp.diverging_epoch.is_some();
        let empty = resp.error.is_none() && resp.batches.is_empty() && resp.diverging_epoch.is_none();
        let builder = Builder::new(py);
        let response = builder.fetch_response(request, resp)?;
        let proposal = proposal.map(|p| builder.alter_partition_request(&p)).transpose()?;
        if refused {
            Self::drain(broker, replica)?; // a refused fetch, or a diverging one taken as the LEO (KAFKA-13141)
        }
        if let Some(p) = proposal {
            call(broker, intern!(py, "_send_alter_partition"), (p,))?;
        }
        Self::try_complete_delayed(broker, replica)?;
        if empty && this.wait_max_ms > 0 {
            let (_, incarnation) = liveness(broker)?;
            let due = Due::Expire(request.clone().unbind());
            let timer = this.schedule(py, this.wait_max_ms, PlaneTimer::new(me, b, incarnation, due)?)?;
            return this.edit(b, |f| f.parked.push((request.clone().unbind(), timer)));
        }
        this.post(name, req.replica_id.0, "on_fetch_response", &response, "")
    }

    /// `Broker._complete_fetch`: answer a parked fetch with what a read gives now.
    fn complete_fetch(&self, py: Python<'_>, b: i64, request: &Bound<'_, PyAny>) -> PyResult<()> {
        let (broker, replica, name) = self.parts(py, b)?;
        let (broker, replica, name) = (broker.bind(py), replica.bind(py), name.bind(py));
        let req = msg::fetch_request(request)?;
        let now = u64::try_from(self.now(py)).unwrap_or(0);
        let (resp, proposal) = replica.get().with(py, |r, log| r.handle_fetch(log, &req, now));
        let builder = Builder::new(py);
        let response = builder.fetch_response(request, resp)?;
        if let Some(p) = proposal.map(|p| builder.alter_partition_request(&p)).transpose()? {
            call(broker, intern!(py, "_send_alter_partition"), (p,))?;
        }
        self.post(name, req.replica_id.0, "on_fetch_response", &response, "")?;
        Self::try_complete_delayed(broker, replica)
    }

    /// `Broker._expire_fetch`: the end of a parked fetch's wait.
    fn expire_fetch(&self, py: Python<'_>, b: i64, request: &Py<PyAny>) -> PyResult<()> {
        let found = self.edit(b, |f| {
            let i = f.parked.iter().position(|(parked, _)| parked.is(request))?;
            Some(f.parked.remove(i))
        })?;
        match found {
            Some((request, _timer)) => self.complete_fetch(py, b, request.bind(py)),
            None => Ok(()),
        }
    }

    fn on_offsets(&self, py: Python<'_>, b: i64, request: &Bound<'_, PyAny>) -> PyResult<()> {
        let (_, replica, name) = self.parts(py, b)?;
        let req = msg::offsets_request(request)?;
        let resp = replica.bind(py).get().with(py, |r, log| r.handle_offsets_for_leader_epoch(log, &req));
        let response = Builder::new(py).offsets_response(request, resp)?;
        self.post(name.bind(py), req.replica_id.0, "on_offsets_for_leader_epoch_response", &response, "")
    }

    fn handle(me: &Bound<'_, Self>, b: i64, handler: Handler, message: &Bound<'_, PyAny>) -> PyResult<()> {
        let (this, py) = (me.get(), me.py());
        match handler {
            Handler::Fetch => Self::on_fetch(me, b, message),
            Handler::FetchResponse => Self::on_fetch_response(me, b, message),
            Handler::Offsets => this.on_offsets(py, b, message),
            Handler::OffsetsResponse => Self::on_offsets_response(me, b, message),
            Handler::ConnectionReset => Self::on_connection_reset(me, b, message),
        }
    }
}

#[pymethods]
impl PyFetchPlane {
    /// The plane of one simulated cluster: its kernel and network, the context's node table
    /// (`SimContext._nodes`, what posts are routed by), the replica request timeout, and the
    /// brokers' `replica.fetch.backoff.ms`, `replica.fetch.wait.max.ms` and whether fetches
    /// carry the broker epoch (KRaft, KIP-903).
    #[new]
    #[pyo3(signature = (kernel, network, nodes, request_timeout_ms, backoff_ms, wait_max_ms, kraft))]
    fn new(kernel: Py<PyKernel>, network: Py<PyNetwork>, nodes: Py<PyDict>, request_timeout_ms: i64,
           backoff_ms: i64, wait_max_ms: i64, kraft: bool) -> Self {
        Self { kernel, network, nodes, request_timeout_ms, backoff_ms, wait_max_ms, kraft,
               fetchers: Mutex::new(FxHashMap::default()) }
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
        lock(&slf.get().fetchers).insert(b, Fetcher {
            broker: broker.clone().unbind(),
            replica: replica.clone().unbind(),
            name,
            token: 0,
            timer: None,
            dst: None,
            sent: None,
            parked: Vec::new(),
        });
        let handlers = PyDict::new(py);
        for (method, handler) in HANDLERS {
            handlers.set_item(method, PlaneHandler { plane: slf.clone().unbind(), broker: b, handler })?;
        }
        Ok(handlers.unbind())
    }

    /// `Broker._start_fetcher`: a fetch to the previous leader is abandoned; fetch anew.
    fn start_fetcher(me: &Bound<'_, Self>, b: i64) -> PyResult<()> {
        let (this, py) = (me.get(), me.py());
        this.edit(b, |f| {
            f.token += 1;
            f.sent = None;
        })?;
        this.cancel_timer(py, b)?;
        Self::send_next_fetch(me, b)
    }

    /// `Broker._answer_parked_fetches`: answer every parked fetch now.
    fn answer_parked_fetches(&self, py: Python<'_>, b: i64) -> PyResult<()> {
        let parked = self.edit(b, |f| std::mem::take(&mut f.parked))?;
        for (request, timer) in parked {
            timer.get().cancel();
            self.complete_fetch(py, b, request.bind(py))?;
        }
        Ok(())
    }

    /// Forget the parked fetches (a crash or shutdown); their timers find nothing.
    fn clear_parked_fetches(&self, b: i64) -> PyResult<()> {
        let gone = self.edit(b, |f| std::mem::take(&mut f.parked))?;
        drop(gone);
        Ok(())
    }

    /// The fetcher stops (`Broker._halt`): no request in flight, its timer cancelled.
    fn stop_fetcher(&self, py: Python<'_>, b: i64) -> PyResult<()> {
        self.edit(b, |f| f.dst = None)?;
        self.cancel_timer(py, b)
    }

    /// `Broker._fetch_timeout(token)`: give up on the request in flight if `token` is the
    /// fetcher's current one.
    fn fetch_timeout(me: &Bound<'_, Self>, b: i64, token: u64) -> PyResult<()> {
        let (this, py) = (me.get(), me.py());
        let current = this.edit(b, |f| {
            let current = f.token == token;
            if current {
                f.sent = None; // given up: its connection is closed
            }
            current
        })?;
        if current {
            let (broker, _, _) = this.parts(py, b)?;
            let (_, incarnation) = liveness(broker.bind(py))?;
            Self::backoff(me, b, token, incarnation)?;
        }
        Ok(())
    }

    /// `Broker._answers_request_in_flight(response)`: whether `response.request` is the
    /// request in flight (then it no longer is).
    fn answers_in_flight(&self, b: i64, response: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.answers(b, response)
    }

    /// `(token, the request in flight or None, number of parked fetches)` of broker `b`.
    fn fetch_state(&self, py: Python<'_>, b: i64) -> PyResult<(u64, Option<Py<PyAny>>, usize)> {
        self.edit(b, |f| (f.token, f.sent.as_ref().map(|s| s.clone_ref(py)), f.parked.len()))
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.kernel)?;
        visit.call(&self.network)?;
        visit.call(&self.nodes)?;
        let Ok(fetchers) = self.fetchers.try_lock() else { return Ok(()) };
        for f in fetchers.values() {
            visit.call(&f.broker)?;
            visit.call(&f.replica)?;
            visit.call(&f.name)?;
            if let Some(t) = &f.timer {
                visit.call(t)?;
            }
            if let Some(s) = &f.sent {
                visit.call(s)?;
            }
            for (request, timer) in &f.parked {
                visit.call(request)?;
                visit.call(timer)?;
            }
        }
        Ok(())
    }

    fn __clear__(&self) {
        let gone = self.fetchers.try_lock().map(|mut f| std::mem::take(&mut *f));
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

enum Due {
    /// `_fetch_timeout(token)`
    Timeout(u64),
    /// `_backoff`'s retry of token
    Retry(u64),
    /// `_expire_fetch(request)`
    Expire(Py<PyAny>),
}

/// A timer of the plane: runs only while the broker is alive in the incarnation that set it
/// (`Broker._if_alive`).
#[pyclass(frozen, name = "FetchPlaneTimer", module = "epochlab._core")]
pub(crate) struct PlaneTimer {
    plane: Py<PyFetchPlane>,
    broker: i64,
    incarnation: i64,
    due: Mutex<Option<Due>>,
}

impl PlaneTimer {
    fn new(plane: &Bound<'_, PyFetchPlane>, b: i64, incarnation: i64, due: Due) -> PyResult<Self> {
        Ok(Self { plane: plane.clone().unbind(), broker: b, incarnation, due: Mutex::new(Some(due)) })
    }
}

#[pymethods]
impl PlaneTimer {
    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        let me = self.plane.bind(py);
        let plane = me.get();
        let (broker, _, _) = plane.parts(py, self.broker)?;
        let (alive, incarnation) = liveness(broker.bind(py))?;
        if !alive || incarnation != self.incarnation {
            return Ok(());
        }
        let due = lock(&self.due).take();
        match due {
            Some(Due::Timeout(token)) => PyFetchPlane::fetch_timeout(me, self.broker, token),
            Some(Due::Retry(token)) => {
                if plane.edit(self.broker, |f| f.token)? == token {
                    PyFetchPlane::send_next_fetch(me, self.broker)?;
                }
                Ok(())
            }
            Some(Due::Expire(request)) => plane.expire_fetch(py, self.broker, &request),
            None => Ok(()),
        }
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.plane)?;
        if let Ok(due) = self.due.try_lock() {
            if let Some(Due::Expire(request)) = &*due {
                visit.call(request)?;
            }
        }
        Ok(())
    }

    fn __clear__(&self) {
        let gone = self.due.try_lock().map(|mut d| d.take());
        drop(gone);
    }
}
