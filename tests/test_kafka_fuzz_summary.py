"""``epochlab kafka fuzz`` summary per client family (``--client both``), without a cluster:
which runs count as reproduced by the model, the per-client shares, the refusal of an unknown
client before anything runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from epochlab.errors import ConfigError
from epochlab.kafka.runs.fuzz import FUZZ_CLIENTS, KafkaFuzzRun, _write_summary, fuzz_cluster, real_profile, reproduced


def _run(index: int, client: str, agree: bool, seeds: int | None = None, error: str | None = None,
         real_lost: list[int] | None = None) -> KafkaFuzzRun:
    run = KafkaFuzzRun(index, 100 + index, Path(f"run-{index:03d}-{client}"), 1.0, real_lost or [], [], [], [],
                       agree, [] if agree else [{"kind": "outcome", "what": "acked p1"}], error=error,
                       client=client)
    run.model_seeds_matching = seeds
    return run


def test_reproduced_is_agreement_or_a_matching_model_seed() -> None:
    assert reproduced(_run(0, "java", True)) is True
    assert reproduced(_run(0, "java", False, seeds=3)) is True
    assert reproduced(_run(0, "java", False, seeds=0)) is False
    assert reproduced(_run(0, "java", False, error="not runnable")) is None


def test_the_summary_gives_each_clients_share(tmp_path: Path) -> None:
    done = [_run(0, "librdkafka", True), _run(0, "java", False, seeds=0),
            _run(1, "librdkafka", False, seeds=2), _run(1, "java", False, seeds=5),
            _run(2, "librdkafka", False, seeds=0, real_lost=[7]), _run(2, "java", False, error="boom")]
    done[1].kind, done[4].kind = "duplicates", "kafka-acknowledged-fewer"
    _write_summary(tmp_path, 1, real_profile(), done, 12.0, "both")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["client"] == "both"
    assert summary["per_client"] == {
        "librdkafka": {"runs": 3, "reproduced": 2, "share": 0.667, "not_reproduced": [2], "real_violations": [2],
                       "not_reproduced_by_kind": {"kafka-acknowledged-fewer": [2]},
                       "model_violations": [], "errors": []},
        "java": {"runs": 2, "reproduced": 1, "share": 0.5, "not_reproduced": [0], "real_violations": [],
                 "not_reproduced_by_kind": {"duplicates": [0]}, "model_violations": [], "errors": [2]}}
    assert [(r["index"], r["client"]) for r in summary["per_run"]] == [
        (0, "librdkafka"), (0, "java"), (1, "librdkafka"), (1, "java"), (2, "librdkafka"), (2, "java")]


def test_an_unknown_client_is_refused_before_anything_runs(tmp_path: Path) -> None:
    assert FUZZ_CLIENTS == ("librdkafka", "java", "both")
    with pytest.raises(ConfigError, match="--client: expected one of librdkafka, java, both"):
        fuzz_cluster(None, 1, 1, tmp_path / "out", client="rdkafka")
    assert not (tmp_path / "out").exists()


def test_reexamine_counts_the_model_seeds_that_give_a_kept_outcome(tmp_path: Path) -> None:
    """A kept run whose "real" outcome is the model's own on seed 1: seed 1 reproduces it, the
    same with a changed outcome (one more acknowledged value) does not, and the cluster
    overrides reach the model (a malformed one is refused there)."""
    from dataclasses import replace

    from epochlab.fuzz.generator import generate_schedule
    from epochlab.kafka.runs.compare import model_run, summarize_model
    from epochlab.kafka.runs.fuzz import GENERATION, reexamine, schedule_scenario

    schedule = generate_schedule(7, GENERATION, real_profile(6))
    scenario = schedule_scenario(schedule, "kept")
    real = dict(summarize_model(model_run(replace(scenario, seed=1), GENERATION, {}, "java")), settings={})
    assert real["acked"], "the schedule acknowledges something"
    (tmp_path / "real.json").write_text(json.dumps(real, default=str))
    schedule.save(tmp_path / "schedule.json")
    assert reexamine(tmp_path, "java", seeds=1) == 1
    assert reexamine(tmp_path, "java", {"broker_startup_ms": [2000, 3800]}, seeds=1) == 1  # the default
    with pytest.raises(ConfigError, match="broker_startup_ms"):
        reexamine(tmp_path, "java", {"broker_startup_ms": [5000, 10]}, seeds=1)
    changed = dict(real, acked={p: {**a, "999": 99} for p, a in real["acked"].items()})
    (tmp_path / "real.json").write_text(json.dumps(changed, default=str))
    assert reexamine(tmp_path, "java", seeds=1) == 0


def _partitions(schedule: Any) -> list[tuple[str, Any]]:
    return [(a.op, a.params.get("groups")) for a in schedule.actions if a.op in ("partition", "heal")]


def test_a_live_schedule_keeps_the_clients_on_one_side() -> None:
    """The live cluster's clients share one address: a partition that splits them is rewritten
    to put every client on the first one's side, both on the cluster and on the model."""
    from epochlab.fuzz.schedule import Schedule
    from epochlab.kafka.runs.fuzz import live_schedule

    base = {"format": "epochlab-schedule", "version": 1, "generation": "strict-min-isr", "seed": 3, "cluster": {"brokers": [1, 2, 3]},
            "producers": {"p1": {"acks": "all"}}, "consumers": {"c1": {}}}
    split = Schedule.from_dict({**base, "actions": [
        {"at_ms": 10, "op": "partition", "groups": [[2, "controller", "c1"]]},
        {"at_ms": 20, "op": "partition", "groups": [["p1"]]},
        {"at_ms": 30, "op": "partition", "groups": [["c1"]]},
        {"at_ms": 40, "op": "partition", "groups": [[3, "p1", "c1"]]}]})
    live = live_schedule(split)
    assert _partitions(live) == [("partition", ((2, "controller"),)), ("partition", (("p1", "c1"),)),
                                 ("heal", None), ("partition", ((3, "p1", "c1"),))]
    assert live.origin["live"] == "clients kept on one side"
    assert Schedule.from_dict(live.to_dict()) == live  # what a run keeps replays as it ran
    whole = Schedule.from_dict({**base, "actions": [{"at_ms": 10, "op": "partition", "groups": [[1, "p1", "c1"]]}]})
    assert live_schedule(whole) is whole


