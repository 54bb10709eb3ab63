//! Protocol-state coverage: an abstraction of the cluster's replication state that a search
//! treats as coverage (`docs/fuzzing.md`, "The guided engine").
//!
//! After every engine event that changed a replica or the controller, each broker is reduced
//! to a tuple of eight small codes ([`broker_codes`]: liveness, role in its own view, how far
//! its leader epoch lags the controller's, whether the controller names it leader and keeps
//! it in the ISR or ELR, whether it misses committed data or shows a HW above it, and for a
//! leader whether its ISR is below `min.insync.replicas` and whether it believes a follower
//! holds more than that follower's log does, whether that follower is in its maximal ISR
//! (where the belief counts toward the HW), whether it has a fetch in flight that would
//! correct it, and whether the leader cannot hear the controller:
//! the re-elected KRaft leader's stale follower state), and the
//! cluster to one more tuple ([`global_codes`]). A run's *features* are the tuples reached
//! and the moves between consecutive tuples of one broker and of the cluster: four
//! families, none naming a broker, so situations that differ only in broker names are
//! one (symmetry), and no family is the product of all brokers' tuples, which grows with every
//! run instead of saturating (measured in `docs/fuzzing.md`).
//!
//! The numbers are FNV-1a hashes over a fixed byte layout with the family in the two low
//! bits, computed the same way by the Python twin (`epochlab.fuzz.coverage`), which a test
//! compares with this one.

use std::collections::BTreeMap;

/// What the abstraction reads of one broker.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BrokerView {
    pub id: u32,
    pub alive: bool,
    /// 0: no role, 1: follower, 2: leader.
    pub role: u8,
    pub leader_epoch: Option<u32>,
    pub log_end_offset: u64,
    pub high_watermark: u64,
    /// The ISR in the broker's own view (meaningful for a leader).
    pub isr_len: u32,
    /// The maximal ISR in its view (the ISR and a pending expansion): the followers whose log
    /// ends count in a leader's HW advance.
    pub maximal_isr: Vec<u32>,
    /// A leader's view of its followers: (follower, log end offset it last reported).
    pub followers: Vec<(u32, Option<u64>)>,
    /// Lost its unflushed tail in a crash and not yet caught up (`StateChecker.recovering`):
    /// a leader's belief above its log is then the allowed loss, not stale state.
    pub recovering: bool,
    /// No fetch of this broker's is in flight (it waits out `replica.fetch.backoff.ms` or has
    /// not sent one yet). Read only for a follower some leader holds a stale belief about.
    pub fetch_idle: bool,
    /// The controller's messages cannot reach this broker now (partitioned away, or the link
    /// cut): they are held, and a KRaft broker applies what it missed as one delta when they
    /// arrive. Read only for a live leader.
    pub controller_cut: bool,
}

/// What the abstraction reads of the controller and the checker.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterView {
    pub brokers: Vec<BrokerView>,
    pub controller_leader: Option<u32>,
    pub controller_epoch: u32,
    pub controller_isr: Vec<u32>,
    pub controller_elr: Vec<u32>,
    /// The committed prefix the checker knows (`StateChecker.true_hw`).
    pub true_hw: u64,
    pub min_isr: u32,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a over `bytes`, continuing from `hash`.
pub fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |h, b| (h ^ u64::from(*b)).wrapping_mul(FNV_PRIME))
}

