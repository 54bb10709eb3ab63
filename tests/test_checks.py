"""Each invariant of the checker: a state (or history) that violates it and one that does not.

State invariants are exercised on a real ``Cluster`` whose replica state is then bent directly
(truncating a log, renaming a role, rewriting the controller's ISR) to build the violating
state; history invariants on hand-written Jepsen-style histories; liveness on clusters that
have or have not converged.
"""

from __future__ import annotations

from typing import Any

import pytest

from epochlab.reference import RecordBatch  # the reference backend's log takes its own batches
from epochlab.checks import ALLOWED, PROTOCOL, StateChecker, check_history, check_liveness
from epochlab.generations import Generation
from epochlab.sim import Cluster, ClusterConfig, ProducerConfig


def _cluster(generation: Generation = Generation.DIVERGING_EPOCH, values: int = 4) -> tuple[Cluster, StateChecker]:
    # backend "reference": the replica state machine in Python, whose attributes a test may bend
    c = Cluster(ClusterConfig(min_insync_replicas=2, unclean_leader_election_enable=False), generation,
                seed=1, backend="reference")
    checker = StateChecker(c)
    p = c.producer("p", ProducerConfig(acks="all"))
    p.send_many(list(range(1, values + 1)))
    c.run_until(lambda _c: checker.observe() or not p.pending, 10000)
    c.run_until(lambda _c: checker.observe() or False, 2000)  # followers learn the HW
    checker.observe()
    return c, checker


def _names(checker: StateChecker) -> set[str]:
    return {v.invariant for v in checker.violations}


def test_clean_run_violates_nothing() -> None:
    c, checker = _cluster()
    assert checker.true_hw == 4
    assert checker.violations == []


def test_durability_and_strong_isr() -> None:
    c, checker = _cluster()
    c.brokers[1].replica.log.truncate_to(2)
    checker.observe()
    names = _names(checker)
    assert {"Inv-Durability", "Inv-StrongIsr"} <= names
    v = next(x for x in checker.violations if x.invariant == "Inv-Durability")
    assert v.verdict == PROTOCOL and v.details["offset"] == 2 and v.details["committed"]["value"] == 3
    assert v.details["leader"] == 1 and v.details["true_high_watermark"] == 4


def test_strong_isr_follower_only() -> None:
    c, checker = _cluster()
    c.brokers[3].replica.log.truncate_to(1)
    checker.observe()
    v = next(x for x in checker.violations if x.invariant == "Inv-StrongIsr")
    assert v.details["replica"] == 3 and v.details["offset"] == 1
    assert "Inv-Durability" not in _names(checker)


def test_leader_completeness_on_a_new_clean_leader() -> None:
    c, checker = _cluster()
    c.brokers[2].replica.log.truncate_to(1)
    c.elect(2)
    c.run_until(lambda _c: checker.observe() or False, 200)
    assert "Inv-LeaderCompleteness" in _names(checker)


def test_loss_after_unclean_election_is_allowed_by_configuration() -> None:
    c, checker = _cluster()
    c.controller.elections.append((c.now_ms, 99, 1, True))
    c.brokers[1].replica.log.truncate_to(2)
    checker.observe()
    v = next(x for x in checker.violations if x.invariant == "Inv-Durability")
    assert v.verdict == ALLOWED and "unclean" in (v.reason or "")


def test_loss_after_too_many_lossy_crashes_is_allowed() -> None:
    c, checker = _cluster()
    checker.note_lossy_crash(2)
    checker.note_lossy_crash(3)
    c.brokers[1].replica.log.truncate_to(2)
    checker.observe()
    v = next(x for x in checker.violations if x.invariant == "Inv-Durability")
    assert v.verdict == ALLOWED and "unflushed" in (v.reason or "")


def test_log_matching() -> None:
    c, checker = _cluster()
    log = c.brokers[3].replica.log
    log.truncate_to(0)
    log.append_as_leader([90, 91, 92, 93], 0)
    log.update_high_watermark(4)
    checker.observe()
    v = next(x for x in checker.violations if x.invariant == "Inv-LogMatching")
    assert v.details["offset"] == 0 and 3 in v.details["replicas"]
    assert v.details["3"]["value"] == 90


