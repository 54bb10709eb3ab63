"""How the guided engine (``epochlab.fuzz.guided``) makes its schedules: the swarm of its fresh
schedules (``epochlab.fuzz.swarm``) and the bandit that shares runs among fresh schedules and
mutants (``epochlab.fuzz.bandit``)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from epochlab.errors import InvalidArgumentError
from epochlab.fuzz.bandit import Bandit
from epochlab.fuzz.campaign import run_seed
from epochlab.fuzz.generator import DELAYS, FuzzProfile, RandomSource, generate_schedule
from epochlab.fuzz.guided import (ARMS, BATCH, FOCUS_SHARE, INITIAL, OPENING_BATCH, GuidedSearch, build,
                                  round_size, round_start)
from epochlab.fuzz.swarm import (CONSUME_PERCENTS, PRODUCE_PERCENTS, draw_swarm,
                                 generate_swarm_schedule)
from epochlab.generations import Generation



# -- the bandit ----------------------------------------------------------------------------

def test_the_bandits_choices_follow_its_rewards() -> None:
    """An arm that paid on most of its runs gets most choices; the one that never paid gets
    about the floor's share; and after the rewards turn, the discount moves the choices."""
    bandit = Bandit(("a", "b", "c"), discount=0.5, floor=9)
    for _ in range(30):
        bandit.reward("a", False)
        bandit.reward("b", True)
        bandit.reward("c", False)
    rng = random.Random(1)
    counts = Counter(bandit.choose(rng) for _ in range(2000))
    assert counts["b"] > 0.85 * 2000
    assert counts["a"] < 0.08 * 2000 and counts["c"] < 0.08 * 2000
    assert bandit.mean("b") > 0.9 > 0.1 > bandit.mean("a")
    for _ in range(6):  # the rewards turn: "c" pays, "b" stops
        bandit.end_round()
        for _ in range(10):
            bandit.reward("b", False)
            bandit.reward("c", True)
    counts = Counter(bandit.choose(rng) for _ in range(2000))
    assert counts["c"] > 0.85 * 2000 > counts["b"]


def test_the_bandits_choices_are_a_function_of_its_counts_and_generator() -> None:
    one, two = Bandit(ARMS), Bandit(ARMS)
    for bandit in (one, two):
        for i in range(50):
            bandit.reward(ARMS[i % 3], i % 4 == 0)
        bandit.end_round()
    rngs = random.Random(8), random.Random(8)
    draws = [[b.choose(rng) for _ in range(200)] for b, rng in zip((one, two), rngs)]
    assert draws[0] == draws[1] and len(set(draws[0])) > 1
    three = Bandit(ARMS)
    three.load(one.to_dict())
    assert three == one
    rngs = random.Random(9), random.Random(9)
    assert [three.choose(rngs[0]) for _ in range(50)] == [one.choose(rngs[1]) for _ in range(50)]


def test_the_bandit_keeps_to_the_allowed_arms_and_refuses_bad_settings() -> None:
    bandit = Bandit(ARMS)
    bandit.reward("rare", True)
    rng = random.Random(3)
    assert {bandit.choose(rng, ("fresh", "energy")) for _ in range(300)} == {"fresh", "energy"}
    with pytest.raises(InvalidArgumentError, match="allowed"):
        bandit.choose(rng, ("splice",))
    with pytest.raises(InvalidArgumentError, match="discount"):
        Bandit(ARMS, discount=0.0)
    with pytest.raises(InvalidArgumentError, match="floor"):
        Bandit(ARMS, floor=101)
    with pytest.raises(InvalidArgumentError, match="at least one arm"):
        Bandit(())
    with pytest.raises(InvalidArgumentError, match="won"):
        bandit.reward("rare", 1.5)


def test_a_fractional_reward_counts_its_share_of_a_win() -> None:
    bandit = Bandit(ARMS)
    for _ in range(10):
        bandit.reward("fresh", 0.25)
        bandit.reward("rare", 1.0)
    assert bandit.wins["fresh"] == 2.5 and bandit.losses["fresh"] == 7.5
    assert bandit.mean("rare") > bandit.mean("fresh") > bandit.mean("energy") - 0.5


