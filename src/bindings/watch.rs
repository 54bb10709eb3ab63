//! `ChangeWatch`: the state checker's change detector (`epochlab.checks.state`) in one call.
//!
//! After every event that is not quiet the checker asks which brokers' change keys
//! (`alive`, `incarnation`, `replica.state_key()`) and whether the controller's
//! (`leader`, `leader_epoch`, `partition_epoch`, `isr`, `elr`, `len(elections)`) moved since
//! the last call; nine times in ten nothing did. This answers that with no Python objects made
//! for a Rust replica (its key is read as Rust values) and no Python frame; a replica of
//! another kind is asked for `state_key()`. Values are compared the way a tuple compares its
//! items (identity, then `==`), so the answers are those of the plain Python statement,
//! `epochlab.checks.state.PlainWatch`.
//!
//! No lock is held while Python code runs (an attribute may be a property, `==` may be any
//! method): the kept keys are taken out of the lock, compared, and put back.

use std::sync::Mutex;

use rustc_hash::FxHashMap as HashMap;

use pyo3::gc::PyVisit;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::exceptions::{PyAttributeError, PyTypeError};
use pyo3::types::{PyDict, PyList, PyString};
use pyo3::PyTraverseError;

use super::args::lock;
use super::replica::{ChangeKey, PyReplica};

/// What an event the kernel ran was, as the watcher is told of it (`PyWatcher::after_event`).
pub(crate) enum Ran {
    /// An event of this node (a message delivered to it, or a timer it scheduled).
    Owned(Py<PyAny>),
    /// An event with no known owner (a timer an action scheduled).
    Unowned,
    /// Nothing: a message dropped or held.
    Nothing,
}

enum ReplicaKey {
    Native(ChangeKey),
    Object(Py<PyAny>),
}

struct BrokerKey {
    alive: Py<PyAny>,
    incarnation: Py<PyAny>,
    replica: ReplicaKey,
}

#[derive(Default)]
struct Kept {
    brokers: HashMap<i64, BrokerKey>,
    controller: Option<(Vec<Py<PyAny>>, usize)>,
}

/// `obj.<name>`; a missing attribute is the caller's mistake, a `TypeError` naming `what`.
fn attr<'py>(obj: &Bound<'py, PyAny>, name: &Bound<'py, PyString>, what: &dyn Fn() -> String) -> PyResult<Bound<'py, PyAny>> {
    obj.getattr(name).map_err(|e| {
        if e.is_instance_of::<PyAttributeError>(obj.py()) {
            PyTypeError::new_err(format!("ChangeWatch.changes: {} has no attribute {name:?}", what()))
        } else {
            e
        }
    })
}

/// `a == b` as a tuple compares its items: the same object, or equal.
fn same(a: &Bound<'_, PyAny>, b: &Py<PyAny>) -> PyResult<bool> {
    Ok(a.is(b) || a.eq(b)?)
}

fn broker_key(id: i64, broker: &Bound<'_, PyAny>) -> PyResult<BrokerKey> {
    let py = broker.py();
    let what = || format!("brokers[{id}]");
    let alive = attr(broker, intern!(py, "alive"), &what)?.unbind();
    let incarnation = attr(broker, intern!(py, "incarnation"), &what)?.unbind();
    let replica = attr(broker, intern!(py, "replica"), &what)?;
    let replica = match replica.cast::<PyReplica>() {
        Ok(r) => ReplicaKey::Native(r.get().change_key(py)),
        Err(_) => ReplicaKey::Object(attr(&replica, intern!(py, "state_key"), &|| format!("brokers[{id}].replica"))?.call0()?.unbind()),
    };
    Ok(BrokerKey { alive, incarnation, replica })
}

fn same_broker(py: Python<'_>, new: &BrokerKey, old: Option<&BrokerKey>) -> PyResult<bool> {
    let Some(old) = old else { return Ok(false) };
    if !same(new.alive.bind(py), &old.alive)? || !same(new.incarnation.bind(py), &old.incarnation)? {
        return Ok(false);
    }
    match (&new.replica, &old.replica) {
        (ReplicaKey::Native(a), ReplicaKey::Native(b)) => Ok(a == b),
        (ReplicaKey::Object(a), ReplicaKey::Object(b)) => same(a.bind(py), b),
        _ => Ok(false),
    }
}

