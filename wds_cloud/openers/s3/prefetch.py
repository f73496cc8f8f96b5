"""The S3 side of parallel ranged reads (``S3Config.prefetch = N``).

The object's size and ETag come from one ``HeadObject``; the parts are ranged ``GetObject``
requests pinned to that ETag with ``IfMatch`` (an object replaced mid-read gives a 412 and a
:class:`ShardReadError`), read in order by the backend-neutral
:class:`~wds_cloud.openers.streams.prefetch.PrefetchReader`. Memory is bounded by (N + 1) x
``prefetch_chunk``.

The opener passes what this module needs from it explicitly (an
:class:`~wds_cloud.openers.s3.config.S3Access`: the read client, the extra request arguments
such as ``RequestPayer``, its error translation), so nothing here reaches into the opener.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from wds_cloud.openers.s3.errors import read_errors, retryable, s3_request
from wds_cloud.openers.streams.backoff import RetryPolicy
from wds_cloud.openers.streams.prefetch import PrefetchReader
from wds_cloud.openers.streams.resumable import (
    Opened,
    ThrottledError,
    check_content_range,
    explain,
)
from wds_cloud.openers.streams.throttle import limiter_for

if TYPE_CHECKING:
    from wds_cloud.openers.s3.config import S3Access, S3Config


def open_prefetching(
    access: S3Access, cfg: S3Config, url: str, bucket: str, key: str
) -> PrefetchReader | None:
    """A :class:`PrefetchReader` for the object, or None to fall back to one streaming GET.

    None is returned for objects no larger than one part and when ``HeadObject`` fails (the
    streaming path then raises the precise error: no such key, no such bucket, access denied).

    Args:
        access: the opener's read client (one attempt per request), request arguments and
            error translation.
        cfg: the resolved config of this call (``prefetch``, ``prefetch_chunk``, retries).
        url: the ``s3://`` URL.
        bucket: its bucket.
        key: its key.
    """
    limiter = limiter_for(cfg.throttle_endpoint(bucket))
    taken = limiter.acquire() if limiter is not None else 0
    try:
        head = access.client.head_object(Bucket=bucket, Key=key, **access.extra)
    except Exception as exc:
        if limiter is not None and isinstance(retryable(exc), ThrottledError):
            limiter.throttled(taken)  # the streaming GET retries; the limit backs off
        return None
    finally:
        if limiter is not None:
            limiter.release()
    size = int(head["ContentLength"])
    chunk = int(cfg.prefetch_chunk or 1)
    if size <= chunk:
        return None
    etag = head["ETag"]
    return PrefetchReader(
        url=url,
        size=size,
        span=functools.partial(_span, access, url, bucket, key, etag),
        parts=max(1, int(cfg.prefetch or 1)),
        part_size=chunk,
        policy=RetryPolicy.from_config(cfg),
        retry_on=read_errors(),
        explain=functools.partial(explain, access.translate, url),
        version=etag,
        name="wds-s3-prefetch",
        limiter=limiter,
    )


def _span(
    access: S3Access, url: str, bucket: str, key: str, etag: str, first: int, end: int
) -> Opened:
    """Bytes ``first .. end - 1`` pinned to ``etag`` (``IfMatch``: 412 when replaced)."""
    from wds_cloud.openers.s3.read import raw_body

    with s3_request(
        access.translate, url=url, offset=first, retry=True, as_read="ranged read failed"
    ):
        response = access.client.get_object(
            Bucket=bucket, Key=key, Range=f"bytes={first}-{end - 1}", IfMatch=etag, **access.extra
        )
    body = raw_body(response["Body"])
    try:
        check_content_range(response.get("ContentRange"), first, end, url)
    except BaseException:
        body.close()
        raise
    return Opened(body, first)