# -- the swarm -----------------------------------------------------------------------------

def test_swarm_schedules_vary_the_mix_the_classes_and_the_length() -> None:
    profile = FuzzProfile()
    shapes = []
    for i in range(200):
        schedule = generate_swarm_schedule(run_seed(3, i), "kip-101", profile)
        assert schedule == generate_swarm_schedule(run_seed(3, i), "kip-101", profile)
        origin = schedule.origin
        ops = Counter(a.op for a in schedule.actions)
        produce = ops["produce"] / len(schedule.actions)
        shapes.append((origin["produce_percent"], origin["actions"], len(origin["fault_classes"])))
        assert origin["produce_percent"] in PRODUCE_PERCENTS
        assert origin["consume_percent"] in CONSUME_PERCENTS
        assert len(schedule.actions) == origin["actions"]  # every fault class makes an action
        assert set(origin["fault_classes"]) <= set(profile.fault_classes)
        if origin["produce_percent"] == 60:
            assert produce > 0.35
        if origin["produce_percent"] == 15:
            assert produce < 0.35
        gaps = {a.at_ms - b.at_ms for a, b in zip(schedule.actions[1:], schedule.actions)}
        assert gaps <= set(DELAYS)
    lengths = Counter(s[1] for s in shapes)
    assert set(lengths) == {50, 100, 150} and min(lengths.values()) > 40
    assert len({s[2] for s in shapes}) >= 5
    # not the random engine's schedules: another draw from the same run seed
    assert generate_swarm_schedule(run_seed(3, 0), "kip-101").actions != \
        generate_schedule(run_seed(3, 0), "kip-101").actions


def test_swarm_weights_scale_the_profiles_weights() -> None:
    profile = FuzzProfile()
    for i in range(100):
        swarm = draw_swarm(RandomSource(i), profile)
        assert swarm.classes
        for name, weight in swarm.classes.items():
            assert weight // profile.fault_classes[name] in (1, 2, 4)
    off = FuzzProfile(swarm=False)
    enabled = {k: w for k, w in off.fault_classes.items() if w > 0}
    assert all(draw_swarm(RandomSource(i), off).classes == enabled for i in range(20))


# -- the search ----------------------------------------------------------------------------

