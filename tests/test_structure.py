"""The shape of the ``wds_cloud`` package: no import cycle among its modules.

Read from the source with ``ast`` (nothing is imported). Every import of one module by another
counts, wherever it is: at the top, inside a function, or under ``if TYPE_CHECKING:`` (a lazy
import only hides a cycle from the interpreter; the two modules still need each other).
``from pkg import name`` imports ``pkg`` and, when ``pkg.name`` is a module, that module;
relative imports are resolved. The package root ``wds_cloud`` is left out: it re-exports the
public names lazily, by dotted path. (Names imported with ``importlib`` by dotted path, as the
opener registry does for its backends, are not imports here.) The openers' rule against
private access across modules is in ``tests/openers/test_structure.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import wds_cloud

PACKAGE = "wds_cloud"
ROOT = Path(wds_cloud.__file__).parent


def module_files(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> source file (a package is its ``__init__.py``)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported(tree: ast.Module, name: str, is_package: bool, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that module ``name`` (whose source is ``tree``) imports."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".")[: len(name.split(".")) - node.level + is_package]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return (found & modules) - {name}


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (the root package left out)."""
    files = module_files(root, package)
    names = set(files)
    graph = {
        name: imported(ast.parse(path.read_text(), str(path)), name, path.stem == "__init__", names)
        for name, path in files.items()
    }
    return {name: deps - {package} for name, deps in graph.items() if name != package}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or None (depth-first search, sorted order)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state and (found := visit(dep)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)) is not None:
            return found
    return None


def test_no_import_cycle_in_the_package() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_graph_holds_lazy_imports_of_the_real_tree() -> None:
    """The scan sees the package: a function-level import is an edge."""
    graph = import_graph()
    assert "wds_cloud.resume.loop" in graph["wds_cloud.core.pipeline"]  # in DataPipeline methods
    assert "wds_cloud.openers.registry" in graph["wds_cloud.resume.reader"]  # at the top
    assert "wds_cloud" not in set().union(*graph.values())


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
        ({"a": {"b"}, "b": {"a"}}, ["a", "b", "a"]),
        ({"a": {"b"}, "b": {"c"}, "c": {"b"}}, ["b", "c", "b"]),
        ({"a": {"a"}}, ["a", "a"]),
    ],
)
def test_find_cycle_finds_what_is_there(
    graph: dict[str, set[str]], expected: list[str] | None
) -> None:
    assert find_cycle(graph) == expected


def test_the_scan_sees_typing_only_local_relative_and_from_imports() -> None:
    modules = {"p", "p.a", "p.b", "p.c", "p.d", "p.sub", "p.sub.d", "p.sub.f", "q"}
    source = (
        "from typing import TYPE_CHECKING\n"
        "import os, p.a\n"
        "if TYPE_CHECKING:\n"
        "    from p.b import Thing\n"
        "def f():\n"
        "    from p import c, not_a_module\n"
        "    from . import d\n"
        "    from .sub.f import g\n"
        "    from ..q import h\n"
    )
    tree = ast.parse(source)
    assert imported(tree, "p.x", False, modules) == {
        "p",
        "p.a",
        "p.b",
        "p.c",
        "p.d",
        "p.sub.f",
        "q",
    }
    assert imported(tree, "p.sub", True, modules) == {"p", "p.a", "p.b", "p.c", "p.sub.d"}
