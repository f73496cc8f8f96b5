"""``make_loader(..., autotune=...)``: tune for a bounded time, then build the loader with the
chosen setting; the arguments the caller gave win over tuned ones."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from wds_cloud.errors import ConfigError
from wds_cloud.tools.tune.plan import run

__all__ = ["DEFAULT_SECONDS", "autotuned_loader"]

log = logging.getLogger(__name__)

#: Tuning time of ``autotune=True``.
DEFAULT_SECONDS = 60.0
_OPTIONS = ("seconds", "memory_budget", "trial_seconds", "cores")


def _options(autotune: Any) -> dict[str, Any]:
    if autotune is True:
        return {"seconds": DEFAULT_SECONDS}
    if isinstance(autotune, int | float) and not isinstance(autotune, bool):
        return {"seconds": float(autotune)}
    if isinstance(autotune, Mapping):
        unknown = sorted(set(autotune) - set(_OPTIONS))
        if unknown:
            raise ConfigError(
                f"make_loader: unknown autotune options {unknown}; allowed: {list(_OPTIONS)}"
            )
        return {"seconds": DEFAULT_SECONDS, **autotune}
    raise ConfigError(
        "make_loader: autotune must be True, seconds (a number) or a dict of "
        f"{list(_OPTIONS)}, got {autotune!r}"
    )


def autotuned_loader(make_loader: Callable[..., Any], args: Mapping[str, Any]) -> Any:
    """The loader of ``make_loader(**args)`` with the tuned setting filled in.

    ``args`` are ``make_loader``'s own arguments (``autotune`` and ``webdataset_kw`` among
    them); those left at None (``num_workers``, ``prefetch_factor``, ``inner_batch``,
    ``shm_batches``), and ``registry`` / ``prefetch`` when not given, are tuned.
    """
    given = {k: v for k, v in args.items() if k not in ("autotune", "webdataset_kw")}
    given.update(args.get("webdataset_kw") or {})
    options = _options(args["autotune"])
    urls = given.pop("urls")
    batch_size = given.pop("batch_size")
    result = run(make_loader, urls, batch_size=batch_size, **options, **given)
    log.info("autotune:\n%s", result.table())
    return make_loader(
        urls,
        batch_size=batch_size,
        **{
            **result.kwargs(),
            **{k: v for k, v in given.items() if v is not None or k not in result.kwargs()},
        },
    )
