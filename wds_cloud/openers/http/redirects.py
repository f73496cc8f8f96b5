"""Following HTTP redirects: the one loop every request of the HTTP backend goes through.

:func:`follow` sends a request, and while the answer is a redirect (301, 302, 303, 307, 308)
sends it again to the ``Location`` (resolved against the current URL, used as given: no query
of ours is re-appended). Each hop is checked by :func:`next_hop`:

- **Credentials stay with their origin.** When a hop leaves the origin (scheme, host and port,
  default ports filled in) every credential header is dropped: ``Authorization``, ``Cookie``,
  ``Proxy-Authorization`` and any header :func:`~wds_cloud.redact.is_secret_header` calls
  secret (the rule that masks ``HttpConfig.headers`` in reprs: ``X-Amz-*``, ``X-Goog-*``,
  names with ``token``, ``key``, ``auth``...). They stay dropped for the later hops, even back
  on the first origin. Other headers (``Range``, ``If-Range``, ``Accept-Encoding``...) are kept.
  This is the strict origin rule of RFC 6454; ``requests`` also keeps ``Authorization`` on an
  ``http`` -> ``https`` upgrade of the same host, which is not done here.
- **No downgrade.** An ``https`` -> ``http`` hop raises :class:`ShardOpenError` unless
  ``HttpConfig.allow_downgrade``.
- **Bounded.** A URL seen twice in one chain (a loop) or more than ``max_redirects`` hops
  raise :class:`ShardOpenError` naming the first URL and the number of hops.
"""

from __future__ import annotations

import http.client
from collections.abc import Callable
from urllib.parse import urljoin, urlsplit

from wds_cloud.errors import ShardOpenError
from wds_cloud.openers.http.config import HttpConfig
from wds_cloud.redact import is_secret_header, redact_url

__all__ = ["REDIRECTS", "follow", "next_hop", "origin", "strip_credentials"]

REDIRECTS = (301, 302, 303, 307, 308)

_DEFAULT_PORTS = {"http": 80, "https": 443}

#: ``send(url, headers)``: one request, its connection and answer.
Send = Callable[[str, dict[str, str]], tuple[http.client.HTTPConnection, http.client.HTTPResponse]]


def origin(url: str) -> tuple[str, str, int | None]:
    """``(scheme, host, port)`` of ``url``, lower-cased, the scheme's default port filled in."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS.get(scheme)


def strip_credentials(headers: dict[str, str]) -> dict[str, str]:
    """``headers`` without the ones that carry credentials."""
    return {k: v for k, v in headers.items() if not is_secret_header(k)}


def next_hop(
    config: HttpConfig, chain: list[str], location: str | None, headers: dict[str, str]
) -> tuple[str, dict[str, str]]:
    """The URL and headers of the request after a redirect to ``location``.

    Args:
        config: ``max_redirects`` and ``allow_downgrade``.
        chain: the URLs requested so far, the first one first; the new URL is appended.
        location: the answer's ``Location`` header.
        headers: the headers of the last request.

    Raises:
        ShardOpenError: no ``Location``, an ``https`` -> ``http`` hop not allowed, a loop,
            or more than ``max_redirects`` hops.
    """
    first, current = chain[0], chain[-1]
    if not location:
        raise ShardOpenError("HTTP redirect without Location", url=current)
    target = urljoin(current, location)
    hops = len(chain)
    if target in chain:
        raise ShardOpenError(
            f"redirect loop ({hops} redirects followed): {redact_url(target)} requested again",
            url=first,
        )
    if hops > int(config.max_redirects or 0):
        raise ShardOpenError(
            f"more than {config.max_redirects} redirects (max_redirects) "
            f"after {hops} hop(s), the last to {redact_url(target)}",
            url=first,
        )
    before, after = origin(current), origin(target)
    if before[0] == "https" and after[0] == "http" and not config.allow_downgrade:
        raise ShardOpenError(
            f"refusing a redirect from https to http: {redact_url(current)} -> "
            f"{redact_url(target)} (set allow_downgrade / WDS_CLOUD_HTTP_ALLOW_DOWNGRADE=1 "
            "to allow it)",
            url=first,
        )
    chain.append(target)
    return target, headers if before == after else strip_credentials(headers)


def follow(
    config: HttpConfig, url: str, headers: dict[str, str], send: Send
) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse, str]:
    """Send ``headers`` to ``url`` with ``send`` and follow redirects (:func:`next_hop`);
    the last connection, its answer, and the URL that gave it. Network errors propagate raw."""
    chain = [url]
    current = url
    while True:
        conn, resp = send(current, headers)
        if resp.status not in REDIRECTS:
            return conn, resp, current
        location = resp.getheader("Location")
        conn.close()
        current, headers = next_hop(config, chain, location, headers)
