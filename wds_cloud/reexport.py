"""Names that live in one module and are reached through another: a package's lazy public
names, and the import paths that moved in the 0.2 layout (they still import, with a
:class:`DeprecationWarning` naming the new path).

:data:`MOVED` is the one table of moved paths; every old module is a two-line file that calls
:func:`moved` with its own name, and ``tests/test_layout.py`` checks each entry.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

# old import path -> new import path (the module itself moved, not only some names)
MOVED: dict[str, str] = {
    "wds_cloud.ais_transform": "wds_cloud.aistore.transform",
    "wds_cloud.bench": "wds_cloud.tools.bench",
    "wds_cloud.demo": "wds_cloud.cli.demo",
    "wds_cloud.dsort": "wds_cloud.aistore.dsort",
    "wds_cloud.dsort.validate": "wds_cloud.aistore.dsort.validate",
    "wds_cloud.openers.backoff": "wds_cloud.openers.streams.backoff",
    "wds_cloud.openers.cache_lru": "wds_cloud.openers.cache.lru",
    "wds_cloud.openers.filecache": "wds_cloud.core.filecache",
    "wds_cloud.openers.prefetch": "wds_cloud.openers.streams.prefetch",
    "wds_cloud.openers.rangefile": "wds_cloud.openers.streams.rangefile",
    "wds_cloud.openers.readahead": "wds_cloud.openers.streams.readahead",
    "wds_cloud.openers.resume": "wds_cloud.openers.streams.resumable",
    "wds_cloud.openers.stream": "wds_cloud.openers.streams.stream",
    "wds_cloud.openers.writer": "wds_cloud.openers.streams.writer",
    "wds_cloud.preview": "wds_cloud.tools.preview",
}


def _caller_level() -> int:
    """The ``stacklevel`` that points past the import machinery at the importing code."""
    level = 1
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        machinery = name.startswith("<frozen importlib") or name in (__file__, "<string>")
        if not machinery and frame.f_globals.get("__name__") not in MOVED:
            return level
        frame = frame.f_back
        level += 1
    return level


def moved(old: str) -> Callable[[str], Any]:
    """Warn that ``old`` moved and return a module ``__getattr__`` reading the new module.

    Args:
        old: the deprecated module's own ``__name__`` (a key of :data:`MOVED`).
    """
    new = MOVED[old]
    warnings.warn(
        f"{old} moved to {new}; import it from there ({old} will be removed)",
        DeprecationWarning,
        stacklevel=_caller_level(),
    )
    target = importlib.import_module(new)

    def __getattr__(name: str) -> Any:
        return getattr(target, name)

    return __getattr__


def lazy_exports(package: str, module: str, names: Iterable[str]) -> Callable[[str], Any]:
    """A package ``__getattr__`` that imports ``package.module`` when one of ``names`` is first
    read, so importing a sibling submodule (a config, an error table) never imports the
    backend's SDK.
    """
    exported = frozenset(names)

    def __getattr__(name: str) -> Any:
        if name not in exported:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return __getattr__