def test_log_matching_ignores_differences_above_the_high_watermark() -> None:
    c, checker = _cluster()
    log = c.brokers[3].replica.log
    log.append_as_leader([77], 0)  # an uncommitted extra record on a follower
    checker.observe()
    assert "Inv-LogMatching" not in _names(checker)


def test_epoch_monotone() -> None:
    c, checker = _cluster()
    log = c.brokers[3].replica.log
    log.append_as_follower(RecordBatch(log.log_end_offset, 5, [50]))
    checker.observe()
    assert "Inv-EpochMonotone" not in _names(checker)
    log.append_as_follower(RecordBatch(log.log_end_offset, 3, [51]))
    checker.observe()
    v = next(x for x in checker.violations if x.invariant == "Inv-EpochMonotone")
    assert v.details["epoch"] == 3 and v.details["previous_epoch"] == 5


def test_offset_monotone_holes() -> None:
    c, checker = _cluster()
    log = c.brokers[2].replica.log
    log.append_as_leader([5, 6, 7], 0)
    checker.observe()
    assert "Inv-OffsetMonotone" not in _names(checker)
    log.truncate_to(log.log_end_offset - 1)  # inside the last batch: a hole
    checker.observe()
    assert "Inv-OffsetMonotone" in _names(checker)


def test_hw_bounds_leader_hw_never_decreases() -> None:
    c, checker = _cluster()
    c.brokers[1].replica.log.update_high_watermark(1)
    checker.observe()
    v = next(x for x in checker.violations if x.invariant == "Inv-HW-bounds")
    assert v.details == {"replica": 1, "epoch": 0, "before": 4, "after": 1}


def test_epoch_fencing_two_leaders_in_one_epoch() -> None:
    c, checker = _cluster()
    r = c.brokers[2].replica
    r.role = "leader"
    checker.observe()
    v = next(x for x in checker.violations if x.invariant == "Inv-EpochFencing")
    assert v.details == {"replicas": [1, 2], "epoch": 0}


def test_isr_join_requires_leso() -> None:
    c, checker = _cluster()
    ctrl = c.controller
    ctrl.isr = (1, 2)
    checker.observe()
    c.brokers[1].replica.leader_epoch_start_offset = 3
    c.brokers[3].replica.log.truncate_to(2)
    c.brokers[3].replica.log.update_high_watermark(0)
    ctrl.isr = (1, 2, 3)
    checker.observe()
    v = next(x for x in checker.violations if x.invariant == "Inv-IsrJoin")
    assert v.details["replica"] == 3 and v.details["leader_epoch_start_offset"] == 3


def test_isr_join_with_leso_caught_up_is_fine() -> None:
    c, checker = _cluster()
    ctrl = c.controller
    ctrl.isr = (1, 2)
    checker.observe()
    ctrl.isr = (1, 2, 3)
    checker.observe()
    assert "Inv-IsrJoin" not in _names(checker)


def test_replication_quorum_superset() -> None:
    c, checker = _cluster()
    c.brokers[3].replica.log.truncate_to(2)
    c.brokers[1].replica.isr = (1, 2)
    checker.observe()
    v = next(x for x in checker.violations if x.invariant == "Inv-ReplicationQuorumSuperset")
    assert v.details["controller_isr"] == [1, 2, 3] and v.details["behind"] == {"3": 2}


def test_min_isr_in_strict_generation() -> None:
    c, checker = _cluster(Generation.STRICT_MIN_ISR)
    assert "Inv-MinIsr" not in _names(checker)
    r = c.brokers[1].replica
    r.isr = (1,)
    r.log.append_as_leader([9], r.leader_epoch)
    r.log.maybe_increment_high_watermark(r.log.log_end_offset)
    checker.observe()
    v = next(x for x in checker.violations if x.invariant == "Inv-MinIsr")
    assert v.details["isr"] == [1] and v.details["after"] == 5


def test_unclean_exclusion() -> None:
    c, checker = _cluster()
    checker.note_lossy_crash(3)  # broker 3 "came back" without its tail and stays in the ISR
    c.brokers[3].replica.log.truncate_to(0)
    checker.observe()
    assert "Inv-UncleanExclusion" in _names(checker)


def test_unclean_exclusion_clears_once_caught_up() -> None:
    c, checker = _cluster()
    checker.note_lossy_crash(3)
    checker.observe()
    assert 3 not in checker.recovering and "Inv-UncleanExclusion" not in _names(checker)


# -- history ---------------------------------------------------------------------------------