/// The controller's key fields, then `len(elections)`.
fn controller_key<'py>(controller: &Bound<'py, PyAny>) -> PyResult<(Vec<Bound<'py, PyAny>>, usize)> {
    let py = controller.py();
    let fields = [
        intern!(py, "leader"),
        intern!(py, "leader_epoch"),
        intern!(py, "partition_epoch"),
        intern!(py, "isr"),
        intern!(py, "elr"),
    ];
    let what = || "the controller".to_string();
    let values = fields.iter().map(|f| attr(controller, f, &what)).collect::<PyResult<Vec<_>>>()?;
    Ok((values, attr(controller, intern!(py, "elections"), &what)?.len()?))
}

/// The state checker's change detector: `changes(brokers, controller)` is `None` when no
/// key moved since the last call, else `(changed broker ids in the dict's order,
/// controller changed)`; the keys are kept for the next call.
#[pyclass(frozen, name = "ChangeWatch", module = "epochlab._core")]
pub(crate) struct PyChangeWatch {
    kept: Mutex<Kept>,
}

#[pymethods]
impl PyChangeWatch {
    #[new]
    fn new() -> Self {
        Self { kept: Mutex::new(Kept::default()) }
    }

    fn changes<'py>(&self, brokers: &Bound<'py, PyDict>, controller: &Bound<'py, PyAny>) -> PyResult<Option<(Bound<'py, PyList>, bool)>> {
        self.changes_in(brokers, controller, Scope::All)
    }

    /// A callable for the kernel's `observe` hook: each call is `changes(brokers, controller)`
    /// and, when something moved, `then(changed, controller_changed)`; the events where
    /// nothing moved (nine in ten) run no Python frame. As the Rust kernel's hook, after an
    /// event of a broker (a message delivered to it, a timer it owns) only that broker's key
    /// is compared, after one of the controller only the controller's, and after a message
    /// dropped or held nothing (`Watcher` doc).
    fn watching(slf: &Bound<'_, Self>, brokers: &Bound<'_, PyDict>, controller: &Bound<'_, PyAny>,
                then: &Bound<'_, PyAny>) -> PyResult<PyWatcher> {
        if !then.is_callable() {
            return Err(PyTypeError::new_err(format!(
                "ChangeWatch.watching: then must be callable, got {}", then.get_type().name()?)));
        }
        Ok(PyWatcher {
            parts: Mutex::new(Some(WatcherParts {
                watch: slf.clone().unbind(),
                brokers: brokers.clone().unbind(),
                controller: controller.clone().unbind(),
                then: then.clone().unbind(),
            })),
        })
    }

    /// Forget broker `b`'s key: it counts as changed at the next call.
    fn forget(&self, b: i64) {
        let gone = lock(&self.kept).brokers.remove(&b);
        drop(gone);
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        let Ok(kept) = self.kept.try_lock() else { return Ok(()) };
        for key in kept.brokers.values() {
            visit.call(&key.alive)?;
            visit.call(&key.incarnation)?;
            if let ReplicaKey::Object(o) = &key.replica {
                visit.call(o)?;
            }
        }
        if let Some((fields, _)) = &kept.controller {
            for f in fields {
                visit.call(f)?;
            }
        }
        Ok(())
    }

    fn __clear__(&self) {
        let gone = self.kept.try_lock().map(|mut k| std::mem::take(&mut *k));
        drop(gone);
    }
}

/// The keys an event may have moved (`Watcher::after_event`).
enum Scope<'py> {
    /// Every broker's and the controller's.
    All,
    /// Broker `id`'s alone: the event was the broker's own (a message delivered to it, a
    /// timer it owns).
    Broker(Bound<'py, PyAny>),
    /// The controller's alone: the event was the controller's own.
    Controller,
}

