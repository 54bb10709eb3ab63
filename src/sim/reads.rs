//! One broker's serving of consumer fetches as a state machine without I/O: a fetch that
//! finds nothing to read waits up to its `fetch.max.wait.ms` in the fetch purgatory, and is
//! answered when a read finds something, at the wait's end, or never (a crash).
//!
//! A [`ConsumerReads`] is told what happened and answers with the [`Effect`]s to carry out,
//! in order, as [`super::fetcher::Fetcher`] does. The reads themselves are the caller's (the
//! replica's `handle_consumer_fetch`, with the broker's rules for old releases and the
//! rack-aware selector): the engine gets a read's [`ReadOutcome`] with the caller's response
//! `A`, and asks for a new read through a closure when it needs one. [`Effect::Park`] creates
//! a timer, reported back with [`ConsumerReads::parked`].
//!
//! The engine is generic over the caller's handles: `R` a request, `T` a timer, `A` a read's
//! answer, `K` the replica state a parked read's completion depends on (compared for
//! equality). It is the statement of `epochlab.sim.broker.Broker`'s consumer-read methods
//! (`on_consumer_fetch`, `_nothing_to_read`, `_check_parked_reads`, `_expire_read`,
//! `_answer_read`, `_drop_parked_reads`; the `reference` backend runs those), step for step,
//! so both backends give the same run; `src/bindings/plane.rs` drives it. Kafka sources:
//!
//! * `ReplicaManager.fetchMessages` answers at once when `maxWaitMs` is 0, or with data, an
//!   error, a diverging epoch or a preferred read replica; else it parks a `DelayedFetch`;
//! * `DelayedFetch.tryComplete` completes a parked fetch whose offset is no longer the end of
//!   what it may read (the HW, or the LSO for read_committed); it is tried after anything that
//!   may move them (`Partition.tryCompleteDelayedRequests`) and when the broker stops leading
//!   (`ReplicaManager.completeDelayedOperationsWhenNotPartitionLeader`); the engine reads again
//!   only when the key (role, epoch, HW, log end) moved since the last try, as every
//!   completion condition depends on those;
//! * `DelayedFetch.onExpiration` / `onComplete`: at the wait's end, whatever a read gives then;
//! * the generations before diverging-epoch (up to the kip-320 generation, 2.4-2.7, which has
//!   fetch from followers): a redirect to the preferred replica waited out the whole wait
//!   (KAFKA-13767, fixed in 3.2.0), and a read held by a follower was completed by nothing but
//!   the wait's end (KAFKA-14334, fixed in 3.3.2 / 3.4.0);
//! * a timer runs only in the broker incarnation that set it, while the broker is alive.
//!
//! ```
//! use epochlab::sim::reads::{ConsumerReads, Effect, ReadHead, ReadOutcome};
//! let mut r: ConsumerReads<&str, u32, &str, u64> = ConsumerReads::new();
//! let head = ReadHead { client: "c1".into(), max_wait_ms: 500, fetch_offset: Some(3),
//!                       validate_epoch: false, read_committed: false };
//! let empty = ReadOutcome { error: false, records: false, redirect: false, high_watermark: 3, last_stable_offset: 3 };
//! let effects = r.arrive("f1", head, empty, "nothing", || 3, false, true);
//! assert!(matches!(effects[..], [Effect::Park { token: 1, wait_ms: 500 }]));
//! r.parked(1, 10);
//! // the HW moved: the read finds m3, the wait ends early
//! let found = ReadOutcome { records: true, high_watermark: 4, last_stable_offset: 4, ..empty };
//! let effects = r.check(4, |_, _| (found, "m3"));
//! assert!(matches!(effects[..], [Effect::Cancel(10), Effect::Respond { response: "m3", .. }]));
//! ```

use super::fetcher::Liveness;
use crate::log::ReplicaLog;
use crate::replica::messages::{ConsumerFetchRequest, ConsumerFetchResponse, KafkaError, OffsetReset};
use crate::replica::Replica;
use crate::types::{BrokerId, Offset};

/// The brokers' settings a read for a consumer follows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadRules {
    /// A release before 0.10.1: no ListOffsets by timestamp (KIP-79, ListOffsets v1).
    pub no_timestamp_lookup: bool,
    /// `replica.selector.class` is set (KIP-392): a leader may send the consumer to a follower.
    pub rack_selector: bool,
}

