"""Scenarios written in Python: :class:`ScenarioBuilder`, the same data as a scenario file,
validated by the same loader (``epochlab.scenarios.loader.from_mapping``)."""

from __future__ import annotations

from typing import Any

from epochlab.scenarios.loader import from_mapping
from epochlab.scenarios.model import Scenario

__all__ = ["ScenarioBuilder"]


class ScenarioBuilder:
    """The Python form of a scenario file: configs, then steps, then expectations.

    Methods mirror the TOML tables; :meth:`build` validates everything with the same rules as
    the loader and raises :class:`epochlab.errors.ScenarioError` with ``where="<python>"``.
    """

    def __init__(self, name: str, *, description: str = "", source: str | None = None,
                 generations: list[str] | None = None, seed: int = 0, settle_ms: int = 0) -> None:
        self._data: dict[str, Any] = {"name": name, "description": description, "seed": seed,
                                      "settle_ms": settle_ms, "steps": [], "expect": []}
        if source is not None:
            self._data["source"] = source
        if generations is not None:
            self._data["generations"] = list(generations)

    def cluster(self, **config: Any) -> ScenarioBuilder:
        self._data.setdefault("cluster", {}).update(config)
        return self

    def producer(self, name: str, **config: Any) -> ScenarioBuilder:
        self._data.setdefault("producers", {})[name] = dict(config)
        return self

    def consumer(self, name: str, **config: Any) -> ScenarioBuilder:
        self._data.setdefault("consumers", {})[name] = dict(config)
        return self

    def step(self, action: str, **params: Any) -> ScenarioBuilder:
        self._data["steps"].append({"action": action, **params})
        return self

    def expect(self, kind: str, **params: Any) -> ScenarioBuilder:
        self._data["expect"].append({"kind": kind, **params})
        return self

    def build(self) -> Scenario:
        return from_mapping(self._data, where="<python>")
