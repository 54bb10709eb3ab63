//! One partition replica's protocol state machine, leader and follower sides, per generation.
//!
//! [`Replica`] holds what a broker knows about the partition (role, leader, epochs, ISR, the
//! leader's view of each follower, the follower's fetch state); the [`ReplicaLog`] it drives is
//! passed to every call, so a caller can keep the log where it likes (the Python bindings share
//! it with a `ReplicaLog` object). Every method handles one message or timer tick and returns
//! the messages to send; nothing here knows about time passing, networks or other brokers.
//! Rules and sources (`docs/core-semantics.md` rule numbers): becoming leader or follower 1.9,
//! follower truncation by generation 1.4, leader fetch handling, DivergingEpoch and ISR expansion 1.5 and 1.7, the
//! high watermark 1.6, the produce path 1.8, checkpointed HW and crashes 1.10.
//!
//! This is a 1:1 port of `epochlab.sim.replica` (Python), which stays as the readable reference;
//! differential tests run whole simulations on both and compare histories byte for byte.

pub mod follower;
mod leader;
pub mod messages;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use crate::error::{Error, ProducerStateError};
use crate::generation::Generation;
use crate::log::ReplicaLog;
use crate::txn::ControlType;
use crate::types::{BrokerId, LeaderEpoch, Offset};
pub use follower::FollowerAction;
use messages::*;

/// What the replica is for the partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// No metadata yet (fresh start, or after a crash).
    None,
    Leader,
    Follower,
}

/// The follower's fetcher state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FetchState {
    Idle,
    /// G1-G3: OffsetsForLeaderEpoch round trips before fetching.
    Truncating,
    Fetching,
    /// KIP-320: FENCED_LEADER_EPOCH, waiting for newer metadata.
    Fenced,
}

/// What a LeaderAndIsr did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaderAndIsrOutcome {
    /// Older epoch, or same epoch without a newer partition epoch.
    Ignored,
    /// Same epoch, newer ISR.
    Isr,
    Leader,
    /// Follower with a (re)started fetcher.
    Follower,
    /// Follower, fetcher kept (same leader before KAFKA-7164, or OFFLINE).
    FollowerSame,
}

/// The leader's view of one follower (Kafka's remote `Replica`, 1.1 / 1.5). The times are
/// `None` for "never": Kafka stores 0 there, decades ago on its wall clock
/// (`Replica.resetReplicaState`), while virtual time starts at 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FollowerState {
    /// Unknown until a fetch in the current leadership reported it.
    pub log_end_offset: Option<Offset>,
    pub last_caught_up_time_ms: Option<u64>,
    pub last_fetch_time_ms: Option<u64>,
    pub last_fetch_leader_log_end_offset: Offset,
    /// The broker epoch the follower's last accepted fetch carried (KIP-903, G5).
    pub broker_epoch: Option<u64>,
}

/// One replica of a partition on broker `broker_id`.
#[derive(Clone, Debug)]
pub struct Replica {
    pub broker_id: BrokerId,
    pub replicas: Vec<BrokerId>,
    pub generation: Generation,
    pub min_insync_replicas: u32,
    pub replica_lag_time_max_ms: u64,
    /// The `replication-offset-checkpoint` value: what the HW restarts from.
    pub checkpointed_high_watermark: Offset,
    /// Notable things that happened, drained by the broker into the engine's event log.
    pub events: Vec<String>,
    pub role: Role,
    pub leader_id: Option<BrokerId>,
    pub leader_epoch: Option<LeaderEpoch>,
    pub partition_epoch: Option<u32>,
    pub isr: Vec<BrokerId>,
    pub pending_isr: Option<Vec<BrokerId>>,
    pub leader_epoch_start_offset: Option<Offset>,
    pub followers: BTreeMap<BrokerId, FollowerState>,
    pub fetch_state: FetchState,
    pub fetcher_session: u64,
    /// G5 metadata image: broker -> (broker epoch, in controlled shutdown).
    pub brokers: BTreeMap<BrokerId, (u64, bool)>,
    pub metadata_version: u64,
    /// KAFKA-13141 (Kafka 2.8.0 only, `kafka.release`): the leader takes the offset of a fetch
    /// it answers with DivergingEpoch as the follower's log end offset.
    pub record_diverging_fetch_offset: bool,
    /// ListOffsets by timestamp as before 1.0.0 (KAFKA-5522): an answer may be the HW itself
    /// (the first uncommitted offset), whatever the isolation level.
    pub list_offsets_up_to_hw: bool,
    /// Before Kafka 2.0.1 (KAFKA-7414), unclean leader election disabled: a follower whose log end
    /// offset is past the leader's halts its broker ([`FollowerAction::Halt`]).
    pub truncation_halts: bool,
    /// The proposed fix of the re-elected leader's stale follower state (`kafka.release`
    /// `+skipped-epoch-reset`): a leader re-elected in an epoch more than one above its last
    /// forgets its followers' state, as a new leader does.
    pub reset_followers_on_skipped_epoch: bool,
}

