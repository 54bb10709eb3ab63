//! The engine's rules, one by one, with integer handles: requests are numbered as the test
//! hands them to [`Fetcher::sent`] / [`Fetcher::serve`], timers as it hands them to
//! [`Fetcher::sent`] / [`Fetcher::armed`] / [`Fetcher::parked`].

use super::*;
use crate::batch::RecordBatch;
use crate::replica::messages::{FetchRequest, KafkaError, OffsetsForLeaderEpochRequest};
use crate::types::{LeaderEpoch, Offset};

type Engine = Fetcher<u32, u32>;
type Effects = Vec<Effect<u32, u32>>;

const CONFIG: FetchConfig = FetchConfig { request_timeout_ms: 30_000, backoff_ms: 1_000, wait_max_ms: 500, kraft: false };
const LEADER: BrokerId = BrokerId(1);
const FOLLOWER: BrokerId = BrokerId(2);
const LIVE: Liveness = Liveness { alive: true, incarnation: 1 };

fn fetch() -> FollowerRequest {
    FollowerRequest::Fetch(FetchRequest {
        replica_id: FOLLOWER,
        session: 1,
        fetch_offset: Offset(3),
        current_leader_epoch: Some(LeaderEpoch(4)),
        last_fetched_epoch: None,
        log_start_offset: Offset(0),
        broker_epoch: None,
    })
}

fn offsets_request() -> FollowerRequest {
    FollowerRequest::OffsetsForLeaderEpoch(OffsetsForLeaderEpochRequest {
        replica_id: FOLLOWER,
        session: 1,
        leader_epoch: Some(LeaderEpoch(3)),
        current_leader_epoch: Some(LeaderEpoch(4)),
    })
}

fn view(request: FollowerRequest) -> FollowerView {
    FollowerView { live: LIVE, request: Some(request), leader: Some(LEADER), leader_reachable: true }
}

fn response(batches: usize, error: Option<KafkaError>, diverging: bool) -> FetchResponse {
    let batches = (0..batches)
        .map(|i| RecordBatch::new(Offset(3 + i as u64), LeaderEpoch(4), vec![7], None, false, false).unwrap())
        .collect();
    FetchResponse {
        error,
        batches,
        high_watermark: Offset(3),
        log_start_offset: Offset(0),
        log_end_offset: Offset(4),
        diverging_epoch: diverging.then_some((LeaderEpoch(3), Offset(2))),
    }
}

/// `start`, then the `SendNext` it asks for: the request goes out as handle `request` with
/// timeout timer `timer`. Returns the token it was sent with.
fn send(f: &mut Engine, request: u32, timer: u32) -> u64 {
    assert_eq!(f.start().last(), Some(&Effect::SendNext));
    sent_next(f, request, timer)
}

/// `send_next` of a fetch, reported sent as `request` / `timer`; the token it was sent with.
fn sent_next(f: &mut Engine, request: u32, timer: u32) -> u64 {
    let effects = f.send_next(view(fetch())).unwrap();
    let [Effect::Send { leader, token, timeout_ms, .. }] = effects[..] else { panic!("{effects:?}") };
    assert_eq!((leader, timeout_ms), (LEADER, 30_000));
    f.sent(request, timer);
    token
}

fn is_send_next(effects: &Effects) -> bool {
    matches!(effects[..], [Effect::SendNext])
}

#[test]
fn a_fetcher_has_one_request_in_flight_and_sends_the_next_when_its_answer_is_settled() {
    let mut f = Engine::new(CONFIG);
    let token = send(&mut f, 1, 10);
    assert_eq!((token, f.in_flight()), (2, Some(&1)));
    // the answer is taken once: a copy of it (a duplicate) is not
    assert!(f.take_answer(Some(&1)));
    assert!(!f.take_answer(Some(&1)));
    assert_eq!(f.in_flight(), None);
    let after = f.after_fetch_response(FollowerAction::Continue);
    assert_eq!(after, vec![Effect::DrainEvents, Effect::NoteState, Effect::Settle(FollowerAction::Continue),
                           Effect::CheckParkedReads]);
    assert_eq!(f.settle(FollowerAction::Continue), vec![Effect::Cancel(10), Effect::SendNext]);
    assert_eq!(sent_next(&mut f, 3, 30), 3);
    // a new start abandons the request in flight: its answer is not taken
    assert!(matches!(f.start()[..], [Effect::Cancel(30), Effect::SendNext]));
    assert!(!f.take_answer(Some(&3)));
    assert_eq!(f.token(), 4);
}

