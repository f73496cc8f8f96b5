"""The read path of the GCS backend: streaming media GETs fed to the one resumable reader.

One ``GET .../download/storage/v1/b/BUCKET/o/OBJECT?alt=media`` per shard on an authorized
``requests`` session, its body read one socket read at a time (urllib3's public ``read1`` on
``Response.raw``) by :class:`~wds_cloud.openers.streams.resumable.ResumableReader`. The first GET learns
the object's generation from ``X-Goog-Generation``; every resumed GET is pinned to it
(``generation=G`` with ``Range: bytes=N-``). ``Accept-Encoding: gzip`` makes GCS return the
stored bytes as they are (no decompressive transcoding), so offsets and sizes agree. Every GET
carries a ``(connect, read)`` timeout, the read part clipped to the stall deadline.

A read from a byte offset (``GcsOpener.open_at``) starts with ``Range: bytes=N-``; the size comes
from the answer's ``Content-Range``, so a body that ends early is resumed, not taken for the end.
A range at the object's end or past it (416) is an empty stream or an error naming the size.
"""

from __future__ import annotations

import http.client
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from wds_cloud.errors import ShardNotFoundError, ShardReadError
from wds_cloud.openers.streams.resumable import (
    NETWORK_ERRORS,
    Opened,
    ResumableReader,
    content_range_total,
    explain,
    fetch_span,
    first_answer,
    past_end,
    transient_error,
)
from wds_cloud.openers.streams.throttle import retry_after_seconds
from wds_cloud.urls import ObjectUrl

try:
    import requests
    import urllib3
    from google.api_core import exceptions as gexc
except ImportError:  # pragma: no cover - exercised only without the extra
    requests = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from wds_cloud.openers.gcs.config import GcsAccess


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
    end: int | None = None,
) -> Any:
    """Start a streaming media GET (the body is not read yet); returns the response.

    ``end`` (exclusive) bounds the range; without it the GET runs to the end of the object.
    """
    headers = {"Accept-Encoding": "gzip"}
    if end is not None:
        headers["Range"] = f"bytes={offset}-{end - 1}"
    elif offset:
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


class GcsReader(ResumableReader):
    """A :class:`ResumableReader` over media GETs that also says which generation it reads.

    Attributes:
        generation: the object generation being read (known once :meth:`start` returned).
    """

    generation: int | None = None


class MediaFetch:
    """``fetch(offset) -> Opened`` of a :class:`GcsReader`: media GETs on the opener's session,
    pinned to the generation of the first answer.

    Args:
        access: the opener's storage client (metadata after a 404), media session, timeouts,
            retry policy of metadata calls and error translation.
        url: the shard URL, for errors.
        parsed: ``url`` parsed.
        wanted: a generation asked for by the caller, or None for the live object.

    Attributes:
        generation: the pinned generation, once the first answer came.
    """

    def __init__(self, access: GcsAccess, url: str, parsed: ObjectUrl, wanted: Any) -> None:
        self.access = access
        self.client = access.client
        self.url = url
        self.parsed = parsed
        self.media = media_url(access.client.api_endpoint, parsed.bucket, parsed.key)
        self.wanted = None if wanted is None else int(wanted)
        self.generation: int | None = None
        self.end: int | None = None  # set by span(): every GET stops there
        self.content_range: str | None = None  # of the last answer

    def span(self, first: int, end: int) -> Opened:
        """The ``RangeFetch`` of :func:`~wds_cloud.openers.streams.resumable.read_span`: bytes
        ``first .. end - 1``, pinned to the generation of the first answer."""
        return fetch_span(self, first, end, self.url)

    def __call__(self, offset: int) -> Opened:
        access = self.access
        try:
            response = get_media(
                access.session,
                self.media,
                generation=self.generation if self.generation is not None else self.wanted,
                offset=offset,
                timeout=access.media_timeout,
                end=self.end,
            )
        except read_errors():
            raise
        except Exception as exc:  # credentials (token refresh) and other SDK errors
            raise access.translate(exc, url=self.url) from exc
        status = response.status_code
        if status == 416 and self.generation is None and self.end is None:
            return self._past_end(response, offset)
        if status not in (200, 206):
            raise self._status_error(response, offset)
        if self.generation is None:
            header = response.headers.get("X-Goog-Generation")
            if header is not None:
                self.generation = int(header)
            elif self.wanted is not None:
                self.generation = self.wanted
            else:  # an endpoint that does not send the header: ask the metadata
                self.generation = int(self._current(response).generation)
        self.content_range = response.headers.get("Content-Range")
        if status == 200:
            size = stored_size(response)
        else:
            size = content_range_total(self.content_range)
        return first_answer(response.raw, self.url, offset, status, size)

    def explain(self, exc: BaseException) -> str:
        """The text of the final error for ``exc`` (the reader's ``explain``)."""
        return explain(self.access.translate, self.url, exc)

    def _past_end(self, response: Any, offset: int) -> Opened:
        """A first GET from ``offset`` refused with 416: empty at the end, else an error."""
        size = content_range_total(response.headers.get("Content-Range"))
        response.close()
        if size is None:  # GCS does not always say the size: ask the metadata
            try:
                blob = self._metadata()
            except Exception as exc:
                raise self.access.translate(exc, url=self.url) from exc
            if blob is None:
                raise self.missing()
            size = blob.size
            self.generation = int(blob.generation)
        return past_end(self.url, offset, size)

    def _metadata(self) -> Any:
        bucket = self.client.bucket(self.parsed.bucket)
        return bucket.get_blob(
            self.parsed.key, timeout=self.access.timeout, retry=self.access.retry
        )

    def missing(self) -> ShardNotFoundError:
        """The error for a 404: names the bucket when it is the bucket that is missing."""
        parsed = self.parsed
        try:
            bucket_exists = self.client.bucket(parsed.bucket).exists(
                timeout=self.access.timeout, retry=self.access.retry
            )
        except Exception:
            bucket_exists = True  # say the object is missing, which is certainly true
        what = (
            f"object {parsed.key!r} does not exist in bucket {parsed.bucket!r}"
            if bucket_exists
            else f"bucket {parsed.bucket!r} does not exist"
        )
        return ShardNotFoundError(what, url=self.url)

    def _current(self, response: Any) -> Any:
        try:
            blob = self._metadata()
        except Exception as exc:
            response.close()
            raise self.access.translate(exc, url=self.url) from exc
        if blob is None:
            response.close()
            raise self.missing()
        return blob

    def _status_error(self, response: Any, offset: int) -> Exception:
        """The error for a media GET answered with ``response`` (not 200/206); closes it."""
        status = response.status_code
        try:
            error = gexc.from_http_response(response)
        finally:
            response.close()
        if status >= 500 or status == 429:
            what = f"GCS answered {status} at offset {offset}: {error.message}"
            wait = retry_after_seconds(response.headers.get("Retry-After"))
            return transient_error(what, status, wait)
        translate = self.access.translate
        if self.generation is None:  # the first answer: say precisely what is wrong
            if status == 404:
                return self.missing()
            return translate(error, url=self.url)
        if status != 404:
            return translate(error, url=self.url, offset=offset)
        try:
            current = self._metadata()
        except Exception:
            current = None
        if current is None:
            what = "was deleted while being read"
        else:
            what = (
                f"changed while being read (generation {self.generation} -> {current.generation})"
            )
        return ShardReadError(f"object {what}", url=self.url, offset=offset)
