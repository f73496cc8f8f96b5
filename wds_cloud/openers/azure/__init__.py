"""Azure Blob Storage through azure-storage-blob: ``az://container/blob`` (also ``azure://``,
``abfs://``, ``abfss://``).

Modules: ``opener`` (the opener and its public names, re-exported here and imported on first
use, so importing a sibling module never imports the SDK), ``config`` (settings and URLs),
``auth`` (account, endpoint and credential), ``errors``, ``read``, ``prefetch``, ``write``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wds_cloud.reexport import lazy_exports

if TYPE_CHECKING:
    from wds_cloud.openers.azure.opener import (
        SCHEMES as SCHEMES,
        AzureConfig as AzureConfig,
        AzureOpener as AzureOpener,
        translate_error as translate_error,
    )

__all__ = [
    "SCHEMES",
    "AzureConfig",
    "AzureOpener",
    "translate_error",
]

if not TYPE_CHECKING:
    __getattr__ = lazy_exports(__name__, "opener", __all__)
