"""A ZooKeeper-mode cluster of an older release, live: started, one seed scenario run with
``--compare`` in the release's generation, and everything stopped, ZooKeeper included.

Kafka 0.11.0.0 (generation kip-101) is the release that starts fastest here in ZooKeeper mode
(7.8 - 14.2 s for ZooKeeper, the controller broker and three brokers in 5 starts, against
8.2 - 18.8 s for 2.0.0, 12.2 - 22.8 s for 2.7.2 and 15.2 - 25.7 s for 3.6.2; docs/measurements.md). The scenario, seed-002-manual-commit-reprocessing,
exercises the group coordinator, a commit and a consumer crash on the real brokers; it agreed
with the model on 0.11.0.0 and 2.7.2 (docs/kafka-run.md, "Older releases"). Skipped with the reason when root, nft,
confluent-kafka or the release's jars are missing; the CLI test runs the command a user runs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("confluent_kafka", reason="needs confluent-kafka (pip install confluent-kafka)")

from epochlab.kafka.jars import resolved  # noqa: E402

VERSION = "0.11.0.0"
SCENARIO = "seed-002-manual-commit-reprocessing"

if not resolved(VERSION):
    pytest.skip(f"Kafka {VERSION}'s jars are not resolved (epochlab kafka jars --version {VERSION})",
                allow_module_level=True)

from epochlab.cli import main  # noqa: E402
from epochlab.kafka.live.cluster import live_pid  # noqa: E402
from epochlab.kafka.live.start import attach  # noqa: E402
from epochlab.kafka.live.faults import firewall_available  # noqa: E402

if firewall_available() is not None:
    pytest.skip(f"a live ZooKeeper-mode run needs it: {firewall_available()}", allow_module_level=True)


@pytest.fixture(scope="module", autouse=True)
def broker_extras() -> None:
    """The log binding and compatibility jars a ZooKeeper-mode broker adds, from Maven Central
    (once per release): a registry that does not answer skips the test, saying so."""
    from epochlab.errors import ConfigError
    from epochlab.kafka.jars import jar_dir
    from epochlab.kafka.live.zookeeper import broker_extras_dir

    try:
        broker_extras_dir(jar_dir(VERSION, resolve=False))
    except ConfigError as exc:
        pytest.skip(f"the ZooKeeper-mode broker's extra jars could not be resolved: {exc}")


def test_seed_scenario_on_a_zookeeper_mode_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    cluster_dir = out.with_name("run.cluster")
    code = main(["kafka", "run", SCENARIO, "--kafka-version", VERSION, "--compare", "--json", "--out", str(out)])
    captured = capsys.readouterr()
    payload = json.loads(captured.out)
    assert f"(zk mode, Kafka {VERSION}) started" in captured.err
    assert payload["real"]["mode"] == "zk" and payload["real"]["kafka_version"] == VERSION
    assert payload["model"]["generation"] == "kip-101"
    assert payload["real"]["expectations_hold"], payload["real"]["checks"]
    assert payload["agree"], [d["text"] for d in payload["differences"]]
    assert code == 0
    assert "(zk mode)" in (out / "README.md").read_text()
    # everything the command started is gone: brokers, the controller broker and ZooKeeper
    state = json.loads((cluster_dir / "cluster.json").read_text())
    assert state["mode"] == "zk" and state["zookeeper"]["pid"] is None
    assert all(n["pid"] is None for n in state["nodes"])
    node_dirs = [n["dir"] for n in state["nodes"]] + [state["zookeeper"]["dir"]]
    for pid in os.listdir("/proc"):
        if pid.isdigit() and live_pid(int(pid), "java"):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            assert not any(d in cmdline for d in node_dirs), f"a JVM of the run survived: {cmdline[:200]}"
    namespaces = [n["netns"] for n in state["nodes"] if n["netns"]]
    assert namespaces and not set(namespaces) & set(os.listdir("/run/netns") if os.path.isdir("/run/netns") else [])
    assert attach(cluster_dir).mode == "zk"


def _run_on_era(name: str, version: str, out: Path, capsys: pytest.CaptureFixture[str],
                power_loss: bool = False) -> tuple[int, dict[str, Any]]:
    """``epochlab kafka run NAME --kafka-version VERSION --compare --json --out OUT``: its exit
    code and payload. Skips, saying why, when ``version``'s jars or its ZooKeeper-mode broker's
    extra jars are not resolved, or (``power_loss``) the lossy filesystem cannot be mounted."""
    from epochlab.errors import ConfigError
    from epochlab.kafka.jars import jar_dir
    from epochlab.kafka.live import lossyfs
    from epochlab.kafka.live.zookeeper import broker_extras_dir

    if not resolved(version):
        pytest.skip(f"Kafka {version}'s jars are not resolved (epochlab kafka jars --all-generations)")
    if power_loss and lossyfs.available() is not None:
        pytest.skip(f"a power loss needs the lossy filesystem: {lossyfs.available()}")
    try:
        broker_extras_dir(jar_dir(version, resolve=False))
    except ConfigError as exc:
        pytest.skip(f"the ZooKeeper-mode broker's extra jars could not be resolved: {exc}")
    code = main(["kafka", "run", name, "--kafka-version", version, "--compare", "--json", "--out", str(out)])
    return code, json.loads(capsys.readouterr().out)


def test_kafka_7414_on_kafka_2_0_0_live(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """KAFKA-7414 on the last release that has it, live: broker 1, alone in the ISR, loses
    power (its log directory on the lossy filesystem) and leads again with an empty log; broker
    2, back with m1-m3, is out of range and exits instead of truncating, at each start. Kafka
    2.0.0 says so in broker 2's ``server.log``; the model, following release 2.0.0, agrees. The
    leader's epoch comes from the controller's record in ZooKeeper: ListOffsets carries none
    before 2.1, and the leader's epoch cache was lost with the power."""
    out, version = tmp_path / "run", "2.0.0"
    code, payload = _run_on_era("kafka-7414-follower-halts-instead-of-truncating", version, out, capsys, power_loss=True)
    assert payload["model"]["generation"] == "kip-279"
    assert payload["model"]["settings_replaced"]["kafka_release"] == [None, version]
    checks = {c["description"]: c["status"] for c in payload["real"]["checks"]}
    assert checks["broker 2 keeps m1-m3: it never truncates"] == "passed", payload["real"]["checks"]
    assert checks["after every restart it exits again: the ISR stays [1]"] == "passed"
    assert payload["real"]["expectations_hold"] and payload["agree"], [d["text"] for d in payload["differences"]]
    assert code == 0
    log = (out.with_name("run.cluster") / "node-2" / "server.log").read_text(errors="replace")
    exits = [line for line in log.splitlines() if "Exiting because log truncation is not allowed" in line]
    assert len(exits) >= 2, "broker 2 exits at each of its two starts"


