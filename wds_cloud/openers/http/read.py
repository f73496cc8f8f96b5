"""Ranged reads over HTTP(S): ``Range`` GETs on kept-alive connections for random access
(:func:`read_range`), and the first request of streams that start at a byte offset
(:func:`first_ranged`). Both take the opener's settings and, for ranged reads, its connection
pool (:meth:`HttpOpener.client`), never the opener.

Random access makes many small requests to one server; a TCP (and TLS) handshake per sample
would cost more than the sample. Each process keeps idle connections per ``(scheme, host,
port)`` (:class:`Pool`, at most 8 per host); a body read to its announced end hands its
connection back, any other ends it. A kept connection the server closed meanwhile is replaced
once, transparently. The read itself is :func:`~wds_cloud.openers.streams.resumable.read_span`: the one
resume loop, pinned to the first answer's ``ETag``.

:meth:`HttpOpener.open_at` streams from a byte offset with ``Range: bytes=N-`` on a connection
of its own (it is read to the end, like :meth:`HttpOpener.open`). A server that ignores
``Range`` and answers 200 sends the whole object: its first ``N`` bytes are read and dropped
(correct bytes, at the cost of reading them; a warning says so), and a later resume of that
stream fails as in :meth:`HttpOpener.open`.
"""

from __future__ import annotations

import http.client
import logging
import threading
from typing import Any
from urllib.parse import urlsplit

from wds_cloud.errors import ShardOpenError, ShardReadError
from wds_cloud.openers.http.config import HttpConfig
from wds_cloud.openers.http.conn import (
    RETRY_ON,
    Body,
    Pin,
    connect,
    content_range_start,
    get,
)
from wds_cloud.openers.http.errors import explain, status_error
from wds_cloud.openers.http.redirects import follow
from wds_cloud.openers.streams.backoff import RetryPolicy
from wds_cloud.openers.streams.resumable import (
    Opened,
    check_content_range,
    content_range_total,
    past_end,
    read_span,
)
from wds_cloud.openers.streams.throttle import limiter_for
from wds_cloud.redact import redact_url

log = logging.getLogger(__name__)

Key = tuple[str, str, int | None]


