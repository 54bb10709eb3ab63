//! # epochlab core
//!
//! A faithful, fast model of Apache Kafka's partition replication data plane, and the engine of
//! its simulator. The crate knows nothing of Python; `src/bindings/` (feature `python`) alone
//! wraps it for `epochlab._core`, converting arguments and forwarding.
//!
//! ## Vocabulary
//!
//! - **Offset**: a 0-based position in a partition log. The *log end offset* (LEO) and the
//!   *high watermark* (HW) are exclusive: HW = 5 means offsets 0..=4 are committed.
//! - **Record batch**: the unit of append and replication; `[base_offset, last_offset]`
//!   inclusive, stamped with the *partition leader epoch* of the leader that appended it.
//! - **Leader epoch**: a number bumped by the controller on every leader change.
//! - **Leader-epoch cache**: `epoch -> first offset written in it`; epochs strictly increase,
//!   start offsets never decrease.
//! - **Generation**: the follower-truncation rules of one period of Kafka (G0 high watermark,
//!   G1 KIP-101, G2 KIP-279, G3 KIP-320, G4 truncate on fetch): see [`divergence`].
//! - **Producer state**: per producer id its epoch and last 5 batches ([`producer_state`]).
//! - **On-disk formats**: read-only parsers of Kafka's segment, index, checkpoint and snapshot
//!   files, a byte-faithful dump with Kafka's sentinels ([`formats`]).
//! - **Simulator engine**: the event kernel (virtual time, a queue ordered by
//!   `(time, sequence)`, cancellation), the network model (delays, loss with retransmission
//!   costs, partitions, cut links, restarts) and CPython's Mersenne Twister it draws from, each
//!   generic over what it carries, and a broker's fetcher and fetch serving as a state machine
//!   that returns effects ([`sim`]); `epochlab._core.Kernel`, `Network` and `FetchPlane` wrap
//!   them.
//! - **State invariants**: the checker's predicates over a plain view of the cluster and the
//!   whole-log scans ([`invariants`]).
//! - **Protocol-state coverage**: the abstraction of a cluster's state a guided search counts
//!   as new ground ([`coverage`]).
//! - **Campaign statistics**: the bootstrap of pooled latency percentiles over runs
//!   ([`stats`]).
//!
//! ## Layers
//!
//! A module uses only modules of lower layers (`tests/test_tidy.py` holds it to this):
//! [`error`], [`generation`] -> [`types`], [`formats`], [`stats`] -> [`txn`] -> [`batch`] -> [`epoch`],
//! [`producer_state`] -> [`log`] -> [`divergence`], [`invariants`], [`coverage`] -> [`replica`], [`replay`]
//! -> [`sim`] -> `bindings`.
//!
//! ## Invariants the types keep
//!
//! - A log's batches are sorted by base offset and never overlap; the cache is monotone.
//! - Absence is `Option`, never `-1`; every integer has a domain type ([`types`]).
//! - Caller mistakes are `Result`s ([`error`]); a panic means a bug in this crate.

pub mod batch;
pub mod coverage;
pub mod divergence;
pub mod epoch;
pub mod error;
pub mod formats;
pub mod generation;
pub mod invariants;
pub mod log;
pub mod producer_state;
pub mod replay;
pub mod replica;
pub mod sim;
pub mod stats;
pub mod txn;
pub mod types;

#[cfg(test)]
mod no_panic;

#[cfg(feature = "python")]
mod bindings;

pub use divergence::{FetchCheck, LeaderAnswerError, TruncationOutcome};
pub use epoch::{EpochEntry, LeaderEpochCache};
pub use error::{ArgumentError, CheckpointError, Error, FencingError, LogError, ProducerStateError};
pub use log::{LogAppendInfo, ProducerFields, RecordBatch, ReplicaLog};
pub use producer_state::{AppendCheck, ProducerSnapshot, ProducerStateManager, SnapshotEntry};
pub use generation::Generation;
pub use replica::Replica;
pub use types::{BrokerId, LeaderEpoch, Offset, ProducerEpoch, ProducerId, Sequence};
