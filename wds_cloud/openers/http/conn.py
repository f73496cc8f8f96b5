"""Connections and response bodies of the HTTP backend (``http.client``, no SDK).

:func:`get` sends one GET on a new connection and follows redirects
(:func:`~wds_cloud.openers.http.redirects.follow`); :class:`Body` reads a response one socket
read at a time; :class:`Pin` holds what the first answer said about the object, to pin resumes.
"""

from __future__ import annotations

import http.client
from dataclasses import dataclass
from urllib.parse import urlsplit

from wds_cloud.errors import ConfigError
from wds_cloud.openers.http.config import HttpConfig
from wds_cloud.openers.http.redirects import follow
from wds_cloud.openers.streams.backoff import RetryPolicy
from wds_cloud.openers.streams.resumable import NETWORK_ERRORS
from wds_cloud.redact import redact_url

__all__ = [
    "RETRY_ON",
    "SCHEMES",
    "Body",
    "Pin",
    "connect",
    "content_range_start",
    "get",
]

SCHEMES = ("http", "https")
RETRY_ON: tuple[type[BaseException], ...] = (*NETWORK_ERRORS, http.client.HTTPException)


class Body:
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
class Pin:
    """What the first response said about the object, to pin resumes to the same version."""

    etag: str | None = None
    last_modified: str | None = None
    size: int | None = None


def connect(config: HttpConfig, url: str) -> tuple[http.client.HTTPConnection, str]:
    """A new connection for ``url`` (not yet connected) and the request target."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES or not parts.hostname:
        raise ConfigError(f"{redact_url(url)!r} is not an http(s)://HOST/PATH URL")
    conn_cls = (
        http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    )
    timeout = RetryPolicy.from_config(config).read_timeout(config.timeout)
    conn = conn_cls(parts.hostname, parts.port, timeout=timeout)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return conn, target


def get(
    config: HttpConfig, url: str, headers: dict[str, str]
) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    """GET ``url`` on a new connection, following redirects; network errors propagate raw."""

    def send(
        current: str, sent: dict[str, str]
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        conn, target = connect(config, current)
        try:
            conn.request("GET", target, headers=sent)
            return conn, conn.getresponse()
        except BaseException:
            conn.close()
            raise

    conn, resp, _ = follow(config, url, headers, send)
    return conn, resp


def content_range_start(value: str | None) -> int | None:
    # "bytes 100-999/1000"
    if not value or not value.startswith("bytes "):
        return None
    first, _, _ = value[len("bytes ") :].partition("-")
    return int(first) if first.isdigit() else None