def _op(i: int, process: str, type_: str, f: str, value: Any = None, offset: int | None = None,
        acks: str | None = "all", time_ms: int | None = None) -> dict[str, Any]:
    return {"index": i, "time_ms": time_ms if time_ms is not None else i * 10, "process": process,
            "type": type_, "f": f, "value": value, "offset": offset, "error": None, "acks": acks}


def _check(history: list[dict[str, Any]], final: dict[int, int], committed: dict[int, int] | None = None,
           idempotent: set[str] | None = None, reason: str | None = None) -> dict[str, Any]:
    out = check_history(history, final, committed if committed is not None else dict(final),
                        lambda _t: max(final, default=-1) + 1, lambda _t: reason,
                        idempotent or set(), lambda _t: 0, {}, 1000)
    return {v.invariant: v for v in out}


def _sends(pairs: list[tuple[int, int]], acks: str = "all", process: str = "p") -> list[dict[str, Any]]:
    ops = []
    for value, offset in pairs:
        ops.append(_op(len(ops), process, "invoke", "send", value, acks=acks))
        ops.append(_op(len(ops), process, "ok", "send", value, offset, acks=acks))
    return ops


def test_history_clean() -> None:
    h = _sends([(1, 0), (2, 1), (3, 2)])
    h.append(_op(len(h), "c", "ok", "poll", [[0, 1], [1, 2], [2, 3]], acks=None))
    assert _check(h, {0: 1, 1: 2, 2: 3}) == {}


def test_inconsistent_offsets() -> None:
    h = _sends([(1, 0), (2, 1)])
    h.append(_op(len(h), "c", "ok", "poll", [[0, 1], [1, 9]], acks=None))
    out = _check(h, {0: 1, 1: 2})
    assert out["inconsistent-offsets"].details["offset"] == 1
    assert out["inconsistent-offsets"].verdict == PROTOCOL


def test_inconsistent_offsets_of_an_uncommitted_acks1_write_is_allowed() -> None:
    h = _sends([(1, 0), (2, 1)], acks="1")
    h.append(_op(len(h), "c", "ok", "poll", [[0, 1], [1, 9], [2, 10]], acks=None))
    out = _check(h, {0: 1, 1: 9, 2: 10}, committed={0: 1, 1: 9, 2: 10})
    assert out["inconsistent-offsets"].verdict == ALLOWED
    assert "acks=1" in (out["inconsistent-offsets"].reason or "")


def test_lost_write() -> None:
    h = _sends([(1, 0), (2, 1), (3, 2)])
    h.append(_op(len(h), "c", "ok", "poll", [[0, 1], [2, 3]], acks=None))
    out = _check(h, {0: 1, 2: 3})
    assert out["lost-write"].details["value"] == 2 and out["lost-write"].verdict == PROTOCOL


def test_acks_all_write_missing_from_the_final_log_is_lost() -> None:
    h = _sends([(1, 0), (2, 1)])
    out = _check(h, {0: 1})
    assert out["lost-write"].details["offset"] == 1


def test_read_committed_only_and_consistent_read() -> None:
    h = [_op(0, "c", "ok", "poll", [[0, 1], [1, 2]], acks=None)]
    out = check_history(h, {0: 1}, {0: 1}, lambda _t: 1, lambda _t: None, set(), lambda _t: 0, {}, 100)
    names = {v.invariant for v in out}
    assert {"Inv-ReadCommittedOnly", "Inv-ConsistentRead"} <= names
    ok = check_history(h, {0: 1, 1: 2}, {0: 1, 1: 2}, lambda _t: 2, lambda _t: None, set(),
                       lambda _t: 0, {}, 100)
    assert ok == []


def test_duplicate_only_for_idempotent_producers() -> None:
    h = _sends([(1, 0), (1, 1)])
    assert _check(h, {0: 1, 1: 1}, idempotent={"p"})["duplicate"].verdict == PROTOCOL
    assert _check(h, {0: 1, 1: 1})["duplicate"].verdict == ALLOWED


