//! Two replicas exchanging messages directly, no simulator: the protocol on its own.

use super::follower::FollowerRequest;
use super::messages::*;
use super::*;

struct Node {
    replica: Replica,
    log: ReplicaLog,
}

fn node(id: u32, g: Generation) -> Node {
    Node { replica: Replica::new(BrokerId(id), vec![BrokerId(1), BrokerId(2)], g, 1, 30_000), log: Replica::new_log(g) }
}

fn decision(leader: u32, epoch: u32, isr: &[u32], partition_epoch: u32) -> LeaderAndIsr {
    LeaderAndIsr {
        leader: Some(BrokerId(leader)),
        leader_epoch: LeaderEpoch(epoch),
        isr: isr.iter().map(|&b| BrokerId(b)).collect(),
        partition_epoch,
        replicas: vec![BrokerId(1), BrokerId(2)],
        brokers: Vec::new(),
        metadata_version: 0,
    }
}

fn produce(n: &mut Node, values: &[u64]) -> ProduceResponse {
    let req = ProduceRequest { client: "p".into(), acks: Acks::Leader, records: values.to_vec(), producer: None, is_transactional: false };
    n.replica.handle_produce(&mut n.log, &req, 0).expect("a plain batch is valid")
}

/// Runs follower requests against the leader until the follower has nothing to do.
fn sync(leader: &mut Node, follower: &mut Node, now: u64) {
    for _ in 0..20 {
        match follower.replica.next_request(&follower.log) {
            Some(FollowerRequest::Fetch(req)) => {
                let (resp, _) = leader.replica.handle_fetch(&mut leader.log, &req, now);
                let empty = resp.batches.is_empty() && resp.diverging_epoch.is_none();
                follower.replica.handle_fetch_response(&mut follower.log, &req, &resp);
                if empty && follower.log.high_watermark() == leader.log.high_watermark() {
                    return;
                }
            }
            Some(FollowerRequest::OffsetsForLeaderEpoch(req)) => {
                let resp = leader.replica.handle_offsets_for_leader_epoch(&leader.log, &req);
                follower.replica.handle_offsets_for_leader_epoch_response(&mut follower.log, &req, &resp);
            }
            None => return,
        }
    }
}

fn values(log: &ReplicaLog) -> Vec<u64> {
    log.batches().iter().flat_map(|b| b.records().to_vec()).collect()
}

#[test]
fn follower_replicates_and_high_watermark_follows() {
    let (mut a, mut b) = (node(1, Generation::StrictMinIsr), node(2, Generation::StrictMinIsr));
    a.replica.apply_leader_and_isr(&mut a.log, &decision(1, 0, &[1, 2], 0), 0);
    b.replica.apply_leader_and_isr(&mut b.log, &decision(1, 0, &[1, 2], 0), 0);
    produce(&mut a, &[1, 2]);
    produce(&mut a, &[3]);
    sync(&mut a, &mut b, 10);
    assert_eq!(values(&b.log), vec![1, 2, 3]);
    assert_eq!(a.log.high_watermark(), Offset(3));
    assert_eq!(b.log.high_watermark(), Offset(3));
}

/// Seed 000: M3 only on the old leader A; B leads epoch 1 and writes M4; A returns as a
/// follower and truncates M3, then fetches M4.
fn seed_000(g: Generation) -> Vec<u64> {
    let (mut a, mut b) = (node(1, g), node(2, g));
    a.replica.apply_leader_and_isr(&mut a.log, &decision(1, 0, &[1, 2], 0), 0);
    b.replica.apply_leader_and_isr(&mut b.log, &decision(1, 0, &[1, 2], 0), 0);
    produce(&mut a, &[1]);
    produce(&mut a, &[2]);
    sync(&mut a, &mut b, 10);
    produce(&mut a, &[3]);
    b.replica.apply_leader_and_isr(&mut b.log, &decision(2, 1, &[2], 1), 20);
    produce(&mut b, &[4]);
    a.replica.crash(&mut a.log, false);
    a.replica.apply_leader_and_isr(&mut a.log, &decision(2, 1, &[2], 1), 30);
    sync(&mut b, &mut a, 40);
    values(&a.log)
}

#[test]
fn old_leader_truncates_its_unreplicated_suffix_in_every_generation() {
    for g in (0..6).filter_map(Generation::from_index) {
        assert_eq!(seed_000(g), vec![1, 2, 4], "{g:?}");
    }
}

