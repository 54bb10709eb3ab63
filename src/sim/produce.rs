//! One broker's produce path as a state machine without I/O: the client connections a leader
//! reads produce requests from (one request of a connection at a time, what the client's
//! close does to the requests behind it), the answer by `acks`, and the produce purgatory:
//! acks=all requests and transaction markers parked until the high watermark covers them,
//! their timeouts, and their completion when the broker stops leading or shuts down.
//!
//! A [`ProducePath`] is told what happened and answers with the [`Effect`]s to carry out, in
//! order, as [`super::fetcher::Fetcher`] does. [`Effect::Handle`] is a *continuation*: the
//! caller verifies the request (KIP-890, the broker's own Python code) or appends it to the
//! replica and reports the replica's answer with [`ProducePath::appended`];
//! [`Effect::TryCompleteDelayed`] asks the caller to complete the purgatories, this engine's
//! with [`ProducePath::complete`]. Their effects are carried out before the next effect of the
//! list. [`Effect::Park`] creates a timer, reported back with [`ProducePath::parked`].
//!
//! The engine is generic over the caller's handles: `R` a request as carried on the network,
//! `T` a timer, `P` a response the caller made itself (a verification's refusal). It is the
//! statement of `epochlab.sim.broker.Broker`'s produce methods (`on_produce`,
//! `_handle_produce`, `_append_produce`, `_answer_produce`, `on_client_disconnect`,
//! `_answer_parked_produces`, `_expire_produce`; the `reference` backend runs those), step for
//! step, so both backends give the same run; `src/bindings/plane.rs` drives it. Kafka
//! sources, by rule:
//!
//! * one request of a connection at a time: `SocketServer`'s processor mutes a channel when a
//!   request is received and unmutes it when its response is sent
//!   (`KafkaChannel.ChannelMuteState`), so a request parked in the purgatory holds back the
//!   requests pipelined behind it;
//! * a client that closes its connection (its request timed out): the broker does not see the
//!   close while the channel is muted; the first response written after the close goes out,
//!   the next request is read and handled, and the write of its response fails, which closes
//!   the channel (`Selector.close`, `CloseMode.NOTIFY_ONLY`): the requests behind it are never
//!   read. New requests come on a new connection;
//! * acks=0 is never answered, acks=1 and an error at once, acks=all when the high watermark
//!   passes the batch's last offset (`ReplicaManager.appendRecords` -> `DelayedProduce`,
//!   `Partition.checkEnoughReplicasReachOffset`), or with REQUEST_TIMED_OUT at the request's
//!   timeout (`DelayedProduce.onExpiration`);
//! * a purgatory is tried after anything that may move the high watermark
//!   (`Partition.tryCompleteDelayedRequests`); a broker that stops leading fails what waits
//!   (`ReplicaManager.completeDelayedOperationsWhenNotPartitionLeader`);
//! * a transaction marker (WriteTxnMarkers from the coordinator) waits in the same purgatory
//!   as an acks=all write (`ReplicaManager.appendRecords` with `requiredAcks` -1, origin
//!   COORDINATOR): answered with its offset when the high watermark passes it, with the error
//!   the completion gives, or REQUEST_TIMED_OUT at its timeout; produces complete before
//!   markers wherever the broker tries both (`Broker._try_complete_delayed`);
//! * a timer runs only in the broker incarnation that set it, while the broker is alive.
//!
//! ```
//! use epochlab::replica::messages::{Acks, ProduceResponse};
//! use epochlab::sim::produce::{Effect, Head, ProducePath};
//! use epochlab::types::Offset;
//! let mut p: ProducePath<&str, u32, ()> = ProducePath::new();
//! let head = Head { client: "p1".into(), request_id: 1, acks: Acks::All, timeout_ms: 30_000 };
//! assert!(matches!(p.arrive("m1", head.clone())[..], [Effect::Handle { request: "m1", .. }]));
//! let written = ProduceResponse { error: None, base_offset: Some(Offset(0)), last_offset: Some(Offset(0)), duplicate: false };
//! assert!(matches!(p.appended(head, written, 5)[..], [Effect::Park { token: 1, timeout_ms: 30_000 }, Effect::TryCompleteDelayed]));
//! assert!(p.parked(1, 10).is_none());  // the timeout's timer is 10
//! // the high watermark is not at offset 1 yet: nothing completes
//! assert!(p.complete(None, |_| None, 6).is_empty());
//! // now it is: the timer is cancelled, the answer goes, the connection is free again
//! let done = p.complete(None, |required| (required <= 1).then_some(None), 7);
//! assert!(matches!(done[..], [Effect::Cancel(10), Effect::Respond { .. }]));
//! ```

