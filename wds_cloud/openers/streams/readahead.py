"""Background read-ahead for remote shard streams, and opening the next shard early.

A worker that reads a shard and decodes its samples on one thread leaves the network idle while
it decodes and the CPU idle while it waits for the socket. :class:`ReadAhead` moves the socket
reads to a thread of their own: it reads the wrapped stream in pieces of up to 1 MiB and keeps
at most ``limit`` bytes received but not yet consumed, so I/O overlaps the parsing and decoding
that happen on the caller's thread. :func:`open_ahead` opens shard ``i + 1`` in the background
while shard ``i`` is being read, so the request round trip and the first ``limit`` bytes of the
next shard are not on the critical path either.

The opener registry applies both to the streams of remote openers (those whose ``remote``
class attribute is True: ``s3``, ``gs``/``gcs``, ``http``/``https``, ``ais``, and any plugin
that declares it, see :mod:`wds_cloud.openers.capabilities`); local files (memory-mapped),
``pipe:`` (the subprocess already runs in parallel) and openers without ``remote = True`` are
left as they are.

Setting: bytes in flight per stream, ``WDS_CLOUD_READAHEAD`` (a whole byte count, optionally
with a binary unit: ``16M``, ``512K``, :func:`~wds_cloud.settings.parse_bytes`) or
``OpenerRegistry(readahead=...)``; default 16 MiB;
``0`` switches both read-ahead and next-shard opening off. Memory: at most ``limit + 1 MiB``
per open stream, and a shard reader holds two streams while the next shard is opened early, so
``2 * (limit + 1 MiB)`` per DataLoader worker (34 MiB at the default), on top of the backend's
own buffers (``S3Config.prefetch * prefetch_chunk`` when S3 parallel ranged reads are on).

Errors keep their place in the byte stream: every byte read before a failure is delivered
first, then the error is raised (a :class:`ShardError` from the backend as it is, any other
exception as :class:`ShardReadError` naming the URL and the offset). Closing the stream stops
its thread (it finishes the socket read in progress, at most one piece) and closes the
wrapped stream.
"""

from __future__ import annotations

import collections
import io
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from wds_cloud.errors import ShardError, ShardReadError
from wds_cloud.openers.streams.stream import ReadStream
from wds_cloud.redact import redact_url
from wds_cloud.settings import BYTES, ConfigTable, Field, at_least

#: Bytes in flight per stream when neither the argument nor ``WDS_CLOUD_READAHEAD`` says.
DEFAULT_READAHEAD = 16 << 20

_PIECE = 1 << 20  # the most one background read asks for
_JOIN_SECONDS = 5.0  # how long close() waits for the socket read in progress

T = TypeVar("T")


#: The setting, resolved like a backend config's field (``WDS_CLOUD_READAHEAD``).
READAHEAD_SETTINGS = ConfigTable(
    section="",
    owner="OpenerRegistry",
    what="read-ahead",
    fields=(Field("readahead", BYTES, DEFAULT_READAHEAD, checks=(at_least(0),)),),
)


def readahead_bytes(
    value: int | str | None = None, environ: Mapping[str, str] | None = None
) -> int:
    """Resolve the read-ahead setting: ``value`` > ``WDS_CLOUD_READAHEAD`` > 16 MiB.

    Args:
        value: bytes in flight per stream (``0`` disables); an int or a string such as ``"32M"``.
        environ: the environment to read (``os.environ`` when None).

    Raises:
        ConfigError: not a whole number of bytes >= 0 with an optional binary unit.
    """
    number: int = READAHEAD_SETTINGS.values({"readahead": value}, environ=environ)["readahead"]
    return number


class _Buffer:
    """What the background thread shares with the reader (not the stream object itself, so a
    stream dropped without ``close()`` is collected, and closing it stops the thread)."""

    def __init__(self, limit: int, piece: int) -> None:
        self.limit = limit
        self.piece = piece
        self.pieces: collections.deque[bytes] = collections.deque()
        self.buffered = 0  # bytes in ``pieces`` not yet consumed
        self.done = False  # the thread finished (end of stream, error or stop)
        self.error: BaseException | None = None
        self.stop = False
        self.cond = threading.Condition()


def _pump(buf: _Buffer, source: ReadStream, url: str) -> None:
    """The background thread: read ``source`` into ``buf`` until its end, an error or stop."""
    read = getattr(source, "read1", None) or source.read
    produced = 0
    try:
        while True:
            with buf.cond:
                while buf.buffered >= buf.limit and not buf.stop:
                    buf.cond.wait()
                if buf.stop:
                    return
            data = read(buf.piece)
            if not data:
                return
            data = bytes(data)
            produced += len(data)
            with buf.cond:
                buf.pieces.append(data)
                buf.buffered += len(data)
                buf.cond.notify_all()
    except BaseException as exc:  # delivered to the reader, in stream order
        if not isinstance(exc, ShardError):
            error = ShardReadError(f"cannot read shard stream: {exc!r}", url=url, offset=produced)
            error.__cause__ = exc
            exc = error
        with buf.cond:
            buf.error = exc
    finally:
        try:
            source.close()
        except Exception:
            pass
        with buf.cond:
            buf.done = True
            buf.cond.notify_all()


