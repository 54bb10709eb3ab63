//! `Kernel`, `Timer` and `Network`: the Python classes of the simulator's event loop and
//! message delivery. The engine is `crate::sim` (pure Rust: the `(time, sequence)` queue, the
//! network model, CPython's Mersenne Twister); this file converts arguments, keeps the Python
//! objects the events and messages carry, and runs the Python side of an event. The semantics
//! are those `epochlab.sim.kernel` and `epochlab.sim.network` document, which re-export these
//! classes.
//!
//! * The kernel's queue holds Python callbacks (with their `Timer`) and messages in flight on
//!   a network; the loop of `run_until` pops, checks and dispatches in Rust and calls into
//!   Python only for the callback, the message's delivery (its `deliver()`, or for a posted
//!   message `getattr(nodes[dst], method)(msg, src)`), `observe` and `stop`.
//! * The network draws its delays from its own Mersenne Twister, seeded from the state of
//!   `kernel.rng("network")` (a `random.Random`), so a run is the same draw for draw as with
//!   the Python network it replaces.
//!
//! No lock is held while Python code may run: a callback may schedule, send or read the clock,
//! and so may a node's `__str__` or an object's finaliser. So node arguments are resolved
//! before the lock is taken, errors are built after it is released, and the Python objects a
//! method lets go of (cancelled callbacks, lost messages: what `crate::sim` hands back as
//! discarded) are dropped after it too (the graveyard, `PyKernel::sweep`). Python allocations
//! under the lock may run the garbage collector: `__traverse__` only tries the lock.

use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::Mutex;

use rustc_hash::FxHashMap as HashMap;

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::gc::PyVisit;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::PyTraverseError;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use super::args::lock;
use super::errors::to_py_err;
use super::watch::{PyWatcher, Ran};
use crate::error::ArgumentError;
use crate::sim::kernel::{Kernel, Payload};
use crate::sim::network::{self, DelayError, Link, Message, Network, NodeId, SendOptions, RECONNECT_MS, RTO_MAX_MS, RTO_MIN_MS};
use crate::sim::Twister;

/// A twister from `random.Random.getstate()`: `(3, (624 words..., index), gauss_next)`.
pub(crate) fn twister_from_python(rng: &Bound<'_, PyAny>) -> PyResult<Twister> {
    let state = rng.call_method0("getstate")?;
    let words: Vec<u64> = state.get_item(1)?.extract()?;
    Twister::from_state(&words).map_err(to_py_err)
}

// -- arguments -------------------------------------------------------------------------------

/// A time or delay in ms: an int (saturated to the i64 range: the simulator's clock never gets
/// near it) or a float (truncated toward zero, as `int()` does); anything else is a
/// `TypeError`, a NaN an `InvalidArgumentError`, an infinity an `OverflowError`.
fn ms(v: &Bound<'_, PyAny>) -> PyResult<i64> {
    if v.is_instance_of::<PyInt>() {
        return Ok(match v.extract::<i64>() {
            Ok(x) => x,
            Err(_) => if v.lt(0)? { i64::MIN } else { i64::MAX },
        });
    }
    if let Ok(f) = v.cast::<PyFloat>() {
        let x = f.value();
        if x.is_nan() {
            return Err(invalid("time_ms", "nan".into(), "a time or delay in ms is a number"));
        }
        if x.is_infinite() {
            return Err(PyOverflowError::new_err("cannot convert an infinite float to a time in ms"));
        }
        return Ok(x.trunc().clamp(i64::MIN as f64, i64::MAX as f64) as i64);
    }
    Err(PyTypeError::new_err(format!("a time or delay in ms is an int or a float, not {}", v.get_type().name()?)))
}

/// `InvalidArgumentError` naming the argument, the value and why it is refused.
fn invalid(argument: &'static str, value: String, reason: &str) -> PyErr {
    to_py_err(ArgumentError::InvalidText { argument, value, reason: reason.to_owned() })
}

