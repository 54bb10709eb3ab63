//! The replayer's state: one log per (partition, broker), roles, the controller's view and
//! the ground truth the checks need.

use std::collections::HashMap;

use super::{Collect, EventKind, Invariant, Progress, RecordRef, ReplayOptions, TraceColumns, Violation};
use crate::error::TraceError;
use crate::log::ReplicaLog;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    None,
    Leader(u32),
    Follower(u32),
}

pub(crate) struct Replica {
    pub broker: u32,
    pub log: ReplicaLog,
    pub alive: bool,
    pub role: Role,
    /// Highest HW this replica had while leading its current epoch.
    pub leader_hw: u64,
    /// The log equals the truth on `[start, truth_agree)`.
    pub truth_agree: u64,
    /// Values of idempotent batches -> offset (Inv-NoDuplicates), when that check is on.
    pub values: HashMap<u64, u64>,
}

pub(crate) struct Partition {
    pub id: u32,
    pub replicas: Vec<Replica>,
    /// `agree[i][j]`: replicas i and j are identical on `[start, agree)`.
    pub agree: Vec<Vec<u64>>,
    /// Last reported Inv-LogMatching mismatch per pair, so `All` reports each once.
    pub reported: HashMap<(usize, usize), u64>,
    /// Batches below the highest HW reached by a legitimate leader, copied from it.
    pub truth: ReplicaLog,
    pub true_hw: u64,
    pub ctrl_leader: Option<u32>,
    pub ctrl_epoch: Option<u32>,
    /// (leader, epoch) pairs the controller elected.
    pub elected: std::collections::HashSet<(u32, u32)>,
    pub unclean: Option<String>,
    pub lossy_crashes: Vec<u32>,
}

/// Most distinct brokers one partition of a trace may name (Kafka's replication factor is
/// far smaller in practice; the bound keeps the per-partition agreement matrix small).
pub const MAX_REPLICAS_PER_PARTITION: usize = 1024;

/// What a replica looks like at the end (or at a pause) of a replay.
#[derive(Clone, Debug)]
pub struct ReplicaView<'a> {
    pub partition: u32,
    pub broker: u32,
    pub alive: bool,
    /// `"leader"`, `"follower"` or `"none"`.
    pub role: &'static str,
    pub epoch: Option<u32>,
    pub log: &'a ReplicaLog,
}

/// Applies trace rows and checks invariants; see the module docs. Feed it chunks in order
/// with [`Replayer::replay`]; the state carries over.
pub struct Replayer {
    pub(crate) opts: ReplayOptions,
    pub(crate) partitions: Vec<Partition>,
    index: HashMap<u32, usize>,
    pub(crate) violations: Vec<Violation>,
    pub(crate) violation_count: u64,
    seen: u32,
    pub(crate) rows: u64,
    pub(crate) stop: bool,
    /// Reused buffer for copying a batch between two logs of one partition.
    pub(crate) scratch: Vec<u64>,
}

/// The row being applied, decoded once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Row<'a> {
    pub row: u64,
    pub event: u64,
    pub time_ms: Option<i64>,
    pub kind: EventKind,
    pub partition: u32,
    pub broker: Option<u32>,
    pub epoch: Option<u32>,
    pub offset: Option<u64>,
    pub leader: Option<u32>,
    pub record_count: Option<u32>,
    pub flags: u8,
    pub values: Option<&'a [u64]>,
    pub producer: (Option<u64>, Option<u16>, Option<u32>),
}

impl Row<'_> {
    pub fn malformed(&self, reason: impl Into<String>) -> TraceError {
        TraceError::Malformed { row: self.row, reason: format!("{} row: {}", self.kind.name(), reason.into()) }
    }
    pub fn need_broker(&self) -> Result<u32, TraceError> {
        self.broker.ok_or_else(|| self.malformed("broker is null"))
    }
    pub fn need_epoch(&self) -> Result<u32, TraceError> {
        self.epoch.ok_or_else(|| self.malformed("epoch is null"))
    }
    pub fn need_offset(&self) -> Result<u64, TraceError> {
        self.offset.ok_or_else(|| self.malformed("offset is null"))
    }
}

impl Replayer {
    pub fn new(opts: ReplayOptions) -> Self {
        Self {
            opts,
            partitions: Vec::new(),
            index: HashMap::new(),
            violations: Vec::new(),
            violation_count: 0,
            seen: 0,
            rows: 0,
            stop: false,
            scratch: Vec::new(),
        }
    }

