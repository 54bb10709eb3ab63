//! Leader side: follower fetches (1.4d, 1.5), OffsetsForLeaderEpoch (1.4b-c), consumer fetches
//! and position validation (1.12, Inv-15). One call per request.

use super::messages::*;
use super::{FollowerState, Replica, Role};
use crate::divergence::{leader_fetch_check, FetchCheck};
use crate::generation::Generation;
use crate::log::{RecordBatch, ReplicaLog};
use crate::txn::ControlType;
use crate::types::{BrokerId, LeaderEpoch, Offset};

/// The most batches one fetch response carries.
pub const MAX_FETCH_BATCHES: usize = 1000;

impl Replica {
    /// KIP-207 (G3+): the HW of a new leader has not reached the start of its epoch yet.
    fn offset_not_available(&self, hw: Offset) -> bool {
        self.generation >= Generation::Kip320 && self.leader_epoch_start_offset.is_some_and(|leso| leso > hw)
    }

    /// Not-leader and KIP-320 current-epoch checks (G3+; an absent field always passes).
    fn epoch_error(&self, current_leader_epoch: Option<LeaderEpoch>) -> Option<KafkaError> {
        self.epoch_error_as(current_leader_epoch, true)
    }

    /// As `epoch_error`; with `require_leader` false a follower passes too
    /// (`Partition.localLogWithEpochOrThrow(currentLeaderEpoch, requireLeader)`: a consumer
    /// fetch with client metadata, KIP-392, is served by any replica of the current epoch).
    fn epoch_error_as(&self, current_leader_epoch: Option<LeaderEpoch>, require_leader: bool) -> Option<KafkaError> {
        let serves = self.role == Role::Leader || (!require_leader && self.role == Role::Follower);
        let Some(epoch) = self.leader_epoch.filter(|_| serves) else {
            return Some(KafkaError::NotLeaderOrFollower);
        };
        let requested = current_leader_epoch.filter(|_| self.generation.fences_current_epoch())?;
        if requested < epoch {
            Some(KafkaError::FencedLeaderEpoch)
        } else if requested > epoch {
            Some(KafkaError::UnknownLeaderEpoch)
        } else {
            None
        }
    }

    /// Answers one follower fetch. Order: not-leader / epoch fencing (G3+); from G4 with a last
    /// fetched epoch, `leader_fetch_check` (DivergingEpoch with no records and no follower
    /// update, or OFFSET_OUT_OF_RANGE); a fetch offset outside `[log_start, LEO]` is
    /// OFFSET_OUT_OF_RANGE; else read from the fetch offset, update the follower's state
    /// (which may propose an ISR expansion, returned) and maybe the HW. The response carries
    /// the HW from before the update (1.5).
    pub fn handle_fetch(&mut self, log: &mut ReplicaLog, req: &FetchRequest, now_ms: u64) -> (FetchResponse, Option<AlterPartitionRequest>) {
        self.serve_fetch(log, req, now_ms, true)
    }

    /// Answers a follower fetch that waited in the purgatory, when it completes: the same
    /// checks and read as [`Self::handle_fetch`] at the time of completion, but the follower's
    /// state is not updated again (`DelayedFetch.onComplete` reads with `readFromPurgatory`,
    /// so `Partition.fetchRecords` runs with `updateFetchState = false`; the ZooKeeper-era
    /// releases updated it only in `ReplicaManager.fetchMessages` too). Its state, and any ISR
    /// expansion, are what the fetch did on arrival.
    pub fn complete_parked_fetch(&mut self, log: &mut ReplicaLog, req: &FetchRequest) -> FetchResponse {
        self.serve_fetch(log, req, 0, false).0
    }