use std::collections::VecDeque;

use rustc_hash::{FxHashMap, FxHashSet};

use super::fetcher::Liveness;
use crate::replica::messages::{Acks, KafkaError, ProduceResponse};

/// What the engine reads of a produce request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    /// The client's node name (its connection's end).
    pub client: String,
    pub request_id: i64,
    pub acks: Acks,
    /// How long the request may wait in the purgatory.
    pub timeout_ms: i64,
}

/// A client connection: the client, and how many of its connections had closed before it.
type Conn = (String, u64);

/// The answer to send.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply<P> {
    /// Made by the engine (or the replica): the caller turns it into a message.
    Response(ProduceResponse),
    /// Made by the caller (a refused verification) and handed to [`ProducePath::answer`].
    Given(P),
}

/// What a timer does when it fires, set when it was armed.
#[derive(Debug, PartialEq, Eq)]
pub enum Due<R> {
    /// The timeout of the parked request with this token.
    Expire(u64),
    /// Read the connection's next request (`gen`: the connection it came on).
    Handle { request: R, head: Head, gen: u64 },
    /// The timeout of the parked transaction marker with this token.
    ExpireMarker(u64),
}

/// One thing to carry out, in list order (module doc).
#[derive(Debug, PartialEq, Eq)]
pub enum Effect<R, T, P> {
    /// Continuation: verify the request (when KIP-890 asks for it) or append it to the
    /// replica, then call [`ProducePath::appended`] with the replica's answer.
    Handle { request: R, head: Head },
    /// Post `reply` to `head.client` (`on_produce_response`).
    Respond { head: Head, reply: Reply<P> },
    /// Arm [`Due::Expire`]`(token)` after `timeout_ms` in the broker's current incarnation and
    /// report the timer with [`ProducePath::parked`].
    Park { token: u64, timeout_ms: i64 },
    /// Arm [`Due::Handle`] now (0 ms) in the broker's current incarnation: the connection's
    /// next request is read once this event is over.
    Next { request: R, head: Head, gen: u64 },
    /// Cancel this timer.
    Cancel(T),
    /// Continuation: complete what the purgatories hold that can complete
    /// (`Broker._try_complete_delayed`), this engine's through [`ProducePath::complete`] and
    /// [`ProducePath::complete_markers`].
    TryCompleteDelayed,
    /// Arm [`Due::ExpireMarker`]`(token)` after `timeout_ms` in the broker's current
    /// incarnation and report the timer with [`ProducePath::marker_parked`].
    ParkMarker { token: u64, timeout_ms: i64 },
    /// Post the answer to a WriteTxnMarkers request to `to` (`on_write_txn_markers_response`):
    /// `error`, or the marker's `offset`.
    AnswerMarker { to: String, request_id: i64, error: Option<KafkaError>, offset: Option<u64> },
}

type Effects<R, T, P> = Vec<Effect<R, T, P>>;

/// An acks=all request in the purgatory.
#[derive(Debug)]
struct Parked<T> {
    token: u64,
    /// The offset the high watermark must reach: the batch's last offset + 1.
    required: u64,
    head: Head,
    timer: Option<T>,
    /// The append's answer, sent when the request completes without error.
    written: ProduceResponse,
}

/// A transaction marker in the purgatory.
#[derive(Debug)]
struct ParkedMarker<T> {
    token: u64,
    /// The marker's offset + 1.
    required: u64,
    request_id: i64,
    /// Who asked (the coordinator's node name).
    to: String,
    timer: Option<T>,
}

