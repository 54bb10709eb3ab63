"""The leader-epoch caches of older Kafka releases, in the model's vocabulary.

Each protocol generation stands for a Kafka release (``jars.GENERATION_RELEASES``). Their
``LeaderEpochFileCache`` classes differ in package, language, constructor and method names:

===========  ===================================================  ==============================
release      class (constructor)                                  operations
===========  ===================================================  ==============================
0.11 - 2.0.0 ``kafka.server.epoch.LeaderEpochFileCache`` (Scala;   ``clearAndFlushLatest/Earliest``;
             ``tp, leo: () => LogOffsetMetadata, checkpoint``)    ``endOffsetFor(epoch)``: an
                                                                  offset (0.11) or a pair (2.0)
2.0.1 - 2.8  the same class (``tp, logEndOffset: () => Long,      ``truncateFromEnd/Start``;
             checkpoint``)                                        ``endOffsetFor(epoch)``: a pair
3.x          ``org.apache.kafka.storage.internals.epoch``         ``endOffsetFor(epoch, leo)``,
             (Java; ``tp, checkpoint``)                           ``epochForOffset`` (3.x)
===========  ===================================================  ==============================

:class:`LegacyLeaderEpochCache` finds its release's shape by reflection (which classes exist,
which constructor, which methods) rather than by version number, and answers as
:class:`epochlab.kafka.classes.oracle.KafkaLeaderEpochCache` does: ``None`` where Kafka answers UNDEFINED,
Python ints and tuples elsewhere. A release whose ``endOffsetFor`` answers an offset only
(0.11: OffsetsForLeaderEpoch v0) answers an ``int``, as the model's ``end_offset_for_kip101``.
Every call goes to Kafka's class; nothing re-implements a rule. The log end offset that older
releases read through a Scala function is the one given to :meth:`end_offset_for`.

:func:`run_legacy_ops` is the per-release differential: the operations of
``epochlab.kafka.classes.differential.generate_ops`` on the release's cache and on the model's rules of
the generation (``assign_kip101`` for G1/G2, ``end_offset_for_kip101``/``_kip279`` for G1/G2).
:func:`probe` is the Java 17 check of one release; run it in a process of its own
(``epochlab kafka probe --version V``), one JVM carrying one release per process.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from epochlab.errors import ConfigError
from epochlab.generations import Generation
from epochlab.kafka.jvm import ensure_jvm

__all__ = ["KNOWN_DIFFERENCES", "LegacyLeaderEpochCache", "explain", "model_rules", "open_cache", "probe",
           "run_legacy_component", "run_legacy_ops"]

_JAVA_CACHE = "org.apache.kafka.storage.internals.epoch.LeaderEpochFileCache"
_JAVA_FILE = "org.apache.kafka.storage.internals.checkpoint.LeaderEpochCheckpointFile"
_JAVA_FAILURE = "org.apache.kafka.storage.internals.log.LogDirFailureChannel"
_SCALA_CACHE = "kafka.server.epoch.LeaderEpochFileCache"
_SCALA_FILE = "kafka.server.checkpoints.LeaderEpochCheckpointFile"


def _has_class(jpype: Any, name: str) -> bool:
    try:
        jpype.JClass(name)
    except TypeError:  # JPype: "Class ... is not found"
        return False
    return True


def _methods(cls: Any) -> dict[str, int]:
    """Public method name -> parameter count (the largest, for overloads)."""
    found: dict[str, int] = {}
    for method in cls.class_.getMethods():
        name = str(method.getName())
        found[name] = max(found.get(name, 0), int(method.getParameterCount()))
    return found


def _field(entry: Any, name: str) -> int:
    """``EpochEntry.epoch``: a method of the Scala case class, a public field of the Java one."""
    value = getattr(entry, name)
    return int(value() if callable(value) else value)


class LegacyLeaderEpochCache:
    """An older release's ``LeaderEpochFileCache`` over its real checkpoint file in
    ``directory`` (a fresh temporary directory, removed by :meth:`close`, when not given).

    ``operations`` names what the release has: ``epoch_for_offset`` only from 3.x on.
    Raises :class:`ConfigError` when the release has no leader-epoch cache (before 0.11) or
    one of an unknown shape.
    """

    def __init__(self, directory: str | Path | None = None, version: str = "2.1.1") -> None:
        jpype = ensure_jvm(version)
        self._jpype = jpype
        self.version = version
        if _has_class(jpype, _JAVA_CACHE):
            self._cache_class, self._file_class = jpype.JClass(_JAVA_CACHE), jpype.JClass(_JAVA_FILE)
        elif _has_class(jpype, _SCALA_CACHE):
            self._cache_class, self._file_class = jpype.JClass(_SCALA_CACHE), jpype.JClass(_SCALA_FILE)
        else:
            raise ConfigError(f"Kafka {version} has no leader-epoch cache (KIP-101 added it in 0.11)",
                              where=_SCALA_CACHE, field="version", expected="Kafka 0.11 or later", got=version)
        self.class_name = str(self._cache_class.class_.getName())
        self._methods = _methods(self._cache_class)
        self._constructor = self._pick_constructor()
        self._leo = 0
        self._leo_function = self._make_leo_function() if len(self._constructor) == 3 else None
        self._owned = directory is None
        self.directory = Path(tempfile.mkdtemp(prefix="epochlab-kafka-")) if directory is None else Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / "leader-epoch-checkpoint"
        self._tp = jpype.JClass("org.apache.kafka.common.TopicPartition")("epochlab", 0)
        ops = {"assign", "end_offset_for", "truncate_from_end", "truncate_from_start", "latest_epoch",
               "entries", "clear", "reload"}
        if "epochForOffset" in self._methods:
            ops.add("epoch_for_offset")
        self.operations = frozenset(ops)
        self._cache = self._open()

    # -- construction, by the release's shape ------------------------------------------------
    def _pick_constructor(self) -> list[str]:
        """The parameter types of the cache's constructor, as class names (a release has one)."""
        constructors = list(self._cache_class.class_.getConstructors())
        if len(constructors) != 1:
            raise ConfigError(f"Kafka {self.version}: {len(constructors)} constructors of {self.class_name}",
                              where=self.class_name, field="constructor", expected="one", got=len(constructors))
        return [str(t.getTypeName()) for t in constructors[0].getGenericParameterTypes()]

    def _make_leo_function(self) -> Any:
        """The Scala ``() => LogOffsetMetadata`` (0.11 - 2.0.0) or ``() => Long`` (2.0.1 - 2.8)
        the cache reads the log end offset through. Scala calls a ``() => Long`` through its
        specialised ``apply$mcJ$sp``, so both entry points answer."""
        jpype = self._jpype
        if "LogOffsetMetadata" in self._constructor[1]:
            metadata = jpype.JClass("kafka.server.LogOffsetMetadata")
            # messageOffset, then the "unknown" segment base offset and file position
            boxed = lambda: metadata(jpype.JLong(self._leo), jpype.JLong(-1), jpype.JInt(-1))  # noqa: E731
        else:
            boxed = lambda: jpype.JClass("java.lang.Long")(jpype.JLong(self._leo))  # noqa: E731
        return jpype.JProxy("scala.Function0", dict={"apply": boxed, "apply$mcJ$sp": lambda: self._leo})

    def _open(self) -> Any:
        jpype = self._jpype
        java_file = jpype.JClass("java.io.File")(str(self.path))
        arity = max(int(c.getParameterCount()) for c in self._file_class.class_.getConstructors())
        if arity == 1:                                   # 0.11 - 1.0: (file)
            checkpoint = self._file_class(java_file)
        elif _has_class(jpype, _JAVA_FAILURE) and self.class_name == _JAVA_CACHE:
            checkpoint = self._file_class(java_file, jpype.JClass(_JAVA_FAILURE)(1))
        else:                                            # 1.1 - 2.8: (file, logDirFailureChannel = null)
            checkpoint = self._file_class(java_file, None)
        if self._leo_function is not None:
            return self._cache_class(self._tp, self._leo_function, checkpoint)
        return self._cache_class(self._tp, checkpoint)

    # -- operations (the names of epochlab.LeaderEpochCache) ---------------------------------
    def assign(self, epoch: int, start_offset: int) -> None:
        self._cache.assign(self._jpype.JInt(epoch), self._jpype.JLong(start_offset))

    def end_offset_for(self, requested_epoch: int | None,
                       log_end_offset: int) -> tuple[int, int] | int | None:
        """``(epoch, exclusive end offset)``, or the end offset alone on a release answering
        OffsetsForLeaderEpoch v0 (0.11 - 1.1); ``None`` for UNDEFINED."""
        epoch = self._jpype.JInt(-1 if requested_epoch is None else requested_epoch)
        self._leo = log_end_offset
        if self._methods["endOffsetFor"] == 2:
            answer = self._cache.endOffsetFor(epoch, self._jpype.JLong(log_end_offset))
        else:
            answer = self._cache.endOffsetFor(epoch)
        if hasattr(answer, "getKey"):                    # java.util.Map.Entry (3.x)
            pair = (int(answer.getKey()), int(answer.getValue()))
        elif hasattr(answer, "_1"):                      # scala.Tuple2 (2.0 - 2.8)
            pair = (int(answer._1()), int(answer._2()))
        else:                                            # a bare offset (0.11 - 1.1)
            offset = int(answer)
            return None if offset == -1 else offset
        return None if -1 in pair else pair

    def truncate_from_end(self, end_offset: int) -> None:
        name = "truncateFromEnd" if "truncateFromEnd" in self._methods else "clearAndFlushLatest"
        getattr(self._cache, name)(self._jpype.JLong(end_offset))

    def truncate_from_start(self, start_offset: int) -> None:
        name = "truncateFromStart" if "truncateFromStart" in self._methods else "clearAndFlushEarliest"
        getattr(self._cache, name)(self._jpype.JLong(start_offset))

    def epoch_for_offset(self, offset: int) -> int | None:
        """3.x only (``operations`` says whether the release has it)."""
        if "epoch_for_offset" not in self.operations:
            raise ConfigError(f"Kafka {self.version}'s {self.class_name} has no epochForOffset",
                              where=self.class_name, field="operation", expected="3.x", got=self.version)
        answer = self._cache.epochForOffset(self._jpype.JLong(offset))
        return int(answer.getAsInt()) if answer.isPresent() else None

    def latest_epoch(self) -> int | None:
        answer = self._cache.latestEpoch()
        if hasattr(answer, "isPresent"):                 # java.util.OptionalInt (3.x)
            return int(answer.getAsInt()) if answer.isPresent() else None
        if hasattr(answer, "isDefined"):                 # scala.Option[Int] (2.1 - 2.8)
            return int(answer.get()) if answer.isDefined() else None
        epoch = int(answer)                              # an Int, UNDEFINED_EPOCH when empty
        return None if epoch == -1 else epoch

    def entries(self) -> list[tuple[int, int]]:
        found = self._cache.epochEntries()
        if isinstance(found, self._jpype.JClass("java.util.List")):     # 3.x
            items = list(found)
        else:                                            # a Scala ListBuffer / Seq (a Stream in 2.7)
            iterator, items = found.iterator(), []
            while iterator.hasNext():
                items.append(iterator.next())
        return [(_field(e, "epoch"), _field(e, "startOffset")) for e in items]

    def clear(self) -> None:
        self._cache.clearAndFlush()

    def reload(self) -> list[tuple[int, int]]:
        """Open a new cache from the checkpoint file Kafka wrote, as a restarted broker does
        (these releases write it synchronously on every change); returns its entries."""
        self._cache = self._open()
        return self.entries()

    def close(self) -> None:
        if self._owned:
            shutil.rmtree(self.directory, ignore_errors=True)