def test_the_model_is_asked_with_the_steps_at_their_real_times() -> None:
    """A step the harness started late (after a slow fault step) is given to the model at the
    time the real run executed it, and so are the closing heal and restarts (the harness starts
    each when the one before returned); the closing wait and read stay as they are."""
    from epochlab.fuzz.schedule import Schedule
    from epochlab.kafka.runs.fuzz import at_real_times, schedule_scenario

    schedule = Schedule.from_dict({
        "format": "epochlab-schedule", "version": 1, "generation": "strict-min-isr", "seed": 3,
        "cluster": {"brokers": [1, 2, 3]}, "producers": {"p1": {"acks": "all"}}, "consumers": {},
        "actions": [{"at_ms": 4800, "op": "isolate", "broker": 2},
                    {"at_ms": 4810, "op": "produce", "producer": "p1", "count": 1}]})
    scenario = schedule_scenario(schedule, "late")
    closing = [s.action for s in scenario.steps[2:]]
    assert closing == ["heal", "wait_until"]
    real_steps = [{"index": 0, "action": "isolate", "at_ms": 4800, "executed_at_ms": 4801},
                  {"index": 1, "action": "produce", "at_ms": 4810, "executed_at_ms": 4900},
                  {"index": 2, "action": "heal", "at_ms": None, "executed_at_ms": 5400},
                  {"index": 3, "action": "wait_until", "at_ms": None, "executed_at_ms": 6900}]
    moved = at_real_times(scenario, real_steps)
    assert [s.at_ms for s in moved.steps] == [4801, 4900, 5400, None]
    assert moved.steps[3:] == scenario.steps[3:]
    assert at_real_times(scenario, []) is scenario


