"""The simulator has two backends: ``rust`` (the Rust replica state machine, log, kernel, network,
fetch plane, change watch and incremental checks) and ``reference`` (the Python replica state
machine over the pure-Python log, the Python kernel and network, the brokers' own fetcher and
the plain checker that evaluates every check after every change). Whole simulations must be
identical on both, byte for byte: same history, same engine events, same final state, same
checks. Any difference is a porting bug of one of them. ``benches/backend_agreement.py`` does
the same on the random engine's schedules at scale."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochlab.generations import Generation
from epochlab.scenarios import builtin_names, load_builtin
from epochlab.scenarios.runner import run_scenario
from epochlab.sim import Cluster, ClusterConfig, ProducerConfig

BACKENDS = ("rust", "reference")
CASES = [(n, g) for n in builtin_names() for g in load_builtin(n).generations]


def _fingerprint(result) -> tuple[list[str], str, list[str], list[bool]]:
    return (result.history_lines, json.dumps(result.final_state, sort_keys=True), result.events,
            [c.passed for c in result.checks])


@pytest.mark.parametrize(("name", "generation"), CASES, ids=[f"{n}-{g}" for n, g in CASES])
def test_builtin_scenarios_run_identically_on_every_backend(name: str, generation: str) -> None:
    scenario = load_builtin(name)
    runs = {b: _fingerprint(run_scenario(scenario, generation, write=False, backend=b)) for b in BACKENDS}
    assert runs["rust"] == runs["reference"]


ACTIONS = st.lists(
    st.one_of(
        st.tuples(st.just("produce"), st.integers(1, 4)),
        st.tuples(st.just("crash"), st.integers(1, 3), st.booleans()),
        st.tuples(st.just("restart"), st.integers(1, 3)),
        st.tuples(st.just("isolate"), st.integers(1, 3)),
        st.tuples(st.just("heal")),
        st.tuples(st.just("shutdown"), st.integers(1, 3)),
        st.tuples(st.just("preferred"),),
        st.tuples(st.just("run"), st.integers(1, 8000)),
    ),
    min_size=1,
    max_size=14,
)


def _random_run(backend: str, generation: Generation, seed: int, actions: list[tuple]) -> tuple:
    config = ClusterConfig.from_dict({"min.insync.replicas": 2, "unclean.leader.election.enable": True}, "test")
    cluster = Cluster(config, generation, seed=seed, backend=backend)
    producer = cluster.producer("p", ProducerConfig.from_dict({"acks": "all", "enable.idempotence": True}, "test"))
    value = 0
    for action in actions:
        kind = action[0]
        if kind == "produce":
            for _ in range(action[1]):
                value += 1
                producer.send(value)
        elif kind == "crash" and cluster.brokers[action[1]].alive:
            cluster.crash(action[1], lose_unflushed=action[2])
        elif kind == "restart" and not cluster.brokers[action[1]].alive:
            cluster.restart(action[1])
        elif kind == "isolate":
            cluster.isolate(action[1])
        elif kind == "heal":
            cluster.heal()
        elif kind == "shutdown" and cluster.brokers[action[1]].alive:
            cluster.controlled_shutdown(action[1])
        elif kind == "preferred":
            cluster.elect_preferred_leader()
        elif kind == "run":
            cluster.run_for(action[1])
    cluster.run_for(20_000)
    return (cluster.history_jsonl(), json.dumps(cluster.state().to_dict(), sort_keys=True),
            [str(e) for e in cluster.events])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(generation=st.sampled_from(list(Generation)), seed=st.integers(0, 2**16), actions=ACTIONS)
def test_random_fault_schedules_run_identically_on_every_backend(generation, seed, actions) -> None:
    assert _random_run("rust", generation, seed, actions) == _random_run("reference", generation, seed, actions)


def test_unknown_backend_is_a_config_error() -> None:
    from epochlab.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        Cluster(ClusterConfig(), Generation.STRICT_MIN_ISR, backend="java")
    assert info.value.field == "backend"


def _agreement_module():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benches" / "backend_agreement.py"
    spec = importlib.util.spec_from_file_location("backend_agreement", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_agreement_bench_runs_fuzz_schedules_on_both_backends(tmp_path, capsys) -> None:
    agreement = _agreement_module()
    assert agreement.main(["--runs", "2", "--generations", "kip-101", "strict-min-isr", "--json",
                           "--out", str(tmp_path)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["generations"]["strict-min-isr"] == {"runs": 2, "agree": 2, "violating_runs": 0}
    assert summary["differing"] == [] and not list(tmp_path.iterdir())


def test_the_agreement_bench_reports_a_backend_that_differs(tmp_path, capsys, monkeypatch) -> None:
    """A backend whose runs end 1 ms later is caught, and the schedule written for a replay."""
    agreement = _agreement_module()
    real = agreement.execute

    def late_reference(schedule, backend=None):
        result = real(schedule, backend=backend)
        if backend == "reference":
            result.end_ms += 1
        return result
    monkeypatch.setattr(agreement, "execute", late_reference)
    assert agreement.main(["--runs", "1", "--generations", "kip-320", "--out", str(tmp_path)]) == 1
    assert "DIFFERS kip-320 run 0" in capsys.readouterr().out
    from epochlab.fuzz.schedule import Schedule

    (written,) = tmp_path.iterdir()
    assert Schedule.from_dict(json.loads(written.read_text())).generation.label == "kip-320"
