"""Streams behind :mod:`wds_cloud.openers.ais`: the resumable GET and the multipart writer.

Imported only by :mod:`wds_cloud.openers.ais` after the ``aistore`` SDK import succeeded.
"""

from __future__ import annotations

import io
from typing import IO, TYPE_CHECKING, Any, cast

import requests
import urllib3

from wds_cloud.errors import ShardReadError, UploadError

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


class AisWriter(io.RawIOBase):
    """Streams an object to AIStore with bounded memory (one part buffered at a time).

    Small objects (under ``part_size``) go in one PUT at ``close()``; larger ones use AIStore's
    multipart upload, completed at ``close()``. Until then nothing is visible under the name.
    """

    def __init__(self, opener: AisOpener, target: AisTarget) -> None:
        super().__init__()
        self.url = target.url
        self._opener = opener
        self._target = target
        self._obj = opener._object(target)
        self._part_size = int(opener.config.part_size or 1)
        self._buffer = bytearray()
        self._upload: Any = None
        self._parts = 0
        self._done = False
        self.bytes_written = 0

    def writable(self) -> bool:
        return True

    def _fail(self, exc: BaseException, action: str) -> UploadError:
        self.abort()
        return UploadError(
            f"{action} failed on AIStore at {self._opener.config.endpoint}: {exc}", url=self.url
        )

    def _send_part(self, data: bytes) -> None:
        if self._upload is None:
            self._upload = self._obj.multipart_upload().create()
        self._parts += 1
        self._upload.add_part(self._parts).put_content(data)

    def write(self, data: Any) -> int:
        if self._done:
            raise ValueError(f"write to a closed or aborted AIStore writer for {self.url!r}")
        view = memoryview(data).cast("B")
        self._buffer += view
        self.bytes_written += len(view)
        try:
            while len(self._buffer) >= self._part_size:
                part = bytes(self._buffer[: self._part_size])
                del self._buffer[: self._part_size]
                self._send_part(part)
        except Exception as exc:
            raise self._fail(exc, f"uploading part {self._parts}") from exc
        return len(view)

    def close(self) -> None:
        """Commit: the object becomes visible under its name."""
        if self._done:
            super().close()
            return
        try:
            if self._upload is None:
                self._obj.get_writer().put_content(bytes(self._buffer))
            else:
                if self._buffer:
                    self._send_part(bytes(self._buffer))
                self._upload.complete()
        except Exception as exc:
            raise self._fail(exc, "committing the upload") from exc
        self._buffer = bytearray()
        self._done = True
        super().close()

    def abort(self) -> None:
        """Discard everything written; nothing appears under the name."""
        if not self._done and self._upload is not None:
            try:
                self._upload.abort()
            except Exception:  # best effort: the upload is being abandoned anyway
                pass
        self._buffer = bytearray()
        self._done = True
        super().close()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self.abort()
        else:
            self.close()
