"""AIStore through the aistore SDK: ``ais://bucket/key`` (and the other providers' buckets).

Modules: ``opener`` (the opener and its public names, re-exported here and imported on first
use, so importing a sibling module never imports the SDK), ``config``, ``errors``, ``read``,
``prefetch``, ``write``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wds_cloud.reexport import lazy_exports

if TYPE_CHECKING:
    from wds_cloud.openers.ais.opener import (
        DEFAULT_ENDPOINT as DEFAULT_ENDPOINT,
        PROVIDERS as PROVIDERS,
        SCHEMES as SCHEMES,
        AisConfig as AisConfig,
        AisOpener as AisOpener,
        AisTarget as AisTarget,
    )

__all__ = [
    "DEFAULT_ENDPOINT",
    "PROVIDERS",
    "SCHEMES",
    "AisConfig",
    "AisOpener",
    "AisTarget",
]

if not TYPE_CHECKING:
    __getattr__ = lazy_exports(__name__, "opener", __all__)