/// One read for a consumer (`Broker._read_for_consumer`): the replica's answer and, with the
/// rack-aware selector, the follower the consumer should read from. A ListOffsets by
/// timestamp before 0.10.1 is refused with UNSUPPORTED_VERSION. When the selector names a
/// follower, the read is skipped and the answer carries only the offsets
/// (`ReplicaManager.readFromLocalLog`: "If a preferred read-replica is set, skip the read").
pub fn read_for_consumer(replica: &Replica, log: &ReplicaLog, req: &ConsumerFetchRequest, rules: ReadRules)
                         -> (ConsumerFetchResponse, Option<BrokerId>) {
    if rules.no_timestamp_lookup && matches!(req.reset, OffsetReset::Timestamp(_))
        && req.fetch_offset.is_none() && req.validate_epoch.is_none() {
        let refused = ConsumerFetchResponse {
            error: Some(KafkaError::UnsupportedVersion), leader_epoch: replica.leader_epoch, records: Vec::new(),
            high_watermark: Offset(0), reset_offset: None, epoch_end: None, last_stable_offset: Offset(0),
            aborted_transactions: Vec::new(),
        };
        return (refused, None);
    }
    if rules.rack_selector && req.validate_epoch.is_none() {
        if let (Some(rack), Some(offset)) = (req.client_rack, req.fetch_offset) {
            if let Some(preferred) = replica.preferred_read_replica(offset, rack) {
                let offsets_only = ConsumerFetchRequest { max_records: 0, ..req.clone() };
                let response = replica.handle_consumer_fetch(log, &offsets_only);
                let preferred = response.error.is_none().then_some(preferred);
                return (response, preferred);
            }
        }
    }
    (replica.handle_consumer_fetch(log, req), None)
}

/// What a read's answer is, as far as waiting goes.
pub fn outcome_of(response: &ConsumerFetchResponse, preferred: Option<BrokerId>) -> ReadOutcome {
    ReadOutcome {
        error: response.error.is_some(),
        records: !response.records.is_empty(),
        redirect: preferred.is_some(),
        high_watermark: response.high_watermark.0,
        last_stable_offset: response.last_stable_offset.0,
    }
}

/// What the engine reads of a consumer fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadHead {
    /// The consumer's node name.
    pub client: String,
    /// `fetch.max.wait.ms`; 0 answers at once.
    pub max_wait_ms: i64,
    /// `None`: a ListOffsets, answered at once.
    pub fetch_offset: Option<u64>,
    /// A KIP-320 position check, answered at once.
    pub validate_epoch: bool,
    pub read_committed: bool,
}

/// What a read gave, as far as waiting goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadOutcome {
    pub error: bool,
    pub records: bool,
    /// The answer names a preferred read replica (KIP-392).
    pub redirect: bool,
    pub high_watermark: u64,
    pub last_stable_offset: u64,
}

/// Whether a consumer fetch keeps waiting (`DelayedFetch.tryComplete` would not complete it):
/// no error, no records, no redirect, and the fetch offset is exactly the end of what it may
/// read (the HW, or the LSO for read_committed); an offset above it completes at once (a
/// truncated or new leader whose HW is still behind).
pub fn nothing_to_read(head: &ReadHead, outcome: &ReadOutcome) -> bool {
    if outcome.error || outcome.records || outcome.redirect || head.validate_epoch {
        return false;
    }
    let end = if head.read_committed { outcome.last_stable_offset } else { outcome.high_watermark };
    head.fetch_offset == Some(end)
}

/// What a timer does when it fires, set when it was armed.
#[derive(Debug, PartialEq, Eq)]
pub enum Due<R> {
    /// The end of the wait of the read parked with this token.
    Expire(u64),
    /// The end of a kip-320 release's wait that no purgatory completes: read and answer.
    Answer(R, ReadHead),
}

/// One thing to carry out, in list order.
#[derive(Debug, PartialEq, Eq)]
pub enum Effect<R, T, A> {
    /// Post `response` to `client` (`on_fetch_response`).
    Respond { client: String, response: A },
    /// Arm [`Due::Expire`]`(token)` after `wait_ms` in the broker's current incarnation and
    /// report the timer with [`ConsumerReads::parked`].
    Park { token: u64, wait_ms: i64 },
    /// Arm [`Due::Answer`] after `wait_ms` in the broker's current incarnation (no handle
    /// is kept: nothing cancels it).
    Delay { request: R, head: ReadHead, wait_ms: i64 },
    /// Cancel this timer.
    Cancel(T),
}

type Effects<R, T, A> = Vec<Effect<R, T, A>>;

