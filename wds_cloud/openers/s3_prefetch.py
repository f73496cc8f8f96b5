"""Parallel ranged prefetch for S3 reads (``S3Config.prefetch = N``).

The object's size and ETag come from one ``HeadObject``; then up to N ranged ``GetObject``
requests of ``prefetch_chunk`` bytes run in worker threads, each pinned to that ETag with
``IfMatch`` (an object replaced mid-read gives a 412 and a :class:`ShardReadError`). The reader
consumes the chunks strictly in order, so memory is bounded by (N + 1) x ``prefetch_chunk``. A
chunk whose connection drops is re-requested (``retries`` times in a row, with backoff).
``close()`` cancels what has not started and joins the threads; a request already in flight
finishes first (at most one chunk per thread), so no thread outlives the stream.
"""

from __future__ import annotations

import collections
import io
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, TYPE_CHECKING, Any

from wds_cloud.errors import ShardError, ShardReadError

if TYPE_CHECKING:
    from wds_cloud.openers.s3 import S3Config, S3Opener


def open_prefetching(
    opener: S3Opener, cfg: S3Config, url: str, bucket: str, key: str
) -> IO[bytes] | None:
    """A :class:`PrefetchReader` for the object, or None to fall back to one streaming GET.

    None is returned for objects no larger than one chunk and when ``HeadObject`` fails (the
    streaming path then raises the precise error: no such key, no such bucket, access denied).
    """
    try:
        head = opener.client().head_object(Bucket=bucket, Key=key, **opener._extra())
    except Exception:
        return None
    size = int(head["ContentLength"])
    if size <= int(cfg.prefetch_chunk or 0):
        return None
    return PrefetchReader(opener, cfg, url, bucket, key, size=size, etag=head["ETag"])  # type: ignore[return-value]


class PrefetchReader(io.RawIOBase):
    """Ordered stream over parallel ranged GETs; see the module docstring.

    Attributes:
        url: the object URL.
        size: object size in bytes.
        resumes: chunk requests repeated after a dropped connection.
    """

    def __init__(
        self,
        opener: S3Opener,
        cfg: S3Config,
        url: str,
        bucket: str,
        key: str,
        *,
        size: int,
        etag: str,
    ) -> None:
        super().__init__()
        from wds_cloud.openers.s3 import read_errors

        self._opener = opener
        self._client = opener.client()
        self._extra = opener._extra()
        self.url = url
        self._bucket = bucket
        self._key = key
        self.size = size
        self._etag = etag
        self._chunk = int(cfg.prefetch_chunk or 1)
        self._retries = int(cfg.retries or 0)
        self._backoff = float(cfg.backoff or 0.0)
        self._read_errors = read_errors()
        self._nchunks = (size + self._chunk - 1) // self._chunk
        self._depth = max(1, int(cfg.prefetch or 1))
        self._cancel = threading.Event()
        self._pool = ThreadPoolExecutor(self._depth, thread_name_prefix="wds-s3-prefetch")
        self._pending: collections.deque[Future[bytes]] = collections.deque()
        self._scheduled = 0
        self._current = memoryview(b"")
        self._pos = 0
        self.position = 0
        self.resumes = 0
        self._fill()

    def readable(self) -> bool:
        return True

    def _fill(self) -> None:
        while len(self._pending) < self._depth and self._scheduled < self._nchunks:
            self._pending.append(self._pool.submit(self._fetch, self._scheduled))
            self._scheduled += 1

    def _fetch(self, index: int) -> bytes:
        start = index * self._chunk
        end = min(self.size, start + self._chunk)
        failures = 0
        while True:
            if self._cancel.is_set():
                return b""
            error: BaseException | None = None
            try:
                response = self._client.get_object(
                    Bucket=self._bucket,
                    Key=self._key,
                    Range=f"bytes={start}-{end - 1}",
                    IfMatch=self._etag,
                    **self._extra,
                )
                data: bytes = response["Body"].read()
                if len(data) == end - start:
                    return data
                error = None
            except self._read_errors as exc:
                if isinstance(exc, ShardError):
                    raise
                error = exc
            except Exception as exc:
                err = self._opener._error(exc, self.url, offset=start)
                if not isinstance(err, ShardReadError):
                    err = ShardReadError(
                        f"ranged read failed: {err.reason}", url=self.url, offset=start
                    )
                raise err from exc
            failures += 1
            if failures > self._retries:
                what = repr(error) if error else "short ranged response"
                raise ShardReadError(
                    f"giving up on bytes {start}-{end - 1} after {self._retries} retries: {what}",
                    url=self.url,
                    offset=start,
                ) from error
            self.resumes += 1
            self._cancel.wait(min(5.0, self._backoff * 2 ** (failures - 1)))

    def readinto(self, buffer: Any) -> int:
        if self.closed:
            raise ValueError(f"read from a closed stream ({self.url})")
        view = memoryview(buffer).cast("B")
        if not len(view):
            return 0
        if self._pos >= len(self._current):
            if not self._pending:
                return 0
            future = self._pending.popleft()
            self._fill()
            self._current = memoryview(future.result())
            self._pos = 0
        n = min(len(view), len(self._current) - self._pos)
        view[:n] = self._current[self._pos : self._pos + n]
        self._pos += n
        self.position += n
        return n

    def close(self) -> None:
        if not self.closed:
            self._cancel.set()
            for future in self._pending:
                future.cancel()
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pending.clear()
            self._current = memoryview(b"")
        super().close()
