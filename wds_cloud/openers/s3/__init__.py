"""Amazon S3 and S3-compatible servers through boto3: ``s3://bucket/key``.

Modules: ``opener`` (the opener and its public names, re-exported here and imported on first
use, so importing a sibling module never imports the SDK), ``config``, ``errors``, ``read``,
``prefetch``, ``write``, ``uploads`` (multipart)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wds_cloud.reexport import lazy_exports

if TYPE_CHECKING:
    from wds_cloud.openers.s3.opener import (
        MIN_PART_SIZE as MIN_PART_SIZE,
        SCHEMES as SCHEMES,
        S3Config as S3Config,
        S3Opener as S3Opener,
        split_s3_url as split_s3_url,
        translate_error as translate_error,
    )

__all__ = [
    "MIN_PART_SIZE",
    "SCHEMES",
    "S3Config",
    "S3Opener",
    "split_s3_url",
    "translate_error",
]

if not TYPE_CHECKING:
    __getattr__ = lazy_exports(__name__, "opener", __all__)