#[derive(Debug)]
struct Parked<R, T> {
    token: u64,
    request: R,
    head: ReadHead,
    timer: Option<T>,
}

/// One broker's consumer fetch serving (module doc).
#[derive(Debug)]
pub struct ConsumerReads<R, T, A, K> {
    parked: Vec<Parked<R, T>>,
    /// The key at the last try of the parked reads (or when the first one was parked).
    key: Option<K>,
    tokens: u64,
    _answers: std::marker::PhantomData<fn(A)>,
}

impl<R, T, A, K: PartialEq> Default for ConsumerReads<R, T, A, K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R, T, A, K: PartialEq> ConsumerReads<R, T, A, K> {
    pub fn new() -> Self {
        Self { parked: Vec::new(), key: None, tokens: 0, _answers: std::marker::PhantomData }
    }

    /// A consumer fetch arrived and was read (`Broker.on_consumer_fetch`): `outcome` and
    /// `response` are the read's; `key` gives the replica's key now; `held_reads`: a
    /// generation before diverging-epoch, whose redirects and followers' empty reads wait out
    /// the whole wait; `leader` whether this broker leads.
    #[allow(clippy::too_many_arguments)]
    pub fn arrive(&mut self, request: R, head: ReadHead, outcome: ReadOutcome, response: A, key: impl FnOnce() -> K,
                  held_reads: bool, leader: bool) -> Effects<R, T, A> {
        let waits = head.max_wait_ms > 0;
        if waits && held_reads && ((!outcome.error && outcome.redirect) || (!leader && nothing_to_read(&head, &outcome))) {
            let wait_ms = head.max_wait_ms;
            return vec![Effect::Delay { request, head, wait_ms }];
        }
        if waits && nothing_to_read(&head, &outcome) {
            if self.parked.is_empty() {
                self.key = Some(key());
            }
            self.tokens += 1;
            let (token, wait_ms) = (self.tokens, head.max_wait_ms);
            self.parked.push(Parked { token, request, head, timer: None });
            return vec![Effect::Park { token, wait_ms }];
        }
        vec![Effect::Respond { client: head.client, response }]
    }

    /// The wait timer of the read parked as `token`; `Some(timer)` when nothing is parked as
    /// `token` (the caller drops it).
    pub fn parked(&mut self, token: u64, timer: T) -> Option<T> {
        super::arm(self.parked.iter_mut().map(|p| (p.token, &mut p.timer)), token, timer)
    }

    /// `Broker._check_parked_reads`: when the key moved since the last try, read each parked
    /// fetch again (`read`) and answer those that have something now, in the order they were
    /// parked.
    pub fn check(&mut self, key: K, mut read: impl FnMut(&R, &ReadHead) -> (ReadOutcome, A)) -> Effects<R, T, A> {
        if self.parked.is_empty() || self.key.as_ref() == Some(&key) {
            return Vec::new();
        }
        self.key = Some(key);
        let mut effects = Vec::new();
        let mut waiting = Vec::new();
        for parked in std::mem::take(&mut self.parked) {
            let (outcome, response) = read(&parked.request, &parked.head);
            if nothing_to_read(&parked.head, &outcome) {
                waiting.push(parked);
                continue;
            }
            if let Some(timer) = parked.timer {
                effects.push(Effect::Cancel(timer));
            }
            effects.push(Effect::Respond { client: parked.head.client, response });
        }
        self.parked = waiting;
        effects
    }

    /// A timer of incarnation `incarnation` fired; `live` is the broker now. Nothing happens
    /// unless the broker is alive in that incarnation (`Broker._if_alive`). The read parked
    /// as the token (or the delayed one) is answered with what a read gives now.
    pub fn fire(&mut self, due: Due<R>, incarnation: i64, live: Liveness,
                read: impl FnOnce(&R, &ReadHead) -> (ReadOutcome, A)) -> Effects<R, T, A> {
        if !(live.alive && live.incarnation == incarnation) {
            return Vec::new();
        }
        let (request, head) = match due {
            Due::Expire(token) => {
                let Some(i) = self.parked.iter().position(|p| p.token == token) else { return Vec::new() };
                let parked = self.parked.remove(i);
                (parked.request, parked.head)
            }
            Due::Answer(request, head) => (request, head),
        };
        let (_, response) = read(&request, &head);
        vec![Effect::Respond { client: head.client, response }]
    }

