""":class:`ReadStream`: what every opener's ``open()`` returns and what stream readers take.

The built-in streams are :class:`io.RawIOBase` subclasses (``ResumableReader``,
``PrefetchReader``, ``ReadAhead``, ``PipeReader``, the cache's tee, ``FileIO`` for local files)
and satisfy it by inheritance; a plugin's stream only needs these methods. ``typing.IO[bytes]``
does not: it promises ``write``, ``mode`` and ``name`` that these streams lack, and lacks
``readinto``. Optional extras are looked up where used, never assumed: ``fileno``/``tell``
(the tar reader memory-maps regular files), ``read1`` (decompression), ``seek``.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from typing import Self

    from typing_extensions import Buffer

__all__ = ["ReadStream", "read_full", "skip_bytes"]


@runtime_checkable
class ReadStream(Protocol):
    """A readable binary stream: ``read``, ``readinto``, ``readable``, ``close``, ``closed`` and
    ``with`` (closing on exit). Closing early never hangs or leaks a thread, process or
    connection."""

    def read(self, size: int = -1, /) -> bytes:
        """Up to ``size`` bytes (all the rest for -1); ``b""`` only at the end."""
        ...

    def readinto(self, buffer: Buffer, /) -> int:
        """Fill ``buffer`` with up to ``len(buffer)`` bytes; return how many (0 at the end)."""
        ...

    def readable(self) -> bool:
        """True."""
        ...

    def close(self) -> None:
        """Release the stream's connection, thread or process; repeated calls do nothing."""
        ...

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> None: ...


def read_full(stream: Any, n: int) -> bytes:
    """Read up to ``n`` bytes, looping over short reads; shorter only at end of stream."""
    data = stream.read(n)
    if data is None:
        data = b""
    if len(data) == n or not data:
        return bytes(data)
    parts = [data]
    got = len(data)
    while got < n:
        more = stream.read(n - got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def skip_bytes(stream: Any, n: int) -> int:
    """Read and drop ``n`` bytes of ``stream`` (for streams that cannot seek); returns how many
    could not be skipped because the stream ended first (0 normally)."""
    while n > 0:
        dropped = len(read_full(stream, min(n, 1 << 22)))
        if not dropped:
            break
        n -= dropped
    return n
