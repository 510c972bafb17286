"""The layers of the code: no import cycle between files or packages, and packages import only
the ones below them.

The order (lowest first) follows the flow of a window through the pipeline:

- ``solvers``: the queueing models (numpy/scipy); ``estimators``: demands, dispersion, MAP
  fits from measurements, which use the solvers' processes;
- ``streams.core``: the window record, the configuration (with the ``[input]`` table's
  parsing), plausibility, a tier's history and estimates -- what every other layer reads;
- ``streams.predict``: the model of a system from its tiers' estimates and the questions put
  to it; ``streams.alerts``: when a prediction becomes an alert (hysteresis);
- ``streams.sources``: windows from Prometheus and from agents' metric formats;
- ``streams.engine``: the per-system state and the pipeline that drive all of the above;
- ``streams.sinks``: the output records' schema, InfluxDB, the store, the report;
- the shells on top: ``streams.grafana``, ``streams.kafka``, ``streams.cli``.

Every ``import`` and ``from ... import`` statement counts, wherever it stands: at the top, in a
function (a deferred import is still a dependency: it runs the first time the function does),
under ``if TYPE_CHECKING:`` (a type checker follows it, and a cycle there is the same cycle one
refactoring away from run time) or in a ``try``. ``from package import name`` is an edge to
the module ``package.name`` when that is a module, else to ``package``. The implicit import of
a module's parent packages is not counted: the packages' ``__init__`` files hold docstrings
(``streams/__init__.py`` also sets the BLAS thread variables) and are parsed like any module.
Only modules of this repository (``solvers``, ``estimators``, ``streams``) are edges.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: the top-level packages whose modules are checked
PACKAGES = ("solvers", "estimators", "streams")

#: the layers, lowest first: a package imports only packages before it (module docstring)
LAYERS = ("solvers", "estimators", "streams.core", "streams.predict", "streams.alerts",
          "streams.sources", "streams.engine", "streams.sinks", "streams.grafana",
          "streams.kafka", "streams.cli")


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` at ``path:line``."""

    source: str
    target: str
    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} ({self.path}:{self.line})"


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of :data:`PACKAGES` by dotted name (a package by its own name)."""
    out = {}
    for top in PACKAGES:
        for path in sorted((root / top).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _target(name: str, known: dict[str, Path]) -> str | None:
    """The module of ``known`` that ``name`` (a module, or an attribute of one) is in."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def from_module(name: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The dotted module a ``from ... import`` statement of module ``name`` reads (a relative
    one resolved against ``name``'s package)."""
    if not node.level:
        return node.module or ""
    base = name.split(".") if is_package else name.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_edges(known: dict[str, Path], root: Path = ROOT) -> list[Edge]:
    """The edges of every import statement of every module in ``known`` (module docstring)."""
    edges = []
    for name, path in known.items():
        is_package = path.name == "__init__.py"
        rel = str(path.relative_to(root))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), rel)):
            if isinstance(node, ast.Import):
                targets = [_target(a.name, known) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                module = from_module(name, is_package, node)
                targets = [_target(f"{module}.{a.name}", known)
                           if f"{module}.{a.name}" in known else _target(module, known)
                           for a in node.names]
            else:
                continue
            for target in dict.fromkeys(targets):
                if target is not None and target != name:
                    edges.append(Edge(name, target, rel, node.lineno))
    return edges


def package_of(module: str) -> str:
    """``streams.<sub>`` for a module of a subpackage of ``streams``, else the top package."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "streams" and len(parts) > 1 else parts[0]


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` as ``[a, b, ..., a]`` (depth-first, nodes in sorted order), or
    ``None``."""
    state: dict[str, int] = {}                      # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def _where(edges: list[Edge], cycle: list[str], unit=lambda m: m) -> str:
    """Each step of ``cycle`` with the first import statement that makes it."""
    lines = []
    for a, b in zip(cycle, cycle[1:]):
        e = min((e for e in edges if unit(e.source) == a and unit(e.target) == b),
                key=lambda e: (e.path, e.line))
        lines.append(f"  {e}" if (a, b) == (e.source, e.target) else f"  {a} -> {b}: {e}")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def edges() -> list[Edge]:
    return import_edges(modules())


def test_the_graph_holds_deferred_imports(edges):
    """The parser sees a function-local import (cli/commands.py imports the Kafka shell inside
    its commands) and resolves ``from package import module`` to the module."""
    found = {(e.source, e.target) for e in edges}
    assert ("streams.cli.commands", "streams.kafka.worker") in found
    assert ("streams.engine.system", "streams.predict.confidence") in found
    assert len(edges) > 100


def test_find_cycle_reports_the_path():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "d": {"a", "c"}}) is None


def test_no_import_cycle_between_files(edges):
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.source, set()).add(e.target)
    cycle = find_cycle(graph)
    assert cycle is None, (f"import cycle between files: {' -> '.join(cycle)}\n"
                           + _where(edges, cycle))


def test_no_import_cycle_between_packages(edges):
    graph: dict[str, set[str]] = {}
    for e in edges:
        a, b = package_of(e.source), package_of(e.target)
        if a != b:
            graph.setdefault(a, set()).add(b)
    cycle = find_cycle(graph)
    assert cycle is None, (f"import cycle between packages: {' -> '.join(cycle)}\n"
                           + _where(edges, cycle, package_of))


def test_every_package_has_a_layer():
    units = {package_of(m) for m in modules()} - {"streams"}
    assert sorted(units - set(LAYERS)) == [], "add the new package to LAYERS"


def test_packages_import_only_downward(edges):
    rank = {p: i for i, p in enumerate(LAYERS)}
    upward = [e for e in edges
              if package_of(e.source) != package_of(e.target)
              and rank.get(package_of(e.target), len(LAYERS))
              >= rank.get(package_of(e.source), -1)]
    assert not upward, ("imports against the layers (" + " < ".join(LAYERS) + "):\n"
                        + "\n".join(f"  {e}" for e in sorted(upward, key=str)))


def private_imports(known: dict[str, Path], root: Path = ROOT) -> list[str]:
    """Every ``from module import _name`` in a module of ``known`` whose ``module`` is another
    one: a name another module needs is part of its owner's interface, so it gets a public name
    and a docstring (a module's underscore names are its own to change)."""
    found = []
    for name, path in known.items():
        is_package = path.name == "__init__.py"
        rel = str(path.relative_to(root))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), rel)):
            if not isinstance(node, ast.ImportFrom):
                continue
            module = from_module(name, is_package, node)
            found += [f"{rel}:{node.lineno}: {a.name} from {module}" for a in node.names
                      if a.name.startswith("_") and module != name]
    return found


def test_the_private_import_scan_finds_both_forms(tmp_path: Path):
    pkg = tmp_path / "solvers"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("_own = 1\nfrom solvers.a import _own as again\n")
    (pkg / "b.py").write_text("from solvers.a import (\n    PUBLIC,\n    _own,\n)\n")
    (pkg / "c.py").write_text("from .a import _own\nfrom __future__ import annotations\n")
    known = {"solvers": pkg / "__init__.py", "solvers.a": pkg / "a.py",
             "solvers.b": pkg / "b.py", "solvers.c": pkg / "c.py"}
    assert private_imports(known, tmp_path) == ["solvers/b.py:1: _own from solvers.a",
                                                "solvers/c.py:1: _own from solvers.a"]


def test_no_module_imports_another_modules_private_name():
    found = private_imports(modules())
    assert not found, ("underscore names imported from another module (make them public in "
                       "their owner):\n" + "\n".join(f"  {f}" for f in found))