fn quiet_arg(v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<bool>> {
    match v {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => Ok(Some(v.is_truthy()?)),
    }
}

// -- the event queue --------------------------------------------------------------------------

/// Handle of a scheduled callback; `cancel()` makes it a no-op. `quiet`: the callback changes
/// no broker or controller state (`Kernel`).
#[pyclass(frozen, name = "Timer", module = "epochlab._core")]
pub(crate) struct PyTimer {
    cancelled: AtomicBool,
    #[pyo3(get)]
    quiet: bool,
    #[pyo3(get)]
    time_ms: i64,
}

#[pymethods]
impl PyTimer {
    #[new]
    #[pyo3(signature = (time_ms, quiet=false))]
    fn new(time_ms: &Bound<'_, PyAny>, quiet: bool) -> PyResult<Self> {
        Ok(Self { cancelled: AtomicBool::new(false), quiet, time_ms: ms(time_ms)? })
    }
    pub(crate) fn cancel(&self) {
        self.cancelled.store(true, AtomicOrdering::Relaxed);
    }
    #[getter]
    fn cancelled(&self) -> bool {
        self.cancelled.load(AtomicOrdering::Relaxed)
    }
    fn __repr__(&self) -> String {
        format!("Timer(time_ms={}, quiet={}, cancelled={})", self.time_ms, self.quiet, self.cancelled())
    }
}

/// A queued event: a Python callback with its timer, or a message in flight on a network.
enum What {
    /// `owner`: the node whose event scheduled it (`KernelState::owner`).
    Call { callback: Py<PyAny>, timer: Py<PyTimer>, owner: Option<Py<PyAny>> },
    Deliver { net: usize, message: Box<Message<Delivery>> },
}

impl Payload for What {
    fn cancelled(&self) -> bool {
        matches!(self, What::Call { timer, .. } if timer.get().cancelled())
    }
}

impl What {
    fn visit(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        match self {
            What::Call { callback, timer, owner } => {
                visit.call(callback)?;
                visit.call(owner.as_ref())?;
                visit.call(timer)
            }
            What::Deliver { message, .. } => visit.call(&message.payload.deliver),
        }
    }
}

/// What a message carries: the callable `deliver()`, or with `post` the tuple
/// `(nodes, dst, method, msg, src)`.
struct Delivery {
    deliver: Py<PyAny>,
    post: bool,
}

struct KernelState {
    kernel: Kernel<What>,
    /// The node whose event is running: the one a posted message was delivered to, or the
    /// owner of a timer's callback; `None` outside events and for timers scheduled outside
    /// one (by an action). A timer scheduled during an event inherits it, as it inherits the
    /// quietness: components act on each other only through posted messages (`SimContext`),
    /// so what a node's event schedules is that node's own work (`Watcher` doc).
    owner: Option<Py<PyAny>>,
    nets: Vec<NetSlot>,
    /// Python objects let go of under the lock, dropped after it (module doc).
    graveyard: Vec<Py<PyAny>>,
}

impl KernelState {
    /// Pop the earliest event due at or before `limit` (any, with `None`), advancing the clock
    /// and the quietness to it; a delivery is checked here and comes back as the job to run,
    /// or as nothing to do when it was dropped or held.
    fn pop(&mut self, limit: Option<i64>) -> Option<Option<Job>> {
        Some(match self.kernel.pop(limit)? {
            What::Call { callback, owner, .. } => Some(Job { callable: callback, post: false, owner }),
            What::Deliver { net, message } => {
                let KernelState { kernel, nets, .. } = self;
                let now = kernel.now();
                let mut deliver_at = |time: i64, m: Message<Delivery>| {
                    let quiet = m.quiet;
                    kernel.schedule_at(time, Some(quiet), What::Deliver { net, message: Box::new(m) });
                };
                nets[net].net.arrive(*message, now, &mut deliver_at).map(|d| Job { callable: d.deliver, post: d.post, owner: None })
            }
        })
    }
}

/// One network of the kernel: the engine's, and the Python side of its nodes.
struct NetSlot {
    net: Network<Delivery>,
    /// Node ids by the int or the string that named them (a node argument is resolved without
    /// making its key again).
    by_int: HashMap<i64, NodeId>,
    by_str: HashMap<String, NodeId>,
    /// The object that first named each node (what `peers` returns).
    objects: Vec<Option<Py<PyAny>>>,
}

/// The network `i` of `k`, the time, and where its arrivals go: the kernel's queue.
fn split(k: &mut KernelState, i: usize) -> (&mut NetSlot, i64, impl FnMut(i64, Message<Delivery>) + '_) {
    let KernelState { kernel, nets, .. } = k;
    let now = kernel.now();
    let deliver_at = move |time: i64, message: Message<Delivery>| {
        let quiet = message.quiet;
        kernel.schedule_at(time, Some(quiet), What::Deliver { net: i, message: Box::new(message) });
    };
    (&mut nets[i], now, deliver_at)
}

/// What a popped event runs in Python: a callable, or a posted message
/// `(nodes, dst, method, msg, src)` that runs `getattr(nodes[dst], method)(msg, src)`.
struct Job {
    callable: Py<PyAny>,
    post: bool,
    /// A timer's owner (a post's is the node it is routed to, found when it runs).
    owner: Option<Py<PyAny>>,
}

/// The deterministic kernel: virtual clock, event queue, per-component random streams
/// (`epochlab.sim.kernel`).
/// (No instance `__dict__`: with one, PyO3 0.30 lets the collector traverse a half-made
/// object, a NULL dict, and Python crashes. `kernel.step = f` is kept by `__setattr__`.)
#[pyclass(frozen, name = "Kernel", module = "epochlab._core")]
pub(crate) struct PyKernel {
    state: Mutex<KernelState>,
    seed: Py<PyAny>,
    rngs: Py<PyDict>,
    /// A `step` set on the instance (trace recording, tests that watch events): `run_until`
    /// calls it once per event instead of its own loop.
    step_override: Mutex<Option<Py<PyAny>>>,
}

impl PyKernel {
    fn state(&self) -> std::sync::MutexGuard<'_, KernelState> {
        lock(&self.state)
    }

    /// The virtual time (`now_ms`).
    pub(crate) fn now(&self) -> i64 {
        self.state().kernel.now()
    }

    pub(crate) fn schedule_call(&self, py: Python<'_>, time: i64, callback: Py<PyAny>, quiet: Option<bool>) -> PyResult<Py<PyTimer>> {
        let (now, in_quiet, owner) = {
            let k = self.state();
            (k.kernel.now(), k.kernel.in_quiet(), k.owner.as_ref().map(|o| o.clone_ref(py)))
        };
        let quiet = quiet.unwrap_or(in_quiet);
        let at = time.max(now);
        // made with no lock held: an allocation may run the garbage collector (__traverse__)
        let timer = Py::new(py, PyTimer { cancelled: AtomicBool::new(false), quiet, time_ms: at })?;
        self.state().kernel.schedule_at(at, Some(quiet), What::Call { callback, timer: timer.clone_ref(py), owner });
        Ok(timer)
    }

    /// Drop, with no lock held, what the last locked section let go of.
    fn sweep(&self) {
        let dead = {
            let mut k = self.state();
            let mut dead = std::mem::take(&mut k.graveyard);
            for slot in k.nets.iter_mut() {
                dead.extend(slot.net.take_discarded().into_iter().map(|d| d.deliver));
            }
            (dead, k.kernel.take_discarded())
        };
        drop(dead);
    }

    /// Make `owner` the running event's owner; the one it replaces is dropped after the lock.
    fn own(&self, owner: Option<Py<PyAny>>) {
        let old = std::mem::replace(&mut self.state().owner, owner);
        drop(old);
    }

    /// Run one popped event's Python side; the quietness and the ownership end with it, also
    /// on an error.
    fn dispatch(&self, py: Python<'_>, job: Option<Job>) -> PyResult<Ran> {
        self.sweep();
        let result = match job {
            Some(Job { callable, post: false, owner }) => {
                let ran = owner.as_ref().map_or(Ran::Unowned, |o| Ran::Owned(o.clone_ref(py)));
                self.own(owner);
                callable.call0(py).map(|_| ran)
            }
            Some(Job { callable, post: true, .. }) => self.deliver_post(callable.bind(py)),
            None => Ok(Ran::Nothing),
        };
        self.state().kernel.end_event();
        self.own(None);
        result
    }

    /// Run a posted message: `getattr(nodes[dst], method)(msg, src)` from the tuple `post`
    /// made, as an event owned by `nodes[dst]`.
    fn deliver_post(&self, post: &Bound<'_, PyAny>) -> PyResult<Ran> {
        let part = |i| post.get_item(i);
        let method = part(2)?.cast_into::<PyString>()?;
        let node = part(0)?.get_item(part(1)?)?;
        self.own(Some(node.clone().unbind()));
        node.call_method1(method, (part(3)?, part(4)?))?;
        Ok(Ran::Owned(node.unbind()))
    }
}

