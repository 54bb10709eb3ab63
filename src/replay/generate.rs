//! Synthetic traces of any size: a consistent protocol run (truncate-on-fetch generation,
//! clean elections) written straight into trace columns.
//!
//! Per round of one partition: the leader appends 1-4 batches of 1..=`max_records` records
//! (unique values); each live follower fetches everything (one `fetch` row: the replay copies
//! the batches from the leader's log) with probability 7/8, learning the leader's HW; the
//! leader's HW advances to the smallest log end offset among live followers. Every
//! `batches / leader_changes` batches the controller elects a live replica holding the
//! committed prefix (`leader_change`, `become_leader`, `assign_epoch`); the others become
//! followers and truncate where the core's divergence search (leader fetch check + DivergingEpoch
//! truncation against the new leader's epoch cache) says. With `crash_every`, a follower
//! crashes (no data loss) every that many rounds and restarts a few rounds later.
//!
//! The generator keeps only each replica's log end offset, HW and epoch cache, never the
//! batches: memory is the output columns (about 60 bytes per batch at 3 replicas).

use super::EventKind;
use crate::divergence::{diverging_epoch_truncation, leader_fetch_check, FetchCheck, TruncationOutcome};
use crate::epoch::LeaderEpochCache;
use crate::error::ArgumentError;
use crate::types::{LeaderEpoch, Offset};

/// What to generate.
#[derive(Clone, Debug)]
pub struct GenerateOptions {
    pub batches: u64,
    pub leader_changes: u64,
    pub replicas: u32,
    pub partitions: u32,
    pub seed: u64,
    pub max_records: u32,
    pub crash_every: Option<u64>,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        Self { batches: 1000, leader_changes: 10, replicas: 3, partitions: 1, seed: 0, max_records: 3, crash_every: None }
    }
}

/// Owned trace columns, nullable ones with an Arrow validity bitmap (LSB first).
#[derive(Clone, Debug, Default)]
pub struct TraceBuffers {
    pub len: usize,
    pub event: Vec<u64>,
    pub time_ms: Vec<i64>,
    pub partition: Vec<u32>,
    pub kind: Vec<u8>,
    pub broker: Vec<u32>,
    pub broker_valid: Vec<u8>,
    pub epoch: Vec<u32>,
    pub epoch_valid: Vec<u8>,
    pub offset: Vec<u64>,
    pub offset_valid: Vec<u8>,
    pub leader: Vec<u32>,
    pub leader_valid: Vec<u8>,
    pub record_count: Vec<u32>,
    pub flags: Vec<u8>,
    pub values_offsets: Vec<i32>,
    pub values: Vec<u64>,
    pub values_valid: Vec<u8>,
}

fn push_bit(bits: &mut Vec<u8>, i: usize, set: bool) {
    if i.is_multiple_of(8) {
        bits.push(0);
    }
    if set {
        if let Some(last) = bits.last_mut() {
            *last |= 1 << (i % 8);
        }
    }
}

/// One row's fields.
#[derive(Clone, Copy, Debug, Default)]
pub struct RowFields<'a> {
    pub time_ms: i64,
    pub partition: u32,
    pub broker: Option<u32>,
    pub epoch: Option<u32>,
    pub offset: Option<u64>,
    pub leader: Option<u32>,
    pub flags: u8,
    pub values: Option<&'a [u64]>,
}

