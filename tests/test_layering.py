"""The one-way house (issue 20): every module imports only downward, and no import cycle.

Floors, lowest first (a module may import its own package and any lower floor):

0. ``commscope.resources`` (data folders), ``commscope.model`` (the analytical model, pure);
1. ``commscope.parsers`` and ``commscope.synthetic`` (siblings: neither imports the other);
2. ``commscope.pipeline`` (store, catalog, ingest, derive, config);
3. ``commscope.reports`` (reads the store: only ``pipeline.store``, ``pipeline.sql_modules``,
   ``pipeline.sql_names`` and ``pipeline.model_inputs`` (what derive publishes beside the marts);
   no derive, no ingest);
4. the application: ``commscope.pipeline.commands``, ``.cli``, ``.flows`` and ``.cycle`` (the
   watch cycle the flows and ``serve --once`` run);
5. ``commscope`` itself, ``commscope.api`` and ``commscope.__main__``.

Imports are read from the source (module level and inside functions); those under
``if TYPE_CHECKING:`` are type annotations only and are not counted. The folders are mapped to
``commscope.*`` names by ``pyproject.toml``'s ``[tool.setuptools.package-dir]``.
"""

from __future__ import annotations

import ast
import functools
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FLOORS: dict[str, tuple[int, str]] = {
    "commscope.resources": (0, "resources"),
    "commscope.model": (0, "model"),
    "commscope.parsers": (1, "parsers"),
    "commscope.synthetic": (1, "synthetic"),
    "commscope.pipeline": (2, "pipeline"),
    "commscope.reports": (3, "reports"),
    "commscope.pipeline.commands": (4, "app"),
    "commscope.pipeline.cli": (4, "app"),
    "commscope.pipeline.flows": (4, "app"),
    "commscope.pipeline.cycle": (4, "app"),
    "commscope": (5, "api"),
    "commscope.api": (5, "api"),
    "commscope.__main__": (5, "api"),
}
"""Module prefix -> (floor, group); the longest prefix places a module. Modules of one group
may import each other (without a cycle); groups on one floor may not."""
REPORTS_READ = frozenset(
    {
        "commscope.pipeline.store",
        "commscope.pipeline.sql_modules",
        "commscope.pipeline.sql_names",
        "commscope.pipeline.model_inputs",
    }
)
DATA_PACKAGES = frozenset({"commscope.sql", "commscope.configs", "commscope.sample_traces"})


def package_dirs() -> dict[str, Path]:
    """``commscope.*`` package name -> source folder, from pyproject.toml."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mapping = cfg["tool"]["setuptools"]["package-dir"]
    return {name: ROOT / folder for name, folder in mapping.items() if name not in DATA_PACKAGES}


@functools.cache
def modules() -> dict[str, Path]:
    """Every Python module of the package, by its ``commscope.*`` name."""
    out: dict[str, Path] = {}
    for name, folder in package_dirs().items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join((name, *parts))] = path
    return out


def _runtime_imports(tree: ast.AST) -> list[tuple[str, list[str]]]:
    """(module, imported names) of every import not under ``if TYPE_CHECKING:``."""
    found: list[tuple[str, list[str]]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((a.name, []) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, [a.name for a in node.names]))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


@functools.cache
def _imports_of(path: Path) -> tuple[tuple[str, list[str]], ...]:
    """:func:`_runtime_imports` of one source file (parsed once per session)."""
    return tuple(_runtime_imports(ast.parse(path.read_text(), str(path))))


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports at run time (read once per session; treat as
    read-only)."""
    mods = modules()

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        for module, names in _imports_of(path):
            targets = [f"{module}.{n}" for n in names] or [module]
            for t in targets:
                r = resolve(t) if t.startswith("commscope") else None
                if r is not None and r != mod:
                    graph[mod].add(r)
    return graph


def floor_of(module: str) -> tuple[int, str]:
    """(floor, group) of a module."""
    key = max((k for k in FLOORS if module == k or module.startswith(k + ".")), key=len)
    return FLOORS[key]


def violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import that goes up a floor, across siblings, or from reports beyond reading."""
    out = []
    for a, targets in graph.items():
        fa, ka = floor_of(a)
        for b in sorted(targets):
            fb, kb = floor_of(b)
            if fb > fa or (fb == fa and ka != kb):
                out.append(f"{a} (floor {fa}, {ka}) imports {b} (floor {fb}, {kb})")
            elif ka == "reports" and kb == "pipeline" and b not in REPORTS_READ:
                out.append(f"{a} imports {b}: reports only read the store")
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_module_has_a_floor() -> None:
    mods = modules()
    assert "commscope.pipeline.store" in mods and "commscope.model.equations" in mods
    assert all(floor_of(m) for m in mods)


def test_no_upward_or_sideways_import() -> None:
    assert violations(import_graph()) == []


def test_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_no_generic_top_level_import() -> None:
    """Nothing imports the folders by their old top-level names (pipeline, parsers, reports):
    installed, only ``commscope`` exists."""
    bad = []
    for mod, path in modules().items():
        for module, _ in _imports_of(path):
            if module.split(".")[0] in {"pipeline", "parsers", "reports", "model", "synthetic"}:
                bad.append(f"{mod}: import {module}")
    assert bad == []


@pytest.mark.parametrize(
    ("graph", "expect"),
    [
        ({"commscope.model.x": {"commscope.pipeline.store"}}, 1),  # up
        ({"commscope.parsers.x": {"commscope.synthetic.y"}}, 1),  # sideways
        ({"commscope.reports.data": {"commscope.pipeline.derive"}}, 1),  # reports derive
        ({"commscope.reports.data": {"commscope.pipeline.store"}}, 0),  # reports read
        ({"commscope.pipeline.cli": {"commscope.reports.html"}}, 0),  # app -> reports
    ],
)
def test_the_rules_catch_what_they_should(graph: dict[str, set[str]], expect: int) -> None:
    assert len(violations(graph)) == expect


def test_cycles_are_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_store_calls_the_catalog_and_the_api_no_command() -> None:
    """The store's commits and its DuckDB catalog are two modules, and the catalog imports
    nothing from the store module (the store calls it; shared errors and folder names live in
    ``pipeline.store_base``); the Python API uses the library, never a command module."""
    graph = import_graph()
    assert "commscope.pipeline.catalog" in graph["commscope.pipeline.store"]
    assert "commscope.pipeline.store" not in graph["commscope.pipeline.catalog"]
    api = graph["commscope.api"] | graph["commscope"]
    assert not {m for m in api if m.startswith("commscope.pipeline.commands")}
