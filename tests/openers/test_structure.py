"""The shape of ``wds_cloud/openers``: no private access across modules.

Read from the source with ``ast`` (nothing is imported). A reader or writer gets what it needs
from its opener as arguments, never by reaching into it. The rule against import cycles (every
import counts: a typing-only import of the opener from its reader is still the reader knowing
its opener) covers the whole package: ``tests/test_structure.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import wds_cloud.openers

PACKAGE = "wds_cloud.openers"
ROOT = Path(wds_cloud.openers.__file__).parent

# ``x._name`` where ``x`` is not ``self``/``cls``, each with why it is fine.
ALLOWED_PRIVATE = {
    ("registry", "new._entries"): "OpenerRegistry.copy() fills the copy it just made",
    ("registry", "new._extras"): "OpenerRegistry.copy() fills the copy it just made",
    (
        "cache/shardcache",
        "self._cache._after_commit",
    ): "the cache's own writer, in the cache's module",
}


def _modules() -> dict[str, ast.Module]:
    """Module path under ``openers/`` without ``.py`` (``s3/read``) -> its syntax tree."""
    return {
        p.relative_to(ROOT).with_suffix("").as_posix(): ast.parse(p.read_text(), str(p))
        for p in sorted(ROOT.rglob("*.py"))
    }


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


def test_the_scan_sees_private_imports_and_calls() -> None:
    source = (
        "def f(opener):\n"
        "    from wds_cloud.openers.gcs.read import _hidden\n"
        "    return opener._extra(), self._ok\n"
    )
    tree = ast.parse(source)
    assert private_uses("x", tree) == [
        "x.py:2: imports wds_cloud.openers.gcs.read._hidden",
        "x.py:3: opener._extra",
    ]


def test_every_network_backend_has_an_errors_module_with_one_signature() -> None:
    """``translate_error(exc, /, *, url, offset=None, ...)``: further keywords have defaults."""
    import inspect

    from wds_cloud.openers.ais import errors as ais_errors
    from wds_cloud.openers.gcs import errors as gcs_errors
    from wds_cloud.openers.s3 import errors as s3_errors

    for module in (s3_errors, gcs_errors, ais_errors):
        params = list(inspect.signature(module.translate_error).parameters.values())
        assert [p.name for p in params[:3]] == ["exc", "url", "offset"], module.__name__
        assert params[0].kind is inspect.Parameter.POSITIONAL_ONLY
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[1:])
        assert params[1].default is inspect.Parameter.empty
        assert all(p.default is not inspect.Parameter.empty for p in params[2:])