#[test]
fn kip320_fences_a_stale_fetch() {
    let mut a = node(1, Generation::Kip320);
    a.replica.apply_leader_and_isr(&mut a.log, &decision(1, 3, &[1, 2], 0), 0);
    let req = FetchRequest {
        replica_id: BrokerId(2),
        session: 1,
        fetch_offset: Offset(0),
        current_leader_epoch: Some(LeaderEpoch(2)),
        last_fetched_epoch: None,
        log_start_offset: Offset(0),
        broker_epoch: None,
    };
    let (resp, proposal) = a.replica.handle_fetch(&mut a.log, &req, 0);
    assert_eq!((resp.error, proposal), (Some(KafkaError::FencedLeaderEpoch), None));
}

fn kraft_decision(isr: &[u32], partition_epoch: u32, brokers: &[(u32, u64)], version: u64) -> LeaderAndIsr {
    let mut d = decision(1, 1, isr, partition_epoch);
    d.brokers = brokers.iter().map(|&(b, e)| BrokerMetadata { broker_id: BrokerId(b), broker_epoch: e, shutting_down: false }).collect();
    d.metadata_version = version;
    d
}

fn fetch_from_2(offset: u64, broker_epoch: u64) -> FetchRequest {
    FetchRequest {
        replica_id: BrokerId(2),
        session: 1,
        fetch_offset: Offset(offset),
        current_leader_epoch: Some(LeaderEpoch(1)),
        last_fetched_epoch: None,
        log_start_offset: Offset(0),
        broker_epoch: Some(broker_epoch),
    }
}

#[test]
fn kip903_a_fetch_from_a_previous_incarnation_neither_updates_nor_expands() {
    let mut a = node(1, Generation::StrictMinIsr);
    a.replica.apply_leader_and_isr(&mut a.log, &kraft_decision(&[1], 0, &[(1, 1), (2, 2)], 1), 0);
    produce(&mut a, &[7, 8]);
    let (resp, proposal) = a.replica.handle_fetch(&mut a.log, &fetch_from_2(2, 1), 10);
    assert_eq!((resp.error, proposal), (Some(KafkaError::NotLeaderOrFollower), None));
    assert_eq!(a.replica.followers[&BrokerId(2)].log_end_offset, None);
    let (resp, proposal) = a.replica.handle_fetch(&mut a.log, &fetch_from_2(2, 2), 10);
    assert_eq!(resp.error, None);
    assert_eq!(proposal.map(|p| (p.new_isr, p.broker_epochs)), Some((vec![BrokerId(1), BrokerId(2)], vec![None, Some(2)])));
}

#[test]
fn kafka_15021_a_fenced_follower_outside_the_isr_does_not_hold_the_hw() {
    let mut a = node(1, Generation::StrictMinIsr);
    a.replica.min_insync_replicas = 1;
    a.replica.apply_leader_and_isr(&mut a.log, &kraft_decision(&[1, 2], 0, &[(1, 1), (2, 1)], 1), 0);
    a.replica.handle_fetch(&mut a.log, &fetch_from_2(0, 1), 5);
    // Broker 2 is fenced: the controller drops it from the ISR (no leader epoch bump in KRaft).
    a.replica.apply_leader_and_isr(&mut a.log, &kraft_decision(&[1], 1, &[(1, 1)], 2), 6);
    produce(&mut a, &[7]);
    assert_eq!(a.log.high_watermark(), Offset(1), "caught up 1 ms ago, but fenced: not counted");
}

#[test]
fn a_refused_alter_partition_stays_pending_until_new_metadata() {
    let mut a = node(1, Generation::StrictMinIsr);
    a.replica.apply_leader_and_isr(&mut a.log, &kraft_decision(&[1], 0, &[(1, 1), (2, 1)], 1), 0);
    let (_, proposal) = a.replica.handle_fetch(&mut a.log, &fetch_from_2(0, 1), 1);
    let request = proposal.expect("follower 2 is in sync");
    let answer = |error| AlterPartitionResponse { request: request.clone(), error, leader_epoch: LeaderEpoch(1), partition_epoch: 1, isr: vec![BrokerId(1)] };
    a.replica.handle_alter_partition_response(&mut a.log, &answer(Some(AlterPartitionError::InvalidUpdateVersion)), 2);
    assert_eq!(a.replica.pending_isr, Some(vec![BrokerId(1), BrokerId(2)]));
    assert_eq!(a.replica.maximal_isr(), vec![BrokerId(1), BrokerId(2)]);
    a.replica.handle_alter_partition_response(&mut a.log, &answer(Some(AlterPartitionError::IneligibleReplica)), 3);
    assert_eq!(a.replica.pending_isr, None);
}

