"""Read scenario files (TOML, via :mod:`tomllib`) and validate them into :class:`Scenario`.

Every problem raises :class:`epochlab.errors.ScenarioError` with ``where`` (the file, or
``"<python>"``), ``field`` (a dotted path such as ``steps[3].broker``), ``expected`` and
``got``. Unknown keys are errors, at every level. The format is documented in
``docs/scenario-format.md`` and in :mod:`epochlab.scenarios`.
"""

from __future__ import annotations

import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from epochlab.errors import ConfigError, ScenarioError
from epochlab.sim.messages import is_list_spec
from epochlab.scenarios.model import (
    ACTIONS,
    CONDITIONS,
    EXPECTATIONS,
    STATE_KINDS,
    Expectation,
    Param,
    Scenario,
    Step,
    scenario_model,
)

__all__ = ["builtin_names", "from_mapping", "generation_labels", "load_builtin", "load_file",
           "loads", "resolve", "builtin_text"]

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_TOP_KEYS = ("name", "description", "source", "generations", "seed", "settle_ms", "cluster",
             "producers", "consumers", "steps", "expect")
_STEP_KEYS = ("action", "at_ms", "after_ms", "label")
_EXPECT_KEYS = ("kind", "generations", "after_step", "description", "from_release", "before_release")
_DEFAULT_BROKERS = (1, 2, 3)


def generation_labels() -> list[str]:
    """Labels of :class:`epochlab.generations.Generation`, oldest first."""
    from epochlab.generations import Generation

    return [g.label for g in sorted(Generation)]


def load_file(path: str | Path) -> Scenario:
    """Read and validate one scenario file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise _err(str(path), "<file>", "a readable scenario file", exc.strerror or str(exc))
    except UnicodeDecodeError as exc:
        raise _err(str(path), f"byte {exc.start}", "UTF-8 text", f"byte {exc.object[exc.start]:#04x} "
                   f"at offset {exc.start} is not UTF-8") from None
    return loads(text, where=str(path))


def loads(text: str, where: str = "<string>") -> Scenario:
    """Parse TOML ``text``; ``where`` names it in errors."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        field = f"line {match.group(1)}" if match else "<toml>"
        raise _err(where, field, "valid TOML", str(exc)) from None
    except RecursionError:
        raise _err(where, "<toml>", "TOML nested at most a few hundred levels deep",
                   "arrays or tables nested too deeply") from None
    from epochlab.formats import validate

    validate(scenario_model(), data, where, ScenarioError)  # structure, types, bounds: all at once
    scenario = from_mapping(data, where)
    return _with_text(scenario, text)


def builtin_names() -> list[str]:
    """Names of the built-in scenarios (file stems under ``scenarios/builtin``), sorted."""
    folder = resources.files("epochlab.scenarios") / "builtin"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def builtin_text(name: str) -> str:
    """The TOML text of a built-in scenario; ``ScenarioError`` naming the known ones if absent."""
    if name not in builtin_names():
        raise _err("<builtin>", "name", "one of " + ", ".join(builtin_names()), name)
    return (resources.files("epochlab.scenarios") / "builtin" / f"{name}.toml").read_text("utf-8")


def load_builtin(name: str) -> Scenario:
    return loads(builtin_text(name), where=f"builtin/{name}.toml")


def resolve(name_or_file: str) -> Scenario:
    """A built-in by name, or a file when the argument is a path that exists or ends in .toml."""
    path = Path(name_or_file)
    if path.suffix == ".toml" or path.exists():
        return load_file(path)
    return load_builtin(name_or_file)


def from_mapping(data: Mapping[str, Any], where: str) -> Scenario:
    """Validate an already-parsed mapping (the TOML document or the Python builder's data)."""
    _check_keys(data, _TOP_KEYS, "", where)
    name = _require(data, "name", where)
    if not isinstance(name, str) or not _NAME.match(name):
        raise _err(where, "name", "lower-case letters, digits, '.', '_' or '-'", name)
    description = _opt(data, "description", str, "a string", where, "")
    source = _opt(data, "source", str, "a string", where, None)
    seed = _opt_int(data, "seed", where, 0)
    settle_ms = _opt_int(data, "settle_ms", where, 0)
    generations = _generations(data.get("generations"), "generations", where)
    if generations is None:
        generations = tuple(generation_labels())
    cluster = _table(data.get("cluster", {}), "cluster", where)
    producers = _clients(data.get("producers", {}), "producers", where)
    consumers = _clients(data.get("consumers", {}), "consumers", where)
    _check_configs(cluster, producers, consumers, where)
    ctx = _Context(where, _brokers(cluster, where), producers, consumers)
    steps = _steps(data.get("steps", []), ctx)
    ctx.labels = {s.label: s.index for s in steps if s.label is not None}
    expectations = _expectations(data.get("expect", []), ctx, len(steps))
    return Scenario(name=name, description=description, source=source,
                    generations=generations, seed=seed, cluster=cluster, producers=producers,
                    consumers=consumers, steps=steps, expectations=expectations,
                    settle_ms=settle_ms, where=where)


