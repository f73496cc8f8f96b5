"""The shape of ``wds_cloud/openers``: no import cycles, no private access across modules.

Both rules are read from the source with ``ast`` (nothing is imported). Every import of one
openers module by another counts, wherever it is: at the top, inside a function, or under
``if TYPE_CHECKING:`` (a typing-only import of the opener from its reader is still the reader
knowing its opener; pass what it needs instead).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import wds_cloud.openers

PACKAGE = "wds_cloud.openers"
ROOT = Path(wds_cloud.openers.__file__).parent

# ``x._name`` where ``x`` is not ``self``/``cls``, each with why it is fine.
ALLOWED_PRIVATE = {
    ("registry", "new._entries"): "OpenerRegistry.copy() fills the copy it just made",
    ("registry", "new._extras"): "OpenerRegistry.copy() fills the copy it just made",
    ("cache", "self._cache._after_commit"): "the cache's own writer, in the cache's module",
}


def _modules() -> dict[str, ast.Module]:
    return {p.stem: ast.parse(p.read_text(), str(p)) for p in sorted(ROOT.glob("*.py"))}


def _imported(tree: ast.Module, names: set[str]) -> set[str]:
    """The openers modules ``tree`` imports (any form, any place)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith(PACKAGE + "."):
                found.add(node.module.split(".")[2])
            elif node.module == PACKAGE:
                found.update(a.name for a in node.names if a.name in names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + "."):
                    found.add(alias.name.split(".")[2])
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the openers modules it imports (``__init__`` left out: it only re-exports)."""
    trees = _modules()
    names = set(trees)
    return {
        name: _imported(tree, names) - {name, "__init__"}
        for name, tree in trees.items()
        if name != "__init__"
    }


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


def private_uses(name: str, tree: ast.Module) -> list[str]:
    """``x._name`` with ``x`` not ``self``/``cls``, and ``from openers.m import _name``."""
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
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{name}.py:{node.lineno}: imports {node.module}.{alias.name}")
    return found


def test_no_import_cycle_among_openers_modules() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_private_access_across_openers_modules() -> None:
    found = [use for name, tree in _modules().items() for use in private_uses(name, tree)]
    assert not found, "private access across modules:\n" + "\n".join(found)


def test_allowlist_entries_still_exist() -> None:
    trees = _modules()
    seen = {
        (name, ast.unparse(n))
        for name, tree in trees.items()
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute)
    }
    assert set(ALLOWED_PRIVATE) <= seen, set(ALLOWED_PRIVATE) - seen


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


def test_the_scans_see_typing_only_and_local_imports_and_private_calls() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from wds_cloud.openers.s3 import S3Opener\n"
        "def f(opener):\n"
        "    from wds_cloud.openers.gcs_read import _hidden\n"
        "    return opener._extra(), self._ok\n"
    )
    tree = ast.parse(source)
    assert _imported(tree, set()) == {"s3", "gcs_read"}
    assert private_uses("x", tree) == [
        "x.py:5: imports wds_cloud.openers.gcs_read._hidden",
        "x.py:6: opener._extra",
    ]


def test_every_network_backend_has_an_errors_module_with_one_signature() -> None:
    """``translate_error(exc, /, *, url, offset=None, ...)``: further keywords have defaults."""
    import inspect

    from wds_cloud.openers import ais_errors, gcs_errors, s3_errors

    for module in (s3_errors, gcs_errors, ais_errors):
        params = list(inspect.signature(module.translate_error).parameters.values())
        assert [p.name for p in params[:3]] == ["exc", "url", "offset"], module.__name__
        assert params[0].kind is inspect.Parameter.POSITIONAL_ONLY
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[1:])
        assert params[1].default is inspect.Parameter.empty
        assert all(p.default is not inspect.Parameter.empty for p in params[2:])
