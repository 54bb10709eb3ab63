//! One broker's replication traffic as a state machine without I/O: the follower's fetcher
//! (one request in flight, the request timeout, `replica.fetch.backoff.ms`, a connection
//! reset, which answer is taken) and the leader's fetch serving with its long poll
//! (`replica.fetch.wait.max.ms`, parked fetches) and OffsetsForLeaderEpoch.
//!
//! A [`Fetcher`] is told what happened (an input: a method call with what the caller read of
//! the broker and its replica) and answers with the [`Effect`]s to carry out, in order. The
//! caller carries them out one by one; an effect that needs something the engine cannot
//! know is a *continuation*: [`Effect::SendNext`] (read the broker and replica, call
//! [`Fetcher::send_next`]), [`Effect::Settle`] (call [`Fetcher::settle`]) and
//! [`Effect::Complete`] (read for the request, call [`Fetcher::complete`]); their effects are
//! carried out before the next effect of the list, so a list reads as the statement it comes
//! from. An effect that creates a handle ([`Effect::Send`], [`Effect::Backoff`],
//! [`Effect::Park`]) is reported back with [`Fetcher::sent`], [`Fetcher::armed`] or
//! [`Fetcher::parked`].
//!
//! The engine is generic over the caller's handles: `R` a request as carried on the network
//! (answers echo it; equality is the answer-identity rule, so the Python bindings compare
//! objects by identity), `T` a timer. It drops a handle it lets go of, so a handle's drop must
//! not call back into its owner; the caller's timer callbacks reach the engine through
//! [`Fetcher::fire`] with the [`Due`] they carry.
//!
//! It is the statement of `epochlab.sim.broker.Broker`'s fetcher and fetch-serving methods
//! (the `reference` backend runs those), step for step, so both backends give the same run;
//! `src/bindings/plane.rs` (`epochlab._core.FetchPlane`) turns inputs and effects into Python
//! calls. Kafka sources, by rule:
//!
//! * one request in flight per fetcher, the next one sent when its answer is handled:
//!   `AbstractFetcherThread.maybeFetch` / `processFetchRequest` (and `maybeTruncate` for the
//!   OffsetsForLeaderEpoch round, `ReplicaFetcherThread` / `RemoteLeaderEndPoint`
//!   `fetchEpochEndOffsets`);
//! * a failed request (timed out, connection lost, leader unreachable) or an answer asking to
//!   wait delays the partition by `replica.fetch.backoff.ms`:
//!   `AbstractFetcherThread.handlePartitionsWithErrors` -> `delayPartitions(..., fetchBackOffMs)`;
//! * a request given up on (timeout, a new leader, a restart) is never answered: `NetworkClient`
//!   closes the connection of a timed-out request (`handleTimedOutRequests`) and a disconnect
//!   fails what is in flight at once (`handleDisconnections`), so its late answer never
//!   reaches the fetcher, and TCP delivers no duplicates;
//! * a follower fetch that finds no data waits up to `replica.fetch.wait.max.ms` for data
//!   (`ReplicaManager.fetchMessages` answers at once with data, an error or a diverging epoch,
//!   else parks a `DelayedFetch`); it is answered with what a read gives when new data is
//!   appended (`DelayedFetch.tryComplete`, from `Partition.tryCompleteDelayedRequests`), at the
//!   wait's end (`DelayedFetch.onExpiration` / `onComplete`), or when the broker stops leading
//!   (`ReplicaManager.completeDelayedOperationsWhenNotPartitionLeader`, after the produce
//!   purgatory: the broker orders the two, `Broker._complete_when_not_leader`); its answer
//!   changes no state, so nothing else is tried after it;
//! * KRaft fetches carry the broker epoch (KIP-903: `RemoteLeaderEndPoint.buildFetch` passes
//!   `brokerEpochSupplier()` to `FetchRequest.Builder.forReplica`);
//! * an OffsetsForLeaderEpoch request is answered at once (`KafkaApis` ->
//!   `ReplicaManager.lastOffsetForLeaderEpoch`, no purgatory);
//! * a timer runs only in the broker incarnation that set it, while the broker is alive (a
//!   restarted broker is a new process: `Broker._if_alive`).
//!
//! ```
//! use epochlab::sim::fetcher::{Effect, FetchConfig, Fetcher, FollowerView, Liveness};
//! use epochlab::replica::follower::FollowerRequest;
//! use epochlab::replica::messages::OffsetsForLeaderEpochRequest;
//! use epochlab::types::BrokerId;
//! let config = FetchConfig { request_timeout_ms: 30_000, backoff_ms: 1_000, wait_max_ms: 500, kraft: false };
//! let mut f: Fetcher<u32, u32> = Fetcher::new(config);
//! assert!(matches!(f.start()[..], [Effect::SendNext]));
//! let request = FollowerRequest::OffsetsForLeaderEpoch(OffsetsForLeaderEpochRequest {
//!     replica_id: BrokerId(2), session: 1, leader_epoch: None, current_leader_epoch: None });
//! let view = FollowerView { live: Liveness { alive: true, incarnation: 1 }, request: Some(request),
//!                           leader: Some(BrokerId(1)), leader_reachable: true };
//! let effects = f.send_next(view).unwrap();
//! assert!(matches!(effects[..], [Effect::Send { leader: BrokerId(1), token: 2, timeout_ms: 30_000, .. }]));
//! f.sent(7, 70);  // the request went out as handle 7, its timeout is timer 70
//! assert!(!f.take_answer(Some(&8)) && f.take_answer(Some(&7)));
//! ```

