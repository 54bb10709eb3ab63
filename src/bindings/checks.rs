//! `StateScan`: the passing case of the state checker's per-event checks
//! (`epochlab.checks.state.StateChecker._check`) in Rust, for clusters of Rust replicas.
//!
//! Each method answers one part of a check as the Python statement does: it gathers a plain
//! view of the cluster (`crate::invariants::ReplicaView`, `ControllerView`: the replicas and
//! logs read as Rust values, the brokers, the controller and the checker's ground truth through
//! their Python attributes) and asks the pure predicates of `crate::invariants`. It returns `True` when that part passes (having made the
//! bookkeeping writes the Python code makes when it passes) and `False`, with nothing
//! written, when it would report a failure or when a replica is not a Rust one: the caller
//! then runs the Python statement of that part, which reports (`StateChecker.report`
//! formats every message, so each message comes from one place). The differential tests
//! compare the checker using it with the plain one on runs bent to fail.

use std::sync::Mutex;

use rustc_hash::FxHashMap as HashMap;

use pyo3::exceptions::{PyAttributeError, PyKeyError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PySet, PyTuple};

use super::args::lock;
use super::divergence::with_two;
use super::log::PyReplicaLog;
use super::replica::PyReplica;
use crate::invariants::{self as inv, first_mismatch_between, ControllerView, ReplicaView};
use crate::replica::Role;
use crate::types::Offset;

/// The broker's replica, if it is a Rust one.
fn rust_replica<'py>(broker: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyReplica>>> {
    let replica = broker.getattr(intern!(broker.py(), "replica"))?;
    Ok(replica.cast_into::<PyReplica>().ok())
}

fn ids(list: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    if let Ok(l) = list.cast::<PyList>() {
        return l.iter().map(|x| x.extract::<i64>()).collect();
    }
    if let Ok(t) = list.cast::<PyTuple>() {
        return t.iter().map(|x| x.extract::<i64>()).collect();
    }
    list.try_iter()?.map(|x| x?.extract::<i64>()).collect()
}

/// The checker's cluster, its brokers and its controller.
fn cluster_of<'py>(checker: &Bound<'py, PyAny>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyDict>, Bound<'py, PyAny>)> {
    let py = checker.py();
    let cluster = checker.getattr(intern!(py, "cluster"))?;
    let brokers = cluster.getattr(intern!(py, "brokers"))?.cast_into::<PyDict>()?;
    let ctrl = cluster.getattr(intern!(py, "controller"))?;
    Ok((cluster, brokers, ctrl))
}

/// What every part reads: the checker, its cluster's parts, the changed broker ids, and the
/// view of every broker's replica (in the dict's order) with its log.
struct Scene<'py> {
    checker: Bound<'py, PyAny>,
    cluster: Bound<'py, PyAny>,
    brokers: Bound<'py, PyDict>,
    ctrl: Bound<'py, PyAny>,
    changed: Vec<i64>,
    views: Vec<ReplicaView>,
    logs: Vec<Py<PyReplicaLog>>,
}

impl<'py> Scene<'py> {
    /// `None` when a replica is not a Rust one.
    fn of(checker: &Bound<'py, PyAny>, changed: &Bound<'py, PyList>) -> PyResult<Option<Self>> {
        let (cluster, brokers, ctrl) = cluster_of(checker)?;
        let Some((views, logs)) = replica_views(&brokers)? else { return Ok(None) };
        Ok(Some(Scene { checker: checker.clone(), cluster, brokers, ctrl, changed: ids(changed.as_any())?, views, logs }))
    }

    /// The index of broker `id`'s view; a missing one is a `KeyError`, as `brokers[id]` is.
    fn index(&self, id: i64) -> PyResult<usize> {
        self.views.iter().position(|v| v.id == id).ok_or_else(|| PyKeyError::new_err(id))
    }
}