def test_the_model_cuts_a_partitions_links_in_the_order_the_harness_did() -> None:
    """A partition whose step kept the time each node's rules took effect cuts the model's
    links in that order: a pair from the first of its two ends to cut it (a client's links
    from the broker's, where the harness enforces them), the partition itself once the last
    node's rules are in, the per-link cuts lifted then; a heal lets a pair through from the
    last of its two ends. Without the times, or with ``link_by_link=False``, the step runs at
    its start as before, and the model runs either scenario."""
    from epochlab.fuzz.schedule import Schedule
    from epochlab.kafka.runs.fuzz import at_real_times, schedule_scenario
    from epochlab.scenarios.runner import run_scenario

    schedule = Schedule.from_dict({
        "format": "epochlab-schedule", "version": 1, "generation": "strict-min-isr", "seed": 3,
        "cluster": {"brokers": [1, 2, 3]}, "producers": {"p1": {"acks": "all"}}, "consumers": {},
        "actions": [{"at_ms": 1000, "op": "partition", "groups": [[1, 2], [3, "controller", "p1"]]},
                    {"at_ms": 1010, "op": "produce", "producer": "p1", "count": 1},
                    {"at_ms": 5000, "op": "heal"}]})
    scenario = schedule_scenario(schedule, "staged")
    real_steps = [{"index": 0, "action": "partition", "at_ms": 1000, "executed_at_ms": 1001,
                   "applied_ms": {"1": 1020, "2": 1100, "3": 1050, "100": 1080}},
                  {"index": 1, "action": "produce", "at_ms": 1010, "executed_at_ms": 1110},
                  {"index": 2, "action": "heal", "at_ms": 5000, "executed_at_ms": 5000,
                   "applied_ms": {"1": 5010, "2": 5090, "3": 5030, "100": 5060}}]
    staged = at_real_times(scenario, real_steps)

    def shown(step):  # type: ignore[no-untyped-def]
        if step.action == "set_link":
            return (step.at_ms, "cut" if step.params["drop"] == 1.0 else "lift", step.params["a"], step.params["b"])
        return (step.at_ms, step.action)

    assert [shown(s) for s in staged.steps if s.index == 0] == [
        (1020, "cut", 1, 3), (1020, "cut", 1, "controller"), (1020, "cut", 1, "p1"),
        (1050, "cut", 2, 3), (1080, "cut", 2, "controller"),
        (1100, "partition"),
        (1100, "lift", 1, 3), (1100, "lift", 1, "controller"), (1100, "lift", 1, "p1"),
        (1100, "lift", 2, 3), (1100, "lift", 2, "controller")]
    assert [shown(s) for s in staged.steps if s.index == 2] == [
        # broker 1's rules go first: its link to the client is through at once, the rest held
        (5010, "cut", 1, 3), (5010, "cut", 1, "controller"), (5010, "cut", 2, 3),
        (5010, "cut", 2, "controller"), (5010, "cut", 2, "p1"), (5010, "heal"),
        (5030, "lift", 1, 3), (5060, "lift", 1, "controller"),
        (5090, "heal"), (5090, "lift", 2, 3), (5090, "lift", 2, "controller"), (5090, "lift", 2, "p1")]
    assert [s.at_ms for s in staged.steps if s.index == 1] == [1110]
    plain = at_real_times(scenario, real_steps, link_by_link=False)
    assert [(s.action, s.at_ms) for s in plain.steps[:3]] == [("partition", 1001), ("produce", 1110), ("heal", 5000)]
    untimed = [{k: v for k, v in s.items() if k != "applied_ms"} for s in real_steps]
    assert [s.action for s in at_real_times(scenario, untimed).steps] == [s.action for s in plain.steps]
    for sc in (staged, plain):
        assert run_scenario(sc, "strict-min-isr", write=False).records


#: what ``BrokerLifecycleManager`` writes to a KRaft broker's server.log with the harness's
#: layout (``%d{UNIX_MILLIS} %p [%c] %m``)
UNFENCED = "{t} INFO [kafka.server.BrokerLifecycleManager] [BrokerLifecycleManager id={b}] The broker has been " \
           "unfenced. Transitioning from RECOVERY to RUNNING."


def test_each_restarts_startup_is_read_from_the_brokers_unfencing() -> None:
    """A restart's startup time is the time from the restart step to the broker's first
    unfencing after it, on the run clock (its 0 in wall-clock ms is kept with the run): the
    broker's unfencing at the cluster's start and another broker's later one do not count, and
    a restart the broker never came back from is left out."""
    from epochlab.kafka.runs.compare import restart_startups

    t0 = 1_795_943_698_000
    lines = [UNFENCED.format(t=t0 - 50_000, b=1), UNFENCED.format(t=t0 + 9_000, b=2),
             UNFENCED.format(t=t0 + 12_345, b=1), UNFENCED.format(t=t0 + 30_000, b=1),
             "1795943699000 INFO [state.change.logger] [Broker id=1] not an unfencing line"]
    restarts = [(2, 125, 1), (7, 20_000, 1), (9, 25_000, 3)]
    assert restart_startups(lines, restarts, t0 + 0.4) == {"2": 12_220, "7": 10_000}
    assert restart_startups([], restarts, t0) == {}


#: ``Partition.makeFollower`` / ``makeLeader``'s state-change lines of Kafka 4.3.1, with the
#: harness's layout, and the line before them on a restarted broker
FOLLOWER = "{t} INFO [state.change.logger] [Broker id={b}] Follower T-0 starts at leader epoch 0 from offset 1 " \
           "with partition epoch 0 and high watermark 0. Current leader is 1. Previous leader None and previous " \
           "leader epoch was -1."
LEADER = "{t} INFO [state.change.logger] [Broker id={b}] Leader T-0 with topic id Some(UQXh) starts at leader " \
         "epoch 2 from offset 2 with partition epoch 4, high watermark 1, ISR [1,2,3], adding replicas [] and " \
         "removing replicas [] . Previous leader Some(1) and previous leader epoch was 0."
CREATING = "{t} INFO [state.change.logger] [Broker id={b}] Creating new partition T-0 with topic id UQXh."