use crate::error::ArgumentError;
use crate::replica::follower::FollowerRequest;
use crate::replica::messages::{AlterPartitionRequest, FetchResponse, OffsetsForLeaderEpochResponse};
use crate::replica::FollowerAction;
use crate::types::BrokerId;

/// The brokers' settings the engine follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchConfig {
    /// How long a fetcher waits for an answer before giving the request up.
    pub request_timeout_ms: i64,
    /// `replica.fetch.backoff.ms`.
    pub backoff_ms: i64,
    /// `replica.fetch.wait.max.ms`; 0 answers every fetch at once.
    pub wait_max_ms: i64,
    /// Whether fetches carry the broker epoch (KRaft, KIP-903).
    pub kraft: bool,
}

/// Whether the broker's process runs, and which one (a restart is a new incarnation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Liveness {
    pub alive: bool,
    pub incarnation: i64,
}

/// What [`Fetcher::send_next`] reads of the broker, its replica and the network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FollowerView {
    pub live: Liveness,
    /// The replica's next request (`Replica::next_request`); `None` when it has none to send.
    pub request: Option<FollowerRequest>,
    /// The leader the replica follows, if it knows one.
    pub leader: Option<BrokerId>,
    /// Whether the leader's node is up on the network (`Network::is_alive`); read only when
    /// there is a leader.
    pub leader_reachable: bool,
}

/// What a timer does when it fires, set when it was armed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Due<R> {
    /// The request timeout of the request sent with this token.
    Timeout(u64),
    /// The end of a backoff taken with this token: send the next request.
    Retry(u64),
    /// The end of a parked fetch's wait.
    Expire(R),
}

/// One thing to carry out, in list order (module doc).
#[derive(Debug, PartialEq, Eq)]
pub enum Effect<R, T> {
    /// Post `request` to `leader` (`on_fetch` or `on_offsets_for_leader_epoch`), arm
    /// [`Due::Timeout`]`(token)` after `timeout_ms` in incarnation `incarnation`, and report
    /// both handles with [`Fetcher::sent`].
    Send { leader: BrokerId, request: FollowerRequest, token: u64, timeout_ms: i64, incarnation: i64 },
    /// Arm [`Due::Retry`]`(token)` after `delay_ms` in the broker's current incarnation and
    /// report the timer with [`Fetcher::armed`].
    Backoff { token: u64, delay_ms: i64 },
    /// Cancel this timer.
    Cancel(T),
    /// Continuation: read a [`FollowerView`] now and call [`Fetcher::send_next`].
    SendNext,
    /// Continuation: call [`Fetcher::settle`] with this action (after the effects before it).
    Settle(FollowerAction),
    /// Arm [`Due::Expire`]`(request)` after `wait_ms` in the broker's current incarnation and
    /// report the pair with [`Fetcher::parked`].
    Park { request: R, wait_ms: i64 },
    /// Continuation: read for this parked fetch now (`Replica::complete_parked_fetch`) and call
    /// [`Fetcher::complete`].
    Complete(R),
    /// Post the answer to `request` to follower `to` (`on_fetch_response`).
    Respond { to: BrokerId, request: R, response: FetchResponse },
    /// Post the answer to `request` to follower `to` (`on_offsets_for_leader_epoch_response`).
    RespondOffsets { to: BrokerId, request: R, response: OffsetsForLeaderEpochResponse },
    /// `Broker._send_alter_partition(proposal)`: the leader's ISR proposal (KIP-497).
    SendAlterPartition(AlterPartitionRequest),
    /// `Broker._drain_events()`: log what the replica recorded.
    DrainEvents,
    /// `Broker._note_state()`: the log may have moved (flush and checkpoint timers).
    NoteState,
    /// `Broker._try_complete_delayed()`: the purgatories may complete something.
    TryCompleteDelayed,
    /// `Broker._check_parked_reads()`: a follower's HW moved; its fetch-from-follower reads.
    CheckParkedReads,
    /// `Broker._halt()`: the broker exits (a truncation it may not do, KAFKA-4039).
    Halt,
}

