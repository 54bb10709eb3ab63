//! `Replica`: the replica protocol state machine, driving a `ReplicaLog` it shares with Python.
//!
//! Methods take and return the simulator's message dataclasses (`epochlab.sim.messages`), so
//! the engine can use this class and the Python `epochlab.sim.replica.Replica` alike. Each
//! call locks the replica state, then the log: the same order everywhere, so no deadlock.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::args::{self, lock, Int, Seq};
use super::errors::IntoPyResult;
use super::log::PyReplicaLog;
use super::messages::{self as msg, Builder};
use crate::error::ArgumentError;
use crate::generation::Generation;
use crate::replica::follower::FollowerRequest;
use crate::replica::messages::KafkaError;
use crate::replica::{FetchState, FollowerAction, LeaderAndIsrOutcome, Replica, Role};
use crate::types::BrokerId;

fn time(v: Int, name: &'static str) -> PyResult<u64> {
    Ok(args::offset(v, name)?.0)
}

fn action_name(a: FollowerAction) -> &'static str {
    match a {
        FollowerAction::Continue => "continue",
        FollowerAction::Backoff => "backoff",
        FollowerAction::Fenced => "fenced",
        FollowerAction::Discard => "discard",
        FollowerAction::Halt => "halt",
    }
}

/// What `state_key()` returns, as Rust values.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ChangeKey {
    role: u8,
    leader_epoch: Option<u32>,
    partition_epoch: Option<u32>,
    pending_isr: Option<Vec<u32>>,
    log_end_offset: u64,
    high_watermark: u64,
    batch_count: usize,
    log_start_offset: u64,
}

#[pyclass(frozen, name = "Replica", module = "epochlab._core")]
pub(crate) struct PyReplica {
    inner: Mutex<Replica>,
    log: Py<PyReplicaLog>,
}

impl PyReplica {
    /// Runs `f` with the replica state and its log locked, in that order.
    pub(crate) fn with<T>(&self, py: Python<'_>, f: impl FnOnce(&mut Replica, &mut crate::log::ReplicaLog) -> T) -> T {
        let mut replica = lock(&self.inner);
        let log_obj = self.log.bind(py).get();
        let mut log = lock(&log_obj.inner);
        f(&mut replica, &mut log)
    }

    /// The log this replica drives.
    pub(crate) fn log_object(&self) -> &Py<PyReplicaLog> {
        &self.log
    }

    /// `state_key()`'s values without making Python objects (`ChangeWatch`).
    pub(crate) fn change_key(&self, py: Python<'_>) -> ChangeKey {
        self.with(py, |r, log| ChangeKey {
            role: match r.role {
                Role::None => 0,
                Role::Leader => 1,
                Role::Follower => 2,
            },
            leader_epoch: r.leader_epoch.map(|e| e.0),
            partition_epoch: r.partition_epoch,
            pending_isr: r.pending_isr.as_ref().map(|v| v.iter().map(|b| b.0).collect()),
            log_end_offset: log.log_end_offset().0,
            high_watermark: log.high_watermark().0,
            batch_count: log.batch_count(),
            log_start_offset: log.log_start_offset().0,
        })
    }
}

#[pymethods]
impl PyReplica {
    #[new]
    fn new(broker_id: Int, replicas: Seq<Int>, generation: Int, min_insync_replicas: Int, replica_lag_time_max_ms: Int) -> PyResult<Self> {
        let id = |v: Int, name| match v {
            Int::Fits(x) => BrokerId::try_new(x, name).py(),
            Int::Huge(_) => Err(ArgumentError::OutOfDomain { argument: name, value: i128::MAX, domain: "0..=2^31-1" }).py(),
        };
        let generation = match generation {
            Int::Fits(g) => u32::try_from(g).ok().and_then(Generation::from_index),
            Int::Huge(_) => None,
        }
        .ok_or(ArgumentError::OutOfDomain { argument: "generation", value: -1, domain: "0..=5" })
        .py()?;
        let replicas = replicas.0.into_iter().map(|r| id(r, "replicas")).collect::<PyResult<Vec<_>>>()?;
        let replica = Replica::new(
            id(broker_id, "broker_id")?,
            replicas,
            generation,
            args::count(min_insync_replicas, "min_insync_replicas")?,
            time(replica_lag_time_max_ms, "replica_lag_time_max_ms")?,
        );
        let log = Python::attach(|py| Py::new(py, PyReplicaLog { inner: Mutex::new(Replica::new_log(generation)) }))?;
        Ok(Self { inner: Mutex::new(replica), log })
    }