def test_each_restarts_first_role_is_read_from_the_state_change_log(tmp_path: Path) -> None:
    """A restart's first role is the time from the restart step to the broker's first line
    taking a role in the partition (follower or leader) after it: the broker's lines before the
    restart, another broker's, and a line that takes no role do not count, and a restart with
    no role after it is left out. A kept run without them in ``real.json`` has them read from
    its ``state-change.log`` and ``steps.json``; one that holds them keeps its own."""
    from epochlab.kafka.runs.compare import restart_roles
    from epochlab.kafka.runs.fuzz import kept_restart_roles

    t0 = 1_796_215_788_000
    lines = [FOLLOWER.format(t=t0 - 50_000, b=3), CREATING.format(t=t0 + 6_110, b=3),
             FOLLOWER.format(t=t0 + 6_111, b=2), FOLLOWER.format(t=t0 + 6_120, b=3),
             LEADER.format(t=t0 + 9_000, b=3), LEADER.format(t=t0 + 30_400, b=1)]
    restarts = [(4, 4_672, 3), (8, 28_900, 1), (9, 29_000, 2)]
    assert restart_roles(lines, restarts, t0 + 0.4) == {"4": 1_448, "8": 1_500}
    assert restart_roles([CREATING.format(t=t0 + 6_110, b=3)], restarts, t0) == {}

    (tmp_path / "state-change.log").write_text("\n".join(lines) + "\n")
    (tmp_path / "steps.json").write_text(json.dumps([
        {"index": 3, "action": "crash", "params": {"broker": 3}, "executed_at_ms": 4_606, "error": None},
        {"index": 4, "action": "restart", "params": {"broker": 3}, "executed_at_ms": 4_672, "error": None,
         "outcome": "started, pid 9959"},
        {"index": 8, "action": "restart", "params": {"broker": 1}, "executed_at_ms": 28_900, "error": None,
         "outcome": "already running"}]))
    assert kept_restart_roles(tmp_path, {"clock_epoch_ms": t0}) == {"4": 1_448}
    assert kept_restart_roles(tmp_path, {"clock_epoch_ms": t0, "restart_role_ms": {"4": 900}}) == {"4": 900}
    assert kept_restart_roles(tmp_path, {}) == {}


def _crash_and_restart(name: str) -> Any:
    """A scenario of a fuzz schedule that kills broker 2 at 1 s and restarts it at 9 s."""
    from epochlab.fuzz.schedule import Schedule
    from epochlab.kafka.runs.fuzz import schedule_scenario

    return schedule_scenario(Schedule.from_dict({
        "format": "epochlab-schedule", "version": 1, "generation": "strict-min-isr", "seed": 3,
        "cluster": {"brokers": [1, 2, 3]}, "producers": {"p1": {"acks": "all"}}, "consumers": {},
        "actions": [{"at_ms": 1000, "op": "crash", "broker": 2},
                    {"at_ms": 9000, "op": "restart", "broker": 2}]}), name)


def test_the_model_seeds_take_the_restarts_first_roles_unless_told_not_to(monkeypatch: pytest.MonkeyPatch) -> None:
    """``model_seeds_matching`` (and so ``reexamine``) gives each restart the time to its first
    role the run measured (``restart_role_ms``), not the time to its unfencing; with
    ``measured_startups=False`` every restart draws its startup. Read from the model runs' own
    events: the restarted broker is up after exactly the measured time."""
    from epochlab.kafka.runs import compare
    from epochlab.kafka.runs.fuzz import model_seeds_matching

    scenario = _crash_and_restart("measured-roles")
    restart = next(s for s in scenario.steps if s.action == "restart")
    steps = [{"index": restart.index, "at_ms": 9000, "executed_at_ms": 9000}]
    real = {"acked": {}, "lost": [], "duplicated": [], "restart_role_ms": {str(restart.index): 4_321},
            "restart_startup_ms": {str(restart.index): 12_345}}
    ups: list[str] = []
    model_run = compare.model_run

    def observed(*args, **kwargs):  # type: ignore[no-untyped-def]
        result = model_run(*args, **kwargs)
        ups.extend(e for e in result.events if "broker 2 restarts" in e)
        return result

    monkeypatch.setattr(compare, "model_run", observed)
    model_seeds_matching(scenario, real, {}, 1, "java", steps)
    model_seeds_matching(scenario, real, {}, 1, "java", steps, measured_startups=False)
    assert len(ups) == 2
    assert "up after 4321 ms" in ups[0]
    assert "up after 4321 ms" not in ups[1] and "up after 12345 ms" not in ups[1]


def test_the_model_takes_each_restarts_measured_startup_time() -> None:
    """``at_real_times`` gives a restart the startup time the real run measured; the model's
    broker is then down for exactly that long, and the run's other draws are the same."""
    from epochlab.kafka.runs.fuzz import at_real_times
    from epochlab.scenarios.runner import run_scenario

    scenario = _crash_and_restart("slow-start")
    restart = next(s for s in scenario.steps if s.action == "restart")
    assert restart.params["startup_ms"] is None
    steps = [{"index": restart.index, "at_ms": 9000, "executed_at_ms": 9000}]
    given = at_real_times(scenario, steps, {str(restart.index): 14_000})
    assert next(s for s in given.steps if s.action == "restart").params["startup_ms"] == 14_000

    def up_after(sc):  # type: ignore[no-untyped-def]
        events = run_scenario(sc, "strict-min-isr", write=False).events
        return [e for e in events if "broker 2 restarts" in e]

    assert "up after 14000 ms" in up_after(given)[0]
    assert "up after 14000 ms" not in up_after(scenario)[0]