class _Context:
    def __init__(self, where: str, brokers: tuple[int, ...], producers: Mapping[str, Any],
                 consumers: Mapping[str, Any]) -> None:
        self.where = where
        self.brokers = brokers
        self.producers = producers
        self.consumers = consumers
        self.labels: dict[str, int] = {}


def _steps(raw: Any, ctx: _Context) -> tuple[Step, ...]:
    if not isinstance(raw, list):
        raise _err(ctx.where, "steps", "an array of tables ([[steps]])", raw)
    steps: list[Step] = []
    labels: set[str] = set()
    next_value = 1
    for i, item in enumerate(raw):
        path = f"steps[{i}]"
        if not isinstance(item, Mapping):
            raise _err(ctx.where, path, "a table", item)
        action = _require(item, "action", ctx.where, path)
        if action not in ACTIONS:
            raise _err(ctx.where, f"{path}.action", "one of " + ", ".join(ACTIONS), action)
        spec = ACTIONS[action]
        _check_keys(item, _STEP_KEYS + tuple(p.name for p in spec), path, ctx.where)
        at_ms = _opt_int(item, "at_ms", ctx.where, None, path)
        after_ms = _opt_int(item, "after_ms", ctx.where, None, path)
        if at_ms is not None and after_ms is not None:
            raise _err(ctx.where, f"{path}.at_ms", "at most one of at_ms and after_ms",
                       {"at_ms": at_ms, "after_ms": after_ms})
        label = _opt(item, "label", str, "a string", ctx.where, None, path)
        if label is not None:
            if label in labels:
                raise _err(ctx.where, f"{path}.label", "a label not used by an earlier step", label)
            labels.add(label)
        params = _params(item, spec, path, ctx)
        if action == "produce":
            params = _resolve_produce(params, next_value, path, ctx.where)
            next_value = max(next_value, max(params["values"]) + 1)
        if action == "wait_until":
            params["condition"] = _condition(params["condition"], f"{path}.condition", ctx)
        steps.append(Step(i, action, params, at_ms, after_ms, label))
    return tuple(steps)


def _resolve_produce(params: dict[str, Any], next_value: int, path: str,
                     where: str) -> dict[str, Any]:
    """``count = n`` becomes the next ``n`` integers after every value produced so far."""
    values, count = params.get("values"), params.get("count")
    if (values is None) == (count is None):
        raise _err(where, f"{path}.values", "exactly one of values and count",
                   {"values": values, "count": count})
    if values is None:
        values = list(range(next_value, next_value + count))
    if not values:
        raise _err(where, f"{path}.values", "at least one value", values)
    return {"producer": params["producer"], "values": values}


def _expectations(raw: Any, ctx: _Context, n_steps: int) -> tuple[Expectation, ...]:
    if not isinstance(raw, list):
        raise _err(ctx.where, "expect", "an array of tables ([[expect]])", raw)
    out: list[Expectation] = []
    for i, item in enumerate(raw):
        path = f"expect[{i}]"
        if not isinstance(item, Mapping):
            raise _err(ctx.where, path, "a table", item)
        kind = _require(item, "kind", ctx.where, path)
        if kind not in EXPECTATIONS:
            raise _err(ctx.where, f"{path}.kind", "one of " + ", ".join(EXPECTATIONS), kind)
        spec = EXPECTATIONS[kind]
        _check_keys(item, _EXPECT_KEYS + tuple(p.name for p in spec), path, ctx.where)
        generations = _generations(item.get("generations"), f"{path}.generations", ctx.where)
        description = _opt(item, "description", str, "a string", ctx.where, None, path)
        after_step = None
        if "after_step" in item:
            if kind not in STATE_KINDS:
                raise _err(ctx.where, f"{path}.after_step",
                           "no after_step: this kind is judged over the whole run", item["after_step"])
            after_step = _step_ref(item["after_step"], f"{path}.after_step", ctx, n_steps)
        params = _params(item, spec, path, ctx)
        _check_expectation(kind, params, path, ctx.where)
        bounds = {key: _release_bound(item, key, path, ctx.where) for key in ("from_release", "before_release")}
        out.append(Expectation(i, kind, params, generations, after_step, description, **bounds))
    return tuple(out)