    /// `Broker._drop_parked_reads` (a crash or shutdown): every parked read is forgotten,
    /// its timer cancelled. Returns the cancellations and the requests for the caller to drop.
    pub fn drop_all(&mut self) -> (Effects<R, T, A>, Vec<R>) {
        let mut cancels = Vec::new();
        let mut requests = Vec::new();
        for parked in std::mem::take(&mut self.parked) {
            if let Some(timer) = parked.timer {
                cancels.push(Effect::Cancel(timer));
            }
            requests.push(parked.request);
        }
        (cancels, requests)
    }

    /// How many consumer fetches wait.
    pub fn parked_count(&self) -> usize {
        self.parked.len()
    }

    /// The timers the engine holds.
    pub fn timers(&self) -> impl Iterator<Item = &T> {
        self.parked.iter().filter_map(|p| p.timer.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Reads = ConsumerReads<u32, u32, &'static str, (u64, u64)>;

    fn head(offset: Option<u64>, wait: i64) -> ReadHead {
        ReadHead { client: "c".into(), max_wait_ms: wait, fetch_offset: offset, validate_epoch: false, read_committed: false }
    }

    fn at(hw: u64) -> ReadOutcome {
        ReadOutcome { error: false, records: false, redirect: false, high_watermark: hw, last_stable_offset: hw }
    }

    fn live(incarnation: i64) -> Liveness {
        Liveness { alive: true, incarnation }
    }

    #[test]
    fn nothing_to_read_means_exactly_at_the_end_with_nothing_else() {
        assert!(nothing_to_read(&head(Some(3), 500), &at(3)));
        assert!(!nothing_to_read(&head(Some(4), 500), &at(3)), "above the end: a truncated or new leader");
        assert!(!nothing_to_read(&head(None, 500), &at(3)), "a ListOffsets");
        assert!(!nothing_to_read(&head(Some(3), 500), &ReadOutcome { records: true, ..at(3) }));
        assert!(!nothing_to_read(&head(Some(3), 500), &ReadOutcome { error: true, ..at(3) }));
        assert!(!nothing_to_read(&head(Some(3), 500), &ReadOutcome { redirect: true, ..at(3) }));
        assert!(!nothing_to_read(&ReadHead { validate_epoch: true, ..head(Some(3), 500) }, &at(3)));
        let committed = ReadHead { read_committed: true, ..head(Some(2), 500) };
        assert!(nothing_to_read(&committed, &ReadOutcome { last_stable_offset: 2, ..at(3) }), "the LSO bounds it");
    }

    #[test]
    fn a_fetch_that_does_not_wait_or_finds_something_is_answered_at_once() {
        let mut r = Reads::new();
        let e = r.arrive(1, head(Some(3), 0), at(3), "empty", || (0, 0), false, true);
        assert_eq!(e, vec![Effect::Respond { client: "c".into(), response: "empty" }]);
        let e = r.arrive(2, head(Some(2), 500), ReadOutcome { records: true, ..at(3) }, "m2", || (0, 0), false, true);
        assert_eq!(e, vec![Effect::Respond { client: "c".into(), response: "m2" }]);
        assert_eq!(r.parked_count(), 0);
    }

    #[test]
    fn parked_reads_are_tried_again_only_when_the_key_moves() {
        let mut r = Reads::new();
        r.arrive(1, head(Some(3), 500), at(3), "-", || (3, 3), false, true);
        r.parked(1, 10);
        r.arrive(2, head(Some(3), 500), at(3), "-", || panic!("the key is taken with the first only"), false, true);
        r.parked(2, 20);
        let mut reads = 0;
        assert!(r.check((3, 3), |_, _| { reads += 1; (at(3), "-") }).is_empty());
        assert_eq!(reads, 0, "the same key: nothing is read");
        let e = r.check((3, 4), |_, _| { reads += 1; (at(3), "-") });
        assert!(e.is_empty());
        assert_eq!(reads, 2, "a new key: every parked read is tried");
        let e = r.check((4, 4), |req, _| (ReadOutcome { records: *req == 2, ..at(if *req == 2 { 4 } else { 3 }) }, "m3"));
        assert_eq!(e, vec![Effect::Cancel(20), Effect::Respond { client: "c".into(), response: "m3" }]);
        assert_eq!(r.parked_count(), 1);
    }

    #[test]
    fn the_wait_ends_with_a_read_then_and_only_in_its_incarnation() {
        let mut r = Reads::new();
        r.arrive(1, head(Some(3), 500), at(3), "-", || (3, 3), false, true);
        r.parked(1, 10);
        assert!(r.fire(Due::Expire(1), 1, live(2), |_, _| panic!("not read")).is_empty());
        let e = r.fire(Due::Expire(1), 1, live(1), |_, _| (at(3), "empty"));
        assert_eq!(e, vec![Effect::Respond { client: "c".into(), response: "empty" }]);
        assert!(r.fire(Due::Expire(1), 1, live(1), |_, _| panic!("answered once")).is_empty());
    }

    #[test]
    fn older_generations_hold_a_redirect_and_a_followers_empty_read_for_the_whole_wait() {
        let mut r = Reads::new();
        let redirect = ReadOutcome { redirect: true, ..at(3) };
        let e = r.arrive(1, head(Some(3), 500), redirect, "-", || (0, 0), true, true);
        assert!(matches!(e[..], [Effect::Delay { request: 1, wait_ms: 500, .. }]));
        let e = r.arrive(2, head(Some(3), 500), at(3), "-", || (0, 0), true, false);
        assert!(matches!(e[..], [Effect::Delay { request: 2, .. }]), "a follower's empty read");
        let e = r.arrive(3, head(Some(3), 500), redirect, "r", || (0, 0), false, true);
        assert_eq!(e, vec![Effect::Respond { client: "c".into(), response: "r" }], "later releases answer a redirect at once");
        assert_eq!(r.parked_count(), 0);
        let e = r.fire(Due::Answer(2, head(Some(3), 500)), 1, live(1), |_, _| (at(3), "late"));
        assert_eq!(e, vec![Effect::Respond { client: "c".into(), response: "late" }]);
    }

    fn consumer_fetch(fetch_offset: Option<u64>, reset: OffsetReset, rack: Option<u32>) -> ConsumerFetchRequest {
        ConsumerFetchRequest {
            fetch_offset: fetch_offset.map(Offset), current_leader_epoch: None, max_records: 10, reset,
            validate_epoch: None, isolation_level: crate::replica::messages::IsolationLevel::ReadUncommitted,
            client_rack: rack.map(BrokerId),
        }
    }

    #[test]
    fn a_lookup_by_time_before_0_10_1_is_refused_and_nothing_else_is() {
        use crate::generation::Generation;
        let replica = Replica::new(BrokerId(1), vec![BrokerId(1), BrokerId(2)], Generation::TruncateToHw, 1, 30_000);
        let log = Replica::new_log(Generation::TruncateToHw);
        let by_time = consumer_fetch(None, OffsetReset::Timestamp(5), None);
        let old = ReadRules { no_timestamp_lookup: true, rack_selector: false };
        let (refused, preferred) = read_for_consumer(&replica, &log, &by_time, old);
        assert_eq!((refused.error, preferred), (Some(KafkaError::UnsupportedVersion), None));
        let (answer, _) = read_for_consumer(&replica, &log, &by_time, ReadRules::default());
        assert_ne!(answer.error, Some(KafkaError::UnsupportedVersion), "0.10.1 looks it up");
        let latest = consumer_fetch(None, OffsetReset::Latest, None);
        assert_ne!(read_for_consumer(&replica, &log, &latest, old).0.error, Some(KafkaError::UnsupportedVersion));
        assert!(outcome_of(&refused, None).error);
    }

    #[test]
    fn without_the_selector_a_rack_changes_nothing() {
        use crate::generation::Generation;
        let replica = Replica::new(BrokerId(1), vec![BrokerId(1), BrokerId(2)], Generation::StrictMinIsr, 1, 30_000);
        let log = Replica::new_log(Generation::StrictMinIsr);
        let req = consumer_fetch(Some(0), OffsetReset::Latest, Some(2));
        let plain = read_for_consumer(&replica, &log, &req, ReadRules::default());
        assert_eq!(plain.1, None);
        assert_eq!(plain.0, replica.handle_consumer_fetch(&log, &req));
    }

    #[test]
    fn a_crash_cancels_every_wait() {
        let mut r = Reads::new();
        r.arrive(1, head(Some(3), 500), at(3), "-", || (3, 3), false, true);
        r.parked(1, 10);
        let (cancels, requests) = r.drop_all();
        assert_eq!((cancels, requests), (vec![Effect::Cancel(10)], vec![1]));
        assert_eq!(r.parked_count(), 0);
        // the next park takes the key anew
        r.arrive(2, head(Some(3), 500), at(3), "-", || (9, 9), false, true);
        assert!(r.check((9, 9), |_, _| panic!("same key")).is_empty());
    }
}
