"""``http://`` and ``https://`` shards, streamed with the standard library's ``http.client``.

No SDK, no curl. Environment, read when an :class:`HttpOpener` is created:

- ``WDS_CLOUD_HTTP_TIMEOUT``: socket timeout in seconds (default 60).
- ``WDS_CLOUD_HTTP_RETRIES``: attempts after a failure, per request and per resume (default 5).
- ``WDS_CLOUD_HTTP_BACKOFF``: first retry delay in seconds, doubled each time (default 0.2).

A dropped connection is resumed from the exact byte offset with ``Range: bytes=N-`` and
``If-Range`` pinned to the first response's ``ETag`` (or ``Last-Modified``). A resume answered
with 200 instead of 206, or with another ``ETag``, raises :class:`ShardReadError`: the shard
changed or the server cannot resume, and mixing two versions would corrupt samples.
"""

from __future__ import annotations

import http.client
import io
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import IO, Any
from urllib.parse import urljoin, urlsplit

from wds_cloud.errors import (
    ConfigError,
    ShardError,
    ShardNotFoundError,
    ShardOpenError,
    ShardReadError,
)
from wds_cloud.openers.resume import NETWORK_ERRORS, ResumableReader

SCHEMES = ("http", "https")

_REDIRECTS = (301, 302, 303, 307, 308)
_TRANSIENT = (408, 429, 500, 502, 503, 504)
RETRY_ON: tuple[type[BaseException], ...] = (*NETWORK_ERRORS, http.client.HTTPException)


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"environment variable {name}={raw!r} is not a number") from None


@dataclass(frozen=True)
class HttpConfig:
    """HTTP settings; None fields are resolved from the environment, then defaults.

    Attributes:
        timeout: socket timeout in seconds for connect and each read.
        retries: attempts after a failed request or a dropped stream (reset by progress).
        backoff: first delay between attempts, doubled each time up to 10 s.
        headers: extra request headers (e.g. ``Authorization``).
        max_redirects: redirects followed before giving up.
    """

    timeout: float | None = None
    retries: int | None = None
    backoff: float | None = None
    headers: dict[str, str] = field(default_factory=dict)
    max_redirects: int = 10

    def __repr__(self) -> str:
        from wds_cloud.redact import config_repr

        return config_repr(self, headers=("headers",))

    def resolved(self) -> HttpConfig:
        """A copy with every None field filled from the environment or the default."""
        return replace(
            self,
            timeout=self.timeout
            if self.timeout is not None
            else _env_number("WDS_CLOUD_HTTP_TIMEOUT", 60.0),
            retries=self.retries
            if self.retries is not None
            else int(_env_number("WDS_CLOUD_HTTP_RETRIES", 5)),
            backoff=self.backoff
            if self.backoff is not None
            else _env_number("WDS_CLOUD_HTTP_BACKOFF", 0.2),
        )


class _Body(io.RawIOBase):
    """One response body; closing it closes the connection (nothing is drained)."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        super().__init__()
        self._conn = conn
        self._resp = resp

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._resp.readinto(buffer)

    def close(self) -> None:
        try:
            self._resp.close()
        finally:
            self._conn.close()
            super().close()


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


class HttpOpener:
    """Streams ``http(s)://`` URLs; see the module docstring.

    Args:
        config: an :class:`HttpConfig`; fields left None come from the environment.
        **overrides: individual :class:`HttpConfig` fields, e.g. ``retries=0``.
    """

    def __init__(self, config: HttpConfig | None = None, **overrides: Any) -> None:
        self.config = replace(config or HttpConfig(), **overrides).resolved()
        self._sleep: Callable[[float], Any] = time.sleep

    def _connect(self, url: str) -> tuple[http.client.HTTPConnection, str]:
        parts = urlsplit(url)
        if parts.scheme not in SCHEMES or not parts.hostname:
            raise ConfigError(f"{url!r} is not an http(s)://HOST/PATH URL")
        conn_cls = (
            http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        )
        conn = conn_cls(parts.hostname, parts.port, timeout=self.config.timeout)
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
        if resp.status in (404, 410):
            return ShardNotFoundError(what, url=url)
        return ShardOpenError(what, url=url)

    def _first(self, url: str, headers: dict[str, str]) -> tuple[_Body, _Pin]:
        """The initial request, retried on network errors and transient statuses."""
        retries = self.config.retries or 0
        delay = self.config.backoff or 0.0
        attempt = 0
        while True:
            try:
                conn, resp = self._get(url, headers)
            except RETRY_ON as exc:
                if isinstance(exc, ShardError):
                    raise
                if attempt >= retries:
                    raise ShardOpenError(
                        f"cannot connect after {attempt + 1} attempts: {exc!r}", url=url
                    ) from exc
            else:
                if resp.status == 200:
                    length = resp.getheader("Content-Length")
                    pin = _Pin(
                        etag=resp.getheader("ETag"),
                        last_modified=resp.getheader("Last-Modified"),
                        size=int(length) if length and length.isdigit() else None,
                    )
                    return _Body(conn, resp), pin
                error = self._status_error(url, resp)
                conn.close()
                if resp.status not in _TRANSIENT or attempt >= retries:
                    raise error
            attempt += 1
            self._sleep(min(10.0, delay * 2 ** (attempt - 1)))

    def _resume(self, url: str, headers: dict[str, str], pin: _Pin, offset: int) -> _Body:
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
                return _Body(conn, resp)
            if resp.status == 200:
                raise ShardReadError(
                    "connection dropped and the server answered the resume with the whole "
                    "object (HTTP 200, not 206): the shard changed or the server cannot "
                    "serve byte ranges",
                    url=url,
                    offset=offset,
                )
            if resp.status in _TRANSIENT:
                raise ConnectionError(f"HTTP {resp.status} {resp.reason} while resuming")
            error = self._status_error(url, resp)
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
            **options: ``headers`` (dict) adds request headers for this URL.

        Raises:
            ShardNotFoundError: HTTP 404 or 410.
            ShardOpenError: any other error status, too many redirects, connection failures
                after the configured retries.
            ShardReadError: (while reading) the stream could not be resumed.
        """
        headers = {**self.config.headers, **dict(options.get("headers") or {})}
        headers.setdefault("Accept-Encoding", "identity")
        body, pin = self._first(url, headers)
        first: list[_Body] = [body]

        def fetch(offset: int) -> tuple[IO[bytes], int]:
            if first:
                return first.pop(), 0  # type: ignore[return-value]
            return self._resume(url, headers, pin, offset), offset  # type: ignore[return-value]

        return ResumableReader(  # type: ignore[return-value]
            fetch,
            url=url,
            size=pin.size,
            retries=self.config.retries or 0,
            backoff=self.config.backoff or 0.0,
            max_backoff=10.0,
            retry_on=RETRY_ON,
            sleep=self._sleep,
        )

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.config = state["config"]
        self._sleep = time.sleep


def _content_range_start(value: str | None) -> int | None:
    # "bytes 100-999/1000"
    if not value or not value.startswith("bytes "):
        return None
    first, _, _ = value[len("bytes ") :].partition("-")
    return int(first) if first.isdigit() else None