/// One broker's tuple of the abstract state (eight small codes): alive, role, epoch lag
/// behind the controller (0, 1, 2 or more; 3: no epoch), named leader by the controller, ISR
/// (1) or ELR (2) member, missing part of the committed prefix (LEO below `trueHW`), HW above
/// `trueHW`, and for a live leader 1 (ISR below `min.insync.replicas`) or 2, plus 4 when it
/// believes a follower holds more than that follower's log does (a follower that lost its
/// unflushed tail in a crash aside: that loss the configuration allows), 8 more when that
/// follower has no fetch in flight that would correct the belief, and 16 more when that
/// follower is in the leader's maximal ISR, so that the belief counts in the leader's next HW
/// advance (`Partition.maybeIncrementLeaderHW` takes the least log end over the maximal ISR as
/// the leader knows them; a belief about a follower outside it holds no HW back); 32 more when
/// the leader cannot hear the controller: it goes on leading whatever the controller decides
/// (a zombie once the controller moves on), and an election that names it again reaches it
/// only with the link back, in one metadata delta with whatever it missed, so it goes from
/// leader to leader and keeps its followers' state (`Partition.makeLeader` with `isNewLeader`
/// false; the KRaft finding's way from a zombie's belief to a lost write). Each step of that
/// way is a tuple of its own: a leader cut off, then a zombie in the controller's ISR, then
/// one holding a stale belief. And 64 more when the leader's HW is below the committed prefix
/// (`trueHW`): a new leader learns the HW one fetch late, and until then the latest offset it
/// tells a client is behind what an earlier leader told (KAFKA-2334; KIP-207 answers
/// OFFSET_NOT_AVAILABLE instead, `Partition.fetchOffsetForTimestamp`).
pub fn broker_codes(view: &ClusterView, b: &BrokerView) -> [u8; 8] {
    let lag = match b.leader_epoch {
        None => 3,
        Some(e) => view.controller_epoch.saturating_sub(e).min(2) as u8,
    };
    let member = if view.controller_isr.contains(&b.id) {
        1
    } else if view.controller_elr.contains(&b.id) {
        2
    } else {
        0
    };
    let mut leader = 0u8;
    if b.alive && b.role == 2 {
        leader = if b.isr_len < view.min_isr { 1 } else { 2 };
        for (_, bits) in stale_beliefs(view, b) {
            leader |= bits;
        }
        if b.controller_cut {
            leader |= 32;
        }
        if b.high_watermark < view.true_hw {
            leader |= 64;
        }
    }
    [
        u8::from(b.alive),
        b.role.min(2),
        lag,
        u8::from(view.controller_leader == Some(b.id)),
        member,
        u8::from(b.log_end_offset < view.true_hw),
        u8::from(b.high_watermark > view.true_hw),
        leader,
    ]
}

/// The followers `b` (a live leader) believes hold more than their logs do, each with its
/// leader-code bits (4, plus 8 when it has no fetch in flight that would correct the belief,
/// plus 16 when it is in `b`'s maximal ISR), in `b.followers` order. A follower that lost its
/// unflushed tail in a crash is left out: that loss the configuration allows.
pub fn stale_beliefs<'a>(view: &'a ClusterView, b: &'a BrokerView) -> impl Iterator<Item = (u32, u8)> + 'a {
    b.followers.iter().filter_map(move |(f, known)| {
        let x = view.brokers.iter().find(|x| x.id == *f)?;
        if (*known)? <= x.log_end_offset || x.recovering {
            return None;
        }
        // that follower sends nothing that would correct the belief for now; the belief
        // counts toward the leader's HW
        Some((*f, 4 | if x.fetch_idle { 8 } else { 0 } | if b.maximal_isr.contains(f) { 16 } else { 0 }))
    })
}

/// The follower of `b`'s most telling stale belief ([`stale_beliefs`]: the most bits, the
/// first of equals), if `b` is a live leader holding one: the broker a search acts on to hold
/// the belief's correction back.
pub fn stale_follower(view: &ClusterView, b: &BrokerView) -> Option<u32> {
    if !(b.alive && b.role == 2) {
        return None;
    }
    let mut best: Option<(u32, u8)> = None;
    for (f, bits) in stale_beliefs(view, b) {
        if best.is_none_or(|(_, most)| bits > most) {
            best = Some((f, bits));
        }
    }
    best.map(|(f, _)| f)
}