def model_rules(generation: Generation) -> dict[str, str]:
    """The model's method for each operation whose rule changed by generation: the 0.11 - 2.0
    assign (no eviction, KAFKA-7415 came in 2.1) and ``endOffsetFor`` answers (v0 offset only;
    2.0 UNDEFINED below the first epoch)."""
    rules = {}
    if generation.kip101_epoch_cache:
        rules["assign"] = "assign_kip101"
    if generation == Generation.KIP_101:
        rules["end_offset_for"] = "end_offset_for_kip101"
    elif generation == Generation.KIP_279:
        rules["end_offset_for"] = "end_offset_for_kip279"
    return rules


#: Differences between an older release's cache and the model's rules of its generation, each
#: explained by the release's code (``docs/kafka-releases.md``); :func:`explain` names the one
#: a first mismatch shows.
KNOWN_DIFFERENCES: dict[str, str] = {
    "clear-earliest-keeps-equal-starts": (
        "0.11 - 2.0.0 LeaderEpochFileCache.clearAndFlushEarliest removes only entries starting "
        "below the new log start offset and does nothing when the first entry starts at it, so "
        "two epochs sharing that start offset (the 0.11 assign rule allows them) both stay; the "
        "model's truncate_from_start keeps only the later one"),
    "undefined-epoch-answers-undefined": (
        "0.11.0.3 (KAFKA-6857, backported): endOffsetFor(UNDEFINED_EPOCH) answers "
        "UNDEFINED_EPOCH_OFFSET; 0.11.0.0, whose rule the model's G1 reproduces, answers the log "
        "end offset when the cache is empty"),
    "assign-evicts": (
        "2.0.1 (KAFKA-7415, backported): assign evicts conflicting entries (truncateAndAppend) "
        "where the model's G2 rule, 2.0.0's, ignores the assignment"),
    "below-first-epoch-answers-first-start": (
        "2.0.1 (KAFKA-7415, backported): endOffsetFor of an epoch below every cached one answers "
        "(requested epoch, first start offset) where the model's G2 rule, 2.0.0's, answers "
        "UNDEFINED"),
}


