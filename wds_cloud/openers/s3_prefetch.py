"""Parallel ranged prefetch for S3 reads (``S3Config.prefetch = N``).

The object's size and ETag come from one ``HeadObject``; then up to N ranged ``GetObject``
requests of ``prefetch_chunk`` bytes run in worker threads, each pinned to that ETag with
``IfMatch`` (an object replaced mid-read gives a 412 and a :class:`ShardReadError`). The reader
consumes the chunks strictly in order, so memory is bounded by (N + 1) x ``prefetch_chunk``.

Each chunk is read by its own :class:`~wds_cloud.openers.resume.ResumableReader` (the same loop
as every other network read): a chunk whose connection drops resumes from the last byte it
received, retries count only attempts without progress, and a chunk that gets no byte for
``stall_timeout`` seconds fails with :class:`ShardReadError`. ``close()`` cancels what has not
started, interrupts backoff waits and joins the threads; a socket read already in flight
finishes first (at most one per thread, bounded by the read timeout), so no thread outlives
the stream.
"""

from __future__ import annotations

import collections
import functools
import io
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, TYPE_CHECKING, Any

from wds_cloud.errors import ShardError, ShardReadError
from wds_cloud.openers.resume import Opened, ResumableReader
from wds_cloud.redact import redact_url

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
        head = opener.read_client().head_object(Bucket=bucket, Key=key, **opener._extra())
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
        resumes: chunk requests repeated after a failure (all chunks together).
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
        from wds_cloud.openers.s3_read import explain, policy, read_errors

        self._opener = opener
        self._client = opener.read_client()
        self._extra = opener._extra()
        self.url = url
        self._bucket = bucket
        self._key = key
        self.size = size
        self._etag = etag
        self._chunk = int(cfg.prefetch_chunk or 1)
        self._policy = policy(cfg)
        self._read_errors = read_errors()
        self._explain = functools.partial(explain, opener, url)
        self._lock = threading.Lock()
        self._nchunks = (size + self._chunk - 1) // self._chunk
        self._depth = max(1, int(cfg.prefetch or 1))
        self._cancel = threading.Event()
        self._pool = ThreadPoolExecutor(self._depth, thread_name_prefix="wds-s3-prefetch")
        self._pending: collections.deque[Future[list[bytes]]] = collections.deque()
        self._scheduled = 0
        self._pieces: collections.deque[bytes] = collections.deque()  # of the current chunk
        self._pos = 0  # in the first piece
        self._deferred: ShardError | None = None  # raised by the next read
        self.position = 0
        self.resumes = 0
        self._fill()

    def readable(self) -> bool:
        return True

    def _fill(self) -> None:
        while len(self._pending) < self._depth and self._scheduled < self._nchunks:
            self._pending.append(self._pool.submit(self._fetch, self._scheduled))
            self._scheduled += 1

    def _fetch(self, index: int) -> list[bytes]:
        """Chunk ``index`` as the pieces received, resumed from its last byte on a drop."""
        start = index * self._chunk
        end = min(self.size, start + self._chunk)
        pieces: list[bytes] = []

        def fetch(offset: int) -> Opened:
            return self._ranged(start + offset, end, offset)

        reader = ResumableReader(
            fetch,
            url=self.url,
            size=end - start,
            policy=self._policy,
            retry_on=self._read_errors,
            explain=self._explain,
            origin=start,
            sleep=self._cancel.wait,  # close() interrupts the backoff
        )
        got = 0
        try:
            while got < end - start and not self._cancel.is_set():
                piece = reader.read1(end - start - got)
                if not piece:  # cannot happen with a known size; never hand out a short chunk
                    raise ShardReadError(
                        "ranged read ended early", url=self.url, offset=start + got
                    )
                pieces.append(piece)
                got += len(piece)
        finally:
            reader.close()
            with self._lock:
                self.resumes += reader.resumes
        return pieces

    def _ranged(self, first: int, end: int, offset: int) -> Opened:
        """``fetch`` of one chunk's reader: bytes ``first..end-1``, pinned to the ETag."""
        from wds_cloud.openers.s3_read import raw_body, retryable

        try:
            response = self._client.get_object(
                Bucket=self._bucket,
                Key=self._key,
                Range=f"bytes={first}-{end - 1}",
                IfMatch=self._etag,
                **self._extra,
            )
        except self._read_errors:
            raise
        except Exception as exc:
            if (transient := retryable(exc)) is not None:
                raise transient from exc
            err = self._opener._error(exc, self.url, offset=first)
            if not isinstance(err, ShardReadError):
                err = ShardReadError(
                    f"ranged read failed: {err.reason}", url=self.url, offset=first
                )
            raise err from exc
        return Opened(raw_body(response["Body"]), offset)

    def _piece(self) -> bytes | None:
        """The piece being consumed (waiting for the next chunk when needed); None at the end."""
        if self.closed:
            raise ValueError(f"read from a closed stream ({redact_url(self.url)})")
        while not self._pieces:
            if not self._pending:
                return None
            future = self._pending.popleft()
            self._fill()
            self._pieces.extend(future.result())
            self._pos = 0
        return self._pieces[0]

    def _advance(self, piece: bytes, n: int) -> None:
        self._pos += n
        self.position += n
        if self._pos >= len(piece):
            self._pieces.popleft()
            self._pos = 0

    def read(self, size: int | None = -1) -> bytes:
        """``size`` bytes (fewer only at the end); a whole received piece goes out uncopied.

        A chunk that failed after some bytes were handed out raises on the next call.
        """
        if size is None or size < 0:
            return self.readall()
        if self._deferred is not None:
            error, self._deferred = self._deferred, None
            raise error
        parts: list[bytes] = []
        got = 0
        while got < size:
            try:
                piece = self._piece()
            except ShardError as exc:
                if not got:
                    raise
                self._deferred = exc
                break
            if piece is None:
                break
            want = size - got
            data = (
                piece
                if self._pos == 0 and len(piece) <= want
                else piece[self._pos : self._pos + want]
            )
            self._advance(piece, len(data))
            parts.append(data)
            got += len(data)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def readall(self) -> bytes:
        parts = []
        while chunk := self.read(1 << 20):
            parts.append(chunk)
        return b"".join(parts)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        piece = self._piece() if len(view) else None
        if piece is None:
            return 0
        n = min(len(view), len(piece) - self._pos)
        view[:n] = memoryview(piece)[self._pos : self._pos + n]
        self._advance(piece, n)
        return n

    def close(self) -> None:
        if not self.closed:
            self._cancel.set()
            for future in self._pending:
                future.cancel()
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pending.clear()
            self._pieces.clear()
        super().close()