/// The view of one broker and its Rust replica.
fn replica_view(id: i64, broker: &Bound<'_, PyAny>, replica: &Bound<'_, PyReplica>) -> PyResult<ReplicaView> {
    let py = broker.py();
    let alive = broker.getattr(intern!(py, "alive"))?.is_truthy()?;
    Ok(replica.get().with(py, |r, log| {
        let leader = r.role == Role::Leader;
        ReplicaView {
            id,
            alive,
            leader,
            replicating: r.role != Role::None,
            leader_epoch: r.leader_epoch.map(|e| e.0),
            has_partition_epoch: r.partition_epoch.is_some(),
            high_watermark: log.high_watermark().0,
            log_end_offset: log.log_end_offset().0,
            isr_len: r.isr.len(),
            maximal_isr: if leader { r.maximal_isr().iter().map(|b| i64::from(b.0)).collect() } else { Vec::new() },
        }
    }))
}

/// The views of every broker (in the dict's order) with their logs; `None` when a replica is
/// not a Rust one.
#[allow(clippy::type_complexity)]
fn replica_views(brokers: &Bound<'_, PyDict>) -> PyResult<Option<(Vec<ReplicaView>, Vec<Py<PyReplicaLog>>)>> {
    let py = brokers.py();
    let (mut views, mut logs) = (Vec::with_capacity(brokers.len()), Vec::with_capacity(brokers.len()));
    for (b, broker) in brokers.iter() {
        let Some(replica) = rust_replica(&broker)? else { return Ok(None) };
        views.push(replica_view(b.extract()?, &broker, &replica)?);
        logs.push(replica.get().log_object().clone_ref(py));
    }
    Ok(Some((views, logs)))
}

/// The controller's view: its leader and epoch, its ISR and ELR.
fn controller_view(ctrl: &Bound<'_, PyAny>) -> PyResult<ControllerView> {
    let py = ctrl.py();
    Ok(ControllerView {
        leader: ctrl.getattr(intern!(py, "leader"))?.extract()?,
        leader_epoch: ctrl.getattr(intern!(py, "leader_epoch"))?.extract()?,
        isr: ids(&ctrl.getattr(intern!(py, "isr"))?)?,
        elr: ids(&ctrl.getattr(intern!(py, "elr"))?)?,
    })
}

/// An `Err(id)` of a predicate: a broker id that is no broker, a `KeyError` as `brokers[id]`.
fn no_broker(id: i64) -> PyErr {
    PyKeyError::new_err(id)
}

/// The checker's truth and `trueHW`.
fn truth<'py>(checker: &Bound<'py, PyAny>) -> PyResult<(Bound<'py, PyReplicaLog>, u64)> {
    let py = checker.py();
    let log = checker.getattr(intern!(py, "truth"))?.cast_into::<PyReplicaLog>()?;
    Ok((log, checker.getattr(intern!(py, "true_hw"))?.extract()?))
}

/// A caller's mistake (an object without an attribute, a broker id that is no broker) is a
/// `TypeError` naming the method; any other error passes as it is.
fn mistake(method: &str, e: PyErr) -> PyErr {
    Python::attach(|py| {
        if e.is_instance_of::<PyAttributeError>(py) || e.is_instance_of::<PyKeyError>(py) {
            PyTypeError::new_err(format!("StateScan.{method}: {e}"))
        } else {
            e
        }
    })
}

#[pyclass(frozen, name = "StateScan", module = "epochlab._core")]
pub(crate) struct PyStateScan {
    epochs_in_batches: bool,
    strict_min_isr: bool,
    min_isr: usize,
    /// Verified prefixes, per pair of logs (by address, within this checker's run): the
    /// stamps both stores had (`BatchStore::stamp`) and the offset below which the pair was
    /// found equal (a scan that found no mismatch below the smaller LEO). While both stamps
    /// hold, only what was appended since is compared.
    verified: Mutex<HashMap<LogPair, Verified>>,
}

/// Two logs, by address.
type LogPair = (usize, usize);
/// The two stores' stamps and the end of the prefix found equal.
type Verified = (u64, u64, u64);

#[pymethods]
impl PyStateScan {
    #[new]
    fn new(epochs_in_batches: bool, strict_min_isr: bool, min_isr: usize) -> Self {
        Self { epochs_in_batches, strict_min_isr, min_isr, verified: Mutex::new(HashMap::default()) }
    }

