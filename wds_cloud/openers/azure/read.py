"""The read path of the Azure backend: streaming blob GETs fed to the one resumable reader.

One ``GET {endpoint}/{container}/{blob}`` per shard on a ``requests`` session of our own,
carrying the account's credential (a read SAS, or a bearer token: :mod:`.auth`), its body read
one socket read at a time (urllib3's ``read1``) by
:class:`~wds_cloud.openers.streams.resumable.ResumableReader`. The first answer's ``ETag`` pins
the blob: every resumed or ranged GET sends ``If-Match``, so a blob rewritten mid-read answers
412 and the read raises :class:`ShardReadError` naming the URL, never mixing two versions.
``Range: bytes=N-`` resumes after the last byte received; a ranged answer's ``Content-Range``
gives the size. A range at the blob's end or past it (416) is an empty stream or an error
naming the size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wds_cloud.errors import ShardNotFoundError, ShardReadError
from wds_cloud.openers.azure.errors import AzureStatusError, read_errors
from wds_cloud.openers.streams.resumable import (
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

if TYPE_CHECKING:
    from wds_cloud.openers.azure.config import AzureAccess, BlobUrl


class AzureReader(ResumableReader):
    """A :class:`ResumableReader` over blob GETs that also says which version it reads.

    Attributes:
        etag: the ETag every request after the first is pinned to (known once :meth:`start`
            returned).
    """

    etag: str | None = None


def status_error(response: Any) -> AzureStatusError:
    """The :class:`AzureStatusError` of an error answer (closes it)."""
    code = response.headers.get("x-ms-error-code", "")
    try:
        message = response.reason or ""
    finally:
        response.close()
    return AzureStatusError(int(response.status_code), code, message)


class BlobFetch:
    """``fetch(offset) -> Opened`` of an :class:`AzureReader`: blob GETs pinned to the ETag
    of the first answer.

    Args:
        access: the opener's session, URL signer, headers, timeouts and error translation.
        url: the shard URL, for errors.
        parsed: ``url`` parsed.
        etag: an ETag to pin from the start (prefetch parts), or None.

    Attributes:
        etag: the pinned ETag, once the first answer came.
        end: set by :meth:`span`: every GET stops there (exclusive).
        content_range: the last answer's ``Content-Range``.
    """

    def __init__(self, access: AzureAccess, url: str, parsed: BlobUrl, etag: str | None) -> None:
        self.access = access
        self.url = url
        self.parsed = parsed
        self.etag = etag
        self.end: int | None = None
        self.content_range: str | None = None

    def span(self, first: int, end: int) -> Opened:
        """The ``RangeFetch`` of :func:`~wds_cloud.openers.streams.resumable.read_span`."""
        return fetch_span(self, first, end, self.url)

    def _get(self, offset: int) -> Any:
        access = self.access
        headers = {**access.headers(), "Accept-Encoding": "identity"}
        if self.end is not None:
            headers["Range"] = f"bytes={offset}-{self.end - 1}"
        elif offset:
            headers["Range"] = f"bytes={offset}-"
        if self.etag is not None:
            headers["If-Match"] = self.etag
        target = access.blob_url(self.parsed.container, self.parsed.key)
        try:
            return access.session.get(target, headers=headers, stream=True, timeout=access.timeout)
        except read_errors():
            raise
        except Exception as exc:  # a token that cannot be had, and other credential errors
            raise access.translate(exc, url=self.url) from exc

    def __call__(self, offset: int) -> Opened:
        response = self._get(offset)
        status = response.status_code
        if status == 416 and self.end is None:
            return self._past_end(response, offset)
        if status not in (200, 206):
            raise self._status_error(response, offset)
        if self.etag is None:
            self.etag = response.headers.get("ETag")
        self.content_range = response.headers.get("Content-Range")
        if status == 200:
            length = response.headers.get("Content-Length")
            size = int(length) if length is not None and length.isdigit() else None
        else:
            size = content_range_total(self.content_range)
        return first_answer(response.raw, self.url, offset, status, size)

    def explain(self, exc: BaseException) -> str:
        """The text of the final error for ``exc`` (the reader's ``explain``)."""
        return explain(self.access.translate, self.url, exc)

    def _past_end(self, response: Any, offset: int) -> Opened:
        """A GET from ``offset`` refused with 416: empty at the end, else an error."""
        size = content_range_total(response.headers.get("Content-Range"))
        response.close()
        if size is None:  # Azure does not say the size with a 416: ask for it
            size = self._size()
        return past_end(self.url, offset, size)

    def _size(self) -> int | None:
        access = self.access
        try:
            head = access.session.head(
                access.blob_url(self.parsed.container, self.parsed.key),
                headers=access.headers(),
                timeout=access.timeout,
            )
        except Exception as exc:
            raise access.translate(exc, url=self.url) from exc
        head.close()
        if head.status_code == 404:
            raise self.missing()
        length = head.headers.get("Content-Length")
        return int(length) if length is not None and length.isdigit() else None

    def missing(self) -> ShardNotFoundError:
        """The error for a 404: names the container when it is the container that is missing."""
        parsed = self.parsed
        try:
            exists = bool(self.access.container_exists(parsed.container))
        except Exception:
            exists = True  # say the blob is missing, which is certainly true
        what = (
            f"blob {parsed.key!r} does not exist in container {parsed.container!r}"
            if exists
            else f"container {parsed.container!r} does not exist"
        )
        return ShardNotFoundError(what, url=self.url)

    def _status_error(self, response: Any, offset: int) -> Exception:
        """The error for a GET answered with ``response`` (not 200/206); closes it."""
        error = status_error(response)
        status = error.status
        if status >= 500 or status in (408, 429):
            wait = retry_after_seconds(response.headers.get("Retry-After"))
            return transient_error(f"{error} at offset {offset}", status, wait)
        if status == 412:
            return ShardReadError(
                f"blob changed or was deleted while being read (ETag {self.etag} no longer matches)",
                url=self.url,
                offset=offset,
            )
        if status == 404:
            if self.etag is None:
                return self.missing()
            return ShardReadError("blob was deleted while being read", url=self.url, offset=offset)
        return self.access.translate(error, url=self.url, offset=offset if offset else None)
