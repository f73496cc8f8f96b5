"""The read path of the S3 backend: ``GetObject`` bodies fed to the one resumable reader.

:class:`ObjectFetch` is the ``fetch(offset)`` of a streaming read (the first ``GetObject``
learns the ETag, every resume sends ``IfMatch`` and ``Range: bytes=N-``); the prefetch chunks of
:mod:`wds_cloud.openers.s3.prefetch` use :func:`raw_body` from here too.
Each request runs in :func:`~wds_cloud.openers.s3.errors.s3_request`: throttling and 5xx
answers (the read client makes one attempt per request) become
:class:`~wds_cloud.openers.streams.resumable.RetryableError`, retried by the read loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wds_cloud.openers.s3.errors import error_code, s3_request
from wds_cloud.openers.streams.resumable import (
    Body,
    Opened,
    Urllib3Body,
    check_content_range,
    explain,
    past_end,
)

try:
    import urllib3.response as u3response
except ImportError:  # pragma: no cover - without the extra nothing here runs (no client)
    pass

if TYPE_CHECKING:
    from wds_cloud.openers.s3.config import S3Access


class _SmallReads:
    """Fallback :class:`Body` over a botocore ``StreamingBody`` when its urllib3 response is
    out of reach: 64 KiB reads, so a reset loses at most that much of the current request."""

    def __init__(self, body: Any) -> None:
        self._body = body

    def read1(self, n: int) -> bytes:
        return bytes(self._body.read(min(n, 1 << 16)))

    def close(self) -> None:
        self._body.close()


def raw_body(streaming_body: Any) -> Body:
    """The body of a ``GetObject`` answer, read one socket read at a time.

    botocore's ``StreamingBody`` offers only ``read(n)``, which loops until ``n`` bytes and drops
    them on a reset, and no public way to its urllib3 response. That response sits in the
    private ``_raw_stream`` attribute (checked with botocore 1.44.5 and urllib3 2.8.0, the
    versions installed in the project environment); when it is a urllib3 2.x response it is read
    with urllib3's public ``read1``, otherwise (another botocore layout, urllib3 1.x) with
    64 KiB reads, which bound what one reset can cost. The read loop checks the content length.
    """
    raw = getattr(streaming_body, "_raw_stream", None)
    base = getattr(u3response, "BaseHTTPResponse", None)  # urllib3 >= 2.0 (has read1)
    if base is not None and isinstance(raw, base):
        return Urllib3Body(raw)
    return _SmallReads(streaming_body)


def total_size(response: dict[str, Any], offset: int) -> int | None:
    """The object's size from a (ranged) ``GetObject`` answer."""
    content_range = response.get("ContentRange")  # "bytes 100-999/1000"
    if content_range and "/" in content_range:
        total = content_range.rsplit("/", 1)[1]
        return int(total) if total.isdigit() else None
    length = response.get("ContentLength")
    return None if length is None else offset + int(length)


class ObjectFetch:
    """``fetch(offset) -> Opened`` of a streaming S3 read, pinned to the first answer's ETag.

    Args:
        access: the read client (one attempt per request), the request arguments and the
            error translation of the opener.
        url: the ``s3://`` URL, for errors.
        bucket: the bucket.
        key: the object key.
    """

    def __init__(self, access: S3Access, url: str, bucket: str, key: str) -> None:
        self.access = access
        self.client = access.client
        self.url = url
        self.bucket = bucket
        self.key = key
        self.answered = False
        self.etag: str | None = None

    def __call__(self, offset: int) -> Opened:
        url = self.url
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": self.key, **self.access.extra}
        if self.etag:
            kwargs["IfMatch"] = self.etag
        if offset:
            kwargs["Range"] = f"bytes={offset}-"
        resumed = self.answered  # a failure after the first answer is a broken read
        with s3_request(
            self.access.translate,
            url=url,
            offset=offset if resumed else None,
            retry=True,
            as_read="resuming the read failed" if resumed else None,
        ):
            try:
                response = self.client.get_object(**kwargs)
            except Exception as exc:
                if offset and error_code(exc) == "InvalidRange":
                    return past_end(url, offset, self._size(exc))
                raise
        if not self.answered:
            self.answered = True
            self.etag = response.get("ETag")
        return Opened(raw_body(response["Body"]), offset, total_size(response, offset))

    def _size(self, exc: BaseException) -> int | None:
        """The object's size after a 416: from the error (AWS sends ``ActualObjectSize``),
        else from ``HeadObject``."""
        actual = getattr(exc, "response", {}).get("Error", {}).get("ActualObjectSize")
        if isinstance(actual, str) and actual.isdigit():
            return int(actual)
        try:
            head = self.client.head_object(Bucket=self.bucket, Key=self.key, **self.access.extra)
        except Exception:
            return None
        size = head.get("ContentLength")
        return size if isinstance(size, int) else None

    def span(self, first: int, end: int) -> Opened:
        """The ``RangeFetch`` of :func:`~wds_cloud.openers.streams.resumable.read_span`: bytes
        ``first .. end - 1`` (``Range: bytes=first-(end-1)``), pinned to the first answer's ETag."""
        kwargs: dict[str, Any] = {
            "Bucket": self.bucket,
            "Key": self.key,
            "Range": f"bytes={first}-{end - 1}",
            **self.access.extra,
        }
        if self.etag:
            kwargs["IfMatch"] = self.etag
        with s3_request(self.access.translate, url=self.url, offset=first, retry=True):
            response = self.client.get_object(**kwargs)
        self.answered = True
        self.etag = self.etag or response.get("ETag")
        body = raw_body(response["Body"])
        try:
            check_content_range(response.get("ContentRange"), first, end, self.url)
        except BaseException:
            body.close()
            raise
        return Opened(body, first)

    def explain(self, exc: BaseException) -> str:
        """The text of the final error for ``exc`` (the reader's ``explain``)."""
        return explain(self.access.translate, self.url, exc)
