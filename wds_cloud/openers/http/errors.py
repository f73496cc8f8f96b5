"""The one place that maps HTTP answers and failures to the wds_cloud error tree.

HTTP has no SDK: what needs translating is a status code (:func:`status_error`) and the last
failure of a read that gave up (:func:`explain`, the reader's ``explain``). Network errors are
retried and reported by :class:`~wds_cloud.openers.streams.resumable.ResumableReader` itself.
"""

from __future__ import annotations

import http.client

from wds_cloud.errors import ShardNotFoundError, ShardOpenError
from wds_cloud.openers.streams.resumable import RetryableError, transient_error
from wds_cloud.openers.streams.throttle import retry_after_seconds

__all__ = ["TRANSIENT", "explain", "status_error"]

TRANSIENT = (408, 429, 500, 502, 503, 504)


def _excerpt(resp: http.client.HTTPResponse) -> str:
    try:
        body = resp.read(300)
    except Exception:
        return ""
    text = body.decode("utf-8", errors="replace").strip().replace("\n", " ")
    return f": {text[:200]}" if text else ""


def explain(exc: BaseException) -> str:
    """The text of a read's final error (the reader's ``explain``)."""
    if isinstance(exc, RetryableError):
        return str(exc)
    if isinstance(exc, OSError) and not isinstance(exc, TimeoutError):
        return f"cannot connect or read: {exc!r}"
    return repr(exc)


def status_error(url: str, resp: http.client.HTTPResponse) -> Exception:
    """The error for an answer with an error status: :class:`RetryableError` for 408, 429
    and 5xx (retried by the read loop; :class:`ThrottledError` for 429 and 503, with the
    ``Retry-After`` seconds), :class:`ShardNotFoundError` for 404 and 410, else
    :class:`ShardOpenError`; the message quotes the start of the body."""
    what = f"HTTP {resp.status} {resp.reason}{_excerpt(resp)}"
    if resp.status in TRANSIENT:
        wait = retry_after_seconds(resp.getheader("Retry-After"))
        return transient_error(what, resp.status, wait)
    if resp.status in (404, 410):
        return ShardNotFoundError(what, url=url)
    return ShardOpenError(what, url=url)