def test_an_idempotent_duplicate_of_a_renumbered_batch_is_allowed_and_says_why() -> None:
    h = _sends([(1, 0), (1, 1), (2, 2), (2, 3)])
    out = check_history(h, {0: 1, 1: 1, 2: 2, 3: 2}, {0: 1, 1: 1, 2: 2, 3: 2}, lambda _t: 4,
                        lambda _t: None, {"p"}, lambda _t: 0, {}, 1000, rewritten={1})
    dup = {v.invariant: v for v in out}["duplicate"]
    # value 1 was renumbered (allowed), value 2 was not: the verdict is the protocol violation
    assert dup.verdict == PROTOCOL and dup.details["value"] == 2
    only = check_history(h[:4], {0: 1, 1: 1}, {0: 1, 1: 1}, lambda _t: 2, lambda _t: None, {"p"},
                         lambda _t: 0, {}, 1000, rewritten={1})
    assert only[0].verdict == ALLOWED and "startSequencesAtBeginning" in (only[0].reason or "")


def test_nonmonotonic_send() -> None:
    h = [_op(0, "p", "invoke", "send", 1), _op(1, "p", "invoke", "send", 2),
         _op(2, "p", "ok", "send", 2, 0), _op(3, "p", "ok", "send", 1, 1)]
    assert _check(h, {0: 2, 1: 1}, idempotent={"p"})["nonmonotonic-send"].verdict == PROTOCOL
    assert "nonmonotonic-send" not in _check(h, {0: 1, 1: 2}, idempotent={"p"})


def test_nonmonotonic_send_after_a_failed_send_is_allowed() -> None:
    # Send 0 expires unacknowledged: the producer renumbers its waiting batches (KIP-360
    # epoch bump), and the leader may already hold a later batch, so 2 can land before 1.
    h = [_op(0, "p", "invoke", "send", 0), _op(1, "p", "invoke", "send", 1),
         _op(2, "p", "invoke", "send", 2), _op(3, "p", "info", "send", 0),
         _op(4, "p", "ok", "send", 2, 0), _op(5, "p", "ok", "send", 1, 1)]
    found = _check(h, {0: 2, 1: 1}, idempotent={"p"})["nonmonotonic-send"]
    assert found.verdict == ALLOWED and "earlier send of 0" in (found.reason or "")
    # a failure that comes after both sends explains nothing
    late = [_op(0, "p", "invoke", "send", 1), _op(1, "p", "invoke", "send", 2),
            _op(2, "p", "ok", "send", 2, 0), _op(3, "p", "ok", "send", 1, 1),
            _op(4, "p", "invoke", "send", 3), _op(5, "p", "fail", "send", 3)]
    assert _check(late, {0: 2, 1: 1}, idempotent={"p"})["nonmonotonic-send"].verdict == PROTOCOL


@pytest.mark.parametrize("offsets, name", [([0, 1, 3], "poll-skip"), ([0, 1, 1], "nonmonotonic-poll")])
def test_poll_order(offsets: list[int], name: str) -> None:
    final = {o: 10 + o for o in range(4)}
    h = [_op(i, "c", "ok", "poll", [[o, 10 + o]], acks=None) for i, o in enumerate(offsets)]
    assert name in _check(h, final)
    good = [_op(i, "c", "ok", "poll", [[o, 10 + o]], acks=None) for i, o in enumerate([0, 1, 2])]
    assert _check(good, final) == {}
    restarted = [*h[:2], _op(2, "c", "info", "restart", acks=None), _op(3, "c", "ok", "poll", [[0, 10]], acks=None)]
    assert "nonmonotonic-poll" not in _check(restarted, final)


# -- liveness --------------------------------------------------------------------------------

def test_liveness_converged_and_not() -> None:
    c, _ = _cluster()
    assert check_liveness(c, 0, 1000) == []
    c.crash(3)
    out = {v.invariant: v for v in check_liveness(c, 0, 1000)}
    assert "broker 3 is down" in out["Liveness-Converge"].details["gaps"]
    p = c.producer("late", ProducerConfig(acks="all"))
    p.send(100)
    assert "Liveness-Ack" in {v.invariant for v in check_liveness(c, 0, 1000)}