    pub fn options(&self) -> &ReplayOptions {
        &self.opts
    }
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }
    /// Violations found, including those not kept.
    pub fn violation_count(&self) -> u64 {
        self.violation_count
    }
    /// Rows applied so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Applies rows `range` of `cols`, whose row 0 is trace row `first_row`. Stops after a
    /// row whose kind is in `pause_kinds` (bit `1 << code`) or, with [`Collect::Stop`], after
    /// the first violation. A malformed row is an error; every row before it was applied.
    pub fn replay(&mut self, cols: &TraceColumns<'_>, first_row: u64, range: std::ops::Range<usize>) -> Result<Progress, TraceError> {
        self.replay_pausing(cols, first_row, range, 0)
    }

    /// [`Self::replay`] with a pause set.
    pub fn replay_pausing(&mut self, cols: &TraceColumns<'_>, first_row: u64, range: std::ops::Range<usize>, pause_kinds: u32) -> Result<Progress, TraceError> {
        cols.validate(first_row)?;
        if range.end > cols.len {
            return Err(TraceError::Malformed { row: first_row + cols.len as u64, reason: format!("range end {} beyond {} rows", range.end, cols.len) });
        }
        for i in range {
            let row = decode(cols, first_row, i)?;
            self.apply(&row)?;
            self.rows += 1;
            if self.stop {
                return Ok(Progress::Stopped(i));
            }
            if pause_kinds & (1 << row.kind as u32) != 0 {
                return Ok(Progress::Paused(i));
            }
        }
        Ok(Progress::Done)
    }

    pub(crate) fn partition_index(&mut self, id: u32) -> usize {
        if let Some(&p) = self.index.get(&id) {
            return p;
        }
        let p = self.partitions.len();
        self.partitions.push(Partition {
            id,
            replicas: Vec::new(),
            agree: Vec::new(),
            reported: HashMap::new(),
            truth: ReplicaLog::new(crate::types::Offset(0), false),
            true_hw: 0,
            ctrl_leader: None,
            ctrl_epoch: None,
            elected: Default::default(),
            unclean: None,
            lossy_crashes: Vec::new(),
        });
        self.index.insert(id, p);
        p
    }

    /// Index of `broker`'s replica in partition `p`, created empty on first mention; a trace
    /// naming more than [`MAX_REPLICAS_PER_PARTITION`] brokers in one partition is refused
    /// (the replay keeps a replicas x replicas agreement matrix per partition).
    pub(crate) fn replica_index(&mut self, p: usize, broker: u32, row: &Row<'_>) -> Result<usize, TraceError> {
        let part = &mut self.partitions[p];
        if let Some(r) = part.replicas.iter().position(|r| r.broker == broker) {
            return Ok(r);
        }
        if part.replicas.len() >= MAX_REPLICAS_PER_PARTITION {
            return Err(row.malformed(format!(
                "broker {broker} would be replica number {} of partition {}: at most {MAX_REPLICAS_PER_PARTITION} brokers per partition",
                part.replicas.len() + 1, part.id)));
        }
        part.replicas.push(Replica {
            broker,
            log: ReplicaLog::new(crate::types::Offset(0), self.opts.kip101_epoch_cache).with_wrapper_batches(self.opts.wrapper_batches),
            alive: true,
            role: Role::None,
            leader_hw: 0,
            truth_agree: 0,
            values: HashMap::new(),
        });
        for row in part.agree.iter_mut() {
            row.push(0);
        }
        part.agree.push(vec![0; part.replicas.len()]);
        Ok(part.replicas.len() - 1)
    }

    /// Records a violation of `inv` at `row` (if that invariant is checked and the collection
    /// mode keeps it).
    pub(crate) fn report(&mut self, p: usize, row: &Row<'_>, inv: Invariant, message: String, records: Vec<RecordRef>) {
        if !self.opts.checks(inv) {
            return;
        }
        self.violation_count += 1;
        let keep = match self.opts.collect {
            Collect::FirstPerInvariant => self.seen & (1 << inv as u32) == 0,
            Collect::All => self.violations.len() < self.opts.max_violations,
            Collect::Stop => self.violations.is_empty(),
        };
        self.seen |= 1 << inv as u32;
        if self.opts.collect == Collect::Stop {
            self.stop = true;
        }
        if !keep {
            return;
        }
        let allowed = if inv.loss_like() { self.allowance(p) } else { None };
        self.violations.push(Violation {
            invariant: inv,
            allowed,
            row: row.row,
            event: row.event,
            time_ms: row.time_ms,
            kind: row.kind,
            partition: self.partitions[p].id,
            broker: row.broker,
            offset: row.offset,
            epoch: row.epoch,
            message,
            records,
        });
    }

    fn allowance(&self, p: usize) -> Option<String> {
        let part = &self.partitions[p];
        if let Some(u) = &part.unclean {
            return Some(u.clone());
        }
        if let (false, Some(b)) = (self.opts.eligible_leader_replicas, part.lossy_crashes.first()) {
            return Some(format!(
                "broker {b} lost its unflushed tail and eligible leader replicas are off: a last replica standing restarted after an unclean shutdown may be elected (KIP-966)"
            ));
        }
        let allowed_crashes = self.opts.min_insync_replicas.saturating_sub(1) as usize;
        if part.lossy_crashes.len() > allowed_crashes {
            return Some(format!(
                "{} crashes lost their unflushed tail (brokers {:?}), more than min.insync.replicas - 1 = {allowed_crashes}",
                part.lossy_crashes.len(),
                part.lossy_crashes
            ));
        }
        None
    }

    /// Every replica, partition by partition in order of first appearance, brokers likewise.
    pub fn replicas(&self) -> Vec<ReplicaView<'_>> {
        let mut out = Vec::new();
        for part in &self.partitions {
            for r in &part.replicas {
                let (role, epoch) = match r.role {
                    Role::None => ("none", None),
                    Role::Leader(e) => ("leader", Some(e)),
                    Role::Follower(e) => ("follower", Some(e)),
                };
                out.push(ReplicaView { partition: part.id, broker: r.broker, alive: r.alive, role, epoch, log: &r.log });
            }
        }
        out
    }

    /// The log of `broker` in `partition`, if the trace mentioned it.
    pub fn log(&self, partition: u32, broker: u32) -> Option<&ReplicaLog> {
        let p = *self.index.get(&partition)?;
        self.partitions[p].replicas.iter().find(|r| r.broker == broker).map(|r| &r.log)
    }

    /// Highest HW a legitimate leader of `partition` reached.
    pub fn true_high_watermark(&self, partition: u32) -> Option<u64> {
        self.index.get(&partition).map(|&p| self.partitions[p].true_hw)
    }

    /// Heap bytes of every replica log (columns and records), for memory reports.
    pub fn log_heap_bytes(&self) -> usize {
        self.partitions.iter().map(|p| p.truth.heap_bytes() + p.replicas.iter().map(|r| r.log.heap_bytes()).sum::<usize>()).sum()
    }
}