class Pool:
    """Idle keep-alive connections, per ``(scheme, host, port)`` (one pool per process: the
    opener keeps it in a :class:`~wds_cloud.openers.clients.ProcessLocal`)."""

    def __init__(self, per_host: int = 8) -> None:
        self.per_host = per_host
        self._idle: dict[Key, list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()

    def take(self, key: Key) -> http.client.HTTPConnection | None:
        with self._lock:
            idle = self._idle.get(key)
            return idle.pop() if idle else None

    def give(self, key: Key, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if len(idle) < self.per_host:
                idle.append(conn)
                return
        conn.close()


class PooledBody:
    """A response body whose connection goes back to the pool when the body was read to its
    announced end (and the server keeps it open); otherwise the connection is closed."""

    def __init__(
        self,
        pool: Pool,
        key: Key,
        conn: http.client.HTTPConnection,
        resp: http.client.HTTPResponse,
    ) -> None:
        self._pool = pool
        self._key = key
        self._conn = conn
        self._resp: http.client.HTTPResponse | None = resp

    def read1(self, n: int) -> bytes:
        assert self._resp is not None
        return self._resp.read1(n)

    def close(self) -> None:
        resp, self._resp = self._resp, None
        if resp is None:
            return
        complete = resp.isclosed() or resp.length == 0  # read to its announced end
        if complete and not resp.will_close:
            resp.close()  # releases the response; the connection stays open
            self._pool.give(self._key, self._conn)
            return
        try:
            resp.close()
        finally:
            self._conn.close()


def _target(url: str) -> str:
    parts = urlsplit(url)
    return (parts.path or "/") + ("?" + parts.query if parts.query else "")


def _key(url: str) -> Key:
    parts = urlsplit(url)
    return (parts.scheme, parts.hostname or "", parts.port)


def pooled_get(
    config: HttpConfig, pool: Pool, url: str, headers: dict[str, str]
) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse, Key]:
    """GET ``url`` on an idle kept-alive connection (or a new one), following redirects
    (:func:`~wds_cloud.openers.http.redirects.follow`, each hop on a connection of its own
    host); a kept connection the server closed meanwhile is replaced once. The key is that of
    the URL that answered, so its connection goes back to the pool of that host."""

    def send(
        current: str, sent: dict[str, str]
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        conn = pool.take(_key(current))
        reused = conn is not None
        while True:
            if conn is None:
                conn, target = connect(config, current)
            else:
                target = _target(current)
            try:
                conn.request("GET", target, headers=sent)
                return conn, conn.getresponse()
            except (ConnectionError, http.client.BadStatusLine, http.client.CannotSendRequest):
                conn.close()
                if not reused:
                    raise
                conn, reused = None, False  # a stale kept connection: once more on a new one
            except BaseException:
                conn.close()
                raise

    conn, resp, answered = follow(config, url, headers, send)
    return conn, resp, _key(answered)


def read_range(
    config: HttpConfig, pool: Pool, url: str, offset: int, length: int, **options: Any
) -> bytes:
    """Bytes ``offset .. offset + length`` of ``url`` with one ``Range`` GET on a kept-alive
    connection (resumed like a streaming read if the connection drops, pinned to the first
    answer's ``ETag``). A server that ignores ``Range`` (200) is read from the start and the
    bytes before ``offset`` are skipped.

    Args:
        config: the opener's settings (retry policy, timeouts, headers).
        pool: the opener's kept-alive connections of this process.
        url: ``http://`` or ``https://`` URL.
        offset: first byte.
        length: number of bytes.
        **options: ``headers`` (dict) adds request headers.

    Raises:
        ShardNotFoundError: HTTP 404 or 410.
        ShardReadError: the object is shorter, it changed between requests, or the read failed.
        ShardOpenError: any other error status.
    """
    headers = {**(config.headers or {}), **dict(options.get("headers") or {})}
    headers.setdefault("Accept-Encoding", "identity")
    pin: Pin | None = None

    def span(first: int, end: int) -> Opened:
        nonlocal pin
        ranged = dict(headers)
        ranged["Range"] = f"bytes={first}-{end - 1}"
        conn, resp, key = pooled_get(config, pool, url, ranged)
        try:
            if resp.status not in (200, 206):
                raise status_error(url, resp)
            etag = resp.getheader("ETag")
            if pin is not None and pin.etag and etag != pin.etag:
                raise ShardReadError(
                    f"the shard changed while it was read (ETag {pin.etag} -> {etag})",
                    url=url,
                    offset=first,
                )
            if resp.status == 206:
                check_content_range(resp.getheader("Content-Range"), first, end, url)
                start = first
            else:  # the server ignored the range: the body is the whole object
                size = resp.getheader("Content-Length")
                if size and size.isdigit() and int(size) < end:
                    raise ShardReadError(
                        f"the object has {size} bytes; the range ends at byte {end}",
                        url=url,
                        offset=first,
                    )
                start = 0
            if pin is None:
                pin = Pin(etag=etag)
        except BaseException:
            conn.close()
            raise
        return Opened(PooledBody(pool, key, conn, resp), start)

    return read_span(
        span,
        url=url,
        offset=offset,
        length=length,
        policy=RetryPolicy.from_config(config),
        retry_on=RETRY_ON,
        explain=explain,
        limiter=limiter_for(url),
    )


def first_ranged(
    config: HttpConfig, url: str, headers: dict[str, str], offset: int, pin: Pin
) -> Opened:
    """The first GET of :meth:`HttpOpener.open_at` (``Range: bytes=offset-``); fills ``pin``
    with the answer's validators and the object's size.

    Raises:
        ShardOpenError: ``offset`` beyond the end (416, or a whole object shorter than it).
        ShardReadError: a 206 answer from another byte than ``offset``.
        ShardNotFoundError: HTTP 404 or 410.
    """
    conn, resp = get(config, url, {**headers, "Range": f"bytes={offset}-"})
    try:
        if resp.status == 416:  # not satisfiable: at or past the end
            opened = past_end(url, offset, content_range_total(resp.getheader("Content-Range")))
            conn.close()
            return opened
        if resp.status not in (200, 206):
            raise status_error(url, resp)
        pin.etag = resp.getheader("ETag")
        pin.last_modified = resp.getheader("Last-Modified")
        if resp.status == 206:
            start = content_range_start(resp.getheader("Content-Range"))
            if start != offset:
                raise ShardReadError(
                    f"the server answered the range from byte {start}, not {offset}",
                    url=url,
                    offset=offset,
                )
            pin.size = content_range_total(resp.getheader("Content-Range"))
            return Opened(Body(conn, resp), offset, pin.size)
        length = resp.getheader("Content-Length")
        pin.size = int(length) if length and length.isdigit() else None
        if pin.size is not None and pin.size < offset:
            raise ShardOpenError(
                f"byte offset {offset} is beyond the end of the object ({pin.size} bytes)",
                url=url,
                offset=offset,
            )
        log.warning(
            "%s ignored Range (HTTP 200): reading and dropping its first %d bytes",
            redact_url(url),
            offset,
        )
        return Opened(Body(conn, resp), 0, pin.size)
    except BaseException:
        conn.close()
        raise
