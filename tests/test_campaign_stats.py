"""Campaign statistics: Wilson intervals, and disagreements only when significant."""

from __future__ import annotations

import pytest

from epochlab.campaigns.report import _differ, wilson


@pytest.mark.parametrize(("k", "n", "lo", "hi"), [
    (0, 10, 0.0, 0.2775),          # the rule of three's neighbourhood, never below 0
    (5, 10, 0.2366, 0.7634),
    (10, 10, 0.7225, 1.0),
    (1, 1000, 0.00018, 0.00565),
])
def test_wilson_matches_reference_values(k: int, n: int, lo: float, hi: float) -> None:
    a, b = wilson(k, n)
    assert a == pytest.approx(lo, abs=1e-4) and b == pytest.approx(hi, abs=1e-4)


def test_wilson_of_no_runs_says_nothing() -> None:
    assert wilson(0, 0) == (0.0, 1.0)


def test_a_difference_on_a_handful_of_runs_is_not_a_disagreement() -> None:
    few_a = {"runs": 16, "acked_loss_runs": 3 / 16}
    few_b = {"runs": 17, "acked_loss_runs": 1 / 17}
    assert not _differ(few_a, few_b, "acked_loss_runs")      # 19% vs 6%: noise at n=16
    many_a = {"runs": 2000, "acked_loss_runs": 0.19}
    many_b = {"runs": 2000, "acked_loss_runs": 0.06}
    assert _differ(many_a, many_b, "acked_loss_runs")


def test_a_check_the_grid_cannot_run_is_not_run_rather_than_failed() -> None:
    from epochlab.campaigns.report import expectations

    row = {"generation": "strict-min-isr", "replication_factor": 3, "acks": "all",
           "min_insync_replicas": 2, "unclean": False, "idempotence": False, "runs": 40,
           "committed_lost": 0, "acked_lost": 0, "duplicates": 0}
    checks = {c["name"]: c for c in expectations({"latest_generation": "strict-min-isr",
                                                   "by_config": [row]})}
    assert checks["no committed loss with acks=all, min.insync.replicas=2, clean elections"]["ok"] is True
    acks1 = checks["loss with acks=1 even with clean elections"]
    assert acks1["ok"] is None and "not run" in acks1["measured"]


def test_acks_true_is_not_acks_1() -> None:
    from epochlab.errors import ConfigError
    from epochlab.sim.config import ProducerConfig

    with pytest.raises(ConfigError):
        ProducerConfig.from_dict({"acks": True})


def test_latency_intervals_come_from_a_bootstrap_over_runs() -> None:
    from epochlab.campaigns.aggregate import bootstrap_percentiles

    steady = [[10, 11, 12, 10, 11]] * 40
    [(lo50, hi50), (lo99, hi99)] = bootstrap_percentiles(steady, (0.5, 0.99))
    assert lo50 <= 11 <= hi50 and hi50 - lo50 <= 1 and lo99 <= 12 <= hi99
    # one slow run among few: the p99 interval is wide, the p50 one is not
    few = [[10, 10, 10]] * 4 + [[3000, 3000, 3000]]
    [(lo50, hi50), (lo99, hi99)] = bootstrap_percentiles(few, (0.5, 0.99))
    assert hi50 == 10 and lo99 < 3000 <= hi99
    assert bootstrap_percentiles([[], []], (0.5,)) is None
    assert bootstrap_percentiles(few, (0.5, 0.99)) == bootstrap_percentiles(few, (0.5, 0.99))  # seeded


def test_the_rust_bootstrap_draws_what_the_plain_loop_draws() -> None:
    """``_core._bootstrap_draws`` (weighted ranks over one sorted list) against the plain
    statement (pool, sort, interpolate per resample): the same draws and the same floats, on
    random runs, quantiles (0, 1 and odd ones) and value ranges past 2**53."""
    import random

    from epochlab import _core
    from epochlab.campaigns.aggregate import bootstrap_draws_plain

    r = random.Random(14)
    for trial in range(150):
        runs = [[r.randint(-5, r.choice([3, 400, 2 ** 60])) for _ in range(r.randint(1, 12))]
                for _ in range(r.randint(1, 25))]
        qs = tuple(r.choice([0.0, 0.5, 0.99, 1.0, r.random()]) for _ in range(r.randint(1, 3)))
        resamples = r.randint(1, 25)
        plain = bootstrap_draws_plain(runs, qs, resamples, random.Random(trial))
        assert _core._bootstrap_draws(runs, list(qs), resamples, random.Random(trial)) == plain, trial


@pytest.mark.parametrize(("runs", "qs", "argument"), [([[1], []], [0.5], "runs"), ([], [0.5], "runs"),
                                                      ([[1]], [float("nan")], "qs"),
                                                      ([[1]], [1.5], "qs")])
def test_the_rust_bootstrap_refuses_what_it_cannot_draw_from(runs: list[list[int]], qs: list[float],
                                                             argument: str) -> None:
    import random

    from epochlab import _core
    from epochlab.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match=argument):
        _core._bootstrap_draws(runs, qs, 3, random.Random(0))