impl TraceBuffers {
    pub fn push(&mut self, kind: EventKind, f: RowFields<'_>) {
        let i = self.len;
        if i == 0 {
            self.values_offsets.push(0);
        }
        self.event.push(i as u64);
        self.time_ms.push(f.time_ms);
        self.partition.push(f.partition);
        self.kind.push(kind as u8);
        self.broker.push(f.broker.unwrap_or(0));
        push_bit(&mut self.broker_valid, i, f.broker.is_some());
        self.epoch.push(f.epoch.unwrap_or(0));
        push_bit(&mut self.epoch_valid, i, f.epoch.is_some());
        self.offset.push(f.offset.unwrap_or(0));
        push_bit(&mut self.offset_valid, i, f.offset.is_some());
        self.leader.push(f.leader.unwrap_or(0));
        push_bit(&mut self.leader_valid, i, f.leader.is_some());
        self.record_count.push(f.values.map_or(0, |v| v.len() as u32));
        self.flags.push(f.flags);
        if let Some(v) = f.values {
            self.values.extend_from_slice(v);
        }
        self.values_offsets.push(self.values.len() as i32);
        push_bit(&mut self.values_valid, i, f.values.is_some());
        self.len += 1;
    }

    /// Heap bytes of the columns.
    pub fn heap_bytes(&self) -> usize {
        self.event.capacity() * 8 + self.time_ms.capacity() * 8 + self.partition.capacity() * 4 + self.kind.capacity()
            + self.broker.capacity() * 4 + self.epoch.capacity() * 4 + self.offset.capacity() * 8 + self.leader.capacity() * 4
            + self.record_count.capacity() * 4 + self.flags.capacity() + self.values_offsets.capacity() * 4 + self.values.capacity() * 8
            + self.broker_valid.capacity() + self.epoch_valid.capacity() + self.offset_valid.capacity() + self.leader_valid.capacity()
            + self.values_valid.capacity()
    }
}

/// SplitMix64: a small, seedable, portable generator (the same trace on every platform).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[lo, hi]`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

struct Replica {
    leo: u64,
    hw: u64,
    cache: LeaderEpochCache,
    alive: bool,
}

struct Partition {
    id: u32,
    replicas: Vec<Replica>,
    leader: usize,
    epoch: u32,
    restart_at: Option<(u64, usize)>,
}

/// Most partitions one trace may have.
pub const MAX_PARTITIONS: u32 = 100_000;
/// Most replica states (partitions * replicas) the generator keeps, checked before allocating.
pub const MAX_REPLICA_STATES: u64 = 1_000_000;

/// Generates a trace; see the module docs. Refuses fewer than 1 or more than 64 replicas,
/// zero or more than [`MAX_PARTITIONS`] partitions, more than [`MAX_REPLICA_STATES`] replica
/// states, zero `max_records`, and sizes whose record values would not fit the 32-bit list
/// offsets of the `values` column.
pub fn generate(opts: &GenerateOptions) -> Result<TraceBuffers, ArgumentError> {
    let invalid = |argument: &'static str, value: i128, reason: &str| ArgumentError::Invalid { argument, value, reason: reason.into() };
    if !(1..=64).contains(&opts.replicas) {
        return Err(invalid("replicas", opts.replicas as i128, "between 1 and 64 replicas"));
    }
    if !(1..=MAX_PARTITIONS).contains(&opts.partitions) {
        return Err(invalid("partitions", opts.partitions as i128, "between 1 and 100000 partitions"));
    }
    if opts.partitions as u64 * opts.replicas as u64 > MAX_REPLICA_STATES {
        return Err(invalid("partitions", opts.partitions as i128, "partitions * replicas must stay at or below 1000000 (the generator keeps a state per replica)"));
    }
    if opts.max_records == 0 {
        return Err(invalid("max_records", 0, "batches need at least one record"));
    }
    if opts.batches.saturating_mul(opts.max_records as u64) > i32::MAX as u64 {
        return Err(invalid("batches", opts.batches as i128, "batches * max_records must stay below 2^31 record values"));
    }
    let mut g = Generator { opts: opts.clone(), rng: Rng(opts.seed), out: TraceBuffers::default(), time_ms: 0, next_value: 0, values: Vec::new() };
    g.run();
    Ok(g.out)
}

struct Generator {
    opts: GenerateOptions,
    rng: Rng,
    out: TraceBuffers,
    time_ms: i64,
    next_value: u64,
    values: Vec<u64>,
}