    fn serve_fetch(&mut self, log: &mut ReplicaLog, req: &FetchRequest, now_ms: u64, update: bool) -> (FetchResponse, Option<AlterPartitionRequest>) {
        let mut error = self.epoch_error(req.current_leader_epoch);
        if error.is_none() && !self.followers.contains_key(&req.replica_id) {
            error = Some(KafkaError::NotLeaderOrFollower);
        }
        // the broker epoch is checked where the state is updated (`Replica.updateFetchStateOrThrow`)
        if update && error.is_none() && self.stale_broker_epoch(req) {
            let epoch = req.broker_epoch.map_or_else(|| "None".to_string(), |e| e.to_string());
            self.events.push(format!("ignored fetch from broker {}: stale broker epoch {epoch}", req.replica_id.0));
            error = Some(KafkaError::NotLeaderOrFollower);
        }
        let (hw, start, leo) = (log.high_watermark(), log.log_start_offset(), log.log_end_offset());
        let response = |error, batches, diverging_epoch| FetchResponse {
            error,
            batches,
            high_watermark: hw,
            log_start_offset: start,
            log_end_offset: leo,
            diverging_epoch,
        };
        if error.is_some() {
            return (response(error, Vec::new(), None), None);
        }
        if let Some(last) = req.last_fetched_epoch.filter(|_| self.generation.truncate_on_fetch()) {
            match leader_fetch_check(log.epoch_cache(), leo, start, req.fetch_offset, last) {
                FetchCheck::Diverging { epoch, end_offset } => {
                    // Kafka 2.8.0 (`Partition.readRecords` answers LogOffsetMetadata(fetchOffset),
                    // `ReplicaManager.updateFollowerFetchState` records it): the diverged fetch
                    // offset becomes the follower's LEO, which can put it into the ISR and move
                    // the HW over records it does not hold. 2.8.1 skips the update (KAFKA-13141).
                    let proposal = if update && self.record_diverging_fetch_offset {
                        self.events.push(format!(
                            "took broker {}'s diverging fetch offset {} as its log end offset (KAFKA-13141)",
                            req.replica_id.0, req.fetch_offset.0
                        ));
                        self.update_follower_fetch_state(log, req.replica_id, req.fetch_offset, now_ms, req.broker_epoch)
                    } else {
                        None
                    };
                    return (response(None, Vec::new(), Some((epoch, end_offset))), proposal);
                }
                FetchCheck::OffsetOutOfRange => {
                    return (response(Some(KafkaError::OffsetOutOfRange), Vec::new(), None), None);
                }
                FetchCheck::Read => {}
            }
        }
        let Ok(batches) = log.read(req.fetch_offset, Some(MAX_FETCH_BATCHES), None) else {
            return (response(Some(KafkaError::OffsetOutOfRange), Vec::new(), None), None);
        };
        let proposal = if update {
            self.update_follower_fetch_state(log, req.replica_id, req.fetch_offset, now_ms, req.broker_epoch)
        } else {
            None
        };
        (response(None, batches, None), proposal)
    }

    /// KIP-903 (G5): a fetch carrying an older broker epoch than the metadata's for that
    /// broker comes from a previous incarnation and must not update the follower's state
    /// (`Replica.updateFetchStateOrThrow`, KAFKA-14139).
    fn stale_broker_epoch(&self, req: &FetchRequest) -> bool {
        match (req.broker_epoch, self.brokers.get(&req.replica_id)) {
            (Some(sent), Some(&(known, _))) => known > sent,
            _ => false,
        }
    }

    /// `updateFollowerFetchState` then `maybeExpandIsr` (1.5, 1.7).
    fn update_follower_fetch_state(&mut self, log: &mut ReplicaLog, replica_id: BrokerId, fetch_offset: Offset, now_ms: u64, broker_epoch: Option<u64>) -> Option<AlterPartitionRequest> {
        let leader_leo = log.log_end_offset();
        let st: &mut FollowerState = self.followers.get_mut(&replica_id)?;
        if fetch_offset >= leader_leo {
            st.last_caught_up_time_ms = Some(now_ms);
        } else if fetch_offset >= st.last_fetch_leader_log_end_offset {
            if let Some(fetched) = st.last_fetch_time_ms {
                st.last_caught_up_time_ms = Some(st.last_caught_up_time_ms.unwrap_or(0).max(fetched));
            }
        }
        st.last_fetch_leader_log_end_offset = leader_leo.max(st.last_fetch_leader_log_end_offset);
        st.last_fetch_time_ms = Some(now_ms);
        st.broker_epoch = broker_epoch;
        let changed = st.log_end_offset != Some(fetch_offset);
        st.log_end_offset = Some(fetch_offset);
        let proposal = self.maybe_expand_isr(log, replica_id, fetch_offset);
        if changed {
            self.maybe_increment_high_watermark(log, now_ms);
        }
        proposal
    }