impl Replica {
    pub fn new(broker_id: BrokerId, replicas: Vec<BrokerId>, generation: Generation, min_insync_replicas: u32, replica_lag_time_max_ms: u64) -> Self {
        Self {
            broker_id,
            replicas,
            generation,
            min_insync_replicas,
            replica_lag_time_max_ms,
            checkpointed_high_watermark: Offset(0),
            events: Vec::new(),
            role: Role::None,
            leader_id: None,
            leader_epoch: None,
            partition_epoch: None,
            isr: Vec::new(),
            pending_isr: None,
            leader_epoch_start_offset: None,
            followers: BTreeMap::new(),
            fetch_state: FetchState::Idle,
            fetcher_session: 0,
            brokers: BTreeMap::new(),
            metadata_version: 0,
            record_diverging_fetch_offset: false,
            list_offsets_up_to_hw: false,
            truncation_halts: false,
            reset_followers_on_skipped_epoch: false,
        }
    }

    /// A fresh log for this replica with the generation's epoch-cache rule.
    pub fn new_log(generation: Generation) -> ReplicaLog {
        ReplicaLog::new(Offset(0), generation.kip101_epoch_cache()).with_wrapper_batches(generation.wrapper_batches())
    }

    fn reset_volatile(&mut self) {
        self.role = Role::None;
        self.leader_id = None;
        self.leader_epoch = None;
        self.partition_epoch = None;
        self.isr.clear();
        self.pending_isr = None;
        self.leader_epoch_start_offset = None;
        self.followers.clear();
        self.fetch_state = FetchState::Idle;
        self.fetcher_session += 1;
        self.brokers.clear();
        self.metadata_version = 0;
    }

    /// ISR ∪ pending proposal, in assignment order (1.7: what HW and acks=all use).
    pub fn maximal_isr(&self) -> Vec<BrokerId> {
        let pending = self.pending_isr.as_deref().unwrap_or(&[]);
        self.replicas.iter().copied().filter(|r| self.isr.contains(r) || pending.contains(r)).collect()
    }

    fn effective_min_isr(&self) -> usize {
        (self.min_insync_replicas as usize).min(self.replicas.len())
    }

    /// The min.insync.replicas the produce path enforces: 3.7+ (G5) the effective one
    /// (`Partition.effectiveMinIsr`) in both the append check and the acks=all completion;
    /// before, the configured value, so min.insync.replicas above the replication factor
    /// refuses every acks=all append (`Partition.appendRecordsToLeader` <= 3.6).
    fn min_isr(&self) -> usize {
        if self.generation.strict_min_isr() {
            self.effective_min_isr()
        } else {
            self.min_insync_replicas as usize
        }
    }

    /// `ReplicaState.isCaughtUp`: at the leader's LEO, or caught up within
    /// replica.lag.time.max.ms (never, if it never was).
    fn caught_up(&self, st: &FollowerState, leader_leo: Offset, now_ms: u64) -> bool {
        st.log_end_offset == Some(leader_leo)
            || st.last_caught_up_time_ms.is_some_and(|t| now_ms.saturating_sub(t) <= self.replica_lag_time_max_ms)
    }

