//! `StateScan`: the passing case of the state checker's per-event checks
//! (`epochlab.checks.state.StateChecker._check`) in Rust, for clusters of Rust replicas.
//!
//! Each method answers one part of a check as the Python statement does, reading the replicas
//! and logs as Rust values and the brokers, the controller and the checker's ground truth
//! through their Python attributes. It returns `True` when that part passes (having made the
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
use crate::invariants::first_mismatch_between;
use crate::log::ReplicaLog;
use crate::replica::Role;
use crate::types::Offset;

/// The broker's replica, if it is a Rust one.
fn rust_replica<'py>(broker: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyReplica>>> {
    let replica = broker.getattr(intern!(broker.py(), "replica"))?;
    Ok(replica.cast_into::<PyReplica>().ok())
}

/// Inv-EpochMonotone's passing case (`StateChecker._check_epochs`): batch epochs never go
/// down, and the cache is the log's epoch boundaries plus at most one data-less entry at the
/// LEO with a newer epoch, or (the log start moved) ends with those boundaries.
fn epochs_ok(log: &ReplicaLog) -> bool {
    let (bounds, bad) = log.epoch_boundaries();
    if bad.is_some() {
        return false;
    }
    let derived: Vec<(u32, u64)> = bounds.iter().map(|(e, o)| (e.0, o.0)).collect();
    let entries: Vec<(u32, u64)> = log.epoch_cache().entries().iter().map(|e| (e.epoch.0, e.start_offset.0)).collect();
    let n = derived.len();
    let last_epoch = derived.last().map_or(-1, |d| i64::from(d.0));
    let leo = log.log_end_offset().0;
    let head = entries.len() >= n && entries[..n] == derived[..];
    let extra = &entries[n.min(entries.len())..];
    let ok = head && (extra.is_empty() || (extra.len() == 1 && extra[0].1 == leo && i64::from(extra[0].0) > last_epoch));
    if !ok && n > 0 && !entries.is_empty() && log.log_start_offset().0 > 0 {
        return entries.len() >= n && entries[entries.len() - n..] == derived[..];
    }
    ok
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

/// What every part reads: the checker, its cluster's parts, the changed broker ids.
struct Scene<'py> {
    checker: Bound<'py, PyAny>,
    cluster: Bound<'py, PyAny>,
    brokers: Bound<'py, PyDict>,
    ctrl: Bound<'py, PyAny>,
    changed: Vec<i64>,
}

