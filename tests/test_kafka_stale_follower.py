"""The re-elected KRaft leader's stale follower LEO (docs/kafka-findings/README.md) on each KRaft
release's own ``kafka.cluster.Partition``, in-process through JPype with Mockito.

Each release runs once, in a process of its own (one JVM per process, one release per JVM),
through ``epochlab kafka stale-follower --release V --json``; the tests of a release share that
run. A release whose jars (or Mockito) are not in the cache is skipped: `epochlab kafka jars
--all-generations` resolves every one.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys

import pytest

from epochlab.errors import ConfigError
from epochlab.kafka.jars import KRAFT_RELEASES, mockito_dir, resolved
from epochlab.kafka.classes.stale_follower import (
    F2_REAL_LOG_END_OFFSET,
    StaleFollowerResult,
    check_in_subprocess,
    format_table,
    release_line,
)

#: What each release's Partition does, measured on 2026-11-28 (docs/kafka-releases.md):
#: (makeLeader(epoch 2) answers a new leader, F2's LEO as L sees it after that, L's DivergingEpoch
#: answer to F3's lastFetchedEpoch 1, HW after F3 caught up, checkEnoughReplicasReachOffset(2)
#: completed). Nothing differs between the lines: from 3.3.2 to 4.3.1 makeLeader computes
#: `isNewLeader = !isLeader` and calls `resetReplicaState(..., isNewLeader, ...)` only for a new
#: leader epoch (core/src/main/scala/kafka/cluster/Partition.scala, makeLeader), and the
#: `isNewLeader = false` branch of resetReplicaState keeps `logEndOffsetMetadata` (Replica.scala up
#: to 4.0; server/src/main/java/org/apache/kafka/server/replica/Replica.java from 4.1);
#: maybeIncrementLeaderHW takes the minimum over the maximal ISR. 4.2.2 and 4.4.0 publish no
#: sources jar (4.2.1's were read for the 4.2 line); their classes behave the same.
AFFECTED = (False, 2, (0, 2), 2, True)
EXPECTED: dict[str, tuple[bool, int, tuple[int, int] | None, int, bool]] = {
    "3.3.2": AFFECTED,
    "3.4.1": AFFECTED,
    "3.5.2": AFFECTED,   # KIP-903 broker epochs: fetches carry -1, which skips the check
    "3.6.2": AFFECTED,
    "3.7.2": AFFECTED,
    "3.8.1": AFFECTED,
    "3.9.2": AFFECTED,
    "4.0.2": AFFECTED,   # ZooKeeper gone; makeLeader takes LeaderAndIsrRequest.PartitionState
    "4.1.0": AFFECTED,   # the release the finding was first reproduced on by hand
    "4.1.2": AFFECTED,
    "4.2.2": AFFECTED,   # makeLeader takes a PartitionRegistration
    "4.3.1": AFFECTED,
    "4.4.0": AFFECTED,
}
#: The control: F2's own fetch of epoch 2 from offset 1 before F3 catches up corrects L's view,
#: in every release: the HW stays 1 and the produce of offset 1 keeps waiting.
CONTROL = (1, False)


def _needs(version: str) -> None:
    if not resolved(version):
        pytest.skip(f"Kafka {version} is not resolved: run `epochlab kafka jars --all-generations` "
                    f"(or --version {version})")
    try:
        mockito_dir(resolve=False)
    except ConfigError as exc:
        pytest.skip(exc.message)


@functools.cache
def _result(version: str) -> StaleFollowerResult:
    return check_in_subprocess(version)


def test_the_expected_table_covers_every_kraft_release() -> None:
    assert list(EXPECTED) == list(KRAFT_RELEASES)
    lines = [release_line(v) for v in KRAFT_RELEASES if v != "4.1.0"]
    assert lines == sorted(set(lines)) and lines[0] == (3, 3)  # one release per line, oldest first


@pytest.mark.parametrize("version", KRAFT_RELEASES)
def test_a_reelected_leader_acknowledges_a_write_an_isr_member_lacks(version: str) -> None:
    _needs(version)
    r = _result(version)
    assert (r.release, r.high_watermark_epoch_0) == (version, 1)
    observed = (r.new_leader_in_epoch_2, r.f2_log_end_offset_seen, r.f3_diverging_epoch, r.high_watermark,
                r.acknowledged)
    assert observed == EXPECTED[version]
    assert r.affected == (r.high_watermark > F2_REAL_LOG_END_OFFSET)
    assert r.affected and r.ack_error == "NONE"


@pytest.mark.parametrize("version", KRAFT_RELEASES)
def test_the_followers_own_fetch_in_the_new_epoch_keeps_the_high_watermark(version: str) -> None:
    _needs(version)
    r = _result(version)
    assert (r.control_high_watermark, r.control_acknowledged) == CONTROL


def test_results_round_trip_and_print_as_a_table() -> None:
    r = StaleFollowerResult("4.1.0", "17", 1, False, 2, (0, 2), 2, True, "NONE", 1, False)
    data = r.to_dict()
    assert (data["affected"], data["f2_log_end_offset_real"], data["f3_diverging_epoch"]) == (True, 1, [0, 2])
    assert StaleFollowerResult.from_dict(data) == r
    table = format_table([r])
    assert table.splitlines()[2] == "| 4.1.0 | no | 2 | (0, 2) | 2 | yes | 1 | no | **yes** |"


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "epochlab", "kafka", "stale-follower", *args],
                          capture_output=True, text=True, check=False, env=env)


@pytest.mark.parametrize(("release", "message"), [("3.2.0", "KRaft brokers exist from 3.3 on"),
                                                    ("4.x", "expected like 4.3.1")])
def test_a_release_it_cannot_run_is_a_usage_error(release: str, message: str) -> None:
    done = _cli("--release", release)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def test_an_unresolved_release_names_the_command_that_resolves_it(tmp_path) -> None:
    done = _cli("--release", "4.1.0", env={**os.environ, "EPOCHLAB_KAFKA_CACHE": str(tmp_path)})
    assert done.returncode == 2
    assert "not resolved yet: run `epochlab kafka jars --version 4.1.0`" in done.stderr
    assert not list(tmp_path.iterdir())  # nothing downloaded