    /// `_check_replica(b)` passes: HW bounds, no holes, epochs (when batches carry them), a
    /// leader's HW neither down nor (strict generations) up with too small an ISR; then
    /// `leader_hw[(b, incarnation, epoch)]` is updated as the Python code does.
    fn replica(&self, b: &Bound<'_, PyAny>, broker: &Bound<'_, PyAny>, leader_hw: &Bound<'_, PyDict>) -> PyResult<bool> {
        self.replica_of(b, broker, leader_hw).map_err(|e| mistake("replica", e))
    }

    /// `_check_log_matching(changed)` passes: every pair with a changed broker agrees below
    /// the smaller HW.
    fn log_matching(&self, brokers: &Bound<'_, PyDict>, changed: &Bound<'_, PyList>) -> PyResult<bool> {
        (|| {
            let Some((views, logs)) = replica_views(brokers)? else { return Ok(false) };
            Ok(self.log_matching_of(&views, &logs, &ids(changed.as_any())?))
        })()
        .map_err(|e| mistake("log_matching", e))
    }

    /// `_check_leaders(changed, moved)` passes: no two live leaders of one epoch (asked when a
    /// broker changed); the controller's leader, once it leads its epoch, holds the truth
    /// (asked when it or the truth or the controller moved; then `(leader, epoch)` joins
    /// `checker._leaderships`) and, with a partition epoch, counts every controller-ISR
    /// member behind its HW in its maximal ISR.
    fn leaders(&self, checker: &Bound<'_, PyAny>, changed: &Bound<'_, PyList>, moved: bool) -> PyResult<bool> {
        (|| match Scene::of(checker, changed)? {
            Some(scene) => self.leaders_of(&scene, moved),
            None => Ok(false),
        })()
        .map_err(|e| mistake("leaders", e))
    }

    /// The Inv-StrongIsr half of `_check_isr` passes: every live ISR/ELR member that is a
    /// leader or follower (and changed, unless `every`) holds the truth. The caller asks only
    /// when nothing else of `_check_isr` has work (no recovering broker, the controller
    /// unchanged, no broker just out of recovery).
    fn strong_isr(&self, checker: &Bound<'_, PyAny>, changed: &Bound<'_, PyList>, every: bool) -> PyResult<bool> {
        (|| match Scene::of(checker, changed)? {
            Some(scene) => self.strong_isr_of(&scene, every),
            None => Ok(false),
        })()
        .map_err(|e| mistake("strong_isr", e))
    }

    /// `StateChecker._check(changed, ctrl_changed)` in one call, its parts in its order: each
    /// broker's part (`replica`), the truth's advance (`_advance_true_hw`, asking the checker's
    /// `_legitimate` for a leader whose HW passed `trueHW`), `leaders`, `log_matching`, then
    /// `strong_isr` when nothing else of `_check_isr` has work. `None` when every part passed;
    /// else `(stage, moved)`: the Python statement goes on from that part (0: from the start,
    /// nothing but the brokers' idempotent HW bookkeeping done; 1: the leaders' part, 2: log
    /// matching, 3: the ISR part), with `moved` (the controller or the truth moved) as
    /// computed here. Clusters with a replica that is not a Rust one get `(0, None)`.
    fn check(&self, checker: &Bound<'_, PyAny>, changed: &Bound<'_, PyList>, ctrl_changed: bool) -> PyResult<Option<(u8, Option<bool>)>> {
        self.check_of(checker, changed, ctrl_changed).map_err(|e| mistake("check", e))
    }
}

impl PyStateScan {
    /// `first_mismatch(a, b)`, comparing from the pair's verified prefix on.
    fn mismatch(&self, a: &PyReplicaLog, b: &PyReplicaLog) -> Option<Offset> {
        let key = (a as *const PyReplicaLog as usize, b as *const PyReplicaLog as usize);
        let known = lock(&self.verified).get(&key).copied();
        with_two(a, b, |x, y| {
            let stamps = (x.store().stamp(), y.store().stamp());
            let from = match known {
                Some((sa, sb, end)) if (sa, sb) == stamps => end,
                _ => 0,
            };
            let found = first_mismatch_between(x, y, Offset(from), Offset(u64::MAX));
            if found.is_none() {
                let end = x.log_end_offset().0.min(y.log_end_offset().0).max(from);
                lock(&self.verified).insert(key, (stamps.0, stamps.1, end));
            }
            found
        })
    }