def test_the_opening_rounds_are_short_and_fresh() -> None:
    opening = range(0, INITIAL, OPENING_BATCH)
    assert [round_size(r) for r in opening] == [OPENING_BATCH] * len(opening)
    assert round_size(INITIAL) == round_size(INITIAL + BATCH) == BATCH
    search = GuidedSearch(Generation.KIP_101, seed=2, seconds=None, runs=1)
    specs = search._children(0)  # no corpus yet: every schedule fresh
    assert [(run, arm, data) for run, arm, data in specs] == \
        [(run, "fresh", None) for run in range(OPENING_BATCH)]
    first = [build(search._task(), spec)[0] for spec in specs]
    assert {b["origin"]["aim"] for b in first} == {"fresh"}
    assert first[0] == {**generate_swarm_schedule(run_seed(2, 0), Generation.KIP_101).to_dict(),
                        "origin": first[0]["origin"]}
    assert [round_start(i) for i in range(INITIAL // OPENING_BATCH + 2)] == \
        [*opening, INITIAL, INITIAL + BATCH]


def test_the_search_rewards_the_arms_that_made_its_corpus() -> None:
    """After a short search the bandit's counts are the runs of each arm, its wins the runs
    that joined the corpus (before the discount), and every arm was tried."""
    search = GuidedSearch(Generation.KIP_101, seed=5, seconds=None, runs=INITIAL + BATCH,
                          profile=FuzzProfile(actions=30))
    seen: list[tuple[str, bool]] = []
    merge = search._merge

    def spy(run, data, features, *rest):  # type: ignore[no-untyped-def]
        before = len(search.corpus)
        merge(run, data, features, *rest)
        seen.append((data["origin"]["arm"], len(search.corpus) > before))

    search._merge = spy  # type: ignore[method-assign]
    search.run()
    arms = Counter(arm for arm, _ in seen)
    assert set(arms) == set(ARMS) and sum(arms.values()) == INITIAL + BATCH
    wins = Counter(arm for arm, won in seen if won)
    assert wins["fresh"] >= 1 and len(search.corpus) == sum(wins.values())
    assert all(search.bandit.wins[a] <= wins[a] for a in ARMS)


def test_the_next_round_is_drawn_before_this_one_is_merged() -> None:
    """The pipeline: round *i* is drawn from the corpus of rounds *0 .. i-2*, after the last
    of them is merged and before any run of round *i-1* is, so the workers have it queued
    while the driver merges (and the draw does not depend on how many workers there are)."""
    search = GuidedSearch(Generation.KIP_101, seed=5, seconds=None, runs=INITIAL + 2 * BATCH,
                          profile=FuzzProfile(actions=30))
    merged: list[int] = []
    drawn: dict[int, list[int]] = {}
    children, merge = search._children, search._merge

    def draw(index):  # type: ignore[no-untyped-def]
        drawn[index] = list(merged)
        return children(index)

    def spy(run, data, features, *rest):  # type: ignore[no-untyped-def]
        merged.append(run)
        merge(run, data, features, *rest)

    search._children, search._merge = draw, spy  # type: ignore[method-assign]
    search.run()
    assert merged == list(range(INITIAL + 2 * BATCH))
    last = INITIAL // OPENING_BATCH + 2  # the round after the budget is drawn too
    assert sorted(drawn) == list(range(last + 1))
    for index, before in drawn.items():
        assert before == list(range(round_start(max(0, index - 1)))), index


def _features(family: int, count: int, start: int = 0) -> list[int]:
    return [((start + i) << 2) | family for i in range(count)]


def test_a_new_feature_counts_by_its_familys_size() -> None:
    """A run's reward is the sum over its new features of the smallest family's size over the
    feature's family size (at most 1): one more of a crowded family is worth little, a new
    one of a small family a whole win."""
    search = GuidedSearch(Generation.KIP_101, seed=1, seconds=None, runs=1)
    rewards: list[float] = []
    search.bandit.reward = lambda arm, won: rewards.append(float(won))  # type: ignore[method-assign]
    data = {"origin": {"arm": "fresh"}}
    search._merge(0, data, _features(0, 10) + _features(3, 100), [0] * 110)
    assert rewards == [1.0]  # nothing known yet: every family weighs 1
    search._merge(1, data, _features(3, 4, start=100), [0] * 4)
    assert rewards[-1] == pytest.approx(4 * 10 / 100)
    search._merge(2, data, _features(3, 1, start=104) + _features(0, 1, start=10), [0, 0])
    assert rewards[-1] == 1.0
    search._merge(3, data, _features(0, 10), [0] * 10)  # nothing new
    assert rewards[-1] == 0.0 and len(search.corpus) == 3
    assert search._family == [11, 0, 0, 105]


def test_rare_targets_are_grouped_by_family_and_a_share_of_mutants_is_focused() -> None:
    """Each family with a rare feature is a target group of its own (a rare broker tuple is
    as likely a target as one of many rare cluster moves), and at least FOCUS_SHARE of a
    round's schedules are focused mutants even when the bandit favours fresh schedules."""
    search = GuidedSearch(Generation.KIP_101, seed=1, seconds=None, runs=1)
    parent = generate_swarm_schedule(run_seed(1, 0), Generation.KIP_101).to_dict()
    parent["origin"]["arm"] = "fresh"
    search._merge(0, parent, _features(0, 2) + _features(3, 50), [1] * 52)
    search._merge(1, parent, _features(3, 50, start=50), [2] * 50)
    groups = search._rare_holders()
    assert [len(g) for g in groups] == [2, 100]
    assert all(f & 3 == 0 for f, _ in groups[0]) and all(f & 3 == 3 for f, _ in groups[1])
    for _ in range(200):
        search.bandit.reward("fresh", True)
        search.bandit.reward("rare", False)
        search.bandit.reward("energy", False)
    arms = Counter(arm for _, arm, _ in search._children(INITIAL // OPENING_BATCH))
    assert arms["rare"] >= FOCUS_SHARE * BATCH * 0.6 and arms["fresh"] > arms["energy"]