/// One broker's produce path (module doc).
#[derive(Debug)]
pub struct ProducePath<R, T, P> {
    /// How many of each client's connections have closed.
    conn_gen: FxHashMap<String, u64>,
    /// The connections with a request being handled.
    busy: FxHashSet<Conn>,
    /// The requests read from a busy connection's socket meanwhile, in order.
    queue: FxHashMap<Conn, VecDeque<(R, Head)>>,
    /// The connection each request being handled came on, by (client, request id).
    req_gen: FxHashMap<(String, i64), u64>,
    /// Connections the client closed whose first response since went out: the next write fails.
    closed_written: FxHashSet<Conn>,
    /// When each open connection's latest response was written.
    last_write: FxHashMap<Conn, i64>,
    parked: Vec<Parked<T>>,
    markers: Vec<ParkedMarker<T>>,
    tokens: u64,
    _given: std::marker::PhantomData<fn(P)>,
}

impl<R, T, P> Default for ProducePath<R, T, P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R, T, P> ProducePath<R, T, P> {
    pub fn new() -> Self {
        Self {
            conn_gen: FxHashMap::default(),
            busy: FxHashSet::default(),
            queue: FxHashMap::default(),
            req_gen: FxHashMap::default(),
            closed_written: FxHashSet::default(),
            last_write: FxHashMap::default(),
            parked: Vec::new(),
            markers: Vec::new(),
            tokens: 0,
            _given: std::marker::PhantomData,
        }
    }

    fn current(&self, client: &str) -> u64 {
        self.conn_gen.get(client).copied().unwrap_or(0)
    }

    /// A produce request arrives (`Broker.on_produce`): read now, or queued behind the request
    /// its connection is busy with.
    pub fn arrive(&mut self, request: R, head: Head) -> Effects<R, T, P> {
        let conn = (head.client.clone(), self.current(&head.client));
        if self.busy.contains(&conn) {
            self.queue.entry(conn).or_default().push_back((request, head));
            return Vec::new();
        }
        self.busy.insert(conn);
        self.handle(request, head, None)
    }

    /// `Broker._handle_produce`: note the request's connection (`gen`, or the client's current
    /// one), then verify or append it.
    fn handle(&mut self, request: R, head: Head, gen: Option<u64>) -> Effects<R, T, P> {
        let gen = gen.unwrap_or_else(|| self.current(&head.client));
        self.req_gen.insert((head.client.clone(), head.request_id), gen);
        vec![Effect::Handle { request, head }]
    }

    /// The replica appended the request (or refused it) with `written`
    /// (`Broker._append_produce`, after the replica's events and the parked follower fetches
    /// are seen to): answer by `acks`, or park an acks=all write until the high watermark
    /// covers it.
    pub fn appended(&mut self, head: Head, written: ProduceResponse, now_ms: i64) -> Effects<R, T, P> {
        let mut effects = match (head.acks, written.error, written.last_offset) {
            (Acks::None, _, _) => self.answer(head, None, now_ms),
            (Acks::All, None, Some(last)) => {
                self.tokens += 1;
                let token = self.tokens;
                let timeout_ms = head.timeout_ms;
                self.parked.push(Parked { token, required: last.0 + 1, head, timer: None, written });
                vec![Effect::Park { token, timeout_ms }]
            }
            // acks=1, an error, or (never from the replica) a write without offsets
            _ => self.answer(head, Some(Reply::Response(written)), now_ms),
        };
        effects.push(Effect::TryCompleteDelayed);
        effects
    }

    /// The timeout timer of the request parked as `token`. `Some(timer)` when nothing is
    /// parked as `token` (the caller drops the timer).
    pub fn parked(&mut self, token: u64, timer: T) -> Option<T> {
        super::arm(self.parked.iter_mut().map(|p| (p.token, &mut p.timer)), token, timer)
    }

