"""The one retry-and-resume loop of every network backend: :class:`ResumableReader`.

HTTP, S3 (streaming and each prefetch chunk), GCS and AIStore all read through it, so they
share one behaviour for resets, early ends and stalls:

- **Nothing received is lost.** Bodies are read with at most one socket read per call
  (``read1``), so every byte that arrived is counted before the connection can fail, and the
  next request resumes right after it. (A buffered ``read(n)`` loops until ``n`` bytes and
  drops what it had when the connection resets, so every retry would die at the same point.)
  :meth:`ResumableReader.read` still fills the requested size; when it gives up after some
  bytes it returns them and raises on the next call.
- **Retries count only attempts without progress**, and a read gives up when no new byte has
  arrived for ``stall_timeout`` seconds; see :mod:`wds_cloud.openers.streams.backoff`.
- **Typed errors.** Giving up raises :class:`ShardOpenError` while :meth:`start` makes the
  first request, :class:`ShardReadError` afterwards; both name the URL and the byte offset,
  and say whether the read stalled or ran out of retries.

Backends supply ``fetch(offset) -> Opened``: a fresh body whose first byte is at
``Opened.start``, normally ``offset`` (a ``Range: bytes=offset-`` request). A backend that cannot
seek, such as an AIStore inline ETL, returns ``start == 0`` and the bytes already delivered are
read again and skipped. ``fetch`` pins the object version (ETag, generation, checksum) so a shard
replaced mid-read raises instead of mixing two versions, raises :class:`ShardError` for answers
that retrying cannot fix, and raises one of ``retry_on`` (for example :class:`RetryableError`
for HTTP 429/5xx) for those it can.
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from wds_cloud.errors import ShardError, ShardOpenError, ShardReadError
from wds_cloud.openers.streams.backoff import Backoff, RetryPolicy
from wds_cloud.openers.streams.throttle import AimdLimiter
from wds_cloud.redact import redact_text, redact_url

log = logging.getLogger(__name__)

#: Exceptions treated as a dropped connection (the backend may add its own).
NETWORK_ERRORS: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError, OSError)

_SKIP_CHUNK = 1 << 20
# The most one ``read1`` asks for. ``read1(n)`` allocates ``n`` bytes and shrinks them to what
# one socket read returned; at 4 MiB every call got fresh pages from the kernel (12x the page
# faults and twice the CPU per GiB of a buffered 4 MiB read). At 1 MiB the allocations stay in
# the heap and a 4 MiB tar block costs no more CPU than before (see docs/openers.md).
_READ1_MAX = 1 << 20


class RetryableError(ConnectionError):
    """An answer that may succeed when requested again (HTTP 408/429/5xx, throttling)."""


class ThrottledError(RetryableError):
    """The server said "slow down" (S3 ``SlowDown``, HTTP 429 or 503): retried without using
    up ``retries``, and the endpoint's limiter backs off
    (:mod:`wds_cloud.openers.streams.throttle`).

    Attributes:
        retry_after: the seconds the answer's ``Retry-After`` asked for, or None.
    """

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


#: HTTP statuses that mean "slow down" (each backend's transient answers among them become a
#: :class:`ThrottledError`).
THROTTLE_STATUSES = (429, 503)


def transient_error(
    message: str, status: int | None, retry_after: float | None = None
) -> RetryableError:
    """The error of a transient answer: :class:`ThrottledError` for 429 and 503, else
    :class:`RetryableError`."""
    if status in THROTTLE_STATUSES:
        return ThrottledError(message, retry_after)
    return RetryableError(message)


class Body(Protocol):
    """A response body: ``read1(n)`` does at most one socket read; ``b""`` only at its end."""

    def read1(self, n: int, /) -> bytes: ...

    def close(self) -> None: ...


class TranslateError(Protocol):
    """What a reader or writer gets to turn an SDK exception into the wds_cloud tree: each
    backend's ``<backend>_errors.translate_error`` with its context (endpoint) bound, e.g.
    ``functools.partial(translate_error, endpoint=...)``.
    """

    def __call__(
        self, exc: BaseException, /, *, url: str, offset: int | None = None
    ) -> ShardError: ...


@dataclass
class Opened:
    """What ``fetch(offset)`` returns.

    Attributes:
        body: the response body.
        start: object offset of the body's first byte (``offset``, or 0 for a re-read).
        size: the object's total size when the response says it, else None.
    """

    body: Body
    start: int
    size: int | None = None


class Urllib3Body:
    """A ``urllib3.HTTPResponse`` (``requests.Response.raw``, the aistore SDK's ``raw()``) as a
    :class:`Body`: undecoded bytes, at most one socket read per call (urllib3 >= 2.0's public
    ``read1``).

    Args:
        raw: the urllib3 response, opened with ``preload_content=False``.
    """

    def __init__(self, raw: Any) -> None:
        self._raw = raw

    def read1(self, n: int) -> bytes:
        return bytes(self._raw.read1(n, decode_content=False))

    def close(self) -> None:
        # A body read to its end already went back to the pool (urllib3 does it); one closed
        # early drops its connection, and the pool's slot is given back.
        try:
            self._raw.close()
        finally:
            release = getattr(self._raw, "release_conn", None)
            if release is not None:
                release()


Fetch = Callable[[int], Opened]


class ResumableReader(io.RawIOBase):
    """Readable stream over ``fetch`` that resumes after failures; see the module docstring.

    Args:
        fetch: opens the object from a byte offset.
        url: shard URL, for errors and log lines (redacted in logs).
        size: total size when known before the first response; otherwise the first
            response's :attr:`Opened.size`. A body that ends before it counts as a drop.
        policy: retries, backoff and stall deadline.
        retry_on: exception types that mean "dropped or refused, try again".
        explain: turns the last error into the text of the final message (the backend's
            translation, e.g. "cannot reach S3 endpoint ..."); ``repr`` by default.
        origin: object offset of this reader's byte 0 (a ranged part), for messages only.
        clock: monotonic clock for the stall deadline.
        sleep: the backoff wait.
        limiter: the endpoint's requests-in-flight limit (:func:`throttle.limiter_for
            <wds_cloud.openers.streams.throttle.limiter_for>`); None: no limit, and a
            :class:`ThrottledError` counts against ``retries`` like any failure.
        hold: keep the slot until the body is read (a reader a worker thread reads through:
            prefetch parts, ranged reads); False gives it back when the answer arrives (a
            stream the consumer reads at its own pace).

    Attributes:
        position: bytes delivered so far.
        resumes: requests repeated after a failure.
    """

    def __init__(
        self,
        fetch: Fetch,
        *,
        url: str,
        size: int | None = None,
        policy: RetryPolicy | None = None,
        retry_on: tuple[type[BaseException], ...] = NETWORK_ERRORS,
        explain: Callable[[BaseException], str] | None = None,
        origin: int = 0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = time.sleep,
        limiter: AimdLimiter | None = None,
        hold: bool = False,
    ) -> None:
        super().__init__()
        self._fetch = fetch
        self._limiter = limiter
        self._hold = hold
        self._slot: int | None = None  # the round the held slot was taken in
        self.url = url
        self.size = size
        self.policy = policy or RetryPolicy()
        self.retry_on = retry_on
        self._explain = explain or repr
        self.origin = origin
        self._backoff = Backoff(self.policy, clock=clock, sleep=sleep)
        self.position = 0
        self.resumes = 0
        self._body: Body | None = None
        self._skip = 0
        self._starting = False
        self._deferred: ShardError | None = None  # raised by the next read

    def readable(self) -> bool:
        return True

    def start(self) -> ResumableReader:
        """Make the first request now, retried like a resume; returns self.

        Raises:
            ShardError: what ``fetch`` raised (not found, denied, ...).
            ShardOpenError: no response after the retries or within the stall deadline.
        """
        self._starting = True
        try:
            self._pull(0)
        finally:
            self._starting = False
        return self

    # -- the loop ---------------------------------------------------------------------------

    def _open(self) -> None:
        limiter = self._limiter
        if limiter is None:
            opened = self._fetch(self.position)
        else:
            if self._slot is None:
                self._slot = limiter.acquire()
            try:
                opened = self._fetch(self.position)
            except ThrottledError as exc:
                limiter.throttled(self._slot, exc.retry_after)
                self._free()
                raise
            except BaseException:
                self._free()
                raise
            limiter.accept()
            if not self._hold:
                self._free()
        if opened.start > self.position:
            opened.body.close()
            raise ShardReadError(
                f"backend resumed at byte {opened.start}, after the requested {self.position}",
                url=self.url,
                offset=self.origin + self.position,
            )
        if self.size is None:
            self.size = opened.size
        self._body = opened.body
        self._skip = self.position - opened.start

    def _free(self) -> None:
        """Give the limiter's slot back (if one is held)."""
        if self._slot is not None:
            self._slot = None
            assert self._limiter is not None
            self._limiter.release()

    def _drop(self) -> None:
        self._free()
        body, self._body = self._body, None
        if body is not None:
            try:
                body.close()
            except Exception:  # a broken connection may fail to close; it is gone either way
                pass

    def _take(self, n: int) -> bytes:
        body = self._body
        assert body is not None
        while self._skip:
            chunk = body.read1(min(self._skip, _SKIP_CHUNK))
            if not chunk:
                raise ConnectionError(
                    f"the re-read stream ended {self._skip} bytes before the bytes already read"
                )
            self._skip -= len(chunk)
            self._backoff.touch()
        return body.read1(min(n, _READ1_MAX))

    def _pull(self, n: int) -> bytes:
        """New bytes (at most ``n``, one socket read), or ``b""`` at the end of the object.

        ``n == 0`` only opens a body (:meth:`start`).
        """
        if self.closed:
            raise ValueError(f"read from a closed stream ({redact_url(self.url)})")
        self._backoff.touch()  # the deadline counts time spent waiting here, not the caller's
        if self.size is not None:
            n = min(n, self.size - self.position)
            if n <= 0 and not self._starting:
                self._free()  # read to its end
                return b""
        while True:
            error: BaseException | None = None
            data = b""
            try:
                if self._body is None:
                    self._open()
                if n <= 0:
                    return b""
                data = self._take(n)
            except ShardError:
                self._drop()
                raise
            except self.retry_on as exc:
                error = exc
            if data:
                self.position += len(data)
                self._backoff.progress()
                return data
            if error is None and self.size is None:
                self._free()
                return b""  # a clean end of a stream of unknown length
            self._drop()  # an error, or the end before the announced size
            if isinstance(error, ThrottledError) and self._limiter is not None:
                paced = self._limiter.paces()
                reason = self._backoff.throttled(error.retry_after, paced=paced)
            else:
                reason = self._backoff.retry()
            if reason is not None:
                raise self._give_up(reason, error) from error
            self.resumes += 1
            log.info(
                "resuming %s at byte %d (attempt %d): %r",
                redact_url(self.url),
                self.origin + self.position,
                self._backoff.failures + 1,
                redact_text(repr(error)),
            )

    def _give_up(self, reason: str, error: BaseException | None) -> ShardError:
        if error is None:
            what = f"the stream ended before its announced size ({self.size} bytes)"
        else:
            what = self._explain(error)
        kind = ShardOpenError if self._starting else ShardReadError
        return kind(f"{reason}: {what}", url=self.url, offset=self.origin + self.position)

    # -- the stream API ---------------------------------------------------------------------

    def read1(self, size: int = -1) -> bytes:
        """At most one socket read's worth of new bytes (up to ``size``); ``b""`` at the end."""
        self._raise_deferred()
        return self._pull(size if size >= 0 else _READ1_MAX)

    def read(self, size: int | None = -1) -> bytes:
        """``size`` bytes, fewer only at the end of the object or just before an error.

        Bytes received before a failure are returned first; the error is raised by the next
        call.
        """
        if size is None or size < 0:
            return self.readall()
        self._raise_deferred()
        parts: list[bytes] = []
        got = 0
        while got < size:
            try:
                data = self._pull(size - got)
            except ShardError as exc:
                if not got:
                    raise
                self._deferred = exc
                break
            if not data:
                break
            parts.append(data)
            got += len(data)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def readall(self) -> bytes:
        parts = []
        while chunk := self.read1(_READ1_MAX):
            parts.append(chunk)
        return b"".join(parts)

    def readinto(self, buffer: Any) -> int:
        """Fill ``buffer`` like :meth:`read`; returns the number of bytes written."""
        view = memoryview(buffer).cast("B")
        self._raise_deferred()
        got = 0
        while got < len(view):
            try:
                data = self._pull(len(view) - got)
            except ShardError as exc:
                if not got:
                    raise
                self._deferred = exc
                break
            if not data:
                break
            view[got : got + len(data)] = data
            got += len(data)
        return got

    def _raise_deferred(self) -> None:
        error, self._deferred = self._deferred, None
        if error is not None:
            raise error

    def close(self) -> None:
        self._drop()
        super().close()


#: ``fetch(first, end) -> Opened``: a body holding the object's bytes from ``first`` (or from an
#: earlier offset, ``Opened.start``) up to at least ``end`` (exclusive), offsets in the object.
RangeFetch = Callable[[int, int], Opened]


def read_span(
    fetch: RangeFetch,
    *,
    url: str,
    offset: int,
    length: int,
    policy: RetryPolicy | None = None,
    retry_on: tuple[type[BaseException], ...] = NETWORK_ERRORS,
    explain: Callable[[BaseException], str] | None = None,
    limiter: AimdLimiter | None = None,
) -> bytes:
    """Bytes ``offset .. offset + length`` of an object, read by one :class:`ResumableReader`
    (holding a slot of ``limiter``, the endpoint's, until the bytes are read).

    The backends' ``read_range`` (random access through shard indexes) call this: one ranged
    request, resumed from the last byte received if the connection drops, with the same retry
    and stall rules as streaming reads. A body that starts before ``offset`` (a server that
    ignored the range) is read and the bytes before ``offset`` skipped.

    Raises:
        ShardReadError: the object ends before ``offset + length``, or the read failed.
        ShardError: what ``fetch`` raised (not found, denied, ...).
    """
    if length <= 0:
        return b""
    end = offset + length

    def at(position: int) -> Opened:
        opened = fetch(offset + position, end)
        return Opened(opened.body, opened.start - offset)

    reader = ResumableReader(
        at,
        url=url,
        size=length,
        policy=policy,
        retry_on=retry_on,
        explain=explain,
        origin=offset,
        limiter=limiter,
        hold=True,
    )
    parts: list[bytes] = []
    got = 0
    try:
        while got < length:
            chunk = reader.read(length - got)
            if not chunk:
                raise ShardReadError(
                    f"the object ended before byte {end} (a range of {length} bytes)",
                    url=url,
                    offset=offset + got,
                )
            parts.append(chunk)
            got += len(chunk)
    finally:
        reader.close()
    return parts[0] if len(parts) == 1 else b"".join(parts)


def check_content_range(value: str | None, first: int, end: int, url: str) -> None:
    """Raise when a ``Content-Range: bytes a-b/total`` answer does not start at ``first`` or
    the object is shorter than ``end`` (retrying could not help).

    Raises:
        ShardReadError: naming the object's size or the served start.
    """
    if not value or not value.startswith("bytes "):
        return
    span, _, total = value[len("bytes ") :].partition("/")
    start, _, _ = span.partition("-")
    if start.isdigit() and int(start) != first:
        raise ShardReadError(
            f"the server answered the range from byte {start}, not {first}", url=url, offset=first
        )
    if total.isdigit() and int(total) < end:
        raise ShardReadError(
            f"the object has {total} bytes; the range ends at byte {end} (is the index older "
            "than the shard?)",
            url=url,
            offset=first,
        )


class SpanFetch(Protocol):
    """A backend's ``fetch(offset) -> Opened`` that can stop its GETs at ``end`` (exclusive)
    and keeps the last answer's ``Content-Range``."""

    end: int | None
    content_range: str | None

    def __call__(self, offset: int) -> Opened: ...


def fetch_span(fetch: SpanFetch, first: int, end: int, url: str) -> Opened:
    """The ``RangeFetch`` of :func:`read_span` over ``fetch``: bytes ``first .. end - 1``,
    every GET of ``fetch`` stopping at ``end``; an answer from ``first`` must say the object
    reaches ``end`` (:func:`check_content_range`), else its body is closed and the error
    raised."""
    fetch.end = end
    opened = fetch(first)
    if opened.start == first:
        try:
            check_content_range(fetch.content_range, first, end, url)
        except BaseException:
            opened.body.close()
            raise
    return opened


def first_answer(raw: Any, url: str, offset: int, status: int, size: int | None) -> Opened:
    """The body of the answer (``raw``: its urllib3 response, status ``status``, the object's
    ``size`` if it said it) to a GET from ``offset``: from ``offset`` when ranged (206), from
    0 when the range was ignored (200). A whole object shorter than ``offset`` is closed (its
    connection handed back to its pool, as ``requests.Response.close`` does) and
    :func:`past_end` raises."""
    start = offset if status == 206 else 0
    if start < offset and size is not None and size < offset:
        raw.close()
        release = getattr(raw, "release_conn", None)
        if release is not None:
            release()
        past_end(url, offset, size)
    return Opened(Urllib3Body(raw), start, size)


def explain(translate: TranslateError, url: str, exc: BaseException) -> str:
    """The text of a read's final error (a reader's ``explain``): the throttling answer, or
    the translated failure."""
    if isinstance(exc, RetryableError):
        return str(exc)
    if not isinstance(exc, Exception):
        return repr(exc)
    return translate(exc, url=url).reason


def content_range_total(value: str | None) -> int | None:
    """The object size of a ``Content-Range: bytes a-b/total`` (or ``bytes */total``) header."""
    if not value or "/" not in value:
        return None
    total = value.rsplit("/", 1)[1].strip()
    return int(total) if total.isdigit() else None


class _EmptyBody:
    def read1(self, n: int) -> bytes:
        return b""

    def close(self) -> None:
        pass


def past_end(url: str, offset: int, size: int | None) -> Opened:
    """What an ``open_at`` fetch returns when ``Range: bytes=offset-`` was refused as not
    satisfiable (416): an empty stream when ``offset`` is exactly the object's ``size``.

    Raises:
        ShardOpenError: ``offset`` lies beyond the end of the object (naming its size).
    """
    if size is not None and offset == size:
        return Opened(_EmptyBody(), offset, size)
    what = f"{size} bytes" if size is not None else "its size was not given"
    raise ShardOpenError(
        f"byte offset {offset} is beyond the end of the object ({what})", url=url, offset=offset
    )