    /// `Partition.isReplicaIsrEligible`: in KRaft (G5) the follower's broker is registered,
    /// unfenced and not shutting down in this broker's metadata, and its fetches carried that
    /// registration's broker epoch (KIP-903). Earlier generations: always.
    pub(crate) fn isr_eligible(&self, replica_id: BrokerId) -> bool {
        if !self.generation.kraft() {
            return true;
        }
        let (Some(&(epoch, shutting_down)), Some(st)) = (self.brokers.get(&replica_id), self.followers.get(&replica_id)) else {
            return false;
        };
        !shutting_down && st.broker_epoch == Some(epoch)
    }

    fn apply_metadata(&mut self, msg: &LeaderAndIsr) {
        if msg.metadata_version > self.metadata_version {
            self.metadata_version = msg.metadata_version;
            self.brokers = msg.brokers.iter().map(|b| (b.broker_id, (b.broker_epoch, b.shutting_down))).collect();
        }
    }

    /// Applies a controller decision (1.9); the brokers' metadata it carries (G5) is applied
    /// whenever it is newer, whatever the outcome.
    pub fn apply_leader_and_isr(&mut self, log: &mut ReplicaLog, msg: &LeaderAndIsr, now_ms: u64) -> LeaderAndIsrOutcome {
        self.apply_metadata(msg);
        if let Some(current) = self.leader_epoch {
            if msg.leader_epoch < current {
                return LeaderAndIsrOutcome::Ignored;
            }
            if msg.leader_epoch == current {
                if self.partition_epoch.is_some_and(|pe| msg.partition_epoch <= pe) {
                    return LeaderAndIsrOutcome::Ignored;
                }
                self.isr = msg.isr.clone();
                self.partition_epoch = Some(msg.partition_epoch);
                self.pending_isr = None;
                if self.role == Role::Leader {
                    self.maybe_increment_high_watermark(log, now_ms);
                }
                return LeaderAndIsrOutcome::Isr;
            }
        }
        self.replicas = msg.replicas.clone();
        if msg.leader == Some(self.broker_id) {
            self.make_leader(log, msg, now_ms);
            return LeaderAndIsrOutcome::Leader;
        }
        self.make_follower(log, msg)
    }

    /// `Partition.makeLeader`: LESO := LEO; from G3 the epoch enters the cache at the LEO
    /// (KAFKA-7415); follower states reset as `Replica.resetReplicaState` does: ISR followers
    /// count as caught up and fetched now, the others never; a new leader forgets follower
    /// LEOs and broker epochs, a re-elected one keeps them and takes the LESO as the leader LEO
    /// of their last fetch. Then the HW may advance.
    fn make_leader(&mut self, log: &mut ReplicaLog, msg: &LeaderAndIsr, now_ms: u64) {
        let skipped = self.leader_epoch.is_some_and(|e| u64::from(msg.leader_epoch.0) > u64::from(e.0) + 1);
        // the proposed fix: across a skipped epoch, a new leader
        let was_leader = self.role == Role::Leader && !(self.reset_followers_on_skipped_epoch && skipped);
        let old = std::mem::take(&mut self.followers);
        self.become_role(msg, Role::Leader);
        let leso = log.log_end_offset();
        self.leader_epoch_start_offset = Some(leso);
        if self.generation.leader_assigns_epoch() {
            log.assign_epoch(msg.leader_epoch, log.log_end_offset());
        }
        for &r in &self.replicas {
            if r == self.broker_id {
                continue;
            }
            let mut state = FollowerState::default();
            let in_sync = msg.isr.contains(&r);
            if was_leader {
                if let Some(o) = old.get(&r) {
                    state.log_end_offset = o.log_end_offset;
                    state.broker_epoch = o.broker_epoch;
                    state.last_fetch_leader_log_end_offset = leso;
                    state.last_fetch_time_ms = in_sync.then_some(now_ms);
                }
            }
            if in_sync {
                state.last_caught_up_time_ms = Some(now_ms);
            }
            self.followers.insert(r, state);
        }
        self.maybe_increment_high_watermark(log, now_ms);
    }

