"""Parallel ranged reads of one object, for every backend: :class:`PrefetchReader`.

A backend that can read a byte range (S3, HTTP, GCS, AIStore) hands the reader what it knows
about the object (URL, size, the version it pinned) and a ``span(first, end) -> Opened``
function that opens bytes ``first .. end - 1`` *pinned to that version* (S3 ``IfMatch`` on the
ETag, HTTP ``If-Range``/``ETag``, GCS ``generation=``, AIStore checksum): a replaced object
raises :class:`ShardReadError` from ``span`` instead of mixing two versions. The reader knows
nothing of the backend beyond that function and the retry policy.

Up to ``parts`` ranged requests of ``part_size`` bytes run in worker threads; the consumer
takes the parts strictly in order, so at most ``parts`` parts are being fetched or waiting and
one is being consumed: memory is bounded by ``(parts + 1) x part_size`` per stream
(:attr:`PrefetchReader.buffered` counts the bytes held, :attr:`PrefetchReader.peak_buffered` its
highest value). Each part is read by its own :class:`~wds_cloud.openers.streams.resumable.ResumableReader`
(the one retry loop): a part whose connection drops resumes from its last byte, retries count
only attempts without progress, and a part that gets no byte for ``stall_timeout`` fails with
:class:`ShardReadError`. ``close()`` cancels what has not started, interrupts backoff waits and
joins the threads; a socket read already in flight finishes first (at most one per thread,
bounded by the read timeout), so no thread outlives the stream.

Settings (the same two fields, :data:`PREFETCH_FIELDS`, on every backend config, ``S3Config``,
``HttpConfig``, ``GcsConfig``, ``AisConfig``; environment ``WDS_CLOUD_<BACKEND>_PREFETCH`` and
``..._PREFETCH_CHUNK``; ``open(url, prefetch=, prefetch_chunk=)`` per call): ``prefetch`` is the
number of parts in flight (0 streams one GET), ``prefetch_chunk`` the part size in bytes
(``4194304``, ``4M``).
See ``docs/openers.md`` ("Parallel ranged reads") for the measured defaults.
"""

from __future__ import annotations

import collections
import io
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from wds_cloud.errors import ConfigError, ShardError, ShardNotFoundError, ShardReadError
from wds_cloud.openers.streams.backoff import RetryPolicy
from wds_cloud.openers.streams.resumable import (
    NETWORK_ERRORS,
    Opened,
    RangeFetch,
    ResumableReader,
    content_range_total,
)
from wds_cloud.openers.streams.throttle import AimdLimiter
from wds_cloud.redact import redact_url
from wds_cloud.settings import BYTES, INT, Field, at_least

__all__ = [
    "DEFAULT_PREFETCH",
    "DEFAULT_PREFETCH_CHUNK",
    "PREFETCH_FIELDS",
    "PREFETCH_OPTIONS",
    "PrefetchReader",
    "split_prefetch_options",
]

#: Parts in flight per stream by default: 0, one streaming GET (parallel parts pay only on
#: high-latency links; docs/openers.md has the measurement and the reasons).
DEFAULT_PREFETCH = 0
#: Bytes per ranged GET by default: with 16 parts in flight (the setting documented for
#: high-latency links) 4 MiB parts read as fast as 8 or 16 MiB ones for half the memory.
DEFAULT_PREFETCH_CHUNK = 4 << 20
#: The ``open()`` options every backend accepts for parallel ranged reads.
PREFETCH_OPTIONS = ("prefetch", "prefetch_chunk")


#: The two settings of every backend config (``WDS_CLOUD_<BACKEND>_PREFETCH`` and
#: ``..._PREFETCH_CHUNK``): parts in flight (an integer >= 0) and bytes per part (>= 1).
PREFETCH_FIELDS = (
    Field("prefetch", INT, DEFAULT_PREFETCH, checks=(at_least(0),)),
    Field("prefetch_chunk", BYTES, DEFAULT_PREFETCH_CHUNK, checks=(at_least(1),)),
)