#[test]
fn min_isr_above_the_replication_factor_by_generation() {
    for (g, appended) in [(Generation::DivergingEpoch, false), (Generation::StrictMinIsr, true)] {
        let mut a = node(1, g);
        a.replica.min_insync_replicas = 3;
        a.replica.apply_leader_and_isr(&mut a.log, &decision(1, 1, &[1, 2], 0), 0);
        let req = ProduceRequest { client: "p".into(), acks: Acks::All, records: vec![1], producer: None, is_transactional: false };
        let resp = a.replica.handle_produce(&mut a.log, &req, 0).expect("valid batch");
        assert_eq!(resp.error.is_none(), appended, "{g:?}");
        if !appended {
            assert_eq!(resp.error, Some(KafkaError::NotEnoughReplicas));
        }
    }
}

fn txn_produce(n: &mut Node, values: &[u64], epoch: u16, seq: u32) -> ProduceResponse {
    use crate::log::ProducerFields;
    use crate::types::{ProducerEpoch, ProducerId, Sequence};
    let producer = Some(ProducerFields { producer_id: ProducerId(7), producer_epoch: ProducerEpoch(epoch), base_sequence: Sequence(seq) });
    let req = ProduceRequest { client: "t".into(), acks: Acks::All, records: values.to_vec(), producer, is_transactional: true };
    n.replica.handle_produce(&mut n.log, &req, 0).expect("a transactional batch is valid")
}

fn marker(epoch: u16, coordinator_epoch: u32, commit: bool) -> WriteTxnMarkersRequest {
    use crate::types::{ProducerEpoch, ProducerId};
    WriteTxnMarkersRequest { producer_id: ProducerId(7), producer_epoch: ProducerEpoch(epoch), coordinator_epoch, commit, transaction_version: 0 }
}

fn committed_fetch(n: &Node, from: u64) -> ConsumerFetchResponse {
    let req = ConsumerFetchRequest {
        fetch_offset: Some(Offset(from)),
        current_leader_epoch: None,
        max_records: 100,
        reset: OffsetReset::Earliest,
        validate_epoch: None,
        isolation_level: IsolationLevel::ReadCommitted,
        client_rack: None,
    };
    n.replica.handle_consumer_fetch(&n.log, &req)
}

#[test]
fn read_committed_stops_at_the_lso_and_gets_the_aborted_list() {
    let (mut a, mut b) = (node(1, Generation::StrictMinIsr), node(2, Generation::StrictMinIsr));
    a.replica.apply_leader_and_isr(&mut a.log, &decision(1, 0, &[1, 2], 0), 0);
    b.replica.apply_leader_and_isr(&mut b.log, &decision(1, 0, &[1, 2], 0), 0);
    produce(&mut a, &[1]);
    txn_produce(&mut a, &[2, 3], 0, 0);
    sync(&mut a, &mut b, 10);
    assert_eq!(a.log.last_stable_offset(), Offset(1));
    assert_eq!(committed_fetch(&a, 0).records.iter().map(|r| r.1).collect::<Vec<_>>(), vec![1]);
    let resp = a.replica.handle_write_txn_markers(&mut a.log, &marker(0, 0, false), 20).expect("valid marker");
    assert_eq!((resp.error, resp.offset), (None, Some(Offset(3))));
    sync(&mut a, &mut b, 30);
    let fetched = committed_fetch(&a, 0);
    assert_eq!(fetched.last_stable_offset, Offset(4));
    assert_eq!(fetched.aborted_transactions, vec![(7, 1)]);
    assert_eq!(fetched.records.last().map(|r| r.4), Some(RecordKind::AbortMarker));
    // An older coordinator epoch is fenced, as is an older producer epoch.
    a.replica.handle_write_txn_markers(&mut a.log, &marker(1, 2, true), 40).expect("valid marker");
    let stale = a.replica.handle_write_txn_markers(&mut a.log, &marker(1, 1, true), 50).expect("valid request");
    assert_eq!(stale.error, Some(KafkaError::TransactionCoordinatorFenced));
    let zombie = a.replica.handle_write_txn_markers(&mut a.log, &marker(0, 3, true), 50).expect("valid request");
    assert_eq!(zombie.error, Some(KafkaError::InvalidProducerEpoch));
}