impl Generator {
    fn row(&mut self, kind: EventKind, partition: u32, f: RowFields<'_>) {
        self.out.push(kind, RowFields { time_ms: self.time_ms, partition, ..f });
    }

    fn run(&mut self) {
        let n = self.opts.replicas as usize;
        let mut parts: Vec<Partition> = (0..self.opts.partitions)
            .map(|id| Partition {
                id,
                replicas: (0..n).map(|_| Replica { leo: 0, hw: 0, cache: LeaderEpochCache::new(), alive: true }).collect(),
                leader: 0,
                epoch: 0,
                restart_at: None,
            })
            .collect();
        for p in parts.iter_mut() {
            self.row(EventKind::LeaderChange, p.id, RowFields { epoch: Some(0), leader: Some(1), ..Default::default() });
            for r in 0..n {
                let kind = if r == 0 { EventKind::BecomeLeader } else { EventKind::BecomeFollower };
                self.row(kind, p.id, RowFields { broker: Some(r as u32 + 1), epoch: Some(0), leader: Some(1), ..Default::default() });
            }
        }
        let per_change = if self.opts.leader_changes == 0 { u64::MAX } else { (self.opts.batches / (self.opts.leader_changes + 1)).max(1) };
        let mut next_change = per_change;
        let (mut done, mut changes, mut round) = (0u64, 0u64, 0u64);
        while done < self.opts.batches {
            let pi = (round % parts.len() as u64) as usize;
            let p = &mut parts[pi];
            round += 1;
            self.time_ms += 1;
            if let Some((at, r)) = p.restart_at {
                if round >= at {
                    self.restart(p, r);
                }
            }
            if let Some(every) = self.opts.crash_every {
                if round % every == 0 && p.restart_at.is_none() && n > 2 {
                    self.crash_follower(p, round);
                }
            }
            if done >= next_change && changes < self.opts.leader_changes && self.leader_change(p) {
                changes += 1;
                next_change = next_change.saturating_add(per_change);
            }
            let k = self.rng.range(1, 4).min(self.opts.batches - done);
            for _ in 0..k {
                self.leader_append(p);
            }
            done += k;
            self.replicate(p, true);
        }
        // Let every live follower catch up and learn the final HW.
        for p in parts.iter_mut() {
            self.replicate(p, false);
            self.replicate(p, false);
        }
    }

    fn leader_append(&mut self, p: &mut Partition) {
        let count = self.rng.range(1, self.opts.max_records as u64) as usize;
        self.values.clear();
        for _ in 0..count {
            self.values.push(self.next_value);
            self.next_value += 1;
        }
        let l = p.leader;
        let base = p.replicas[l].leo;
        let values = std::mem::take(&mut self.values);
        self.row(EventKind::AppendLeader, p.id, RowFields { broker: Some(l as u32 + 1), epoch: Some(p.epoch), offset: Some(base), values: Some(&values), ..Default::default() });
        self.values = values;
        let rep = &mut p.replicas[l];
        rep.cache.assign(LeaderEpoch(p.epoch), Offset(base));
        rep.leo += count as u64;
    }

