"""Google Cloud Storage through google-cloud-storage: ``gs://bucket/key``.

Modules: ``opener`` (the opener and its public names, re-exported here and imported on first
use, so importing a sibling module never imports the SDK), ``config``, ``errors``, ``read``,
``prefetch``, ``write``, ``retry``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wds_cloud.reexport import lazy_exports

if TYPE_CHECKING:
    from wds_cloud.openers.gcs.opener import (
        SCHEMES as SCHEMES,
        GcsConfig as GcsConfig,
        GcsOpener as GcsOpener,
        translate_error as translate_error,
    )

__all__ = [
    "SCHEMES",
    "GcsConfig",
    "GcsOpener",
    "translate_error",
]

if not TYPE_CHECKING:
    __getattr__ = lazy_exports(__name__, "opener", __all__)
