"""HTTP(S) over http.client: ``http://`` and ``https://`` URLs.

Modules: ``opener`` (the opener and its public names, re-exported here and imported on first
use, so importing a sibling module never imports the SDK), ``config``, ``errors``, ``read``,
``prefetch``, ``conn`` (connections), ``redirects`` (following them: origins, credentials)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wds_cloud.reexport import lazy_exports

if TYPE_CHECKING:
    from wds_cloud.openers.http.opener import (
        OPEN_OPTIONS as OPEN_OPTIONS,
        SCHEMES as SCHEMES,
        HttpConfig as HttpConfig,
        HttpOpener as HttpOpener,
    )

__all__ = [
    "OPEN_OPTIONS",
    "SCHEMES",
    "HttpConfig",
    "HttpOpener",
]

if not TYPE_CHECKING:
    __getattr__ = lazy_exports(__name__, "opener", __all__)
