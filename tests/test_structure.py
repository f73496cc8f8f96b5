"""The shape of the ``wds_cloud`` package: no import cycle among its modules.

Read from the source with ``ast`` (nothing is imported). Every import of one module by another
counts, wherever it is: at the top, inside a function, or under ``if TYPE_CHECKING:`` (a lazy
import only hides a cycle from the interpreter; the two modules still need each other).
``from pkg import name`` imports ``pkg`` and, when ``pkg.name`` is a module, that module;
relative imports are resolved. The package root ``wds_cloud`` is left out: it re-exports the
public names lazily, by dotted path. (Names imported with ``importlib`` by dotted path, as the
opener registry does for its backends, are not imports here.)

No module reaches into another's private names either: no ``from wds_cloud.m import _name``,
and no ``x._name`` with ``x`` other than ``self``/``cls`` (a module, another object), except
the few uses in :data:`ALLOWED_PRIVATE`, each with why it is fine.
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


# -- private access across modules -------------------------------------------------------------

# (module under wds_cloud/ without .py, ``x._name`` as written) -> why it is fine
ALLOWED_PRIVATE: dict[tuple[str, str], str] = {
    ("openers/registry", "new._entries"): "OpenerRegistry.copy() fills the copy it just made",
    ("openers/registry", "new._extras"): "OpenerRegistry.copy() fills the copy it just made",
    ("openers/cache/shardcache", "self._cache._after_commit"): (
        "the cache's own writer, in the cache's module"
    ),
    ("index/format", "other._lines"): "ShardIndex.__eq__ compares with another ShardIndex",
    ("reexport", "sys._getframe"): (
        "the stdlib's frame access (documented; inspect.currentframe is the same function): "
        "the stacklevel of a moved-module warning"
    ),
    ("resume/tracked", "iterator._shutdown_workers"): (
        "torch's DataLoader keeps persistent workers in its private _iterator: "
        "shut_down_persistent_workers, the one small function that reads it, names the "
        "versions checked"
    ),
    ("resume/tracked", "loader._iterator"): "as above",
    ("observe/passes", "it._tasks_outstanding"): (
        "torch's DataLoader iterator keeps its prefetch queue private: the profiler's queue "
        "gauges read it (torch 2.x), only from the sampler thread, where a failing read counts 0 "
        "(Recorder._read_gauges), so a torch that renames it loses a trace counter, nothing else"
    ),
    ("observe/passes", "it._data_queue"): "as above",
    ("observe/passes", "it._task_info"): "as above",
    ("observe/profile", "sys._current_frames"): (
        "the stdlib's documented way to read another thread's stack (what faulthandler and "
        "sampling profilers use): the profiler's sampler, one call per look"
    ),
}


def _trees(root: Path = ROOT) -> dict[str, ast.Module]:
    """Module path under ``root`` without ``.py`` (``openers/s3/read``) -> its syntax tree."""
    return {
        p.relative_to(root).with_suffix("").as_posix(): ast.parse(p.read_text(), str(p))
        for p in sorted(root.rglob("*.py"))
    }


def private_uses(name: str, tree: ast.Module) -> list[str]:
    """``x._name`` with ``x`` not ``self``/``cls``, and ``from wds_cloud.m import _name`` (or a
    relative import), in module ``name`` whose source is ``tree``; the allowed ones left out."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            attr = node.attr
            if attr.startswith("_") and not attr.startswith("__"):
                base = node.value
                if not (isinstance(base, ast.Name) and base.id in ("self", "cls")):
                    text = ast.unparse(node)
                    if (name, text) not in ALLOWED_PRIVATE:
                        found.append(f"{name}.py:{node.lineno}: {text}")
        elif isinstance(node, ast.ImportFrom) and (
            node.level or (node.module or "").split(".")[0] == PACKAGE
        ):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    where = "." * node.level + (node.module or "")
                    found.append(f"{name}.py:{node.lineno}: imports {where}.{alias.name}")
    return found


def test_no_private_access_across_modules() -> None:
    found = [use for name, tree in _trees().items() for use in private_uses(name, tree)]
    assert not found, "private access across modules:\n" + "\n".join(found)


def test_allowed_private_uses_still_exist() -> None:
    seen = {
        (name, ast.unparse(n))
        for name, tree in _trees().items()
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute)
    }
    assert set(ALLOWED_PRIVATE) <= seen, set(ALLOWED_PRIVATE) - seen


def test_the_private_scan_sees_imports_attributes_and_modules() -> None:
    source = (
        "from wds_cloud.core import batching\n"
        "def f(opener):\n"
        "    from wds_cloud.core.stages import _map\n"
        "    from .state import _merge, __all__\n"
        "    from json import _private_elsewhere\n"
        "    return opener._extra(), self._ok, batching._batched, cls._fine\n"
    )
    assert sorted(private_uses("x", ast.parse(source))) == [
        "x.py:3: imports wds_cloud.core.stages._map",
        "x.py:4: imports .state._merge",
        "x.py:6: batching._batched",
        "x.py:6: opener._extra",
    ]