/// One broker's fetcher and fetch-serving state (module doc).
#[derive(Debug)]
pub struct Fetcher<R, T> {
    config: FetchConfig,
    /// Counts the fetcher's requests and restarts; a timer or answer of an older one does
    /// nothing.
    token: u64,
    /// The request timeout or the backoff of the fetcher, if armed.
    timer: Option<T>,
    /// `(leader, token)` of the request in flight.
    dst: Option<(BrokerId, u64)>,
    /// That request's handle (answers echo it).
    sent: Option<R>,
    /// Follower fetches held by this leader, with their wait timers, oldest first.
    parked: Vec<(R, T)>,
}

impl<R: PartialEq, T> Fetcher<R, T> {
    /// A fetcher with nothing in flight, nothing armed, nothing parked and token 0.
    pub fn new(config: FetchConfig) -> Self {
        Fetcher { config, token: 0, timer: None, dst: None, sent: None, parked: Vec::new() }
    }

    /// The settings this fetcher follows.
    pub fn config(&self) -> FetchConfig {
        self.config
    }

    /// The current token: it counts the fetcher's requests and restarts.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// The request in flight, if any.
    pub fn in_flight(&self) -> Option<&R> {
        self.sent.as_ref()
    }

    /// How many follower fetches are parked.
    pub fn parked_count(&self) -> usize {
        self.parked.len()
    }

    /// Every request handle held: the one in flight, then the parked ones.
    pub fn requests(&self) -> impl Iterator<Item = &R> {
        self.sent.iter().chain(self.parked.iter().map(|(r, _)| r))
    }

    /// Every timer handle held: the fetcher's, then the parked fetches'.
    pub fn timers(&self) -> impl Iterator<Item = &T> {
        self.timer.iter().chain(self.parked.iter().map(|(_, t)| t))
    }

    fn cancel_timer(&mut self, effects: &mut Vec<Effect<R, T>>) {
        if let Some(t) = self.timer.take() {
            effects.push(Effect::Cancel(t));
        }
    }

    // -- follower ------------------------------------------------------------------------

    /// The broker became a follower (or of a new leader): a request to the previous leader is
    /// abandoned (its answer will not be taken), the timer cancelled, the next request sent.
    pub fn start(&mut self) -> Vec<Effect<R, T>> {
        self.token += 1;
        self.sent = None;
        let mut effects = Vec::with_capacity(2);
        self.cancel_timer(&mut effects);
        effects.push(Effect::SendNext);
        effects
    }

    /// Send the replica's next request, if the broker is alive and the replica has a request
    /// and a leader: a new token; a leader down on the network is a failed request (back off);
    /// else [`Effect::Send`] (a KRaft fetch carrying the incarnation as its broker epoch).
    /// An incarnation below 0 cannot be a broker epoch: refused, after the token moved.
    pub fn send_next(&mut self, view: FollowerView) -> Result<Vec<Effect<R, T>>, ArgumentError> {
        let FollowerView { live, request, leader, leader_reachable } = view;
        if !live.alive {
            return Ok(Vec::new());
        }
        let (Some(request), Some(leader)) = (request, leader) else { return Ok(Vec::new()) };
        self.token += 1;
        let token = self.token;
        if !leader_reachable {
            return Ok(vec![Effect::Backoff { token, delay_ms: self.config.backoff_ms }]);
        }
        let request = match request {
            FollowerRequest::Fetch(mut f) if self.config.kraft => {
                f.broker_epoch = Some(u64::try_from(live.incarnation).map_err(|_| ArgumentError::OutOfDomain {
                    argument: "incarnation",
                    value: i128::from(live.incarnation),
                    domain: "0..=2^63-1 (a broker epoch)",
                })?);
                FollowerRequest::Fetch(f)
            }
            other => other,
        };
        self.dst = Some((leader, token));
        Ok(vec![Effect::Send { leader, request, token, timeout_ms: self.config.request_timeout_ms,
                               incarnation: live.incarnation }])
    }