#[pymethods]
impl PyKernel {
    #[new]
    fn new(py: Python<'_>, seed: Py<PyAny>) -> Self {
        Self {
            state: Mutex::new(KernelState { kernel: Kernel::new(), owner: None, nets: Vec::new(), graveyard: Vec::new() }),
            seed,
            rngs: PyDict::new(py).unbind(),
            step_override: Mutex::new(None),
        }
    }

    #[getter]
    fn seed(&self, py: Python<'_>) -> Py<PyAny> {
        self.seed.clone_ref(py)
    }
    /// The virtual time in milliseconds.
    #[getter]
    fn now_ms(&self) -> i64 {
        self.state().kernel.now()
    }
    /// Whether the last event run was quiet.
    #[getter]
    fn last_quiet(&self) -> bool {
        self.state().kernel.last_quiet()
    }
    /// Events run so far.
    #[getter]
    fn steps(&self) -> u64 {
        self.state().kernel.steps()
    }

    /// The random stream of one component (a `random.Random` made on first use from the seed
    /// and `name`; independent of every other component's draws).
    fn rng<'py>(&self, py: Python<'py>, name: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let rngs = self.rngs.bind(py);
        if let Some(stream) = rngs.get_item(name)? {
            return Ok(stream);
        }
        let seed = format!("{}:{}", self.seed.bind(py).str()?, name.str()?);
        let stream = py.import("random")?.getattr("Random")?.call1((seed,))?;
        rngs.set_item(name, &stream)?;
        Ok(stream)
    }

    /// Run `callback` `delay_ms` (negative counts as 0) after now.
    #[pyo3(signature = (delay_ms, callback, quiet=None))]
    fn schedule(&self, py: Python<'_>, delay_ms: &Bound<'_, PyAny>, callback: Py<PyAny>,
                quiet: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyTimer>> {
        let delay = ms(delay_ms)?.max(0);
        let quiet = quiet_arg(quiet)?;
        let now = self.state().kernel.now();
        self.schedule_call(py, now.saturating_add(delay), callback, quiet)
    }

    /// Run `callback` at `time_ms` (clamped to now); `quiet` defaults to whether the event
    /// scheduling it is quiet.
    #[pyo3(signature = (time_ms, callback, quiet=None))]
    fn schedule_at(&self, py: Python<'_>, time_ms: &Bound<'_, PyAny>, callback: Py<PyAny>,
                   quiet: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyTimer>> {
        let time = ms(time_ms)?;
        let quiet = quiet_arg(quiet)?;
        self.schedule_call(py, time, callback, quiet)
    }

    /// Time of the earliest pending event, `None` if the queue is empty.
    fn next_time(&self) -> Option<i64> {
        let next = self.state().kernel.next_time();
        self.sweep();
        next
    }

    /// `fn(*args)` as an event of `node`: the timers it schedules are `node`'s (`KernelState::
    /// owner`), as if one of its events had scheduled them. For the facade's actions on one
    /// component (booting, crashing or shutting down a broker); the owner in force before is
    /// restored after, also on an error.
    #[pyo3(signature = (node, callback, *args))]
    fn call_as<'py>(&self, node: Py<PyAny>, callback: &Bound<'py, PyAny>, args: &Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyAny>> {
        let before = self.state().owner.replace(node);
        let result = callback.call1(args);
        let ours = std::mem::replace(&mut self.state().owner, before);
        drop(ours);
        result
    }

    /// Run the earliest pending event (advancing the clock to it); `False` if none.
    fn step(&self, py: Python<'_>) -> PyResult<bool> {
        let popped = self.state().pop(None);
        match popped {
            None => {
                self.sweep();
                Ok(false)
            }
            Some(job) => self.dispatch(py, job).map(|_| true),
        }
    }

    /// Run every event due at or before `time_ms`; the clock ends at `time_ms` unless `stop`
    /// (checked first and after each event) returned true first. Returns whether it stopped.
    /// `observe` is called first and after each event that is not quiet, before `stop` (the
    /// invariant checker's hook: no Python frame for the quiet events).
    /// A `step` set on the instance (trace recording, tests that watch events) is called once
    /// per event instead of the built-in loop.
    #[pyo3(signature = (time_ms, stop=None, observe=None))]
    fn run_until(slf: &Bound<'_, Self>, time_ms: &Bound<'_, PyAny>, stop: Option<&Bound<'_, PyAny>>,
                 observe: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
        let py = slf.py();
        let me = slf.get();
        let limit = ms(time_ms)?;
        me.state().kernel.clear_last_quiet();
        let stop = stop.filter(|s| !s.is_none());
        let observe = observe.filter(|s| !s.is_none());
        if let Some(o) = observe {
            o.call0()?;
        }
        if let Some(s) = stop {
            if s.call0()?.is_truthy()? {
                return Ok(true);
            }
        }
        let step = lock(&me.step_override).as_ref().map(|f| f.bind(py).clone());
        // the state checker's watcher is told what each event ran (`Watcher` doc)
        let watcher = observe.and_then(|o| o.cast::<PyWatcher>().ok());
        loop {
            let mut ran = Ran::Unowned;
            if let Some(step) = &step {
                let next = me.state().kernel.next_time();
                me.sweep();
                match next {
                    Some(t) if t <= limit => {}
                    _ => break,
                }
                step.call0()?;
            } else {
                let popped = me.state().pop(Some(limit));
                match popped {
                    None => break,
                    Some(job) => ran = me.dispatch(py, job)?,
                }
            }
            if let Some(o) = observe {
                if !me.state().kernel.last_quiet() {
                    match &watcher {
                        Some(w) => w.get().after_event(py, ran)?,
                        None => {
                            o.call0()?;
                        }
                    }
                }
            }
            if let Some(s) = stop {
                if s.call0()?.is_truthy()? {
                    return Ok(true);
                }
            }
        }
        me.sweep();
        me.state().kernel.advance_to(limit);
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let k = self.state();
        format!("Kernel(now_ms={}, pending={}, steps={})", k.kernel.now(), k.kernel.pending(), k.kernel.steps())
    }

    /// `kernel.step = f` replaces the step `run_until` takes (the Python kernel's instance
    /// attribute); every other attribute is read-only.
    fn __setattr__(&self, name: &str, value: Py<PyAny>) -> PyResult<()> {
        if name != "step" {
            return Err(pyo3::exceptions::PyAttributeError::new_err(format!(
                "'Kernel' object attribute '{name}' is read-only")));
        }
        let old = lock(&self.step_override).replace(value);
        drop(old);
        Ok(())
    }

    /// The garbage collector's view: every callback, timer and message in flight or held (a
    /// run's callbacks close over the cluster that owns this kernel: a cycle the collector
    /// must see to free a finished run). A state locked by a method that is allocating is not
    /// visited: under-reporting only delays a collection.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.seed)?;
        visit.call(&self.rngs)?;
        if let Ok(step) = self.step_override.try_lock() {
            visit.call(step.as_ref())?;
        }
        let Ok(k) = self.state.try_lock() else { return Ok(()) };
        visit.call(k.owner.as_ref())?;
        for event in k.kernel.iter() {
            event.visit(&visit)?;
        }
        for slot in &k.nets {
            for object in slot.objects.iter().flatten() {
                visit.call(object)?;
            }
            for message in slot.net.held_messages() {
                visit.call(&message.payload.deliver)?;
            }
        }
        Ok(())
    }

    /// Break the cycles: drop the pending events and the held messages (after the lock is
    /// released, since dropping them may free other objects).
    fn __clear__(&self) {
        let taken = match self.state.try_lock() {
            Ok(mut k) => {
                let queue = k.kernel.take_pending();
                let held: Vec<_> = k.nets.iter_mut().map(|n| n.net.take_held()).collect();
                Some((queue, held, k.owner.take()))
            }
            Err(_) => None,
        };
        drop(taken);
        let step = self.step_override.try_lock().ok().and_then(|mut s| s.take());
        drop(step);
    }
}

