"""The four files people write, by the name ``epochlab schema FORMAT`` takes, and their JSON
Schemas (what ``docs/schemas/<name>.schema.json`` holds; ``tests/test_formats.py`` keeps them
equal).

Each format's model is defined beside the vocabulary it validates (``epochlab.formats`` has
the pieces they are made of); this table only names them, so it sits above all four owners.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from epochlab.campaigns.grid import grid_model
from epochlab.fuzz.generator import profile_model
from epochlab.fuzz.schedule import schedule_model
from epochlab.scenarios.model import scenario_model

__all__ = ["FORMATS", "json_schema"]

#: format name -> its model (each built once, when first asked for)
FORMATS: dict[str, Callable[[], Any]] = {"schedule": schedule_model, "fuzz-profile": profile_model,
                                         "campaign-grid": grid_model, "scenario": scenario_model}


def json_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of format ``kind`` (what ``docs/schemas/<kind>.schema.json`` holds)."""
    schema: dict[str, Any] = FORMATS[kind]().model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://epochlab.invalid/schemas/{kind}.schema.json"
    return schema