def _check_expectation(kind: str, params: dict[str, Any], path: str, where: str) -> None:
    if kind in ("consumer_saw", "consumer_did_not_see"):
        if all(params.get(k) is None for k in ("values", "offsets", "records")):
            raise _err(where, f"{path}.values", "values, offsets or records", None)
    if kind == "present" and params.get("offsets") is not None:
        if len(params["offsets"]) != len(params["values"]):
            raise _err(where, f"{path}.offsets", f"{len(params['values'])} offsets (one per value)",
                       params["offsets"])
    if kind == "acked" and params.get("offsets") is not None:
        if len(params["offsets"]) != len(params["values"]):
            raise _err(where, f"{path}.offsets", f"{len(params['values'])} offsets (one per value)",
                       params["offsets"])
    if kind == "txn_outcome" and params["outcome"] not in ("committed", "aborted", "fenced"):
        raise _err(where, f"{path}.outcome", '"committed", "aborted" or "fenced"', params["outcome"])
    if kind == "unavailable_ms_between" and params.get("max") is not None:
        if params["max"] < params["min"]:
            raise _err(where, f"{path}.max", f"an integer >= min ({params['min']})", params["max"])


def _params(item: Mapping[str, Any], spec: tuple[Param, ...], path: str,
            ctx: _Context) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for p in spec:
        if p.name in item:
            params[p.name] = _value(item[p.name], p.type, f"{path}.{p.name}", ctx)
        elif p.required:
            raise _err(ctx.where, f"{path}.{p.name}", f"a {p.type} (required)", None)
        else:
            params[p.name] = p.default
    return params


def _condition(raw: Any, path: str, ctx: _Context) -> dict[str, Any]:
    if not isinstance(raw, Mapping) or not raw:
        raise _err(ctx.where, path, "a non-empty table of " + ", ".join(CONDITIONS), raw)
    _check_keys(raw, tuple(CONDITIONS), path, ctx.where)
    return {k: _value(raw[k], CONDITIONS[k].type, f"{path}.{k}", ctx) for k in sorted(raw)}


def _value(v: Any, type_: str, path: str, ctx: _Context) -> Any:
    checker = _CHECKERS[type_]
    return checker(v, path, ctx)


def _int_check(minimum: int, what: str):
    def check(v: Any, path: str, ctx: _Context) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise _err(ctx.where, path, what, v)
        return v
    return check


def _bool(v: Any, path: str, ctx: _Context) -> bool:
    if not isinstance(v, bool):
        raise _err(ctx.where, path, "true or false", v)
    return v


def _str(v: Any, path: str, ctx: _Context) -> str:
    if not isinstance(v, str):
        raise _err(ctx.where, path, "a string", v)
    return v


def _fraction(v: Any, path: str, ctx: _Context) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
        raise _err(ctx.where, path, "a number in [0.0, 1.0]", v)
    return float(v)


def _broker(v: Any, path: str, ctx: _Context) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v not in ctx.brokers:
        raise _err(ctx.where, path, f"a broker id, one of {list(ctx.brokers)}", v)
    return v


def _brokers(cluster: Mapping[str, Any], where: str) -> tuple[int, ...]:
    raw = cluster.get("brokers", list(_DEFAULT_BROKERS))
    if not isinstance(raw, list) or not raw or not all(
            isinstance(b, int) and not isinstance(b, bool) for b in raw):
        raise _err(where, "cluster.brokers", "a non-empty list of integer broker ids", raw)
    return tuple(raw)


def _broker_list(v: Any, path: str, ctx: _Context) -> list[int]:
    if not isinstance(v, list):
        raise _err(ctx.where, path, f"a list of broker ids from {list(ctx.brokers)}", v)
    return [_broker(b, f"{path}[{i}]", ctx) for i, b in enumerate(v)]


def _replica_offset(v: Any, path: str, ctx: _Context) -> list[int]:
    if not isinstance(v, list) or len(v) != 2:
        raise _err(ctx.where, path, f"[broker, offset]: a broker id from {list(ctx.brokers)} and an "
                   "offset >= 0", v)
    return [_broker(v[0], f"{path}[0]", ctx), _CHECKERS["offsets"]([v[1]], f"{path}[1]", ctx)[0]]