def test_the_bug_catalogue_in_docs_is_the_code_and_findings_name_their_match(tmp_path) -> None:
    from pathlib import Path

    from epochlab.checks.catalogue import BUGS, describe_match, markdown, match
    from epochlab.generations import Generation

    doc = (Path(__file__).resolve().parents[1] / "docs" / "bugs.md").read_text()
    table = doc.split("<!-- table -->\n", 1)[1].split("<!-- /table -->", 1)[0]
    assert table == markdown()
    labels = {g.label for g in Generation}
    assert all(set(b.generations) <= labels for b in BUGS)
    assert [b.id for b in match("kip-279", "Inv-IsrJoin")] == ["KAFKA-7128"]
    assert match("strict-min-isr", "Inv-IsrJoin") == []
    assert "candidate for a new Kafka bug report" in describe_match("strict-min-isr", "Inv-IsrJoin")
    # a fuzz finding says it, in its summary and its run directory's README
    from epochlab.fuzz.campaign import Campaign

    campaign = Campaign(Generation.KIP_279, seed=2, seconds=None, runs=400, out=tmp_path,
                        shrink_runs=0, until_found=True)
    finding = campaign.run()[0]
    assert finding.to_dict()["known_bugs"] == [b.id for b in match("kip-279", finding.violation.invariant)]
    readme = (finding.directory / "README.md").read_text()
    assert "Known bugs" in readme and "docs/bugs.md" in readme


def test_the_outdated_control_request_witness() -> None:
    """KAFKA-7235's witness: a broker that registered again takes a partition state of an epoch
    older than the controller's at that registration (events as the engine words them)."""
    from epochlab.checks.catalogue import WITNESSES, match

    seen = WITNESSES["outdated-control-request"][1]

    def ev(kind: str, message: str) -> dict[str, str]:
        return {"kind": kind, "message": message}

    base = [ev("election", "controller: elect 1 (operator): leader 1 epoch 2 ISR [1, 2, 3] partition epoch 2"),
            ev("controller", "controller: broker 1 session expired"),
            ev("controller", "controller: broker 1 removed from ISR: leader 3 epoch 4 ISR [2, 3] partition epoch 4"),
            ev("controller", "controller: broker 1 registered")]
    late = ev("role", "broker 1 is leader in epoch 2 (was follower in epoch 1), ISR [1, 2, 3], LEO 30")
    current = ev("role", "broker 1 is follower in epoch 4 (was follower in epoch 1), ISR [2, 3], LEO 30")
    assert seen(base + [late]) and not seen(base + [current]) and not seen(base[:3] + [late])
    assert [b.id for b in match("kip-101", "Inv-EpochMonotone", base + [late])] == ["KAFKA-7415", "KAFKA-7235 (KIP-380)"]
    assert [b.id for b in match("kip-101", "Inv-EpochMonotone", base)] == ["KAFKA-7415"]


def test_before_kafka_0_11_an_idempotent_producers_duplicate_is_no_broken_guarantee() -> None:
    """Bug-hunt finding (hw-truncation, run seed 509686214): p3, configured idempotent, wrote a
    value twice across HW truncations. Kafka 0.10 has no idempotent producer (KIP-98, 0.11.0),
    so the finding matched no catalogued bug; the duplicate is allowed there, with the reason."""
    from pathlib import Path

    from epochlab.fuzz import execute
    from epochlab.fuzz.schedule import Schedule

    path = Path(__file__).parents[1] / "docs" / "resolved-findings" / "g0-idempotent-producer-before-kip98.json"
    schedule = Schedule.from_json(path.read_text())
    verdict = execute(schedule).verdict
    assert "duplicate" not in {v.invariant for v in verdict.protocol_violations}
    allowed = [v for v in verdict.allowed if v.invariant == "duplicate"]
    assert allowed and "no idempotent producer (KIP-98" in allowed[0].reason
    # the same reading of the history as a release with idempotence: a broken guarantee
    from epochlab.checks.history import check_history
    history = [{"index": 0, "time_ms": 0, "process": "p3", "type": "invoke", "f": "send", "value": 7,
                "offset": None, "error": None, "acks": "all"}]
    found = check_history(history, {0: 7, 1: 7}, {}, lambda _t: 2, lambda _t: None, {"p3"},
                          lambda _t: None, {}, 10)
    assert [(v.invariant, v.verdict) for v in found] == [("duplicate", "protocol-violation")]
    found = check_history(history, {0: 7, 1: 7}, {}, lambda _t: 2, lambda _t: None, {"p3"},
                          lambda _t: None, {}, 10, no_idempotence="no idempotence here")
    assert [(v.invariant, v.verdict) for v in found] == [("duplicate", "allowed-by-configuration")]