#[test]
fn nothing_is_sent_without_a_request_a_leader_or_a_live_broker() {
    let mut f = Engine::new(CONFIG);
    let dead = FollowerView { live: Liveness { alive: false, incarnation: 1 }, ..view(fetch()) };
    let leaderless = FollowerView { leader: None, ..view(fetch()) };
    let idle = FollowerView { request: None, ..view(fetch()) };
    for v in [dead, leaderless, idle] {
        assert_eq!(f.send_next(v).unwrap(), vec![]);
    }
    assert_eq!(f.token(), 0);
}

#[test]
fn a_stale_tokens_timeout_does_nothing() {
    let mut f = Engine::new(CONFIG);
    let first = send(&mut f, 1, 10);
    assert!(f.take_answer(Some(&1)));
    assert_eq!(f.settle(FollowerAction::Continue), vec![Effect::Cancel(10), Effect::SendNext]);
    let second = sent_next(&mut f, 2, 20);
    assert_eq!(f.fire(&Due::Timeout(first), 1, LIVE), vec![]);
    assert_eq!(f.in_flight(), Some(&2));
    assert_eq!(f.fire(&Due::Timeout(second), 1, LIVE), vec![Effect::Backoff { token: second, delay_ms: 1_000 }]);
    assert_eq!(f.in_flight(), None);
}

#[test]
fn an_answer_to_a_request_given_up_on_is_ignored() {
    let mut f = Engine::new(CONFIG);
    let token = send(&mut f, 1, 10);
    assert_eq!(f.timeout(token), vec![Effect::Backoff { token, delay_ms: 1_000 }]);
    assert!(!f.take_answer(Some(&1)));
    // identity as in the Python statement (`resp.request is self._fetch_sent`): with nothing
    // in flight, an answer that echoes no request is the one waited for
    assert!(f.take_answer(None));
    // but not while a request is in flight
    sent_next(&mut f, 2, 20);
    assert!(!f.take_answer(None));
    assert!(f.take_answer(Some(&2)));
}

#[test]
fn an_error_answer_backs_off_and_the_backoffs_end_sends_again_unless_the_token_moved() {
    let mut f = Engine::new(CONFIG);
    let token = send(&mut f, 1, 10);
    assert!(f.take_answer(Some(&1)));
    assert_eq!(f.settle(FollowerAction::Backoff), vec![Effect::Cancel(10), Effect::Backoff { token, delay_ms: 1_000 }]);
    f.armed(11);
    assert!(is_send_next(&f.fire(&Due::Retry(token), 1, LIVE)));
    // a restart of the fetcher in between makes the backoff's end do nothing
    assert!(matches!(f.start()[..], [Effect::Cancel(11), Effect::SendNext]));
    assert_eq!(f.fire(&Due::Retry(token), 1, LIVE), vec![]);
}

#[test]
fn a_leader_down_on_the_network_is_a_failed_request() {
    let mut f = Engine::new(CONFIG);
    let down = FollowerView { leader_reachable: false, ..view(fetch()) };
    assert_eq!(f.send_next(down).unwrap(), vec![Effect::Backoff { token: 1, delay_ms: 1_000 }]);
    assert_eq!(f.in_flight(), None);
    // nothing went out, so a reset from the leader has nothing to fail
    assert_eq!(f.reset(Some(LEADER), true), vec![]);
}

#[test]
fn a_reset_fails_the_request_in_flight_to_that_peer_only() {
    let mut f = Engine::new(CONFIG);
    let token = send(&mut f, 1, 10);
    assert_eq!(f.reset(Some(BrokerId(3)), true), vec![]);
    assert_eq!(f.reset(None, true), vec![]);
    assert_eq!(f.reset(Some(LEADER), false), vec![]);
    assert_eq!(f.in_flight(), Some(&1));
    assert_eq!(f.reset(Some(LEADER), true), vec![Effect::Cancel(10), Effect::Backoff { token, delay_ms: 1_000 }]);
    assert!(!f.take_answer(Some(&1)));
    // once failed, a second reset finds nothing in flight
    assert_eq!(f.reset(Some(LEADER), true), vec![]);
}

#[test]
fn a_reset_leaves_alone_a_request_of_an_older_token() {
    let mut f = Engine::new(CONFIG);
    send(&mut f, 1, 10);
    // a restart of the fetcher that finds nothing to send: the old request's destination is
    // still recorded, with a token that is no longer current
    assert!(matches!(f.start()[..], [Effect::Cancel(10), Effect::SendNext]));
    assert_eq!(f.send_next(FollowerView { request: None, ..view(fetch()) }).unwrap(), vec![]);
    assert_eq!(f.reset(Some(LEADER), true), vec![]);
}