// -- the network ------------------------------------------------------------------------------

/// A node argument, resolved before the lock is taken (module doc): an int that fits, a
/// string (its UTF-8 form checked, so reading it again under the lock runs nothing), or any
/// other object with the name `str()` gave it.
enum NodeArg<'py> {
    Int(i64, Bound<'py, PyAny>),
    Str(Bound<'py, PyString>),
    Key(String, Bound<'py, PyAny>),
}

fn node_py<'py>(node: &NodeArg<'py>) -> Python<'py> {
    match node {
        NodeArg::Int(_, o) | NodeArg::Key(_, o) => o.py(),
        NodeArg::Str(s) => s.py(),
    }
}

fn node_arg<'py>(node: &Bound<'py, PyAny>) -> PyResult<NodeArg<'py>> {
    if node.is_exact_instance_of::<PyInt>() {
        if let Ok(v) = node.extract::<i64>() {
            return Ok(NodeArg::Int(v, node.clone()));
        }
    }
    if let Ok(s) = node.cast_exact::<PyString>() {
        if s.to_str().is_ok() {
            return Ok(NodeArg::Str(s.clone()));
        }
    }
    Ok(NodeArg::Key(node_key(node)?, node.clone()))
}

/// A node as the network names it: `b<id>` for a broker (an int), `n<name>` else.
fn node_key(node: &Bound<'_, PyAny>) -> PyResult<String> {
    Ok(if node.is_instance_of::<PyInt>() || node.is_instance_of::<PyBool>() {
        format!("b{}", node.str()?)
    } else {
        format!("n{}", node.str()?)
    })
}