def explain(first: dict[str, Any]) -> str | None:
    """The key of :data:`KNOWN_DIFFERENCES` that a first mismatch (``run_legacy_ops``'s third
    value) shows, or None when none does: a difference not explained yet."""
    name, *args = first["op"]
    kafka, model = first["kafka"], first["rust"]
    if first["rust"] != first["reference"]:
        return None  # the two models disagree: a model bug, whatever Kafka says
    kafka_entries = _entries_of(kafka["state"])
    if name == "truncate_from_start":
        if sum(1 for _, start in kafka_entries if start == args[0]) >= 2:
            return "clear-earliest-keeps-equal-starts"
    elif name == "end_offset_for" and kafka["state"] == model["state"]:
        if args[0] in (None, -1) and kafka["result"] is None and model["result"] is not None:
            return "undefined-epoch-answers-undefined"
        if kafka["result"] is not None and model["result"] is None and kafka["result"][0] == args[0]:
            return "below-first-epoch-answers-first-start"
    elif name == "assign" and kafka_entries and kafka_entries[-1] == (args[0], args[1]):
        model_entries = _entries_of(model["state"])
        if model_entries[-1:] != [(args[0], args[1])] or len(model_entries) > len(kafka_entries):
            return "assign-evicts"
    return None


def _entries_of(state: str) -> list[tuple[int, int]]:
    import ast

    return [tuple(e) for e in ast.literal_eval(state)]  # type: ignore[misc]


