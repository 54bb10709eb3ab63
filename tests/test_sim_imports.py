"""The import graph of ``epochlab.sim`` is acyclic: components see a small
:class:`~epochlab.sim.context.SimContext`, and only the :class:`~epochlab.sim.cluster.Cluster`
facade knows them all.

The graph is read from the source by ``tests/test_layers.py``'s reader, here with the imports
under ``if TYPE_CHECKING:`` too (inside ``sim`` even an annotation must not name a component
from another), so it includes what a runtime check would miss: those, imports inside
functions, and ``importlib.import_module("epochlab.sim....")`` with a literal name. An edge
``a -> b`` means module ``a`` names module ``b`` in an import. Importing ``epochlab.sim.x`` also
runs the package's ``__init__`` first; that implicit edge is left out, since the package is
already in ``sys.modules`` by the time any of its modules runs and so cannot close a cycle.
"""

from __future__ import annotations

from test_layers import PACKAGE_DIR, edges, find_cycle, imports, module_graph, read_sources

PACKAGE = "epochlab.sim"


def import_graph() -> dict[str, set[str]]:
    """``module -> the epochlab.sim modules it imports`` for every module of the package."""
    sources = read_sources(PACKAGE_DIR / "sim")
    graph = module_graph(edges(sources, extra_modules=(), type_checking=True))
    return {m: graph.get(m, set()) for m in sources}


def _on_cycles(graph: dict[str, set[str]]) -> list[str]:
    """The modules that lie on some cycle (their transitive imports lead back to them)."""
    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo.extend(graph[m])
        return seen

    return sorted(m for m in graph if m in reach(m))


def test_the_graph_sees_every_kind_of_import() -> None:
    src = ("from typing import TYPE_CHECKING\n"
           "from . import b\n"
           "if TYPE_CHECKING:\n    from epochlab.sim.c import C\n"
           "def f():\n    import epochlab.sim.d\n"
           "    import importlib; importlib.import_module('epochlab.sim.e')\n")
    names = {f"{name}.{name_in}" if name_in else name
             for name, name_in, _line in imports(src, "epochlab.sim.a", False, type_checking=True)}
    assert {"epochlab.sim.b", "epochlab.sim.c.C", "epochlab.sim.d", "epochlab.sim.e"} <= names
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_graph_covers_the_package() -> None:
    graph = import_graph()
    assert f"{PACKAGE}.cluster" in graph[PACKAGE]
    assert f"{PACKAGE}.broker" in graph[f"{PACKAGE}.cluster"]
    assert f"{PACKAGE}.kernel" in graph[f"{PACKAGE}.network"]


def test_sim_import_graph_is_acyclic() -> None:
    graph = import_graph()
    cycle = find_cycle(graph)
    assert cycle is None, (
        "import cycle in epochlab.sim: " + " -> ".join(cycle)
        + "\nmodules on a cycle: " + ", ".join(_on_cycles(graph)))