def _node(v: Any, path: str, ctx: _Context) -> int | str:
    if isinstance(v, str):
        if v in ("controller", "coordinator") or v in ctx.producers or v in ctx.consumers:
            return v
        raise _err(ctx.where, path, "a broker id, \"controller\", \"coordinator\" or a declared "
                   "client name", v)
    return _broker(v, path, ctx)


def _groups(v: Any, path: str, ctx: _Context) -> list[list[int | str]]:
    if not isinstance(v, list) or not v or not all(isinstance(g, list) for g in v):
        raise _err(ctx.where, path, "a non-empty list of lists of nodes", v)
    seen: set[Any] = set()
    groups = []
    for i, group in enumerate(v):
        nodes = [_node(n, f"{path}[{i}][{j}]", ctx) for j, n in enumerate(group)]
        for j, n in enumerate(nodes):
            if n in seen:
                raise _err(ctx.where, f"{path}[{i}][{j}]", "each node in one group only", n)
            seen.add(n)
        groups.append(nodes)
    return groups


def _delay(v: Any, path: str, ctx: _Context) -> list[int]:
    ok = (isinstance(v, list) and len(v) == 2
          and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v)
          and v[0] <= v[1])
    if not ok:
        raise _err(ctx.where, path, "[lo, hi] with 0 <= lo <= hi (ms)", v)
    return list(v)


def _int_list(what: str, lo: int = 0):
    def check(v: Any, path: str, ctx: _Context) -> list[int]:
        if not isinstance(v, list) or not all(
                isinstance(x, int) and not isinstance(x, bool) and x >= lo for x in v):
            raise _err(ctx.where, path, what, v)
        return list(v)
    return check


def _records(v: Any, path: str, ctx: _Context) -> list[list[int]]:
    ok = isinstance(v, list) and all(
        isinstance(r, list) and len(r) == 2
        and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in r) for r in v)
    if not ok:
        raise _err(ctx.where, path, "a list of [offset, value] pairs", v)
    return [list(r) for r in v]


def _client(kind: str):
    def check(v: Any, path: str, ctx: _Context) -> str:
        declared = ctx.producers if kind == "producer" else ctx.consumers
        if not isinstance(v, str) or v not in declared:
            raise _err(ctx.where, path, f"a {kind} declared in [{kind}s.NAME]: "
                       + (", ".join(declared) or "none declared"), v)
        return v
    return check


def _errors(v: Any, path: str, ctx: _Context) -> list[str]:
    names = [v] if isinstance(v, str) else v
    if not isinstance(names, list) or not names or not all(
            isinstance(n, str) and re.fullmatch(r"[A-Z][A-Z0-9_]*", n) for n in names):
        raise _err(ctx.where, path, "a Kafka error name like \"NOT_ENOUGH_REPLICAS\", or a list", v)
    return list(names)


def _measure(v: Any, path: str, ctx: _Context) -> str:
    if v not in ("longest", "total"):
        raise _err(ctx.where, path, "\"longest\" or \"total\"", v)
    return v


def _spec(v: Any, path: str, ctx: _Context) -> str | int:
    if not is_list_spec(v):
        raise _err(ctx.where, path, "\"latest\", \"earliest\" or a timestamp (an integer in [0, 2^63-1])", v)
    return v  # type: ignore[no-any-return]


def _step_ref(v: Any, path: str, ctx: _Context, n_steps: int) -> int:
    if isinstance(v, str):
        if v not in ctx.labels:
            raise _err(ctx.where, path, "a step label: " + (", ".join(ctx.labels) or "none defined"), v)
        return ctx.labels[v]
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < n_steps:
        raise _err(ctx.where, path, f"a step label or a 0-based index below {n_steps}", v)
    return v


_CHECKERS = {
    "int": _int_check(0, "an integer >= 0"),
    "pos_int": _int_check(1, "an integer >= 1"),
    "bool": _bool,
    "str": _str,
    "fraction": _fraction,
    "broker": _broker,
    "brokers": _broker_list,
    "node": _node,
    "groups": _groups,
    "delay": _delay,
    "values": _int_list("a list of integer record values >= 0"),
    "offsets": _int_list("a list of offsets (integers >= 0)"),
    "answers": _int_list("a list of ListOffsets answers (offsets, or -1 for none)", -1),
    "records": _records,
    "producer": _client("producer"),
    "consumer": _client("consumer"),
    "errors": _errors,
    "replica_offset": _replica_offset,
    "condition": lambda v, path, ctx: v,  # validated by _condition (needs the table form)
    "measure": _measure,
    "spec": _spec,
}


