"""The HTTP side of parallel ranged reads (``HttpConfig.prefetch = N``).

A first ``Range: bytes=0-(part-1)`` GET learns the object's size (``Content-Range``) and its
validator (a strong ``ETag``, else ``Last-Modified``); its body becomes part 0. Every other part
is a ``Range`` GET on a kept-alive connection with ``If-Range`` set to that validator, so a
replaced object is answered with the whole new object (200) or another ``ETag`` and the read
raises :class:`ShardReadError` instead of mixing versions. A server that ignores ``Range``
(answers 200), does not say the size, or answers the first GET with an error falls back to one
streaming GET (:meth:`HttpOpener.open`'s usual path, which then reports the precise error).
The parts are read in order by :class:`~wds_cloud.openers.streams.prefetch.PrefetchReader`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from wds_cloud.errors import ShardReadError
from wds_cloud.openers.streams.backoff import RetryPolicy
from wds_cloud.openers.streams.prefetch import PrefetchReader
from wds_cloud.openers.streams.resumable import Opened, RetryableError, check_content_range
from wds_cloud.openers.streams.throttle import limiter_for
from wds_cloud.redact import redact_url

if TYPE_CHECKING:
    from wds_cloud.openers.http.config import HttpConfig
    from wds_cloud.openers.http.read import Pool

log = logging.getLogger(__name__)


def open_prefetching(
    cfg: HttpConfig, pool: Pool, url: str, headers: dict[str, str]
) -> PrefetchReader | None:
    """A :class:`PrefetchReader` over ``url``, or None to stream it with one GET instead.

    Args:
        cfg: the resolved config of this call (``prefetch``, ``prefetch_chunk``, retries,
            timeouts, redirects).
        pool: the opener's kept-alive connections of this process.
        url: ``http(s)://`` URL.
        headers: request headers of this call (``Accept-Encoding: identity`` included).
    """
    from wds_cloud.openers.http.conn import RETRY_ON
    from wds_cloud.openers.http.errors import explain
    from wds_cloud.openers.http.read import PooledBody, pooled_get
    from wds_cloud.openers.streams.resumable import content_range_total

    chunk = int(cfg.prefetch_chunk or 1)
    try:
        conn, resp, key = pooled_get(cfg, pool, url, {**headers, "Range": f"bytes=0-{chunk - 1}"})
    except RETRY_ON:
        return None  # the streaming path retries and reports
    total = content_range_total(resp.getheader("Content-Range"))
    if resp.status != 206 or total is None:
        if resp.status == 200:
            log.info("%s ignores Range: streaming it with one GET", redact_url(url))
        conn.close()
        return None
    etag = resp.getheader("ETag")
    validator = etag if etag and not etag.startswith("W/") else resp.getheader("Last-Modified")
    first = Opened(PooledBody(pool, key, conn, resp), 0)
    span = _PinnedSpan(cfg, pool, url, headers, etag, validator)
    return PrefetchReader(
        url=url,
        size=total,
        span=span,
        first=first,
        parts=max(1, int(cfg.prefetch or 1)),
        part_size=chunk,
        policy=RetryPolicy.from_config(cfg),
        retry_on=RETRY_ON,
        explain=explain,
        version=validator,
        name="wds-http-prefetch",
        limiter=limiter_for(url),
    )


class _PinnedSpan:
    """``span(first, end)`` of one HTTP object, pinned with ``If-Range`` and the ``ETag``."""

    def __init__(
        self,
        cfg: HttpConfig,
        pool: Pool,
        url: str,
        headers: dict[str, str],
        etag: str | None,
        validator: str | None,
    ) -> None:
        self.cfg = cfg
        self.pool = pool
        self.url = url
        self.headers = dict(headers)
        if validator:
            self.headers["If-Range"] = validator
        self.etag = etag
        self.validator = validator

    def __call__(self, first: int, end: int) -> Opened:
        from wds_cloud.openers.http.errors import status_error
        from wds_cloud.openers.http.read import PooledBody, pooled_get

        url = self.url
        headers = {**self.headers, "Range": f"bytes={first}-{end - 1}"}
        conn, resp, key = pooled_get(self.cfg, self.pool, url, headers)
        try:
            if resp.status == 200:
                raise ShardReadError(
                    "the shard changed while it was read (a ranged GET pinned to "
                    f"{self.validator or 'nothing'} was answered with the whole object)",
                    url=url,
                    offset=first,
                )
            if resp.status != 206:
                error = status_error(url, resp)
                if isinstance(error, RetryableError):
                    raise error
                raise ShardReadError(f"ranged read failed: {error}", url=url, offset=first)
            etag = resp.getheader("ETag")
            if self.etag and etag and etag != self.etag:
                raise ShardReadError(
                    f"the shard changed while it was read (ETag {self.etag} -> {etag})",
                    url=url,
                    offset=first,
                )
            check_content_range(resp.getheader("Content-Range"), first, end, url)
        except BaseException:
            conn.close()
            raise
        return Opened(PooledBody(self.pool, key, conn, resp), first)