#[test]
fn halt_discard_and_fenced_answers() {
    let mut f = Engine::new(CONFIG);
    send(&mut f, 1, 10);
    assert!(f.take_answer(Some(&1)));
    assert_eq!(f.settle(FollowerAction::Discard), vec![]);
    assert_eq!(f.settle(FollowerAction::Halt), vec![Effect::Halt]);
    // neither touched the timer: the fenced settle cancels it and sends nothing
    assert_eq!(f.settle(FollowerAction::Fenced), vec![Effect::Cancel(10)]);
    // nothing is in flight any more: a reset from the leader has nothing to fail
    assert_eq!(f.reset(Some(LEADER), true), vec![]);
    assert_eq!(f.stop(), vec![]);
}

#[test]
fn the_offsets_for_leader_epoch_round() {
    let mut f = Engine::new(FetchConfig { kraft: true, ..CONFIG });
    assert!(is_send_next(&f.start()));
    let effects = f.send_next(view(offsets_request())).unwrap();
    // KIP-903's broker epoch is a fetch field: the OffsetsForLeaderEpoch request goes as is
    let [Effect::Send { request: ref r, token: 2, .. }] = effects[..] else { panic!("{effects:?}") };
    assert_eq!(r, &offsets_request());
    f.sent(1, 10);
    assert!(f.take_answer(Some(&1)));
    assert_eq!(f.after_offsets_response(FollowerAction::Continue),
               vec![Effect::DrainEvents, Effect::NoteState, Effect::Settle(FollowerAction::Continue)]);
    // the leader's side: answered at once, to the follower that asked
    let answer = OffsetsForLeaderEpochResponse { error: None, end_offset: Some(Offset(5)), answer: Some((LeaderEpoch(3), Offset(5))) };
    assert_eq!(f.serve_offsets(9, FOLLOWER, answer.clone()),
               vec![Effect::RespondOffsets { to: FOLLOWER, request: 9, response: answer }]);
}

#[test]
fn kraft_fetches_carry_the_incarnation_as_broker_epoch() {
    let mut f = Engine::new(FetchConfig { kraft: true, ..CONFIG });
    let live = Liveness { alive: true, incarnation: 7 };
    let effects = f.send_next(FollowerView { live, ..view(fetch()) }).unwrap();
    let [Effect::Send { request: FollowerRequest::Fetch(ref r), incarnation: 7, .. }] = effects[..] else { panic!("{effects:?}") };
    assert_eq!(r.broker_epoch, Some(7));
    let negative = Liveness { alive: true, incarnation: -1 };
    assert!(matches!(f.send_next(FollowerView { live: negative, ..view(fetch()) }),
                     Err(ArgumentError::OutOfDomain { argument: "incarnation", value: -1, .. })));
    // before KRaft the field stays empty
    let mut zk = Engine::new(CONFIG);
    let effects = zk.send_next(FollowerView { live, ..view(fetch()) }).unwrap();
    let [Effect::Send { request: FollowerRequest::Fetch(ref r), .. }] = effects[..] else { panic!("{effects:?}") };
    assert_eq!(r.broker_epoch, None);
}

#[test]
fn a_fetch_with_data_an_error_or_a_divergence_is_answered_at_once() {
    let mut f = Engine::new(CONFIG);
    let data = f.serve(1, FOLLOWER, response(1, None, false), None);
    assert_eq!(data, vec![Effect::TryCompleteDelayed,
                          Effect::Respond { to: FOLLOWER, request: 1, response: response(1, None, false) }]);
    let refused = f.serve(2, FOLLOWER, response(0, Some(KafkaError::FencedLeaderEpoch), false), None);
    assert_eq!(refused[..2], [Effect::DrainEvents, Effect::TryCompleteDelayed]);
    assert!(matches!(refused[2], Effect::Respond { request: 2, .. }));
    let diverging = f.serve(3, FOLLOWER, response(0, None, true), None);
    assert_eq!(diverging[0], Effect::DrainEvents);
    assert!(matches!(diverging[2], Effect::Respond { request: 3, .. }));
    assert_eq!(f.parked_count(), 0);
}

#[test]
fn the_isr_proposal_goes_before_the_purgatories_and_the_answer() {
    let mut f = Engine::new(CONFIG);
    let proposal = AlterPartitionRequest { broker_id: LEADER, leader_epoch: LeaderEpoch(4), partition_epoch: 2,
                                           new_isr: vec![LEADER, FOLLOWER], broker_epochs: vec![] };
    let effects = f.serve(1, FOLLOWER, response(1, None, false), Some(proposal.clone()));
    assert_eq!(effects[..2], [Effect::SendAlterPartition(proposal.clone()), Effect::TryCompleteDelayed]);
    // a parked fetch's completion updates no follower state: it proposes nothing, and no
    // other purgatory has anything new to complete
    let completed = f.complete(1, FOLLOWER, response(0, None, false));
    assert_eq!(completed, vec![Effect::Respond { to: FOLLOWER, request: 1, response: response(0, None, false) }]);
}

