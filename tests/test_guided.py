"""The guided engine (``epochlab.fuzz.guided``) and its protocol-state coverage
(``epochlab.fuzz.coverage``, ``src/coverage.rs``)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from epochlab.cli import main
from epochlab.fuzz.campaign import run_seed
from epochlab.fuzz.coverage import (BROKER, CLUSTER, CLUSTER_MOVE, NEAR_MISS, NEAR_MISS_CODES, broker_tuples, feature,
                                    is_zombie)
from epochlab.fuzz.executor import execute
from epochlab.fuzz.generator import FuzzProfile, generate_schedule, load_profile
from epochlab.fuzz.guided import (BATCH, FINDINGS, INITIAL, OPENING_BATCH, Entry, GuidedSearch, event_feature,
                                  event_kind, event_marks, finding_feature, mutate, poke)
from epochlab.fuzz.swarm import generate_swarm_schedule
from epochlab.fuzz.schedule import Schedule
from epochlab.generations import Generation

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("generation", ["strict-min-isr", "kip-101", "diverging-epoch"])
def test_rust_coverage_and_its_python_twin_agree(generation: str) -> None:
    """The Rust abstraction (Rust replicas) and the Python twin (the reference backend) give
    the same features on the same runs, and a run reaches some of each family."""
    for i in range(3):
        schedule = generate_schedule(run_seed(11, i), generation)
        rust = execute(schedule, coverage=True)
        twin = execute(schedule, backend="reference", coverage=True)
        assert (rust.features, rust.first_steps, rust.first_times, rust.first_brokers) == \
            (twin.features, twin.first_steps, twin.first_times, twin.first_brokers)
        assert rust.features and {f & 3 for f in rust.features} >= {BROKER, CLUSTER}
        # a feature is first reached during its step's interval: at or after that action
        at = [-1] + [a.at_ms for a in schedule.actions]
        assert all(t >= at[s + 1] if 0 <= s < len(schedule.actions) else t >= 0
                   for s, t in zip(rust.first_steps, rust.first_times))
        # first reached before the first action, at an action or while healing
        assert rust.first_steps and -1 <= min(rust.first_steps) <= max(rust.first_steps) <= len(schedule.actions)


def test_the_kraft_findings_stale_belief_about_a_follower_that_fetches_nothing_is_a_state() -> None:
    """The re-elected KRaft leader's schedule (``docs/kafka-findings/``) reaches a broker tuple
    whose leader code says: a follower it believes holds more than its log (4), that
    follower has no fetch in flight to correct it (8): it backs off after
    UNKNOWN_LEADER_EPOCH, and it is in the leader's maximal ISR (16), of the leader the
    controller names in its epoch, with an ISR of min.insync.replicas or more: a near miss (``coverage.NEAR_MISS``). Both backends reach it, at the
    same action."""
    schedule = Schedule.from_dict(json.loads(
        (ROOT / "docs" / "kafka-findings" / "kraft-reelected-leader-stale-follower-leo.json").read_text()), "finding")
    idle = broker_tuples(4 | 8 | 16, current_leader=True)
    assert idle < NEAR_MISS
    rust = execute(schedule, coverage=True)
    twin = execute(schedule, backend="reference", coverage=True)
    assert (rust.features, rust.first_steps, rust.first_brokers) == (twin.features, twin.first_steps, twin.first_brokers)
    reached = idle.intersection(rust.features)
    assert reached
    # the coverage names who: broker 1 holds the stale belief about broker 2
    who = dict(zip(rust.features, rust.first_brokers))
    assert {who[f] for f in reached} == {(1, 2)}
    # and before that, broker 1 held it as a zombie cut from the controller (bit 32), in the
    # controller's ISR: the state its re-election starts from
    cut = [f for f in broker_tuples(4 | 32).intersection(rust.features) if NEAR_MISS_CODES[f][4] == 1]
    assert cut and all(is_zombie(NEAR_MISS_CODES[f]) and who[f] == (1, 2) for f in cut)
    first = dict(zip(rust.features, rust.first_steps))
    assert min(first[f] for f in cut) < min(first[f] for f in reached)
    # first reached after the preferred election that re-elects broker 1, before its crash
    steps = {f: step for f, step in zip(rust.features, rust.first_steps)}
    assert {steps[f] for f in reached} <= set(range(4, len(schedule.actions)))
    # a random run of the same generation rarely has it: the family is not saturated by it
    assert not idle.intersection(execute(generate_schedule(run_seed(11, 0), "strict-min-isr"), coverage=True).features)


def test_a_poke_goes_through_its_parents_near_miss_and_acts_only_after_it() -> None:
    """``poke`` keeps the parent (seed and every action) and adds one or two actions after the
    moment the parent first reached the near miss, so the child's run is the parent's up to
    that moment: every feature the parent reached by then, the child reaches at the same step
    and time, the near miss included."""
    parent = json.loads((ROOT / "docs" / "kafka-findings" / "kraft-reelected-leader-stale-follower-leo.json").read_text())
    run = execute(Schedule.from_dict(parent, "finding"), coverage=True)
    reached = {f: (s, t) for f, s, t in zip(run.features, run.first_steps, run.first_times)}
    near = min((t, f) for f, (_, t) in reached.items() if f in NEAR_MISS)
    at_ms = near[0]
    kinds = set()
    for i in range(12):
        child = poke(parent, random.Random(i), at_ms)
        added = [a for a in child["actions"] if a not in parent["actions"]]
        assert child["seed"] == parent["seed"] and 1 <= len(added) <= 2
        assert len(child["actions"]) == len(parent["actions"]) + len(added)
        assert all(a["at_ms"] > at_ms for a in added) and child["actions"] == sorted(child["actions"], key=lambda a: a["at_ms"])
        kinds.update(child["origin"]["operators"])
        got = execute(Schedule.from_dict(child, "poke"), coverage=True)
        mine = {f: (s, t) for f, s, t in zip(got.features, got.first_steps, got.first_times)}
        before = {f: st for f, st in reached.items() if st[1] <= at_ms}
        assert near[1] in before and {f: mine.get(f) for f in before} == before
    assert {"poke-produce", "poke-heal"} <= kinds


def test_a_poke_asks_list_offsets_only_in_a_parent_whose_consumers_ask_it() -> None:
    """In a parent with the list-offsets step, some pokes ask the latest offset right after the
    moment, by a consumer that asks it in the parent, and the child runs; a parent without the
    step never gets one."""
    profile = load_profile(ROOT / "benches" / "profiles" / "off-by-default-steps.json")
    asking = generate_schedule(1000, "kip-101", profile).to_dict()
    consumers = {a["consumer"] for a in asking["actions"] if a["op"] == "list_offsets"}
    assert consumers
    asks = []
    for i in range(60):
        child = poke(asking, random.Random(i), 2000)
        asks += [a for a in child["actions"] if a not in asking["actions"] and a["op"] == "list_offsets"]
        if i < 3:
            execute(Schedule.from_dict(child, "poke"))
    assert asks and all(a["consumer"] in consumers and a["spec"] == "latest" and a["at_ms"] > 2000 for a in asks)
    silent = json.loads((ROOT / "docs" / "kafka-findings" / "kraft-reelected-leader-stale-follower-leo.json").read_text())
    ops = {a["op"] for i in range(60) for a in poke(silent, random.Random(i), 3000)["actions"]}
    assert "list_offsets" not in ops


def test_a_poke_acts_on_the_brokers_the_coverage_named() -> None:
    """Given the belief's holder and its stale follower (``Entry.first_brokers``), a poke's
    elections mostly name the holder and its isolations and slowed links mostly the follower;
    for a zombie holder elections are more frequent."""
    parent = json.loads((ROOT / "docs" / "kafka-findings" / "kraft-reelected-leader-stale-follower-leo.json").read_text())

    def added(zombie: bool) -> list[dict]:
        out = []
        for i in range(300):
            child = poke(parent, random.Random(i), 3000, leader=3, follower=2, zombie=zombie)
            out += [a for a in child["actions"] if a not in parent["actions"]]
        return out

    live, zombie = added(False), added(True)
    elections = [a["broker"] for a in live + zombie if a["op"] == "elect"]
    held_back = [a["broker"] for a in live + zombie if a["op"] in ("isolate", "slow_follower")]
    assert elections.count(3) > len(elections) / 2 and held_back.count(2) > len(held_back) / 2
    assert sum(a["op"] == "elect" for a in zombie) > sum(a["op"] == "elect" for a in live)


def test_a_poke_re_elects_a_leader_cut_from_the_controller_and_then_restores_its_link() -> None:
    """For a holder cut from the controller (leader code bit 32) half the pokes are re-elections:
    an election naming it while the cut holds, then the end of the cut (here the finding's
    link from the controller to broker 1, cut with drop 1)."""
    parent = json.loads((ROOT / "docs" / "kafka-findings" / "kraft-reelected-leader-stale-follower-leo.json").read_text())
    parent["actions"] = [a for a in parent["actions"] if a["at_ms"] < 3900]  # up to the near miss
    reelections = 0
    for i in range(40):
        child = poke(parent, random.Random(i), 3860, leader=1, follower=2, zombie=True, cut=True)
        added = [a for a in child["actions"] if a not in parent["actions"]]
        if child["origin"]["operators"] == ["poke-reelect"]:
            reelections += 1
            elect, restore = added
            assert elect["op"] == "elect" and elect["broker"] == 1 and elect["at_ms"] > 3860
            assert restore == {**restore, "op": "set_link", "a": "controller", "b": 1, "drop": 0.0}
            assert restore["at_ms"] > elect["at_ms"]
    assert 12 <= reelections <= 28


def test_the_rare_arm_targets_the_rarest_near_misses_the_corpus_holds() -> None:
    """Near misses (``coverage.NEAR_MISS``) are targets only once reached, and only the rarest
    of them (reached by at most twice the runs of the rarest); other features never are."""
    near = sorted(NEAR_MISS)[:3]
    other = feature(CLUSTER, bytes(8))
    search = GuidedSearch(Generation.parse("strict-min-isr"), seed=1, seconds=None, runs=0)
    search.corpus = [Entry(0, {}, (other,)), Entry(1, {}, (near[0], other)), Entry(2, {}, (near[1],)),
                     Entry(3, {}, (near[2], near[0]))]
    search.hits = {other: 50, near[0]: 2, near[1]: 4, near[2]: 5}
    assert search._near_miss_holders() == sorted(
        [(near[0], [search.corpus[1], search.corpus[3]]), (near[1], [search.corpus[2]])])
    search.hits = {other: 50}
    search.corpus = search.corpus[:1]
    assert search._near_miss_holders() == []


def test_a_run_with_a_protocol_violation_joins_the_corpus_and_the_rare_arm_goes_back_to_it() -> None:
    """A protocol violation is a feature of its run (one per invariant, first reached at the
    violation's step), so the run joins the corpus even when its states were all seen, and
    the rare arm's next rounds mutate the runs holding violations, focused on that step."""
    seen: list[tuple[int, str, int | None]] = []
    search = GuidedSearch(Generation.TRUNCATE_TO_HW, seed=1, seconds=None, runs=INITIAL + BATCH,
                          on_violation=lambda run, v, data, events: seen.append((run, v.invariant, v.step)))
    search.run()
    assert seen
    first = {invariant: (run, step) for run, invariant, step in reversed(seen)}
    for invariant, (run, step) in first.items():  # each invariant's first violating run
        entry = next(e for e in search.corpus if e.run == run)
        at = entry.reached_at(finding_feature(invariant))[0]
        assert at == (len(entry.schedule["actions"]) if step is None else step)
    holders = dict(search._finding_holders())
    assert set(holders) == {finding_feature(i) for i in first} and set(holders) <= FINDINGS
    violating = {e.run for entries in holders.values() for e in entries}
    children = search._children(search._round + 1)
    aimed = [data for _, arm, data in children if arm == "rare" and data["origin"]["aim"] in ("finding", "finding poke")]
    assert aimed and {data["origin"]["parent_run"] for data in aimed} <= violating
    # half of them are pokes: the parent's actions kept, one or two added after the violation
    pokes = [data for data in aimed if data["origin"]["aim"] == "finding poke"]
    assert pokes
    for data in pokes:
        parent = next(e for e in search.corpus if e.run == data["origin"]["parent_run"])
        assert all(a in data["actions"] for a in parent.schedule["actions"])
        assert 1 <= len(data["actions"]) - len(parent.schedule["actions"]) <= 2


def test_an_engine_events_kind_forgets_its_numbers_and_a_fault_actions_echo_is_none() -> None:
    """Two events that differ only in offsets, epochs, broker ids or the size of an ISR are
    one kind; the network's echo of a fault action is no protocol event."""
    a = {"time_ms": 5, "kind": "role", "message": "broker 2 is leader in epoch 3 (was follower in epoch 2), ISR [2, 3], LEO 7"}
    b = {"time_ms": 9, "kind": "role", "message": "broker 1 is leader in epoch 12 (was follower in epoch 11), ISR [1], LEO 0"}
    assert event_kind(a) == event_kind(b) == \
        "role: broker # is leader in epoch # (was follower in epoch #), ISR [#], LEO #"
    assert event_kind({**a, "message": a["message"].replace("follower", "leader")}) != event_kind(a)
    assert event_kind({"time_ms": 1, "kind": "network", "message": "partition [[1], [2, 3]]"}) is None
    assert event_feature(event_kind(a) or "") & 3 == CLUSTER
    assert event_feature("x") != event_feature("y")


def test_each_event_kind_is_marked_once_at_the_action_it_happened_after() -> None:
    events = [{"time_ms": 0, "kind": "controller", "message": "controller: initial leader 1 epoch 0"},
              {"time_ms": 150, "kind": "crash", "message": "broker 2 crashed"},
              {"time_ms": 150, "kind": "network", "message": "heal"},
              {"time_ms": 400, "kind": "crash", "message": "broker 3 crashed"},
              {"time_ms": 900, "kind": "replica", "message": "broker 3: truncated 4 -> 2 (OffsetsForLeaderEpoch)"}]
    marks = event_marks(events, [100, 150, 150, 600])
    assert [(kind, step, t) for _, kind, step, t in marks] == [
        ("controller: controller: initial leader # epoch #", 0, 0),
        ("crash: broker # crashed", 2, 150),
        ("replica: broker #: truncated # -> # (OffsetsForLeaderEpoch)", 3, 900)]
    assert [f for f, *_ in marks] == [event_feature(k) for _, k, _, _ in marks]


def test_a_runs_engine_events_are_features_and_the_rare_arm_goes_back_to_the_rarest() -> None:
    """Each kind of engine event a run shows is a feature of its run, first reached at the
    action the event followed; the rare arm picks parents for the rarest of them and focuses
    their mutants there (half of them pokes at the event's time)."""
    search = GuidedSearch(Generation.TRUNCATE_TO_HW, seed=2, seconds=None, runs=INITIAL + BATCH)
    search.run()
    assert search.event_kinds and set(search.event_kinds) <= set(search.hits)
    for entry in search.corpus[:5]:
        run = execute(Schedule.from_dict(entry.schedule, "corpus"))
        times = [a["at_ms"] for a in entry.schedule["actions"]]
        for f, kind, step, t in event_marks(run.events, times):
            assert search.event_kinds[f] == kind and f in entry.features
            assert entry.reached_at(f)[:2] == (step, t)
    holders = dict(search._event_holders())
    rarest = min(search.hits[f] for f in search.event_kinds)
    assert holders and all(search.hits[f] <= 2 * rarest for f in holders)
    assert all(f in e.features for f, entries in holders.items() for e in entries)
    children = search._children(search._round + 1)
    aimed = [data for _, arm, data in children if data is not None and data["origin"]["aim"] in ("rare event", "event poke")]
    parents = {e.run for entries in holders.values() for e in entries}
    assert aimed and {data["origin"]["parent_run"] for data in aimed} <= parents


def test_coverage_only_reads() -> None:
    """A run with coverage is the run without it: same history, verdict and end time."""
    schedule = generate_schedule(run_seed(5, 3), "strict-min-isr")
    plain, covered = execute(schedule), execute(schedule, coverage=True)
    assert plain.history_jsonl == covered.history_jsonl
    assert plain.verdict_json() == covered.verdict_json() and plain.end_ms == covered.end_ms
    assert plain.features is None and covered.features


def test_feature_families_are_in_the_low_bits() -> None:
    codes = bytes((1, 2, 0, 1, 1, 0, 0, 2))
    assert feature(BROKER, codes) & 3 == BROKER
    assert feature(CLUSTER_MOVE, codes, codes) & 3 == CLUSTER_MOVE
    assert feature(BROKER, codes) != feature(CLUSTER, codes)


def test_mutants_are_valid_schedules_and_a_function_of_the_random_draws() -> None:
    profile = FuzzProfile()
    parent = generate_schedule(run_seed(1, 0), "strict-min-isr").to_dict()
    other = generate_schedule(run_seed(1, 1), "strict-min-isr").to_dict()
    seen = set()
    for i in range(300):
        focus = None if i % 2 else i % len(parent["actions"])
        child = mutate(parent, other, random.Random(i), profile, focus)
        assert child == mutate(parent, other, random.Random(i), profile, focus)
        schedule = Schedule.from_dict(child)  # raises if a mutant is malformed
        times = [a.at_ms for a in schedule.actions]
        assert times == sorted(times) and len(times) <= 200
        seen.update(child["origin"]["operators"])
    assert seen >= {"insert", "delete", "delete-block", "swap", "retime", "retarget", "repeat",
                    "splice", "reseed", "regrow", "end-fault"}
    assert parent == generate_schedule(run_seed(1, 0), "strict-min-isr").to_dict()  # untouched


def _summary(out: Path, **kw: object) -> tuple[str, str]:
    search = GuidedSearch(Generation.KIP_279, seed=4, seconds=None, out=out, **kw)  # type: ignore[arg-type]
    search.run()
    return json.dumps(search.summary(deployment=False), sort_keys=True), \
        (out / "corpus" / "inputs.jsonl").read_text()


def test_the_first_runs_are_swarm_schedules_of_the_run_seeds() -> None:
    """Run *i* of the first round is the swarm schedule of run seed *i* (nothing to mutate
    yet): the search finds what executing those schedules finds, at the same runs."""
    runs = OPENING_BATCH
    guided = GuidedSearch(Generation.TRUNCATE_TO_HW, seed=3, seconds=None, runs=runs)
    guided.run()
    expected: dict[str, int] = {}
    for i in range(runs):
        result = execute(generate_swarm_schedule(run_seed(3, i), Generation.TRUNCATE_TO_HW))
        for v in result.verdict.protocol_violations:
            expected.setdefault(v.signature, i)
    assert expected, "the first swarm schedules of hw-truncation find nothing: pick another seed"
    assert {f.violation.signature: f.run for f in guided.findings.values()} == expected


def test_two_jobs_and_a_resumed_search_run_what_one_process_runs(tmp_path: Path) -> None:
    """The corpus, findings and summary of a run budget are the same on one process, on two
    worker processes, and stopped after a budget that cuts a round then resumed."""
    budget = INITIAL + 2 * BATCH + 13
    one = _summary(tmp_path / "one", runs=budget)
    assert one == _summary(tmp_path / "two", runs=budget, jobs=2)
    _summary(tmp_path / "resumed", runs=INITIAL + BATCH + 7)
    assert one == _summary(tmp_path / "resumed", runs=budget, resume=True)
    assert '"engine": "guided"' in one[0] and one[1].count("\n") > 10


def test_resuming_with_other_settings_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "search"
    assert main(["fuzz", "--engine", "guided", "-g", "kip-279", "--runs", "45", "--seed", "1",
                 "--out", str(out), "--json", "--jobs", "1"]) in (0, 1)
    capsys.readouterr()
    assert main(["fuzz", "--engine", "guided", "-g", "kip-279", "--runs", "90", "--seed", "2",
                 "--out", str(out), "--json", "--resume", "--jobs", "1"]) == 2
    assert "other settings (seed)" in capsys.readouterr().err
    (out / "corpus" / "state.json").write_text("{not json")
    assert main(["fuzz", "--engine", "guided", "-g", "kip-279", "--runs", "90", "--seed", "1",
                 "--out", str(out), "--json", "--resume", "--jobs", "1"]) == 2
    assert "cannot resume" in capsys.readouterr().err
    assert main(["fuzz", "--runs", "5", "--resume", "--out", str(out)]) == 2


def test_a_spark_master_runs_what_one_process_runs(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    budget = INITIAL + BATCH + 5
    assert _summary(tmp_path / "one", runs=budget) == \
        _summary(tmp_path / "spark", runs=budget, master="local[2]")


def test_the_mechanism_benchmark_counts_witnesses_and_refuses_bad_arguments() -> None:
    """``benches/guided_mechanism.py`` (the measurement behind the engine-event features):
    its counts for a few runs, and exit 2 or a message naming the bad argument otherwise."""
    import subprocess
    import sys
    script = [sys.executable, str(ROOT / "benches" / "guided_mechanism.py")]
    out = subprocess.run([*script, "--generation", "kip-101", "--config",
                          str(ROOT / "benches" / "profiles" / "off-by-default-steps.json"), "--runs", "17",
                          "--bug", "KAFKA-6082 (KAFKA-3083)", "--mutants", "1"],
                         capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    counts = got["counts"]
    # run 16 of campaign seed 11 shows the deposed controller's write without the bug
    assert got["runs"] == 17 and counts["fresh"] == 17 and got["witness_runs_without_match"] >= 1
    assert counts["fresh witness"] >= got["witness_runs_without_match"]
    # a poke keeps its parent whole up to the event, so it shows the event again
    assert counts["poke"] >= 1 and counts["poke witness"] == counts["poke"]
    assert counts.get("mutant", 0) <= got["witness_runs_without_match"]
    bad = subprocess.run([*script, "--generation", "no-such", "--bug", "KAFKA-3919"], capture_output=True, text=True)
    assert bad.returncode == 2 and "no-such" in bad.stderr
    bad = subprocess.run([*script, "--generation", "kip-101", "--runs", "0", "--bug", "KAFKA-3919"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--runs" in bad.stderr
    bad = subprocess.run([*script, "--generation", "kip-101", "--bug", "KIP-101 problem 1"], capture_output=True, text=True)
    assert bad.returncode == 2 and "not a catalogued bug with a witness" in bad.stderr
