//! `Kernel`, `Timer` and `Network`: the simulator's event loop and message delivery in Rust.
//! The semantics are those `epochlab.sim.kernel` and `epochlab.sim.network`
//! document, which re-export these classes; this file is their implementation.
//!
//! * The kernel keeps virtual time and one queue of events ordered by `(time, sequence)`. An
//!   event is either a Python callback (with its `Timer`) or a message
//!   in flight on a network; the loop of `run_until` pops, checks and dispatches in Rust and
//!   calls into Python only for the callback, the message's delivery (its `deliver()`, or for
//!   a posted message `getattr(nodes[dst], method)(msg, src)`), `observe` and `stop`.
//! * The network draws its delays from its own Mersenne Twister, seeded from the state of
//!   `kernel.rng("network")` (a `random.Random`) and drawing exactly as CPython's `randint`
//!   (`_randbelow_with_getrandbits`) and `random()` do, so a run is the same draw for draw
//!   as with the Python network it replaces.
//!
//! No lock is held while Python code may run: a callback may schedule, send or read the clock,
//! and so may a node's `__str__` or an object's finaliser. So node arguments are resolved
//! before the lock is taken, errors are built after it is released, and the Python objects a
//! method lets go of (cancelled callbacks, lost messages) are dropped after it too (the
//! graveyard). Python allocations under the lock may run the garbage collector: `__traverse__`
//! only tries the lock.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::Mutex;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::gc::PyVisit;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::PyTraverseError;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use super::args::lock;
use super::errors::to_py_err;
use super::watch::PyWatcher;
use crate::error::ArgumentError;

/// Linux's minimum retransmission timeout (`TCP_RTO_MIN`): what one lost packet costs.
const RTO_MIN_MS: i64 = 200;
/// Linux's ceiling on the retransmission timeout (`TCP_RTO_MAX`).
const RTO_MAX_MS: i64 = 120_000;
/// Most a lost message waits for retransmissions (`request.timeout.ms`, then a reconnect).
const RECONNECT_MS: i64 = 30_000;

// -- CPython's Mersenne Twister ------------------------------------------------------------

const MT_N: usize = 624;
const MT_M: usize = 397;

/// MT19937 as `_randommodule.c` has it, with the draws `random.Random` builds on it.
pub(crate) struct Twister {
    state: [u32; MT_N],
    index: usize,
}

impl Twister {
    /// From `random.Random.getstate()`: `(3, (624 words..., index), gauss_next)`.
    pub(crate) fn from_python(rng: &Bound<'_, PyAny>) -> PyResult<Self> {
        let state = rng.call_method0("getstate")?;
        let words: Vec<u64> = state.get_item(1)?.extract()?;
        if words.len() != MT_N + 1 || words[..MT_N].iter().any(|w| *w > u64::from(u32::MAX)) || words[MT_N] > MT_N as u64 {
            return Err(invalid("rng", format!("{} words", words.len()),
                               "not the state of a random.Random (Mersenne Twister, version 3)"));
        }
        let mut out = Twister { state: [0; MT_N], index: words[MT_N] as usize };
        for (slot, w) in out.state.iter_mut().zip(&words) {
            *slot = *w as u32;
        }
        Ok(out)
    }