/// Where a feature was first reached: the caller's action index, the simulated time (ms), and
/// for a broker feature the broker whose tuple it is and the follower of that broker's stale
/// belief ([`stale_follower`]; -1 for none, and both -1 for a cluster feature).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reach {
    pub step: i64,
    pub now_ms: i64,
    pub broker: i64,
    pub follower: i64,
}

/// The cluster-wide tuple: live brokers leading in their own view, the controller's ISR and
/// ELR sizes and whether it has no leader, live brokers, live brokers missing committed
/// data, the highest leader code, the largest epoch lag of a live leader (3: none).
pub fn global_codes(view: &ClusterView, tuples: &[[u8; 8]]) -> [u8; 8] {
    let live = tuples.iter().filter(|t| t[0] == 1);
    let leaders: Vec<&[u8; 8]> = tuples.iter().filter(|t| t[7] != 0).collect();
    [
        leaders.len().min(3) as u8,
        view.controller_isr.len().min(255) as u8,
        view.controller_elr.len().min(255) as u8,
        u8::from(view.controller_leader.is_none()),
        live.clone().count().min(255) as u8,
        live.filter(|t| t[5] == 1).count().min(255) as u8,
        leaders.iter().map(|t| t[7]).max().unwrap_or(0),
        leaders.iter().map(|t| t[2]).max().unwrap_or(3),
    ]
}

/// Feature families, in a feature's two low bits.
pub const BROKER: u64 = 0;
pub const BROKER_MOVE: u64 = 1;
pub const CLUSTER: u64 = 2;
pub const CLUSTER_MOVE: u64 = 3;

/// The feature of `family` for the codes `parts` (one or two tuples).
pub fn feature(family: u64, parts: &[&[u8; 8]]) -> u64 {
    let mut hash = fnv1a(FNV_OFFSET, &[family as u8]);
    for p in parts {
        hash = fnv1a(hash, &p[..]);
    }
    (hash & !3) | family
}

/// The features one run reached: each broker's tuples and its moves between them, the
/// cluster-wide tuples and their moves (each family a hash with its tag in the low bits).
#[derive(Clone, Debug, Default)]
pub struct Coverage {
    brokers: BTreeMap<u32, [u8; 8]>,
    cluster: Option<[u8; 8]>,
    /// feature -> where it was first reached
    features: BTreeMap<u64, Reach>,
    observations: u64,
}

impl Coverage {
    pub fn new() -> Self {
        Self::default()
    }

    fn reach(&mut self, feature: u64, at: Reach) {
        self.features.entry(feature).or_insert(at);
    }

    /// Records the state of `view` at `step` (the caller's action index) and simulated time
    /// `now_ms`; returns whether some tuple moved.
    pub fn observe(&mut self, view: &ClusterView, step: i64, now_ms: i64) -> bool {
        let at = Reach { step, now_ms, broker: -1, follower: -1 };
        self.observations += 1;
        let tuples: Vec<[u8; 8]> = view.brokers.iter().map(|b| broker_codes(view, b)).collect();
        let mut moved = false;
        for (b, t) in view.brokers.iter().zip(&tuples) {
            let before = self.brokers.insert(b.id, *t);
            if before != Some(*t) {
                moved = true;
                let follower = if t[7] & 4 != 0 { stale_follower(view, b).map_or(-1, i64::from) } else { -1 };
                let at = Reach { broker: i64::from(b.id), follower, ..at };
                self.reach(feature(BROKER, &[t]), at);
                if let Some(p) = before {
                    self.reach(feature(BROKER_MOVE, &[&p, t]), at);
                }
            }
        }
        let g = global_codes(view, &tuples);
        if self.cluster != Some(g) {
            moved = true;
            self.reach(feature(CLUSTER, &[&g]), at);
            if let Some(p) = self.cluster {
                self.reach(feature(CLUSTER_MOVE, &[&p, &g]), at);
            }
            self.cluster = Some(g);
        }
        moved
    }

    /// The features so far, in increasing order.
    pub fn features(&self) -> Vec<u64> {
        self.features.keys().copied().collect()
    }