impl<'py> Scene<'py> {
    fn of(checker: &Bound<'py, PyAny>, changed: &Bound<'py, PyList>) -> PyResult<Self> {
        let (cluster, brokers, ctrl) = cluster_of(checker)?;
        Ok(Scene { checker: checker.clone(), cluster, brokers, ctrl, changed: ids(changed.as_any())? })
    }
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
        (|| self.log_matching_of(brokers, &ids(changed.as_any())?))().map_err(|e| mistake("log_matching", e))
    }

    /// `_check_leaders(changed, moved)` passes: no two live leaders of one epoch (asked when a
    /// broker changed); the controller's leader, once it leads its epoch, holds the truth
    /// (asked when it or the truth or the controller moved; then `(leader, epoch)` joins
    /// `checker._leaderships`) and, with a partition epoch, counts every controller-ISR
    /// member behind its HW in its maximal ISR.
    fn leaders(&self, checker: &Bound<'_, PyAny>, changed: &Bound<'_, PyList>, moved: bool) -> PyResult<bool> {
        (|| self.leaders_of(&Scene::of(checker, changed)?, moved))().map_err(|e| mistake("leaders", e))
    }

    /// The Inv-StrongIsr half of `_check_isr` passes: every live ISR/ELR member that is a
    /// leader or follower (and changed, unless `every`) holds the truth. The caller asks only
    /// when nothing else of `_check_isr` has work (no recovering broker, the controller
    /// unchanged, no broker just out of recovery).
    fn strong_isr(&self, checker: &Bound<'_, PyAny>, changed: &Bound<'_, PyList>, every: bool) -> PyResult<bool> {
        (|| self.strong_isr_of(&Scene::of(checker, changed)?, every))().map_err(|e| mistake("strong_isr", e))
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
        if true_hw == 0 {
            return true;
        }
        self.mismatch(truth, log).is_none_or(|m| m.0 >= true_hw) && lock(&log.inner).log_end_offset().0 >= true_hw
    }

    fn check_of(&self, checker: &Bound<'_, PyAny>, changed: &Bound<'_, PyList>, ctrl_changed: bool) -> PyResult<Option<(u8, Option<bool>)>> {
        let py = checker.py();
        let scene = Scene::of(checker, changed)?;
        for (_, broker) in scene.brokers.iter() {
            if rust_replica(&broker)?.is_none() {
                return Ok(Some((0, None)));
            }
        }
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
        if !self.log_matching_of(&scene.brokers, &scene.changed)? {
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
            let (start, hw, leo) = (log.log_start_offset().0, log.high_watermark().0, log.log_end_offset().0);
            let fine = start <= hw && hw <= leo && log.holes().is_empty() && (!self.epochs_in_batches || epochs_ok(log));
            fine.then(|| (hw, r.role == Role::Leader, r.leader_epoch.map(|e| e.0), r.isr.len()))
        });
        let Some((hw, leads, epoch, isr_len)) = facts else { return Ok(false) };
        if !(leads && broker.getattr(intern!(py, "alive"))?.is_truthy()?) {
            return Ok(true);
        }
        let Some(epoch) = epoch else { return Ok(true) };
        let key = PyTuple::new(py, [b.clone(), broker.getattr(intern!(py, "incarnation"))?, epoch.into_pyobject(py)?.into_any()])?;
        let before: Option<u64> = leader_hw.get_item(&key)?.map(|v| v.extract()).transpose()?;
        if let Some(before) = before {
            if hw < before || (self.strict_min_isr && hw > before && isr_len < self.min_isr) {
                return Ok(false);
            }
        }
        leader_hw.set_item(key, hw.max(before.unwrap_or(0)))?;
        Ok(true)
    }

    fn log_matching_of(&self, brokers: &Bound<'_, PyDict>, changed: &[i64]) -> PyResult<bool> {
        let mut logs = Vec::with_capacity(brokers.len());
        for (b, broker) in brokers.iter() {
            let Some(replica) = rust_replica(&broker)? else { return Ok(false) };
            logs.push((b.extract::<i64>()?, replica.get().log_object().clone_ref(b.py())));
        }
        logs.sort_by_key(|(b, _)| *b);
        for (i, (a, la)) in logs.iter().enumerate() {
            for (b, lb) in &logs[i + 1..] {
                if !changed.contains(a) && !changed.contains(b) {
                    continue;
                }
                let (la, lb) = (la.get(), lb.get());
                let bound = with_two(la, lb, |x, y| x.high_watermark().0.min(y.high_watermark().0));
                let differs = bound != 0 && self.mismatch(la, lb).is_some_and(|m| m.0 < bound);
                if differs {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    fn leaders_of(&self, scene: &Scene<'_>, moved: bool) -> PyResult<bool> {
        let Scene { checker, brokers, ctrl, changed, .. } = scene;
        let py = checker.py();
        if !changed.is_empty() {
            let mut acting: Vec<u32> = Vec::new();
            for (_, broker) in brokers.iter() {
                let Some(replica) = rust_replica(&broker)? else { return Ok(false) };
                if !broker.getattr(intern!(py, "alive"))?.is_truthy()? {
                    continue;
                }
                let r = replica.get().with(py, |r, _| (r.role == Role::Leader).then_some(r.leader_epoch).flatten());
                if let Some(epoch) = r {
                    if acting.contains(&epoch.0) {
                        return Ok(false);
                    }
                    acting.push(epoch.0);
                }
            }
        }
        let leader = ctrl.getattr(intern!(py, "leader"))?;
        if leader.is_none() {
            return Ok(true);
        }
        let leader_id: i64 = leader.extract()?;
        let broker = brokers.get_item(&leader)?.ok_or_else(|| PyKeyError::new_err(leader_id))?;
        let Some(replica) = rust_replica(&broker)? else { return Ok(false) };
        let ctrl_epoch = ctrl.getattr(intern!(py, "leader_epoch"))?;
        let ctrl_epoch_value: Option<i64> = ctrl_epoch.extract()?;
        let (leads, partition_epoch, hw, maximal) = replica.get().with(py, |r, log| {
            (r.role == Role::Leader && r.leader_epoch.map(|e| i64::from(e.0)) == ctrl_epoch_value,
             r.partition_epoch.is_some(), log.high_watermark().0, r.maximal_isr())
        });
        if !(leads && broker.getattr(intern!(py, "alive"))?.is_truthy()?) {
            return Ok(true);
        }
        let log = replica.get().log_object().bind(py);
        if moved || changed.contains(&leader_id) {
            let (truth, true_hw) = truth(checker)?;
            if !self.holds_truth(truth.get(), true_hw, log.get()) {
                return Ok(false);
            }
            let leaderships = checker.getattr(intern!(py, "_leaderships"))?.cast_into::<PySet>()?;
            leaderships.add(PyTuple::new(py, [leader.clone(), ctrl_epoch])?)?;
        }
        if !partition_epoch {
            return Ok(true);
        }
        let isr = ctrl.getattr(intern!(py, "isr"))?;
        let isr_ids = ids(&isr)?;
        if !(moved || changed.contains(&leader_id) || isr_ids.iter().any(|x| changed.contains(x))) {
            return Ok(true);
        }
        for x in isr.try_iter()? {
            let x = x?;
            let id: i64 = x.extract()?;
            if maximal.iter().any(|m| i64::from(m.0) == id) {
                continue;
            }
            let member = brokers.get_item(&x)?.ok_or_else(|| PyKeyError::new_err(id))?;
            let Some(member) = rust_replica(&member)? else { return Ok(false) };
            if member.get().with(py, |_, l| l.log_end_offset().0) < hw {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn strong_isr_of(&self, scene: &Scene<'_>, every: bool) -> PyResult<bool> {
        let Scene { checker, cluster, brokers, ctrl, changed } = scene;
        let py = checker.py();
        let replicas = cluster.getattr(intern!(py, "config"))?.getattr(intern!(py, "replicas"))?;
        if !replicas.is_truthy()? {
            return Ok(true);
        }
        let isr = ids(&ctrl.getattr(intern!(py, "isr"))?)?;
        let elr = ids(&ctrl.getattr(intern!(py, "elr"))?)?;
        let (truth, true_hw) = truth(checker)?;
        for b in replicas.try_iter()? {
            let b = b?;
            let id: i64 = b.extract()?;
            if !(isr.contains(&id) || elr.contains(&id)) || !(every || changed.contains(&id)) {
                continue;
            }
            let broker = brokers.get_item(&b)?.ok_or_else(|| PyKeyError::new_err(id))?;
            if !broker.getattr(intern!(py, "alive"))?.is_truthy()? {
                continue;
            }
            let Some(replica) = rust_replica(&broker)? else { return Ok(false) };
            if replica.get().with(py, |r, _| r.role == Role::None) {
                continue;
            }
            if !self.holds_truth(truth.get(), true_hw, replica.get().log_object().bind(py).get()) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}