def test_a_crash_happens_in_the_model_when_the_brokers_jvm_exited() -> None:
    """A crash step that kept when the broker's JVM exited (``applied_ms``, measured by
    ``Faults.kill``): the model's broker is cut off from the step's start (SIGKILL stops it;
    what is sent to it waits unread) and crashes at the exit, when its peers see their
    connections close; its links are usable again then, except one a partition had cut
    already, which stays cut. Without the time, or with ``link_by_link=False`` (the older
    runs' reading), the crash is at the step's start."""
    from dataclasses import replace

    from epochlab.kafka.runs.fuzz import at_real_times
    from epochlab.scenarios.runner import run_scenario

    scenario = _crash_and_restart("late-exit")
    crash = next(s for s in scenario.steps if s.action == "crash")
    broker = int(crash.params["broker"])
    steps = [{"index": crash.index, "action": "crash", "at_ms": crash.at_ms, "executed_at_ms": 1_004,
              "applied_ms": {str(broker): 1_049}}]
    exited = at_real_times(scenario, steps)
    assert next(s for s in exited.steps if s.action == "crash").at_ms == 1_049
    around = [(s.at_ms, s.action, s.params.get("drop"), sorted(map(str, (s.params.get("a"), s.params.get("b")))))
              for s in exited.steps if s.index == crash.index and s.action == "set_link"]
    others = [["1", "2"], ["2", "3"], ["2", "controller"], ["2", "p1"]]
    assert around == [(1_004, "set_link", 1.0, p) for p in others] + [(1_049, "set_link", 0.0, p) for p in others]
    # a link a partition had cut stays cut: no set_link touches it
    cut_first = [{"index": 99, "action": "partition", "at_ms": 500, "executed_at_ms": 500}]
    split = replace(scenario, steps=type(scenario.steps)([
        replace(crash, index=99, action="partition", at_ms=500, params={"groups": [[2, 3], [1, "controller", "p1"]]}),
        *scenario.steps]))
    kept = at_real_times(split, cut_first + steps)
    assert sorted(sorted(map(str, (s.params["a"], s.params["b"]))) for s in kept.steps
                  if s.action == "set_link" and s.params["drop"] == 1.0) == [["2", "3"]]
    assert next(s for s in at_real_times(scenario, steps, link_by_link=False).steps
                if s.action == "crash").at_ms == 1_004
    untimed = [{k: v for k, v in steps[0].items() if k != "applied_ms"}]
    assert next(s for s in at_real_times(scenario, untimed).steps if s.action == "crash").at_ms == 1_004
    events = run_scenario(exited, "strict-min-isr", write=False).events
    assert f"1049 ms: broker {broker} crashed" in events, [e for e in events if "crashed" in e]


def test_the_kind_of_a_difference_in_the_data() -> None:
    from epochlab.kafka.runs.fuzz import outcome_kind

    def summary(acked: list[int], lost: list[int] = (), dup: list[int] = ()) -> dict[str, Any]:  # type: ignore[assignment]
        return {"acked": {"p1": {str(v): i for i, v in enumerate(acked)}}, "lost": list(lost), "duplicated": list(dup)}
    assert outcome_kind(summary([1, 2]), summary([1, 2])) is None
    assert outcome_kind(summary([1, 2], dup=[1]), summary([1, 2])) == "duplicates"
    assert outcome_kind(summary([1]), summary([1, 2])) == "kafka-acknowledged-fewer"
    assert outcome_kind(summary([1, 2, 3]), summary([1, 2])) == "kafka-acknowledged-more"
    assert outcome_kind(summary([1, 3]), summary([1, 2])) == "other"
    assert outcome_kind(summary([1, 2], lost=[2]), summary([1, 2])) == "other"


def test_each_restarts_return_to_the_isr_is_measured_on_its_own() -> None:
    """Every restart gets its own return to the ISR: a broker out of the ISR returns at its
    first ISR with it; one still in the ISR when restarted returns once it has left and come
    back; one that never left has 0; one stopped again before it returned has none (``None``);
    steps that are not restarts of a broker are skipped."""
    from epochlab.kafka.runs.compare import isr_returns

    points = [(0, 1, 1, (1, 2, 3), False), (1_000, 1, 1, (1, 3), False), (5_000, 1, 1, (1, 2, 3), False),
              (8_000, 1, 1, (1, 2), False), (9_000, 1, 1, (1, 2, 3), False),
              (20_000, 1, 1, (1, 2), False)]
    steps = [(500, "crash", {"broker": 2}), (3_000, "restart", {"broker": 2}),
             (7_000, "restart", {"broker": 3}), (10_000, "restart", {"broker": 1}),
             (15_000, "restart", {"broker": 3}), (19_000, "crash", {"broker": 3}),
             (21_000, "heal", {})]
    assert isr_returns(points, steps) == [[3_000, 2, 2_000], [7_000, 3, 2_000], [10_000, 1, 0],
                                          [15_000, 3, 0]]
    steps = [(19_500, "restart", {"broker": 3}), (25_000, "crash", {"broker": 3})]
    assert isr_returns(points, steps) == [[19_500, 3, None]]


