"""``http://`` and ``https://`` shards, streamed with the standard library's ``http.client``.

No SDK, no curl. Environment, read when an :class:`HttpOpener` is created
(:data:`~wds_cloud.openers.http.config.HTTP_SETTINGS`; durations such as ``20``, ``30s``,
``500ms``):

- ``WDS_CLOUD_HTTP_TIMEOUT``: socket timeout in seconds for connect and each read (default 20;
  never more than the stall timeout).
- ``WDS_CLOUD_HTTP_RETRIES``: consecutive attempts without progress allowed after a failure
  (default 5).
- ``WDS_CLOUD_HTTP_BACKOFF``: first retry delay in seconds, doubled each time (default 0.2).
- ``WDS_CLOUD_HTTP_STALL_TIMEOUT``: seconds without a new byte before a read gives up with
  "stalled" (default 60); a read fails at most :meth:`HttpOpener.stall_bound` seconds (120 by
  default) after its last byte.
- ``WDS_CLOUD_HTTP_PREFETCH`` / ``WDS_CLOUD_HTTP_PREFETCH_CHUNK``: parallel ranged GETs per
  stream and their size (:mod:`wds_cloud.openers.http.prefetch`; default 0, one GET).
- ``WDS_CLOUD_HTTP_HEADERS`` (a JSON object) and ``WDS_CLOUD_HTTP_MAX_REDIRECTS`` (default 10).
- ``WDS_CLOUD_HTTP_ALLOW_DOWNGRADE``: follow ``https`` -> ``http`` redirects (default no).

Every request (first GET, resumes, ranged reads, prefetch parts) follows redirects through
:func:`wds_cloud.openers.http.redirects.follow`: credential headers never go to another origin.

Bodies are read through :class:`~wds_cloud.openers.streams.resumable.ResumableReader` with
``HTTPResponse.read1`` (one socket read per call), so bytes received before a reset are kept. A
dropped connection is resumed from the exact byte offset with ``Range: bytes=N-`` and
``If-Range`` pinned to the first response's ``ETag`` (or ``Last-Modified``). A resume answered
with 200 instead of 206, or with another ``ETag``, raises :class:`ShardReadError`: the shard
changed or the server cannot resume, and mixing two versions would corrupt samples.
:meth:`HttpOpener.open_at` starts the stream at a byte offset (``Range: bytes=N-``) and
:meth:`HttpOpener.read_range` reads one byte range (:mod:`wds_cloud.openers.http.read`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from wds_cloud.errors import ConfigError, ShardReadError
from wds_cloud.openers.clients import ProcessLocal
from wds_cloud.openers.http.config import HttpConfig
from wds_cloud.openers.http.conn import (
    RETRY_ON,
    SCHEMES,
    Body,
    Pin,
    content_range_start,
    get,
)
from wds_cloud.openers.http.errors import explain, status_error
from wds_cloud.openers.http.read import Pool, first_ranged, read_range
from wds_cloud.openers.streams.backoff import RetryPolicy, stall_bound
from wds_cloud.openers.streams.batchread import RangeBatchReads, batch_connections
from wds_cloud.openers.streams.prefetch import PREFETCH_OPTIONS, split_prefetch_options
from wds_cloud.openers.streams.resumable import Opened, ResumableReader, RetryableError
from wds_cloud.openers.streams.stream import ReadStream
from wds_cloud.openers.streams.throttle import limiter_for
from wds_cloud.redact import redact_url
from wds_cloud.settings import reject_unknown_options

OPEN_OPTIONS = ("headers",)  # what open(), open_at() and read_range() accept

__all__ = ["OPEN_OPTIONS", "SCHEMES", "HttpConfig", "HttpOpener"]


class HttpOpener(RangeBatchReads):
    """Streams ``http(s)://`` URLs; see the module docstring.

    Args:
        config: an :class:`HttpConfig`; fields left None come from the environment.
        **overrides: individual :class:`HttpConfig` fields, e.g. ``retries=0``.
    """

    remote: bool = True  # streams come over a network: the registry reads them ahead

    def __init__(self, config: HttpConfig | None = None, **overrides: Any) -> None:
        self.config = (config or HttpConfig()).resolve(overrides)
        self._sleep: Callable[[float], Any] = time.sleep
        self._client: ProcessLocal[Pool] = ProcessLocal()  # keep-alive ranged-read connections

    def client(self) -> Pool:
        """The keep-alive connections of ranged reads of this process (created on first use,
        re-created after a fork)."""
        return self._client.get(lambda: Pool(per_host=max(8, batch_connections())))

    def stall_bound(self) -> float:
        """Seconds a read can go without a new byte before it raises (with these settings)."""
        timeout = float(self.config.timeout or 0)
        return stall_bound(float(self.config.stall_timeout or 0), timeout, timeout)

    def _first(self, url: str, headers: dict[str, str], pin: Pin) -> Opened:
        """The initial request; learns the validators that pin the resumes."""
        conn, resp = get(self.config, url, headers)
        if resp.status != 200:
            try:
                raise status_error(url, resp)
            finally:
                conn.close()
        length = resp.getheader("Content-Length")
        pin.etag = resp.getheader("ETag")
        pin.last_modified = resp.getheader("Last-Modified")
        pin.size = int(length) if length and length.isdigit() else None
        return Opened(Body(conn, resp), 0, pin.size)

    def _resume(self, url: str, headers: dict[str, str], pin: Pin, offset: int) -> Opened:
        """Re-request from ``offset``, pinned to the first response's version."""
        ranged = dict(headers)
        ranged["Range"] = f"bytes={offset}-"
        validator = pin.etag if pin.etag and not pin.etag.startswith("W/") else pin.last_modified
        if validator:
            ranged["If-Range"] = validator
        conn, resp = get(self.config, url, ranged)
        try:
            if resp.status == 206:
                start = content_range_start(resp.getheader("Content-Range"))
                etag = resp.getheader("ETag")
                if pin.etag and etag and etag != pin.etag:
                    raise ShardReadError(
                        f"the shard changed while it was read (ETag {pin.etag} -> {etag})",
                        url=url,
                        offset=offset,
                    )
                if start != offset:
                    raise ShardReadError(
                        f"server resumed at byte {start} instead of {offset}",
                        url=url,
                        offset=offset,
                    )
                return Opened(Body(conn, resp), offset)
            if resp.status == 200:
                raise ShardReadError(
                    "connection dropped and the server answered the resume with the whole "
                    "object (HTTP 200, not 206): the shard changed or the server cannot "
                    "serve byte ranges",
                    url=url,
                    offset=offset,
                )
            error = status_error(url, resp)
            if isinstance(error, RetryableError):
                raise error
            raise ShardReadError(
                f"resuming after a dropped connection failed: {error}", url=url, offset=offset
            )
        except BaseException:
            conn.close()
            raise

    def open(self, url: str, **options: Any) -> ReadStream:
        """Start streaming ``url``.

        Args:
            url: ``http://`` or ``https://`` URL.
            **options: ``headers`` (dict) adds request headers for this URL;
                ``prefetch``/``prefetch_chunk`` override the config for this call.

        Raises:
            ConfigError: an unknown option.
            ShardNotFoundError: HTTP 404 or 410.
            ShardOpenError: any other error status, too many redirects, connection failures
                or a stall before the response, after the configured retries.
            ShardReadError: (while reading) the stream could not be resumed or stalled.
        """
        reject_unknown_options(options, (*OPEN_OPTIONS, *PREFETCH_OPTIONS), "http open()")
        wanted, options = split_prefetch_options(options)
        cfg = self.config.resolve(wanted, environ={}) if wanted else self.config
        if cfg.prefetch:
            from wds_cloud.openers.http.prefetch import open_prefetching

            headers = {**(self.config.headers or {}), **dict(options.get("headers") or {})}
            stream = open_prefetching(
                cfg, self.client(), url, {"Accept-Encoding": "identity", **headers}
            )
            if stream is not None:
                return stream
        return self._stream(url, 0, options)

    def open_at(self, url: str, offset: int, **options: Any) -> ResumableReader:
        """Start streaming ``url`` from byte ``offset``: one ``Range: bytes=offset-`` GET,
        resumed like :meth:`open`. Resumable loading reads shard tails with it.

        A server that ignores ``Range`` (200) sends the whole object: the bytes before
        ``offset`` are read and dropped, with a warning (see
        :func:`wds_cloud.openers.http.read.first_ranged`).

        Args:
            url: ``http://`` or ``https://`` URL.
            offset: first byte; the object's size gives an empty stream.
            **options: ``headers`` (dict) adds request headers for this URL.

        Raises:
            ConfigError: a negative offset or an unknown option.
            ShardOpenError: ``offset`` beyond the end of the object; as :meth:`open`.
            ShardNotFoundError: HTTP 404 or 410.
            ShardReadError: the server answered from another byte than ``offset``.
        """
        if offset < 0:
            raise ConfigError(
                f"open_at() offset must be >= 0, got {offset} for {redact_url(url)!r}"
            )
        reject_unknown_options(options, OPEN_OPTIONS, "http open_at()")
        return self._stream(url, offset, options)

    def _stream(self, url: str, offset: int, options: dict[str, Any]) -> ResumableReader:
        headers = {**(self.config.headers or {}), **dict(options.get("headers") or {})}
        headers.setdefault("Accept-Encoding", "identity")
        pin: Pin | None = None

        def fetch(position: int) -> Opened:
            nonlocal pin
            if pin is None:
                first = Pin()
                if position:
                    opened = first_ranged(self.config, url, headers, position, first)
                else:
                    opened = self._first(url, headers, first)
                pin = first
                return opened
            return self._resume(url, headers, pin, position)

        reader = ResumableReader(
            fetch,
            url=url,
            policy=RetryPolicy.from_config(self.config),
            retry_on=RETRY_ON,
            explain=explain,
            sleep=self._sleep,
            limiter=limiter_for(url),
        )
        reader.position = offset
        return reader.start()

    # -- ranged reads (wds_cloud.openers.http.read) ----------------------------------------

    def read_range(self, url: str, offset: int, length: int, **options: Any) -> bytes:
        """Bytes ``offset .. offset + length`` of ``url`` with one ``Range`` GET on a kept-alive
        connection; see :func:`wds_cloud.openers.http.read.read_range`."""
        reject_unknown_options(options, OPEN_OPTIONS, "http read_range()")
        return read_range(self.config, self.client(), url, offset, length, **options)

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.config = state["config"]
        self._sleep = time.sleep
        self._client = ProcessLocal()
