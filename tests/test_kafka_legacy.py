"""Older Kafka releases' leader-epoch caches against the model's rules of their generation.

Each release runs in a process of its own (one JVM per process, one release per JVM), through
the CLI. A release whose jars are not in the cache is skipped: `epochlab kafka jars
--all-generations` resolves every one (docs/kafka-releases.md has the download sizes).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from epochlab.generations import Generation
from epochlab.kafka.jars import GENERATION_RELEASES, PATCH_RELEASES, generation_of, resolved
from epochlab.kafka.classes.legacy import KNOWN_DIFFERENCES, explain, model_rules

#: (release, generation whose rules it is compared with, the differences it may show)
COMPARED = [
    ("0.11.0.0", "kip-101", {"clear-earliest-keeps-equal-starts"}),
    ("0.11.0.3", "kip-101", {"clear-earliest-keeps-equal-starts", "undefined-epoch-answers-undefined"}),
    ("2.0.0", "kip-279", {"clear-earliest-keeps-equal-starts"}),
    ("2.0.1", "kip-279", {"assign-evicts", "below-first-epoch-answers-first-start"}),
    ("2.0.1", "kip-320", set()),   # 2.0.1 carries the 2.1 cache (KAFKA-7415 backported)
    ("2.1.1", "kip-320", set()),
    ("2.7.2", "kip-320", set()),
    ("3.6.2", "diverging-epoch", set()),
]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "epochlab", "kafka", *args],
                          capture_output=True, text=True, check=False)


def _needs(version: str) -> None:
    if not resolved(version):
        pytest.skip(f"Kafka {version} is not resolved: run `epochlab kafka jars --all-generations` "
                    f"(or --version {version})")


@pytest.mark.parametrize(("version", "generation", "allowed"), COMPARED,
                         ids=[f"{v}-{g}" for v, g, _ in COMPARED])
def test_release_agrees_with_its_generation_but_for_known_differences(version, generation, allowed):
    _needs(version)
    done = _cli("differential", "--generation", generation, "--version", version, "--ops", "400",
                "--seed", "5", "--keep-going", "--json")
    assert done.returncode in (0, 1), done.stderr
    report = json.loads(done.stdout)
    component = report["components"]["leader-epoch-cache"]
    assert (report["kafka"], report["generation"]) == (version, generation)
    assert component["ops"] > 0
    assert set(component["differences"]) <= allowed, component["first"]
    assert sum(component["differences"].values()) == component["mismatches"]
    assert done.returncode == (1 if component["mismatches"] else 0)


@pytest.mark.parametrize("version", sorted({v for v, _, _ in COMPARED}))
def test_release_runs_on_this_java(version):
    _needs(version)
    done = _cli("probe", "--version", version, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    (report,) = json.loads(done.stdout)
    assert (report["loads"], report["runs"], report["error"]) == (True, True, None)
    assert report["steps"][-1] == ["checkpoint file", "0\n1\n1 4\n"]


def test_the_pre_kip101_release_loads_but_has_no_cache():
    version = GENERATION_RELEASES[Generation.TRUNCATE_TO_HW]
    _needs(version)
    done = _cli("probe", "--version", version, "--json")
    (report,) = json.loads(done.stdout)
    assert done.returncode == 0
    assert (report["loads"], report["runs"]) == (True, False)
    assert "has no leader-epoch cache" in report["error"]


def test_what_cannot_run_is_refused_with_exit_2():
    g0 = _cli("differential", "--generation", "hw-truncation", "--ops", "10")
    assert g0.returncode == 2 and "has no leader-epoch cache" in g0.stderr
    log = _cli("differential", "--generation", "kip-320", "--component", "replica-log", "--ops", "10")
    assert log.returncode == 2 and "replica-log" in log.stderr and "Traceback" not in log.stderr


def test_a_second_release_in_one_process_is_refused():
    _needs(GENERATION_RELEASES[Generation.STRICT_MIN_ISR])
    script = ("from epochlab.kafka.classes.oracle import KafkaLeaderEpochCache\n"
              "KafkaLeaderEpochCache().close()\n"
              "from epochlab.cli import main\n"
              "raise SystemExit(main(['kafka', 'differential', '--generation', 'kip-320', '--ops', '5']))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "separate process" in done.stderr


def test_every_generation_stands_for_a_release():
    assert set(GENERATION_RELEASES) == set(Generation)
    for generation, version in GENERATION_RELEASES.items():
        assert generation_of(version) == generation
    for version, generation in PATCH_RELEASES.items():
        assert generation_of(version) == generation


def test_model_rules_by_generation():
    assert model_rules(Generation.KIP_101) == {"assign": "assign_kip101", "end_offset_for": "end_offset_for_kip101"}
    assert model_rules(Generation.KIP_279) == {"assign": "assign_kip101", "end_offset_for": "end_offset_for_kip279"}
    assert model_rules(Generation.KIP_320) == model_rules(Generation.DIVERGING_EPOCH) == {}


def test_explain_names_each_known_difference():
    def first(op, kafka, model):
        return {"op": list(op), "kafka": kafka, "rust": model, "reference": model}

    cases = {
        "clear-earliest-keeps-equal-starts": first(
            ("truncate_from_start", 0), {"result": None, "state": "[(0, 0), (5, 0)]"},
            {"result": None, "state": "[(5, 0)]"}),
        "undefined-epoch-answers-undefined": first(
            ("end_offset_for", None, 3), {"result": None, "state": "[]"}, {"result": 3, "state": "[]"}),
        "assign-evicts": first(
            ("assign", 10, 0), {"result": None, "state": "[(10, 0)]"},
            {"result": None, "state": "[(0, 0), (10, 0)]"}),
        "below-first-epoch-answers-first-start": first(
            ("end_offset_for", 1, 9), {"result": [1, 4], "state": "[(2, 4)]"},
            {"result": None, "state": "[(2, 4)]"}),
    }
    assert set(cases) == set(KNOWN_DIFFERENCES)
    for key, mismatch in cases.items():
        assert explain(mismatch) == key
    unexplained = first(("epoch_for_offset", 3), {"result": 1, "state": "[(1, 0)]"}, {"result": 2, "state": "[(1, 0)]"})
    assert explain(unexplained) is None
