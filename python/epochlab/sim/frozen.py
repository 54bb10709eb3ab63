"""``@frozen``: the simulator's immutable records (messages, history entries) built fast.

``dataclass(frozen=True)`` makes ``__init__`` set each field through ``object.__setattr__``
(frozen classes refuse plain assignment), a call per field: about 1 us for a ten-field
message, and a run builds thousands. ``@frozen`` is that dataclass with an ``__init__`` of the
same signature and defaults that writes the fields straight into the instance dictionary, in
declaration order (0.35 us). Everything else (equality, hash, repr, ordering of the dict,
immutability afterwards, ``dataclasses.fields``, pickling) is the dataclass's own.

>>> @frozen
... class Point:
...     x: int
...     y: int = 0
>>> p = Point(1)
>>> p, p.__dict__, p == Point(1, 0)
(Point(x=1, y=0), {'x': 1, 'y': 0}, True)
>>> p.x = 2
Traceback (most recent call last):
dataclasses.FrozenInstanceError: cannot assign to field 'x'
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ["frozen"]

_T = TypeVar("_T")


def frozen(cls: type[_T]) -> type[_T]:
    """``dataclass(frozen=True)(cls)`` with a direct ``__init__`` (see the module). Fields
    must be plain: positional-or-keyword, no ``default_factory``, no ``init=False``, and the
    class no ``__post_init__`` (a ``TypeError`` names what is not)."""
    cls = dataclasses.dataclass(frozen=True)(cls)
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"@frozen {cls.__name__}: __post_init__ is not supported")
    params: list[str] = []
    defaults: dict[str, Any] = {}
    lines: list[str] = []
    for f in dataclasses.fields(cls):
        if not f.init or f.kw_only or f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"@frozen {cls.__name__}.{f.name}: only plain fields are supported")
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            defaults[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        lines.append(f"    fields[{f.name!r}] = {f.name}\n")
    source = (f"def __init__(self, {', '.join(params)}):\n    fields = self.__dict__\n"
              + ("".join(lines) or "    pass\n"))
    namespace: dict[str, Any] = dict(defaults)
    exec(source, namespace)  # noqa: S102 - generated from the dataclass's own field names
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    init.__annotations__ = dict(getattr(cls.__init__, "__annotations__", {}))
    cls.__init__ = init  # type: ignore[misc]
    return cls
