"""Campaign grids: which configurations and fault mixes a campaign sweeps.

A grid file is TOML (``.toml``) or JSON (anything else) with four optional tables; every key
uses Kafka's name. The default grid (:data:`DEFAULT_GRID`, ``epochlab campaign`` without
``--grid``) covers every configuration the seeds discuss::

    [axes]                              # the cross product of these lists is the grid
    acks = ["0", "1", "all"]
    "min.insync.replicas" = [1, 2]
    "replication.factor" = [1, 3]
    "unclean.leader.election.enable" = [false, true]
    "enable.idempotence" = [false, true]
    generation = ["hw-truncation", "kip-101", "kip-279", "kip-320",
                  "diverging-epoch", "strict-min-isr"]

    [faults]                            # fault mix: weight of each fault kind per run
    leader-crash = 3                    # the leader crashes (sometimes losing its unflushed tail)
    follower-lag = 2                    # a follower falls behind, then the leader crashes
    correlated = 2                      # the leader and a follower crash together
    leader-partition = 2                # the leader (and a producer) cut off from the rest

    [cluster]                           # fixed cluster settings (epochlab.sim ClusterConfig)
    "session.timeout.ms" = 6000

    [producer]                          # fixed producer settings (ProducerConfig)
    "request.timeout.ms" = 3000

Combinations that Kafka refuses or that mean nothing are pruned, not reported as errors:
idempotence needs ``acks=all`` (the Java client 3.x rejects anything else),
``min.insync.replicas`` above the replication factor, and unclean election with one replica
(there is no other candidate: it is the same configuration as clean). The default grid gives
20 configurations per generation, 120 in all.

Every malformed grid raises :class:`~epochlab.errors.ConfigError` whose ``field`` names the
offending key (``axes.acks[2]``, ``faults.leader-crash``) and whose message starts with the
file name.
"""

from __future__ import annotations

import itertools
import json
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Mapping

from epochlab.errors import ConfigError
from epochlab.generations import Generation
from epochlab.steps import CAMPAIGN_FAULTS

__all__ = ["AXES", "DEFAULT_GRID", "FAULT_KINDS", "Grid", "RunConfig", "default_grid", "grid_model",
           "load_grid", "parse_grid"]

#: Fault kinds of the campaign workload (``runs.py`` builds them) and their default weights:
#: the step vocabulary's (``epochlab.steps.CAMPAIGN_FAULTS``, with the steps each is made of).
FAULT_KINDS: dict[str, int] = {k.name: k.weight for k in CAMPAIGN_FAULTS}

#: Axis name -> (allowed values or None for "validated by a function", default values).
AXES: dict[str, tuple[tuple[Any, ...] | None, list[Any]]] = {
    "acks": (("0", "1", "all"), ["0", "1", "all"]),
    "min.insync.replicas": ((1, 2, 3), [1, 2]),
    "replication.factor": ((1, 2, 3), [1, 3]),
    "unclean.leader.election.enable": ((False, True), [False, True]),
    "enable.idempotence": ((False, True), [False, True]),
    "generation": (None, [g.label for g in sorted(Generation)]),
}

DEFAULT_GRID: dict[str, Any] = {
    "axes": {name: list(default) for name, (_, default) in AXES.items()},
    "faults": dict(FAULT_KINDS),
    "cluster": {},
    "producer": {},
}

_TABLES = ("axes", "faults", "cluster", "producer")


@cache
def grid_model() -> Any:
    """The pydantic model of a grid file (``docs/schemas/campaign-grid.schema.json``): a list
    per axis of :data:`AXES`, a weight per kind of :data:`FAULT_KINDS`."""
    from typing import Annotated, Union

    from pydantic import Field, StrictBool, StrictInt, StrictStr, create_model

    from epochlab.formats import Settings, Strict

    axis = Annotated[list[Union[StrictStr, StrictBool, StrictInt]], Field(min_length=1, max_length=100)]
    axes = create_model("GridAxes", __base__=Strict, **{
        name.replace(".", "_"): (axis | None, Field(None, alias=name)) for name in AXES})
    axes.model_config["populate_by_name"] = False
    faults = create_model("GridFaults", __base__=Strict, **{
        name.replace("-", "_"): (Annotated[StrictInt, Field(ge=0, le=1000)] | None, Field(None, alias=name))
        for name in FAULT_KINDS})
    return create_model(
        "CampaignGrid", __base__=Strict,
        __doc__="An epochlab campaign grid (epochlab campaign --grid FILE; docs/campaigns.md).",
        axes=(axes | None, None),
        faults=(faults | None, None),
        cluster=(Settings | None, None),
        producer=(Settings | None, None),
    )