    /// One fetch round: followers copy the leader's log (each with probability 7/8 when
    /// `lossy`), learn its HW; then the leader's HW advances.
    fn replicate(&mut self, p: &mut Partition, lossy: bool) {
        let l = p.leader;
        let (leader_leo, leader_hw) = (p.replicas[l].leo, p.replicas[l].hw);
        for f in 0..p.replicas.len() {
            if f == l || !p.replicas[f].alive || (lossy && self.rng.range(0, 7) == 0) {
                continue;
            }
            let from = p.replicas[f].leo;
            if from < leader_leo {
                self.row(EventKind::Fetch, p.id, RowFields { broker: Some(f as u32 + 1), epoch: Some(p.epoch), offset: Some(leader_leo), leader: Some(l as u32 + 1), ..Default::default() });
                let entries: Vec<_> = p.replicas[l].cache.entries().to_vec();
                let first_epoch = p.replicas[l].cache.epoch_for_offset(Offset(from));
                let rep = &mut p.replicas[f];
                if let Some(e) = first_epoch {
                    rep.cache.assign(e, Offset(from));
                }
                for e in entries.iter().filter(|e| e.start_offset.0 > from) {
                    rep.cache.assign(e.epoch, e.start_offset);
                }
                rep.leo = leader_leo;
            }
            let hw = leader_hw.min(p.replicas[f].leo);
            if hw != p.replicas[f].hw {
                p.replicas[f].hw = hw;
                self.row(EventKind::HighWatermark, p.id, RowFields { broker: Some(f as u32 + 1), offset: Some(hw), ..Default::default() });
            }
        }
        let min_follower = (0..p.replicas.len()).filter(|&f| f != l && p.replicas[f].alive).map(|f| p.replicas[f].leo).min();
        let hw = min_follower.unwrap_or(leader_leo).min(leader_leo);
        if hw > p.replicas[l].hw {
            p.replicas[l].hw = hw;
            self.row(EventKind::HighWatermark, p.id, RowFields { broker: Some(l as u32 + 1), offset: Some(hw), ..Default::default() });
        }
    }

    /// Elects a live follower holding the committed prefix; `false` if none does yet.
    fn leader_change(&mut self, p: &mut Partition) -> bool {
        let old = p.leader;
        let committed = p.replicas[old].hw;
        let candidates: Vec<usize> = (0..p.replicas.len()).filter(|&r| r != old && p.replicas[r].alive && p.replicas[r].leo >= committed).collect();
        if candidates.is_empty() {
            return false;
        }
        let new = candidates[self.rng.range(0, candidates.len() as u64 - 1) as usize];
        p.epoch += 1;
        p.leader = new;
        let (e, nb) = (p.epoch, new as u32 + 1);
        self.row(EventKind::LeaderChange, p.id, RowFields { epoch: Some(e), leader: Some(nb), ..Default::default() });
        self.row(EventKind::BecomeLeader, p.id, RowFields { broker: Some(nb), epoch: Some(e), leader: Some(nb), ..Default::default() });
        let leo = p.replicas[new].leo;
        p.replicas[new].cache.assign(LeaderEpoch(e), Offset(leo));
        self.row(EventKind::AssignEpoch, p.id, RowFields { broker: Some(nb), epoch: Some(e), offset: Some(leo), ..Default::default() });
        for f in 0..p.replicas.len() {
            if f != new && p.replicas[f].alive {
                self.row(EventKind::BecomeFollower, p.id, RowFields { broker: Some(f as u32 + 1), epoch: Some(e), leader: Some(nb), ..Default::default() });
                self.reconcile(p, f);
            }
        }
        true
    }

    /// Truncate-on-fetch against the current leader until the leader would serve records.
    fn reconcile(&mut self, p: &mut Partition, f: usize) {
        let l = p.leader;
        for _ in 0..64 {
            let (leo, hw) = (p.replicas[f].leo, p.replicas[f].hw);
            let Some(last) = p.replicas[f].cache.latest_epoch() else { return };
            let leader = &p.replicas[l];
            let (epoch, end_offset) = match leader_fetch_check(&leader.cache, Offset(leader.leo), Offset(0), Offset(leo), last) {
                FetchCheck::Diverging { epoch, end_offset } => (epoch, end_offset),
                FetchCheck::Read | FetchCheck::OffsetOutOfRange => return,
            };
            let target = match diverging_epoch_truncation((epoch, end_offset), &p.replicas[f].cache, Offset(leo), Offset(hw)) {
                Ok(TruncationOutcome::Truncate(t) | TruncationOutcome::TruncateAndRetry(t)) => t.0,
                _ => return,
            };
            self.row(EventKind::Truncate, p.id, RowFields { broker: Some(f as u32 + 1), offset: Some(target), ..Default::default() });
            let rep = &mut p.replicas[f];
            rep.cache.truncate_from_end(Offset(target));
            if target < rep.leo {
                rep.leo = target;
                rep.hw = rep.hw.min(target);
            } else {
                return;
            }
        }
    }