def test_a_summary_compares_every_restarts_return_to_the_isr() -> None:
    """The model's summary of a run with two restarts holds both returns, and a real run that
    took much longer for the second is a timing difference of that restart."""
    from epochlab.fuzz.schedule import Schedule
    from epochlab.kafka.runs.compare import compare, model_run, summarize_model
    from epochlab.kafka.runs.fuzz import GENERATION, schedule_scenario

    schedule = Schedule.from_dict({
        "format": "epochlab-schedule", "version": 1, "generation": GENERATION, "seed": 3,
        "cluster": {"brokers": [1, 2, 3]}, "producers": {"p1": {"acks": "all"}}, "consumers": {},
        "actions": [{"at_ms": 1000, "op": "crash", "broker": 2},
                    {"at_ms": 12000, "op": "restart", "broker": 2},
                    {"at_ms": 30000, "op": "crash", "broker": 3},
                    {"at_ms": 42000, "op": "restart", "broker": 3}]})
    model = summarize_model(model_run(schedule_scenario(schedule, "two-restarts"), GENERATION, {}, "java"))
    returns = model["isr_returns"]
    assert [(b, ms is not None and 1_000 < ms < 10_000) for _t, b, ms in returns] == [(2, True), (3, True)]
    real = json.loads(json.dumps(model))
    real["isr_returns"][1][2] = returns[1][2] + 20_000
    agree, diffs = compare(real, model)
    assert agree
    assert [d["what"] for d in diffs if d["kind"] == "timing"] == [
        f"restart of broker 3 at {returns[1][0]} ms: return to the ISR (ms)"]


FENCED = ("{t} INFO [org.apache.kafka.controller.ReplicationControlManager] [QuorumController id=100] "
          "Fencing broker {b} at epoch 12 because its session has timed out.")


def test_each_silenced_broker_is_matched_with_the_controllers_fence() -> None:
    """A silence is a step that stops a broker's session reaching the controller: a crash (its
    incarnation never speaks again: a restart registers a new one only after the old session
    was fenced, so a fence after the restart is still the crash's), an isolation, or a
    partition that puts the broker on another side than the controller (brokers it does not
    list are on one side). A partition silence ends at the heal; a fence after it, or later
    than a session timeout and one check period (plus 1 s) after the silence, is not its. A
    controlled shutdown and a crash of a broker already down silence nothing."""
    from epochlab.kafka.runs.compare import real_fences, silence_fences, silences

    steps = [(100, "partition", {"groups": [[2, 3, "controller", "p1"]]}),   # broker 1 cut
             (3_000, "heal", {}),                                            # before its fence
             (4_000, "crash", {"broker": 2}),
             (4_500, "crash", {"broker": 2}),                                # already down
             (5_000, "restart", {"broker": 2}),
             (6_000, "controlled_shutdown", {"broker": 3}),
             (20_000, "isolate", {"broker": 1}),
             (40_000, "crash", {"broker": 3})]                               # down: nothing
    assert silences(steps, [1, 2, 3]) == [(100, 1, 3_000), (4_000, 2, None), (20_000, 1, None)]
    # any iterable of brokers, read again at each partition
    twice = [(0, "partition", {"groups": [[1]]}), (500, "heal", {}), (900, "partition", {"groups": [[3]]})]
    assert silences(twice, iter([1, 2, 3])) == [(0, 1, 500), (900, 3, None)]
    t0 = 1_795_943_698_000
    lines = [FENCED.format(t=t0 + 6_050, b=1), FENCED.format(t=t0 + 10_200, b=2),
             FENCED.format(t=t0 + 26_300, b=1), FENCED.format(t=t0 + 60_000, b=3),
             "1795943699000 INFO [state.change.logger] not a fencing line"]
    fences = real_fences(lines, t0 + 0.4)
    assert fences == [(6_050, 1), (10_200, 2), (26_300, 1), (60_000, 3)]
    assert silence_fences(steps, [1, 2, 3], fences, 6_000) == [[100, 1, None], [4_000, 2, 6_200],
                                                              [20_000, 1, 6_300]]
    # a fence long after the silence is another incarnation's
    assert silence_fences(steps, [1, 2, 3], [(4_000 + 7_751, 2)], 6_000)[1] == [4_000, 2, None]


