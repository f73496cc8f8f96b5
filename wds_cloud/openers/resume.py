"""A read stream that survives dropped connections by re-requesting from the exact offset.

Backends supply ``fetch(offset) -> (stream, start)``: a fresh raw stream whose first byte is at
``start`` (normally ``start == offset``, from a ``Range: bytes=offset-`` request; a backend that
cannot seek, such as an AIStore inline ETL, returns ``start == 0`` and the bytes already delivered
are skipped). The backend pins the object version (ETag, generation) in ``fetch`` so a shard
replaced mid-read raises instead of mixing two versions.
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Callable
from typing import IO, Any

from wds_cloud.errors import ShardError, ShardReadError

log = logging.getLogger(__name__)

Fetch = Callable[[int], tuple[IO[bytes], int]]

#: Exceptions treated as a dropped connection (the backend may add its own).
NETWORK_ERRORS: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError, OSError)


class ResumableReader(io.RawIOBase):
    """Readable stream over ``fetch`` that resumes after failures.

    Args:
        fetch: opens the object from a byte offset; see the module docstring.
        url: shard URL, for error messages.
        size: total size when known; a stream that ends before it counts as a drop.
        retries: consecutive failed attempts allowed before giving up (reset by progress).
        backoff: first delay in seconds; doubles each attempt up to ``max_backoff``.
        retry_on: exception types that mean "connection dropped, try again".
        sleep: the sleep function (tests pass a no-op).
    """

    def __init__(
        self,
        fetch: Fetch,
        *,
        url: str,
        size: int | None = None,
        retries: int = 5,
        backoff: float = 0.1,
        max_backoff: float = 5.0,
        retry_on: tuple[type[BaseException], ...] = NETWORK_ERRORS,
        sleep: Callable[[float], Any] = time.sleep,
    ) -> None:
        super().__init__()
        self._fetch = fetch
        self.url = url
        self.size = size
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.retry_on = retry_on
        self._sleep = sleep
        self.position = 0
        self.resumes = 0
        self._stream: IO[bytes] | None = None
        self._skip = 0

    def readable(self) -> bool:
        return True

    def _open(self) -> None:
        stream, start = self._fetch(self.position)
        if start > self.position:
            stream.close()
            raise ShardReadError(
                f"backend resumed at byte {start}, after the requested {self.position}",
                url=self.url,
                offset=self.position,
            )
        self._stream = stream
        self._skip = self.position - start

    def _drop(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            try:
                stream.close()
            except Exception:  # a broken connection may fail to close; it is gone either way
                pass

    def _read_some(self, view: memoryview) -> int:
        assert self._stream is not None
        while self._skip:
            chunk = self._stream.read(min(self._skip, 1 << 20))
            if not chunk:
                return 0
            self._skip -= len(chunk)
        readinto = getattr(self._stream, "readinto", None)
        if readinto is not None:
            n = readinto(view)
            return 0 if n is None else int(n)
        data = self._stream.read(len(view))
        view[: len(data)] = data
        return len(data)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        if not len(view) or (self.size is not None and self.position >= self.size):
            return 0
        if self.size is not None:
            view = view[: self.size - self.position]
        failures = 0
        while True:
            error: BaseException | None = None
            try:
                if self._stream is None:
                    self._open()
                n = self._read_some(view)
            except ShardError:
                self._drop()
                raise
            except self.retry_on as exc:
                error = exc
                n = 0
            if n:
                self.position += n
                return n
            if error is None and self.size is None:
                return 0  # a clean end of stream of unknown length
            # Dropped: an exception, or EOF before the announced size.
            self._drop()
            failures += 1
            if failures > self.retries:
                what = repr(error) if error else f"stream ended early (expected {self.size} bytes)"
                raise ShardReadError(
                    f"giving up after {self.retries} retries: {what}",
                    url=self.url,
                    offset=self.position,
                ) from error
            delay = min(self.max_backoff, self.backoff * (2 ** (failures - 1)))
            log.info("resuming %s at byte %d in %.2fs (%r)", self.url, self.position, delay, error)
            self.resumes += 1
            self._sleep(delay)

    def close(self) -> None:
        self._drop()
        super().close()
