"""The committing multipart writer behind :meth:`wds_cloud.openers.ais.opener.AisOpener.create`.

Imported only by :mod:`wds_cloud.openers.ais.opener` after the ``aistore`` SDK import succeeded; the
writer gets its SDK object from the opener.
"""

from __future__ import annotations

from typing import Any

from wds_cloud.errors import UploadError
from wds_cloud.openers.ais.errors import describe
from wds_cloud.openers.streams.writer import CommittingWriter


class AisWriter(CommittingWriter):
    """Streams an object to AIStore with bounded memory (one part buffered at a time).

    Small objects (under ``part_size``) go in one PUT at ``close()``; larger ones use AIStore's
    multipart upload, completed at ``close()``. Until then nothing is visible under the name;
    ``abort()``, an exception in a ``with`` block or garbage collection abort the upload.

    Args:
        obj: the SDK ``Object`` to write (on the opener's retrying client).
        url: the destination URL.
        part_size: bytes per multipart-upload part.
        endpoint: the cluster URL, for error messages.
    """

    def __init__(self, obj: Any, url: str, *, part_size: int, endpoint: str) -> None:
        self._obj = obj
        self._part_size = part_size
        self._endpoint = endpoint
        self._buffer = bytearray()
        self._upload: Any = None
        self._parts = 0
        super().__init__(url)

    def _error(self, exc: Exception, action: str) -> UploadError:
        doing = f"uploading part {self._parts}" if action == "writing" else "committing the upload"
        return UploadError(
            f"{doing} failed on AIStore at {self._endpoint}: {describe(exc)}", url=self.url
        )

    def _send_part(self, data: bytes) -> None:
        if self._upload is None:
            self._upload = self._obj.multipart_upload().create()
        self._parts += 1
        self._upload.add_part(self._parts).put_content(data)

    def _write(self, view: memoryview) -> None:
        self._buffer += view
        while len(self._buffer) >= self._part_size:
            part = bytes(self._buffer[: self._part_size])
            del self._buffer[: self._part_size]
            self._send_part(part)

    def _commit(self) -> None:
        if self._upload is None:
            self._obj.get_writer().put_content(bytes(self._buffer))
        else:
            if self._buffer:
                self._send_part(bytes(self._buffer))
            self._upload.complete()
        self._buffer = bytearray()

    def _discard(self) -> None:
        self._buffer = bytearray()
        upload, self._upload = self._upload, None
        if upload is not None:
            upload.abort()