impl NetSlot {
    /// The node `node` names, made on first use.
    fn id(&mut self, node: &NodeArg<'_>) -> NodeId {
        let (key, object) = match node {
            NodeArg::Int(v, object) => {
                if let Some(id) = self.by_int.get(v) {
                    return *id;
                }
                (network::broker_key(v), object.as_any())
            }
            NodeArg::Str(s) => {
                let text = s.to_str().unwrap_or_default(); // checked by node_arg
                if let Some(id) = self.by_str.get(text) {
                    return *id;
                }
                (network::named_key(text), s.as_any())
            }
            NodeArg::Key(key, object) => (key.clone(), object),
        };
        let id = self.net.node(key);
        if self.objects.len() <= id {
            self.objects.resize_with(id + 1, || None);
        }
        if self.objects[id].is_none() {
            self.objects[id] = Some(object.clone().unbind());
        }
        match node {
            NodeArg::Int(v, _) => {
                self.by_int.insert(*v, id);
            }
            NodeArg::Str(s) => {
                self.by_str.insert(s.to_str().unwrap_or_default().to_owned(), id);
            }
            NodeArg::Key(..) => {}
        }
        id
    }
}

/// An empty delay range, made into an `InvalidArgumentError` once the lock is released.
impl From<DelayError> for PyErr {
    fn from(e: DelayError) -> PyErr {
        to_py_err(ArgumentError::from(e))
    }
}