    /// Expands iff the follower is outside the ISR, no proposal is in flight, it is
    /// ISR-eligible (G5), its LEO >= HW and, from G3 (KAFKA-7128), >= the leader epoch start
    /// offset (`Partition.canAddReplicaToIsr`, `isFollowerInSync`).
    fn maybe_expand_isr(&mut self, log: &ReplicaLog, replica_id: BrokerId, follower_leo: Offset) -> Option<AlterPartitionRequest> {
        if self.pending_isr.is_some() || self.isr.contains(&replica_id) || !self.isr_eligible(replica_id) || follower_leo < log.high_watermark() {
            return None;
        }
        if let Some(leso) = self.leader_epoch_start_offset {
            if self.generation.isr_requires_leso() && follower_leo < leso {
                return None;
            }
        }
        let mut new_isr = self.isr.clone();
        new_isr.push(replica_id);
        self.propose(new_isr)
    }

    /// The leader's OffsetsForLeaderEpoch answer by generation: G0/G1 the v0 end offset, G2 the
    /// 2.0 lookup, G3+ the current one; no HW capping for replicas (1.4c).
    pub fn handle_offsets_for_leader_epoch(&self, log: &ReplicaLog, req: &OffsetsForLeaderEpochRequest) -> OffsetsForLeaderEpochResponse {
        let mut resp = OffsetsForLeaderEpochResponse { error: self.epoch_error(req.current_leader_epoch), end_offset: None, answer: None };
        if resp.error.is_some() {
            return resp;
        }
        let (cache, leo) = (log.epoch_cache(), log.log_end_offset());
        match self.generation {
            Generation::TruncateToHw | Generation::Kip101 => resp.end_offset = cache.end_offset_for_kip101(req.leader_epoch, leo),
            Generation::Kip279 => resp.answer = cache.end_offset_for_kip279(req.leader_epoch, leo),
            _ => resp.answer = cache.end_offset_for(req.leader_epoch, leo),
        }
        resp
    }

    /// A consumer fetch: records strictly below the HW (read_uncommitted) or the LSO
    /// (read_committed, which also gets the aborted transactions overlapping the range, 1.12);
    /// control records are returned with their kind so the consumer steps over them. Also a
    /// ListOffsets reset (earliest = log start, latest = HW, or LSO for read_committed) and a
    /// KIP-320 position validation (the current `end_offset_for` with the leader's LEO, not
    /// capped at the HW: `Partition.lastOffsetForLeaderEpoch`). G3+ fence the current epoch.
    /// From G3 (2.2+, KIP-207) a latest-offset lookup while the HW is below the leader epoch
    /// start offset answers OFFSET_NOT_AVAILABLE (`Partition.fetchOffsetForTimestamp`).
    /// KIP-392 (2.4+, G3 on): `FetchParams.fetchOnlyLeader` is false for a consumer fetch
    /// with client metadata, so a follower answers it from its own log up to its own HW / LSO.
    /// ListOffsets and position validation always go to the leader (no rack on them here).
    fn follower_may_serve(&self, req: &ConsumerFetchRequest) -> bool {
        req.client_rack.is_some() && req.fetch_offset.is_some() && req.validate_epoch.is_none() && self.generation.fences_current_epoch()
    }

    /// `ReplicaManager.findPreferredReadReplica` with `RackAwareReplicaSelector` (KIP-392),
    /// each broker its own rack: on the leader, for a consumer in `client_rack` fetching at
    /// `fetch_offset`, the follower in that rack if it is a candidate (in the ISR, from G4 as
    /// since KAFKA-14372 in 3.3.2 / 3.4.0; G3 takes any follower, as 2.4 - 2.7 did; its LEO as
    /// the leader last saw it at or past the fetch offset), else `None` (read from the leader;
    /// also when the client is in the leader's rack).
    pub fn preferred_read_replica(&self, fetch_offset: Offset, client_rack: BrokerId) -> Option<BrokerId> {
        if self.role != Role::Leader || client_rack == self.broker_id || !self.generation.fences_current_epoch() {
            return None;
        }
        let st = self.followers.get(&client_rack)?;
        let in_isr = self.generation < Generation::DivergingEpoch || self.isr.contains(&client_rack);
        (in_isr && st.log_end_offset.is_some_and(|leo| leo >= fetch_offset)).then_some(client_rack)
    }

