"""Streaming S3 writer: multipart upload with one part buffer, atomic on ``close()``.

An object written through :class:`S3Writer` becomes visible under its key only when
``close()`` completes: a small object (under one part) is sent with one ``PutObject`` at
``close()``; a larger one is a multipart upload whose ``CompleteMultipartUpload`` is the commit.
``abort()``, an exception inside a ``with`` block, a failed part, or garbage collection of an
unclosed writer all abort the multipart upload, so nothing partial is ever left under the key.
"""

from __future__ import annotations

import io
import logging
from types import TracebackType
from typing import TYPE_CHECKING, Any

from wds_cloud.errors import UploadError

if TYPE_CHECKING:
    from wds_cloud.openers.s3 import S3Opener

log = logging.getLogger(__name__)


class S3Writer(io.RawIOBase):
    """Writable binary stream to ``s3://bucket/key`` (from :meth:`S3Opener.create`).

    Memory is bounded by one part (``multipart_chunksize`` bytes). Parts are uploaded in order
    as the buffer fills.

    Attributes:
        url: the destination URL.
        parts: number of parts uploaded so far (0 for a single ``PutObject``).
        bytes_written: bytes accepted by :meth:`write`.
    """

    def __init__(self, opener: S3Opener, url: str, bucket: str, key: str) -> None:
        super().__init__()
        self._opener = opener
        self.url = url
        self._bucket = bucket
        self._key = key
        self._chunk = int(opener.config.multipart_chunksize or 0)
        self._buffer = bytearray()
        self._upload_id: str | None = None
        self._etags: list[dict[str, Any]] = []
        self._done = False
        self.parts = 0
        self.bytes_written = 0

    def writable(self) -> bool:
        return True

    def _fail(self, exc: BaseException, what: str) -> UploadError:
        self._abort_quietly()
        self._done = True  # a failed writer never commits, not even at close()
        self._buffer = bytearray()
        err = self._opener._error(exc, self.url, writing=True)
        assert isinstance(err, UploadError)
        return UploadError(f"{what}: {err.reason}", url=self.url)

    def write(self, data: Any) -> int:
        """Buffer ``data``; upload a part each time the buffer reaches the part size.

        Raises:
            UploadError: a part upload failed (the multipart upload is aborted).
            ValueError: the writer is closed or aborted.
        """
        if self._done or self.closed:
            raise ValueError(f"write to a closed or aborted S3 writer ({self.url})")
        view = memoryview(data).cast("B")
        n = len(view)
        pos = 0
        while pos < n:
            take = min(n - pos, self._chunk - len(self._buffer))
            self._buffer += view[pos : pos + take]
            pos += take
            if len(self._buffer) >= self._chunk:
                self._upload_part()
        self.bytes_written += n
        return n

    def _upload_part(self) -> None:
        client = self._opener.client()
        extra = self._opener._extra()
        if self._upload_id is None:
            try:
                response = client.create_multipart_upload(
                    Bucket=self._bucket, Key=self._key, **extra
                )
            except Exception as exc:
                raise self._fail(exc, "starting the multipart upload failed") from exc
            self._upload_id = response["UploadId"]
        number = len(self._etags) + 1
        try:
            response = client.upload_part(
                Bucket=self._bucket,
                Key=self._key,
                UploadId=self._upload_id,
                PartNumber=number,
                Body=bytes(self._buffer),
                **extra,
            )
        except Exception as exc:
            raise self._fail(exc, f"uploading part {number} failed") from exc
        self._etags.append({"PartNumber": number, "ETag": response["ETag"]})
        self.parts = number
        self._buffer = bytearray()

    def close(self) -> None:
        """Upload what is buffered and commit the object (idempotent).

        Raises:
            UploadError: the commit failed; the multipart upload was aborted.
        """
        if self._done or self.closed:
            super().close()
            return
        client = self._opener.client()
        extra = self._opener._extra()
        try:
            if self._upload_id is None:
                try:
                    client.put_object(
                        Bucket=self._bucket, Key=self._key, Body=bytes(self._buffer), **extra
                    )
                except Exception as exc:
                    raise self._fail(exc, "PutObject failed") from exc
            else:
                if self._buffer:
                    self._upload_part()
                try:
                    client.complete_multipart_upload(
                        Bucket=self._bucket,
                        Key=self._key,
                        UploadId=self._upload_id,
                        MultipartUpload={"Parts": self._etags},
                        **extra,
                    )
                except Exception as exc:
                    raise self._fail(exc, "completing the multipart upload failed") from exc
        finally:
            self._done = True
            self._buffer = bytearray()
            super().close()

    def abort(self) -> None:
        """Discard everything: abort the multipart upload, nothing appears under the key."""
        if self._done:
            return
        self._abort_quietly()
        self._done = True
        self._buffer = bytearray()
        super().close()

    def _abort_quietly(self) -> None:
        upload_id, self._upload_id = self._upload_id, None
        if upload_id is None:
            return
        try:
            self._opener.client().abort_multipart_upload(
                Bucket=self._bucket, Key=self._key, UploadId=upload_id, **self._opener._extra()
            )
        except Exception as exc:  # the original error matters more; the server GCs uploads
            log.warning("aborting multipart upload %s of %s failed: %r", upload_id, self.url, exc)

    def __enter__(self) -> S3Writer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self.abort()
        else:
            self.close()

    def __del__(self) -> None:
        # Never commit implicitly: an unclosed writer is discarded.
        if not getattr(self, "_done", True):
            self.abort()