# Cluster/producer keys the campaign itself sets per configuration or per run.
_RESERVED = {"brokers", "replicas", "replication.factor", "min.insync.replicas",
             "unclean.leader.election.enable", "acks", "enable.idempotence"}


@dataclass(frozen=True)
class RunConfig:
    """One point of the grid: a protocol generation and the guarantees-relevant settings."""

    generation: str
    acks: str
    min_insync_replicas: int
    replication_factor: int
    unclean_leader_election_enable: bool
    enable_idempotence: bool

    @property
    def config_id(self) -> str:
        """A stable, path-safe identity, e.g. ``g5-strict-min-isr_acks-all_isr-2_rf-3_clean_idem``
        (sorts by generation first)."""
        g = Generation.parse(self.generation)
        return (f"g{int(g)}-{g.label}_acks-{self.acks}_isr-{self.min_insync_replicas}"
                f"_rf-{self.replication_factor}"
                f"_{'unclean' if self.unclean_leader_election_enable else 'clean'}"
                f"_{'idem' if self.enable_idempotence else 'noidem'}")

    def to_dict(self) -> dict[str, Any]:
        return {"config_id": self.config_id, "generation": self.generation, "acks": self.acks,
                "min.insync.replicas": self.min_insync_replicas,
                "replication.factor": self.replication_factor,
                "unclean.leader.election.enable": self.unclean_leader_election_enable,
                "enable.idempotence": self.enable_idempotence}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        return cls(str(data["generation"]), str(data["acks"]), int(data["min.insync.replicas"]),
                   int(data["replication.factor"]), bool(data["unclean.leader.election.enable"]),
                   bool(data["enable.idempotence"]))


@dataclass(frozen=True)
class Grid:
    """A validated grid: the configurations (pruned cross product, in a fixed order), the
    fault mix and the fixed cluster/producer settings. Plain data: safe to ship to Spark
    tasks as :meth:`to_json` and rebuild there with :meth:`from_json`."""

    configs: tuple[RunConfig, ...]
    faults: dict[str, int] = field(default_factory=lambda: dict(FAULT_KINDS))
    cluster: dict[str, Any] = field(default_factory=dict)
    producer: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"configs": [c.to_dict() for c in self.configs], "faults": dict(self.faults),
                "cluster": dict(self.cluster), "producer": dict(self.producer)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Grid:
        data = json.loads(text)
        return cls(tuple(RunConfig.from_dict(c) for c in data["configs"]), dict(data["faults"]),
                   dict(data["cluster"]), dict(data["producer"]))

    @property
    def config_ids(self) -> list[str]:
        return [c.config_id for c in self.configs]

    def __reduce__(self) -> tuple[Any, ...]:
        # Spark may pickle a grid captured by a task; rebuild it from its JSON (docs/architecture.md, style habit 8).
        return (Grid.from_json, (self.to_json(),))


def default_grid() -> Grid:
    """The grid of :data:`DEFAULT_GRID` (120 configurations)."""
    return parse_grid(DEFAULT_GRID, "<default grid>")


def load_grid(path: str | Path | None) -> Grid:
    """Read and validate a grid file (TOML if it ends in ``.toml``, else JSON); ``None`` gives
    the default grid. Raises :class:`ConfigError` naming the file and field."""
    if path is None:
        return default_grid()
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _error(where, "", "a readable grid file", type(exc).__name__,
                     f"cannot read grid file: {exc}") from None
    try:
        data = tomllib.loads(text) if where.endswith(".toml") else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, RecursionError) as exc:
        kind = "TOML" if where.endswith(".toml") else "JSON"
        raise _error(where, "", f"valid {kind}", type(exc).__name__,
                     f"not valid {kind}: {exc}") from None
    from epochlab.formats import validate

    validate(grid_model(), data, where, ConfigError)  # structure, types, bounds: all at once
    return parse_grid(data, where)


def parse_grid(data: Any, where: str = "<python>") -> Grid:
    """Validate ``data`` (a grid as a mapping) and expand it; missing tables or axes take the
    defaults."""
    if not isinstance(data, Mapping):
        raise _error(where, "", "a table/object", type(data).__name__)
    for key in data:
        if key not in _TABLES:
            raise _error(where, str(key), "one of " + ", ".join(_TABLES), repr(key),
                         f"unknown table {key!r}")
    axes = _axes(data.get("axes", {}), where)
    faults = _faults(data.get("faults", dict(FAULT_KINDS)), where)
    cluster = _fixed(data.get("cluster", {}), "cluster", where)
    producer = _fixed(data.get("producer", {}), "producer", where)
    configs = tuple(_expand(axes))
    if not configs:
        raise _error(where, "axes", "axes whose combinations include at least one valid "
                     "configuration", "none after pruning")
    return Grid(configs, faults, cluster, producer)