    /// [`Effect::Send`] was carried out: `request` is in flight, `timer` its timeout.
    pub fn sent(&mut self, request: R, timer: T) {
        self.sent = Some(request);
        self.timer = Some(timer);
    }

    /// [`Effect::Backoff`] was carried out: `timer` is the fetcher's timer.
    pub fn armed(&mut self, timer: T) {
        self.timer = Some(timer);
    }

    /// The answer-identity rule: whether an answer echoing `request` (`None`: it echoes
    /// nothing) answers the request in flight; if so, that request is no longer in flight.
    /// An answer to a request given up on is not taken (module doc: `NetworkClient`).
    pub fn take_answer(&mut self, request: Option<&R>) -> bool {
        let same = match (&self.sent, request) {
            (Some(sent), Some(echo)) => sent == echo,
            (None, None) => true,
            _ => false,
        };
        if same {
            self.sent = None;
        }
        same
    }

    /// A taken fetch answer was handled by the replica with `action`: log its events, note the
    /// log's state, settle, then the follower's fetch-from-follower reads.
    pub fn after_fetch_response(&mut self, action: FollowerAction) -> Vec<Effect<R, T>> {
        vec![Effect::DrainEvents, Effect::NoteState, Effect::Settle(action), Effect::CheckParkedReads]
    }

    /// A taken OffsetsForLeaderEpoch answer was handled by the replica with `action`: log its
    /// events, note the log's state, settle.
    pub fn after_offsets_response(&mut self, action: FollowerAction) -> Vec<Effect<R, T>> {
        vec![Effect::DrainEvents, Effect::NoteState, Effect::Settle(action)]
    }

    /// What the fetcher does after a handled answer: nothing for an answer of an abandoned
    /// session ([`FollowerAction::Discard`]); the broker exits on [`FollowerAction::Halt`];
    /// otherwise nothing is in flight any more and the timer is cancelled, then the next
    /// request goes out now ([`FollowerAction::Continue`]), after the backoff
    /// ([`FollowerAction::Backoff`]) or when new metadata arrives ([`FollowerAction::Fenced`]).
    pub fn settle(&mut self, action: FollowerAction) -> Vec<Effect<R, T>> {
        let mut effects = Vec::with_capacity(2);
        match action {
            FollowerAction::Discard => return effects,
            FollowerAction::Halt => {
                effects.push(Effect::Halt);
                return effects;
            }
            FollowerAction::Continue | FollowerAction::Backoff | FollowerAction::Fenced => {}
        }
        self.dst = None;
        self.cancel_timer(&mut effects);
        match action {
            FollowerAction::Continue => effects.push(Effect::SendNext),
            FollowerAction::Backoff => effects.push(Effect::Backoff { token: self.token, delay_ms: self.config.backoff_ms }),
            FollowerAction::Fenced | FollowerAction::Discard | FollowerAction::Halt => {}
        }
        effects
    }

    /// The request timeout of the request sent with `token`: if it is still the fetcher's
    /// current one, the request is given up (its late answer will not be taken) and the
    /// fetcher backs off; a stale token does nothing.
    pub fn timeout(&mut self, token: u64) -> Vec<Effect<R, T>> {
        if token != self.token {
            return Vec::new();
        }
        self.sent = None;
        vec![Effect::Backoff { token, delay_ms: self.config.backoff_ms }]
    }

    /// The connection to `peer` was reset (its process died): the request in flight to it, if
    /// it is the current one and the broker is alive, fails at once and the fetcher backs off
    /// instead of waiting for the timeout (`NetworkClient.handleDisconnections`). `peer` is
    /// `None` for a node that is not a broker.
    pub fn reset(&mut self, peer: Option<BrokerId>, alive: bool) -> Vec<Effect<R, T>> {
        let Some((leader, sent_token)) = self.dst else { return Vec::new() };
        if sent_token != self.token || peer != Some(leader) || !alive {
            return Vec::new();
        }
        let mut effects = Vec::with_capacity(2);
        self.cancel_timer(&mut effects);
        self.dst = None;
        self.sent = None;
        effects.push(Effect::Backoff { token: self.token, delay_ms: self.config.backoff_ms });
        effects
    }

    /// Give up the request in flight without sending another (the partition left the
    /// thread that fetched it and waits to join another's next fetch): a new token, so
    /// neither its answer nor its timer does anything; the timer cancelled.
    pub fn abandon(&mut self) -> Vec<Effect<R, T>> {
        self.token += 1;
        self.sent = None;
        self.dst = None;
        let mut effects = Vec::with_capacity(1);
        self.cancel_timer(&mut effects);
        effects
    }

