"""Streaming S3 writer: multipart upload with one part buffer, atomic on ``close()``.

An object written through :class:`S3Writer` becomes visible under its key only when
``close()`` completes: a small object (under one part) is sent with one ``PutObject`` at
``close()``; a larger one is a multipart upload whose ``CompleteMultipartUpload`` is the commit.
``abort()``, an exception inside a ``with`` block, a failed part, or garbage collection of an
unclosed writer (with a :class:`ResourceWarning`) all abort the multipart upload, so nothing
partial is ever left under the key (see :class:`~wds_cloud.openers.streams.writer.CommittingWriter`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from wds_cloud.errors import UploadError
from wds_cloud.openers.s3.errors import s3_request, upload_error
from wds_cloud.openers.streams.writer import CommittingWriter
from wds_cloud.redact import redact_url

if TYPE_CHECKING:
    from wds_cloud.openers.s3.config import S3Access

log = logging.getLogger(__name__)


class S3Writer(CommittingWriter):
    """Writable binary stream to ``s3://bucket/key`` (from :meth:`S3Opener.create`).

    Memory is bounded by one part (``multipart_chunksize`` bytes). Parts are uploaded in order
    as the buffer fills.

    Attributes:
        url: the destination URL.
        parts: number of parts uploaded so far (0 for a single ``PutObject``).
        bytes_written: bytes accepted by :meth:`write`.

    Args:
        access: the opener's (retrying) client, request arguments and error translation.
        url: the destination URL.
        bucket: the bucket.
        key: the object key.
        chunk_size: bytes per part (``multipart_chunksize``).
    """

    def __init__(
        self, access: S3Access, url: str, bucket: str, key: str, *, chunk_size: int
    ) -> None:
        self._access = access
        self._bucket = bucket
        self._key = key
        self._chunk = chunk_size
        self._buffer = bytearray()
        self._upload_id: str | None = None
        self._etags: list[dict[str, Any]] = []
        self.parts = 0
        super().__init__(url)

    def _error(self, exc: Exception, action: str) -> UploadError:
        doing = f"{action}: S3 upload failed"
        return upload_error(exc, self._access.translate, url=self.url, doing=doing)

    def _call(self, action: str, method: str, **kwargs: Any) -> Any:
        with s3_request(
            self._access.translate, url=self.url, as_upload=f"{action} failed: S3 upload failed"
        ):
            return getattr(self._access.client, method)(
                Bucket=self._bucket, Key=self._key, **kwargs, **self._access.extra
            )

    def _write(self, view: memoryview) -> None:
        n = len(view)
        pos = 0
        while pos < n:
            take = min(n - pos, self._chunk - len(self._buffer))
            self._buffer += view[pos : pos + take]
            pos += take
            if len(self._buffer) >= self._chunk:
                self._upload_part()

    def _upload_part(self) -> None:
        if self._upload_id is None:
            response = self._call("starting the multipart upload", "create_multipart_upload")
            self._upload_id = response["UploadId"]
        number = len(self._etags) + 1
        response = self._call(
            f"uploading part {number}",
            "upload_part",
            UploadId=self._upload_id,
            PartNumber=number,
            Body=bytes(self._buffer),
        )
        self._etags.append({"PartNumber": number, "ETag": response["ETag"]})
        self.parts = number
        self._buffer = bytearray()

    def _commit(self) -> None:
        if self._upload_id is None:
            self._call("PutObject", "put_object", Body=bytes(self._buffer))
        else:
            if self._buffer:
                self._upload_part()
            self._call(
                "completing the multipart upload",
                "complete_multipart_upload",
                UploadId=self._upload_id,
                MultipartUpload={"Parts": self._etags},
            )
            self._upload_id = None
        self._buffer = bytearray()

    def _discard(self) -> None:
        """Abort the multipart upload (if one started): nothing appears under the key."""
        self._buffer = bytearray()
        upload_id, self._upload_id = self._upload_id, None
        if upload_id is None:
            return
        try:
            self._access.client.abort_multipart_upload(
                Bucket=self._bucket, Key=self._key, UploadId=upload_id, **self._access.extra
            )
        except Exception as exc:  # the original error matters more; the server GCs uploads
            log.warning(
                "aborting multipart upload %s of %s failed: %r",
                upload_id,
                redact_url(self.url),
                exc,
            )