/// Routes messages between nodes through the kernel's event queue (`epochlab.sim.network`).
#[pyclass(frozen, name = "Network", module = "epochlab._core")]
pub(crate) struct PyNetwork {
    kernel: Py<PyKernel>,
    index: usize,
}

impl PyNetwork {
    /// Run `f` on the kernel's state with its lock held, then drop what it let go of.
    fn with<T>(&self, py: Python<'_>, f: impl FnOnce(&mut KernelState, usize) -> T) -> T {
        let kernel = self.kernel.bind(py).get();
        let out = {
            let mut k = kernel.state();
            f(&mut k, self.index)
        };
        kernel.sweep();
        out
    }

    /// Run `f` on this network's slot with the lock held (`with`).
    fn on<T>(&self, py: Python<'_>, f: impl FnOnce(&mut NetSlot) -> T) -> T {
        self.with(py, |k, i| f(&mut k.nets[i]))
    }

    #[allow(clippy::too_many_arguments)]
    fn send_message(&self, src: &Bound<'_, PyAny>, dst: &Bound<'_, PyAny>, deliver: Py<PyAny>, post: bool, kind: &str,
                    coalesce: Option<String>, quiet: bool) -> PyResult<()> {
        let py = src.py();
        let (src, dst) = (node_arg(src)?, node_arg(dst)?);
        self.with(py, |k, i| {
            let (slot, now, mut deliver_at) = split(k, i);
            let (s, d) = (slot.id(&src), slot.id(&dst));
            let options = SendOptions { fetch: kind == "fetch", coalesce, quiet };
            let copy = |d: &Delivery| Delivery { deliver: d.deliver.clone_ref(py), post: d.post };
            slot.net.send(now, s, d, Delivery { deliver, post }, options, copy, &mut deliver_at)
        })?;
        Ok(())
    }
}

/// `(min_ms, max_ms)` from a sequence of two times.
fn delay_pair(v: &Bound<'_, PyAny>) -> PyResult<(i64, i64)> {
    let items: Vec<Bound<'_, PyAny>> = v.extract()?;
    match items.as_slice() {
        [lo, hi] => Ok((ms(lo)?, ms(hi)?)),
        _ => Err(invalid("delay_ms", format!("{} values", items.len()), "a delay range is (min_ms, max_ms)")),
    }
}

#[pymethods]
impl PyNetwork {
    #[new]
    fn new(py: Python<'_>, kernel: Py<PyKernel>, default_delay_ms: &Bound<'_, PyAny>,
           controller_delay_ms: &Bound<'_, PyAny>) -> PyResult<Self> {
        let stream = kernel.get().rng(py, PyString::new(py, "network").as_any())?;
        let rng = twister_from_python(&stream)?;
        let (dlo, dhi) = delay_pair(default_delay_ms)?;
        let (clo, chi) = delay_pair(controller_delay_ms)?;
        let slot = NetSlot {
            net: Network::new(rng, Link::delay(dlo, dhi), Link::delay(clo, chi)),
            by_int: HashMap::default(),
            by_str: HashMap::default(),
            objects: Vec::new(),
        };
        let index = {
            let mut k = kernel.get().state();
            k.nets.push(slot);
            k.nets.len() - 1
        };
        Ok(Self { kernel, index })
    }

    #[getter]
    fn sent(&self, py: Python<'_>) -> u64 {
        self.on(py, |n| n.net.sent())
    }
    #[getter]
    fn delivered(&self, py: Python<'_>) -> u64 {
        self.on(py, |n| n.net.delivered())
    }
    #[getter]
    fn dropped(&self, py: Python<'_>) -> u64 {
        self.on(py, |n| n.net.dropped())
    }
    #[getter]
    fn held(&self, py: Python<'_>) -> u64 {
        self.on(py, |n| n.net.held())
    }

