"""The read path of the GCS backend: streaming media GETs and the resumable reader over them.

One ``GET .../download/storage/v1/b/BUCKET/o/OBJECT?alt=media`` per shard on the client's
authorized session, read straight from the socket into the caller's buffer. The first GET learns
the object's generation from ``X-Goog-Generation``; every resumed GET is pinned to it
(``generation=G`` with ``Range: bytes=N-``). ``Accept-Encoding: gzip`` makes GCS return the
stored bytes as they are (no decompressive transcoding), so offsets and sizes agree.
"""

from __future__ import annotations

import http.client
import io
from collections.abc import Callable
from typing import IO, Any
from urllib.parse import quote

from wds_cloud.openers.resume import NETWORK_ERRORS, ResumableReader

try:
    import requests
    import urllib3
except ImportError:  # pragma: no cover - exercised only without the extra
    requests = None  # type: ignore[assignment]


def media_url(api_endpoint: str, bucket: str, key: str) -> str:
    """The JSON-API media download URL of ``bucket/key`` (no generation)."""
    return (
        f"{api_endpoint.rstrip('/')}/download/storage/v1/b/"
        f"{quote(bucket, safe='')}/o/{quote(key, safe='')}?alt=media"
    )


def read_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean "the connection or the body stream dropped"."""
    extra: tuple[type[BaseException], ...] = (http.client.HTTPException,)
    if requests is not None:
        extra += (requests.RequestException, urllib3.exceptions.HTTPError)
    return NETWORK_ERRORS + extra


def get_media(
    session: Any,
    media: str,
    *,
    generation: int | None,
    offset: int,
    timeout: tuple[float, float],
) -> Any:
    """Start a streaming media GET (the body is not read yet); returns the response."""
    headers = {"Accept-Encoding": "gzip"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    url = media if generation is None else f"{media}&generation={generation}"
    return session.get(url, headers=headers, stream=True, timeout=timeout)


def stored_size(response: Any) -> int | None:
    """The object's stored size from a 200 response's headers, or None when unknown."""
    for name in ("X-Goog-Stored-Content-Length", "Content-Length"):
        value = response.headers.get(name)
        if value is not None and value.isdigit():
            return int(value)
    return None


class Body(io.RawIOBase):
    """The raw bytes of one streaming HTTP response (no content decoding, no copies).

    A body read to its end gives its connection back to the session's pool, so the next
    request (the next shard) skips the TCP/TLS handshake; a body closed early drops it.
    """

    def __init__(self, response: Any) -> None:
        super().__init__()
        self._response = response
        self._fp = response.raw._fp  # http.client.HTTPResponse

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return int(self._fp.readinto(buffer) or 0)

    def close(self) -> None:
        if not self.closed:
            try:
                if self._fp.isclosed():  # http.client closes it once the whole body is read
                    self._response.raw.release_conn()
            finally:
                self._response.close()
        super().close()


class GcsReader(ResumableReader):
    """A :class:`ResumableReader` whose first stream is an already started GET.

    Args:
        first: the body of the first GET (offset 0).
        fetch: opens the object again from an offset (pinned to ``generation``).
        generation: the object generation being read.
        **kwargs: passed to :class:`ResumableReader` (``url``, ``size``, ``retries``, ...).
    """

    def __init__(
        self,
        first: IO[bytes],
        fetch: Callable[[int], tuple[IO[bytes], int]],
        *,
        generation: int,
        **kwargs: Any,
    ) -> None:
        self._first: IO[bytes] | None = first
        self._refetch = fetch
        self.generation = generation
        super().__init__(self._next_stream, **kwargs)

    def _next_stream(self, offset: int) -> tuple[IO[bytes], int]:
        first, self._first = self._first, None
        if first is not None:
            if offset == 0:
                return first, 0
            first.close()
        return self._refetch(offset)

    def close(self) -> None:
        first, self._first = self._first, None
        if first is not None:
            first.close()
        super().close()
