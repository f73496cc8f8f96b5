"""Streaming uploads to ``gs://`` with a GCS resumable upload session.

At most one ``chunk_size`` chunk is held in memory. The object appears under its name only
when :meth:`GcsWriter.close` sends the final chunk; :meth:`GcsWriter.abort` (or any failure, an
exception in a ``with`` block, garbage collection) cancels the session, so a broken upload never leaves a partial object behind. If the final
request commits an object whose CRC32C differs from the bytes sent (a retried chunk stored
twice), that object is deleted again and :class:`UploadError` says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wds_cloud.errors import UploadError
from wds_cloud.openers.streams.writer import CommittingWriter

if TYPE_CHECKING:
    from wds_cloud.openers.streams.resumable import TranslateError


class GcsWriter(CommittingWriter):
    """Writable binary stream over ``Blob.open("wb")`` (a resumable upload).

    Args:
        blob: the ``google.cloud.storage.Blob`` to create.
        url: the destination URL, for error messages.
        translate: the opener's error translation (endpoint bound), for error messages.
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
        translate: TranslateError,
        chunk_size: int,
        content_type: str = "application/x-tar",
        timeout: tuple[float, float] = (30.0, 120.0),
        retry: Any = None,
    ) -> None:
        self._blob = blob
        self._translate = translate
        kwargs: dict[str, Any] = {"content_type": content_type, "timeout": timeout}
        self._writer = blob.open(
            "wb", chunk_size=chunk_size, ignore_flush=True, retry=retry, **kwargs
        )
        super().__init__(url)

    def _failure(self, exc: BaseException, doing: str) -> UploadError:
        if isinstance(exc, UploadError):
            reason = exc.reason
        else:
            reason = self._translate(exc, url=self.url).reason
        return UploadError(f"{doing} after {self.bytes_written} bytes: {reason}", url=self.url)

    def _error(self, exc: Exception, action: str) -> UploadError:
        doing = "upload failed" if action == "writing" else "committing the upload failed"
        return self._failure(exc, doing)

    def _write(self, view: memoryview) -> None:
        self._writer.write(view)

    def _commit(self) -> None:
        """Send the last chunk: the object appears under its name."""
        try:
            self._writer.close()
        except Exception as exc:
            outcome = self._remove_corrupt(exc)
            raise self._failure(exc, f"committing the upload failed{outcome}") from exc

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

    def _discard(self) -> None:
        """Cancel the upload session; nothing appears under the destination name."""
        try:
            self._writer.terminate()
        except Exception:
            # Cancelling is best effort: an unfinished session never becomes an object and
            # GCS expires it after a week.
            pass