    fn crash_follower(&mut self, p: &mut Partition, round: u64) {
        let followers: Vec<usize> = (0..p.replicas.len()).filter(|&r| r != p.leader && p.replicas[r].alive).collect();
        if followers.len() < 2 {
            return;
        }
        let f = followers[self.rng.range(0, followers.len() as u64 - 1) as usize];
        p.replicas[f].alive = false;
        self.row(EventKind::Crash, p.id, RowFields { broker: Some(f as u32 + 1), ..Default::default() });
        p.restart_at = Some((round + self.rng.range(2, 20), f));
    }

    fn restart(&mut self, p: &mut Partition, f: usize) {
        p.restart_at = None;
        p.replicas[f].alive = true;
        let (e, l) = (p.epoch, p.leader as u32 + 1);
        self.row(EventKind::Restart, p.id, RowFields { broker: Some(f as u32 + 1), ..Default::default() });
        self.row(EventKind::BecomeFollower, p.id, RowFields { broker: Some(f as u32 + 1), epoch: Some(e), leader: Some(l), ..Default::default() });
        self.reconcile(p, f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::{Column, ListColumn, Replayer, ReplayOptions, TraceColumns, Validity};

    fn columns(b: &TraceBuffers) -> TraceColumns<'_> {
        fn v(bits: &[u8]) -> Option<Validity<'_>> {
            Some(Validity { bits, offset: 0 })
        }
        let mut c = TraceColumns::new(Column::new(&b.kind));
        c.event = Some(Column::new(&b.event));
        c.time_ms = Some(Column::new(&b.time_ms));
        c.partition = Some(Column::new(&b.partition));
        c.broker = Some(Column { values: &b.broker, validity: v(&b.broker_valid) });
        c.epoch = Some(Column { values: &b.epoch, validity: v(&b.epoch_valid) });
        c.offset = Some(Column { values: &b.offset, validity: v(&b.offset_valid) });
        c.leader = Some(Column { values: &b.leader, validity: v(&b.leader_valid) });
        c.flags = Some(Column::new(&b.flags));
        c.values = Some(ListColumn { offsets: &b.values_offsets, values: &b.values, validity: v(&b.values_valid) });
        c
    }

    #[test]
    fn generated_traces_replay_without_violations() {
        for seed in 0..20 {
            let opts = GenerateOptions { batches: 2000, leader_changes: 40, replicas: 3 + (seed % 3) as u32, partitions: 1 + (seed % 2) as u32, seed, max_records: 3, crash_every: Some(7) };
            let b = generate(&opts).unwrap();
            let mut r = Replayer::new(ReplayOptions::default());
            r.replay(&columns(&b), 0, 0..b.len).unwrap();
            assert!(r.violations().is_empty(), "seed {seed}: {:?}", r.violations());
            let total: usize = r.replicas().iter().filter(|v| v.role == "leader").map(|v| v.log.batch_count()).sum();
            assert!(total > 0);
        }
    }

    #[test]
    fn absurd_sizes_are_refused_before_any_allocation() {
        let base = GenerateOptions { batches: 10, leader_changes: 1, replicas: 3, partitions: 1, seed: 1, max_records: 3, crash_every: None };
        for partitions in [0, MAX_PARTITIONS + 1, u32::MAX] {
            assert!(generate(&GenerateOptions { partitions, ..base.clone() }).is_err(), "{partitions}");
        }
        // within the partition limit but too many replica states
        assert!(generate(&GenerateOptions { partitions: 50_000, replicas: 64, ..base.clone() }).is_err());
        assert!(generate(&GenerateOptions { partitions: 2, ..base }).is_ok());
    }
}