    /// `makeFollower` (1.4, 1.9): the fetcher restarts on a new leader, or from G3 on any new
    /// epoch (KAFKA-7164). On restart G0 truncates to its local HW at once, G1-G3 enter
    /// Truncating, G4+ fetch with the last fetched epoch (the HW path if the cache is empty).
    fn make_follower(&mut self, log: &mut ReplicaLog, msg: &LeaderAndIsr) -> LeaderAndIsrOutcome {
        let restart = self.role != Role::Follower
            || self.leader_id != msg.leader
            || self.generation.fences_current_epoch()
            || self.fetch_state != FetchState::Fetching;
        self.become_role(msg, if msg.leader.is_some() { Role::Follower } else { Role::None });
        if msg.leader.is_none() {
            self.fetch_state = FetchState::Idle;
            return LeaderAndIsrOutcome::FollowerSame;
        }
        if !restart {
            return LeaderAndIsrOutcome::FollowerSame;
        }
        self.fetcher_session += 1;
        let g = self.generation;
        if g == Generation::TruncateToHw || (g.truncate_on_fetch() && log.latest_epoch().is_none()) {
            self.truncate(log, log.high_watermark(), "become follower: truncate to local HW");
            self.fetch_state = FetchState::Fetching;
        } else if g.truncate_on_fetch() {
            self.fetch_state = FetchState::Fetching;
        } else {
            self.fetch_state = FetchState::Truncating;
        }
        LeaderAndIsrOutcome::Follower
    }

    fn become_role(&mut self, msg: &LeaderAndIsr, role: Role) {
        self.role = role;
        self.leader_id = msg.leader;
        self.leader_epoch = Some(msg.leader_epoch);
        self.partition_epoch = Some(msg.partition_epoch);
        self.isr = msg.isr.clone();
        self.pending_isr = None;
        self.leader_epoch_start_offset = None;
        if role != Role::Leader {
            self.followers.clear();
        }
    }

    pub(crate) fn truncate(&mut self, log: &mut ReplicaLog, offset: Offset, why: &str) {
        let before = log.log_end_offset();
        let store = log.store();
        let straddling = store.containing(offset.0).map(|i| (store.base(i), store.last(i))).filter(|&(base, _)| base < offset.0 && offset < before);
        if log.truncate_to(offset) {
            let note = straddling.map_or(String::new(), |(base, last)| {
                // the same text as the Python replica's straddle_note
                format!("; batch [{base}, {last}] held it and went whole, offsets {base}-{} are a hole", offset.0 - 1)
            });
            self.events.push(format!("truncated {before} -> {offset} ({why}){note}"));
        }
    }