    /// The fetcher stops (the broker halts): nothing in flight, its timer cancelled.
    pub fn stop(&mut self) -> Vec<Effect<R, T>> {
        self.dst = None;
        let mut effects = Vec::with_capacity(1);
        self.cancel_timer(&mut effects);
        effects
    }

    /// A timer armed in incarnation `set_in` fired with `due`, the broker now `live`. It does
    /// nothing unless the broker is alive in that incarnation; then a timeout is
    /// [`Fetcher::timeout`], a backoff's end sends the next request if its token is still the
    /// current one, and a wait's end answers the parked fetch (if still parked: answering
    /// parked fetches at a role change takes them out).
    pub fn fire(&mut self, due: &Due<R>, set_in: i64, live: Liveness) -> Vec<Effect<R, T>> {
        if !live.alive || live.incarnation != set_in {
            return Vec::new();
        }
        match due {
            Due::Timeout(token) => self.timeout(*token),
            Due::Retry(token) if *token == self.token => vec![Effect::SendNext],
            Due::Retry(_) => Vec::new(),
            Due::Expire(request) => match self.parked.iter().position(|(parked, _)| parked == request) {
                Some(i) => vec![Effect::Complete(self.parked.remove(i).0)],
                None => Vec::new(),
            },
        }
    }

    // -- leader --------------------------------------------------------------------------

    /// A follower fetch `request` from `follower`, which the replica answered with `response`
    /// (and maybe an ISR proposal). A refused fetch, or a diverging one, has replica events to
    /// log (KAFKA-13141: a diverging fetch's offset taken as the follower's LEO); the proposal
    /// goes to the controller; the purgatories are tried; then a fetch that found no data (no
    /// error, no batches, no diverging epoch) is parked for `replica.fetch.wait.max.ms` when
    /// that is above 0, and every other is answered now (`ReplicaManager.fetchMessages`).
    pub fn serve(&mut self, request: R, follower: BrokerId, response: FetchResponse,
                 proposal: Option<AlterPartitionRequest>) -> Vec<Effect<R, T>> {
        let refused = response.error.is_some() || response.diverging_epoch.is_some();
        let empty = !refused && response.batches.is_empty();
        let mut effects = Vec::with_capacity(4);
        if refused {
            effects.push(Effect::DrainEvents);
        }
        if let Some(p) = proposal {
            effects.push(Effect::SendAlterPartition(p));
        }
        effects.push(Effect::TryCompleteDelayed);
        if empty && self.config.wait_max_ms > 0 {
            effects.push(Effect::Park { request, wait_ms: self.config.wait_max_ms });
        } else {
            effects.push(Effect::Respond { to: follower, request, response });
        }
        effects
    }

    /// [`Effect::Park`] was carried out: `request` waits with `timer`.
    pub fn parked(&mut self, request: R, timer: T) {
        self.parked.push((request, timer));
    }

    /// A parked fetch `request` from `follower` is answered with what a read gives now
    /// (`DelayedFetch.onComplete`, `Replica::complete_parked_fetch`: no follower-state update,
    /// so no ISR proposal and nothing another purgatory waits for): the answer alone.
    pub fn complete(&mut self, request: R, follower: BrokerId, response: FetchResponse) -> Vec<Effect<R, T>> {
        vec![Effect::Respond { to: follower, request, response }]
    }

    /// Answer every parked fetch now, oldest first, each wait timer cancelled (new data, or
    /// the broker stops leading: `ReplicaManager.completeDelayedOperationsWhenNotPartitionLeader`).
    pub fn answer_parked(&mut self) -> Vec<Effect<R, T>> {
        let parked = std::mem::take(&mut self.parked);
        let mut effects = Vec::with_capacity(2 * parked.len());
        for (request, timer) in parked {
            effects.push(Effect::Cancel(timer));
            effects.push(Effect::Complete(request));
        }
        effects
    }

    /// Forget the parked fetches (a crash or shutdown: their timers find nothing); handed
    /// back for the caller to drop.
    pub fn clear_parked(&mut self) -> Vec<(R, T)> {
        std::mem::take(&mut self.parked)
    }

    /// An OffsetsForLeaderEpoch `request` from `follower`, answered by the replica with
    /// `response`: answered at once (`ReplicaManager.lastOffsetForLeaderEpoch`, no purgatory).
    pub fn serve_offsets(&mut self, request: R, follower: BrokerId, response: OffsetsForLeaderEpochResponse)
                         -> Vec<Effect<R, T>> {
        vec![Effect::RespondOffsets { to: follower, request, response }]
    }
}

#[cfg(test)]
mod tests;
