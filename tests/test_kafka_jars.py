"""Kafka's jars resolved by the project's own pinned pom (Maven Central), into a fresh cache."""

from __future__ import annotations

import os
import subprocess
import sys


def _jars(*args: str, cache: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EPOCHLAB_KAFKA_CACHE": cache}
    return subprocess.run([sys.executable, "-m", "epochlab", "kafka", "jars", *args],
                          capture_output=True, text=True, check=False, env=env)


def test_resolves_the_current_release_into_an_empty_cache(tmp_path):
    done = _jars(cache=str(tmp_path))
    assert done.returncode == 0, done.stderr
    folder = done.stdout.strip()
    names = os.listdir(folder)
    assert (tmp_path / folder).joinpath(".complete").exists()
    assert any(n.startswith("kafka-storage-4.") for n in names)   # LeaderEpochFileCache, UnifiedLog
    assert any(n.startswith("kafka-tools-4.") for n in names)     # the 3.5+ tools module
    assert "slf4j-nop-1.7.36.jar" in names
    assert not [p for p in tmp_path.iterdir() if ".partial." in p.name]
    again = _jars(cache=str(tmp_path))                              # reused, not resolved again
    assert (again.returncode, again.stdout) == (0, done.stdout)


def test_a_malformed_version_is_a_usage_error(tmp_path):
    done = _jars("--version", "4.x", cache=str(tmp_path))
    assert done.returncode == 2
    assert "expected like 4.3.1" in done.stderr and "Traceback" not in done.stderr


def test_all_generations_and_one_version_exclude_each_other(tmp_path):
    done = _jars("--all-generations", "--version", "2.1.1", cache=str(tmp_path))
    assert done.returncode == 2
    assert "not allowed with argument" in done.stderr and not list(tmp_path.iterdir())


def test_an_old_release_resolves_without_kafka_tools_and_one_slf4j_binding(tmp_path):
    done = _jars("--version", "2.1.1", cache=str(tmp_path))
    assert done.returncode == 0, done.stderr
    names = os.listdir(done.stdout.strip())
    assert "kafka_2.12-2.1.1.jar" in names                          # Scala 2.12 from 2.1 on
    assert not any(n.startswith("kafka-tools") for n in names)      # no such module before 3.5
    assert [n for n in names if n.startswith("slf4j-") and n != "slf4j-api-1.7.36.jar"
            and not n.startswith("slf4j-api")] == ["slf4j-nop-1.7.36.jar"]