    /// Leader append (1.8): not leader -> NOT_LEADER_OR_FOLLOWER; acks=all with |ISR| <
    /// effective minISR -> NOT_ENOUGH_REPLICAS (nothing appended); producer-state refusals
    /// become their Kafka errors; a duplicate answers the original offsets. Errors a caller
    /// could not have meant (an empty batch) stay errors.
    pub fn handle_produce(&mut self, log: &mut ReplicaLog, req: &ProduceRequest, now_ms: u64) -> Result<ProduceResponse, Error> {
        let Some(epoch) = self.leader_epoch.filter(|_| self.role == Role::Leader) else {
            return Ok(ProduceResponse::error(KafkaError::NotLeaderOrFollower));
        };
        if req.acks == Acks::All && self.isr.len() < self.min_isr() {
            return Ok(ProduceResponse::error(KafkaError::NotEnoughReplicas));
        }
        log.set_time(clock(now_ms));
        let info = match log.append_as_leader(req.records.clone(), epoch, req.producer, req.is_transactional) {
            Ok(info) => info,
            Err(Error::ProducerState(ProducerStateError::InvalidProducerEpoch { .. })) => {
                self.events.push(format!("rejected produce from {}: INVALID_PRODUCER_EPOCH", req.client));
                return Ok(ProduceResponse::error(KafkaError::InvalidProducerEpoch));
            }
            Err(Error::ProducerState(ProducerStateError::OutOfOrderSequence { .. })) => {
                return Ok(ProduceResponse::error(KafkaError::OutOfOrderSequenceNumber));
            }
            Err(Error::ProducerState(ProducerStateError::InvalidTxnState { .. })) => {
                return Ok(ProduceResponse::error(KafkaError::InvalidTxnState));
            }
            Err(e) => return Err(e),
        };
        if !info.duplicate {
            self.maybe_increment_high_watermark(log, now_ms);
        }
        Ok(ProduceResponse {
            error: None,
            base_offset: Some(info.base_offset),
            last_offset: Some(info.last_offset),
            duplicate: info.duplicate,
        })
    }

    /// WriteTxnMarkers as leader (1.12, origin COORDINATOR, acks=all): not leader ->
    /// NOT_LEADER_OR_FOLLOWER; |ISR| < effective minISR -> NOT_ENOUGH_REPLICAS; an older
    /// producer epoch -> INVALID_PRODUCER_EPOCH; an older coordinator epoch than this producer's
    /// last marker -> TRANSACTION_COORDINATOR_FENCED (with transaction version 2 an equal producer
    /// epoch is older too, unless no transaction is ongoing); else the control batch is appended at the
    /// LEO (the HW may advance) and its offset returned. The caller answers once the HW is past
    /// it ([`Self::produce_completion`]).
    pub fn handle_write_txn_markers(&mut self, log: &mut ReplicaLog, req: &WriteTxnMarkersRequest, now_ms: u64) -> Result<WriteTxnMarkersResponse, Error> {
        let fail = |e| Ok(WriteTxnMarkersResponse { error: Some(e), offset: None });
        let Some(epoch) = self.leader_epoch.filter(|_| self.role == Role::Leader) else {
            return fail(KafkaError::NotLeaderOrFollower);
        };
        if self.isr.len() < self.min_isr() {
            return fail(KafkaError::NotEnoughReplicas);
        }
        let (control, kind) = if req.commit { (ControlType::Commit, "COMMIT") } else { (ControlType::Abort, "ABORT") };
        let pid = req.producer_id;
        log.set_time(clock(now_ms));
        match log.append_end_txn_marker(pid, req.producer_epoch, req.coordinator_epoch, control, epoch, req.transaction_version) {
            Ok(info) => {
                self.maybe_increment_high_watermark(log, now_ms);
                Ok(WriteTxnMarkersResponse { error: None, offset: Some(info.base_offset) })
            }
            Err(Error::ProducerState(ProducerStateError::InvalidProducerEpoch { .. })) => {
                self.events.push(format!("rejected {kind} marker for producer {}: INVALID_PRODUCER_EPOCH", pid.0));
                fail(KafkaError::InvalidProducerEpoch)
            }
            Err(Error::ProducerState(ProducerStateError::TransactionCoordinatorFenced { .. })) => {
                self.events.push(format!("rejected {kind} marker for producer {}: TRANSACTION_COORDINATOR_FENCED", pid.0));
                fail(KafkaError::TransactionCoordinatorFenced)
            }
            Err(e) => Err(e),
        }
    }

    /// acks=all purgatory check (`checkEnoughReplicasReachOffset`, 1.8): `None` while waiting;
    /// `Some(None)` once HW >= `required_offset` with maximal ISR >= min.insync.replicas,
    /// `Some(Some(NOT_ENOUGH_REPLICAS_AFTER_APPEND))` if smaller; NOT_LEADER_OR_FOLLOWER after
    /// losing leadership.
    pub fn produce_completion(&self, log: &ReplicaLog, required_offset: Offset) -> Option<Option<KafkaError>> {
        if self.role != Role::Leader {
            return Some(Some(KafkaError::NotLeaderOrFollower));
        }
        if log.high_watermark() < required_offset {
            return None;
        }
        if self.maximal_isr().len() >= self.min_isr() {
            Some(None)
        } else {
            Some(Some(KafkaError::NotEnoughReplicasAfterAppend))
        }
    }

