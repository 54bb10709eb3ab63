"""The layers of ``python/epochlab`` (``docs/architecture.md``, "Layers"): no import cycle between
modules or between packages, no import from a lower layer to a higher one, and no private
name imported across packages.

The graph is read from the source with :mod:`ast`, so it counts what a runtime check would
miss: imports inside functions (a lazy import is still a dependency) and
``importlib.import_module`` with a literal name. Only imports under ``if TYPE_CHECKING:``
are left out: they never run. An edge ``a -> b`` means module ``a`` names module ``b`` (or a
name defined in it) in an import.

A module belongs to the *unit* of the longest prefix in :data:`LAYERS` that names it; every
command module (``epochlab.cli``, ``epochlab.__main__`` and each package's ``cli.py`` or
``*_cli.py``) belongs to the unit ``commands``, the top: a command may use any package, no
package may use a command. A unit may import its own modules and units of lower layers; two
units of the same layer are independent of each other.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIR = ROOT / "python" / "epochlab"

COMMANDS = "commands"

#: Lowest first. Each entry is one layer: the units in it may import the layers before it,
#: never the layers after it nor each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    # import nothing of epochlab: the compiled core, the errors, what a run is seen as, Spark
    ("epochlab._core", "epochlab.errors", "epochlab.observe", "epochlab.spark"),
    # the public API of the core (the package's __init__), the protocol generations
    ("epochlab", "epochlab.generations"),
    # the core's rules again in plain Python
    ("epochlab.reference",),
    # the simulator; the invariants over a run; step tables, timelines and run directories
    ("epochlab.sim", "epochlab.checks", "epochlab.report"),
    # the pieces of the files users write; the step vocabulary; the epochlab-trace format,
    # replay and recording
    ("epochlab.formats", "epochlab.steps", "epochlab.trace"),
    # Kafka's log directories read from disk
    ("epochlab.ondisk",),
    # scenario files and their runs on the simulator
    ("epochlab.scenarios",),
    # schedules: generated, run under the checker, shrunk; campaigns of them
    ("epochlab.fuzz",),
    # Spark campaigns over grids of configurations
    ("epochlab.campaigns",),
    # the four file formats by name; real Kafka's jars and JVM
    ("epochlab.schemas", "epochlab.kafka"),
    # Kafka's own classes in this process; a live Kafka cluster
    ("epochlab.kafka.classes", "epochlab.kafka.live"),
    # scenarios and schedules run on the live cluster, beside the model
    ("epochlab.kafka.runs",),
    # every command module
    (COMMANDS,),
)

#: Names that start with an underscore and may still be imported across packages: the
#: compiled core's module name, which the whole package uses.
PUBLIC_PRIVATE_NAMES = {"_core"}


# -- reading the graph ----------------------------------------------------------------------

def module_name(path: Path, package_dir: Path = PACKAGE_DIR) -> str:
    parts = path.relative_to(package_dir.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(importer: str, is_package: bool, level: int, module: str | None) -> str:
    """The absolute name a ``from`` import refers to (``level`` dots, PEP 328)."""
    if level == 0:
        return module or ""
    base = importer.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _nodes(tree: ast.AST, type_checking: bool) -> Iterable[ast.AST]:
    """Every node of ``tree``; without ``type_checking``, not those only ``if TYPE_CHECKING:``
    runs (its ``else`` branch runs, so it is kept)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if not type_checking and isinstance(node, ast.If) and _is_type_checking(node):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))