    /// `StateChecker._missing_committed` finds nothing: `log` holds the truth below `true_hw`.
    fn holds_truth(&self, truth: &PyReplicaLog, true_hw: u64, log: &PyReplicaLog) -> bool {
        let leo = lock(&log.inner).log_end_offset().0; // (the guard gone before `mismatch` locks)
        inv::holds_committed(true_hw, leo, || self.mismatch(truth, log))
    }

    fn check_of(&self, checker: &Bound<'_, PyAny>, changed: &Bound<'_, PyList>, ctrl_changed: bool) -> PyResult<Option<(u8, Option<bool>)>> {
        let py = checker.py();
        let Some(scene) = Scene::of(checker, changed)? else { return Ok(Some((0, None))) };
        let leader_hw = checker.getattr(intern!(py, "_leader_hw"))?.cast_into::<PyDict>()?;
        for b in changed.iter() {
            let broker = scene.brokers.get_item(&b)?.ok_or_else(|| PyKeyError::new_err(b.clone().unbind()))?;
            if !self.replica_of(&b, &broker, &leader_hw)? {
                return Ok(Some((0, None)));
            }
        }
        let moved = self.advance_true_hw(checker, &scene.cluster, &scene.brokers, (!ctrl_changed).then_some(changed))? || ctrl_changed;
        if !self.leaders_of(&scene, moved)? {
            return Ok(Some((1, Some(moved))));
        }
        if !self.log_matching_of(&scene.views, &scene.logs, &scene.changed) {
            return Ok(Some((2, Some(moved))));
        }
        if ctrl_changed
            || checker.getattr(intern!(py, "recovering"))?.is_truthy()?
            || checker.getattr(intern!(py, "_rejoined"))?.is_truthy()?
            || !self.strong_isr_of(&scene, moved)?
        {
            return Ok(Some((3, Some(moved))));
        }
        Ok(None)
    }

