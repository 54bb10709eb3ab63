"""Campaign grids: validation errors name the field; the default grid covers the seeds'
configurations; a run is a pure function of (configuration, run id, campaign seed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from epochlab.campaigns import build_schedule, default_grid, load_grid, parse_grid, run_seed
from epochlab.campaigns.grid import Grid
from epochlab.cli import main
from epochlab.errors import ConfigError


def test_default_grid_covers_the_seed_configurations() -> None:
    grid = default_grid()
    assert len(grid.configs) == 120
    seen = {(c.acks, c.min_insync_replicas, c.replication_factor, c.unclean_leader_election_enable,
             c.enable_idempotence) for c in grid.configs}
    assert ("0", 2, 3, False, False) in seen
    assert ("1", 1, 3, True, False) in seen
    assert ("all", 2, 3, False, True) in seen
    assert ("1", 1, 1, False, False) in seen
    assert not any(c.enable_idempotence and c.acks != "all" for c in grid.configs)
    assert len({c.generation for c in grid.configs}) == 6
    assert set(grid.faults) == {"leader-crash", "follower-lag", "correlated", "leader-partition"}
    assert len(set(grid.config_ids)) == len(grid.config_ids)


@pytest.mark.parametrize("data, field", [
    ({"axes": {"acks": ["0", "2"]}}, "axes.acks[1]"),
    ({"axes": {"min.insync.replicas": [1, "two"]}}, "axes.min.insync.replicas[1]"),
    ({"axes": {"generation": ["kip-999"]}}, "axes.generation[0]"),
    ({"axes": {"replication.factor": []}}, "axes.replication.factor"),
    ({"axes": {"acks": ["1", "1"]}}, "axes.acks"),
    ({"axes": {"colour": ["red"]}}, "axes.colour"),
    ({"faults": {"meteor": 1}}, "faults.meteor"),
    ({"faults": {"leader-crash": -1}}, "faults.leader-crash"),
    ({"faults": {"leader-crash": 0, "follower-lag": 0, "correlated": 0, "leader-partition": 0}}, "faults"),
    ({"cluster": {"session.timeout.ms": "soon"}}, "cluster.session.timeout.ms"),
    ({"cluster": {"acks": "all"}}, "cluster.acks"),
    ({"producer": {"request.timeout.ms": -5}}, "producer.request.timeout.ms"),
    ({"extra": {}}, "extra"),
    ({"axes": {"min.insync.replicas": [3], "replication.factor": [1]}}, "axes"),
])
def test_bad_grid_names_the_field(data: dict, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_grid(data, "grid.json")
    assert err.value.field == field, err.value.message
    assert err.value.message.startswith("grid.json: ")


def test_grid_files_toml_and_json(tmp_path: Path) -> None:
    toml = tmp_path / "g.toml"
    toml.write_text('[axes]\nacks = ["all"]\ngeneration = ["kip-320"]\n"enable.idempotence" = [true]\n'
                    '[faults]\nleader-crash = 1\n')
    grid = load_grid(toml)
    assert {c.acks for c in grid.configs} == {"all"}
    assert grid.faults["leader-crash"] == 1 and grid.faults["correlated"] == 0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"axes": {"unclean.leader.election.enable": ["yes"]}}))
    with pytest.raises(ConfigError) as err:
        load_grid(bad)
    assert err.value.field == "axes.unclean.leader.election.enable[0]"
    broken = tmp_path / "broken.toml"
    broken.write_text("[axes\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_grid(broken)


def test_cli_bad_grid_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "grid.json"
    bad.write_text(json.dumps({"axes": {"acks": ["most"]}}))
    assert main(["campaign", "--grid", str(bad), "--runs", "10"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "axes.acks[0]" in err and str(bad) in err


def test_grid_pickles_through_its_json() -> None:
    import pickle

    grid = default_grid()
    assert pickle.loads(pickle.dumps(grid)) == grid
    assert Grid.from_json(grid.to_json()) == grid


def test_run_seed_and_schedule_are_deterministic() -> None:
    assert run_seed(1, 2) == run_seed(1, 2) != run_seed(1, 3)
    grid = default_grid()
    a, wa = build_schedule(grid.configs[7], run_seed(5, 7), grid)
    b, wb = build_schedule(grid.configs[7], run_seed(5, 7), grid)
    assert a.to_json() == b.to_json() and wa == wb
    assert 10 <= len(a.actions) <= 40
    assert a.actions[wa.fault_index].op in ("crash", "partition")


@pytest.mark.parametrize("config_id, run_id, expected", [
    # found by the fuzzer's per-event checks, missed by the 25 ms cadence campaigns had
    ("g0-hw-truncation_acks-0_isr-1_rf-3_unclean_noidem", 1002, ["inv-strongisr"]),
    ("g0-hw-truncation_acks-all_isr-2_rf-3_clean_noidem", 1493, ["inv-strongisr"]),
    # false alarms of that cadence (its trueHW timeline only moved at samples)
    ("g1-kip-101_acks-all_isr-2_rf-3_clean_idem", 1398, []),
    ("g2-kip-279_acks-all_isr-1_rf-1_clean_noidem", 1410, []),
])
def test_a_campaign_run_reports_what_the_fuzzer_finds(config_id: str, run_id: int,
                                                       expected: list[str]) -> None:
    """A campaign row's violations and allowed findings are those of ``epochlab.fuzz.execute``
    on the row's schedule (the same per-event checks), so a campaign finding replays and
    shrinks as found. Runs of campaign seed 7 where a sampled cadence of the state checks
    disagreed with the per-event checks (docs/campaigns.md)."""
    from epochlab.campaigns.runs import run_one
    from epochlab.fuzz import execute

    grid = default_grid()
    cfg = next(c for c in grid.configs if c.config_id == config_id)
    row = run_one(cfg, run_id, 7, grid)
    schedule, _ = build_schedule(cfg, row["seed"], grid)
    verdict = execute(schedule).verdict
    assert row["violations"] == expected
    assert row["violations"] == sorted(set(verdict.signatures()))
    assert row["allowed"] == sorted({v.signature for v in verdict.allowed})