    /// `Partition.maybeIncrementLeaderHW` (1.6): min LEO over the leader and every follower in
    /// the maximal ISR or caught up; from G5 (3.6+, KAFKA-15021) a caught-up follower outside
    /// the ISR counts only if ISR-eligible, so a fenced broker no longer holds the HW. An
    /// unknown follower LEO holds the HW. G5: no advance while |ISR| < effective minISR.
    /// Returns whether the HW rose.
    pub fn maybe_increment_high_watermark(&mut self, log: &mut ReplicaLog, now_ms: u64) -> bool {
        if self.role != Role::Leader {
            return false;
        }
        if self.generation.strict_min_isr() && self.isr.len() < self.effective_min_isr() {
            return false;
        }
        let leo = log.log_end_offset();
        let mut new_hw = leo;
        let maximal = self.maximal_isr();
        for (r, st) in &self.followers {
            if maximal.contains(r) || (self.caught_up(st, leo, now_ms) && self.isr_eligible(*r)) {
                match st.log_end_offset {
                    None => return false,
                    Some(leo) => new_hw = new_hw.min(leo),
                }
            }
        }
        log.maybe_increment_high_watermark(new_hw)
    }

    /// ISR-expiration tick (1.7): propose removing ISR followers neither at the leader's LEO
    /// nor caught up within replica.lag.time.max.ms; `None` if nothing to do or a proposal is
    /// in flight.
    pub fn maybe_shrink_isr(&mut self, log: &ReplicaLog, now_ms: u64) -> Option<AlterPartitionRequest> {
        if self.role != Role::Leader || self.pending_isr.is_some() {
            return None;
        }
        let leo = log.log_end_offset();
        let out: Vec<BrokerId> = self
            .isr
            .iter()
            .copied()
            .filter(|r| *r != self.broker_id)
            .filter(|r| self.followers.get(r).is_some_and(|st| !self.caught_up(st, leo, now_ms)))
            .collect();
        if out.is_empty() {
            return None;
        }
        let new_isr = self.isr.iter().copied().filter(|r| !out.contains(r)).collect();
        self.propose(new_isr)
    }

    pub(crate) fn propose(&mut self, new_isr: Vec<BrokerId>) -> Option<AlterPartitionRequest> {
        let request = self.alter_partition_request(new_isr.clone())?;
        self.pending_isr = Some(new_isr);
        Some(request)
    }

    /// G5 sends each member's broker epoch as last seen in its fetches
    /// (`Partition.addBrokerEpochToIsr`; unknown for the leader itself).
    fn alter_partition_request(&self, new_isr: Vec<BrokerId>) -> Option<AlterPartitionRequest> {
        let (leader_epoch, partition_epoch) = (self.leader_epoch?, self.partition_epoch?);
        let broker_epochs = if self.generation.kraft() {
            new_isr.iter().map(|r| self.followers.get(r).and_then(|st| st.broker_epoch)).collect()
        } else {
            Vec::new()
        };
        Some(AlterPartitionRequest { broker_id: self.broker_id, leader_epoch, partition_epoch, new_isr, broker_epochs })
    }

    /// The in-flight proposal to resend: Kafka's controller channel retries the one
    /// outstanding AlterPartition until it is answered (`AlterPartitionManager`).
    pub fn pending_alter_partition(&self) -> Option<AlterPartitionRequest> {
        if self.role != Role::Leader {
            return None;
        }
        self.alter_partition_request(self.pending_isr.clone()?)
    }

