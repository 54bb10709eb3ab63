"""Kafka releases resolved from Maven Central into a local jar cache.

The pinned Maven project ``pom.xml`` beside this file names ``org.apache.kafka:kafka_<scala>``
(and ``kafka-tools`` from 3.5 on) at a version given on the command line; Maven's
``dependency:copy-dependencies`` copies the release and its runtime dependencies into
``$EPOCHLAB_KAFKA_CACHE/<version>-<pom digest>`` (default ``~/.cache/epochlab/kafka/...``): a
changed pom resolves anew. A folder is used only once it is complete (marked by ``.complete``),
so an interrupted resolution is redone, never half used.

Each protocol generation stands for one release (:data:`GENERATION_RELEASES`), the one whose
code ``docs/core-semantics.md`` describes for it; :data:`PATCH_RELEASES` are later patches of the same
lines whose leader-epoch cache was also compared (they carry backported fixes, see
``docs/kafka-releases.md``). :data:`KRAFT_RELEASES` are the releases whose brokers run in KRaft
mode, the last patch of each line from 3.3 on, whose ``kafka.cluster.Partition`` the
stale-follower check runs (:mod:`epochlab.kafka.classes.stale_follower`); that check's JVM also carries
Mockito, resolved once into a shared folder of the cache (:func:`mockito_dir`) through the pinned
``mockito-pom.xml``. ``epochlab kafka jars --all-generations`` resolves all of them.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from epochlab.errors import ConfigError
from epochlab.generations import Generation

__all__ = ["DEFAULT_KAFKA_VERSION", "GENERATION_RELEASES", "KRAFT_RELEASES", "MOCKITO_VERSION", "PATCH_RELEASES",
           "KafkaRelease", "cache_root", "compared_releases", "generation_of", "jar_dir", "logging_dir",
           "mockito_dir", "release_for", "resolved"]

DEFAULT_KAFKA_VERSION = "4.3.1"

#: The release each generation stands for: the first release whose rules the generation models
#: (the protocol rules cite ``AK@0.11.0.0`` and ``AK@2.0.0``), the last patch of its line where
#: the patches changed nothing the model compares, the current release for the latest.
GENERATION_RELEASES: dict[Generation, str] = {
    Generation.TRUNCATE_TO_HW: "0.10.2.2",   # no leader-epoch cache yet
    Generation.KIP_101: "0.11.0.0",          # 0.11.0.3 has the KAFKA-6857 fix backported
    Generation.KIP_279: "2.0.0",             # 2.0.1 has the KAFKA-7415 cache backported
    Generation.KIP_320: "2.1.1",
    Generation.DIVERGING_EPOCH: "3.6.2",
    Generation.STRICT_MIN_ISR: DEFAULT_KAFKA_VERSION,
}

#: Later patch releases compared too, with the generation whose model they are compared with.
PATCH_RELEASES: dict[str, Generation] = {
    "0.11.0.3": Generation.KIP_101,
    "2.0.1": Generation.KIP_279,
    "2.7.2": Generation.KIP_320,
}

#: Every release line whose brokers run in KRaft mode (KIP-833 marked KRaft production-ready in
#: 3.3), by the last patch of the line that Maven Central serves (checked with ``mvn
#: dependency:get`` on 2026-11-28: 3.3.3, 3.4.2, 3.5.3, 3.6.3, 3.7.3, 3.8.2, 3.9.3, 4.0.3, 4.1.3,
#: 4.2.3, 4.3.2 and 4.4.1 are not there), plus 4.1.0, the release the stale-follower
#: reproduction was first run on. Oldest first.
KRAFT_RELEASES: tuple[str, ...] = (
    "3.3.2", "3.4.1", "3.5.2", "3.6.2", "3.7.2", "3.8.1", "3.9.2",
    "4.0.2", "4.1.0", "4.1.2", "4.2.2", "4.3.1", "4.4.0",
)

#: The Mockito release the stale-follower check mocks ``Partition``'s collaborators with; its
#: subclass mock maker (the default of Mockito 4) needs no Java agent, so the JPype JVM never
#: attaches one to itself. ``mockito-pom.xml`` pins it.
MOCKITO_VERSION = "4.11.0"

POM = Path(__file__).with_name("pom.xml")
MOCKITO_POM = Path(__file__).with_name("mockito-pom.xml")
_VERSION = re.compile(r"^\d+\.\d+\.\d+(\.\d+)?$")


@dataclass(frozen=True)
class KafkaRelease:
    """One Kafka release: its version and the Scala binary version of its ``kafka_*`` artifact."""

    version: str
    scala: str

    @property
    def modern(self) -> bool:
        """3.5 and later publish ``kafka-tools`` as its own module."""
        major, minor = (int(p) for p in self.version.split(".")[:2])
        return (major, minor) >= (3, 5)


def release_for(version: str = DEFAULT_KAFKA_VERSION) -> KafkaRelease:
    """The release named ``version`` with the Scala binary its artifacts were published for."""
    if not _VERSION.match(version):
        raise ConfigError(f"Kafka version: expected like 4.3.1, got {version!r}", where="--version",
                          field="version", expected="MAJOR.MINOR.PATCH", got=version)
    major, minor = (int(p) for p in version.split(".")[:2])
    if (major, minor) >= (3, 0):
        scala = "2.13"
    elif (major, minor) >= (2, 1):
        scala = "2.12"
    else:
        scala = "2.11"
    return KafkaRelease(version, scala)


def generation_of(version: str) -> Generation | None:
    """The generation whose model ``version``'s classes are compared with (the generation it
    stands for, or the one of a compared patch release); None for a release in neither table."""
    for generation, release in GENERATION_RELEASES.items():
        if release == version:
            return generation
    return PATCH_RELEASES.get(version)


def compared_releases() -> list[tuple[str, str]]:
    """(generation label, version) of every release compared, oldest first."""
    pairs = [(g.label, v) for g, v in GENERATION_RELEASES.items()]
    pairs += [(g.label, v) for v, g in PATCH_RELEASES.items()]
    return sorted(pairs, key=lambda pair: tuple(int(n) for n in pair[1].split(".")))


def cache_root() -> Path:
    """``$EPOCHLAB_KAFKA_CACHE``, or ``~/.cache/epochlab/kafka``."""
    env = os.environ.get("EPOCHLAB_KAFKA_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "epochlab" / "kafka"


def _folder(release: KafkaRelease) -> Path:
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:10]
    return cache_root() / f"{release.version}-{digest}"


def resolved(version: str) -> bool:
    """Whether ``version``'s jars are in the cache already (nothing is downloaded)."""
    return (_folder(release_for(version)) / ".complete").is_file()