    /// `Broker._answer_produce`: send `reply` (`None`: acks=0, no answer) and read the
    /// connection's next request, unless the client closed the connection and this was the
    /// second response since.
    pub fn answer(&mut self, head: Head, reply: Option<Reply<P>>, now_ms: i64) -> Effects<R, T, P> {
        let answered = reply.is_some();
        let key = (head.client, head.request_id);
        let gen = self.req_gen.remove(&key);
        let client = key.0;
        let mut effects = Vec::new();
        if let Some(reply) = reply {
            effects.push(Effect::Respond { head: Head { client: client.clone(), request_id: key.1, ..head }, reply });
        }
        let Some(gen) = gen else { return effects };
        let conn = (client, gen);
        if answered {
            if gen == self.current(&conn.0) {
                self.last_write.insert(conn.clone(), now_ms);
            } else if self.closed_written.contains(&conn) {
                self.forget(&conn); // the client closed it: the second write fails
                return effects;
            } else {
                self.closed_written.insert(conn.clone()); // the first write since the close goes out
            }
        }
        match self.queue.get_mut(&conn).and_then(VecDeque::pop_front) {
            Some((request, head)) => effects.push(Effect::Next { request, head, gen }),
            None => self.forget(&conn),
        }
        effects
    }

    /// A connection with nothing left to read: idle (marked busy again by its next request)
    /// or closed (its queued requests dropped).
    fn forget(&mut self, conn: &Conn) {
        self.busy.remove(conn);
        self.queue.remove(conn);
        self.closed_written.remove(conn);
    }

    /// The client closed its connection at `closed_ms` (`Broker.on_client_disconnect`): a
    /// response written since then was the first write after the close.
    pub fn disconnect(&mut self, client: &str, closed_ms: i64) {
        let gen = self.current(client);
        let conn = (client.to_owned(), gen);
        if self.last_write.remove(&conn).unwrap_or(-1) >= closed_ms && self.busy.contains(&conn) {
            self.closed_written.insert(conn);
        }
        self.conn_gen.insert(client.to_owned(), gen + 1);
    }

    /// `Broker._answer_parked_produces`: answer the parked requests that are done, in the order
    /// they were parked. `force`: every one is done, with this error. Else `completion(required)`
    /// says whether the request needing the high watermark at `required` is done, and with what
    /// error (`Replica::produce_completion`).
    pub fn complete(&mut self, force: Option<KafkaError>, mut completion: impl FnMut(u64) -> Option<Option<KafkaError>>,
                    now_ms: i64) -> Effects<R, T, P> {
        let mut effects = Vec::new();
        let (waiting, done) = split_done(std::mem::take(&mut self.parked), force, |p| p.required, &mut completion);
        self.parked = waiting;
        for (parked, error) in done {
            if let Some(timer) = parked.timer {
                effects.push(Effect::Cancel(timer));
            }
            let response = match error {
                None => parked.written,
                Some(error) => ProduceResponse::error(error),
            };
            effects.extend(self.answer(parked.head, Some(Reply::Response(response)), now_ms));
        }
        effects
    }

    /// A timer of incarnation `incarnation` fired; `live` is the broker now. Nothing happens
    /// unless the broker is alive in that incarnation (`Broker._if_alive`).
    pub fn fire(&mut self, due: Due<R>, incarnation: i64, live: Liveness, now_ms: i64) -> Effects<R, T, P> {
        if !(live.alive && live.incarnation == incarnation) {
            return Vec::new();
        }
        match due {
            Due::Expire(token) => {
                let Some(i) = self.parked.iter().position(|p| p.token == token) else { return Vec::new() };
                let parked = self.parked.remove(i);
                let response = ProduceResponse::error(KafkaError::RequestTimedOut);
                self.answer(parked.head, Some(Reply::Response(response)), now_ms)
            }
            Due::Handle { request, head, gen } => self.handle(request, head, Some(gen)),
            Due::ExpireMarker(token) => {
                let Some(i) = self.markers.iter().position(|m| m.token == token) else { return Vec::new() };
                let marker = self.markers.remove(i);
                vec![Effect::AnswerMarker { to: marker.to, request_id: marker.request_id,
                                            error: Some(KafkaError::RequestTimedOut), offset: None }]
            }
        }
    }

