//! Bulk trace replay with incremental invariant checks (`docs/trace-format.md`).
//!
//! A *trace* is an ordered table of log-level events of one or more partitions, one row per
//! event: appends as leader and as follower, follower fetches, truncations, high watermark
//! changes, epoch-cache assignments, flushes, crashes and restarts, controller decisions
//! (`leader_change`) and the replicas' role changes. [`Replayer`] applies the rows to one
//! [`crate::ReplicaLog`] per (partition, broker) and checks, as it goes, the log invariants
//! of `docs/invariants.md` ([`Invariant`]); each check costs what the row changed, not
//! the size of the logs, so a replay is linear in the trace.
//!
//! The module takes borrowed columns ([`TraceColumns`]), not Arrow types: the bindings map
//! Arrow arrays onto it without copying.
//!
//! ```
//! use epochlab::replay::{Column, Replayer, ReplayOptions, TraceColumns, EventKind};
//! let kind = [EventKind::AppendLeader as u8, EventKind::HighWatermark as u8];
//! let broker = [1u32, 1];
//! let epoch = [0u32, 0];
//! let offset = [0u64, 5]; // HW 5 past LEO 1: Inv-HW-bounds
//! let values = epochlab::replay::ListColumn { offsets: &[0, 1, 1], values: &[42], validity: None };
//! let mut cols = TraceColumns::new(Column::new(&kind));
//! cols.broker = Some(Column::new(&broker));
//! cols.epoch = Some(Column::new(&epoch));
//! cols.offset = Some(Column::new(&offset));
//! cols.values = Some(values);
//! let mut r = Replayer::new(ReplayOptions::default());
//! r.replay(&cols, 0, 0..2).unwrap();
//! assert_eq!(r.violations()[0].row, 1);
//! ```

mod apply;
mod columns;
pub mod generate;
mod state;

pub use columns::{Column, ListColumn, TraceColumns, Validity};
pub use state::{Replayer, ReplicaView};

/// Format name and version written in the schema metadata.
pub const TRACE_FORMAT: &str = "epochlab-trace";
/// See [`TRACE_FORMAT`]; a reader refuses other major versions.
pub const TRACE_VERSION: u32 = 1;

/// The `kind` column: what a row does. Codes are part of the format (never renumbered).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EventKind {
    AppendLeader = 0,
    AppendFollower = 1,
    Truncate = 2,
    TruncateFully = 3,
    HighWatermark = 4,
    AssignEpoch = 5,
    Flush = 6,
    Crash = 7,
    Restart = 8,
    LeaderChange = 9,
    BecomeLeader = 10,
    BecomeFollower = 11,
    Fetch = 12,
}

impl EventKind {
    pub const ALL: [EventKind; 13] = [
        EventKind::AppendLeader, EventKind::AppendFollower, EventKind::Truncate, EventKind::TruncateFully,
        EventKind::HighWatermark, EventKind::AssignEpoch, EventKind::Flush, EventKind::Crash, EventKind::Restart,
        EventKind::LeaderChange, EventKind::BecomeLeader, EventKind::BecomeFollower, EventKind::Fetch,
    ];

    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.get(code as usize).copied()
    }

    /// The name used in files and reports.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::AppendLeader => "append_leader",
            EventKind::AppendFollower => "append_follower",
            EventKind::Truncate => "truncate",
            EventKind::TruncateFully => "truncate_fully",
            EventKind::HighWatermark => "high_watermark",
            EventKind::AssignEpoch => "assign_epoch",
            EventKind::Flush => "flush",
            EventKind::Crash => "crash",
            EventKind::Restart => "restart",
            EventKind::LeaderChange => "leader_change",
            EventKind::BecomeLeader => "become_leader",
            EventKind::BecomeFollower => "become_follower",
            EventKind::Fetch => "fetch",
        }
    }
}

/// `flags` bit of a `leader_change`: the election was unclean.
pub const FLAG_UNCLEAN: u8 = 1;
/// `flags` bit of a `crash`: the page cache was lost (`drop_unflushed`).
pub const FLAG_LOSE_UNFLUSHED: u8 = 2;
pub use crate::log::{FLAG_CONTROL, FLAG_TRANSACTIONAL};

