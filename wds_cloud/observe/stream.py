"""A shard stream that times its reads: the network (or disk) wait, per backend.

The tar reader reads in large blocks (a megabyte and more), so two clock reads per ``read``
cost nothing measurable. The first read of a shard is its first byte (``first byte``); the
rest is ``read wait (<scheme>)`` with the bytes read, from which the report gives MB/s per
stream. The sampler charges time in these methods to ``read wait`` as well.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from typing import Any

from wds_cloud.observe.profile import Recorder
from wds_cloud.redact import redact_url

__all__ = ["TimedStream", "bytes_in_flight", "open_timed", "ranged_reader"]


def open_timed(
    opened: Callable[[], tuple[Any, str | None]], rec: Recorder, url: str, scheme: str
) -> tuple[Any, str | None]:
    """Call ``opened()`` (a shard opener's ``(stream, local_path)``), timing the wait into
    ``open``, and return the stream wrapped in a :class:`TimedStream`."""
    start = time.perf_counter_ns()
    stream, local_path = opened()
    rec.add("open", (time.perf_counter_ns() - start) / 1e9)
    rec.shards_open += 1
    rec.counter("shards open", rec.shards_open)
    timed = TimedStream(stream, rec, scheme, url, start)
    ranged = ranged_reader(stream)
    if ranged is not None:
        rec.gauge("bytes in flight", timed, lambda t: bytes_in_flight(ranged) if t.start_ns else 0)
    return timed, local_path


def ranged_reader(stream: Any) -> Any:
    """The parallel ranged reader (``openers/streams/prefetch.py``'s ``PrefetchReader``)
    under ``stream`` (through buffered readers and read-ahead), or None. Found by what it
    keeps (``position``, ``size``, ``peak_buffered``), so this layer does not import it."""
    for _ in range(6):
        if stream is None:
            return None
        if all(hasattr(stream, a) for a in ("peak_buffered", "position", "size")):
            return stream
        stream = next(
            (getattr(stream, a) for a in ("raw", "source", "stream") if hasattr(stream, a)), None
        )
    return None


def bytes_in_flight(reader: Any) -> float:
    """Bytes the parallel ranged reads have requested and not handed out yet: parts being
    fetched and parts received, waiting for the tar reader."""
    scheduled = getattr(reader, "_scheduled", None)
    chunk = getattr(reader, "_chunk", None)
    if scheduled is None or chunk is None:
        return float(reader.buffered)
    return float(max(0, min(reader.size, scheduled * chunk) - reader.position))


class TimedStream(io.RawIOBase):
    """``stream`` with each ``read``/``readinto`` timed into ``rec``.

    Args:
        stream: an open binary stream.
        rec: the recorder of this process.
        scheme: the backend (``s3``, ``http``, ``file``...), names the timer.
        url: the shard, named (redacted) in its trace span.
        start_ns: when the shard was opened; the span runs from there to :meth:`close`.
    """

    def __init__(
        self, stream: Any, rec: Recorder, scheme: str, url: str = "", start_ns: int = 0
    ) -> None:
        super().__init__()
        self.stream = stream
        self.rec = rec
        self.name = f"read wait ({scheme})"
        self.url = url
        self.start_ns = start_ns or time.perf_counter_ns()
        self.first = True
        self.nbytes = 0

    def _took(self, start: int, n: int) -> None:
        seconds = (time.perf_counter_ns() - start) / 1e9
        self.nbytes += n
        self.rec.bytes_read += n
        if self.first:
            self.first = False
            self.rec.add("first byte", seconds, 1, n)
        else:
            self.rec.add(self.name, seconds, 1, n)

    def read(self, n: int = -1) -> bytes:
        """Read up to ``n`` bytes (all with -1), timed."""
        start = time.perf_counter_ns()
        data: bytes = self.stream.read(n)
        self._took(start, len(data))
        return data

    def readinto(self, view: Any) -> int:
        """Read into ``view``, timed."""
        start = time.perf_counter_ns()
        got: int = self.stream.readinto(view) or 0
        self._took(start, got)
        return got

    def readable(self) -> bool:
        """Always True."""
        return True

    def fileno(self) -> int:
        """The wrapped stream's descriptor (a local file is mapped, not read)."""
        fd: int = self.stream.fileno()
        return fd

    def seek(self, offset: int, whence: int = 0) -> int:
        """Seek the wrapped stream."""
        pos: int = self.stream.seek(offset, whence)
        return pos

    def tell(self) -> int:
        """The wrapped stream's position."""
        pos: int = self.stream.tell()
        return pos

    def seekable(self) -> bool:
        """Whether the wrapped stream seeks."""
        return bool(getattr(self.stream, "seekable", lambda: False)())

    def close(self) -> None:
        """Close the stream; record the shard's span (its URL redacted, bytes read)."""
        self.stream.close()
        super().close()
        if self.start_ns:
            args = {"url": redact_url(self.url), "bytes": self.nbytes}
            self.rec.span("shard", "shard", self.start_ns, time.perf_counter_ns(), args)
            self.start_ns = 0
            self.rec.shards_open -= 1
            self.rec.counter("shards open", self.rec.shards_open)
            self.rec.refresh("bytes in flight")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)