    /// The replica wrote a transaction marker at `offset` for request `request_id` from `to`
    /// (`Broker.on_write_txn_markers`): it waits until the high watermark passes it.
    pub fn park_marker(&mut self, request_id: i64, to: String, offset: u64, timeout_ms: i64) -> Effects<R, T, P> {
        self.tokens += 1;
        let token = self.tokens;
        self.markers.push(ParkedMarker { token, required: offset + 1, request_id, to, timer: None });
        vec![Effect::ParkMarker { token, timeout_ms }]
    }

    /// The timeout timer of the marker parked as `token` (as [`ProducePath::parked`]).
    pub fn marker_parked(&mut self, token: u64, timer: T) -> Option<T> {
        super::arm(self.markers.iter_mut().map(|m| (m.token, &mut m.timer)), token, timer)
    }

    /// `Broker._answer_parked_markers`: answer the parked markers that are done, in the order
    /// they were parked (`force` and `completion` as for [`ProducePath::complete`]).
    pub fn complete_markers(&mut self, force: Option<KafkaError>,
                            mut completion: impl FnMut(u64) -> Option<Option<KafkaError>>) -> Effects<R, T, P> {
        let mut effects = Vec::new();
        let (waiting, done) = split_done(std::mem::take(&mut self.markers), force, |m| m.required, &mut completion);
        self.markers = waiting;
        for (marker, error) in done {
            if let Some(timer) = marker.timer {
                effects.push(Effect::Cancel(timer));
            }
            let offset = error.is_none().then(|| marker.required - 1);
            effects.push(Effect::AnswerMarker { to: marker.to, request_id: marker.request_id, error, offset });
        }
        effects
    }

    /// The transactional state goes (a crash or a shutdown, `Broker._clear_transactional`):
    /// the parked markers are forgotten, their timers returned to be cancelled.
    pub fn clear_markers(&mut self) -> Vec<T> {
        std::mem::take(&mut self.markers).into_iter().filter_map(|m| m.timer).collect()
    }

    /// How many transaction markers wait in the purgatory.
    pub fn parked_marker_count(&self) -> usize {
        self.markers.len()
    }

    /// A crash: the purgatory is forgotten (its timers stay armed and find a dead incarnation)
    /// and so are the connections. What was held is returned for the caller to drop.
    pub fn crash(&mut self) -> (Vec<T>, Vec<R>) {
        let timers = std::mem::take(&mut self.parked).into_iter().filter_map(|p| p.timer).collect();
        (timers, self.reset_connections())
    }

    /// A new process (a start or a crash): no connection is open. The clients' count of
    /// closed connections stays (their next connections are new ones). Returns the queued
    /// requests for the caller to drop.
    pub fn reset_connections(&mut self) -> Vec<R> {
        self.busy.clear();
        self.req_gen.clear();
        self.closed_written.clear();
        self.last_write.clear();
        self.queue.drain().flat_map(|(_, q)| q.into_iter().map(|(r, _)| r)).collect()
    }

    /// How many requests wait in the purgatory.
    pub fn parked_count(&self) -> usize {
        self.parked.len()
    }

    /// The requests the engine holds (for the caller's garbage collector).
    pub fn requests(&self) -> impl Iterator<Item = &R> {
        self.queue.values().flat_map(|q| q.iter().map(|(r, _)| r))
    }

    /// The timers the engine holds.
    pub fn timers(&self) -> impl Iterator<Item = &T> {
        self.parked.iter().filter_map(|p| p.timer.as_ref()).chain(self.markers.iter().filter_map(|m| m.timer.as_ref()))
    }
}