    fn next_u32(&mut self) -> u32 {
        const UPPER: u32 = 0x8000_0000;
        const LOWER: u32 = 0x7fff_ffff;
        const MATRIX_A: u32 = 0x9908_b0df;
        if self.index >= MT_N {
            for k in 0..MT_N {
                let y = (self.state[k] & UPPER) | (self.state[(k + 1) % MT_N] & LOWER);
                let mag = if y & 1 == 1 { MATRIX_A } else { 0 };
                self.state[k] = self.state[(k + MT_M) % MT_N] ^ (y >> 1) ^ mag;
            }
            self.index = 0;
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `getrandbits(k)` for `1 <= k <= 64`: 32-bit words, least significant first, the last
    /// one shifted down to the bits that remain.
    fn bits(&mut self, k: u32) -> u64 {
        if k <= 32 {
            return u64::from(self.next_u32() >> (32 - k));
        }
        let low = u64::from(self.next_u32());
        let high = u64::from(self.next_u32() >> (64 - k));
        low | (high << 32)
    }

    /// `_randbelow_with_getrandbits(n)`, `n >= 1`.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        let k = 64 - n.leading_zeros();
        loop {
            let r = self.bits(k);
            if r < n {
                return r;
            }
        }
    }

    /// `random()`: 53 random bits as a float in `[0, 1)`.
    fn uniform(&mut self) -> f64 {
        let a = f64::from(self.next_u32() >> 5);
        let b = f64::from(self.next_u32() >> 6);
        (a * 67_108_864.0 + b) * (1.0 / 9_007_199_254_740_992.0)
    }
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

enum What {
    /// `owner`: the node whose event scheduled it (`KernelState::owner`).
    Call { callback: Py<PyAny>, timer: Py<PyTimer>, quiet: bool, owner: Option<Py<PyAny>> },
    Deliver { net: usize, message: Box<Message> },
}

struct Event {
    time: i64,
    seq: u64,
    what: What,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    /// Reversed: `BinaryHeap` is a max-heap, the earliest `(time, sequence)` must come first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.time, other.seq).cmp(&(self.time, self.seq))
    }
}

impl Event {
    fn visit(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        match &self.what {
            What::Call { callback, timer, owner, .. } => {
                visit.call(callback)?;
                visit.call(owner.as_ref())?;
                visit.call(timer)
            }
            What::Deliver { message, .. } => visit.call(&message.deliver),
        }
    }
    fn cancelled(&self) -> bool {
        matches!(&self.what, What::Call { timer, .. } if timer.get().cancelled())
    }
    fn quiet(&self) -> bool {
        match &self.what {
            What::Call { quiet, .. } => *quiet,
            What::Deliver { message, .. } => message.quiet,
        }
    }
}

struct KernelState {
    now: i64,
    sequence: u64,
    steps: u64,
    last_quiet: bool,
    in_quiet: bool,
    /// The node whose event is running: the one a posted message was delivered to, or the
    /// owner of a timer's callback; `None` outside events and for timers scheduled outside
    /// one (by an action). A timer scheduled during an event inherits it, as it inherits the
    /// quietness: components act on each other only through posted messages (`SimContext`),
    /// so what a node's event schedules is that node's own work (`Watcher` doc).
    owner: Option<Py<PyAny>>,
    queue: BinaryHeap<Event>,
    nets: Vec<Net>,
    /// Python objects let go of under the lock, dropped after it (module doc).
    graveyard: Vec<Py<PyAny>>,
}

impl KernelState {
    fn push(&mut self, time: i64, what: What) {
        self.sequence += 1;
        let time = time.max(self.now);
        self.queue.push(Event { time, seq: self.sequence, what });
    }

    fn next_time(&mut self) -> Option<i64> {
        while self.queue.peek().is_some_and(Event::cancelled) {
            if let Some(Event { what: What::Call { callback, owner, .. }, .. }) = self.queue.pop() {
                self.graveyard.push(callback);
                self.graveyard.extend(owner);
            }
        }
        self.queue.peek().map(|e| e.time)
    }

    /// Pop the earliest event due at or before `limit` (any, with `None`), advancing the clock
    /// and the quietness to it; a delivery is checked here and comes back as the job to run,
    /// or as nothing to do when it was dropped or held.
    fn pop(&mut self, limit: Option<i64>) -> Option<Option<Job>> {
        let due = self.next_time()?;
        if limit.is_some_and(|l| due > l) {
            return None;
        }
        let event = self.queue.pop()?;
        self.now = event.time;
        self.steps += 1;
        let quiet = event.quiet();
        self.in_quiet = quiet;
        self.last_quiet = quiet;
        Some(match event.what {
            What::Call { callback, owner, .. } => Some(Job { callable: callback, post: false, owner }),
            What::Deliver { net, message } => self.arrive(net, *message),
        })
    }

    fn arrive(&mut self, net: usize, message: Message) -> Option<Job> {
        let n = &mut self.nets[net];
        if !n.alive_as_sent(message.dst, message.dst_incarnation) {
            n.dropped += 1;
            n.graveyard.push(message.deliver);
            return None;
        }
        let direction = message.direction();
        if n.held.contains_key(&direction) || !n.usable(message.src, message.dst) {
            n.hold(direction, message);
            return None;
        }
        n.delivered += 1;
        Some(Job { callable: message.deliver, post: message.post, owner: None })
    }
}

/// What a popped event runs in Python: a callable, or a posted message
/// `(nodes, dst, method, msg, src)` that runs `getattr(nodes[dst], method)(msg, src)`.
struct Job {
    callable: Py<PyAny>,
    post: bool,
    /// A timer's owner (a post's is the node it is routed to, found when it runs).
    owner: Option<Py<PyAny>>,
}

/// What `dispatch` ran, for the state checker's watcher.
pub(crate) enum Ran {
    /// An event of this node (a message delivered to it, or a timer it scheduled).
    Owned(Py<PyAny>),
    /// An event with no known owner (a timer an action scheduled).
    Unowned,
    /// Nothing: a message dropped or held.
    Nothing,
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
        self.state().now
    }

