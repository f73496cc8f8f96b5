"""Hugging Face Hub repos: ``hf://`` URLs, read over the HTTP backend.

Modules: ``opener`` (the opener and its public names, re-exported here and imported on first
use), ``urls`` (what an ``hf://`` URL names, and the Hub URLs), ``config``, ``errors``,
``listing`` (the tree API)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wds_cloud.reexport import lazy_exports

if TYPE_CHECKING:
    from wds_cloud.openers.hf.opener import (
        SCHEMES as SCHEMES,
        HfConfig as HfConfig,
        HfOpener as HfOpener,
    )

__all__ = [
    "SCHEMES",
    "HfConfig",
    "HfOpener",
]

if not TYPE_CHECKING:
    __getattr__ = lazy_exports(__name__, "opener", __all__)