def _release_bound(item: Mapping[str, Any], key: str, path: str, where: str) -> str | None:
    """An expectation's ``from_release`` / ``before_release``: a Kafka release, as written."""
    from epochlab.generations import parse_release

    value = item.get(key)
    if value is not None and parse_release(value) is None:
        raise _err(where, f"{path}.{key}", 'a Kafka release "X.Y.Z" (before 1.0 "0.X.Y.Z"), e.g. "2.0.1"', value)
    return value


def _generations(raw: Any, path: str, where: str) -> tuple[str, ...] | None:
    """``None`` when absent. Each entry is a label, or ``"label+"`` for it and every later one."""
    if raw is None:
        return None
    labels = generation_labels()
    if not isinstance(raw, list) or not raw:
        raise _err(where, path, "a non-empty list of generation names: " + ", ".join(labels), raw)
    chosen: set[str] = set()
    for i, item in enumerate(raw):
        name = item[:-1] if isinstance(item, str) and item.endswith("+") else item
        if name not in labels:
            raise _err(where, f"{path}[{i}]",
                       "a generation (optionally with '+'): " + ", ".join(labels), item)
        start = labels.index(name)
        chosen.update(labels[start:] if item.endswith("+") else [name])
    return tuple(g for g in labels if g in chosen)


def _table(raw: Any, path: str, where: str) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise _err(where, path, "a table", raw)
    return dict(raw)


def _clients(raw: Any, path: str, where: str) -> dict[str, dict[str, Any]]:
    table = _table(raw, path, where)
    for name, config in table.items():
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", name) or name in ("controller", "coordinator"):
            raise _err(where, f"{path}.{name}", "a client name (letters, digits, '_', '-')", name)
        _table(config, f"{path}.{name}", where)
    return {k: dict(v) for k, v in table.items()}


def _check_configs(cluster: Mapping[str, Any], producers: Mapping[str, Any],
                   consumers: Mapping[str, Any], where: str) -> None:
    """Validate configs with the engine's own ``from_dict`` (Kafka names and defaults)."""
    try:
        from epochlab.sim import config as sim_config
    except ImportError:  # the engine is not installed: the runner will report it
        return
    jobs = [("cluster", sim_config.ClusterConfig, cluster)]
    jobs += [(f"producers.{n}", sim_config.ProducerConfig, c) for n, c in producers.items()]
    jobs += [(f"consumers.{n}", sim_config.ConsumerConfig, c) for n, c in consumers.items()]
    for path, cls, mapping in jobs:
        try:
            cls.from_dict(mapping, where=f"{where}: {path}")
        except ConfigError as exc:
            field = getattr(exc, "field", None)
            raise _err(where, f"{path}.{field}" if field else path,
                       getattr(exc, "expected", "a valid config"), getattr(exc, "got", None),
                       detail=exc.message) from None


def _check_keys(item: Mapping[str, Any], allowed: tuple[str, ...], path: str, where: str) -> None:
    for key in item:
        if key not in allowed:
            full = f"{path}.{key}" if path else key
            raise _err(where, full, "one of " + ", ".join(allowed) + " (unknown key)", key)


def _require(item: Mapping[str, Any], key: str, where: str, path: str = "") -> Any:
    if key not in item:
        raise _err(where, f"{path}.{key}" if path else key, f"a value for {key!r} (required)", None)
    return item[key]


def _opt(item: Mapping[str, Any], key: str, type_: type, what: str, where: str, default: Any,
         path: str = "") -> Any:
    if key not in item:
        return default
    value = item[key]
    if not isinstance(value, type_):
        raise _err(where, f"{path}.{key}" if path else key, what, value)
    return value


def _opt_int(item: Mapping[str, Any], key: str, where: str, default: Any, path: str = "") -> Any:
    if key not in item:
        return default
    value = item[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _err(where, f"{path}.{key}" if path else key, "an integer >= 0", value)
    return value


def _with_text(scenario: Scenario, text: str) -> Scenario:
    from dataclasses import replace

    return replace(scenario, text=text)


def _err(where: str, field: str, expected: str, got: Any, detail: str | None = None) -> ScenarioError:
    message = f"{where}: {field}: expected {expected}, got {got!r}"
    if detail:
        message += f" ({detail})"
    return ScenarioError(message, where=where, field=field, expected=expected, got=got)
