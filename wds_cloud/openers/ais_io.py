"""Streams behind :mod:`wds_cloud.openers.ais`: the resumable GET and the multipart writer.

Imported only by :mod:`wds_cloud.openers.ais` after the ``aistore`` SDK import succeeded.
"""

from __future__ import annotations

import io
from typing import IO, TYPE_CHECKING, Any, cast

import requests
import urllib3

from wds_cloud.errors import ShardReadError, UploadError
from wds_cloud.openers.writer import CommittingWriter

if TYPE_CHECKING:
    from wds_cloud.openers.ais import AisOpener, AisTarget


class _Body(io.RawIOBase):
    """The HTTP body of one GET; urllib3 protocol errors become ``ConnectionError``."""

    def __init__(self, raw: Any) -> None:
        super().__init__()
        self._raw = raw

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            return int(self._raw.readinto(buffer) or 0)
        except (urllib3.exceptions.HTTPError, requests.RequestException) as exc:
            raise ConnectionError(f"AIStore stream broke: {exc}") from exc

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()


class Fetcher:
    """``fetch(offset) -> (stream, start)`` for :class:`ResumableReader`."""

    def __init__(self, opener: AisOpener, target: AisTarget) -> None:
        self.opener = opener
        self.target = target
        self.size: int | None = None
        self.checksum: str | None = None
        self._pending: Any = None

    def _get(self, offset: int) -> Any:
        from aistore.sdk.etl import ETLConfig

        t = self.target
        kwargs: dict[str, Any] = {}
        if t.etl:
            kwargs["etl"] = ETLConfig(t.etl, t.etl_args)
        elif offset:
            kwargs["byte_range"] = f"bytes={offset}-"
        reader = self.opener._object(t).get_reader(**kwargs)
        return reader.raw()

    def first(self) -> None:
        """Issue the first GET (kept for offset 0) and note the size and checksum."""
        try:
            raw = self._get(0)
        except Exception as exc:
            raise self.opener._error(exc, self.target, "GET") from exc
        length = raw.headers.get("Content-Length")
        self.size = int(length) if length is not None else None
        self.checksum = raw.headers.get("Ais-Checksum-Value")
        if self.size == 0:
            raw.close()  # nothing to read; the reader never fetches
        else:
            self._pending = raw

    def __call__(self, offset: int) -> tuple[IO[bytes], int]:
        if self._pending is not None and offset == 0:
            raw, self._pending = self._pending, None
            return cast(IO[bytes], _Body(raw)), 0
        if self._pending is not None:
            self._pending.close()
            self._pending = None
        try:
            raw = self._get(offset)
        except (requests.ConnectionError, requests.Timeout):
            raise
        except Exception as exc:
            raise self.opener._error(exc, self.target, f"GET from byte {offset}") from exc
        if self.target.etl:
            return cast(IO[bytes], _Body(raw)), 0
        checksum = raw.headers.get("Ais-Checksum-Value")
        if self.checksum and checksum and checksum != self.checksum:
            raw.close()
            raise ShardReadError(
                f"object changed while it was read (checksum {self.checksum} -> {checksum})",
                url=self.target.url,
                offset=offset,
            )
        return cast(IO[bytes], _Body(raw)), offset if raw.status == 206 else 0


class AisWriter(CommittingWriter):
    """Streams an object to AIStore with bounded memory (one part buffered at a time).

    Small objects (under ``part_size``) go in one PUT at ``close()``; larger ones use AIStore's
    multipart upload, completed at ``close()``. Until then nothing is visible under the name;
    ``abort()``, an exception in a ``with`` block or garbage collection abort the upload.
    """

    def __init__(self, opener: AisOpener, target: AisTarget) -> None:
        self._opener = opener
        self._target = target
        self._obj = opener._object(target)
        self._part_size = int(opener.config.part_size or 1)
        self._buffer = bytearray()
        self._upload: Any = None
        self._parts = 0
        super().__init__(target.url)

    def _error(self, exc: Exception, action: str) -> UploadError:
        doing = f"uploading part {self._parts}" if action == "writing" else "committing the upload"
        return UploadError(
            f"{doing} failed on AIStore at {self._opener.config.endpoint}: {exc}", url=self.url
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