def _error(where: str, field: str, expected: str, got: Any, what: str | None = None) -> ConfigError:
    detail = what or f"expected {expected}, got {got}"
    prefix = f"{where}: {field}: " if field else f"{where}: "
    return ConfigError(prefix + detail, where=where, field=field, expected=expected, got=got)


def _axes(raw: Any, where: str) -> dict[str, list[Any]]:
    if not isinstance(raw, Mapping):
        raise _error(where, "axes", "a table of lists", type(raw).__name__)
    out = {name: list(default) for name, (_, default) in AXES.items()}
    for name, values in raw.items():
        path = f"axes.{name}"
        if name not in AXES:
            raise _error(where, path, "one of " + ", ".join(AXES), repr(name), f"unknown axis {name!r}")
        if not isinstance(values, list) or not values:
            raise _error(where, path, "a non-empty list", repr(values))
        allowed = AXES[name][0]
        checked = []
        for i, value in enumerate(values):
            item = f"{path}[{i}]"
            if name == "generation":
                try:
                    checked.append(Generation.parse(value).label)
                except ConfigError as exc:
                    raise _error(where, item, exc.expected, repr(value)) from None
                continue
            if name == "acks" and value in (-1, "-1"):
                value = "all"
            if name == "acks" and isinstance(value, int) and not isinstance(value, bool):
                value = str(value)
            ok = allowed is not None and any(value == a and type(value) is type(a) for a in allowed)
            if not ok:
                raise _error(where, item, "one of " + ", ".join(json.dumps(a) for a in allowed or ()),
                             json.dumps(value) if _jsonable(value) else repr(value))
            checked.append(value)
        if len(set(map(repr, checked))) != len(checked):
            raise _error(where, path, "distinct values", repr(values))
        out[name] = checked
    return out


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _faults(raw: Any, where: str) -> dict[str, int]:
    if not isinstance(raw, Mapping):
        raise _error(where, "faults", "a table of fault kind -> weight", type(raw).__name__)
    out = {}
    for name, weight in raw.items():
        path = f"faults.{name}"
        if name not in FAULT_KINDS:
            raise _error(where, path, "one of " + ", ".join(FAULT_KINDS), repr(name),
                         f"unknown fault kind {name!r}")
        if not isinstance(weight, int) or isinstance(weight, bool) or weight < 0:
            raise _error(where, path, "an integer weight >= 0", repr(weight))
        out[name] = weight
    out = {k: out.get(k, 0) for k in FAULT_KINDS}
    if not any(out.values()):
        raise _error(where, "faults", "at least one fault kind with a weight > 0", repr(raw))
    return out


def _fixed(raw: Any, table: str, where: str) -> dict[str, Any]:
    """Fixed settings, validated by the simulator's own ``from_dict`` (Kafka names)."""
    from epochlab.sim.config import ClusterConfig, ProducerConfig

    if not isinstance(raw, Mapping):
        raise _error(where, table, "a table of settings", type(raw).__name__)
    for key in raw:
        if key in _RESERVED:
            raise _error(where, f"{table}.{key}", "a setting the grid does not sweep (use [axes])",
                         repr(key), f"{key!r} is set per configuration by the grid's axes")
    try:
        (ClusterConfig if table == "cluster" else ProducerConfig).from_dict(dict(raw), f"{where}: {table}")
    except ConfigError as exc:
        field = exc.details.get("field") or ""
        raise _error(where, f"{table}.{field}" if field else table, exc.details.get("expected", "?"),
                     exc.details.get("got", "?"), exc.message) from None
    return dict(raw)


def _expand(axes: Mapping[str, list[Any]]) -> list[RunConfig]:
    """The cross product in a fixed order (generation outermost), pruned (module docs)."""
    out: list[RunConfig] = []
    seen: set[str] = set()
    for gen, acks, idem, rf, isr, unclean in itertools.product(
            axes["generation"], axes["acks"], axes["enable.idempotence"],
            axes["replication.factor"], axes["min.insync.replicas"],
            axes["unclean.leader.election.enable"]):
        if idem and acks != "all":
            continue
        if isr > rf:
            continue
        if rf == 1 and unclean:
            continue
        cfg = RunConfig(gen, acks, isr, rf, unclean, idem)
        if cfg.config_id not in seen:
            seen.add(cfg.config_id)
            out.append(cfg)
    return out
