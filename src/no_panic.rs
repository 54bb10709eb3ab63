//! `cargo test`: no public entry point that the Python bindings call panics on any input they
//! can pass it. The bindings check every integer against its domain type (`bindings::args`),
//! so the inputs here are any values of those domains, the edges included (0, 1, `MAX - 1`,
//! `MAX`), in random operation sequences driven by a seeded generator; sequences and records
//! are as long or as short as Python can make them (empty included). Every call runs inside
//! `catch_unwind`: a caller's bad input must come back as an `Err`, never as a panic (a panic
//! crossing into Python aborts nothing only because the binding layer turns it into `PanicException`, which
//! is itself a bug report).

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::divergence::{
    check_current_leader_epoch, diverging_epoch_truncation, divergence_point, kip101_truncation, kip279_truncation,
    kip320_truncation, leader_fetch_check, truncate_to_high_watermark, LeaderAnswerError,
};
use crate::epoch::{checkpoint, LeaderEpochCache};
use crate::log::{ProducerFields, RecordBatch, ReplicaLog};
use crate::txn::ControlType;
use crate::types::{LeaderEpoch, Offset, ProducerEpoch, ProducerId, Sequence};

/// xorshift64*: deterministic, no dependency (also drives `formats::tests`' mutations).
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// A value of `0..=max`: mostly small (where logs live), sometimes an edge or anything.
    fn domain(&mut self, max: u64) -> u64 {
        match self.below(8) {
            0 => 0,
            1 => max,
            2 => max.saturating_sub(1),
            3 => self.below(max.saturating_add(1).max(1)),
            _ => self.below(64).min(max),
        }
    }
    fn offset(&mut self) -> Offset {
        Offset(self.domain(Offset::MAX))
    }
    fn epoch(&mut self) -> LeaderEpoch {
        LeaderEpoch(self.domain(LeaderEpoch::MAX as u64) as u32)
    }
    fn opt_offset(&mut self) -> Option<Offset> {
        (self.below(3) > 0).then(|| self.offset())
    }
    fn records(&mut self) -> Vec<u64> {
        let n = match self.below(10) {
            0 => 0,
            1 => 1000,
            _ => 1 + self.below(4) as usize,
        };
        (0..n).map(|_| self.next()).collect()
    }
    fn producer(&mut self) -> Option<ProducerFields> {
        (self.below(3) == 0).then(|| ProducerFields {
            producer_id: ProducerId(self.domain(ProducerId::MAX).min(3)),
            producer_epoch: ProducerEpoch(self.domain(ProducerEpoch::MAX as u64) as u16),
            base_sequence: Sequence(self.domain(Sequence::MAX as u64) as u32),
        })
    }
    fn cache(&mut self) -> LeaderEpochCache {
        let mut cache = LeaderEpochCache::new();
        for _ in 0..self.below(5) {
            let (epoch, offset) = (self.epoch(), self.offset());
            cache.assign(epoch, offset);
        }
        cache
    }
    fn batch(&mut self) -> Option<RecordBatch> {
        let producer = self.producer();
        let transactional = producer.is_some() && self.below(2) == 0;
        RecordBatch::new(self.offset(), self.epoch(), self.records(), producer, transactional, false).ok()
    }
}

fn no_panic<T>(what: &str, seed: u64, step: usize, f: impl FnOnce() -> T) {
    let outcome = catch_unwind(AssertUnwindSafe(f));
    assert!(outcome.is_ok(), "{what} panicked (seed {seed}, step {step})");
}