    /// Mark a node up or down; going up starts a new incarnation. Messages held on the
    /// connections of a node that goes down are lost with them.
    fn set_alive(&self, node: &Bound<'_, PyAny>, alive: bool) -> PyResult<()> {
        let node = node_arg(node)?;
        self.on(node_py(&node), |n| {
            let id = n.id(&node);
            n.net.set_alive(id, alive);
        });
        Ok(())
    }

    /// The nodes that opened a connection to `node`'s current incarnation (sent it a message),
    /// ordered by name: those a process crash of `node` resets.
    fn peers<'py>(&self, node: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let py = node.py();
        let node = node_arg(node)?;
        let objects = self.on(py, |n| {
            let id = n.id(&node);
            // a peer sent, so a node argument named it: it has its object
            n.net.peers(id).into_iter().filter_map(|p| n.objects[p].as_ref().map(|o| o.clone_ref(py))).collect::<Vec<_>>()
        });
        PyList::new(py, objects)
    }

    pub(crate) fn is_alive(&self, node: &Bound<'_, PyAny>) -> PyResult<bool> {
        let node = node_arg(node)?;
        Ok(self.on(node_py(&node), |n| {
            let id = n.id(&node);
            n.net.is_alive(id)
        }))
    }

    /// Cut the network into `groups`; every node not listed forms one further group, except
    /// the transaction coordinator, which stays on the controller's side unless listed.
    fn partition(&self, groups: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = groups.py();
        let mut listed: Vec<(NodeArg<'_>, usize)> = Vec::new();
        for (index, group) in groups.try_iter()?.enumerate() {
            for node in group?.try_iter()? {
                listed.push((node_arg(&node?)?, index));
            }
        }
        self.with(py, |k, i| {
            let (slot, now, mut deliver_at) = split(k, i);
            let ids: Vec<(NodeId, usize)> = listed.iter().map(|(node, group)| (slot.id(node), *group)).collect();
            slot.net.partition(now, &ids, &mut deliver_at)
        })?;
        Ok(())
    }

    /// Remove the partition (link settings and slow followers stay).
    fn heal(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |k, i| {
            let (slot, now, mut deliver_at) = split(k, i);
            slot.net.heal(now, &mut deliver_at)
        })?;
        Ok(())
    }

    /// Configure the link between `a` and `b` (both directions). Returns False when
    /// `duplicate` or `reorder` was asked for on the controller channel, where they cannot
    /// happen and are not applied.
    #[pyo3(signature = (a, b, delay_ms=None, drop=0.0, duplicate=0.0, reorder=false))]
    fn set_link(&self, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>, delay_ms: Option<&Bound<'_, PyAny>>,
                drop: f64, duplicate: f64, reorder: bool) -> PyResult<bool> {
        let py = a.py();
        let delay = match delay_ms {
            Some(d) if !d.is_none() => Some(delay_pair(d)?),
            _ => None,
        };
        let (a, b) = (node_arg(a)?, node_arg(b)?);
        let applicable = self.with(py, |k, i| {
            let (slot, now, mut deliver_at) = split(k, i);
            let (ia, ib) = (slot.id(&a), slot.id(&b));
            slot.net.set_link(now, ia, ib, delay, drop, duplicate, reorder, &mut deliver_at)
        })?;
        Ok(applicable)
    }

    /// Release held messages at TCP's next retransmission after the path is usable again
    /// (`True`), or at once (`False`, the default).
    fn set_retransmission_backoff(&self, py: Python<'_>, on: bool) {
        self.on(py, |n| n.net.set_retransmission_backoff(on));
    }

    /// Add `extra_delay_ms` to every fetch request `node` sends (0 removes it).
    fn slow_node(&self, node: &Bound<'_, PyAny>, extra_delay_ms: &Bound<'_, PyAny>) -> PyResult<()> {
        let extra = ms(extra_delay_ms)?.max(0);
        let node = node_arg(node)?;
        self.on(node_py(&node), |n| {
            let id = n.id(&node);
            n.net.slow_node(id, extra);
        });
        Ok(())
    }

    /// Whether the current partition lets `a` and `b` talk.
    fn connected(&self, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<bool> {
        let (a, b) = (node_arg(a)?, node_arg(b)?);
        Ok(self.on(node_py(&a), |n| {
            let (ia, ib) = (n.id(&a), n.id(&b));
            n.net.connected(ia, ib)
        }))
    }

    /// Whether messages between `a` and `b` get through now (connected, and the link not cut
    /// with `drop=1.0`).
    fn usable(&self, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<bool> {
        let (a, b) = (node_arg(a)?, node_arg(b)?);
        Ok(self.on(node_py(&a), |n| {
            let (ia, ib) = (n.id(&a), n.id(&b));
            n.net.usable(ia, ib)
        }))
    }

    /// Send a message: `deliver()` runs at the destination after the link's delay, or once the
    /// path is usable again, unless either end dies or restarts first. `kind == "fetch"`
    /// messages get the sender's slow-node delay; `coalesce` names messages of which only the
    /// newest matters after a gap.
    #[pyo3(signature = (src, dst, deliver, kind="", coalesce=None, quiet=false))]
    fn send(&self, src: &Bound<'_, PyAny>, dst: &Bound<'_, PyAny>, deliver: Py<PyAny>, kind: &str,
            coalesce: Option<String>, quiet: bool) -> PyResult<()> {
        self.send_message(src, dst, deliver, false, kind, coalesce, quiet)
    }

    /// `send` of a call: on arrival run `getattr(nodes[dst], method)(msg, src)`, with `nodes`
    /// looked up then (what `SimContext.post` sends; no Python closure per message). A `dst`
    /// that `nodes` lacks gets nothing (no random draw): returns `False`. `quiet` defaults to
    /// the destination's `QUIET` attribute (`False` without one).
    #[pyo3(signature = (src, dst, nodes, method, msg, kind="", coalesce=None, quiet=None))]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn post(&self, src: &Bound<'_, PyAny>, dst: &Bound<'_, PyAny>, nodes: &Bound<'_, PyDict>, method: &Bound<'_, PyString>,
            msg: &Bound<'_, PyAny>, kind: &str, coalesce: Option<String>, quiet: Option<bool>) -> PyResult<bool> {
        let py = src.py();
        let Some(target) = nodes.get_item(dst)? else { return Ok(false) };
        let quiet = match quiet {
            Some(q) => q,
            None => match target.getattr_opt(intern!(py, "QUIET"))? {
                Some(q) => q.is_truthy()?,
                None => false,
            },
        };
        let call = (nodes, dst, method, msg, src).into_pyobject(py)?.into_any().unbind();
        self.send_message(src, dst, call, true, kind, coalesce, quiet)?;
        Ok(true)
    }

    /// Drop what is held on the connection `src` -> `dst` (the sender gave up on it); returns
    /// how many messages went.
    fn discard_held(&self, src: &Bound<'_, PyAny>, dst: &Bound<'_, PyAny>) -> PyResult<u64> {
        let (src, dst) = (node_arg(src)?, node_arg(dst)?);
        Ok(self.on(node_py(&src), |n| {
            let (s, d) = (n.id(&src), n.id(&dst));
            n.net.discard_held(s, d)
        }))
    }

    /// The connection between `a` and `b` is closed (a client gave up on it): what either
    /// end sends from now on goes on a new one (`Network.close_connection`).
    fn close_connection(&self, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<()> {
        let (a, b) = (node_arg(a)?, node_arg(b)?);
        self.on(node_py(&a), |n| {
            let (x, y) = (n.id(&a), n.id(&b));
            n.net.close_connection(x, y)
        });
        Ok(())
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.kernel)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        self.on(py, |n| {
            let n = &n.net;
            format!("Network(sent={}, delivered={}, dropped={}, held={})", n.sent(), n.delivered(), n.dropped(), n.held())
        })
    }
}

/// The draws of the network's stream, for the test that compares them with `random.Random`:
/// `(kind, argument)` pairs, `("below", n)` or `("random", 0)`, drawn from a twister seeded
/// with `rng`'s state; returns the values as floats (exact for `below` up to 2**53).
#[pyfunction]
fn _twister_draws(rng: &Bound<'_, PyAny>, draws: Vec<(String, u64)>) -> PyResult<Vec<f64>> {
    let mut t = twister_from_python(rng)?;
    draws
        .into_iter()
        .map(|(kind, n)| match kind.as_str() {
            "below" if n >= 1 => Ok(t.below(n) as f64),
            "random" => Ok(t.uniform()),
            _ => Err(invalid("draws", format!("{kind:?} of {n}"), "a draw is (\"below\", n >= 1) or (\"random\", 0)")),
        })
        .collect()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTimer>()?;
    m.add_class::<PyKernel>()?;
    m.add_class::<PyNetwork>()?;
    m.add_function(wrap_pyfunction!(_twister_draws, m)?)?;
    m.add("RTO_MIN_MS", RTO_MIN_MS)?;
    m.add("RTO_MAX_MS", RTO_MAX_MS)?;
    m.add("RECONNECT_MS", RECONNECT_MS)?;
    Ok(())
}