    /// `StateChecker._advance_true_hw(only)`: copy what a legitimate leader's HW passed into
    /// the truth (every broker when `only` is `None`); whether `trueHW` moved. The leader's
    /// batches from the truth's end below its HW are appended when the first starts there; a
    /// log error (a read below the log start, an append that does not follow) leaves the
    /// truth as it is, and `trueHW` moves all the same, as the Python statement does.
    fn advance_true_hw(&self, checker: &Bound<'_, PyAny>, cluster: &Bound<'_, PyAny>, brokers: &Bound<'_, PyDict>,
                       only: Option<&Bound<'_, PyList>>) -> PyResult<bool> {
        let py = checker.py();
        let (truth, mut true_hw) = truth(checker)?;
        let before = true_hw;
        let ids: Vec<Bound<'_, PyAny>> = match only {
            Some(list) => list.iter().collect(),
            None => brokers.keys().iter().collect(),
        };
        for b in ids {
            let broker = brokers.get_item(&b)?.ok_or_else(|| PyKeyError::new_err(b.clone().unbind()))?;
            if !broker.getattr(intern!(py, "alive"))?.is_truthy()? {
                continue;
            }
            let Some(replica) = rust_replica(&broker)? else { continue };
            let (leads, epoch, hw, leo) = replica.get().with(py, |r, log| {
                (r.role == Role::Leader, r.leader_epoch.map(|e| e.0), log.high_watermark().0, log.log_end_offset().0)
            });
            if !leads || hw <= true_hw {
                continue;
            }
            if !checker.call_method1(intern!(py, "_legitimate"), (&b, epoch))?.is_truthy()? {
                continue;
            }
            let start = lock(&truth.get().inner).log_end_offset().0;
            if start < leo {
                let read = lock(&replica.get().log_object().bind(py).get().inner).read(Offset(start), None, None);
                if let Ok(mut batches) = read {
                    batches.retain(|x| x.base_offset().0 < hw);
                    if batches.first().is_some_and(|x| x.base_offset().0 == start) {
                        let appended = lock(&truth.get().inner).append_batches_as_follower(&batches);
                        drop(appended); // a log error leaves the truth as it is
                    }
                }
            }
            true_hw = hw;
            checker.setattr(intern!(py, "true_hw"), hw)?;
            let now = cluster.getattr(intern!(py, "now_ms"))?;
            checker.getattr(intern!(py, "true_hw_history"))?.cast_into::<PyList>()?.append((now, hw))?;
        }
        Ok(true_hw != before)
    }

    fn replica_of(&self, b: &Bound<'_, PyAny>, broker: &Bound<'_, PyAny>, leader_hw: &Bound<'_, PyDict>) -> PyResult<bool> {
        let py = b.py();
        let Some(replica) = rust_replica(broker)? else { return Ok(false) };
        let facts = replica.get().with(py, |r, log| {
            inv::replica_log_ok(log, self.epochs_in_batches)
                .then(|| (log.high_watermark().0, r.role == Role::Leader, r.leader_epoch.map(|e| e.0), r.isr.len()))
        });
        let Some((hw, leads, epoch, isr_len)) = facts else { return Ok(false) };
        if !(leads && broker.getattr(intern!(py, "alive"))?.is_truthy()?) {
            return Ok(true);
        }
        let Some(epoch) = epoch else { return Ok(true) };
        let key = PyTuple::new(py, [b.clone(), broker.getattr(intern!(py, "incarnation"))?, epoch.into_pyobject(py)?.into_any()])?;
        let before: Option<u64> = leader_hw.get_item(&key)?.map(|v| v.extract()).transpose()?;
        if !inv::leader_hw_ok(before, hw, isr_len, self.strict_min_isr.then_some(self.min_isr)) {
            return Ok(false);
        }
        leader_hw.set_item(key, hw.max(before.unwrap_or(0)))?;
        Ok(true)
    }

    fn log_matching_of(&self, views: &[ReplicaView], logs: &[Py<PyReplicaLog>], changed: &[i64]) -> bool {
        inv::logs_match(views, changed, |a, b| self.mismatch(logs[a].get(), logs[b].get()))
    }

    fn leaders_of(&self, scene: &Scene<'_>, moved: bool) -> PyResult<bool> {
        let Scene { checker, ctrl, changed, views, logs, .. } = scene;
        let py = checker.py();
        if !changed.is_empty() && !inv::one_leader_per_epoch(views) {
            return Ok(false);
        }
        let ctrl = controller_view(ctrl)?;
        let Some(leader_id) = ctrl.leader else { return Ok(true) };
        let i = scene.index(leader_id)?;
        let leader = &views[i];
        if !inv::leads_controllers_epoch(leader, &ctrl) {
            return Ok(true);
        }
        if moved || changed.contains(&leader_id) {
            let (truth, true_hw) = truth(checker)?;
            if !self.holds_truth(truth.get(), true_hw, logs[i].get()) {
                return Ok(false);
            }
            let leaderships = checker.getattr(intern!(py, "_leaderships"))?.cast_into::<PySet>()?;
            leaderships.add((leader_id, ctrl.leader_epoch))?;
        }
        if !leader.has_partition_epoch {
            return Ok(true);
        }
        if !(moved || changed.contains(&leader_id) || ctrl.isr.iter().any(|x| changed.contains(x))) {
            return Ok(true);
        }
        inv::quorum_superset(leader, &ctrl, views).map_err(no_broker)
    }

    fn strong_isr_of(&self, scene: &Scene<'_>, every: bool) -> PyResult<bool> {
        let Scene { checker, cluster, ctrl, changed, views, logs, .. } = scene;
        let py = checker.py();
        let replicas = cluster.getattr(intern!(py, "config"))?.getattr(intern!(py, "replicas"))?;
        if !replicas.is_truthy()? {
            return Ok(true);
        }
        let assigned = ids(&replicas)?;
        let ctrl = controller_view(ctrl)?;
        let (truth, true_hw) = truth(checker)?;
        inv::strong_isr(&assigned, &ctrl, views, changed, every, |i| self.holds_truth(truth.get(), true_hw, logs[i].get())).map_err(no_broker)
    }
}
