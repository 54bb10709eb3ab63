"""The toolkit of the files users write: the pieces their pydantic v2 models are made of, and
the first check every loader makes with them.

Four formats use it: a fuzz **schedule** (``epochlab-schedule`` JSON), a fuzz **profile**
(``--config`` JSON), a campaign **grid** (TOML or JSON) and a **scenario** (TOML). Each format's
model is defined beside the vocabulary it validates: ``schedule_model`` beside the ops of
``epochlab.fuzz.schedule``, ``profile_model`` beside the bounds of ``epochlab.fuzz.generator``,
``grid_model`` beside the axes of ``epochlab.campaigns.grid``, ``scenario_model`` beside the
actions of ``epochlab.scenarios.model``; ``epochlab.schemas`` names them for ``epochlab schema``
and ``docs/schemas/``. This module knows none of them.

A model checks structure, types and bounds, and :func:`validate` reports *every* problem at
once with its path (``actions[3].at_ms``); the loaders then check what needs context (a broker
id that must be one of ``cluster.brokers``, times that never decrease, Kafka's own
configuration rules) and build the objects. Types are strict, as JSON and TOML give them:
``"5"`` is not 5, ``true`` is not 1.

Bounds keep every run finite and every number in Kafka's range: virtual times at most one day
(:data:`MAX_MS`; a simulated run is seconds to hours), broker ids and Kafka ``int``
settings in ``0..2^31-1``, record values and seeds in ``0..2^63-1``, at most
:data:`MAX_COUNT` records per produce step and :data:`MAX_ACTIONS` actions per schedule.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Union

from pydantic import (BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr,
                      ValidationError, create_model)

from epochlab.sim.config import INT32, MAX_MS  # one bound for files and settings

__all__ = ["INT32", "INT64", "MAX_ACTIONS", "MAX_COUNT", "MAX_LIST", "MAX_MS", "TAGS", "BrokerId",
           "Ms", "Name", "Node", "Settings", "Strict", "Value", "check", "describe", "param_fields",
           "tagged", "validate"]

INT64 = 2**63 - 1
#: Records one produce step may send.
MAX_COUNT = 10_000
#: Actions of one schedule, steps of one scenario.
MAX_ACTIONS = 100_000
MAX_LIST = 1000

Ms = Annotated[StrictInt, Field(ge=0, le=MAX_MS)]
BrokerId = Annotated[StrictInt, Field(ge=0, le=INT32)]
Value = Annotated[StrictInt, Field(ge=0, le=INT64)]
Name = Annotated[StrictStr, Field(min_length=1, max_length=200)]
Node = Union[BrokerId, Name]
Fraction = Annotated[Union[StrictInt, StrictFloat], Field(ge=0, le=1)]
Settings = dict[Name, Any]   # Kafka settings: checked by epochlab.sim.config with their names

#: parameter type tags (``epochlab.fuzz.schedule.OPS``, ``epochlab.scenarios.model``) -> types
TAGS: dict[str, Any] = {
    "int": Ms,
    "pos_int": Annotated[StrictInt, Field(ge=1, le=MAX_MS)],
    "bool": StrictBool,
    "str": Annotated[StrictStr, Field(max_length=10_000)],
    "fraction": Fraction,
    "broker": BrokerId,
    "brokers": Annotated[list[BrokerId], Field(max_length=MAX_LIST)],
    "node": Node,
    "producer": Name,
    "consumer": Name,
    "groups": Annotated[list[Annotated[list[Node], Field(max_length=MAX_LIST)]], Field(max_length=MAX_LIST)],
    "delay": Annotated[list[Ms], Field(min_length=2, max_length=2)],
    "replica_offset": Annotated[list[Value], Field(min_length=2, max_length=2)],
    "values": Annotated[list[Value], Field(min_length=1, max_length=MAX_LIST)],
    "offsets": Annotated[list[Value], Field(max_length=MAX_LIST)],
    "answers": Annotated[list[Annotated[StrictInt, Field(ge=-1, le=INT64)]], Field(max_length=MAX_LIST)],
    "records": Annotated[list[Annotated[list[Value], Field(min_length=2, max_length=2)]],
                         Field(max_length=MAX_LIST)],
    "errors": Union[Name, Annotated[list[Name], Field(min_length=1, max_length=100)]],
    "step_ref": Union[Annotated[StrictInt, Field(ge=0, le=MAX_ACTIONS)], Name],
    "measure": Literal["longest", "total"],
    "spec": Union[Literal["latest", "earliest"], Value],
}


class Strict(BaseModel):
    """The base of every model: unknown keys refused, no type coercion."""

    model_config = ConfigDict(extra="forbid", strict=True)


def param_fields(params: Mapping[str, tuple[str, bool]],
                 extra_tags: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Model fields for parameters ``name -> (type tag, required)`` (:data:`TAGS`, and
    ``extra_tags`` for tags of the caller's own)."""
    fields: dict[str, Any] = {}
    tags = {**TAGS, **(extra_tags or {})}
    for name, (tag, required) in params.items():
        type_ = tags.get(tag, Any)
        if name == "count":  # records one produce sends
            type_ = Annotated[StrictInt, Field(ge=1, le=MAX_COUNT)]
        fields[name] = (type_, ...) if required else (type_ | None, None)
    return fields