def jar_dir(version: str = DEFAULT_KAFKA_VERSION, *, resolve: bool = True) -> Path:
    """The folder holding every jar of Kafka ``version``, resolving it with Maven if needed.

    Raises :class:`ConfigError` when the folder is missing and ``resolve`` is false, when Maven is
    not installed, or when Maven fails (its last lines are in the message).
    """
    release = release_for(version)
    if not resolve and not (_folder(release) / ".complete").is_file():
        raise ConfigError(f"Kafka {version} is not resolved yet: run `epochlab kafka jars --version {version}`",
                          where=str(_folder(release)), field="version", expected="resolved jars", got=version)
    cmd = ["-f", str(POM), f"-Dkafka.version={release.version}", f"-Dscala.binary={release.scala}",
           "dependency:copy-dependencies"]
    if release.modern:
        cmd.insert(0, "-Dkafka.modern")  # before "-f POM"
    return _maven_folder(_folder(release), cmd, what=f"Kafka {version}", field="version", got=version,
                         where=str(POM), expected="a release on Maven Central",
                         done=lambda partial, mvn: _resolve_logging(partial, mvn))


def _maven_folder(dest: Path, args: list[str], *, what: str, field: str, got: object, where: str,
                  expected: str, produced: str = "*.jar",
                  done: Callable[[Path, str], None] | None = None) -> Path:
    """``dest``, filled by ``mvn -q -B ARGS -Djars.dir=<partial>`` the first time: the folder is
    used only once complete (``.complete``), built under a temporary name and renamed, so an
    interrupted resolution is redone, never half used. ``produced``: a file pattern the result
    must hold; ``done(partial, mvn)`` adds to the folder before it is marked complete.
    :class:`ConfigError` when Maven is not on PATH, or when Maven fails (its last lines are in
    the message)."""
    if (dest / ".complete").is_file():
        return dest
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ConfigError(f"Maven (mvn) is needed to resolve {what} and is not on PATH",
                          where="mvn", field="mvn", expected="Apache Maven 3", got=None)
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.parent / f"{dest.name}.partial.{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    proc = subprocess.run([mvn, "-q", "-B", *args, f"-Djars.dir={partial}"], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0 or not any(partial.glob(produced)):
        shutil.rmtree(partial, ignore_errors=True)
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        raise ConfigError(f"Maven could not resolve {what}: {tail}", where=where, field=field, expected=expected,
                          got=got)
    if done is not None:
        done(partial, mvn)
    (partial / ".complete").touch()
    shutil.rmtree(dest, ignore_errors=True)
    partial.rename(dest)
    return dest