impl PyChangeWatch {
    fn changes_in<'py>(&self, brokers: &Bound<'py, PyDict>, controller: &Bound<'py, PyAny>, scope: Scope<'py>)
                       -> PyResult<Option<(Bound<'py, PyList>, bool)>> {
        let py = brokers.py();
        let mut kept = std::mem::take(&mut *lock(&self.kept));
        let result = (|| {
            let changed = PyList::empty(py);
            let mut look = |b: Bound<'py, PyAny>, broker: Bound<'py, PyAny>| -> PyResult<()> {
                let id: i64 = b.extract()?;
                let key = broker_key(id, &broker)?;
                if !same_broker(py, &key, kept.brokers.get(&id))? {
                    kept.brokers.insert(id, key);
                    changed.append(b)?;
                }
                Ok(())
            };
            match &scope {
                Scope::All => {
                    for (b, broker) in brokers.iter() {
                        look(b, broker)?;
                    }
                }
                Scope::Broker(b) => {
                    if let Some(broker) = brokers.get_item(b)? {
                        look(b.clone(), broker)?;
                    }
                }
                Scope::Controller => {}
            }
            let ctrl_changed = match scope {
                Scope::Broker(_) => false,
                Scope::All | Scope::Controller => {
                    let (fields, elections) = controller_key(controller)?;
                    let moved = match &kept.controller {
                        Some((old, n)) => {
                            let mut equal = *n == elections;
                            for (a, b) in fields.iter().zip(old) {
                                if !equal {
                                    break;
                                }
                                equal = same(a, b)?;
                            }
                            !equal
                        }
                        None => true,
                    };
                    kept.controller = Some((fields.into_iter().map(Bound::unbind).collect(), elections));
                    moved
                }
            };
            Ok(if changed.is_empty() && !ctrl_changed { None } else { Some((changed, ctrl_changed)) })
        })();
        *lock(&self.kept) = kept;
        result
    }
}

struct WatcherParts {
    watch: Py<PyChangeWatch>,
    brokers: Py<PyDict>,
    controller: Py<PyAny>,
    then: Py<PyAny>,
}

/// `ChangeWatch.watching(...)`: called with no arguments, asks the watch and passes what moved
/// on. Its parts are taken out of the lock (cloned references) before any Python runs.
///
/// The Rust kernel calls it natively with the event it just ran (`after_event`, [`Ran`]).
/// Components of a run act on each other only through posted messages (`SimContext`: no
/// component holds another), so an event of a node (a message delivered to it, or a timer
/// scheduled during one of its events: the kernel passes that ownership on, as it passes on
/// quietness) ran that node's own code and can have moved that node's key alone: after a
/// broker's event only its key is compared, after the controller's only the controller's, and
/// after a message dropped or held none. Timers an action scheduled have no owner: after them
/// every key is compared. (The reference backend's Python kernel compares every key after
/// every event; the rust-vs-reference differential holds the two forms byte-identical.)
#[pyclass(frozen, name = "Watcher", module = "epochlab._core")]
pub(crate) struct PyWatcher {
    parts: Mutex<Option<WatcherParts>>,
}

impl PyWatcher {
    /// The parts, as new references taken under the lock.
    fn parts(&self, py: Python<'_>) -> PyResult<WatcherParts> {
        let parts = lock(&self.parts);
        let Some(p) = parts.as_ref() else {
            return Err(PyTypeError::new_err("Watcher: cleared by the garbage collector"));
        };
        Ok(WatcherParts {
            watch: p.watch.clone_ref(py),
            brokers: p.brokers.clone_ref(py),
            controller: p.controller.clone_ref(py),
            then: p.then.clone_ref(py),
        })
    }

    /// The kernel's hook after an event that is not quiet, told what the event was.
    pub(crate) fn after_event(&self, py: Python<'_>, ran: Ran) -> PyResult<()> {
        let WatcherParts { watch, brokers, controller, then } = self.parts(py)?;
        let (brokers, controller) = (brokers.bind(py), controller.bind(py));
        let scope = match ran {
            Ran::Unowned => Scope::All,
            Ran::Nothing => return Ok(()),
            Ran::Owned(node) => {
                // by identity: the controller, or one of the watched brokers
                let node = node.bind(py);
                if node.is(controller) {
                    Scope::Controller
                } else {
                    match brokers.iter().find(|(_, b)| b.is(node)) {
                        Some((id, _)) => Scope::Broker(id),
                        None => Scope::All,
                    }
                }
            }
        };
        if let Some(found) = watch.get().changes_in(brokers, controller, scope)? {
            then.call1(py, found)?;
        }
        Ok(())
    }
}

#[pymethods]
impl PyWatcher {
    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        self.after_event(py, Ran::Unowned)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        let Ok(parts) = self.parts.try_lock() else { return Ok(()) };
        if let Some(p) = parts.as_ref() {
            visit.call(&p.watch)?;
            visit.call(&p.brokers)?;
            visit.call(&p.controller)?;
            visit.call(&p.then)?;
        }
        Ok(())
    }

    fn __clear__(&self) {
        let gone = self.parts.try_lock().map(|mut p| p.take());
        drop(gone);
    }
}