def test_the_models_summary_times_each_silence_to_its_fence() -> None:
    """The model's controller fences a crashed broker within a session timeout and one check
    period of the crash (Kafka 4.0+: 4.0-6.75 s with 2 s heartbeats and a 6 s session), and the
    summary says when."""
    from epochlab.fuzz.schedule import Schedule
    from epochlab.kafka.runs.compare import model_run, summarize_model
    from epochlab.kafka.runs.fuzz import GENERATION, schedule_scenario

    schedule = Schedule.from_dict({
        "format": "epochlab-schedule", "version": 1, "generation": GENERATION, "seed": 3,
        "cluster": {"brokers": [1, 2, 3]}, "producers": {"p1": {"acks": "all"}}, "consumers": {},
        "actions": [{"at_ms": 1000, "op": "crash", "broker": 2},
                    {"at_ms": 12000, "op": "restart", "broker": 2}]})
    fences = summarize_model(model_run(schedule_scenario(schedule, "one-crash"), GENERATION, {}, "java"))[
        "silence_fences"]
    assert len(fences) == 1 and fences[0][:2] == [1000, 2]
    assert 4_000 < fences[0][2] <= 6_750


def test_a_silence_fenced_on_one_side_only_is_a_timing_difference() -> None:
    from epochlab.kafka.runs.compare import compare

    base = {"acked": {}, "not_acked": {}, "lost": [], "duplicated": [], "read": {}, "leaders": [],
            "final": {}, "expectations": {}, "logs": {}, "times": {}}
    real = {**base, "silence_fences": [[100, 2, 6_200], [9_000, 1, 5_000]]}
    model = {**base, "silence_fences": [[100, 2, 4_900], [9_000, 1, None]]}
    agree, diffs = compare(real, model)
    assert agree
    assert [d["what"] for d in diffs] == ["silence of broker 1 at 9000 ms: to its fence (ms)"]


def test_the_fence_lines_are_the_controllers(tmp_path: Path) -> None:
    """The fencing lines come from the controller nodes' ``server.log``, not the brokers'."""
    from types import SimpleNamespace

    from epochlab.kafka.runs.compare import fence_lines

    t0 = 1_795_943_698_000
    logs = {100: [FENCED.format(t=t0 + 5, b=2), f"{t0 + 1} INFO something else"],
            1: [FENCED.format(t=t0 + 3, b=3)]}
    nodes = {}
    for node, lines in logs.items():
        path = tmp_path / f"node-{node}.log"
        path.write_text("\n".join(lines) + "\n")
        nodes[node] = SimpleNamespace(server_log=path)
    cluster = SimpleNamespace(broker_ids=[1], controller_ids=[100], nodes=nodes)
    assert fence_lines(cluster) == [FENCED.format(t=t0 + 5, b=2)]


@pytest.mark.parametrize(("generation", "kind"), [("hw-truncation", "not comparable"), ("kip-101", "outcome"),
                                                  ("strict-min-isr", "outcome")])
def test_epochs_are_compared_only_where_kafka_writes_them(generation: str, kind: str) -> None:
    """Before KIP-101 a batch carries no leader epoch and no epoch cache is kept: the model's
    epochs of that generation have nothing on disk to be compared with."""
    from epochlab.kafka.runs.compare import compare

    base = {"acked": {}, "not_acked": {}, "lost": [], "duplicated": [], "read": {}, "leaders": [],
            "final": {}, "expectations": {}, "times": {}}
    real = {**base, "logs": {1: {"records": [[0, -1, 1]], "epochs": []}}}
    model = {**base, "generation": generation, "logs": {1: {"records": [[0, 0, 1]], "epochs": [[0, 0]]}}}
    agree, diffs = compare(real, model)
    assert {d["kind"] for d in diffs} == {kind} and len(diffs) == 2
    assert agree == (kind == "not comparable")


@pytest.mark.parametrize(("generation", "setting", "unclean"), [
    ("hw-truncation", None, "true"), ("kip-101", None, "false"), ("strict-min-isr", None, "false"),
    ("hw-truncation", False, "false"), ("strict-min-isr", True, "true")])
def test_a_live_topic_takes_the_unclean_default_of_the_models_generation(
        generation: str, setting: bool | None, unclean: str) -> None:
    """A scenario that leaves unclean leader election unset runs on a topic with the default of
    the generation the model runs in: on before 0.11 (KIP-106), off after."""
    from epochlab.kafka.runs.scenario import _topic_configs
    from epochlab.sim.config import ClusterConfig

    cluster = {} if setting is None else {"unclean.leader.election.enable": setting}
    assert _topic_configs(ClusterConfig.from_dict(cluster), generation)["unclean.leader.election.enable"] == unclean


def test_a_process_age_is_read_from_proc() -> None:
    import os

    from epochlab.kafka.live.cluster import process_age_s

    age = process_age_s(os.getpid())
    assert age is not None and 0 <= age < 24 * 3600
    assert process_age_s(None) is None and process_age_s(2 ** 22 + 12345) is None