def imports(source: str, importer: str, is_package: bool,
            type_checking: bool = False) -> list[tuple[str, str, int]]:
    """``(module named, name imported from it or "", line)`` for every import that runs, and
    with ``type_checking`` those under ``if TYPE_CHECKING:`` too."""
    found: list[tuple[str, str, int]] = []
    for node in _nodes(ast.parse(source), type_checking):
        if isinstance(node, ast.Import):
            found.extend((alias.name, "", node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(importer, is_package, node.level, node.module)
            found.extend((base, alias.name, node.lineno) for alias in node.names)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.append((node.args[0].value, "", node.lineno))
    return found


def _target(name: str, name_in: str, modules: Iterable[str]) -> str | None:
    """The module an import of ``name_in`` from ``name`` depends on: the submodule when
    ``name_in`` is one (``from epochlab.sim import cluster``), else the longest known module
    that ``name`` is or is inside of."""
    known = set(modules)
    if name_in and f"{name}.{name_in}" in known:
        return f"{name}.{name_in}"
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


Edge = tuple[str, str, int, str]   # importer, imported module, line, name imported ("" for a module)


def read_sources(under: Path = PACKAGE_DIR) -> dict[str, tuple[str, bool]]:
    """``module -> (source, is a package's __init__)`` for every module in the folder ``under``
    (the whole package, or one of its subpackages)."""
    return {module_name(p): (p.read_text(encoding="utf-8"), p.name == "__init__.py")
            for p in sorted(under.rglob("*.py"))}


def edges(sources: Mapping[str, tuple[str, bool]], extra_modules: Iterable[str] = ("epochlab._core",),
          type_checking: bool = False) -> list[Edge]:
    """Every import between two modules of ``sources`` (and the compiled ``extra_modules``);
    ``type_checking``: :func:`imports`."""
    modules = [*sources, *extra_modules]
    out: list[Edge] = []
    for importer, (source, is_package) in sources.items():
        for name, name_in, line in imports(source, importer, is_package, type_checking):
            target = _target(name, name_in, modules)
            if target is not None and target != importer:
                out.append((importer, target, line, name_in))
    return out


# -- units and layers -----------------------------------------------------------------------

def is_command(module: str) -> bool:
    last = module.rpartition(".")[2]
    return module in ("epochlab.cli", "epochlab.__main__") or last == "cli" or last.endswith("_cli")


def unit(module: str, layers: tuple[tuple[str, ...], ...] = LAYERS) -> str:
    """The unit ``module`` belongs to: ``commands``, or the longest prefix in ``layers``."""
    if is_command(module):
        return COMMANDS
    names = [u for layer in layers for u in layer if u != COMMANDS]
    best = max((u for u in names if module == u or module.startswith(u + ".")), key=len, default=None)
    if best is None:
        raise AssertionError(f"{module} is in no layer of tests/test_layers.py: add its package to LAYERS")
    return best


def rank(layers: tuple[tuple[str, ...], ...] = LAYERS) -> dict[str, int]:
    return {u: i for i, layer in enumerate(layers) for u in layer}


def layer_violations(graph: list[Edge], layers: tuple[tuple[str, ...], ...] = LAYERS) -> list[str]:
    """An import from a unit to a unit of the same or a higher layer, one line per edge."""
    ranks = rank(layers)
    out = []
    for a, b, line, name in graph:
        ua, ub = unit(a, layers), unit(b, layers)
        if ua == ub or ranks[ub] < ranks[ua]:
            continue
        where = "a higher layer" if ranks[ub] > ranks[ua] else "a unit of its own layer"
        out.append(f"{a}:{line} imports {b}{'.' + name if name else ''}: {ua} -> {ub}, {where}")
    return out


def find_cycle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
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


def module_graph(graph: list[Edge]) -> dict[str, set[str]]:
    """Module -> the modules it imports. Importing ``p.x`` also runs ``p``'s ``__init__``; that
    implicit edge is left out, since the package is already in ``sys.modules`` by the time any
    of its modules runs and so cannot close a cycle."""
    out: dict[str, set[str]] = {}
    for a, b, _line, _name in graph:
        out.setdefault(a, set()).add(b)
        out.setdefault(b, set())
    return out


def unit_graph(graph: list[Edge], layers: tuple[tuple[str, ...], ...] = LAYERS) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a, b, _line, _name in graph:
        ua, ub = unit(a, layers), unit(b, layers)
        out.setdefault(ua, set())
        out.setdefault(ub, set())
        if ua != ub:
            out[ua].add(ub)
    return out


def describe_cycle(cycle: list[str], graph: list[Edge], key: Callable[[str], str] = lambda m: m) -> str:
    """The cycle, then for each of its edges the first import that makes it."""
    lines = [" -> ".join(cycle)]
    for a, b in zip(cycle, cycle[1:]):
        first = next(e for e in graph if key(e[0]) == a and key(e[1]) == b)
        lines.append(f"  {first[0]}:{first[2]} imports {first[1]}")
    return "\n".join(lines)


def private_imports(graph: list[Edge], packages: Iterable[str]) -> list[str]:
    """A name that starts with ``_`` (a module's or one defined in it) imported from outside
    the package that holds it. ``packages``: the modules that are a package's ``__init__``."""
    inits = set(packages)

    def package(module: str) -> str:
        return module if module in inits else module.rpartition(".")[0]

    out = []
    for a, b, line, name in graph:
        private = [n for n in (b.rpartition(".")[2], name)
                   if n.startswith("_") and not n.startswith("__") and n not in PUBLIC_PRIVATE_NAMES]
        if private and package(a) != package(b):
            out.append(f"{a}:{line} imports {b}{'.' + name if name else ''}: {private[0]} is private to "
                       f"{package(b)}")
    return out


# -- the checker on a synthetic package: it can fail -----------------------------------------

SYNTHETIC_LAYERS: tuple[tuple[str, ...], ...] = (("app.low",), ("app.mid", "app.side"), ("app.high",), (COMMANDS,))


def _synthetic(files: dict[str, str]) -> list[Edge]:
    return edges({name: (source, False) for name, source in files.items()}, extra_modules=())


def test_the_reader_sees_every_kind_of_import_but_type_checking_ones() -> None:
    src = ("from typing import TYPE_CHECKING\n"
           "from . import b\n"
           "if TYPE_CHECKING:\n    from epochlab.sim.c import C\nelse:\n    import epochlab.sim.f\n"
           "def f():\n    import epochlab.sim.d\n"
           "    import importlib; importlib.import_module('epochlab.sim.e')\n")
    names = {name for name, _in, _line in imports(src, "epochlab.sim.a", False)}
    assert {"epochlab.sim", "epochlab.sim.d", "epochlab.sim.e", "epochlab.sim.f"} <= names
    assert "epochlab.sim.c" not in names
    graph = edges({"epochlab.sim.a": (src, False), "epochlab.sim.b": ("", False), "epochlab.sim.c": ("", False),
                   "epochlab.sim.d": ("", False), "epochlab.sim.e": ("", False), "epochlab.sim.f": ("", False)},
                  extra_modules=())
    assert {b for _a, b, _l, _n in graph} == {"epochlab.sim.b", "epochlab.sim.d", "epochlab.sim.e", "epochlab.sim.f"}


def test_the_checker_finds_an_upward_import_a_sibling_import_and_cycles() -> None:
    graph = _synthetic({
        "app.low.a": "def f():\n    from app.high.z import Z\n",     # lazy, still upward
        "app.mid.b": "from app.low.a import f\nfrom app.side.s import S\n",  # sideways
        "app.side.s": "",
        "app.high.z": "from app.mid.b import *\n",
        "app.high.cli": "from app.high.z import Z\nfrom app.low.a import _hidden\n",
    })
    found = layer_violations(graph, SYNTHETIC_LAYERS)
    assert found == ["app.low.a:2 imports app.high.z.Z: app.low -> app.high, a higher layer",
                     "app.mid.b:2 imports app.side.s.S: app.mid -> app.side, a unit of its own layer"]
    cycle = find_cycle(module_graph(graph))
    assert cycle == ["app.high.z", "app.mid.b", "app.low.a", "app.high.z"]
    assert "app.low.a:2 imports app.high.z" in describe_cycle(cycle, graph)
    assert find_cycle(unit_graph(graph, SYNTHETIC_LAYERS)) == ["app.high", "app.mid", "app.low", "app.high"]
    assert unit("app.high.cli", SYNTHETIC_LAYERS) == COMMANDS
    assert private_imports(graph, ()) == ["app.high.cli:2 imports app.low.a._hidden: _hidden is private to app.low"]
    inside = edges({"y.a": ("from y.b import _hidden\nfrom y import _core\n", False), "y.b": ("", False),
                    "y": ("", True)}, extra_modules=())
    assert private_imports(inside, ["y"]) == []


def test_the_checker_passes_a_layered_package() -> None:
    graph = _synthetic({
        "app.low.a": "import os\n",
        "app.mid.b": "from app.low.a import f\n",
        "app.side.s": "from app.low import a\n",
        "app.high.z": "from app.mid.b import g\nfrom app.side.s import h\n",
        "app.high.cli": "from app.high.z import Z\nfrom app.low.a import f\n",
    })
    assert layer_violations(graph, SYNTHETIC_LAYERS) == []
    assert find_cycle(module_graph(graph)) is None
    assert find_cycle(unit_graph(graph, SYNTHETIC_LAYERS)) is None


# -- the package itself ----------------------------------------------------------------------

def _graph() -> list[Edge]:
    return edges(read_sources())


def test_the_graph_covers_the_package() -> None:
    graph = _graph()
    pairs = {(a, b) for a, b, _l, _n in graph}
    assert ("epochlab.sim.cluster", "epochlab.sim.broker") in pairs
    assert ("epochlab.scenarios.runner", "epochlab.report.rundir") in pairs   # inside a function
    assert ("epochlab", "epochlab._core") in pairs
    assert {unit(m) for m in read_sources()} == {u for layer in LAYERS for u in layer} - {"epochlab._core"}


def test_every_module_is_in_a_layer_and_imports_only_downwards() -> None:
    found = layer_violations(_graph())
    assert not found, "imports against the layers (tests/test_layers.py, LAYERS):\n" + "\n".join(found)


def test_no_import_cycle_between_modules() -> None:
    graph = _graph()
    cycle = find_cycle(module_graph(graph))
    assert cycle is None, "import cycle between modules:\n" + describe_cycle(cycle, graph)


def test_no_import_cycle_between_packages() -> None:
    graph = _graph()
    cycle = find_cycle(unit_graph(graph))
    assert cycle is None, "import cycle between packages:\n" + describe_cycle(cycle, graph, unit)


def test_no_private_name_is_imported_across_packages() -> None:
    found = private_imports(_graph(), [m for m, (_src, is_init) in read_sources().items() if is_init])
    assert not found, "private names imported across packages:\n" + "\n".join(found)