/// KIP-392: the leader names the follower in the client's rack once it has seen the follower's
/// LEO cover the fetch offset; from G4 only while that follower is in the ISR (KAFKA-14372),
/// G3 takes it anyway (2.4 - 2.7); never the leader's own rack, never before G3. A follower
/// serves a consumer fetch with a rack in the current epoch, not one without.
#[test]
fn preferred_read_replica_by_generation() {
    for (g, out_of_isr) in [(Generation::Kip320, Some(BrokerId(2))), (Generation::DivergingEpoch, None), (Generation::StrictMinIsr, None)] {
        let (mut a, mut b) = (node(1, g), node(2, g));
        a.replica.apply_leader_and_isr(&mut a.log, &decision(1, 1, &[1, 2], 0), 0);
        b.replica.apply_leader_and_isr(&mut b.log, &decision(1, 1, &[1, 2], 0), 0);
        produce(&mut a, &[1, 2]);
        assert_eq!(a.replica.preferred_read_replica(Offset(0), BrokerId(2)), None, "{g:?}: LEO not seen yet");
        sync(&mut a, &mut b, 10);
        assert_eq!(a.replica.preferred_read_replica(Offset(2), BrokerId(2)), Some(BrokerId(2)), "{g:?}");
        assert_eq!(a.replica.preferred_read_replica(Offset(3), BrokerId(2)), None, "{g:?}: past its LEO");
        assert_eq!(a.replica.preferred_read_replica(Offset(0), BrokerId(1)), None, "{g:?}: the leader's rack");
        assert_eq!(b.replica.preferred_read_replica(Offset(0), BrokerId(2)), None, "{g:?}: only a leader names one");
        let mut req = ConsumerFetchRequest {
            fetch_offset: Some(Offset(0)),
            current_leader_epoch: Some(LeaderEpoch(1)),
            max_records: 10,
            reset: OffsetReset::Earliest,
            validate_epoch: None,
            isolation_level: IsolationLevel::ReadUncommitted,
            client_rack: Some(BrokerId(2)),
        };
        let served = b.replica.handle_consumer_fetch(&b.log, &req);
        assert_eq!((served.error, served.records.len()), (None, 2), "{g:?}: the follower serves up to its HW");
        req.client_rack = None;
        assert_eq!(b.replica.handle_consumer_fetch(&b.log, &req).error, Some(KafkaError::NotLeaderOrFollower));
        // the ISR without broker 2 (same leader, new partition epoch)
        a.replica.apply_leader_and_isr(&mut a.log, &decision(1, 1, &[1], 1), 20);
        assert_eq!(a.replica.preferred_read_replica(Offset(2), BrokerId(2)), out_of_isr, "{g:?}: out of the ISR");
    }
    let (mut a, mut b) = (node(1, Generation::Kip279), node(2, Generation::Kip279));
    a.replica.apply_leader_and_isr(&mut a.log, &decision(1, 1, &[1, 2], 0), 0);
    b.replica.apply_leader_and_isr(&mut b.log, &decision(1, 1, &[1, 2], 0), 0);
    produce(&mut a, &[1]);
    sync(&mut a, &mut b, 10);
    assert_eq!(a.replica.preferred_read_replica(Offset(0), BrokerId(2)), None, "no KIP-392 before 2.4");
}

#[test]
fn a_parked_fetch_completes_without_updating_the_follower_again() {
    // `DelayedFetch.onComplete` reads with `updateFetchState = false`: a follower that left
    // the ISR while its fetch waited is not put back by the fetch's completion, and its
    // last fetch time stays the arrival's
    let mut a = node(1, Generation::StrictMinIsr);
    a.replica.apply_leader_and_isr(&mut a.log, &kraft_decision(&[1, 2], 0, &[(1, 1), (2, 1)], 1), 0);
    produce(&mut a, &[7]);
    let parked = fetch_from_2(1, 1);
    let (resp, proposal) = a.replica.handle_fetch(&mut a.log, &parked, 5);
    assert_eq!((resp.error, proposal), (None, None));
    a.replica.apply_leader_and_isr(&mut a.log, &kraft_decision(&[1], 1, &[(1, 1), (2, 1)], 2), 6);
    produce(&mut a, &[8]);
    let resp = a.replica.complete_parked_fetch(&mut a.log, &parked);
    assert_eq!((resp.error, resp.batches.len()), (None, 1));
    assert_eq!(a.replica.pending_isr, None, "no ISR expansion from a completion");
    assert_eq!(a.replica.followers[&BrokerId(2)].last_fetch_time_ms, Some(5));
    // the same fetch arriving now does expand the ISR
    let (_, proposal) = a.replica.handle_fetch(&mut a.log, &parked, 9);
    assert_eq!(proposal.map(|p| p.new_isr), Some(vec![BrokerId(1), BrokerId(2)]));
}