def run_legacy_ops(ops: Sequence[Sequence[Any]], version: str, generation: Generation,
                   directory: Path | None = None, stop_at_first: bool = True
                   ) -> tuple[int, int, dict[str, Any] | None]:
    """Apply ``ops`` to a fresh cache of Kafka ``version`` and to the Rust core and the twin
    with ``generation``'s rules; returns (operations applied, mismatches, first mismatch), as
    ``differential.run_ops``. Operations the release lacks (``epoch_for_offset`` before 3.x)
    are skipped, not counted."""
    import epochlab
    import epochlab.reference
    from epochlab.kafka.classes.differential import _apply_kafka, _describe, _Model, _plain

    kafka = LegacyLeaderEpochCache(directory, version)
    rules = model_rules(generation)
    models = {"rust": _Model(epochlab, rules), "reference": _Model(epochlab.reference, rules)}
    mismatches, first, applied = 0, None, 0
    try:
        for i, op in enumerate(ops):
            if op[0] not in kafka.operations:
                continue
            observed = {"kafka": (_plain(_apply_kafka(kafka, tuple(op))), kafka.entries())}
            for label, model in models.items():
                observed[label] = (_plain(model.apply(op, kafka.path)), model.entries())
            applied += 1
            if observed["rust"] != observed["kafka"] or observed["reference"] != observed["kafka"]:
                mismatches += 1
                if first is None:
                    first = {"index": i, "op": list(op), "kafka": _describe(observed["kafka"]),
                             "rust": _describe(observed["rust"]), "reference": _describe(observed["reference"])}
                if stop_at_first:
                    break
    finally:
        kafka.close()
    return applied, mismatches, first


