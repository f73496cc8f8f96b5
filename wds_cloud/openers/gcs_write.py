"""Streaming uploads to ``gs://`` with a GCS resumable upload session.

At most one ``chunk_size`` chunk is held in memory. The object appears under its name only
when :meth:`GcsWriter.close` sends the final chunk; :meth:`GcsWriter.abort` (or any failure)
cancels the session, so a broken upload never leaves a partial object behind. If the final
request commits an object whose CRC32C differs from the bytes sent (a retried chunk stored
twice), that object is deleted again and :class:`UploadError` says so.
"""

from __future__ import annotations

import io
from typing import Any

from wds_cloud.errors import UploadError


class GcsWriter(io.RawIOBase):
    """Writable binary stream over ``Blob.open("wb")`` (a resumable upload).

    Args:
        blob: the ``google.cloud.storage.Blob`` to create.
        url: the destination URL, for error messages.
        endpoint: the API endpoint, for error messages.
        chunk_size: bytes per uploaded chunk (a multiple of 256 KiB).
        content_type: the stored content type.
        timeout: ``(connect, read)`` seconds per request.
        retry: the SDK retry policy for each request of the session (``None``: no retries).
            Chunks carry their offsets, so retrying them is safe.
    """

    def __init__(
        self,
        blob: Any,
        *,
        url: str,
        endpoint: str,
        chunk_size: int,
        content_type: str = "application/x-tar",
        timeout: tuple[float, float] = (30.0, 120.0),
        retry: Any = None,
    ) -> None:
        super().__init__()
        self._blob = blob
        self.url = url
        self.endpoint = endpoint
        self.bytes_written = 0
        kwargs: dict[str, Any] = {"content_type": content_type, "timeout": timeout}
        self._writer = blob.open(
            "wb", chunk_size=chunk_size, ignore_flush=True, retry=retry, **kwargs
        )
        self._done = False

    def writable(self) -> bool:
        return True

    def _fail(self, exc: BaseException, doing: str) -> UploadError:
        from wds_cloud.openers.gcs import translate_error

        self.abort()
        cause = translate_error(exc, url=self.url, endpoint=self.endpoint)
        return UploadError(
            f"{doing} after {self.bytes_written} bytes: {getattr(cause, 'reason', cause)}",
            url=self.url,
        )

    def write(self, data: Any) -> int:
        """Buffer ``data``, uploading every full chunk.

        Raises:
            UploadError: the upload failed; the session is cancelled.
            ValueError: the writer is closed or aborted.
        """
        if self._done:
            raise ValueError(f"write to a closed GCS writer for {self.url}")
        view = memoryview(data).cast("B")
        try:
            self._writer.write(view)
        except Exception as exc:
            raise self._fail(exc, "upload failed") from exc
        self.bytes_written += len(view)
        return len(view)

    def close(self) -> None:
        """Send the last chunk and commit the object.

        Raises:
            UploadError: the final request failed; the session is cancelled.
        """
        if self._done:
            super().close()
            return
        try:
            self._writer.close()
        except Exception as exc:
            outcome = self._remove_corrupt(exc)
            raise self._fail(exc, f"committing the upload failed{outcome}") from exc
        finally:
            self._done = True
            super().close()

    def _remove_corrupt(self, exc: BaseException) -> str:
        """Delete an object the final request committed with a checksum mismatch.

        The SDK compares the object's CRC32C with what was sent only after GCS committed it;
        on a mismatch the wrong object must not stay under the final name. The delete is
        pinned to the committed generation, so a newer object written meanwhile is kept.
        """
        response = getattr(exc, "response", None)
        if type(exc).__name__ != "DataCorruption" or response is None:
            return ""
        try:
            generation = int(response.json()["generation"])
        except Exception:
            return " (the committed object's generation is unknown; it may remain)"
        try:
            self._blob.delete(if_generation_match=generation)
        except Exception as delete_exc:
            return f" (deleting the corrupted object failed: {delete_exc}; it may remain)"
        return " (the corrupted object was deleted)"

    def abort(self) -> None:
        """Cancel the upload; nothing appears under the destination name."""
        if self._done:
            return
        self._done = True
        try:
            self._writer.terminate()
        except Exception:
            # Cancelling is best effort: an unfinished session never becomes an object and
            # GCS expires it after a week.
            pass
        super().close()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self.abort()
        else:
            self.close()