/// The entries of a purgatory that are done, each with its error, and the ones that wait, in
/// order: `force` makes every one done with that error, else `completion(required(entry))`
/// says (`Replica::produce_completion`).
fn split_done<E>(entries: Vec<E>, force: Option<KafkaError>, required: impl Fn(&E) -> u64,
                 completion: &mut impl FnMut(u64) -> Option<Option<KafkaError>>) -> (Vec<E>, Vec<(E, Option<KafkaError>)>) {
    let mut waiting = Vec::new();
    let mut done = Vec::new();
    for entry in entries {
        let outcome = match force {
            Some(error) => Some(Some(error)),
            None => completion(required(&entry)),
        };
        match outcome {
            Some(error) => done.push((entry, error)),
            None => waiting.push(entry),
        }
    }
    (waiting, done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Offset;

    type Path = ProducePath<u32, u32, &'static str>;

    fn head(client: &str, id: i64, acks: Acks) -> Head {
        Head { client: client.into(), request_id: id, acks, timeout_ms: 1_000 }
    }

    fn written(last: u64) -> ProduceResponse {
        ProduceResponse { error: None, base_offset: Some(Offset(last)), last_offset: Some(Offset(last)), duplicate: false }
    }

    fn live(incarnation: i64) -> Liveness {
        Liveness { alive: true, incarnation }
    }

    fn responded(effects: &[Effect<u32, u32, &'static str>]) -> Vec<(i64, Option<KafkaError>)> {
        effects.iter().filter_map(|e| match e {
            Effect::Respond { head, reply: Reply::Response(r) } => Some((head.request_id, r.error)),
            Effect::Respond { head, reply: Reply::Given(_) } => Some((head.request_id, None)),
            _ => None,
        }).collect()
    }

    #[test]
    fn a_busy_connection_queues_and_the_answer_reads_the_next() {
        let mut p = Path::new();
        assert_eq!(p.arrive(1, head("a", 1, Acks::Leader)).len(), 1);
        assert!(p.arrive(2, head("a", 2, Acks::Leader)).is_empty(), "queued behind request 1");
        assert_eq!(p.arrive(3, head("b", 1, Acks::Leader)).len(), 1, "another client's connection is free");
        let effects = p.appended(head("a", 1, Acks::Leader), written(0), 10);
        assert_eq!(responded(&effects), vec![(1, None)]);
        assert!(matches!(effects[1], Effect::Next { request: 2, gen: 0, .. }));
        assert!(matches!(effects[2], Effect::TryCompleteDelayed));
        // the next request is handled when its timer fires, on the connection it came on
        let effects = p.fire(Due::Handle { request: 2, head: head("a", 2, Acks::Leader), gen: 0 }, 1, live(1), 10);
        assert!(matches!(effects[..], [Effect::Handle { request: 2, .. }]));
        let effects = p.appended(head("a", 2, Acks::Leader), written(1), 11);
        assert!(matches!(effects[..], [Effect::Respond { .. }, Effect::TryCompleteDelayed]), "nothing queued: idle");
        assert_eq!(p.arrive(4, head("a", 3, Acks::Leader)).len(), 1, "an idle connection reads at once");
    }

    #[test]
    fn acks_zero_is_never_answered_but_frees_the_connection() {
        let mut p = Path::new();
        p.arrive(1, head("a", 1, Acks::None));
        p.arrive(2, head("a", 2, Acks::None));
        let effects = p.appended(head("a", 1, Acks::None), written(0), 0);
        assert!(responded(&effects).is_empty());
        assert!(matches!(effects[0], Effect::Next { request: 2, .. }));
    }

    #[test]
    fn an_error_is_answered_at_once_even_for_acks_all() {
        let mut p = Path::new();
        p.arrive(1, head("a", 1, Acks::All));
        let effects = p.appended(head("a", 1, Acks::All), ProduceResponse::error(KafkaError::NotEnoughReplicas), 0);
        assert_eq!(responded(&effects), vec![(1, Some(KafkaError::NotEnoughReplicas))]);
        assert_eq!(p.parked_count(), 0);
    }

    #[test]
    fn acks_all_waits_for_the_high_watermark_in_order() {
        let mut p = Path::new();
        p.arrive(1, head("a", 1, Acks::All));
        p.appended(head("a", 1, Acks::All), written(4), 0);
        assert!(p.parked(1, 100).is_none());
        p.arrive(2, head("b", 1, Acks::All));
        p.appended(head("b", 1, Acks::All), written(9), 0);
        assert!(p.parked(2, 200).is_none());
        assert_eq!(p.parked(7, 700), Some(700), "no such parked request: the timer comes back");
        let hw = 6;
        let effects = p.complete(None, |required| (required <= hw).then_some(None), 5);
        assert_eq!(effects[0], Effect::Cancel(100));
        assert_eq!(responded(&effects), vec![(1, None)]);
        assert_eq!(p.parked_count(), 1);
        let effects = p.complete(None, |_| Some(Some(KafkaError::NotEnoughReplicasAfterAppend)), 6);
        assert_eq!(responded(&effects), vec![(1, Some(KafkaError::NotEnoughReplicasAfterAppend))]);
        assert_eq!(p.parked_count(), 0);
    }

    #[test]
    fn a_forced_completion_fails_every_parked_request() {
        let mut p = Path::new();
        for (id, last) in [(1, 0), (2, 1)] {
            p.arrive(id as u32, head(&format!("c{id}"), id, Acks::All));
            p.appended(head(&format!("c{id}"), id, Acks::All), written(last), 0);
        }
        let effects = p.complete(Some(KafkaError::NotLeaderOrFollower), |_| panic!("not asked"), 1);
        assert_eq!(responded(&effects), vec![(1, Some(KafkaError::NotLeaderOrFollower)), (2, Some(KafkaError::NotLeaderOrFollower))]);
    }

    #[test]
    fn the_timeout_answers_request_timed_out_only_in_its_incarnation() {
        let mut p = Path::new();
        p.arrive(1, head("a", 1, Acks::All));
        p.appended(head("a", 1, Acks::All), written(0), 0);
        p.parked(1, 100);
        assert!(p.fire(Due::Expire(1), 1, live(2), 1_000).is_empty(), "a restarted broker's timer does nothing");
        assert!(p.fire(Due::Expire(1), 1, Liveness { alive: false, incarnation: 1 }, 1_000).is_empty());
        let effects = p.fire(Due::Expire(1), 1, live(1), 1_000);
        assert_eq!(responded(&effects), vec![(1, Some(KafkaError::RequestTimedOut))]);
        assert!(p.fire(Due::Expire(1), 1, live(1), 1_000).is_empty(), "answered once");
    }

    #[test]
    fn after_a_close_the_first_response_goes_and_the_second_write_closes_the_connection() {
        let mut p = Path::new();
        p.arrive(1, head("a", 1, Acks::All));
        p.appended(head("a", 1, Acks::All), written(0), 0);
        p.arrive(2, head("a", 2, Acks::All));
        p.arrive(3, head("a", 3, Acks::All));
        p.disconnect("a", 50); // nothing written since the close: the next write is the first
        let effects = p.complete(None, |_| Some(None), 60);
        assert_eq!(responded(&effects), vec![(1, None)]);
        assert!(matches!(effects.last(), Some(Effect::Next { request: 2, gen: 0, .. })), "the next request is read");
        p.fire(Due::Handle { request: 2, head: head("a", 2, Acks::All), gen: 0 }, 1, live(1), 60);
        let effects = p.appended(head("a", 2, Acks::All), ProduceResponse::error(KafkaError::NotLeaderOrFollower), 61);
        assert_eq!(responded(&effects), vec![(2, Some(KafkaError::NotLeaderOrFollower))]);
        assert!(!effects.iter().any(|e| matches!(e, Effect::Next { .. })), "the write failed: request 3 is never read");
        // a new request comes on the new connection and is read at once
        assert_eq!(p.arrive(4, head("a", 4, Acks::All)).len(), 1);
    }

    #[test]
    fn a_response_written_after_the_close_makes_the_next_one_fail() {
        let mut p = Path::new();
        p.arrive(1, head("a", 1, Acks::Leader));
        p.arrive(2, head("a", 2, Acks::Leader));
        p.arrive(3, head("a", 3, Acks::Leader));
        p.appended(head("a", 1, Acks::Leader), written(0), 40); // written at 40
        p.disconnect("a", 30); // closed at 30: the write at 40 was the first since
        p.fire(Due::Handle { request: 2, head: head("a", 2, Acks::Leader), gen: 0 }, 1, live(1), 41);
        let effects = p.appended(head("a", 2, Acks::Leader), written(1), 41);
        assert_eq!(responded(&effects), vec![(2, None)], "answered into the void");
        assert!(!effects.iter().any(|e| matches!(e, Effect::Next { .. })));
    }

    #[test]
    fn a_write_before_the_close_does_not_count() {
        let mut p = Path::new();
        p.arrive(1, head("a", 1, Acks::Leader));
        p.arrive(2, head("a", 2, Acks::Leader));
        p.arrive(3, head("a", 3, Acks::Leader));
        p.appended(head("a", 1, Acks::Leader), written(0), 20);
        p.disconnect("a", 30);
        p.fire(Due::Handle { request: 2, head: head("a", 2, Acks::Leader), gen: 0 }, 1, live(1), 31);
        let effects = p.appended(head("a", 2, Acks::Leader), written(1), 31);
        assert!(matches!(effects.last(), Some(Effect::TryCompleteDelayed)));
        assert!(effects.iter().any(|e| matches!(e, Effect::Next { request: 3, .. })), "first write since the close goes out");
    }

    #[test]
    fn a_crash_forgets_the_purgatory_and_the_connections_but_not_the_closed_count() {
        let mut p = Path::new();
        p.arrive(1, head("a", 1, Acks::All));
        p.appended(head("a", 1, Acks::All), written(0), 0);
        p.parked(1, 100);
        p.arrive(2, head("a", 2, Acks::All));
        p.disconnect("a", 5);
        let (timers, requests) = p.crash();
        assert_eq!((timers, requests), (vec![100], vec![2]));
        assert_eq!(p.parked_count(), 0);
        assert_eq!(p.arrive(3, head("a", 3, Acks::All)).len(), 1);
        assert_eq!(p.current("a"), 1);
    }

    #[test]
    fn a_marker_is_answered_with_its_offset_once_the_high_watermark_passes_it() {
        let mut p = Path::new();
        assert_eq!(p.park_marker(7, "coordinator".into(), 4, 30_000), vec![Effect::ParkMarker { token: 1, timeout_ms: 30_000 }]);
        assert!(p.marker_parked(1, 100).is_none());
        assert!(p.complete_markers(None, |required| (required <= 4).then_some(None)).is_empty(), "HW 4: not yet");
        let effects = p.complete_markers(None, |required| (required <= 5).then_some(None));
        assert_eq!(effects, vec![Effect::Cancel(100),
                                 Effect::AnswerMarker { to: "coordinator".into(), request_id: 7, error: None, offset: Some(4) }]);
        assert_eq!(p.parked_marker_count(), 0);
    }

    #[test]
    fn a_marker_fails_with_the_completions_error_or_its_timeout() {
        let mut p = Path::new();
        p.park_marker(1, "c".into(), 0, 30_000);
        p.park_marker(2, "c".into(), 1, 30_000);
        p.marker_parked(2, 200);
        let effects = p.fire(Due::ExpireMarker(2), 1, live(1), 0);
        assert_eq!(effects, vec![Effect::AnswerMarker { to: "c".into(), request_id: 2, error: Some(KafkaError::RequestTimedOut), offset: None }]);
        let effects = p.complete_markers(Some(KafkaError::NotLeaderOrFollower), |_| panic!("not asked"));
        assert_eq!(effects, vec![Effect::AnswerMarker { to: "c".into(), request_id: 1, error: Some(KafkaError::NotLeaderOrFollower), offset: None }]);
        p.park_marker(3, "c".into(), 2, 30_000);
        p.marker_parked(3, 300);
        assert_eq!(p.clear_markers(), vec![300]);
        assert_eq!(p.parked_marker_count(), 0);
    }

    #[test]
    fn a_given_reply_is_sent_as_given() {
        let mut p = Path::new();
        p.arrive(1, head("a", 1, Acks::All));
        let effects = p.answer(head("a", 1, Acks::All), Some(Reply::Given("refused")), 3);
        assert!(matches!(effects[..], [Effect::Respond { reply: Reply::Given("refused"), .. }]));
        assert_eq!(p.arrive(2, head("a", 2, Acks::All)).len(), 1, "the connection is free");
    }
}