    /// The step each feature of [`Coverage::features`] was first reached at, in that order.
    pub fn first_steps(&self) -> Vec<i64> {
        self.features.values().map(|r| r.step).collect()
    }

    /// The simulated time (ms) each feature of [`Coverage::features`] was first reached at,
    /// in that order.
    pub fn first_times(&self) -> Vec<i64> {
        self.features.values().map(|r| r.now_ms).collect()
    }

    /// For each feature of [`Coverage::features`], in that order, the broker and the stale
    /// belief's follower of its first reach ([`Reach`]).
    pub fn first_brokers(&self) -> Vec<(i64, i64)> {
        self.features.values().map(|r| (r.broker, r.follower)).collect()
    }

    pub fn observations(&self) -> u64 {
        self.observations
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker(id: u32, role: u8, epoch: u32, leo: u64, hw: u64) -> BrokerView {
        BrokerView { id, alive: true, role, leader_epoch: Some(epoch), log_end_offset: leo, high_watermark: hw, isr_len: 3, maximal_isr: vec![1, 2, 3], followers: vec![], recovering: false, fetch_idle: false, controller_cut: false }
    }

    fn cluster() -> ClusterView {
        ClusterView {
            brokers: vec![broker(1, 2, 0, 5, 5), broker(2, 1, 0, 5, 5), broker(3, 1, 0, 5, 5)],
            controller_leader: Some(1),
            controller_epoch: 0,
            controller_isr: vec![1, 2, 3],
            controller_elr: vec![],
            true_hw: 5,
            min_isr: 2,
        }
    }

    #[test]
    fn fnv1a_matches_the_reference_values() {
        // FNV-1a 64 test vectors (the empty string and "a")
        assert_eq!(fnv1a(FNV_OFFSET, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(FNV_OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn broker_names_do_not_matter() {
        let mut a = Coverage::new();
        let mut b = Coverage::new();
        a.observe(&cluster(), 0, 0);
        let mut swapped = cluster();
        swapped.brokers.swap(1, 2); // the same situation, followers listed the other way
        b.observe(&swapped, 0, 0);
        assert_eq!(a.features(), b.features());
    }

    #[test]
    fn a_leader_behind_the_controller_is_seen() {
        let mut v = cluster();
        v.controller_epoch = 2; // two elections the leader has not seen
        let t = broker_codes(&v, &v.brokers[0]);
        assert_eq!((t[1], t[2], t[3]), (2, 2, 1));
        let tuples: Vec<[u8; 8]> = v.brokers.iter().map(|b| broker_codes(&v, b)).collect();
        assert_eq!(global_codes(&v, &tuples)[7], 2);
    }

    #[test]
    fn a_leader_whose_hw_is_below_the_committed_prefix_is_seen() {
        let mut v = cluster();
        assert_eq!(broker_codes(&v, &v.brokers[0])[7], 2);
        v.brokers[0].high_watermark = 3; // a new leader that has not learned the HW yet
        assert_eq!(broker_codes(&v, &v.brokers[0])[7], 66);
        v.brokers[1].high_watermark = 3; // a follower's lagging HW is nothing
        assert_eq!(broker_codes(&v, &v.brokers[1])[7], 0);
    }

    #[test]
    fn a_leader_believing_a_follower_holds_more_than_it_does_is_seen() {
        let mut v = cluster();
        v.brokers[0].followers = vec![(2, Some(5)), (3, Some(5))];
        v.brokers[0].maximal_isr = vec![1, 3];
        assert_eq!(broker_codes(&v, &v.brokers[0])[7], 2);
        v.brokers[1].log_end_offset = 3; // follower 2 lost its tail; the leader still thinks 5
        assert_eq!(broker_codes(&v, &v.brokers[0])[7], 6);
        assert_eq!(broker_codes(&v, &v.brokers[1])[5], 1); // and it misses committed data
        v.brokers[1].fetch_idle = true; // and it sends nothing that would correct the belief
        assert_eq!(broker_codes(&v, &v.brokers[0])[7], 14);
        v.brokers[0].maximal_isr = vec![1, 2, 3]; // and the belief counts toward the leader's HW
        assert_eq!(broker_codes(&v, &v.brokers[0])[7], 30);
        assert_eq!(stale_follower(&v, &v.brokers[0]), Some(2));
        assert_eq!(stale_follower(&v, &v.brokers[1]), None); // a follower holds no belief
        v.brokers[2].log_end_offset = 4; // follower 3 too, but fetching: 2's belief tells more
        assert_eq!(broker_codes(&v, &v.brokers[0])[7], 30);
        assert_eq!(stale_follower(&v, &v.brokers[0]), Some(2));
        v.brokers[1].fetch_idle = false; // now equal: the first of them
        v.brokers[2].fetch_idle = true;
        assert_eq!(stale_follower(&v, &v.brokers[0]), Some(3));
        v.brokers[2].fetch_idle = false;
        assert_eq!(stale_follower(&v, &v.brokers[0]), Some(2));
        v.brokers[2].log_end_offset = 5;
        v.brokers[0].controller_cut = true; // and the leader cannot hear the controller
        assert_eq!(broker_codes(&v, &v.brokers[0])[7], 54);
        let mut cov = Coverage::new();
        cov.observe(&v, 4, 900);
        let first: Vec<_> = cov.features().into_iter().zip(cov.first_brokers()).collect();
        let leader = feature(BROKER, &[&broker_codes(&v, &v.brokers[0])]);
        assert!(first.contains(&(leader, (1, 2)))); // the leader's tuple: broker 1, stale follower 2
        assert!(first.iter().filter(|(f, _)| f & 3 == CLUSTER).all(|(_, who)| *who == (-1, -1)));
        v.brokers[1].recovering = true; // it lost its tail in a crash: not stale state
        assert_eq!(broker_codes(&v, &v.brokers[0])[7], 34); // (still cut from the controller)
        v.brokers[0].controller_cut = false;
        assert_eq!(broker_codes(&v, &v.brokers[0])[7], 2);
        v.brokers[1].recovering = false;
        v.brokers[1].log_end_offset = 5; // caught up: an idle fetcher alone is nothing
        assert_eq!(broker_codes(&v, &v.brokers[0])[7], 2);
    }

    #[test]
    fn coverage_keeps_tuples_and_moves_once() {
        let mut cov = Coverage::new();
        let a = cluster();
        let mut b = cluster();
        b.brokers[2].alive = false;
        assert!(cov.observe(&a, 0, 0));
        assert!(!cov.observe(&a, 0, 5));
        let first = cov.features().len(); // two broker tuples (leader, follower), one cluster
        assert_eq!(first, 3);
        assert!(cov.observe(&b, 1, 120));
        assert!(cov.observe(&a, 2, 340));
        // + the dead follower's tuple, its two moves, the cluster tuple and its two moves
        assert_eq!(cov.features().len(), first + 6);
        assert_eq!(cov.observations(), 4);
        assert!(cov.features().iter().all(|f| f & 3 <= CLUSTER_MOVE));
        // the first reach counts: the dead follower's tuple at step 1, the start at step 0
        let steps = cov.first_steps();
        assert_eq!(steps.iter().filter(|s| **s == 0).count(), first);
        // step 1: the dead tuple, the move to it, the cluster tuple, the move to it; step 2:
        // the two moves back (both tuples were reached before)
        assert_eq!(steps.iter().filter(|s| **s == 1).count(), 4);
        assert_eq!(steps.iter().filter(|s| **s == 2).count(), 2);
        // and the simulated time of each first reach goes with its step
        let times = cov.first_times();
        for (s, t) in steps.iter().zip(&times) {
            assert_eq!(*t, [0, 120, 340][*s as usize]);
        }
    }
}
