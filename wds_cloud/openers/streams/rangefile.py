"""``RangeFile``: a seekable, read-only file object over one object's ranged reads.

Readers that need a real file (``pyarrow.parquet`` seeks to the footer, then to each column
chunk) get one on any backend without a second I/O stack: every read is the registry's
``read_range`` (one ranged GET on ``s3://``, ``gs://``, ``http(s)://``, ``ais://``, resumed like
every network read; ``pread`` on local files). Small reads are served from aligned blocks kept
in a bounded LRU cache (``block_size * cache_blocks`` bytes at most); a read of a block or more
goes straight to one ranged read of exactly that span and is not cached, so memory follows
what the caller asks for, never the object.

The size comes from the caller (a listing that knows it) or from :func:`object_size`: the
response to one ``open_at(url, 0)`` (the object's size from its headers; the body is not read).
"""

from __future__ import annotations

import io
import os
import threading
from collections import OrderedDict
from typing import Any

from wds_cloud.errors import ConfigError, ShardNotFoundError
from wds_cloud.openers.capabilities import Seekable
from wds_cloud.openers.local import url_to_path
from wds_cloud.openers.registry import OpenerRegistry, default_registry, url_scheme
from wds_cloud.redact import redact_url

DEFAULT_BLOCK = 64 << 10
DEFAULT_CACHE_BLOCKS = 32


def object_size(url: str, registry: OpenerRegistry | None = None) -> int:
    """The size in bytes of the object at ``url``.

    Local files: ``os.stat``. Other backends: the size the answer to one ``open_at(url, 0)``
    (or ``open(url)``) announces, the stream closed without reading its body; a stream that
    announces no size is read to its end and counted.

    Raises:
        ShardNotFoundError: no such object or file.
        ShardError: the opener's other errors.
    """
    if url_scheme(url) == "file":
        try:
            return os.stat(url_to_path(url)).st_size
        except FileNotFoundError as exc:
            raise ShardNotFoundError(f"no such file: {url!r}", url=url) from exc
    registry = registry or default_registry()
    seeker = registry.capability(url, Seekable)
    stream = seeker.open_at(url, 0) if seeker is not None else registry.for_url(url).open(url)
    try:
        size = getattr(stream, "size", None)
        if isinstance(size, int):
            return size
        total, buffer = 0, bytearray(DEFAULT_BLOCK)
        while n := stream.readinto(buffer):
            total += n
        return total
    finally:
        stream.close()


class RangeFile(io.RawIOBase):
    """A seekable read-only binary file over ranged reads of ``url``.

    Args:
        url: any URL the registry can read a range of.
        registry: opener registry (the default one when None).
        size: the object's size when known (a listing); else asked once (:func:`object_size`).
        block_size: bytes per cached block; a read of this many bytes or more bypasses the cache.
        cache_blocks: blocks kept (least recently used dropped first).
        **read_options: passed to every ``read_range`` call.

    Raises:
        ConfigError: a block size or cache size below 1.
        ShardError: the object cannot be found or read (naming the URL).
    """

    def __init__(
        self,
        url: str,
        *,
        registry: OpenerRegistry | None = None,
        size: int | None = None,
        block_size: int = DEFAULT_BLOCK,
        cache_blocks: int = DEFAULT_CACHE_BLOCKS,
        **read_options: Any,
    ) -> None:
        super().__init__()
        if block_size < 1 or cache_blocks < 1:
            raise ConfigError(
                f"RangeFile needs block_size and cache_blocks >= 1, got {block_size}, "
                f"{cache_blocks}"
            )
        self.url = url
        self.name = url
        self.registry = registry or default_registry()
        self.size = object_size(url, self.registry) if size is None else size
        self.block_size = block_size
        self.cache_blocks = cache_blocks
        self.read_options = read_options
        self.requests = 0  # ranged reads made, for tests and curious callers
        self._position = 0
        self._blocks: OrderedDict[int, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RangeFile({redact_url(self.url)!r}, size={self.size})"

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        self._check_open()
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Move to ``offset`` from the start, the current position or the end, as
        ``io.BytesIO`` does: past the end is allowed (reads there return ``b""``), a negative
        absolute position is a ``ValueError``, a relative move before byte 0 stops at 0."""
        self._check_open()
        if whence == io.SEEK_SET:
            target = offset
        elif whence == io.SEEK_CUR:
            target = self._position + offset
        elif whence == io.SEEK_END:
            target = self.size + offset
        else:
            raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
        if target < 0:
            if whence == io.SEEK_SET:
                raise ValueError(f"negative seek position {target}")
            target = 0
        self._position = target
        return target

    def read(self, size: int | None = -1) -> bytes:
        """Up to ``size`` bytes from the current position (all the rest for -1 or None)."""
        self._check_open()
        with self._lock:
            start = self._position
            left = max(0, self.size - start)
            n = left if size is None or size < 0 else min(size, left)
            if n == 0:
                return b""
            data = self._fetch(start, n) if n >= self.block_size else self._cached(start, n)
            self._position = start + len(data)
            return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file")

    def _fetch(self, offset: int, length: int) -> bytes:
        self.requests += 1
        return self.registry.read_range(self.url, offset, length, **self.read_options)

    def _cached(self, start: int, n: int) -> bytes:
        bs = self.block_size
        first, last = start // bs, (start + n - 1) // bs
        missing = [b for b in range(first, last + 1) if b not in self._blocks]
        if missing:
            lo, hi = missing[0] * bs, min(self.size, (missing[-1] + 1) * bs)
            data = self._fetch(lo, hi - lo)
            for b in range(missing[0], missing[-1] + 1):
                if b not in self._blocks:
                    self._blocks[b] = data[b * bs - lo : (b + 1) * bs - lo]
        pieces = []
        for b in range(first, last + 1):
            self._blocks.move_to_end(b)
            pieces.append(self._blocks[b])
        while len(self._blocks) > max(self.cache_blocks, last - first + 1):
            self._blocks.popitem(last=False)
        skip = start - first * bs
        return b"".join(pieces)[skip : skip + n]

    def close(self) -> None:
        self._blocks.clear()
        super().close()


__all__ = ["DEFAULT_BLOCK", "DEFAULT_CACHE_BLOCKS", "RangeFile", "object_size"]