#: The folder, inside a release's jar folder, with the SLF4J binding a live broker logs through.
LOGGING = "logging"


def logging_dir(jars: Path) -> Path | None:
    """The folder with the SLF4J 1.7 binding for log4j 2 that lets a live broker of this release
    write its log (``jars/logging``), resolving it if a cache made before it existed lacks it;
    ``None`` for a release that does not log through log4j 2 (before 4.0: log4j 1 / reload4j).

    The release folder itself keeps ``slf4j-nop`` (the oracle's JVM logs nothing); a broker's
    class path puts this binding in its place (:meth:`epochlab.kafka.live.cluster.LocalCluster`).
    """
    if not _log4j_core(jars):
        return None
    folder = jars / LOGGING
    if folder.is_dir() and any(folder.glob("log4j-slf4j-impl-*.jar")):
        return folder
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ConfigError("Maven (mvn) is needed to resolve the broker's log binding and is not on PATH",
                          where="mvn", field="mvn", expected="Apache Maven 3", got=None)
    _resolve_logging(jars, mvn)
    return folder


def _log4j_core(jars: Path) -> str | None:
    """The version of the log4j 2 core among a release's jars, or None."""
    for p in sorted(jars.glob("log4j-core-2.*.jar")):
        return p.name[len("log4j-core-"):-len(".jar")]
    return None


def _resolve_logging(jars: Path, mvn: str) -> None:
    """Copy ``log4j-slf4j-impl`` of the release's own log4j version into ``jars/logging``
    (nothing for a release without log4j 2); atomic: a failed copy leaves no folder."""
    version = _log4j_core(jars)
    if version is None:
        return
    partial = jars / f".{LOGGING}.partial.{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    cmd = [mvn, "-q", "-B", "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy",
           f"-Dartifact=org.apache.logging.log4j:log4j-slf4j-impl:{version}", f"-DoutputDirectory={partial}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=str(jars))
    if proc.returncode != 0 or not any(partial.glob("log4j-slf4j-impl-*.jar")):
        shutil.rmtree(partial, ignore_errors=True)
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        raise ConfigError(f"Maven could not resolve log4j-slf4j-impl {version}: {tail}", where=str(jars),
                          field="logging", expected="an artifact on Maven Central", got=version)
    shutil.rmtree(jars / LOGGING, ignore_errors=True)
    partial.rename(jars / LOGGING)


def mockito_dir(*, resolve: bool = True) -> Path:
    """The shared cache folder with Mockito (:data:`MOCKITO_VERSION`) and what it brings
    (byte-buddy, byte-buddy-agent, objenesis): ``<cache>/mockito-<version>-<mockito-pom digest>``,
    resolved with Maven through ``mockito-pom.xml`` the first time.

    It is not part of any release's folder (``pom.xml``'s digest names those and stays as it
    is); only the stale-follower check's JVM puts it on its class path. The folder is used only
    once complete (``.complete``), built under a temporary name and renamed, so an interrupted
    resolution is redone. Raises :class:`ConfigError` when it is missing and ``resolve`` is
    false, when Maven is not installed, or when Maven fails (its last lines are in the message).
    """
    digest = hashlib.sha256(MOCKITO_POM.read_bytes()).hexdigest()[:10]
    dest = cache_root() / f"mockito-{MOCKITO_VERSION}-{digest}"
    if not resolve and not (dest / ".complete").is_file():
        raise ConfigError("Mockito is not resolved yet: run `epochlab kafka jars --all-generations`",
                          where=str(dest), field="mockito", expected="resolved jars", got=None)
    return _maven_folder(dest, ["-f", str(MOCKITO_POM), f"-Dmockito.version={MOCKITO_VERSION}",
                                "dependency:copy-dependencies"],
                         what=f"Mockito {MOCKITO_VERSION}", field="mockito", got=MOCKITO_VERSION,
                         where=str(MOCKITO_POM), expected="an artifact on Maven Central",
                         produced="mockito-core-*.jar")