#: the tags of every tagged union built (:func:`tagged`): a path leaves them out
_TAG_NAMES: set[str] = set()


def tagged(kind: str, key: str, table: Mapping[str, Mapping[str, tuple[str, bool]]],
           common: Mapping[str, Any], extra_tags: Mapping[str, Any] | None = None) -> Any:
    """A union of one model per entry of ``table``, told apart by the field ``key``. The entry
    names become tags that :func:`check` leaves out of a problem's path."""
    models = []
    for name, params in table.items():
        fields = {key: (Literal[name], ...), **common, **param_fields(params, extra_tags)}
        models.append(create_model(f"{kind}_{name}", __base__=Strict, **fields))
    _TAG_NAMES.update(table)
    return Annotated[Union[tuple(models)], Field(discriminator=key)]


def _path(loc: tuple[Any, ...]) -> str:
    """``('actions', 3, 'crash', 'broker')`` -> ``actions[3].broker``: the tag pydantic adds
    after a list index (which member of a tagged union) is dropped."""
    out = ""
    after_index = False
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            after_index = True
            continue
        if not (after_index and isinstance(part, str) and part in _TAG_NAMES):
            out += f".{part}" if out else str(part)
        after_index = False
    return out


_TYPES = {"int_type": "an integer", "bool_type": "true or false", "string_type": "a string",
          "dict_type": "a table/object", "list_type": "a list", "float_type": "a number",
          "model_type": "a table/object", "int_from_float": "an integer"}


def _message(err: Mapping[str, Any]) -> str:
    """Pydantic's error in this project's words."""
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "required key missing"
    if kind in ("greater_than_equal", "greater_than"):
        return f"must be >= {ctx.get('ge', ctx.get('gt'))}"
    if kind in ("less_than_equal", "less_than"):
        return f"must be <= {ctx.get('le', ctx.get('lt'))}"
    if kind in _TYPES:
        return f"expected {_TYPES[kind]}"
    if kind == "union_tag_invalid":
        return (f"unknown {ctx.get('discriminator', '').strip(chr(39))} {ctx.get('tag')!r}; "
                f"expected one of {ctx.get('expected_tags')}")
    if kind == "union_tag_not_found":
        return f"required key {ctx.get('discriminator', '').strip(chr(39))} missing"
    if kind == "too_long":
        return f"at most {ctx.get('max_length')} items"
    if kind == "too_short":
        return f"at least {ctx.get('min_length')} item{'s' if ctx.get('min_length') != 1 else ''}"
    if kind == "literal_error":
        return f"expected {ctx.get('expected')}"
    return str(err["msg"])


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check(model: type[BaseModel], data: Any, where: str) -> list[tuple[str, str, str]]:
    """Every problem of ``data`` as ``model`` reads it: ``(path, message, value shown)``; empty
    when it is well-formed."""
    try:
        model.model_validate(data)
    except ValidationError as exc:
        problems = []
        seen: set[tuple[str, str]] = set()
        for err in exc.errors(include_url=False):
            path = _path(tuple(err["loc"]))
            if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
                tag = str((err.get("ctx") or {}).get("discriminator", "")).strip("'")
                path = f"{path}.{tag}" if path else tag
            key = (path, _message(err))
            if key in seen:
                continue
            seen.add(key)
            problems.append((path, _message(err), _shown(err.get("input"))))
        return problems
    return []


def describe(problems: list[tuple[str, str, str]], where: str, limit: int = 20) -> str:
    """One problem: one line; more: a count, then one line per problem (at most ``limit``)."""
    if len(problems) == 1:
        path, msg, shown = problems[0]
        return f"{where}: {path or '(top level)'}: {msg} (got {shown})"
    lines = [f"{where}: {len(problems)} problems:"]
    for path, msg, shown in problems[:limit]:
        lines.append(f"  {path or '(top level)'}: {msg} (got {shown})")
    if len(problems) > limit:
        lines.append(f"  ... and {len(problems) - limit} more")
    return "\n".join(lines)


def validate(model: type[BaseModel], data: Any, where: str, error: type[Exception]) -> None:
    """Raise ``error`` (an :class:`epochlab.errors.EpochlabError` subclass) listing every
    problem of ``data`` as ``model`` reads it, with ``field`` / ``expected`` / ``got`` of the
    first and ``problems`` holding them all; nothing when it is well-formed."""
    try:
        problems = check(model, data, where)
    except RecursionError:
        problems = [("", "nested too deeply", "deeply nested lists or tables")]
    if problems:
        path, msg, shown = problems[0]
        raise error(describe(problems, where), where=where, field=path, expected=msg, got=shown,
                    problems=[{"field": p, "message": m, "got": g} for p, m, g in problems])
