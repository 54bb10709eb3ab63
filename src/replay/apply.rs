//! Applying one row and the checks it triggers (`docs/trace-format.md`, "Invariants").

use super::state::{Replayer, Role, Row};
use super::{EventKind, Invariant, RecordRef, FLAG_CONTROL, FLAG_LOSE_UNFLUSHED, FLAG_TRANSACTIONAL, FLAG_UNCLEAN};
use crate::error::TraceError;
use crate::invariants::{self as inv, first_mismatch_between};
use crate::log::{ProducerFields, RecordBatch, ReplicaLog};
use crate::types::{LeaderEpoch, Offset, ProducerEpoch, ProducerId, Sequence};

fn record(log: &ReplicaLog, broker: Option<u32>, offset: u64) -> RecordRef {
    let inside = offset < log.log_end_offset().0;
    RecordRef {
        broker,
        offset,
        value: if inside { log.value_at(Offset(offset)) } else { None },
        epoch: if inside { log.store().containing(offset).map(|i| log.store().epoch(i)) } else { None },
    }
}

impl Replayer {
    pub(crate) fn apply(&mut self, row: &Row<'_>) -> Result<(), TraceError> {
        let p = self.partition_index(row.partition);
        match row.kind {
            EventKind::AppendLeader | EventKind::AppendFollower => self.append(p, row),
            EventKind::Fetch => self.fetch(p, row),
            EventKind::Truncate | EventKind::TruncateFully => self.truncate(p, row),
            EventKind::HighWatermark => self.high_watermark(p, row),
            EventKind::AssignEpoch => {
                let (b, e, o) = (row.need_broker()?, row.need_epoch()?, row.need_offset()?);
                let r = self.replica_index(p, b, row)?;
                self.partitions[p].replicas[r].log.assign_epoch(LeaderEpoch(e), Offset(o));
                Ok(())
            }
            EventKind::Flush => {
                let r = self.replica_index(p, row.need_broker()?, row)?;
                self.partitions[p].replicas[r].log.flush(row.offset.map(Offset));
                Ok(())
            }
            EventKind::Crash => self.crash(p, row),
            EventKind::Restart => {
                let r = self.replica_index(p, row.need_broker()?, row)?;
                self.partitions[p].replicas[r].alive = true;
                Ok(())
            }
            EventKind::LeaderChange => self.leader_change(p, row),
            EventKind::BecomeLeader => self.become_leader(p, row),
            EventKind::BecomeFollower => {
                let (b, e) = (row.need_broker()?, row.need_epoch()?);
                let r = self.replica_index(p, b, row)?;
                self.partitions[p].replicas[r].role = Role::Follower(e);
                Ok(())
            }
        }
    }

    fn producer_fields(row: &Row<'_>) -> Result<Option<ProducerFields>, TraceError> {
        match row.producer {
            (None, None, None) => Ok(None),
            (Some(id), Some(ep), Some(seq)) => {
                let bad = |what: &str| row.malformed(format!("{what} out of its domain"));
                Ok(Some(ProducerFields {
                    producer_id: ProducerId::try_new(id as i128, "producer_id").map_err(|_| bad("producer_id"))?,
                    producer_epoch: ProducerEpoch::try_new(ep as i128, "producer_epoch").map_err(|_| bad("producer_epoch"))?,
                    base_sequence: Sequence::try_new(seq as i128, "base_sequence").map_err(|_| bad("base_sequence"))?,
                }))
            }
            _ => Err(row.malformed("producer_id, producer_epoch and base_sequence must be all null or all set")),
        }
    }

    fn append(&mut self, p: usize, row: &Row<'_>) -> Result<(), TraceError> {
        let b = row.need_broker()?;
        let r = self.replica_index(p, b, row)?;
        let leader = row.kind == EventKind::AppendLeader;
        let producer = Self::producer_fields(row)?;
        let flags = row.flags & (FLAG_TRANSACTIONAL | FLAG_CONTROL);
        // The records and epoch: from the row, or copied from the source replica's batch at
        // `offset` (an `append_follower` with null `values`).
        let mut scratch = std::mem::take(&mut self.scratch);
        let (epoch, producer, flags) = match row.values {
            Some(values) => {
                scratch.clear();
                scratch.extend_from_slice(values);
                (row.need_epoch()?, producer, flags)
            }
            None if !leader => match self.copy_source(p, row, &mut scratch)? {
                Some(found) => found,
                None => {
                    self.scratch = scratch;
                    return Ok(());
                }
            },
            None => return Err(row.malformed("values is null")),
        };
        if let Some(n) = row.record_count {
            if n as usize != scratch.len() && row.values.is_some() {
                let got = scratch.len();
                self.scratch = scratch;
                return Err(row.malformed(format!("record_count {n} but {got} values")));
            }
        }
        self.append_records(p, r, row, row.offset, &scratch, epoch, producer, flags, leader);
        self.scratch = scratch;
        Ok(())
    }