# -- the incremental checks (StateChecker.incremental) ----------------------------------------
# A check is skipped when none of its inputs moved since its last evaluation; these states move
# one input of a check while the broker it is about stays as it was, and each must be seen at
# the observation where it arises, as the plain checker (every check at every change) sees it.

@pytest.fixture(params=[True, False], ids=["incremental", "plain"])
def both_forms(request: pytest.FixtureRequest) -> tuple[Cluster, StateChecker]:
    """``_cluster()`` with its checker incremental, then with its checker plain."""
    c, checker = _cluster()
    checker.incremental = request.param
    return c, checker


def test_a_follower_is_checked_when_the_truth_moves_past_it(both_forms: tuple[Cluster, StateChecker]) -> None:
    c, checker = both_forms
    c.brokers[3].replica.log.append_as_leader([77], 0)  # above the HW: no failure yet
    c.brokers[2].replica.log.append_as_leader([5], 0)
    checker.observe()
    assert checker.violations == []
    leader = c.brokers[1].replica.log
    leader.append_as_leader([5], 0)
    leader.update_high_watermark(5)  # only the leader changed; the truth now holds 5 at 4
    checker.observe()
    v = next(x for x in checker.violations if x.invariant == "Inv-StrongIsr")
    assert v.details["replica"] == 3 and v.details["offset"] == 4


def test_a_broker_that_caught_up_after_a_lossy_crash_is_checked_at_the_next_change(both_forms: tuple[Cluster, StateChecker]) -> None:
    c, checker = both_forms
    checker.note_lossy_crash(3)
    log = c.brokers[3].replica.log
    log.truncate_to(2)
    log.append_as_leader([90, 91], 0)  # back to the trueHW, with other values
    checker.observe()  # leaves the recovering set here, after the ISR members were asked
    assert "Inv-StrongIsr" not in _names(checker) and 3 not in checker.recovering
    c.brokers[2].replica.log.append_as_leader([8], 0)  # some other change
    checker.observe()
    v = next(x for x in checker.violations if x.invariant == "Inv-StrongIsr")
    assert v.details["replica"] == 3 and v.details["offset"] == 2


def test_the_controllers_leader_is_checked_when_another_legitimate_leader_moves_the_truth(both_forms: tuple[Cluster, StateChecker]) -> None:
    c, checker = both_forms
    c.controller.elections.append((c.now_ms, 5, 2, False))  # broker 2 legitimately leads epoch 5
    checker.observe()
    r = c.brokers[2].replica
    r.role, r.leader_epoch = "leader", 5
    r.log.append_as_leader([50], 5)
    r.log.update_high_watermark(5)  # the truth grows from broker 2; broker 1 did not change
    checker.observe()
    assert checker.true_hw == 5
    v = next(x for x in checker.violations if x.invariant == "Inv-Durability")
    assert v.details["leader"] == 1 and v.details["offset"] == 4


def test_a_leader_becomes_part_of_the_truth_when_its_election_appears(both_forms: tuple[Cluster, StateChecker]) -> None:
    c, checker = both_forms
    r = c.brokers[2].replica
    r.role, r.leader_epoch = "leader", 5
    r.log.append_as_leader([50], 5)
    r.log.update_high_watermark(5)
    checker.observe()  # no election of broker 2 yet: not the truth
    assert checker.true_hw == 4
    c.controller.elections.append((c.now_ms, 5, 2, False))  # broker 2 did not change
    checker.observe()
    assert checker.true_hw == 5


# -- the same failures on Rust replicas (core.StateScan answers the passing case there) --------

def _rust_cluster(generation: Generation = Generation.DIVERGING_EPOCH) -> tuple[Cluster, StateChecker]:
    c = Cluster(ClusterConfig(min_insync_replicas=2, unclean_leader_election_enable=False), generation,
                seed=1, backend="rust")
    checker = StateChecker(c)
    assert checker._scan is not None
    p = c.producer("p", ProducerConfig(acks="all"))
    p.send_many([1, 2, 3, 4])
    c.run_until(lambda _c: checker.observe() or not p.pending, 10000)
    c.run_until(lambda _c: checker.observe() or False, 2000)
    checker.observe()
    assert checker.violations == [] and checker.true_hw == 4
    return c, checker


