//! Protocol generations: which of Kafka's replication rules are in force.
//!
//! Mirrors `epochlab.generations.Generation` (same numbers, same flags); `docs/sim-api.md`
//! ("Generations") lists the labels and the releases each stands for.

/// One period of Kafka's replication protocol, oldest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Generation {
    /// Kafka 0.10.2 and before: a new follower truncates to its local high watermark.
    TruncateToHw = 0,
    /// Kafka 0.11 - 1.1: KIP-101 leader epochs, OffsetsForLeaderEpoch v0.
    Kip101 = 1,
    /// Kafka 2.0: KIP-279, the epoch in the answer and the iterative search.
    Kip279 = 2,
    /// Kafka 2.1 - 2.7: KIP-320 current-leader-epoch fencing (with KAFKA-7128/7415).
    Kip320 = 3,
    /// Kafka 2.8 - 3.6: truncate on fetch with DivergingEpoch.
    DivergingEpoch = 4,
    /// Kafka 3.7+ (KRaft): HW advances only with |ISR| >= min.insync.replicas.
    StrictMinIsr = 5,
}

impl Generation {
    /// The generation with this number, if any.
    pub fn from_index(index: u32) -> Option<Generation> {
        use Generation::*;
        [TruncateToHw, Kip101, Kip279, Kip320, DivergingEpoch, StrictMinIsr].get(index as usize).copied()
    }
    /// 0.11-2.0 epoch cache assign rule (no eviction).
    pub fn kip101_epoch_cache(self) -> bool {
        matches!(self, Generation::Kip101 | Generation::Kip279)
    }
    /// G0: message format v0/v1, a follower checks a compressed wrapper by its own (last)
    /// offset only (Kafka 0.10 `Log.append`; KAFKA-3919), see
    /// [`crate::ReplicaLog::with_wrapper_batches`].
    pub fn wrapper_batches(self) -> bool {
        matches!(self, Generation::TruncateToHw)
    }
    /// `makeLeader` assigns `(epoch, LEO)` in the cache (KAFKA-7415, 2.1).
    pub fn leader_assigns_epoch(self) -> bool {
        self >= Generation::Kip320
    }
    /// Requests carry and check the current leader epoch (KIP-320).
    pub fn fences_current_epoch(self) -> bool {
        self >= Generation::Kip320
    }
    /// A follower joins the ISR only with LEO >= the leader epoch start offset (KAFKA-7128).
    pub fn isr_requires_leso(self) -> bool {
        self >= Generation::Kip320
    }
    /// Fetches carry the last fetched epoch; the leader answers DivergingEpoch.
    pub fn truncate_on_fetch(self) -> bool {
        self >= Generation::DivergingEpoch
    }
    /// The HW does not advance while |ISR| < min.insync.replicas (KAFKA-15583).
    pub fn strict_min_isr(self) -> bool {
        self == Generation::StrictMinIsr
    }

    /// G5: KRaft controller semantics (broker epochs, KIP-903; ISR shrink without a leader
    /// epoch bump, KAFKA-15021), as `epochlab.generations.Generation.kraft`.
    pub fn kraft(self) -> bool {
        self == Generation::StrictMinIsr
    }
}
