"""The KRaft metadata log's append linger: a controller decision reaches the brokers, and the
request that caused it is answered, ``controller.quorum.append.linger.ms`` after the batch's
first record (``BatchAccumulator.maybeResetLinger``, ``QuorumController.ControllerWriteEvent``)."""

from __future__ import annotations

import pytest

from epochlab.errors import ConfigError
from epochlab.sim.cluster import Cluster
from epochlab.sim.config import ClusterConfig


def _cluster(generation: str = "strict-min-isr", **config: object) -> Cluster:
    return Cluster(ClusterConfig.from_dict({"brokers": [1, 2, 3], **config}), generation, seed=5)


def _leader_moves_after(c: Cluster) -> int:
    """Milliseconds from the leader's controlled shutdown to the moment broker 2 leads."""
    c.run_for(3000)
    start = c.now_ms
    c.controlled_shutdown(1)
    assert c.run_until(lambda c: c.brokers[2].replica.role == "leader", 5000)
    return c.now_ms - start


@pytest.mark.parametrize("linger", [25, 60])
def test_a_kraft_decision_reaches_the_brokers_when_its_batch_is_written(linger: int) -> None:
    c = _cluster(controller_quorum_append_linger_ms=linger)
    took = _leader_moves_after(c)
    delay = c.config.controller_delay_ms
    # the shutdown request and the new state each cross a controller link once
    assert linger + 2 * delay[0] <= took <= linger + 2 * delay[1]
    # the controller itself decided at once: the election is recorded at the request's arrival
    assert c.controller.elections[-1][0] < c.now_ms - linger + 1


def test_without_a_linger_the_decision_goes_out_at_once() -> None:
    c = _cluster(controller_quorum_append_linger_ms=0)
    took = _leader_moves_after(c)
    assert took <= 2 * c.config.controller_delay_ms[1]


def test_records_appended_while_a_batch_lingers_go_out_with_it() -> None:
    """Two decisions 10 ms apart: the brokers see both at the first batch's write, never the
    state in between."""
    c = _cluster(controller_quorum_append_linger_ms=25)
    c.run_for(3000)
    ctrl = c.controller
    ctrl.elect(2)
    c.run_for(10)
    ctrl.elect(3)
    epoch = ctrl.leader_epoch
    seen: set[int] = set()
    c.run_until(lambda c: seen.update(b.replica.leader_epoch for b in c.brokers.values()) or False, 200)
    assert epoch - 1 not in seen  # the intermediate leadership of broker 2 was never published
    assert epoch in seen


def test_metadata_answers_the_committed_state() -> None:
    c = _cluster(controller_quorum_append_linger_ms=25)
    c.run_for(3000)
    ctrl = c.controller
    before = (ctrl.leader, ctrl.leader_epoch)
    ctrl.elect(2)
    assert ctrl.published()[:2] == before  # what a client asking now is told
    c.run_for(30)
    assert ctrl.published()[:2] == (2, before[1] + 1)


def test_the_zookeeper_generations_have_no_linger() -> None:
    c = _cluster("diverging-epoch", controller_quorum_append_linger_ms=25)
    assert _leader_moves_after(c) <= 2 * c.config.controller_delay_ms[1]


def test_a_negative_linger_is_refused() -> None:
    with pytest.raises(ConfigError, match="controller_quorum_append_linger_ms"):
        ClusterConfig.from_dict({"controller_quorum_append_linger_ms": -1})


def _fenced_after(established: bool, seed: int, release: str | None = None) -> int:
    """Milliseconds from cutting broker 2 off at the run's start to the controller fencing it."""
    settings = {"brokers": [1, 2, 3], "established": established}
    if release is not None:
        settings["kafka.release"] = release
    c = Cluster(ClusterConfig.from_dict(settings), "strict-min-isr", seed=seed)
    c.partition([[2]])
    assert c.run_until(lambda c: 2 not in c.controller.isr, 20000)
    return c.now_ms


def test_an_established_cluster_fences_a_cut_broker_a_session_after_its_last_heartbeat() -> None:
    """A live cluster serves run after run: its brokers registered long before a run begins and
    heartbeat on phases of their own, so a broker cut off at time 0 is fenced a session timeout
    after its last heartbeat, up to one interval before 0, and (Kafka 4.0+) at the next run of
    the controller's periodic check, every session timeout / 8. A cluster started with the run
    registers every broker at 0 and fences it a session timeout after that. Kafka 3.7 fences at
    the session's end."""
    session, interval = ClusterConfig().session_timeout_ms, ClusterConfig().heartbeat_interval_ms
    period = session // 8
    fresh = {_fenced_after(False, seed) for seed in range(1, 9)}
    established = [_fenced_after(True, seed) for seed in range(1, 13)]
    assert min(fresh) > session and max(fresh) <= session + period
    assert all(session - interval < t <= session + period for t in established)
    assert len(set(established)) > 6  # each seed its own phases
    assert any(t > session + 1 for t in established)  # after the session's end: the check's wait
    at_3_7 = [_fenced_after(True, seed, "3.7.0") for seed in range(1, 9)]
    assert all(session - interval < t <= session + 1 for t in at_3_7)


def test_an_established_cluster_serves_from_the_start() -> None:
    c = Cluster(ClusterConfig.from_dict({"brokers": [1, 2, 3], "established": True}), "strict-min-isr", seed=3)
    assert c.run_until(lambda c: c.brokers[1].replica.role == "leader"
                       and all(c.brokers[b].replica.role == "follower" for b in (2, 3)), 100)