#[test]
fn replica_log_operations_never_panic() {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {})); // the assertion below reports the panic
    for seed in 0..400u64 {
        let mut r = Rng::new(seed);
        let mut log = ReplicaLog::new(Offset(r.domain(Offset::MAX).min(r.below(3) * 10)), r.below(2) == 0)
            .with_wrapper_batches(seed % 2 == 1); // v0/v1: followers take overlapping wrappers
        let mut other = ReplicaLog::new(Offset(0), true).with_wrapper_batches(seed % 4 == 1);
        for step in 0..120 {
            let op = r.below(22);
            no_panic("ReplicaLog", seed, step, || match op {
                0..=4 => {
                    let (records, epoch, producer, txn) = (r.records(), r.epoch(), r.producer(), r.below(4) == 0);
                    let _ = log.append_as_leader(records, epoch, producer, txn);
                }
                5 => {
                    if let Some(b) = r.batch() {
                        let _ = log.append_as_follower(&b);
                        let _ = other.append_as_follower(&b);
                    }
                }
                6 => {
                    let batches: Vec<RecordBatch> = (0..r.below(4)).filter_map(|_| r.batch()).collect();
                    let _ = log.append_batches_as_follower(&batches);
                }
                7 => {
                    let sizes: Vec<u32> = (0..r.below(4)).map(|_| r.domain(u32::MAX as u64) as u32 % 5).collect();
                    let records = r.records();
                    let _ = log.append_many_as_leader(r.epoch(), &sizes, &records);
                }
                8 => {
                    let control = if r.below(2) == 0 { ControlType::Commit } else { ControlType::Abort };
                    let pid = ProducerId(r.below(4));
                    let pepoch = ProducerEpoch(r.domain(ProducerEpoch::MAX as u64) as u16);
                    let coordinator = r.domain(u32::MAX as u64) as u32;
                    let _ = log.append_end_txn_marker(pid, pepoch, coordinator, control, r.epoch(), r.below(4) as u8);
                }
                9 => {
                    let _ = log.truncate_to(r.offset());
                }
                10 => log.truncate_fully_and_start_at(r.offset()),
                11 => {
                    let _ = log.update_high_watermark(r.offset());
                }
                12 => {
                    let _ = log.maybe_increment_high_watermark(r.offset());
                }
                13 => {
                    let max = (r.below(2) == 0).then(|| r.below(1 << 20) as usize);
                    let _ = log.read(r.offset(), max, r.opt_offset());
                }
                14 => {
                    let _ = (log.value_at(r.offset()), log.batch_containing(r.offset()), log.epoch_for_offset(r.offset()));
                }
                15 => {
                    let requested = (r.below(3) > 0).then(|| r.epoch());
                    let _ = log.end_offset_for_epoch(requested);
                }
                16 => {
                    let _ = log.assign_epoch(r.epoch(), r.offset());
                }
                17 => log.flush(r.opt_offset()),
                18 => {
                    let _ = log.drop_unflushed();
                    log.rebuild_producer_state();
                }
                19 => {
                    let _ = (log.first_unstable_offset(), log.last_stable_offset(), log.aborted_transactions(r.offset(), r.offset()));
                    let _ = (log.holes(), log.batches(), log.heap_bytes());
                }
                20 => {
                    let _ = divergence_point(&log, &other);
                    let _ = divergence_point(&other, &log);
                    let _ = (crate::invariants::first_mismatch(&log, &other), crate::invariants::epoch_regressions(&log));
                }
                _ => {
                    let _ = checkpoint::parse(&checkpoint::format(log.epoch_cache()), None);
                }
            });
        }
    }
    std::panic::set_hook(hook);
}

#[test]
fn truncation_and_fetch_rules_never_panic() {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    for seed in 0..3000u64 {
        let mut r = Rng::new(seed);
        let cache = r.cache();
        let (leo, hw) = (r.offset(), r.offset());
        let answer = (r.below(3) > 0).then(|| (r.epoch(), r.offset()));
        let error = match r.below(3) {
            0 => Some(LeaderAnswerError::FencedLeaderEpoch),
            1 => Some(LeaderAnswerError::UnknownLeaderEpoch),
            _ => None,
        };
        no_panic("truncation rules", seed, 0, || {
            let _ = truncate_to_high_watermark(hw, leo);
            let _ = kip101_truncation(answer.map(|a| a.1), leo, hw);
            let _ = kip279_truncation(answer, &cache, leo, hw);
            let _ = kip320_truncation(answer, &cache, leo, hw, r.epoch(), r.epoch(), error);
            let _ = diverging_epoch_truncation((r.epoch(), r.offset()), &cache, leo, hw);
            let _ = leader_fetch_check(&cache, leo, r.offset(), r.offset(), r.epoch());
            let _ = check_current_leader_epoch((r.below(2) == 0).then(|| r.epoch()), r.epoch());
            let requested = (r.below(3) > 0).then(|| r.epoch());
            let _ = (cache.end_offset_for(requested, leo), cache.end_offset_for_kip279(requested, leo));
            let _ = (cache.end_offset_for_kip101(requested, leo), cache.epoch_for_offset(r.offset()));
            let mut c = cache.clone();
            c.truncate_from_end(r.offset());
            c.truncate_from_start(r.offset());
            let _ = c.assign_kip101(r.epoch(), r.offset());
        });
    }
    std::panic::set_hook(hook);
}

#[test]
fn damaged_checkpoint_files_never_panic() {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let alphabet = b"0123456789 -\n\r\t+e.x\xff\x00";
    for seed in 0..5000u64 {
        let mut r = Rng::new(seed);
        let mut text = checkpoint::format(&r.cache()).into_bytes();
        for _ in 0..r.below(6) {
            let at = r.below(text.len() as u64 + 1) as usize;
            match r.below(3) {
                0 if at < text.len() => {
                    text.remove(at);
                }
                1 => text.insert(at, alphabet[r.below(alphabet.len() as u64) as usize]),
                _ => text.extend_from_slice(r.next().to_string().as_bytes()),
            }
        }
        let text = String::from_utf8_lossy(&text).into_owned();
        no_panic("checkpoint::parse", seed, 0, || {
            let _ = checkpoint::parse(&text, Some("fuzzed"));
        });
    }
    std::panic::set_hook(hook);
}