def split_prefetch_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``options`` split into ``(prefetch options, the rest)`` (for a backend's ``open()``)."""
    mine = {k: v for k, v in options.items() if k in PREFETCH_OPTIONS}
    rest = {k: v for k, v in options.items() if k not in PREFETCH_OPTIONS}
    return mine, rest


def probe_first(fetch: Any, part_size: int) -> tuple[Opened, int] | None:
    """Part 0 through a backend's fetch object, and the object's size; None to stream the
    object with one GET instead.

    ``fetch`` is called as ``fetch(0)`` after ``fetch.end = part_size`` and then says the
    answer's ``content_range`` (the GCS and AIStore fetchers). A missing object raises
    :class:`ShardNotFoundError`; any other failure, an empty object (416) or an answer that
    ignored the range gives None, and the streaming path then decides and reports.
    """
    fetch.end = part_size
    try:
        first: Opened = fetch(0)
    except ShardNotFoundError:
        raise
    except Exception:
        return None
    total = content_range_total(fetch.content_range)
    if first.start != 0 or total is None:
        first.body.close()
        return None
    return first, total


class PrefetchReader(io.RawIOBase):
    """Ordered stream over parallel ranged GETs; see the module docstring.

    Args:
        url: the object URL (errors, thread names stay generic).
        size: the object's size in bytes.
        span: opens bytes ``first .. end - 1`` pinned to ``version``; raises
            :class:`ShardError` for what retrying cannot fix and one of ``retry_on`` for
            what it can.
        parts: ranged requests in flight (at least 1).
        part_size: bytes per ranged request (at least 1).
        policy: retries, backoff and stall deadline of each part.
        retry_on: exception types that mean "dropped or refused, try again".
        explain: the text of a part's final error (the backend's translation).
        version: what the backend pinned (ETag, generation, checksum), for callers.
        first: an already opened body of part 0 (the HTTP, GCS and AIStore adapters learn the
            size and version from a first ranged GET and hand its body over); used for part
            0's first attempt, closed by :meth:`close` if never used.
        name: thread name prefix (``wds-s3-prefetch``).
        limiter: the endpoint's requests-in-flight limit, shared with its other readers
            (:mod:`wds_cloud.openers.streams.throttle`): each part holds a slot while it is
            requested and read; None: ``parts`` requests in flight.

    Attributes:
        url: the object URL.
        size: object size in bytes.
        version: the pinned version, as given.
        position: bytes handed out so far.
        resumes: part requests repeated after a failure (all parts together).
        buffered: bytes received and not yet handed out (all parts together).
        peak_buffered: the highest value :attr:`buffered` reached; at most
            ``(parts + 1) x part_size``.
    """

    def __init__(
        self,
        *,
        url: str,
        size: int,
        span: RangeFetch,
        parts: int,
        part_size: int,
        policy: RetryPolicy | None = None,
        retry_on: tuple[type[BaseException], ...] = NETWORK_ERRORS,
        explain: Callable[[BaseException], str] | None = None,
        version: Any = None,
        first: Opened | None = None,
        name: str = "wds-prefetch",
        limiter: AimdLimiter | None = None,
    ) -> None:
        super().__init__()
        if parts < 1 or part_size < 1 or size < 0:
            raise ConfigError(
                f"prefetch needs parts >= 1 and part_size >= 1, got {parts} x {part_size}"
            )
        self.url = url
        self.size = size
        self.version = version
        self._span = span
        self._first = first
        self._chunk = part_size
        self._policy = policy or RetryPolicy()
        self._retry_on = retry_on
        self._explain = explain
        self._limiter = limiter
        self._lock = threading.Lock()
        self._nchunks = (size + part_size - 1) // part_size
        self._depth = parts
        self._cancel = threading.Event()
        self._pool = ThreadPoolExecutor(parts, thread_name_prefix=name)
        self._pending: collections.deque[Future[list[bytes]]] = collections.deque()
        self._scheduled = 0
        self._pieces: collections.deque[bytes] = collections.deque()  # of the current part
        self._pos = 0  # in the first piece
        self._deferred: ShardError | None = None  # raised by the next read
        self.position = 0
        self.resumes = 0
        self.buffered = 0
        self.peak_buffered = 0
        self._fill()

    def readable(self) -> bool:
        return True

    def _fill(self) -> None:
        while len(self._pending) < self._depth and self._scheduled < self._nchunks:
            self._pending.append(self._pool.submit(self._fetch, self._scheduled))
            self._scheduled += 1

    def _count(self, n: int) -> None:
        with self._lock:
            self.buffered += n
            self.peak_buffered = max(self.peak_buffered, self.buffered)

    def _fetch(self, index: int) -> list[bytes]:
        """Part ``index`` as the pieces received, resumed from its last byte on a drop."""
        start = index * self._chunk
        end = min(self.size, start + self._chunk)
        pieces: list[bytes] = []

        def fetch(offset: int) -> Opened:
            if index == 0 and offset == 0:
                with self._lock:
                    first, self._first = self._first, None
                if first is not None:
                    return first
            opened = self._span(start + offset, end)
            return Opened(opened.body, opened.start - start)

        reader = ResumableReader(
            fetch,
            url=self.url,
            size=end - start,
            policy=self._policy,
            retry_on=self._retry_on,
            explain=self._explain,
            origin=start,
            sleep=self._cancel.wait,  # close() interrupts the backoff
            limiter=self._limiter,
            hold=True,
        )
        got = 0
        try:
            while got < end - start and not self._cancel.is_set():
                piece = reader.read1(end - start - got)
                if not piece:  # cannot happen with a known size; never hand out a short part
                    raise ShardReadError(
                        "ranged read ended early", url=self.url, offset=start + got
                    )
                pieces.append(piece)
                got += len(piece)
                self._count(len(piece))
        except BaseException:
            self._count(-got)
            raise
        finally:
            reader.close()
            with self._lock:
                self.resumes += reader.resumes
        return pieces

    def _piece(self) -> bytes | None:
        """The piece being consumed (waiting for the next part when needed); None at the end."""
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
            self._count(-len(piece))

    def read(self, size: int | None = -1) -> bytes:
        """``size`` bytes (fewer only at the end); a whole received piece goes out uncopied.

        A part that failed after some bytes were handed out raises on the next call.
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
        if self._deferred is not None:
            error, self._deferred = self._deferred, None
            raise error
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
            with self._lock:
                first, self._first = self._first, None
                self.buffered = 0
            if first is not None:  # part 0's body, never asked for
                try:
                    first.body.close()
                except Exception:
                    pass
        super().close()
