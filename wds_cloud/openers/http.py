"""``http://`` and ``https://`` shards, streamed with the standard library's ``http.client``.

No SDK, no curl. Environment, read when an :class:`HttpOpener` is created:

- ``WDS_CLOUD_HTTP_TIMEOUT``: socket timeout in seconds for connect and each read (default 20;
  never more than the stall timeout).
- ``WDS_CLOUD_HTTP_RETRIES``: consecutive attempts without progress allowed after a failure
  (default 5).
- ``WDS_CLOUD_HTTP_BACKOFF``: first retry delay in seconds, doubled each time (default 0.2).
- ``WDS_CLOUD_HTTP_STALL_TIMEOUT``: seconds without a new byte before a read gives up with
  "stalled" (default 60); a read fails at most :meth:`HttpOpener.stall_bound` seconds (120 by
  default) after its last byte.
- ``WDS_CLOUD_HTTP_PREFETCH`` / ``WDS_CLOUD_HTTP_PREFETCH_CHUNK``: parallel ranged GETs per
  stream and their size (:mod:`wds_cloud.openers.http_prefetch`; default 0, one GET).

Bodies are read through :class:`~wds_cloud.openers.resume.ResumableReader` with
``HTTPResponse.read1`` (one socket read per call), so bytes received before a reset are kept. A
dropped connection is resumed from the exact byte offset with ``Range: bytes=N-`` and
``If-Range`` pinned to the first response's ``ETag`` (or ``Last-Modified``). A resume answered
with 200 instead of 206, or with another ``ETag``, raises :class:`ShardReadError`: the shard
changed or the server cannot resume, and mixing two versions would corrupt samples.
:meth:`HttpOpener.open_at` starts the stream at a byte offset (``Range: bytes=N-``) and
:meth:`HttpOpener.read_range` reads one byte range (:mod:`wds_cloud.openers.http_range`).
"""

from __future__ import annotations

import http.client
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import IO, Any, Self
from urllib.parse import urljoin, urlsplit

from wds_cloud.errors import (
    ConfigError,
    ShardNotFoundError,
    ShardOpenError,
    ShardReadError,
)
from wds_cloud.openers.backoff import (
    DEFAULT_READ_TIMEOUT,
    DEFAULT_STALL_TIMEOUT,
    RetryPolicy,
    positive_seconds,
    stall_bound,
)
from wds_cloud.openers.prefetch import PREFETCH_OPTIONS, resolve_prefetch, split_prefetch_options
from wds_cloud.openers.resume import NETWORK_ERRORS, Opened, ResumableReader, RetryableError
from wds_cloud.redact import redact_url
from wds_cloud.settings import apply_overrides, env_float, reject_unknown_options

SCHEMES = ("http", "https")
OPEN_OPTIONS = ("headers",)  # what open(), open_at() and read_range() accept

_REDIRECTS = (301, 302, 303, 307, 308)
_TRANSIENT = (408, 429, 500, 502, 503, 504)
RETRY_ON: tuple[type[BaseException], ...] = (*NETWORK_ERRORS, http.client.HTTPException)


@dataclass(frozen=True)
class HttpConfig:
    """HTTP settings; None fields are resolved from the environment, then defaults.

    Attributes:
        timeout: socket timeout in seconds for connect and each read (default 20), clipped
            to ``stall_timeout``.
        retries: consecutive attempts without progress allowed after a failed request or a
            dropped stream (default 5).
        backoff: first delay between attempts, doubled each time up to 10 s (default 0.2).
        stall_timeout: seconds without a new byte before a read gives up (default 60).
        headers: extra request headers (e.g. ``Authorization``).
        max_redirects: redirects followed before giving up.
        prefetch: parallel ranged GETs in flight per stream (``WDS_CLOUD_HTTP_PREFETCH``);
            0 streams one GET (:mod:`wds_cloud.openers.prefetch`).
        prefetch_chunk: bytes per ranged GET (``WDS_CLOUD_HTTP_PREFETCH_CHUNK``).
    """

    timeout: float | None = None
    retries: int | None = None
    backoff: float | None = None
    stall_timeout: float | None = None
    headers: dict[str, str] = field(default_factory=dict)
    max_redirects: int = 10
    prefetch: int | None = None
    prefetch_chunk: int | None = None

    def __repr__(self) -> str:
        from wds_cloud.redact import config_repr

        return config_repr(self, headers=("headers",))

    def resolve(
        self,
        overrides: Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
    ) -> Self:
        """A copy with ``overrides`` applied, then every None field filled from the
        environment (``environ``, default ``os.environ``) or the default.

        Raises:
            ConfigError: an unknown override, or an invalid value.
        """
        base = apply_overrides(self, overrides, "HTTP")
        stall = base.stall_timeout
        source = "HttpConfig.stall_timeout"
        if stall is None:
            source = "WDS_CLOUD_HTTP_STALL_TIMEOUT"
            stall = env_float(source, DEFAULT_STALL_TIMEOUT, environ=environ)
        timeout = base.timeout
        if timeout is None:
            timeout = env_float("WDS_CLOUD_HTTP_TIMEOUT", DEFAULT_READ_TIMEOUT, environ=environ)
        retries = base.retries
        if retries is None:
            retries = int(env_float("WDS_CLOUD_HTTP_RETRIES", 5, environ=environ))
        backoff = base.backoff
        if backoff is None:
            backoff = env_float("WDS_CLOUD_HTTP_BACKOFF", 0.2, environ=environ)
        prefetch, chunk = resolve_prefetch(
            "HTTP", base.prefetch, base.prefetch_chunk, environ=environ
        )
        return replace(
            base,
            prefetch=prefetch,
            prefetch_chunk=chunk,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            stall_timeout=positive_seconds(stall, source),
        )