def test_a_new_leader_sampled_with_its_predecessors_epoch_is_not_a_leadership() -> None:
    """A live sample paired leader 2 with epoch 0, its predecessor's (its election not yet
    applied where the epoch was read), between leader 1 in epoch 0 and leader 2 in epoch 1
    (``tests/test_kafka_run.py``'s Java cut-leader scenario, 2026-12-02): two leaders never
    share an epoch, so the sample is left out, as an epoch below one already seen is."""
    from epochlab.kafka.runs.compare import leader_runs

    pt = lambda t, leader, epoch: (t, leader, epoch, (1, 2, 3), leader is None)  # noqa: E731
    assert leader_runs([pt(0, 1, 0), pt(5, 2, 0), pt(9, 2, 1)]) == [[1, 0], [2, 1]]
    assert leader_runs([pt(0, 1, 0), pt(5, 2, 1), pt(7, 1, 0), pt(9, None, None), pt(12, 1, 2)]) == \
        [[1, 0], [2, 1], [None, None], [1, 2]]
    assert leader_runs([pt(0, 1, 0), pt(3, 3, None), pt(9, 2, 1)]) == [[1, 0], [2, 1]]


#: ``Partition.makeLeader``'s line as a topic is made (leader epoch 0), Kafka 4.3.1
FIRST_LEADER = "{t} INFO [state.change.logger] [Broker id={b}] Leader T-0 with topic id Some(UQXh) starts at " \
               "leader epoch 0 from offset 0 with partition epoch 0, high watermark 0, ISR [1,2,3], adding " \
               "replicas [] and removing replicas [] . Previous leader None and previous leader epoch was -1."


def test_each_brokers_first_role_as_the_topic_was_made_is_read_from_the_state_change_log(tmp_path: Path) -> None:
    """A broker's first role in leader epoch 0 (either role) counts, on the run's clock; a later
    epoch's role, a second epoch-0 line and the role of a broker restarted before it do not. A
    kept run without them in ``real.json`` has them read from its log and steps."""
    from epochlab.kafka.runs.compare import first_roles
    from epochlab.kafka.runs.fuzz import kept_first_roles

    t0 = 1_796_279_894_382
    lines = [CREATING.format(t=t0 - 180, b=2), FOLLOWER.format(t=t0 - 168, b=2),
             FOLLOWER.format(t=t0 - 137, b=3), FIRST_LEADER.format(t=t0 - 101, b=1),
             FOLLOWER.format(t=t0 + 40, b=2), LEADER.format(t=t0 + 9_000, b=3)]
    assert first_roles(lines, [], t0) == {"2": -168, "3": -137, "1": -101}
    # broker 3 down at the making and restarted: its epoch-0 line is the restart's
    late = [FOLLOWER.format(t=t0 - 168, b=2), FIRST_LEADER.format(t=t0 - 101, b=1), FOLLOWER.format(t=t0 + 5_000, b=3)]
    assert first_roles(late, [(6, 4_000, 3)], t0) == {"2": -168, "1": -101}
    assert first_roles([LEADER.format(t=t0, b=1)], [], t0) == {}

    (tmp_path / "state-change.log").write_text("\n".join(lines) + "\n")
    (tmp_path / "steps.json").write_text("[]")
    assert kept_first_roles(tmp_path, {"clock_epoch_ms": t0}) == {"2": -168, "3": -137, "1": -101}
    assert kept_first_roles(tmp_path, {"clock_epoch_ms": t0, "first_role_ms": {"2": -5}}) == {"2": -5}
    assert kept_first_roles(tmp_path, {}) == {}


def test_the_model_seeds_take_the_first_roles_on_an_established_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """``model_seeds_matching`` gives an established cluster's model the brokers' first roles
    the run measured (``first_role_ms``), and no other cluster's; ``measured_startups=False``
    leaves them out too."""
    from dataclasses import replace

    from epochlab.kafka.runs import compare
    from epochlab.kafka.runs.fuzz import model_seeds_matching

    seen: list[Any] = []
    model_run = compare.model_run

    def observed(scenario, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(scenario.cluster.get("first_role_ms"))
        return model_run(scenario, *args, **kwargs)

    monkeypatch.setattr(compare, "model_run", observed)
    real = {"acked": {}, "lost": [], "duplicated": [], "first_role_ms": {"1": -101, "2": -168, "3": -137}}
    established = _crash_and_restart("first-roles")
    assert established.cluster["established"] is True  # every kafka fuzz schedule's
    plain = replace(established, cluster={k: v for k, v in established.cluster.items() if k != "established"})
    model_seeds_matching(established, real, {}, 1, "java", [])
    model_seeds_matching(established, real, {}, 1, "java", [], measured_startups=False)
    model_seeds_matching(plain, real, {}, 1, "java", [])
    assert seen == [{"1": -101, "2": -168, "3": -137}, None, None]