/// The invariants the replay checks (`docs/invariants.md` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Invariant {
    /// 8: `log_start <= HW <= LEO` for every HW a row sets; a leader's HW never decreases
    /// while it leads the same epoch.
    HwBounds,
    /// 6: batch epochs never decrease along a log.
    EpochMonotone,
    /// 7: a truncation target inside a batch (leaves a hole).
    OffsetMonotone,
    /// 5: two replicas hold identical batches below `min(HW_a, HW_b)`.
    LogMatching,
    /// 1: the acting leader (elected by the controller, leading its epoch) holds every record
    /// below the highest HW a legitimate leader reached.
    Durability,
    /// 18: a value of an idempotent batch appears at most once in a log.
    NoDuplicates,
    /// 9 (state part): no two live replicas lead the same epoch.
    EpochFencing,
    /// A row the model refuses (an append not at the log end, a fetch of data the leader
    /// does not have, an append to a crashed broker): the trace does not describe a run.
    TraceConsistency,
}

impl Invariant {
    pub const ALL: [Invariant; 8] = [
        Invariant::HwBounds, Invariant::EpochMonotone, Invariant::OffsetMonotone, Invariant::LogMatching,
        Invariant::Durability, Invariant::NoDuplicates, Invariant::EpochFencing, Invariant::TraceConsistency,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Invariant::HwBounds => "Inv-HW-bounds",
            Invariant::EpochMonotone => "Inv-EpochMonotone",
            Invariant::OffsetMonotone => "Inv-OffsetMonotone",
            Invariant::LogMatching => "Inv-LogMatching",
            Invariant::Durability => "Inv-Durability",
            Invariant::NoDuplicates => "Inv-NoDuplicates",
            Invariant::EpochFencing => "Inv-EpochFencing",
            Invariant::TraceConsistency => "trace-consistency",
        }
    }

    /// Loss and divergence are allowed after an unclean election or too many lossy crashes.
    pub fn loss_like(self) -> bool {
        matches!(self, Invariant::Durability | Invariant::LogMatching | Invariant::EpochMonotone)
    }

    fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

/// A record a violation involves: `broker` `None` is the committed truth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordRef {
    pub broker: Option<u32>,
    pub offset: u64,
    pub value: Option<u64>,
    pub epoch: Option<u32>,
}

/// One violation: where in the trace (0-based `row`, the row's `event` column or the row
/// index), what, and the records involved. `allowed` is the configuration's excuse, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub invariant: Invariant,
    pub allowed: Option<String>,
    pub row: u64,
    pub event: u64,
    pub time_ms: Option<i64>,
    pub kind: EventKind,
    pub partition: u32,
    pub broker: Option<u32>,
    pub offset: Option<u64>,
    pub epoch: Option<u32>,
    pub message: String,
    pub records: Vec<RecordRef>,
}

/// How many violations to keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Collect {
    /// The first violation of each invariant (what the simulator's checker reports); the
    /// replay runs to the end.
    FirstPerInvariant,
    /// Every violation, up to [`ReplayOptions::max_violations`].
    All,
    /// Stop the replay at the first violation.
    Stop,
}

/// What to check and how to report.
#[derive(Clone, Debug)]
pub struct ReplayOptions {
    /// Bit set of [`Invariant`]s to check; `TraceConsistency` is always checked.
    pub checks: u32,
    pub collect: Collect,
    pub max_violations: usize,
    /// `min.insync.replicas`: more lossy crashes than `min_insync_replicas - 1` excuse loss.
    pub min_insync_replicas: u32,
    /// New logs use the KIP-101 epoch-cache rule (generations KIP-101 and KIP-279).
    pub kip101_epoch_cache: bool,
    /// Message format v0/v1 logs ([`crate::ReplicaLog::with_wrapper_batches`]): a follower
    /// append may start below the log end offset (trace metadata `wrapper_batches`).
    pub wrapper_batches: bool,
    /// Eligible leader replicas (KIP-966) on: without them any lossy crash excuses loss (the
    /// last ISR member may come back without its unflushed tail and be elected).
    pub eligible_leader_replicas: bool,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        Self { checks: u32::MAX, collect: Collect::FirstPerInvariant, max_violations: 10_000, min_insync_replicas: 1, kip101_epoch_cache: false, wrapper_batches: false, eligible_leader_replicas: false }
    }
}

impl ReplayOptions {
    pub fn checks(&self, inv: Invariant) -> bool {
        inv == Invariant::TraceConsistency || self.checks & inv.bit() != 0
    }
    /// The bit set selecting exactly `invariants`.
    pub fn check_set(invariants: &[Invariant]) -> u32 {
        invariants.iter().fold(0, |acc, i| acc | i.bit())
    }
}

/// Why [`Replayer::replay`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Every row of the range was applied.
    Done,
    /// The row at this index (within the chunk) was applied and its kind is in the pause set:
    /// the caller runs its hook and resumes at the next row.
    Paused(usize),
    /// A violation with [`Collect::Stop`]: the row at this index was applied.
    Stopped(usize),
}