def _decide(c: Cluster, broker: int, leader: int, isr: tuple[int, ...], epoch_step: int = 0) -> str:
    """Hand ``broker`` a LeaderAndIsr of the controller's leader epoch plus ``epoch_step``
    (the replica's own protocol entry point: a Rust replica's state has no setters)."""
    from epochlab.sim.messages import LeaderAndIsr

    r = c.brokers[broker].replica
    msg = LeaderAndIsr(leader, c.controller.leader_epoch + epoch_step, isr, (r.partition_epoch or 0) + 1,
                       (1, 2, 3))
    return r.apply_leader_and_isr(msg, c.now_ms)


def test_two_rust_leaders_of_one_epoch() -> None:
    c, checker = _rust_cluster()
    _decide(c, 1, 1, (1, 2, 3), epoch_step=1)
    _decide(c, 2, 2, (1, 2, 3), epoch_step=1)  # both lead the next epoch
    assert [c.brokers[b].replica.role for b in (1, 2)] == ["leader", "leader"]
    checker.observe()
    v = next(x for x in checker.violations if x.invariant == "Inv-EpochFencing")
    assert v.details == {"replicas": [1, 2], "epoch": c.controller.leader_epoch + 1}


def test_a_rust_leaders_quorum_without_a_controller_isr_member() -> None:
    c, checker = _rust_cluster()
    _decide(c, 1, 1, (1, 2))
    c.brokers[3].replica.log.truncate_to(2)
    checker.observe()
    v = next(x for x in checker.violations if x.invariant == "Inv-ReplicationQuorumSuperset")
    assert v.details["behind"] == {"3": 2} and v.details["maximal_isr"] == [1, 2]


def test_a_rust_leader_advancing_its_hw_with_too_small_an_isr() -> None:
    c, checker = _rust_cluster(Generation.STRICT_MIN_ISR)
    _decide(c, 1, 1, (1,))
    checker.observe()
    assert "Inv-MinIsr" not in _names(checker)
    log = c.brokers[1].replica.log
    log.append_as_leader([9], c.controller.leader_epoch)
    log.update_high_watermark(log.log_end_offset)
    checker.observe()
    v = next(x for x in checker.violations if x.invariant == "Inv-MinIsr")
    assert v.details["isr"] == [1] and v.details["after"] == 5


def test_a_hole_in_a_rust_log() -> None:
    c, checker = _rust_cluster()
    log = c.brokers[2].replica.log
    log.append_as_leader([5, 6, 7], c.controller.leader_epoch)
    checker.observe()
    assert "Inv-OffsetMonotone" not in _names(checker)
    log.truncate_to(log.log_end_offset - 1)  # inside the last batch: the batch goes, a hole
    checker.observe()
    v = next(x for x in checker.violations if x.invariant == "Inv-OffsetMonotone")
    assert v.details["replica"] == 2


@pytest.mark.parametrize("backend", ["rust", "reference"])
def test_a_copy_lost_in_a_crash_counted_by_the_leader_is_not_a_violation(backend: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A guided latest-generation finding (campaign seed 31 on d1c42c5, shrunk to 5 actions),
    Inv-StrongIsr, was a checker defect. Broker 3 fetched m1 and lost it in a power cut before
    it was committed (broker 2, cut off, held the HW back); the leader kept broker 3's follower
    state of before the crash, as Kafka's does until a fetch of the new process replaces it
    (``Replica.updateFetchStateOrThrow``), so when broker 2 caught up the HW passed m1 on the
    strength of the copy the crash had taken (``Partition.maybeIncrementLeaderHW``). That is
    what a lossy crash permits, but the checker had let broker 3 out of its recovering set as
    it came back (its empty log was then at trueHW 0) and reported it as an ISR member
    lacking a committed record. A broker now stays recovering while a leader believes it holds
    more than its log does."""
    from pathlib import Path

    from epochlab.checks.state import StateChecker
    from epochlab.fuzz import execute
    from epochlab.fuzz.schedule import load_schedule

    schedule = load_schedule(Path(__file__).parents[1] / "docs" / "resolved-findings"
                             / "g5-lossy-crash-copy-counted-by-the-leader.json")
    verdict = execute(schedule, backend=backend).verdict
    assert verdict.ok, [(v.invariant, v.verdict) for v in verdict.violations]
    monkeypatch.setattr(StateChecker, "_believed_beyond", lambda self, b, leo: False)
    before = execute(schedule, backend=backend).verdict
    assert before.first("Inv-StrongIsr") is not None