    /// The batch an `append_follower` without values copies: the source (`leader` column)
    /// replica's batch starting at `offset`. `None` (after reporting) if there is none.
    #[allow(clippy::type_complexity)]
    fn copy_source(&mut self, p: usize, row: &Row<'_>, out: &mut Vec<u64>) -> Result<Option<(u32, Option<ProducerFields>, u8)>, TraceError> {
        let src = row.leader.ok_or_else(|| row.malformed("values and leader are both null"))?;
        let base = row.need_offset()?;
        let s = self.replica_index(p, src, row)?;
        let log = &self.partitions[p].replicas[s].log;
        let store = log.store();
        match store.containing(base).filter(|&i| store.base(i) == base) {
            Some(i) => {
                out.clear();
                out.extend_from_slice(store.records(i));
                let flags = if store.is_transactional(i) { FLAG_TRANSACTIONAL } else { 0 } | if store.is_control(i) { FLAG_CONTROL } else { 0 };
                Ok(Some((store.epoch(i), store.producer(i), flags)))
            }
            None => {
                let msg = format!("broker {src} has no batch starting at offset {base} to copy (LEO {})", log.log_end_offset());
                self.report(p, row, Invariant::TraceConsistency, msg, vec![]);
                Ok(None)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn append_records(&mut self, p: usize, r: usize, row: &Row<'_>, expected_base: Option<u64>, records: &[u64], epoch: u32, producer: Option<ProducerFields>, flags: u8, leader: bool) {
        let b = self.partitions[p].replicas[r].broker;
        let (alive, leo) = {
            let rep = &self.partitions[p].replicas[r];
            (rep.alive, rep.log.log_end_offset().0)
        };
        if !alive {
            self.report(p, row, Invariant::TraceConsistency, format!("broker {b} appends while crashed"), vec![]);
        }
        // a v0/v1 follower takes a wrapper at its own offsets if its log accepts it there
        // (ReplicaLog::follows)
        let mut wrapper_base = None;
        if let Some(o) = expected_base.filter(|&o| o != leo) {
            let last = o.saturating_add(records.len().saturating_sub(1) as u64);
            let log = &self.partitions[p].replicas[r].log;
            if leader || records.is_empty() || !log.follows(Offset(leo), Offset(o), Offset(last)) {
                let msg = format!("broker {b}: batch at offset {o} but the log end offset is {leo}");
                self.report(p, row, Invariant::TraceConsistency, msg, vec![]);
                return;
            }
            wrapper_base = Some(o);
        }
        if LeaderEpoch::try_new(epoch as i128, "epoch").is_err() {
            self.report(p, row, Invariant::TraceConsistency, format!("epoch {epoch} outside 0..=2^31-1"), vec![]);
            return;
        }
        let last_epoch = {
            let s = self.partitions[p].replicas[r].log.store();
            (s.len() > 0).then(|| s.epoch(s.len() - 1))
        };
        if let Some(prev) = last_epoch.filter(|&before| inv::epoch_goes_back(before, epoch)) {
            let msg = format!("broker {b}: batch at {leo} has epoch {epoch} after epoch {prev}");
            let rec = RecordRef { broker: Some(b), offset: leo, value: records.first().copied(), epoch: Some(epoch) };
            self.report(p, row, Invariant::EpochMonotone, msg, vec![rec]);
        }
        let idempotent = producer.is_some() && flags & FLAG_CONTROL == 0 && self.opts.checks(Invariant::NoDuplicates);
        if idempotent {
            let dup = records.iter().enumerate().find_map(|(k, v)| self.partitions[p].replicas[r].values.get(v).map(|&o| (k, *v, o)));
            if let Some((k, v, first)) = dup {
                let msg = format!("broker {b}: value {v} appended at offset {} is already at offset {first}", leo + k as u64);
                let recs = vec![
                    RecordRef { broker: Some(b), offset: first, value: Some(v), epoch: None },
                    RecordRef { broker: Some(b), offset: leo + k as u64, value: Some(v), epoch: Some(epoch) },
                ];
                self.report(p, row, Invariant::NoDuplicates, msg, recs);
            }
        }
        let rep = &mut self.partitions[p].replicas[r];
        let appended = match wrapper_base {
            Some(o) => RecordBatch::new(Offset(o), LeaderEpoch(epoch), records.to_vec(), producer, flags & FLAG_TRANSACTIONAL != 0, flags & FLAG_CONTROL != 0)
                .and_then(|batch| rep.log.append_batches_as_follower(std::slice::from_ref(&batch)))
                .map(|_| ()),
            None => rep.log.append_records(records, LeaderEpoch(epoch), producer, flags, leader).map(|_| ()),
        };
        match appended {
            Ok(_) => {
                if idempotent {
                    let base = wrapper_base.unwrap_or(leo);
                    for (k, v) in records.iter().enumerate() {
                        rep.values.entry(*v).or_insert(base + k as u64);
                    }
                }
            }
            Err(e) => {
                let msg = format!("broker {b}: {e}");
                self.report(p, row, Invariant::TraceConsistency, msg, vec![]);
            }
        }
    }

    /// `fetch`: the follower copies the leader's batches from its log end offset up to
    /// `offset` (exclusive).
    fn fetch(&mut self, p: usize, row: &Row<'_>) -> Result<(), TraceError> {
        let (b, upto) = (row.need_broker()?, row.need_offset()?);
        let src = row.leader.ok_or_else(|| row.malformed("leader is null"))?;
        let r = self.replica_index(p, b, row)?;
        let s = self.replica_index(p, src, row)?;
        if r == s {
            return Err(row.malformed("a replica fetches from itself"));
        }
        let from = self.partitions[p].replicas[r].log.log_end_offset().0;
        let (first, end) = {
            let log = &self.partitions[p].replicas[s].log;
            match log.read_range(Offset(from), None, Some(Offset(upto))) {
                Ok(range) => range,
                Err(e) => {
                    self.report(p, row, Invariant::TraceConsistency, format!("broker {b} fetches from {src}: {e}"), vec![]);
                    return Ok(());
                }
            }
        };
        let mut scratch = std::mem::take(&mut self.scratch);
        for i in first..end {
            let (base, epoch, producer, flags) = {
                let st = self.partitions[p].replicas[s].log.store();
                scratch.clear();
                scratch.extend_from_slice(st.records(i));
                let flags = if st.is_transactional(i) { FLAG_TRANSACTIONAL } else { 0 } | if st.is_control(i) { FLAG_CONTROL } else { 0 };
                (st.base(i), st.epoch(i), st.producer(i), flags)
            };
            let log = &self.partitions[p].replicas[r].log;
            let leo = log.log_end_offset().0;
            if !log.follows(Offset(leo), Offset(base), Offset(base + scratch.len() as u64 - 1)) {
                let msg = format!("broker {b} at log end offset {leo} fetches from {src}, whose batch there starts at {base}");
                self.report(p, row, Invariant::TraceConsistency, msg, vec![]);
                break;
            }
            self.append_records(p, r, row, (base != leo).then_some(base), &scratch, epoch, producer, flags, false);
        }
        self.scratch = scratch;
        Ok(())
    }

    /// Forget the idempotent values of batches `[keep, len)` of replica `r` before they go.
    fn forget_values(&mut self, p: usize, r: usize, keep: usize) {
        let rep = &mut self.partitions[p].replicas[r];
        if rep.values.is_empty() {
            return;
        }
        let st = rep.log.store();
        for i in keep..st.len() {
            if st.producer(i).is_none() {
                continue;
            }
            let base = st.base(i);
            for (k, v) in st.records(i).iter().enumerate() {
                if rep.values.get(v) == Some(&(base + k as u64)) {
                    rep.values.remove(v);
                }
            }
        }
    }

    /// After replica `r`'s log lost everything from `from` on, lower what agreed with it.
    fn invalidate(&mut self, p: usize, r: usize, from: u64) {
        let part = &mut self.partitions[p];
        for j in 0..part.replicas.len() {
            part.agree[r][j] = part.agree[r][j].min(from);
            part.agree[j][r] = part.agree[j][r].min(from);
        }
        let rep = &mut part.replicas[r];
        rep.truth_agree = rep.truth_agree.min(from);
    }

    fn truncate(&mut self, p: usize, row: &Row<'_>) -> Result<(), TraceError> {
        let (b, t) = (row.need_broker()?, row.need_offset()?);
        let r = self.replica_index(p, b, row)?;
        let (start, leo) = {
            let log = &self.partitions[p].replicas[r].log;
            (log.log_start_offset().0, log.log_end_offset().0)
        };
        let fully = row.kind == EventKind::TruncateFully || t < start;
        if row.kind == EventKind::Truncate && t > start && t < leo {
            let st = self.partitions[p].replicas[r].log.store();
            if let Some(i) = st.containing(t).filter(|&i| st.base(i) < t) {
                let msg = format!("broker {b}: truncation to {t} inside batch [{}, {}] leaves a hole", st.base(i), st.last(i));
                let rec = record(&self.partitions[p].replicas[r].log, Some(b), t);
                self.report(p, row, Invariant::OffsetMonotone, msg, vec![rec]);
            }
        }
        let keep = if fully { 0 } else { self.partitions[p].replicas[r].log.store().first_ending_at_or_after(t) };
        self.forget_values(p, r, keep);
        if fully {
            self.partitions[p].replicas[r].values.clear();
        }
        let log = &mut self.partitions[p].replicas[r].log;
        if row.kind == EventKind::TruncateFully {
            log.truncate_fully_and_start_at(Offset(t));
        } else {
            log.truncate_to(Offset(t));
        }
        self.invalidate(p, r, if fully { 0 } else { t });
        self.check_durability_of(p, r, row);
        Ok(())
    }

    fn crash(&mut self, p: usize, row: &Row<'_>) -> Result<(), TraceError> {
        let b = row.need_broker()?;
        let r = self.replica_index(p, b, row)?;
        if row.flags & FLAG_LOSE_UNFLUSHED != 0 {
            let keep = {
                let log = &self.partitions[p].replicas[r].log;
                log.store().first_ending_at_or_after(log.recovery_point().0)
            };
            self.forget_values(p, r, keep);
            let log = &mut self.partitions[p].replicas[r].log;
            log.drop_unflushed();
            let leo = log.log_end_offset().0;
            self.invalidate(p, r, leo);
            self.partitions[p].lossy_crashes.push(b);
        }
        let rep = &mut self.partitions[p].replicas[r];
        rep.alive = false;
        rep.role = Role::None;
        Ok(())
    }

    fn leader_change(&mut self, p: usize, row: &Row<'_>) -> Result<(), TraceError> {
        let e = row.need_epoch()?;
        let part = &mut self.partitions[p];
        part.ctrl_leader = row.leader;
        part.ctrl_epoch = Some(e);
        if let Some(l) = row.leader {
            part.elected.insert((l, e));
            if row.flags & FLAG_UNCLEAN != 0 && part.unclean.is_none() {
                part.unclean = Some(format!("unclean leader election of broker {l} in epoch {e} at row {}", row.row));
            }
            let r = self.replica_index(p, l, row)?;
            self.check_durability_of(p, r, row);
        }
        Ok(())
    }

    fn become_leader(&mut self, p: usize, row: &Row<'_>) -> Result<(), TraceError> {
        let (b, e) = (row.need_broker()?, row.need_epoch()?);
        let r = self.replica_index(p, b, row)?;
        let leads = |x: &super::state::Replica| match x.role {
            Role::Leader(l) => Some(l),
            _ => None,
        };
        let other = self.partitions[p].replicas.iter().enumerate()
            .find(|&(j, x)| j != r && inv::other_leader_of_epoch([(x.alive, leads(x))], e))
            .map(|(_, x)| x.broker);
        if let Some(o) = other {
            self.report(p, row, Invariant::EpochFencing, format!("brokers {o} and {b} both lead epoch {e}"), vec![]);
        }
        let rep = &mut self.partitions[p].replicas[r];
        rep.role = Role::Leader(e);
        rep.leader_hw = rep.log.high_watermark().0;
        self.check_durability_of(p, r, row);
        Ok(())
    }

    fn high_watermark(&mut self, p: usize, row: &Row<'_>) -> Result<(), TraceError> {
        let (b, hw) = (row.need_broker()?, row.need_offset()?);
        let r = self.replica_index(p, b, row)?;
        let (start, leo, role, alive, leader_hw) = {
            let rep = &self.partitions[p].replicas[r];
            (rep.log.log_start_offset().0, rep.log.log_end_offset().0, rep.role, rep.alive, rep.leader_hw)
        };
        if !inv::hw_within_log(start, hw, leo) {
            self.report(p, row, Invariant::HwBounds, format!("broker {b}: HW {hw} outside [log start {start}, LEO {leo}]"), vec![]);
        }
        let new_hw = self.partitions[p].replicas[r].log.update_high_watermark(Offset(hw)).0;
        if let (Role::Leader(e), true) = (role, alive) {
            if !inv::leader_hw_ok(Some(leader_hw), new_hw, 0, None) {
                self.report(p, row, Invariant::HwBounds, format!("leader {b} HW went down {leader_hw} -> {new_hw} in epoch {e}"), vec![]);
            }
            self.partitions[p].replicas[r].leader_hw = leader_hw.max(new_hw);
            if self.partitions[p].elected.contains(&(b, e)) && new_hw > self.partitions[p].true_hw {
                self.advance_truth(p, r, new_hw);
                if let Some(l) = self.acting_leader(p) {
                    self.check_durability_of(p, l, row);
                }
            }
        }
        self.check_log_matching(p, r, row);
        Ok(())
    }

    /// A legitimate leader's HW rose to `hw`: copy its batches below `hw` into the truth
    /// (when they continue it) and raise trueHW.
    fn advance_truth(&mut self, p: usize, r: usize, hw: u64) {
        let part = &mut self.partitions[p];
        let start = part.truth.log_end_offset();
        let log = &part.replicas[r].log;
        if start < log.log_end_offset() {
            if let Ok((first, end)) = log.read_range(start, None, None) {
                let st = log.store();
                if first < end && st.base(first) == start.0 {
                    for i in first..end {
                        if st.base(i) >= hw {
                            break;
                        }
                        let flags = if st.is_transactional(i) { FLAG_TRANSACTIONAL } else { 0 } | if st.is_control(i) { FLAG_CONTROL } else { 0 };
                        // The source log's own batch: it satisfies the truth's append rules.
                        let _ = part.truth.append_records(st.records(i), LeaderEpoch(st.epoch(i)), st.producer(i), flags, false);
                    }
                }
            }
        }
        part.true_hw = hw;
    }

    /// The replica the controller elected, if it is alive and leads the controller's epoch.
    fn acting_leader(&self, p: usize) -> Option<usize> {
        let part = &self.partitions[p];
        let (l, e) = (part.ctrl_leader?, part.ctrl_epoch?);
        part.replicas.iter().position(|x| x.broker == l && x.alive && x.role == Role::Leader(e))
    }

    /// Inv-Durability on replica `r` if it is the acting leader: it must hold the truth
    /// below trueHW.
    fn check_durability_of(&mut self, p: usize, r: usize, row: &Row<'_>) {
        if self.acting_leader(p) != Some(r) || self.partitions[p].true_hw == 0 || !self.opts.checks(Invariant::Durability) {
            return;
        }
        let part = &mut self.partitions[p];
        let true_hw = part.true_hw;
        let rep = &mut part.replicas[r];
        let limit = part.truth.log_end_offset().min(rep.log.log_end_offset());
        let from = Offset(rep.truth_agree);
        let m = first_mismatch_between(&part.truth, &rep.log, from, limit);
        rep.truth_agree = m.unwrap_or(limit).0.max(rep.truth_agree);
        if let Some(o) = inv::first_missing_committed(true_hw, rep.log.log_end_offset().0, || m) {
            let (b, e) = (rep.broker, part.ctrl_epoch.unwrap_or(0));
            let recs = vec![record(&part.truth, None, o), record(&rep.log, Some(b), o)];
            let msg = format!("leader {b} of epoch {e} lacks committed offset {o} (trueHW {true_hw})");
            self.report(p, row, Invariant::Durability, msg, recs);
        }
    }

    /// Inv-LogMatching between replica `r` (whose HW changed) and every other replica.
    fn check_log_matching(&mut self, p: usize, r: usize, row: &Row<'_>) {
        if !self.opts.checks(Invariant::LogMatching) {
            return;
        }
        let n = self.partitions[p].replicas.len();
        for o in 0..n {
            if o == r {
                continue;
            }
            let part = &mut self.partitions[p];
            let (a, b) = (&part.replicas[r], &part.replicas[o]);
            let (hw_a, hw_b) = (a.log.high_watermark().0, b.log.high_watermark().0);
            let agreed = part.agree[r][o];
            let mut reached = agreed;
            // compared from where the pair last agreed: `agree` keeps what is verified
            let m = inv::differ_below_hws(hw_a, hw_b, |bound| {
                if agreed >= bound.0 {
                    return None;
                }
                let m = first_mismatch_between(&a.log, &b.log, Offset(agreed), bound);
                reached = m.unwrap_or(bound).0.max(agreed);
                m
            });
            part.agree[r][o] = reached;
            part.agree[o][r] = reached;
            let Some(m) = m else { continue };
            let key = (r.min(o), r.max(o));
            if part.reported.get(&key) == Some(&m.0) {
                continue;
            }
            part.reported.insert(key, m.0);
            let (ba, bb) = (a.broker, b.broker);
            let recs = vec![record(&a.log, Some(ba), m.0), record(&b.log, Some(bb), m.0)];
            let msg = format!("brokers {ba} and {bb} differ at offset {} below min(HW) = {}", m.0, hw_a.min(hw_b));
            self.report(p, row, Invariant::LogMatching, msg, recs);
        }
    }
}