    #[getter]
    fn log(&self, py: Python<'_>) -> Py<PyReplicaLog> {
        self.log.clone_ref(py)
    }
    #[getter]
    fn broker_id(&self) -> u32 {
        lock(&self.inner).broker_id.0
    }
    /// KAFKA-13141 (Kafka 2.8.0): the leader takes a diverging fetch's offset as the
    /// follower's log end offset. Off unless the cluster models that release.
    #[getter]
    fn record_diverging_fetch_offset(&self) -> bool {
        lock(&self.inner).record_diverging_fetch_offset
    }
    #[setter]
    fn set_record_diverging_fetch_offset(&self, value: bool) {
        lock(&self.inner).record_diverging_fetch_offset = value;
    }
    /// The proposed fix of the re-elected leader's stale follower state (`kafka.release`
    /// `+skipped-epoch-reset`): a leader re-elected across a skipped epoch resets its followers.
    #[getter]
    fn reset_followers_on_skipped_epoch(&self) -> bool {
        lock(&self.inner).reset_followers_on_skipped_epoch
    }
    #[setter]
    fn set_reset_followers_on_skipped_epoch(&self, value: bool) {
        lock(&self.inner).reset_followers_on_skipped_epoch = value;
    }
    /// ListOffsets by timestamp as before Kafka 1.0.0 (KAFKA-5522): the HW itself may be
    /// answered, whatever the isolation level.
    #[getter]
    fn list_offsets_up_to_hw(&self) -> bool {
        lock(&self.inner).list_offsets_up_to_hw
    }
    #[setter]
    fn set_list_offsets_up_to_hw(&self, value: bool) {
        lock(&self.inner).list_offsets_up_to_hw = value;
    }
    /// Before Kafka 2.0.1 (KAFKA-7414), unclean leader election disabled: a follower whose log end
    /// offset is past the leader's halts its broker instead of truncating.
    #[getter]
    fn truncation_halts(&self) -> bool {
        lock(&self.inner).truncation_halts
    }
    #[setter]
    fn set_truncation_halts(&self, value: bool) {
        lock(&self.inner).truncation_halts = value;
    }
    #[getter]
    fn replicas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, lock(&self.inner).replicas.iter().map(|b| b.0))
    }
    #[getter]
    fn generation(&self) -> u32 {
        lock(&self.inner).generation as u32
    }
    #[getter]
    fn role(&self) -> &'static str {
        match lock(&self.inner).role {
            Role::None => "none",
            Role::Leader => "leader",
            Role::Follower => "follower",
        }
    }
    #[getter]
    fn leader_id(&self) -> Option<u32> {
        lock(&self.inner).leader_id.map(|b| b.0)
    }
    #[getter]
    fn leader_epoch(&self) -> Option<u32> {
        lock(&self.inner).leader_epoch.map(|e| e.0)
    }
    #[getter]
    fn partition_epoch(&self) -> Option<u32> {
        lock(&self.inner).partition_epoch
    }
    #[getter]
    fn isr<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, lock(&self.inner).isr.iter().map(|b| b.0))
    }
    #[getter]
    fn pending_isr(&self) -> Option<Vec<u32>> {
        lock(&self.inner).pending_isr.as_ref().map(|v| v.iter().map(|b| b.0).collect())
    }
    /// `(role, leader_epoch, partition_epoch, pending_isr)` followed by the log's
    /// `ReplicaLog.state_key()`, in one call (the state checker's change detector).
    #[allow(clippy::type_complexity)]
    fn state_key(&self, py: Python<'_>) -> (&'static str, Option<u32>, Option<u32>, Option<Vec<u32>>, u64, u64, usize, u64) {
        self.with(py, |r, log| {
            let role = match r.role {
                Role::None => "none",
                Role::Leader => "leader",
                Role::Follower => "follower",
            };
            (role, r.leader_epoch.map(|e| e.0), r.partition_epoch,
             r.pending_isr.as_ref().map(|v| v.iter().map(|b| b.0).collect()),
             log.log_end_offset().0, log.high_watermark().0, log.batch_count(), log.log_start_offset().0)
        })
    }
    #[getter]
    fn maximal_isr<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, lock(&self.inner).maximal_isr().iter().map(|b| b.0))
    }
    /// The log end offset this replica, as leader, last stored for follower `replica_id`
    /// (`None`: no fetch of it in this leadership, or not a follower).
    fn follower_log_end_offset(&self, replica_id: Int) -> PyResult<Option<u64>> {
        let id = msg::broker(replica_id, "replica_id")?;
        Ok(lock(&self.inner).followers.get(&id).and_then(|s| s.log_end_offset).map(|o| o.0))
    }
    #[getter]
    fn leader_epoch_start_offset(&self) -> Option<u64> {
        lock(&self.inner).leader_epoch_start_offset.map(|o| o.0)
    }
    #[getter]
    fn fetch_state(&self) -> &'static str {
        match lock(&self.inner).fetch_state {
            FetchState::Idle => "idle",
            FetchState::Truncating => "truncating",
            FetchState::Fetching => "fetching",
            FetchState::Fenced => "fenced",
        }
    }
    #[getter]
    fn fetcher_session(&self) -> u64 {
        lock(&self.inner).fetcher_session
    }
    #[getter]
    fn checkpointed_high_watermark(&self) -> u64 {
        lock(&self.inner).checkpointed_high_watermark.0
    }
    /// Events since the last call, oldest first; the list is emptied.
    fn take_events(&self) -> Vec<String> {
        std::mem::take(&mut lock(&self.inner).events)
    }

    fn apply_leader_and_isr(&self, py: Python<'_>, msg: &Bound<'_, PyAny>, now_ms: Int) -> PyResult<&'static str> {
        let m = msg::leader_and_isr(msg)?;
        let now = time(now_ms, "now_ms")?;
        Ok(match self.with(py, |r, log| r.apply_leader_and_isr(log, &m, now)) {
            LeaderAndIsrOutcome::Ignored => "ignored",
            LeaderAndIsrOutcome::Isr => "isr",
            LeaderAndIsrOutcome::Leader => "leader",
            LeaderAndIsrOutcome::Follower => "follower",
            LeaderAndIsrOutcome::FollowerSame => "follower-same",
        })
    }

    fn handle_produce<'py>(&self, py: Python<'py>, req: &Bound<'py, PyAny>, now_ms: Int) -> PyResult<Bound<'py, PyAny>> {
        let r = msg::produce_request(req)?;
        let now = time(now_ms, "now_ms")?;
        let resp = self.with(py, |rep, log| rep.handle_produce(log, &r, now)).py()?;
        Builder::new(py).produce_response(&msg::field!(req, "request_id")?, resp)
    }

    fn handle_write_txn_markers<'py>(&self, py: Python<'py>, req: &Bound<'py, PyAny>, now_ms: Int) -> PyResult<Bound<'py, PyAny>> {
        let r = msg::write_txn_markers_request(req)?;
        let now = time(now_ms, "now_ms")?;
        let resp = self.with(py, |rep, log| rep.handle_write_txn_markers(log, &r, now)).py()?;
        Builder::new(py).write_txn_markers_response(&msg::field!(req, "request_id")?, resp)
    }

    fn produce_completion(&self, py: Python<'_>, required_offset: Int) -> PyResult<(bool, Option<&'static str>)> {
        let required = args::offset(required_offset, "required_offset")?;
        Ok(match self.with(py, |r, log| r.produce_completion(log, required)) {
            None => (false, None),
            Some(e) => (true, e.map(KafkaError::name)),
        })
    }

    fn maybe_increment_high_watermark(&self, py: Python<'_>, now_ms: Int) -> PyResult<bool> {
        let now = time(now_ms, "now_ms")?;
        Ok(self.with(py, |r, log| r.maybe_increment_high_watermark(log, now)))
    }

    fn maybe_shrink_isr<'py>(&self, py: Python<'py>, now_ms: Int) -> PyResult<Option<Bound<'py, PyAny>>> {
        let now = time(now_ms, "now_ms")?;
        match self.with(py, |r, log| r.maybe_shrink_isr(log, now)) {
            None => Ok(None),
            Some(req) => Builder::new(py).alter_partition_request(&req).map(Some),
        }
    }

    fn pending_alter_partition<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        match lock(&self.inner).pending_alter_partition() {
            None => Ok(None),
            Some(req) => Builder::new(py).alter_partition_request(&req).map(Some),
        }
    }

    fn handle_alter_partition_response(&self, py: Python<'_>, resp: &Bound<'_, PyAny>, now_ms: Int) -> PyResult<()> {
        let r = msg::alter_partition_response(resp)?;
        let now = time(now_ms, "now_ms")?;
        self.with(py, |rep, log| rep.handle_alter_partition_response(log, &r, now));
        Ok(())
    }

    fn checkpoint_high_watermark(&self, py: Python<'_>) {
        self.with(py, |r, log| r.checkpoint_high_watermark(log));
    }
    fn flush(&self, py: Python<'_>) {
        self.with(py, |_, log| log.flush(None));
    }
    fn crash(&self, py: Python<'_>, lose_unflushed: bool) -> usize {
        self.with(py, |r, log| r.crash(log, lose_unflushed))
    }
    fn clean_shutdown(&self, py: Python<'_>) {
        self.with(py, |r, log| r.clean_shutdown(log));
    }

    fn next_request<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let next = self.with(py, |r, log| r.next_request(log));
        let b = Builder::new(py);
        match next {
            None => Ok(None),
            Some(FollowerRequest::Fetch(f)) => b.fetch_request(&f).map(Some),
            Some(FollowerRequest::OffsetsForLeaderEpoch(o)) => b.offsets_request(&o).map(Some),
        }
    }

    #[pyo3(signature = (req, now_ms, update_state = true))]
    fn handle_fetch<'py>(&self, py: Python<'py>, req: &Bound<'py, PyAny>, now_ms: Int, update_state: bool) -> PyResult<(Bound<'py, PyAny>, Option<Bound<'py, PyAny>>)> {
        let r = msg::fetch_request(req)?;
        let now = time(now_ms, "now_ms")?;
        let (resp, proposal) = if update_state {
            self.with(py, |rep, log| rep.handle_fetch(log, &r, now))
        } else {
            (self.with(py, |rep, log| rep.complete_parked_fetch(log, &r)), None)
        };
        let b = Builder::new(py);
        let proposal = proposal.map(|p| b.alter_partition_request(&p)).transpose()?;
        Ok((b.fetch_response(req, resp)?, proposal))
    }

    fn handle_offsets_for_leader_epoch<'py>(&self, py: Python<'py>, req: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let r = msg::offsets_request(req)?;
        let resp = self.with(py, |rep, log| rep.handle_offsets_for_leader_epoch(log, &r));
        Builder::new(py).offsets_response(req, resp)
    }

    fn handle_consumer_fetch<'py>(&self, py: Python<'py>, req: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let r = msg::consumer_fetch_request(req)?;
        let resp = self.with(py, |rep, log| rep.handle_consumer_fetch(log, &r));
        Builder::new(py).consumer_fetch_response(&msg::field!(req, "request_id")?, resp)
    }

    /// The follower a consumer in rack `client_rack` should read from at `fetch_offset`
    /// (KIP-392, rack-aware selector), or `None` for the leader.
    fn preferred_read_replica(&self, py: Python<'_>, fetch_offset: Int, client_rack: Int) -> PyResult<Option<u32>> {
        let offset = args::offset(fetch_offset, "fetch_offset")?;
        let rack = msg::broker(client_rack, "client_rack")?;
        Ok(self.with(py, |rep, _| rep.preferred_read_replica(offset, rack)).map(|b| b.0))
    }

    fn handle_fetch_response(&self, py: Python<'_>, resp: &Bound<'_, PyAny>) -> PyResult<&'static str> {
        let req = msg::fetch_request(&msg::field!(resp, "request")?)?;
        let r = msg::fetch_response(resp)?;
        Ok(action_name(self.with(py, |rep, log| rep.handle_fetch_response(log, &req, &r))))
    }

    fn handle_offsets_for_leader_epoch_response(&self, py: Python<'_>, resp: &Bound<'_, PyAny>) -> PyResult<&'static str> {
        let req = msg::offsets_request(&msg::field!(resp, "request")?)?;
        let r = msg::offsets_response(resp)?;
        Ok(action_name(self.with(py, |rep, log| rep.handle_offsets_for_leader_epoch_response(log, &req, &r))))
    }

    fn __repr__(&self) -> String {
        let r = lock(&self.inner);
        format!(
            "Replica(broker_id={}, role={:?}, leader_id={:?}, leader_epoch={:?}, isr={:?})",
            r.broker_id, r.role, r.leader_id.map(|b| b.0), r.leader_epoch.map(|e| e.0),
            r.isr.iter().map(|b| b.0).collect::<Vec<_>>()
        )
    }
}

