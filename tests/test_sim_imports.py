"""The import graph of ``epochlab.sim`` is acyclic: components see a small
:class:`~epochlab.sim.context.SimContext`, and only the :class:`~epochlab.sim.cluster.Cluster`
facade knows them all.

The graph is read from the source with :mod:`ast`, so it includes what a runtime check would
miss: imports under ``if TYPE_CHECKING:``, imports inside functions, and
``importlib.import_module("epochlab.sim....")`` with a literal name. An edge ``a -> b`` means
module ``a`` names module ``b`` in an import. Importing ``epochlab.sim.x`` also runs the package's
``__init__`` first; that implicit edge is left out, since the package is already in
``sys.modules`` by the time any of its modules runs and so cannot close a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "epochlab.sim"
PACKAGE_DIR = ROOT / "python" / "epochlab" / "sim"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PACKAGE, *parts))


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}


def _resolve(importer: str, is_package: bool, level: int, module: str | None) -> str:
    """The absolute name a ``from`` import refers to (``level`` dots, PEP 328)."""
    if level == 0:
        return module or ""
    base = importer.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _imported_names(tree: ast.AST, importer: str, is_package: bool) -> set[str]:
    """Every module name the source mentions in an import, anywhere in the file."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(importer, is_package, node.level, node.module)
            names.add(base)
            # ``from epochlab.sim import kernel`` imports the submodule, not a name of __init__.
            names.update(f"{base}.{alias.name}" for alias in node.names)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            names.add(node.args[0].value)
    return names


def import_graph() -> dict[str, set[str]]:
    """``module -> the epochlab.sim modules it imports`` for every module of the package."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        found = _imported_names(tree, name, path.name == "__init__.py")
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path ``[a, b, ..., a]``, or ``None`` if the graph is acyclic
    (depth-first search in sorted order, so the answer is stable)."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)) is not None:
            return cycle
    return None


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
    names = _imported_names(ast.parse(src), "epochlab.sim.a", False)
    assert {"epochlab.sim.b", "epochlab.sim.c", "epochlab.sim.d", "epochlab.sim.e"} <= names
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