def _policy(config: HttpConfig) -> RetryPolicy:
    """The retry policy of reads (``config`` resolved)."""
    return RetryPolicy(
        retries=int(config.retries or 0),
        backoff=float(config.backoff or 0.0),
        max_backoff=10.0,
        stall_timeout=float(config.stall_timeout or DEFAULT_STALL_TIMEOUT),
    )


class _Body:
    """One response body read with ``HTTPResponse.read1`` (at most one socket read per call);
    closing it closes the connection (nothing is drained)."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        self._conn = conn
        self._resp = resp

    def read1(self, n: int) -> bytes:
        return self._resp.read1(n)

    def close(self) -> None:
        try:
            self._resp.close()
        finally:
            self._conn.close()


@dataclass
class _Pin:
    """What the first response said about the object, to pin resumes to the same version."""

    etag: str | None = None
    last_modified: str | None = None
    size: int | None = None


def _excerpt(resp: http.client.HTTPResponse) -> str:
    try:
        body = resp.read(300)
    except Exception:
        return ""
    text = body.decode("utf-8", errors="replace").strip().replace("\n", " ")
    return f": {text[:200]}" if text else ""


def _explain(exc: BaseException) -> str:
    if isinstance(exc, RetryableError):
        return str(exc)
    if isinstance(exc, OSError) and not isinstance(exc, TimeoutError):
        return f"cannot connect or read: {exc!r}"
    return repr(exc)


class HttpOpener:
    """Streams ``http(s)://`` URLs; see the module docstring.

    Args:
        config: an :class:`HttpConfig`; fields left None come from the environment.
        **overrides: individual :class:`HttpConfig` fields, e.g. ``retries=0``.
    """

    def __init__(self, config: HttpConfig | None = None, **overrides: Any) -> None:
        self.config = (config or HttpConfig()).resolve(overrides)
        self._sleep: Callable[[float], Any] = time.sleep
        self._pool: Any = None  # keep-alive connections of ranged reads (http_range._Pool)

    def stall_bound(self) -> float:
        """Seconds a read can go without a new byte before it raises (with these settings)."""
        timeout = float(self.config.timeout or 0)
        return stall_bound(float(self.config.stall_timeout or 0), timeout, timeout)

    def _connect(self, url: str) -> tuple[http.client.HTTPConnection, str]:
        parts = urlsplit(url)
        if parts.scheme not in SCHEMES or not parts.hostname:
            raise ConfigError(f"{redact_url(url)!r} is not an http(s)://HOST/PATH URL")
        conn_cls = (
            http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        )
        timeout = _policy(self.config).read_timeout(self.config.timeout)
        conn = conn_cls(parts.hostname, parts.port, timeout=timeout)
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        return conn, target

    def _get(
        self, url: str, headers: dict[str, str]
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """GET ``url``, following redirects; network errors propagate raw."""
        current = url
        for _ in range(self.config.max_redirects + 1):
            conn, target = self._connect(current)
            try:
                conn.request("GET", target, headers=headers)
                resp = conn.getresponse()
            except BaseException:
                conn.close()
                raise
            if resp.status not in _REDIRECTS:
                return conn, resp
            location = resp.getheader("Location")
            conn.close()
            if not location:
                raise ShardOpenError(f"HTTP {resp.status} redirect without Location", url=url)
            current = urljoin(current, location)
        raise ShardOpenError(f"more than {self.config.max_redirects} redirects", url=url)

    def _status_error(self, url: str, resp: http.client.HTTPResponse) -> Exception:
        what = f"HTTP {resp.status} {resp.reason}{_excerpt(resp)}"
        if resp.status in _TRANSIENT:
            return RetryableError(what)
        if resp.status in (404, 410):
            return ShardNotFoundError(what, url=url)
        return ShardOpenError(what, url=url)

    def _first(self, url: str, headers: dict[str, str], pin: _Pin) -> Opened:
        """The initial request; learns the validators that pin the resumes."""
        conn, resp = self._get(url, headers)
        if resp.status != 200:
            try:
                raise self._status_error(url, resp)
            finally:
                conn.close()
        length = resp.getheader("Content-Length")
        pin.etag = resp.getheader("ETag")
        pin.last_modified = resp.getheader("Last-Modified")
        pin.size = int(length) if length and length.isdigit() else None
        return Opened(_Body(conn, resp), 0, pin.size)

    def _resume(self, url: str, headers: dict[str, str], pin: _Pin, offset: int) -> Opened:
        """Re-request from ``offset``, pinned to the first response's version."""
        ranged = dict(headers)
        ranged["Range"] = f"bytes={offset}-"
        validator = pin.etag if pin.etag and not pin.etag.startswith("W/") else pin.last_modified
        if validator:
            ranged["If-Range"] = validator
        conn, resp = self._get(url, ranged)
        try:
            if resp.status == 206:
                start = _content_range_start(resp.getheader("Content-Range"))
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
                return Opened(_Body(conn, resp), offset)
            if resp.status == 200:
                raise ShardReadError(
                    "connection dropped and the server answered the resume with the whole "
                    "object (HTTP 200, not 206): the shard changed or the server cannot "
                    "serve byte ranges",
                    url=url,
                    offset=offset,
                )
            error = self._status_error(url, resp)
            if isinstance(error, RetryableError):
                raise error
            raise ShardReadError(
                f"resuming after a dropped connection failed: {error}", url=url, offset=offset
            )
        except BaseException:
            conn.close()
            raise

    def open(self, url: str, **options: Any) -> IO[bytes]:
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
            from wds_cloud.openers.http_prefetch import open_prefetching

            headers = {**self.config.headers, **dict(options.get("headers") or {})}
            stream = open_prefetching(self, cfg, url, {"Accept-Encoding": "identity", **headers})
            if stream is not None:
                return stream  # type: ignore[return-value]
        return self._stream(url, 0, options)

    def open_at(self, url: str, offset: int, **options: Any) -> IO[bytes]:
        """Start streaming ``url`` from byte ``offset``: one ``Range: bytes=offset-`` GET,
        resumed like :meth:`open`. Resumable loading reads shard tails with it.

        A server that ignores ``Range`` (200) sends the whole object: the bytes before
        ``offset`` are read and dropped, with a warning (see
        :func:`wds_cloud.openers.http_range.first_ranged`).

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

    def _stream(self, url: str, offset: int, options: dict[str, Any]) -> IO[bytes]:
        headers = {**self.config.headers, **dict(options.get("headers") or {})}
        headers.setdefault("Accept-Encoding", "identity")
        pin: _Pin | None = None

        def fetch(position: int) -> Opened:
            nonlocal pin
            if pin is None:
                first = _Pin()
                if position:
                    from wds_cloud.openers.http_range import first_ranged

                    opened = first_ranged(self, url, headers, position, first)
                else:
                    opened = self._first(url, headers, first)
                pin = first
                return opened
            return self._resume(url, headers, pin, position)

        reader = ResumableReader(
            fetch,
            url=url,
            policy=_policy(self.config),
            retry_on=RETRY_ON,
            explain=_explain,
            sleep=self._sleep,
        )
        reader.position = offset
        return reader.start()  # type: ignore[return-value]

    # -- ranged reads (wds_cloud.openers.http_range) ----------------------------------------

    def read_range(self, url: str, offset: int, length: int, **options: Any) -> bytes:
        """Bytes ``offset .. offset + length`` of ``url`` with one ``Range`` GET on a kept-alive
        connection; see :func:`wds_cloud.openers.http_range.read_range`."""
        from wds_cloud.openers.http_range import read_range

        reject_unknown_options(options, OPEN_OPTIONS, "http read_range()")
        return read_range(self, url, offset, length, **options)

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.config = state["config"]
        self._sleep = time.sleep
        self._pool = None


def _content_range_start(value: str | None) -> int | None:
    # "bytes 100-999/1000"
    if not value or not value.startswith("bytes "):
        return None
    first, _, _ = value[len("bytes ") :].partition("-")
    return int(first) if first.isdigit() else None
