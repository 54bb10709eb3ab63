//! `ProtocolCoverage`: gathers the plain view `crate::coverage` abstracts from a cluster of
//! Rust replicas (the brokers' `alive` and `replica`, the controller's leader, epoch, ISR and
//! ELR) and keeps one run's features. No abstraction happens here.

use std::sync::Mutex;

use pyo3::exceptions::{PyAttributeError, PyKeyError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::args::lock;
use super::replica::PyReplica;
use crate::coverage::{BrokerView, ClusterView, Coverage};
use crate::replica::Role;

fn typed(e: PyErr) -> PyErr {
    Python::attach(|py| {
        if e.is_instance_of::<PyAttributeError>(py) || e.is_instance_of::<PyKeyError>(py) {
            PyTypeError::new_err(format!("ProtocolCoverage.observe: {e}"))
        } else {
            e
        }
    })
}

/// One run's protocol-state coverage (`epochlab.fuzz.coverage`).
#[pyclass(frozen, name = "ProtocolCoverage", module = "epochlab._core")]
pub(crate) struct PyProtocolCoverage {
    min_isr: u32,
    inner: Mutex<Coverage>,
}

fn broker_view(id: u32, broker: &Bound<'_, PyAny>, recovering: bool) -> PyResult<BrokerView> {
    let py = broker.py();
    let alive = broker.getattr(intern!(py, "alive"))?.is_truthy()?;
    let replica = broker.getattr(intern!(py, "replica"))?;
    let replica = replica.cast_into::<PyReplica>().map_err(|_| {
        PyTypeError::new_err(format!("ProtocolCoverage.observe: broker {id}'s replica is not a Rust Replica (use the Python twin)"))
    })?;
    Ok(replica.get().with(py, |r, log| BrokerView {
        id,
        alive,
        role: match r.role {
            Role::None => 0,
            Role::Follower => 1,
            Role::Leader => 2,
        },
        leader_epoch: r.leader_epoch.map(|e| e.0),
        log_end_offset: log.log_end_offset().0,
        high_watermark: log.high_watermark().0,
        isr_len: r.isr.len() as u32,
        maximal_isr: r.maximal_isr().iter().map(|m| m.0).collect(),
        followers: r.followers.iter().map(|(f, s)| (f.0, s.log_end_offset.map(|o| o.0))).collect(),
        recovering,
        fetch_idle: false,
        controller_cut: false,
    }))
}

#[pymethods]
impl PyProtocolCoverage {
    #[new]
    fn new(min_isr: u32) -> Self {
        Self { min_isr, inner: Mutex::new(Coverage::new()) }
    }

    /// Abstracts the cluster's state now (`brokers`: id -> broker, `controller`, the
    /// `network` whose `usable("controller", id)` tells a broker cut from the controller, the
    /// checker's `true_hw` and `recovering` brokers, the run's current action index `step` and
    /// simulated time `now_ms`); returns whether a tuple moved.
    #[allow(clippy::too_many_arguments)]
    fn observe(&self, brokers: &Bound<'_, PyDict>, controller: &Bound<'_, PyAny>, network: &Bound<'_, PyAny>, true_hw: u64, recovering: &Bound<'_, PyAny>, step: i64, now_ms: i64) -> PyResult<bool> {
        (|| {
            let py = controller.py();
            let mut views = Vec::with_capacity(brokers.len());
            for (k, v) in brokers.iter() {
                let id: u32 = k.extract()?;
                views.push(broker_view(id, &v, recovering.contains(id)?)?);
            }
            // a follower some leader believes holds more than its log: is it fetching?
            let stale: Vec<u32> = views
                .iter()
                .flat_map(|b| b.followers.iter().filter_map(|(f, k)| k.map(|k| (*f, k))))
                .filter(|(f, k)| views.iter().any(|x| x.id == *f && *k > x.log_end_offset))
                .map(|(f, _)| f)
                .collect();
            for x in views.iter_mut() {
                if stale.contains(&x.id) {
                    if let Some(broker) = brokers.get_item(x.id)? {
                        let state = broker.call_method0(intern!(py, "fetch_state"))?;
                        x.fetch_idle = state.get_item(1)?.is_none();
                    }
                }
                // a live leader: can it hear the controller?
                if x.alive && x.role == 2 {
                    x.controller_cut = !network.call_method1(intern!(py, "usable"), (intern!(py, "controller"), x.id))?.is_truthy()?;
                }
            }
            let view = ClusterView {
                brokers: views,
                controller_leader: controller.getattr(intern!(py, "leader"))?.extract()?,
                controller_epoch: controller.getattr(intern!(py, "leader_epoch"))?.extract()?,
                controller_isr: controller.getattr(intern!(py, "isr"))?.extract()?,
                controller_elr: controller.getattr(intern!(py, "elr"))?.extract()?,
                true_hw,
                min_isr: self.min_isr,
            };
            Ok(lock(&self.inner).observe(&view, step, now_ms))
        })()
        .map_err(typed)
    }

    /// The run's features so far, in increasing order.
    fn features(&self) -> Vec<u64> {
        lock(&self.inner).features()
    }

    /// The step each feature of `features()` was first reached at, in that order.
    fn first_steps(&self) -> Vec<i64> {
        lock(&self.inner).first_steps()
    }

    /// The simulated time (ms) each feature of `features()` was first reached at, in that
    /// order.
    fn first_times(&self) -> Vec<i64> {
        lock(&self.inner).first_times()
    }

    /// For each feature of `features()`, in that order, the broker whose tuple it is and the
    /// follower of that broker's stale belief at its first reach (-1: none; both -1 for a
    /// cluster feature).
    fn first_brokers(&self) -> Vec<(i64, i64)> {
        lock(&self.inner).first_brokers()
    }

    #[getter]
    fn observations(&self) -> u64 {
        lock(&self.inner).observations()
    }
}