def run_legacy_component(ops: int, seed: int, version: str, generation: Generation,
                         keep_data: Path | None = None, chunk: int = 2000, progress: Any = None,
                         keep_going: bool = False) -> tuple[Any, dict[str, int]]:
    """``differential.run_component`` for the leader-epoch cache of an older release: ``ops``
    generated operations (``generate_ops``, in sequences of ``chunk`` on fresh instances: the
    sequences the latest release gets for the same seed), the first disagreement shrunk and
    named (:func:`explain`, ``first["explained_by"]``).

    With ``keep_going`` every sequence is generated: a sequence stops being compared at its
    first disagreement (the states have diverged) and the next one starts. Returns the report
    (``mismatches`` = sequences that disagreed) and the count of disagreeing sequences by
    known difference (``"unexplained"`` for the rest)."""
    import random
    from collections import Counter

    from epochlab.kafka.classes.differential import ComponentReport, generate_ops, shrink_ops

    causes: Counter[str] = Counter()
    report = ComponentReport("leader-epoch-cache")
    rng = random.Random(seed)
    start = time.monotonic()
    generated, sequence = 0, 0
    while generated < ops:
        batch = generate_ops(rng, min(chunk, ops - generated))
        generated += len(batch)
        directory = None if keep_data is None else keep_data / "leader-epoch-cache" / f"sequence-{sequence:05d}"
        applied, mismatches, first = run_legacy_ops(batch, version, generation, directory)
        report.ops += applied
        report.mismatches += mismatches
        sequence += 1
        if first is not None:
            causes[explain(first) or "unexplained"] += 1
        if first is not None and report.first is None:
            report.first = dict(first, sequence=sequence - 1, explained_by=explain(first))
            failing = batch[: first["index"] + 1]
            report.minimal = shrink_ops(failing, lambda candidate: run_legacy_ops(
                candidate, version, generation)[1] > 0)
            if not keep_going:
                break
        if progress is not None:
            progress(generated)
    report.seconds = time.monotonic() - start
    return report, dict(causes)


