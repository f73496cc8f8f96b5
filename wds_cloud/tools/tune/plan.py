"""From a ``make_loader`` call to a search: which axes apply (local or remote shards, how many,
what the caller fixed), how each trial's loader is built, and the run itself.

``make_loader`` is passed in (``build_with``), so this module and the search never import the
builder: ``make_loader(..., autotune=True)`` calls in here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from wds_cloud.errors import ConfigError
from wds_cloud.settings import parse_bytes
from wds_cloud.tools.tune.result import TuneResult
from wds_cloud.tools.tune.search import TUNED, search
from wds_cloud.tools.tune.space import Setting, Space

__all__ = ["parse_budget", "run"]

#: Caller's arguments the trials change: every trial reads an endless stream, its own way.
_TRIAL_ONLY = ("epoch_size", "resampled", "profile", "autotune")


def parse_budget(value: int | str | None, source: str = "memory_budget") -> int | None:
    """A memory budget in bytes: an int, or text such as ``8GB``, ``512MiB``, ``1.5G``
    (binary units); None stays None (the default budget)."""
    if value is None:
        return None
    n = parse_bytes(value, source) if isinstance(value, str) else value
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise ConfigError(f"{source} must be a positive byte size, got {value!r}")
    return n


def _shape(urls: Any, loader_kw: Mapping[str, Any]) -> tuple[int | None, bool, bool]:
    """Shards per epoch (None when resampled), whether they are remote, whether their opener
    has parallel ranged reads."""
    from wds_cloud.listing import resolve_shards
    from wds_cloud.openers.capabilities import is_remote
    from wds_cloud.openers.registry import default_registry

    registry = loader_kw.get("registry") or default_registry()
    shards = resolve_shards(urls, registry=registry)
    if not shards:
        raise ConfigError(f"tune: no shards in {urls!r}")
    opener = registry.for_url(shards[0])
    ranged = hasattr(getattr(opener, "config", None), "prefetch")
    return None if loader_kw.get("resampled") else len(shards), is_remote(opener), ranged


def run(
    build_with: Callable[..., Iterable[Any]],
    urls: Any,
    *,
    batch_size: int,
    seconds: float = 60.0,
    memory_budget: int | str | None = None,
    trial_seconds: float | None = None,
    cores: int | None = None,
    progress: Callable[[str], Any] | None = None,
    **loader_kw: Any,
) -> TuneResult:
    """Tune the loader ``build_with(urls, batch_size=..., **loader_kw)`` (``make_loader``).

    The arguments of :data:`~.search.TUNED` that ``loader_kw`` gives are kept as they are
    (not searched); ``epoch_size``, ``resampled`` and ``profile`` apply to the loader, not to
    the trials, which read an endless resampled stream.

    Raises:
        ConfigError: ``order="global"`` (streaming loaders only), a bad budget or time, no
            shards, or what :func:`~.search.search` raises.
    """
    if loader_kw.get("order", "stream") != "stream":
        raise ConfigError("tune: autotune is for streaming loaders (order='stream') only")
    if not seconds > 0:
        raise ConfigError(f"tune: seconds must be > 0, got {seconds!r}")
    budget = parse_budget(memory_budget)
    fixed = {k: v for k, v in loader_kw.items() if k in TUNED and v is not None}
    shards, remote, ranged = _shape(urls, loader_kw)
    space = Space.build(
        batch_size=batch_size,
        cores=cores,
        shards=shards,
        remote=remote,
        ranged=ranged,
        own_registry="registry" in fixed,
    )
    for name, value in fixed.items():
        if name != "registry":
            space = space.fix(name, value)
    base = {k: v for k, v in loader_kw.items() if k not in TUNED and k not in _TRIAL_ONLY}

    def build(setting: Setting, profile: bool) -> Iterable[Any]:
        kw = {**base, **setting.loader_kwargs(), **fixed, "shardshuffle": False}
        return build_with(urls, batch_size=batch_size, resampled=True, profile=profile, **kw)

    return search(
        build,
        urls,
        space,
        batch_size=batch_size,
        seconds=seconds,
        budget=budget,
        trial_seconds=trial_seconds,
        fixed={
            "batch_size": batch_size,
            **{
                k: v
                for k, v in loader_kw.items()
                if k not in ("autotune", "profile") and v is not None
            },
        },
        progress=progress,
    )