class ReadAhead(io.RawIOBase):
    """A readable stream whose bytes are read from ``source`` by a background thread.

    Args:
        source: the stream to read (``read1`` is used when it has one, else ``read``).
        url: the shard URL, for errors.
        limit: the most bytes received and not yet consumed (at least one piece is read).
        piece: the most one background read asks for.

    Attributes:
        url: the shard URL.
        source: the wrapped stream (owned: closed when this stream is closed).
        position: bytes delivered to the caller so far.
    """

    def __init__(
        self, source: ReadStream, *, url: str, limit: int = DEFAULT_READAHEAD, piece: int = _PIECE
    ) -> None:
        super().__init__()
        self.url = url
        self.source = source
        self.position = 0
        limit = max(1, limit)
        self._buf = _Buffer(limit, max(1, min(piece, limit)))
        self._pos = 0  # consumed bytes of the first piece
        self._thread = threading.Thread(
            target=_pump,
            args=(self._buf, source, url),
            name=f"wds-readahead {redact_url(url)}",
            daemon=True,
        )
        self._thread.start()

    def readable(self) -> bool:
        return True

    def _wait(self) -> bool:
        """Wait (holding the lock) for a piece; False at the end. Raises the thread's error."""
        if self.closed:
            raise ValueError(f"read from a closed stream ({redact_url(self.url)})")
        buf = self._buf
        while not buf.pieces:
            if buf.done:
                if buf.error is not None:
                    raise buf.error
                return False
            buf.cond.wait()
        return True

    def _take(self, want: int) -> bytes:
        """Up to ``want`` bytes of the first piece (holding the lock; a piece is there)."""
        buf = self._buf
        piece = buf.pieces[0]
        if self._pos == 0 and len(piece) <= want:
            data = piece
        else:
            data = piece[self._pos : self._pos + want]
        self._pos += len(data)
        if self._pos >= len(piece):
            buf.pieces.popleft()
            self._pos = 0
        buf.buffered -= len(data)
        self.position += len(data)
        buf.cond.notify_all()
        return data

    def read1(self, size: int = -1) -> bytes:
        """The bytes of at most one received piece (up to ``size``); ``b""`` at the end."""
        with self._buf.cond:
            if not self._wait() or size == 0:
                return b""
            return self._take(size if size > 0 else len(self._buf.pieces[0]))

    def read(self, size: int | None = -1) -> bytes:
        """``size`` bytes, fewer only at the end or just before an error (raised next call)."""
        if size is None or size < 0:
            return self.readall()
        parts: list[bytes] = []
        got = 0
        with self._buf.cond:
            while got < size:
                try:
                    if not self._wait():
                        break
                except ShardError:
                    if not got:
                        raise
                    break  # the error stays stored: the next call raises it
                data = self._take(size - got)
                parts.append(data)
                got += len(data)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def readall(self) -> bytes:
        parts = []
        while chunk := self.read1(_PIECE):
            parts.append(chunk)
        return b"".join(parts)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:
        """Stop the thread (after the read in progress), close ``source``, drop the buffer."""
        if self.closed:
            return
        buf = self._buf
        with buf.cond:
            buf.stop = True
            buf.pieces.clear()
            buf.buffered = 0
            buf.cond.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join(_JOIN_SECONDS)
        super().close()


class _Opening(Generic[T]):
    """``open_item(item)`` run in a thread of its own; :meth:`result` waits for it."""

    def __init__(self, open_item: Callable[[Any], T], item: Any) -> None:
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(open_item, item), name="wds-open-next", daemon=True
        )
        self._thread.start()

    def _run(self, open_item: Callable[[Any], T], item: Any) -> None:
        try:
            self._value = open_item(item)
        except BaseException as exc:  # raised by result(), where the shard is reached
            self._error = exc

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return self._value  # type: ignore[return-value]

    def discard(self, close: Callable[[T], None]) -> None:
        self._thread.join()
        if self._error is None and self._value is not None:
            close(self._value)


def open_ahead(
    items: Iterable[Any],
    open_item: Callable[[Any], T],
    *,
    early: Callable[[Any], bool],
    close: Callable[[T], None],
) -> Iterator[tuple[Any, Callable[[], T]]]:
    """Yield ``(item, get)`` for each item; ``get()`` returns ``open_item(item)`` or raises
    its error.

    When ``early(item)`` holds for the item handed out, the next one is taken from ``items``
    at once and, if ``early`` holds for it too, opened in a background thread while the caller
    works on the current one. Otherwise nothing is taken ahead (shard lists that act when the
    next shard is asked for, such as a directory queue that deletes finished files, see the
    same order as without this function). Anything opened early and not taken (the caller
    stopped) is passed to ``close``.
    """
    it = iter(items)
    ahead: tuple[Any, _Opening[T] | None] | None = None
    try:
        while True:
            if ahead is not None:
                (item, opening), ahead = ahead, None
            else:
                item = next(it, _END)
                if item is _END:
                    return
                opening = None
            if early(item):
                following = next(it, _END)
                if following is not _END:
                    started = _Opening(open_item, following) if early(following) else None
                    ahead = (following, started)
            yield item, _getter(open_item, item, opening)
    finally:
        if ahead is not None and ahead[1] is not None:
            ahead[1].discard(close)


_END = object()


def _getter(
    open_item: Callable[[Any], T], item: Any, opening: _Opening[T] | None
) -> Callable[[], T]:
    if opening is None:
        return lambda: open_item(item)
    return opening.result