fn decode<'a>(c: &TraceColumns<'a>, first_row: u64, i: usize) -> Result<Row<'a>, TraceError> {
    let row = first_row + i as u64;
    let code = c.kind.get(i).ok_or_else(|| TraceError::Malformed { row, reason: "kind is null".into() })?;
    let kind = EventKind::from_code(code).ok_or_else(|| TraceError::Malformed { row, reason: format!("unknown kind code {code}") })?;
    let get = |c: &Option<super::Column<'a, u32>>| c.as_ref().and_then(|c| c.get(i));
    // Kafka's own ranges: offsets are Java longs, epochs and broker ids Java ints
    let malformed = |reason: String| TraceError::Malformed { row, reason };
    if let Some(o) = c.offset.as_ref().and_then(|c| c.get(i)) {
        if o > i64::MAX as u64 {
            return Err(malformed(format!("offset {o} is outside Kafka's offset range 0..=9223372036854775807")));
        }
    }
    for (name, col) in [("epoch", &c.epoch), ("broker", &c.broker), ("leader", &c.leader)] {
        if let Some(v) = get(col) {
            if v > i32::MAX as u32 {
                return Err(malformed(format!("{name} {v} is outside Kafka's range 0..=2147483647")));
            }
        }
    }
    Ok(Row {
        row,
        event: c.event.as_ref().and_then(|c| c.get(i)).unwrap_or(row),
        time_ms: c.time_ms.as_ref().and_then(|c| c.get(i)),
        kind,
        partition: get(&c.partition).unwrap_or(0),
        broker: get(&c.broker),
        epoch: get(&c.epoch),
        offset: c.offset.as_ref().and_then(|c| c.get(i)),
        leader: get(&c.leader),
        record_count: get(&c.record_count),
        flags: c.flags.as_ref().and_then(|c| c.get(i)).unwrap_or(0),
        values: c.values.as_ref().and_then(|c| c.get(i)),
        producer: (
            c.producer_id.as_ref().and_then(|c| c.get(i)),
            c.producer_epoch.as_ref().and_then(|c| c.get(i)),
            c.base_sequence.as_ref().and_then(|c| c.get(i)),
        ),
    })
}