    /// `Partition.submitAlterPartition`'s completion. An answer to anything but the proposal
    /// in flight is out of date and ignored. Success commits the returned ISR and partition
    /// epoch unless they are for another leader epoch or older (`handleAlterPartitionUpdate`),
    /// then the HW may advance. INELIGIBLE_REPLICA and OPERATION_NOT_ATTEMPTED say the request
    /// was not applied: back to the last committed ISR. Any other error keeps the proposal
    /// pending until newer metadata replaces it (`Partition.handleAlterPartitionError`).
    pub fn handle_alter_partition_response(&mut self, log: &mut ReplicaLog, resp: &AlterPartitionResponse, now_ms: u64) {
        let req = &resp.request;
        if self.role != Role::Leader
            || self.pending_isr.as_ref() != Some(&req.new_isr)
            || Some(req.leader_epoch) != self.leader_epoch
            || Some(req.partition_epoch) != self.partition_epoch
        {
            return;
        }
        match resp.error {
            None => {
                if Some(resp.leader_epoch) != self.leader_epoch || self.partition_epoch.is_some_and(|pe| resp.partition_epoch < pe) {
                    return;
                }
                self.isr = resp.isr.clone();
                self.partition_epoch = Some(resp.partition_epoch);
                self.pending_isr = None;
                self.maybe_increment_high_watermark(log, now_ms);
            }
            Some(e @ (AlterPartitionError::IneligibleReplica | AlterPartitionError::OperationNotAttempted)) => {
                let isr: Vec<u32> = self.isr.iter().map(|b| b.0).collect();
                self.events.push(format!("ISR proposal {:?} refused ({}): back to ISR {:?}", req.new_isr.iter().map(|b| b.0).collect::<Vec<_>>(), e.name(), isr));
                self.pending_isr = None;
            }
            Some(AlterPartitionError::FencedLeaderEpoch | AlterPartitionError::InvalidUpdateVersion) => {}
        }
    }

    /// Writes the `replication-offset-checkpoint` (every
    /// replica.high.watermark.checkpoint.interval.ms, 1.10).
    pub fn checkpoint_high_watermark(&mut self, log: &ReplicaLog) {
        self.checkpointed_high_watermark = log.high_watermark();
    }

    /// A process or machine crash (1.10): in-memory state is gone; with `lose_unflushed` the
    /// page cache too (unflushed tail dropped, a torn batch whole). The HW restarts from the
    /// last checkpoint, clamped to the log. The log is reloaded as a restarted broker loads
    /// it after an unclean shutdown ([`ReplicaLog::drop_unflushed`] or
    /// [`ReplicaLog::reload`]`(false)`: every producer snapshot deleted by the segment's
    /// recovery, producer state replayed from the log start). Returns the number of
    /// records lost.
    pub fn crash(&mut self, log: &mut ReplicaLog, lose_unflushed: bool) -> usize {
        let lost = if lose_unflushed { log.drop_unflushed() } else { 0 };
        if lost > 0 {
            self.events.push(format!("lost {lost} unflushed records in crash"));
        }
        if !lose_unflushed {
            log.reload(false);
        }
        log.update_high_watermark(self.checkpointed_high_watermark);
        self.reset_volatile();
        lost
    }

    /// Controlled shutdown's last step: flush the log, checkpoint the HW, take a producer
    /// snapshot at the log end offset (`UnifiedLog.close`: `producerStateManager.takeSnapshot()`),
    /// forget the in-memory partition state (the process stops; a restart learns it again)
    /// and reload the log as the restarted broker does ([`ReplicaLog::reload`]`(true)`:
    /// producer state from that snapshot).
    pub fn clean_shutdown(&mut self, log: &mut ReplicaLog) {
        log.flush(None);
        self.checkpoint_high_watermark(log);
        log.take_producer_snapshot();
        log.reload(true);
        self.reset_volatile();
    }
}

/// The leader's clock for the LogAppendTime it stamps (virtual ms; saturating at Int64's max).
fn clock(now_ms: u64) -> i64 {
    i64::try_from(now_ms).unwrap_or(i64::MAX)
}