#[test]
fn a_fetch_without_data_is_parked_and_answered_at_the_waits_end() {
    let mut f = Engine::new(CONFIG);
    let effects = f.serve(5, FOLLOWER, response(0, None, false), None);
    assert_eq!(effects, vec![Effect::TryCompleteDelayed, Effect::Park { request: 5, wait_ms: 500 }]);
    f.parked(5, 50);
    f.parked(6, 60);
    assert_eq!(f.parked_count(), 2);
    assert_eq!(f.requests().copied().collect::<Vec<_>>(), vec![5, 6]);
    assert_eq!(f.fire(&Due::Expire(6), 1, LIVE), vec![Effect::Complete(6)]);
    assert_eq!(f.fire(&Due::Expire(6), 1, LIVE), vec![]); // answered once
    assert_eq!(f.parked_count(), 1);
    // no long poll: an empty fetch is answered at once
    let mut eager = Engine::new(FetchConfig { wait_max_ms: 0, ..CONFIG });
    assert!(matches!(eager.serve(7, FOLLOWER, response(0, None, false), None)[..],
                     [Effect::TryCompleteDelayed, Effect::Respond { request: 7, .. }]));
}

#[test]
fn parked_fetches_are_answered_on_new_data_oldest_first_and_their_waits_end_finds_nothing() {
    let mut f = Engine::new(CONFIG);
    f.parked(5, 50);
    f.parked(6, 60);
    assert_eq!(f.answer_parked(),
               vec![Effect::Cancel(50), Effect::Complete(5), Effect::Cancel(60), Effect::Complete(6)]);
    assert_eq!(f.parked_count(), 0);
    assert_eq!(f.fire(&Due::Expire(5), 1, LIVE), vec![]);
    assert_eq!(f.answer_parked(), vec![]);
}

#[test]
fn a_restart_forgets_everything_of_the_previous_incarnation() {
    let mut f = Engine::new(CONFIG);
    let token = send(&mut f, 1, 10);
    f.parked(5, 50);
    // the broker crashes: parked fetches are forgotten, its timers find a dead broker
    assert_eq!(f.clear_parked(), vec![(5, 50)]);
    let dead = Liveness { alive: false, incarnation: 1 };
    assert_eq!(f.fire(&Due::Timeout(token), 1, dead), vec![]);
    // restarted as incarnation 2: the old incarnation's timers do nothing
    let restarted = Liveness { alive: true, incarnation: 2 };
    assert_eq!(f.fire(&Due::Timeout(token), 1, restarted), vec![]);
    assert_eq!(f.fire(&Due::Retry(token), 1, restarted), vec![]);
    assert_eq!(f.fire(&Due::Expire(5), 1, restarted), vec![]);
    // the new incarnation starts fetching; the old request's answer is not taken
    assert!(matches!(f.start()[..], [Effect::Cancel(10), Effect::SendNext]));
    let effects = f.send_next(FollowerView { live: restarted, ..view(fetch()) }).unwrap();
    assert!(matches!(effects[..], [Effect::Send { incarnation: 2, .. }]));
    f.sent(2, 20);
    assert!(!f.take_answer(Some(&1)));
    assert_eq!(f.timers().copied().collect::<Vec<_>>(), vec![20]);
    assert_eq!(f.fire(&Due::Timeout(f.token()), 2, restarted).len(), 1);
}

#[test]
fn a_stopped_fetcher_has_nothing_in_flight_and_no_timer() {
    let mut f = Engine::new(CONFIG);
    send(&mut f, 1, 10);
    assert_eq!(f.stop(), vec![Effect::Cancel(10)]);
    assert_eq!(f.reset(Some(LEADER), true), vec![]);
    assert_eq!(f.timers().count(), 0);
}

#[test]
fn an_abandoned_request_is_neither_answered_nor_timed_out_and_nothing_replaces_it() {
    let mut f = Engine::new(CONFIG);
    let live = Liveness { alive: true, incarnation: 1 };
    send(&mut f, 1, 10);
    let token = f.token();
    assert_eq!(f.abandon(), vec![Effect::Cancel(10)]);
    assert!(f.token() > token);
    assert!(!f.take_answer(Some(&1)));
    assert_eq!(f.fire(&Due::Timeout(token), 1, live), vec![]);
    assert_eq!(f.timers().count(), 0);
}