def open_cache(version: str, directory: str | Path | None = None) -> Any:
    """Kafka ``version``'s leader-epoch cache in the model's vocabulary: the oracle's
    ``KafkaLeaderEpochCache`` for a release whose cache flushes through a scheduler (3.7+),
    :class:`LegacyLeaderEpochCache` before."""
    jpype = ensure_jvm(version)
    if _has_class(jpype, _JAVA_CACHE):
        constructors = jpype.JClass(_JAVA_CACHE).class_.getConstructors()
        if any("Scheduler" in str(t.getName()) for c in constructors for t in c.getParameterTypes()):
            from epochlab.kafka.classes.oracle import KafkaLeaderEpochCache

            return KafkaLeaderEpochCache(directory, version)
    return LegacyLeaderEpochCache(directory, version)


def probe(version: str) -> dict[str, Any]:
    """Start this process's JVM with Kafka ``version`` and try its leader-epoch cache: load the
    classes, assign, endOffsetFor, truncate from both ends, reload from the checkpoint.

    Returns ``{"version", "java", "resolved", "loads", "runs", "class", "steps", "error"}``:
    ``loads`` when the broker's main class ``kafka.Kafka`` initialises, ``runs`` when every
    cache operation ran; ``error`` is the first exception's class and message (``None`` when
    everything ran).
    Run it in a process of its own: the JVM keeps the release's jars for the process's life.
    """
    from epochlab.kafka.jars import resolved

    report: dict[str, Any] = {"version": version, "java": None, "resolved": resolved(version),
                              "loads": False, "runs": False, "class": None, "steps": [], "error": None}
    if not report["resolved"]:
        report["error"] = f"not resolved: run `epochlab kafka jars --version {version}`"
        return report
    cache = None
    try:
        jpype = ensure_jvm(version)
        report["java"] = str(jpype.JClass("java.lang.System").getProperty("java.version"))
        # the broker's main class, initialised: Scala runtime and Kafka's core load on this Java
        jpype.JClass("java.lang.Class").forName("kafka.Kafka", True, jpype.JClass("java.lang.ClassLoader")
                                                .getSystemClassLoader())
        report["loads"] = True
        cache = open_cache(version)
        report["class"] = str(cache._cache_class.class_.getName())
        steps = report["steps"]
        cache.assign(1, 0)
        cache.assign(3, 10)
        steps.append(["assign(1, 0); assign(3, 10)", repr(cache.entries())])
        steps.append(["end_offset_for(1, 20)", repr(cache.end_offset_for(1, 20))])
        steps.append(["end_offset_for(3, 20)", repr(cache.end_offset_for(3, 20))])
        steps.append(["latest_epoch()", repr(cache.latest_epoch())])
        if "epoch_for_offset" in getattr(cache, "operations", ("epoch_for_offset",)):
            steps.append(["epoch_for_offset(12)", repr(cache.epoch_for_offset(12))])
        cache.truncate_from_start(4)
        steps.append(["truncate_from_start(4)", repr(cache.entries())])
        cache.truncate_from_end(10)
        steps.append(["truncate_from_end(10)", repr(cache.entries())])
        steps.append(["reload()", repr(cache.reload())])
        steps.append(["checkpoint file", cache.path.read_text()])
        report["runs"] = True
    except ConfigError as exc:
        report["error"] = f"ConfigError: {exc}"
    except Exception as exc:  # noqa: BLE001 - a JVM failure is what the probe reports
        report["error"] = _java_error(exc)
    finally:
        if cache is not None:
            cache.close()
    return report


def _java_error(exc: BaseException) -> str:
    """A Java exception's class and message (and its root cause), or Python's."""
    get_class = getattr(exc, "getClass", None)
    if get_class is None:
        return f"{type(exc).__name__}: {exc}"
    text = f"{get_class().getName()}: {exc.getMessage()}"  # type: ignore[attr-defined]
    cause = exc.getCause()  # type: ignore[attr-defined]
    while cause is not None and cause.getCause() is not None:
        cause = cause.getCause()
    return text if cause is None else f"{text} (root cause {cause.getClass().getName()}: {cause.getMessage()})"