    pub fn handle_consumer_fetch(&self, log: &ReplicaLog, req: &ConsumerFetchRequest) -> ConsumerFetchResponse {
        let (hw, lso) = (log.high_watermark(), log.last_stable_offset());
        let committed = req.isolation_level == IsolationLevel::ReadCommitted;
        let bound = if committed { lso } else { hw };
        let mut resp = ConsumerFetchResponse {
            error: self.epoch_error_as(req.current_leader_epoch, !self.follower_may_serve(req)),
            leader_epoch: self.leader_epoch,
            records: Vec::new(),
            high_watermark: Offset(0),
            reset_offset: None,
            epoch_end: None,
            last_stable_offset: Offset(0),
            aborted_transactions: Vec::new(),
        };
        if resp.error.is_some() {
            return resp;
        }
        resp.high_watermark = hw;
        resp.last_stable_offset = lso;
        if let Some(epoch) = req.validate_epoch {
            resp.epoch_end = log.end_offset_for_epoch(Some(epoch));
            return resp;
        }
        let Some(from) = req.fetch_offset else {
            if req.reset == OffsetReset::Latest && self.offset_not_available(hw) {
                resp.error = Some(KafkaError::OffsetNotAvailable);
                return resp;
            }
            resp.reset_offset = match req.reset {
                OffsetReset::Earliest => Some(log.log_start_offset()),
                OffsetReset::Latest => Some(bound),
                OffsetReset::Timestamp(target) => {
                    // Before 1.0.0 (KafkaApis.handleListOffsetRequestV1) the answer had only
                    // to be at most the HW, so the offset of the first uncommitted record could
                    // be answered and the LSO bounded nothing; KAFKA-5522 made it strictly
                    // below the last fetchable offset (HW, or LSO for read_committed).
                    let found = log.offset_for_timestamp(target).map(|(offset, _)| offset).filter(|&offset| {
                        if self.list_offsets_up_to_hw { offset <= hw } else { offset < bound }
                    });
                    if found.is_none() && self.offset_not_available(hw) {
                        // 2.2+ (KIP-207, Partition.fetchOffsetForTimestamp): no answer below the
                        // bound while the HW has not reached the epoch start is retriable
                        resp.error = Some(KafkaError::OffsetNotAvailable);
                    }
                    found
                }
            };
            return resp;
        };
        let Ok(batches) = log.read(from, None, Some(bound)) else {
            resp.error = Some(KafkaError::OffsetOutOfRange);
            return resp;
        };
        'batches: for batch in &batches {
            let kind = record_kind(batch);
            let pid = batch.producer().map(|p| p.producer_id.0);
            for (i, &value) in batch.records().iter().enumerate() {
                let offset = batch.base_offset().0 + i as u64;
                if resp.records.len() >= req.max_records {
                    break 'batches;
                }
                if from.0 <= offset && offset < bound.0 {
                    resp.records.push((offset, value, batch.partition_leader_epoch().0, pid, kind));
                }
            }
        }
        if let (true, Some(last)) = (committed, resp.records.last()) {
            resp.aborted_transactions = log
                .aborted_transactions(from, Offset(last.0 + 1))
                .into_iter()
                .map(|t| (t.producer_id.0, t.first_offset.0))
                .collect();
        }
        resp
    }
}

fn record_kind(batch: &RecordBatch) -> RecordKind {
    match batch.marker() {
        Some((ControlType::Commit, _)) => RecordKind::CommitMarker,
        Some((ControlType::Abort, _)) => RecordKind::AbortMarker,
        None if batch.is_transactional() => RecordKind::Transactional,
        None => RecordKind::Data,
    }
}