def test_kafka_3919_on_kafka_0_10_2_2_live(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """KAFKA-3919 on the last release before KIP-101, live: each produce is one compressed
    wrapper (the harness's producers compress on a cluster of message format v0/v1); A
    truncates to its stale HW, is elected uncleanly (the topic takes the era's default, on) and
    writes a seven-record wrapper at offsets 3-9; B, back, fetches at 8 and takes that wrapper
    whole. B's log then holds offsets 3-7 twice, and the model of 0.10.2.2 agrees."""
    out, version = tmp_path / "run", "0.10.2.2"
    code, payload = _run_on_era("kafka-3919-wrapper-below-log-end", version, out, capsys, power_loss=False)
    assert payload["model"]["generation"] == "hw-truncation"
    b = {str(k): v for k, v in payload["real"]["logs"].items()}["2"]
    assert [o for o, _e, _v in b["records"]] == [0, 1, 2, 3, 4, 5, 6, 7, 3, 4, 5, 6, 7, 8, 9]
    assert payload["real"]["expectations_hold"] and payload["agree"], [d["text"] for d in payload["differences"]]
    assert code == 0


def test_kip_101_problem_2_on_kafka_0_10_2_2_live(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """KIP-101 problem 2 on a release before KIP-101, live: B loses the unflushed m2 in a power
    cut, comes back once its old ZooKeeper registration is gone, leads and writes m3 at offset
    1; A returns with m2 there and keeps it: the logs diverge for good, as in the model. The
    timing holds whenever the topic was created, as long as it was before the run: m1, written
    2.1 s in, is flushed at the next check (2 s have passed since the log's creation), m2 0.9 s
    later waits 2 s after that flush, and the cut comes between. Whether B registers before A's
    session expires varies from run to run (in either run), so the data are compared, not the
    leaderships."""
    _, payload = _run_on_era("seed-004-kip101-problem-2", "0.10.2.2", tmp_path / "run", capsys, power_loss=True)
    assert payload["real"]["expectations_hold"], payload["real"]["checks"]
    assert any("first time-based flush" in note for note in payload["real"]["notes"])
    logs = {str(b): [v for _o, _e, v in log["records"]] for b, log in payload["real"]["logs"].items()}
    assert logs == {"1": [1, 2], "2": [1, 3]}
    data = [d["what"] for d in payload["differences"] if d["kind"] == "outcome" and d["what"] not in ("leaders", "final")]
    assert not data, [d["text"] for d in payload["differences"]]


def test_kafka_13141_on_kafka_2_8_0_live(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """KAFKA-13141 on the one release that has it, live: broker 1's link to the new leader 2 is
    slow (Toxiproxy, 3 s each way), so leader 2 takes broker 1's first fetch after the heal,
    which diverges, for its log end and puts it back into the ISR before it truncated; leader 2
    then dies, broker 1 is elected, and the acknowledged m4 and m5 are gone. The scenario names
    ``kafka.release`` 2.8.0, so it runs only on a 2.8.0 cluster (resolved here with Maven), and
    the model of that release agrees."""
    from epochlab.errors import ConfigError
    from epochlab.kafka.jars import jar_dir
    from epochlab.kafka.live.proxy import proxy_missing

    if proxy_missing() is not None:
        pytest.skip(f"a delayed link needs Toxiproxy: {proxy_missing()}")
    try:
        jar_dir("2.8.0")
    except ConfigError as exc:
        pytest.skip(f"Kafka 2.8.0's jars could not be resolved: {exc}")
    code, payload = _run_on_era("kafka-13141-diverging-fetch-joins-isr", "2.8.0", tmp_path / "run", capsys)
    assert payload["real"]["lost"] == [4, 5], payload["real"]
    assert payload["real"]["expectations_hold"] and payload["agree"], [d["text"] for d in payload["differences"]]
    assert code == 0
