"""Schedules: the one representation every explorer shares (``docs/architecture.md``).

A :class:`Schedule` is a versioned, printable list of timed client operations and faults plus
the configuration they run against. The JSON form (``docs/fuzzing.md``)::

    {"format": "epochlab-schedule", "version": 2,
     "generation": "kip-101", "seed": 7, "healing_ms": 60000,
     "cluster": {"min.insync.replicas": 2, "unclean.leader.election.enable": false},
     "producers": {"p1": {"acks": "all"}}, "consumers": {"c1": {}},
     "actions": [{"at_ms": 120, "op": "produce", "producer": "p1", "count": 1},
                 {"at_ms": 900, "op": "crash", "broker": 2, "lose_unflushed": true}],
     "origin": {"engine": "random", "seed": 7}}

Versions: 2 adds the transactional operations (:data:`V2_OPS`: ``begin_transaction``,
``commit_transaction``, ``abort_transaction``, ``crash_coordinator``, ``restart_coordinator``;
``set_link`` and ``partition`` also accept the node ``"coordinator"``), and later steps that
version 1 never had: ``list_offsets``, ``controller_failover``. Version 1 files are
still read; a schedule is written as version 1 when it uses none of them (so version-1 output
stays byte-identical), else as version 2.

``at_ms`` is absolute virtual time and never decreases along ``actions``. ``origin`` is
free-form provenance (which engine, seed or scenario produced it); it never changes what a run
does. Every malformed input raises :class:`~epochlab.errors.ScheduleError` naming the field
(``actions[3].broker``). The fault menu (``docs/invariants.md``, "Faults") maps onto :data:`OPS`:

* controller decisions delayed, reordered or lost: ``set_link`` between ``"controller"`` and a
  broker (``delay_ms``, ``drop``, ``duplicate``, ``reorder``), ``partition`` / ``isolate``;
  back-to-back elections: ``elect``, ``elect_preferred``, ``controlled_shutdown``;
  a controller failover with the old controller's requests on their way
  (``controller_failover``);
* zombie leaders and followers: a broker cut from the controller keeps acting in its old epoch
  (``partition``), late fetches and responses (``set_link`` between brokers with ``reorder``,
  ``slow_follower``), a request processed after its sender restarted (``crash``/``restart``);
* crashes with no loss, with loss of the unflushed tail (``lose_unflushed``) and the stale HW
  checkpoint every restart reads (``restart``);
* clean vs unclean election (``elect`` with ``unclean``; the cluster setting), ``acks``,
  ``min.insync.replicas``; producer retries, restarts (epoch bumps), consumer crash/restart;
* transactions (version 2): begin / commit / abort, producer restarts with the same
  transactional.id (``restart_producer``), coordinator crash and restart, delayed produce
  requests and delayed markers (``set_link`` between a producer or ``"coordinator"`` and a
  broker).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from epochlab.errors import ConfigError, ScheduleError
from epochlab.generations import Generation
from epochlab.sim.messages import is_list_spec
from epochlab.steps import schedule_steps

__all__ = ["FORMAT", "OPS", "READ_VERSIONS", "V2_OPS", "VERSION", "Action", "Schedule",
           "load_schedule", "schedule_model"]

FORMAT = "epochlab-schedule"
VERSION = 2
READ_VERSIONS = (1, 2)
DEFAULT_HEALING_MS = 60000
MAX_VALUES = 1000

#: op -> {parameter: (type tag, required, default)}, from the step vocabulary
#: (``epochlab.steps``: its schedule steps, in its order; the type tags are
#: ``epochlab.steps.Param``'s).
OPS: dict[str, dict[str, tuple[str, bool, Any]]] = {s.name: s.schedule_spec() for s in schedule_steps()}

#: Operations that need schedule format version 2.
V2_OPS = frozenset(s.name for s in schedule_steps() if s.version is not None and s.version >= 2)

#: Fault classes for swarm testing and reports: op -> class.
FAULT_CLASS: dict[str, str] = {s.name: s.fault_class for s in schedule_steps() if s.fault_class is not None}


@cache
def schedule_model() -> Any:
    """The pydantic model of a schedule file (``docs/schemas/schedule.schema.json``), one
    action model per entry of :data:`OPS`."""
    from typing import Annotated, Literal, Union

    from pydantic import Field, StrictInt, StrictStr, create_model

    from epochlab.formats import MAX_ACTIONS, Ms, Name, Settings, Strict, Value, tagged

    ops = {op: {name: (tag, required) for name, (tag, required, _default) in spec.items()}
           for op, spec in OPS.items()}
    action = tagged("ScheduleAction", "op", ops, {"at_ms": (Ms, ...)})
    return create_model(
        "Schedule", __base__=Strict,
        __doc__="An epochlab fuzz schedule (docs/fuzzing.md): configuration and timed actions.",
        format=(Literal["epochlab-schedule"], ...),
        version=(Literal[1, 2], ...),
        generation=(Union[Name, Annotated[StrictInt, Field(ge=0, le=100)]], ...),
        seed=(Value, 0),
        healing_ms=(Ms, 60000),
        cluster=(Settings, {}),
        producers=(dict[Name, Settings], {}),
        consumers=(dict[Name, Settings], {}),
        actions=(Annotated[list[action], Field(max_length=MAX_ACTIONS)], []),
        origin=(dict[StrictStr, Any], {}),
    )


@dataclass(frozen=True)
class Action:
    """One timed action: ``op`` with its parameters (defaults filled in)."""

    at_ms: int
    op: str
    params: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"at_ms": self.at_ms, "op": self.op}
        for key in sorted(self.params):
            value = self.params[key]
            if value is None:
                continue
            out[key] = [list(v) for v in value] if key == "groups" else \
                list(value) if isinstance(value, tuple) else value
        return out

    def describe(self) -> str:
        args = " ".join(f"{k}={v}" for k, v in sorted(self.to_dict().items()) if k not in ("at_ms", "op"))
        return f"{self.op} {args}".strip()


@dataclass(frozen=True)
class Schedule:
    """A validated schedule; build with :meth:`from_dict` or :func:`load_schedule`."""

    generation: Generation
    seed: int
    cluster: dict[str, Any]
    producers: dict[str, dict[str, Any]]
    consumers: dict[str, dict[str, Any]]
    actions: tuple[Action, ...]
    healing_ms: int = DEFAULT_HEALING_MS
    origin: dict[str, Any] = field(default_factory=dict)
    #: The engine configurations :meth:`from_dict` built while validating (cluster, producers,
    #: consumers; frozen objects), for the executor to use instead of building them again.
    #: Not part of the schedule: not compared, not copied by ``dataclasses.replace``.
    configs: Any = field(default=None, init=False, repr=False, compare=False)

    # -- JSON ---------------------------------------------------------------------------------
    @property
    def version(self) -> int:
        """1 unless an action needs version 2 (module doc)."""
        uses_v2 = any(a.op in V2_OPS or "coordinator" in (a.params.get("a"), a.params.get("b"))
                      or any("coordinator" in g for g in a.params.get("groups") or ())
                      for a in self.actions)
        return 2 if uses_v2 else 1

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": self.version, "generation": self.generation.label,
                "seed": self.seed, "healing_ms": self.healing_ms, "cluster": dict(self.cluster),
                "producers": {k: dict(v) for k, v in self.producers.items()},
                "consumers": {k: dict(v) for k, v in self.consumers.items()},
                "actions": [a.to_dict() for a in self.actions], "origin": dict(self.origin)}

    def to_json(self) -> str:
        """Canonical JSON: sorted keys, indented, trailing newline (byte-stable)."""
        return json.dumps(self.to_dict(), sort_keys=True, indent=1) + "\n"

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.to_json(), encoding="utf-8")
        tmp.replace(path)
        return path

    def with_actions(self, actions: tuple[Action, ...] | list[Action], **origin: Any) -> Schedule:
        merged = dict(self.origin)
        merged.update(origin)
        return Schedule(self.generation, self.seed, self.cluster, self.producers, self.consumers,
                        tuple(actions), self.healing_ms, merged)

    @property
    def brokers(self) -> list[int]:
        return list(self.cluster.get("brokers", [1, 2, 3]))

    @classmethod
    def from_dict(cls, data: Any, where: str = "<python>") -> Schedule:
        """Validate ``data`` (parsed JSON); :class:`ScheduleError` names the first bad field."""
        v = _Validator(where)
        if not isinstance(data, Mapping):
            raise v.fail("", "a JSON object", data)
        from epochlab.formats import validate

        validate(schedule_model(), data, where, ScheduleError)  # structure, types, bounds: all at once
        known = {"format", "version", "generation", "seed", "healing_ms", "cluster", "producers",
                 "consumers", "actions", "origin"}
        for key in sorted(data, key=str):
            if key not in known:
                raise v.fail(str(key), "one of " + ", ".join(sorted(known)), key)
        if data.get("format") != FORMAT:
            raise v.fail("format", repr(FORMAT), data.get("format"))
        version = data.get("version")
        if isinstance(version, bool) or version not in READ_VERSIONS:
            raise v.fail("version", f"one of {list(READ_VERSIONS)} (the versions this build reads)",
                         version)
        try:
            generation = Generation.parse(data.get("generation"))
        except ConfigError:
            raise v.fail("generation", ", ".join(g.label for g in Generation),
                         data.get("generation")) from None
        seed = v.int_("seed", data.get("seed", 0))
        healing = v.int_("healing_ms", data.get("healing_ms", DEFAULT_HEALING_MS))
        cluster = v.mapping("cluster", data.get("cluster", {}))
        producers = v.clients("producers", data.get("producers", {}))
        consumers = v.clients("consumers", data.get("consumers", {}))
        origin = v.mapping("origin", data.get("origin", {}))
        configs = _check_configs(v, cluster, producers, consumers)
        brokers = list(cluster.get("brokers", [1, 2, 3]))
        v.nodes = {"controller", *brokers, *producers, *consumers}
        if version >= 2:
            v.nodes.add("coordinator")
        v.version = int(version)
        v.brokers, v.producers, v.consumers = set(brokers), set(producers), set(consumers)
        raw = data.get("actions", [])
        if not isinstance(raw, list):
            raise v.fail("actions", "a list of actions", raw)
        actions: list[Action] = []
        last = 0
        for i, item in enumerate(raw):
            action = v.action(f"actions[{i}]", item)
            if action.at_ms < last:
                raise v.fail(f"actions[{i}].at_ms", f"an integer >= {last} (times never decrease)",
                             action.at_ms)
            last = action.at_ms
            actions.append(action)
        schedule = cls(generation, seed, dict(cluster), producers, consumers, tuple(actions), healing,
                       dict(origin))
        object.__setattr__(schedule, "configs", configs)
        return schedule

    @classmethod
    def from_json(cls, text: str, where: str = "<python>") -> Schedule:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ScheduleError(f"{where}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                                where=where, field=f"line {exc.lineno}", expected="JSON",
                                got=exc.msg) from None
        except RecursionError:
            raise ScheduleError(f"{where}: JSON nested too deeply", where=where, field="",
                                expected="a schedule object", got="deeply nested JSON") from None
        return cls.from_dict(data, where)


def load_schedule(path: str | Path) -> Schedule:
    """Read and validate a schedule file (:class:`ScheduleError` if unreadable or malformed)."""
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScheduleError(f"{where}: cannot read schedule: {exc}", where=where, field="",
                            expected="a readable UTF-8 JSON file", got=type(exc).__name__) from None
    return Schedule.from_json(text, where)


def _check_configs(v: _Validator, cluster: Mapping[str, Any], producers: Mapping[str, Any],
                   consumers: Mapping[str, Any]) -> dict[str, Any]:
    """Run the engine's own config validation; re-raise as ScheduleError with the path.
    Returns the configurations by path (``"cluster"``, ``"producers.<name>"``,
    ``"consumers.<name>"``)."""
    from epochlab.sim.config import ClusterConfig, ConsumerConfig, ProducerConfig

    checks: list[tuple[str, Any, Any]] = [("cluster", ClusterConfig, cluster)]
    checks += [(f"producers.{n}", ProducerConfig, c) for n, c in producers.items()]
    checks += [(f"consumers.{n}", ConsumerConfig, c) for n, c in consumers.items()]
    built: dict[str, Any] = {}
    for path, cls, mapping in checks:
        try:
            built[path] = cls.from_dict(mapping, path)
        except ConfigError as exc:
            raise ScheduleError(f"{v.where}: {path}.{exc.field}: {exc.message}", where=v.where,
                                field=f"{path}.{exc.field}", expected=exc.expected,
                                got=exc.got) from None
    return built


class _Validator:
    def __init__(self, where: str) -> None:
        self.where = where
        self.nodes: set[Any] = set()
        self.brokers: set[int] = set()
        self.producers: set[str] = set()
        self.consumers: set[str] = set()
        self.version = VERSION

    def fail(self, path: str, expected: str, got: Any) -> ScheduleError:
        shown = repr(got)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        return ScheduleError(f"{self.where}: {path or 'schedule'}: expected {expected}, got {shown}",
                             where=self.where, field=path, expected=expected, got=shown)

    def int_(self, path: str, value: Any, lo: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < lo:
            raise self.fail(path, f"an integer >= {lo}", value)
        return value

    def mapping(self, path: str, value: Any) -> dict[str, Any]:
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise self.fail(path, "a JSON object", value)
        return dict(value)

    def clients(self, path: str, value: Any) -> dict[str, dict[str, Any]]:
        table = self.mapping(path, value)
        out = {}
        for name in sorted(table):
            if not name or name == "controller":
                raise self.fail(f"{path}.{name}", "a client name other than 'controller'", name)
            out[name] = self.mapping(f"{path}.{name}", table[name])
        return out

    def action(self, path: str, item: Any) -> Action:
        if not isinstance(item, Mapping):
            raise self.fail(path, "a JSON object with at_ms and op", item)
        op = item.get("op")
        if op not in OPS:
            raise self.fail(f"{path}.op", "one of " + ", ".join(sorted(OPS)), op)
        spec = OPS[op]
        if op in V2_OPS and self.version < 2:
            raise self.fail(f"{path}.op", "an operation of schedule version 1 (this one needs "
                            "\"version\": 2)", op)
        for key in sorted(item, key=str):
            if key not in spec and key not in ("at_ms", "op"):
                raise self.fail(f"{path}.{key}", f"a parameter of {op}: "
                                + (", ".join(sorted(spec)) or "none"), key)
        at = self.int_(f"{path}.at_ms", item.get("at_ms"))
        params: dict[str, Any] = {}
        for name, (type_, required, default) in spec.items():
            if name not in item:
                if required:
                    raise self.fail(f"{path}.{name}", f"a {type_} (required by {op})", None)
                params[name] = default
                continue
            params[name] = self.typed(f"{path}.{name}", type_, item[name])
        if op == "produce" and (params["count"] is None) == (params["values"] is None):
            raise self.fail(f"{path}.count", "exactly one of count or values", item.get("count"))
        if op == "set_link" and params["a"] == params["b"]:
            raise self.fail(f"{path}.b", "a node other than a", params["b"])
        return Action(at, op, params)

    def typed(self, path: str, type_: str, value: Any) -> Any:
        if type_ == "bool":
            if not isinstance(value, bool):
                raise self.fail(path, "true or false", value)
            return value
        if type_ in ("int", "pos_int"):
            return self.int_(path, value, 1 if type_ == "pos_int" else 0)
        if type_ == "spec":
            if not is_list_spec(value):
                raise self.fail(path, '"latest", "earliest" or a timestamp (an integer in [0, 2^63-1])', value)
            return value
        if type_ == "fraction":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise self.fail(path, "a number in [0, 1]", value)
            return float(value)
        if type_ == "delay":
            if not isinstance(value, list) or len(value) != 2:
                raise self.fail(path, "[lo, hi] in ms", value)
            lo, hi = (self.int_(path, x) for x in value)
            if lo > hi:
                raise self.fail(path, "[lo, hi] with lo <= hi", value)
            return (lo, hi)
        if type_ == "values":
            if not isinstance(value, list) or not value or len(value) > MAX_VALUES:
                raise self.fail(path, f"a list of 1..{MAX_VALUES} integers >= 0", value)
            return tuple(self.int_(f"{path}[{i}]", x) for i, x in enumerate(value))
        if type_ == "broker":
            if value not in self.brokers or isinstance(value, bool):
                raise self.fail(path, f"a broker id of cluster.brokers {sorted(self.brokers)}", value)
            return value
        if type_ == "producer":
            if value not in self.producers:
                raise self.fail(path, f"a declared producer {sorted(self.producers)}", value)
            return value
        if type_ == "consumer":
            if value not in self.consumers:
                raise self.fail(path, f"a declared consumer {sorted(self.consumers)}", value)
            return value
        if type_ == "node":
            if isinstance(value, bool) or value not in self.nodes:
                raise self.fail(path, "a broker id, 'controller', 'coordinator' (version 2) or a "
                                "client name", value)
            return value
        if type_ == "groups":
            if not isinstance(value, list) or not all(isinstance(g, list) for g in value):
                raise self.fail(path, "a list of lists of nodes", value)
            for i, group in enumerate(value):
                for j, node in enumerate(group):
                    self.typed(f"{path}[{i}][{j}]", "node", node)
            return tuple(tuple(g) for g in value)
        raise AssertionError(f"unknown parameter type {type_}")  # pragma: no cover