    pub(crate) fn schedule_call(&self, py: Python<'_>, time: i64, callback: Py<PyAny>, quiet: Option<bool>) -> PyResult<Py<PyTimer>> {
        let (now, in_quiet, owner) = {
            let k = self.state();
            (k.now, k.in_quiet, k.owner.as_ref().map(|o| o.clone_ref(py)))
        };
        let quiet = quiet.unwrap_or(in_quiet);
        let at = time.max(now);
        // made with no lock held: an allocation may run the garbage collector (__traverse__)
        let timer = Py::new(py, PyTimer { cancelled: AtomicBool::new(false), quiet, time_ms: at })?;
        self.state().push(at, What::Call { callback, timer: timer.clone_ref(py), quiet, owner });
        Ok(timer)
    }

    /// Drop, with no lock held, what the last locked section let go of.
    fn sweep(&self) {
        let dead = {
            let mut k = self.state();
            let mut dead = std::mem::take(&mut k.graveyard);
            for net in k.nets.iter_mut() {
                dead.append(&mut net.graveyard);
            }
            dead
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
        self.state().in_quiet = false;
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
            state: Mutex::new(KernelState {
                now: 0,
                sequence: 0,
                steps: 0,
                last_quiet: false,
                in_quiet: false,
                owner: None,
                queue: BinaryHeap::new(),
                nets: Vec::new(),
                graveyard: Vec::new(),
            }),
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
        self.state().now
    }
    /// Whether the last event run was quiet.
    #[getter]
    fn last_quiet(&self) -> bool {
        self.state().last_quiet
    }
    /// Events run so far.
    #[getter]
    fn steps(&self) -> u64 {
        self.state().steps
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
        let now = self.state().now;
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
        let next = self.state().next_time();
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
        me.state().last_quiet = false;
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
                let next = me.state().next_time();
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
                if !me.state().last_quiet {
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
        let mut k = me.state();
        k.now = k.now.max(limit);
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let k = self.state();
        format!("Kernel(now_ms={}, pending={}, steps={})", k.now, k.queue.len(), k.steps)
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
        for event in k.queue.iter() {
            event.visit(&visit)?;
        }
        for net in &k.nets {
            for node in &net.nodes {
                visit.call(&node.object)?;
            }
            for message in net.held.values().flatten() {
                visit.call(&message.deliver)?;
            }
        }
        Ok(())
    }

    /// Break the cycles: drop the pending events and the held messages (after the lock is
    /// released, since dropping them may free other objects).
    fn __clear__(&self) {
        let taken = match self.state.try_lock() {
            Ok(mut k) => {
                let queue = std::mem::take(&mut k.queue);
                let held: Vec<_> = k.nets.iter_mut().map(|n| std::mem::take(&mut n.held)).collect();
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

type NodeId = usize;

#[derive(Clone, Copy, PartialEq)]
struct Link {
    lo: i64,
    hi: i64,
    drop: f64,
    duplicate: f64,
    reorder: bool,
}

struct NodeInfo {
    key: String,
    object: Py<PyAny>,
    alive: bool,
    incarnation: u64,
    slow_ms: i64,
    group: i64,
    peers: HashSet<NodeId>,
}

struct Message {
    seq: u64,
    src: NodeId,
    dst: NodeId,
    src_incarnation: u64,
    dst_incarnation: u64,
    /// The callable `deliver()`, or with `post` the tuple `(nodes, dst, method, msg, src)`.
    deliver: Py<PyAny>,
    post: bool,
    extra_ms: i64,
    coalesce: Option<String>,
    quiet: bool,
}

type Direction = (NodeId, u64, NodeId, u64);

impl Message {
    fn direction(&self) -> Direction {
        (self.src, self.src_incarnation, self.dst, self.dst_incarnation)
    }
    fn copy(&self, py: Python<'_>) -> Message {
        Message { deliver: self.deliver.clone_ref(py), coalesce: self.coalesce.clone(), ..*self }
    }
}

struct Net {
    rng: Twister,
    default: Link,
    controller: Link,
    nodes: Vec<NodeInfo>,
    by_int: HashMap<i64, NodeId>,
    by_str: HashMap<String, NodeId>,
    by_key: HashMap<String, NodeId>,
    links: HashMap<(NodeId, NodeId), Link>,
    partitioned: bool,
    last_arrival: HashMap<Direction, i64>,
    seq: u64,
    held: HashMap<Direction, Vec<Message>>,
    sent: u64,
    delivered: u64,
    dropped: u64,
    held_count: u64,
    graveyard: Vec<Py<PyAny>>,
}

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

impl Net {
    fn id(&mut self, node: &NodeArg<'_>) -> NodeId {
        let (key, object) = match node {
            NodeArg::Int(v, object) => {
                if let Some(id) = self.by_int.get(v) {
                    return *id;
                }
                (format!("b{v}"), object.as_any())
            }
            NodeArg::Str(s) => {
                let text = s.to_str().unwrap_or_default(); // checked by node_arg
                if let Some(id) = self.by_str.get(text) {
                    return *id;
                }
                (format!("n{text}"), s.as_any())
            }
            NodeArg::Key(key, object) => (key.clone(), object),
        };
        let id = match self.by_key.get(&key) {
            Some(id) => *id,
            None => {
                let id = self.nodes.len();
                self.nodes.push(NodeInfo {
                    key: key.clone(),
                    object: object.clone().unbind(),
                    alive: false,
                    incarnation: 0,
                    slow_ms: 0,
                    group: -1,
                    peers: HashSet::default(),
                });
                self.by_key.insert(key, id);
                id
            }
        };
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

    fn pair(&self, a: NodeId, b: NodeId) -> (NodeId, NodeId) {
        if self.nodes[a].key <= self.nodes[b].key { (a, b) } else { (b, a) }
    }

    fn link(&self, a: NodeId, b: NodeId) -> Link {
        match self.links.get(&self.pair(a, b)) {
            Some(l) => *l,
            None if self.nodes[a].key == "ncontroller" || self.nodes[b].key == "ncontroller" => self.controller,
            None => self.default,
        }
    }

    fn connected(&self, a: NodeId, b: NodeId) -> bool {
        !self.partitioned || self.nodes[a].group == self.nodes[b].group
    }

    fn usable(&self, a: NodeId, b: NodeId) -> bool {
        self.connected(a, b) && self.link(a, b).drop < 1.0
    }

    fn alive_as_sent(&self, node: NodeId, incarnation: u64) -> bool {
        let n = &self.nodes[node];
        n.alive && n.incarnation == incarnation
    }

    fn hold(&mut self, direction: Direction, message: Message) {
        let queue = self.held.entry(direction).or_default();
        let mut index = queue.len();
        while index > 0 && queue[index - 1].seq > message.seq {
            index -= 1;
        }
        queue.insert(index, message);
        self.held_count += 1;
    }

    /// The arrival time of `message` on `link` (delay draw, losses, the connection's order).
    fn arrival(&mut self, now: i64, direction: Direction, message: &Message, link: Link) -> Result<i64, DelayError> {
        if link.hi < link.lo {
            return Err(DelayError { lo: link.lo, hi: link.hi, reason: "an empty range: max below min" });
        }
        let width = link.hi as i128 - link.lo as i128 + 1;
        if width > i128::from(u64::MAX) {
            return Err(DelayError { lo: link.lo, hi: link.hi, reason: "wider than 2**64 - 1 ms" });
        }
        let drawn = link.lo as i128 + i128::from(self.rng.below(width as u64));
        let delay = drawn.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
        let mut arrival = now.saturating_add(delay).saturating_add(message.extra_ms);
        if link.drop > 0.0 && link.drop < 1.0 {
            let (mut rto, mut waited) = (RTO_MIN_MS, 0i64);
            while waited < RECONNECT_MS && self.rng.uniform() < link.drop {
                self.dropped += 1;
                waited += rto;
                rto = (rto * 2).min(RTO_MAX_MS);
            }
            arrival = arrival.saturating_add(waited.min(RECONNECT_MS));
        }
        if !link.reorder {
            let last = self.last_arrival.get(&direction).copied().unwrap_or(0);
            arrival = arrival.max(last);
            self.last_arrival.insert(direction, arrival);
        }
        Ok(arrival)
    }

    fn discard_dead(&mut self) {
        let dead: Vec<Direction> = self
            .held
            .iter()
            .filter(|(_, q)| {
                let first = &q[0];
                !(self.alive_as_sent(first.dst, first.dst_incarnation) && self.alive_as_sent(first.src, first.src_incarnation))
            })
            .map(|(d, _)| *d)
            .collect();
        for d in dead {
            if let Some(q) = self.held.remove(&d) {
                self.dropped += q.len() as u64;
                self.graveyard.extend(q.into_iter().map(|m| m.deliver));
            }
        }
    }

    /// `"<key>#<incarnation>"` of both ends: the order in which held connections are released.
    fn direction_name(&self, d: &Direction) -> (String, String) {
        (format!("{}#{}", self.nodes[d.0].key, d.1), format!("{}#{}", self.nodes[d.2].key, d.3))
    }
}

/// A delay range no draw can come from; made into an `InvalidArgumentError` once the lock is
/// released.
struct DelayError {
    lo: i64,
    hi: i64,
    reason: &'static str,
}

impl From<DelayError> for PyErr {
    fn from(e: DelayError) -> PyErr {
        invalid("delay_ms", format!("({}, {})", e.lo, e.hi), e.reason)
    }
}

fn net_of(k: &mut KernelState, index: usize) -> &mut Net {
    &mut k.nets[index]
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

    #[allow(clippy::too_many_arguments)]
    fn send_message(&self, src: &Bound<'_, PyAny>, dst: &Bound<'_, PyAny>, deliver: Py<PyAny>, post: bool, kind: &str,
                    coalesce: Option<String>, quiet: bool) -> PyResult<()> {
        let py = src.py();
        let (src, dst) = (node_arg(src)?, node_arg(dst)?);
        self.with(py, |k, i| {
            let net = net_of(k, i);
            net.sent += 1;
            let (s, d) = (net.id(&src), net.id(&dst));
            net.nodes[d].peers.insert(s);
            net.seq += 1;
            let message = Message {
                seq: net.seq,
                src: s,
                dst: d,
                src_incarnation: net.nodes[s].incarnation,
                dst_incarnation: net.nodes[d].incarnation,
                deliver,
                post,
                extra_ms: if kind == "fetch" { net.nodes[s].slow_ms } else { 0 },
                coalesce,
                quiet,
            };
            let direction = message.direction();
            let link = net.link(s, d);
            if net.held.contains_key(&direction) || !(net.connected(s, d) && link.drop < 1.0) {
                net.hold(direction, message);
                return Ok(());
            }
            if link.duplicate > 0.0 && net.rng.uniform() < link.duplicate {
                Self::schedule(k, i, direction, message.copy(py), link)?;
            }
            Self::schedule(k, i, direction, message, link)
        })?;
        Ok(())
    }

    /// Schedule `message`'s delivery on `direction` (`Network._schedule`).
    fn schedule(k: &mut KernelState, index: usize, direction: Direction, message: Message, link: Link) -> Result<(), DelayError> {
        let now = k.now;
        let arrival = net_of(k, index).arrival(now, direction, &message, link)?;
        k.push(arrival, What::Deliver { net: index, message: Box::new(message) });
        Ok(())
    }

    /// Deliver, in order, what is held on every connection that is usable again.
    fn release(k: &mut KernelState, index: usize) -> Result<(), DelayError> {
        let net = net_of(k, index);
        net.discard_dead();
        let mut directions: Vec<(String, String, Direction)> = net
            .held
            .keys()
            .map(|d| {
                let (a, b) = net.direction_name(d);
                (a, b, *d)
            })
            .collect();
        directions.sort();
        for (_, _, d) in directions {
            let net = net_of(k, index);
            let (src, dst) = match net.held.get(&d) {
                Some(q) => (q[0].src, q[0].dst),
                None => continue,
            };
            if !net.usable(src, dst) {
                continue;
            }
            let queue = net.held.remove(&d).unwrap_or_default();
            let mut newest: HashMap<&str, u64> = HashMap::default();
            for m in &queue {
                if let Some(c) = &m.coalesce {
                    newest.insert(c.as_str(), m.seq);
                }
            }
            let keep: Vec<bool> = queue.iter().map(|m| m.coalesce.as_deref().is_none_or(|c| newest[c] == m.seq)).collect();
            let link = net.link(src, dst);
            for (m, keep) in queue.into_iter().zip(keep) {
                if !keep {
                    let net = net_of(k, index);
                    net.dropped += 1;
                    net.graveyard.push(m.deliver);
                    continue;
                }
                Self::schedule(k, index, d, m, link)?;
            }
        }
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
        let rng = Twister::from_python(&stream)?;
        let (dlo, dhi) = delay_pair(default_delay_ms)?;
        let (clo, chi) = delay_pair(controller_delay_ms)?;
        let link = |lo, hi| Link { lo, hi, drop: 0.0, duplicate: 0.0, reorder: false };
        let net = Net {
            rng,
            default: link(dlo, dhi),
            controller: link(clo, chi),
            nodes: Vec::new(),
            by_int: HashMap::default(),
            by_str: HashMap::default(),
            by_key: HashMap::default(),
            links: HashMap::default(),
            partitioned: false,
            last_arrival: HashMap::default(),
            seq: 0,
            held: HashMap::default(),
            sent: 0,
            delivered: 0,
            dropped: 0,
            held_count: 0,
            graveyard: Vec::new(),
        };
        let index = {
            let mut k = kernel.get().state();
            k.nets.push(net);
            k.nets.len() - 1
        };
        Ok(Self { kernel, index })
    }

    #[getter]
    fn sent(&self, py: Python<'_>) -> u64 {
        self.with(py, |k, i| k.nets[i].sent)
    }
    #[getter]
    fn delivered(&self, py: Python<'_>) -> u64 {
        self.with(py, |k, i| k.nets[i].delivered)
    }
    #[getter]
    fn dropped(&self, py: Python<'_>) -> u64 {
        self.with(py, |k, i| k.nets[i].dropped)
    }
    #[getter]
    fn held(&self, py: Python<'_>) -> u64 {
        self.with(py, |k, i| k.nets[i].held_count)
    }

    /// Mark a node up or down; going up starts a new incarnation. Messages held on the
    /// connections of a node that goes down are lost with them.
    fn set_alive(&self, node: &Bound<'_, PyAny>, alive: bool) -> PyResult<()> {
        let node = node_arg(node)?;
        self.with(node_py(&node), |k, i| {
            let net = net_of(k, i);
            let id = net.id(&node);
            let n = &mut net.nodes[id];
            if alive && !n.alive {
                n.incarnation += 1;
            }
            n.alive = alive;
            n.peers.clear(); // a new or dead incarnation has no connections yet
            if !alive {
                net.discard_dead();
            }
        });
        Ok(())
    }

    /// The nodes that opened a connection to `node`'s current incarnation (sent it a message),
    /// ordered by name: those a process crash of `node` resets.
    fn peers<'py>(&self, node: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let py = node.py();
        let node = node_arg(node)?;
        let objects = self.with(py, |k, i| {
            let net = net_of(k, i);
            let id = net.id(&node);
            let mut peers: Vec<NodeId> = net.nodes[id].peers.iter().copied().collect();
            peers.sort_by(|a, b| net.nodes[*a].key.cmp(&net.nodes[*b].key));
            peers.into_iter().map(|p| net.nodes[p].object.clone_ref(py)).collect::<Vec<_>>()
        });
        PyList::new(py, objects)
    }

    pub(crate) fn is_alive(&self, node: &Bound<'_, PyAny>) -> PyResult<bool> {
        let node = node_arg(node)?;
        Ok(self.with(node_py(&node), |k, i| {
            let net = net_of(k, i);
            let id = net.id(&node);
            net.nodes[id].alive
        }))
    }

    /// Cut the network into `groups`; every node not listed forms one further group, except
    /// the transaction coordinator, which stays on the controller's side unless listed.
    fn partition(&self, groups: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = groups.py();
        let mut listed: Vec<(NodeArg<'_>, i64)> = Vec::new();
        for (index, group) in groups.try_iter()?.enumerate() {
            for node in group?.try_iter()? {
                listed.push((node_arg(&node?)?, index as i64));
            }
        }
        let coordinator = node_arg(PyString::new(py, "coordinator").as_any())?;
        self.with(py, |k, i| {
            let net = net_of(k, i);
            for n in net.nodes.iter_mut() {
                n.group = -1;
            }
            let mut coordinator_listed = false;
            let mut controller_group = None;
            for (node, index) in &listed {
                let id = net.id(node);
                net.nodes[id].group = *index;
                match net.nodes[id].key.as_str() {
                    "ncoordinator" => coordinator_listed = true,
                    "ncontroller" => controller_group = Some(*index),
                    _ => {}
                }
            }
            if let (false, Some(g)) = (coordinator_listed, controller_group) {
                let id = net.id(&coordinator);
                net.nodes[id].group = g;
            }
            net.partitioned = true;
            Self::release(k, i)
        })?;
        Ok(())
    }

    /// Remove the partition (link settings and slow followers stay).
    fn heal(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |k, i| {
            net_of(k, i).partitioned = false;
            Self::release(k, i)
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
            let net = net_of(k, i);
            let (ia, ib) = (net.id(&a), net.id(&b));
            let base = net.link(ia, ib);
            let mut link = Link { lo: base.lo, hi: base.hi, drop, duplicate, reorder };
            let mut applicable = true;
            let controller = net.nodes[ia].key == "ncontroller" || net.nodes[ib].key == "ncontroller";
            if controller && (duplicate > 0.0 || reorder) {
                link.duplicate = 0.0;
                link.reorder = false;
                applicable = false;
            }
            if let Some((lo, hi)) = delay {
                link.lo = lo;
                link.hi = hi;
            }
            let pair = net.pair(ia, ib);
            net.links.insert(pair, link);
            Self::release(k, i).map(|_| applicable)
        })?;
        Ok(applicable)
    }

    /// Add `extra_delay_ms` to every fetch request `node` sends (0 removes it).
    fn slow_node(&self, node: &Bound<'_, PyAny>, extra_delay_ms: &Bound<'_, PyAny>) -> PyResult<()> {
        let extra = ms(extra_delay_ms)?.max(0);
        let node = node_arg(node)?;
        self.with(node_py(&node), |k, i| {
            let net = net_of(k, i);
            let id = net.id(&node);
            net.nodes[id].slow_ms = extra;
        });
        Ok(())
    }

    /// Whether the current partition lets `a` and `b` talk.
    fn connected(&self, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<bool> {
        let (a, b) = (node_arg(a)?, node_arg(b)?);
        Ok(self.with(node_py(&a), |k, i| {
            let net = net_of(k, i);
            let (ia, ib) = (net.id(&a), net.id(&b));
            net.connected(ia, ib)
        }))
    }

    /// Whether messages between `a` and `b` get through now (connected, and the link not cut
    /// with `drop=1.0`).
    fn usable(&self, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<bool> {
        let (a, b) = (node_arg(a)?, node_arg(b)?);
        Ok(self.with(node_py(&a), |k, i| {
            let net = net_of(k, i);
            let (ia, ib) = (net.id(&a), net.id(&b));
            net.usable(ia, ib)
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
        Ok(self.with(node_py(&src), |k, i| {
            let net = net_of(k, i);
            let (s, d) = (net.id(&src), net.id(&dst));
            let gone: Vec<Direction> = net.held.iter().filter(|(_, q)| q[0].src == s && q[0].dst == d).map(|(dir, _)| *dir).collect();
            let mut count = 0;
            for dir in gone {
                if let Some(q) = net.held.remove(&dir) {
                    count += q.len() as u64;
                    net.graveyard.extend(q.into_iter().map(|m| m.deliver));
                }
            }
            net.dropped += count;
            count
        }))
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.kernel)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        self.with(py, |k, i| {
            let n = &k.nets[i];
            format!("Network(sent={}, delivered={}, dropped={}, held={})", n.sent, n.delivered, n.dropped, n.held_count)
        })
    }
}

/// The draws of the network's stream, for the test that compares them with `random.Random`:
/// `(kind, argument)` pairs, `("below", n)` or `("random", 0)`, drawn from a twister seeded
/// with `rng`'s state; returns the values as floats (exact for `below` up to 2**53).
#[pyfunction]
fn _twister_draws(rng: &Bound<'_, PyAny>, draws: Vec<(String, u64)>) -> PyResult<Vec<f64>> {
    let mut t = Twister::from_python(rng)?;
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
