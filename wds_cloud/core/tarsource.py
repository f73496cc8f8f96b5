"""The bytes under the tar parser: a memory-mapped file or a refilled buffer over a stream.

Compression (gzip, bzip2, xz) is detected from the magic bytes and decompressed here, so the
parser in :mod:`wds_cloud.core.tar` sees one uncompressed byte sequence.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import mmap
import os
import stat
import zlib
from typing import IO, TYPE_CHECKING, Any

from wds_cloud.core.tarheader import BLOCK
from wds_cloud.errors import ShardReadError
from wds_cloud.openers.streams.stream import read_full

if TYPE_CHECKING:
    from wds_cloud.openers.streams.stream import ReadStream

READ_CHUNK = 16 << 20  # bytes read at once for a member that does not fit the buffer
DONTNEED_STEP = 64 << 20  # mmap: release pages behind the cursor every this many bytes
#: mmap: members of at least this size are read with ``pread`` instead of sliced from the
#: mapping: the one copy is then the kernel's, and their pages are never mapped (mapping them
#: costs more than the copy: ~30% more CPU for 4 MiB members, benchmarks/bench_core.py large).
PREAD_MIN = 512 << 10
_MAGICS = ((b"\x1f\x8b", "gz"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "xz"))


def _compression(head: bytes) -> str | None:
    """The compression that ``head`` (the first bytes of a shard) starts with, or None."""
    for magic, kind in _MAGICS:
        if head.startswith(magic):
            return kind
    return None


class _Prefixed:
    """A raw stream that first returns ``head`` (bytes already peeked) and then ``stream``."""

    def __init__(self, head: bytes, stream: ReadStream | IO[bytes]) -> None:
        self.head = head
        self.stream = stream

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if self.head:
            if n < 0:
                data, self.head = self.head + self.stream.read(), b""
                return data
            data, self.head = self.head[:n], self.head[n:]
            return data
        return self.stream.read(n)

    def readinto(self, view: Any) -> int:
        """Fill ``view`` from ``head`` first, then straight from ``stream`` when it can."""
        if self.head:
            k = min(len(view), len(self.head))
            view[:k] = self.head[:k]
            self.head = self.head[k:]
            return k
        readinto = getattr(self.stream, "readinto", None)
        if readinto is not None:
            return readinto(view) or 0
        data = self.stream.read(len(view)) or b""
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:
        pass  # the caller owns ``stream``


def _peek_kind(stream: Any) -> tuple[str, Any]:
    """Detect compression from magic bytes; return (kind, stream to read the tar from)."""
    fileno = getattr(stream, "fileno", None)
    fd = None
    if fileno is not None:
        try:
            fd = fileno()
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                fd = None
        except (OSError, ValueError, AttributeError):
            fd = None
    if fd is not None:
        try:
            pos = stream.tell()
            head = os.pread(fd, 6, pos)
        except (OSError, ValueError, AttributeError):
            fd = None
        else:
            return _compression(head) or "mmap", stream
    head = read_full(stream, 6)
    return _compression(head) or "raw", _Prefixed(head, stream)


class TarSource:
    """The bytes under the parser: a mapped file or a refilled buffer over a stream."""

    def __init__(self, stream: Any, url: str | None, bufsize: int) -> None:
        self.url = url
        self.bufsize = max(bufsize, BLOCK)  # one read must be able to complete a header
        self.mm: mmap.mmap | None = None
        self.base = 0  # stream offset of buf[0]
        self.released = 0
        self.decompressor: Any = None
        self.pending: ShardReadError | None = None  # raised by the next read
        kind, stream = _peek_kind(stream)
        if kind == "mmap":
            fd = stream.fileno()
            start = stream.tell()
            size = os.fstat(fd).st_size
            if size > start:
                self.mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
                if start:
                    self.mm.seek(start)
            self.buf: Any = self.mm if self.mm is not None else b""
            self.base = 0
            self.start = start
            self.stream = stream
            return
        if kind == "gz":
            stream = self.decompressor = gzip.GzipFile(fileobj=stream, mode="rb")
        elif kind == "bz2":
            stream = self.decompressor = bz2.BZ2File(stream, mode="rb")
        elif kind == "xz":
            stream = self.decompressor = lzma.LZMAFile(stream, mode="rb")
        self.stream = stream
        self.start = 0
        self.buf = b""

    def pread(self, start: int, size: int) -> bytes:
        """mmap only: ``size`` bytes at file offset ``start``, read without mapping them."""
        try:
            data = os.pread(self.stream.fileno(), size, start)
        except (OSError, ValueError):
            data = b""
        if len(data) != size:  # over 2 GiB (one read's limit) or an odd file: slice the map
            assert self.mm is not None
            return self.mm[start : start + size]
        return data

    def read(self, n: int) -> bytes:
        if self.pending is not None:
            raise self.pending
        if self.decompressor is not None:
            return self._read_decompressed(n)
        try:
            return read_full(self.stream, n)
        except (EOFError, OSError, zlib.error, lzma.LZMAError) as exc:
            if isinstance(exc, ShardReadError):
                raise
            raise self._error(exc, 0) from exc

    def read_some(self, n: int) -> bytes:
        """Up to ``n`` bytes from one read of the stream (fewer before its end; empty at it).

        The pieces of a member that does not fit the buffer are read with this and joined
        once, so that its bytes are copied once (a loop of :meth:`read` would join twice).
        """
        if self.pending is not None:
            raise self.pending
        if self.decompressor is not None:
            return self._read_decompressed(n, whole=False)
        try:
            data = self.stream.read(n)
        except (EOFError, OSError, zlib.error, lzma.LZMAError) as exc:
            if isinstance(exc, ShardReadError):
                raise
            raise self._error(exc, 0) from exc
        return b"" if data is None else data

    def read_into(self, view: memoryview) -> int:
        """Fill ``view`` from the stream; return the bytes filled (fewer only at its end).

        Plain streams read straight into ``view`` (``readinto``): no copy at all.
        """
        readinto = None if self.decompressor is not None else getattr(self.stream, "readinto", None)
        got = 0
        n = len(view)
        while got < n:
            if readinto is None:
                chunk = self.read_some(min(n - got, READ_CHUNK))
                view[got : got + len(chunk)] = chunk
                k = len(chunk)
            else:
                if self.pending is not None:
                    raise self.pending
                try:
                    k = readinto(view[got:]) or 0
                except (EOFError, OSError, zlib.error, lzma.LZMAError) as exc:
                    if isinstance(exc, ShardReadError):
                        raise
                    raise self._error(exc, got) from exc
            if not k:
                break
            got += k
        return got

    def _read_decompressed(self, n: int, whole: bool = True) -> bytes:
        """Read ``n`` decompressed bytes one decompressor step at a time, so that a stream cut
        or corrupted mid-way still delivers every byte decompressed before the damage; the
        error is raised by the next read. ``whole`` False: return after the first step."""
        parts = []
        got = 0
        while got < n:
            try:
                chunk: bytes = self.stream.read1(n - got)
            except ShardReadError as exc:
                error = exc
            except (EOFError, OSError, zlib.error, lzma.LZMAError) as exc:
                error = self._error(exc, got)
                error.__cause__ = exc
            else:
                if not chunk:
                    break
                if not whole:
                    return chunk
                parts.append(chunk)
                got += len(chunk)
                continue
            if not got:
                raise error
            self.pending = error
            break
        return b"".join(parts)

    def _error(self, exc: BaseException, got: int) -> ShardReadError:
        return ShardReadError(
            f"cannot read shard stream: {exc}",
            url=self.url,
            offset=self.base + len(self.buf) + got,
        )

    def refill(self, pos: int) -> int:
        """Keep ``buf[pos:]`` and append the next block; return the new position of ``pos``.

        ``pos`` may lie past the end of the buffer: the padding of a member whose data ended
        inside the buffer can run beyond it (buffer ends are not 512-aligned after a large
        member). Those padding bytes are still in the stream and are skipped here; a stream
        that ends inside them leaves an empty buffer, which the caller reports as truncation.
        """
        behind = pos - len(self.buf)
        if behind > 0:
            self.skip(behind)
            rest = b""
        else:
            rest = self.buf[pos:]
        self.base += pos
        self.buf = rest + self.read(self.bufsize)
        return 0

    def skip(self, n: int) -> None:
        """Read and drop ``n`` bytes of the stream (fewer at its end)."""
        while n > 0:
            chunk = self.read(min(n, READ_CHUNK))
            if not chunk:
                return
            n -= len(chunk)

    def release(self, pos: int) -> None:
        """mmap only: drop mapped pages behind ``pos`` from this process's resident set."""
        if self.mm is not None and pos - self.released >= DONTNEED_STEP:
            upto = pos - pos % mmap.PAGESIZE
            try:
                self.mm.madvise(mmap.MADV_DONTNEED, self.released, upto - self.released)
            except (OSError, ValueError, AttributeError):
                pass
            self.released = upto

    def close(self) -> None:
        """Close the decompressor and unmap the file. Zero-copy members still viewing the
        mapping keep it alive: it is unmapped when the last view is released."""
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:  # views exported by zero_copy=True are still alive
                pass
            self.mm = None
        if self.decompressor is not None:
            self.decompressor.close()
