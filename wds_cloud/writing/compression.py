"""Compression of written shards: which targets get gzip, and a reproducible gzip stream.

:class:`GzipStream` writes one gzip member with ``mtime=0`` and no file name into a sink,
byte-for-byte what ``gzip.GzipFile(filename="", mtime=0, fileobj=sink)`` writes. Unlike a
``GzipFile`` it has no finaliser: a discarded shard is never given a gzip trailer behind the
writer's back, and nothing is written after the sink was aborted.
"""

from __future__ import annotations

import os
import struct
import zlib
from typing import Any

from wds_cloud.errors import ConfigError

_HEADER = b"\x1f\x8b\x08\x00" + bytes(4)  # magic, deflate, no flags, mtime 0


def wants_gzip(target: Any, compress: bool | str | None) -> bool:
    """Decide whether to gzip: ``compress`` when given, else from a ``.gz``/``.tgz`` name.

    Raises:
        ConfigError: bz2/xz or an unknown ``compress`` value (the readers only detect gzip).
    """
    if compress is False:
        return False
    if compress is True or compress in ("gz", "gzip"):
        return True
    if compress is not None:
        raise ConfigError(f"compress must be None, False, True or 'gz', got {compress!r}")
    if isinstance(target, str | os.PathLike):
        name = os.fspath(target)
        if name.startswith("pipe:"):
            return False
        lower = name.lower()
        if lower.endswith((".bz2", ".xz", ".tbz", ".tbz2", ".txz")):
            raise ConfigError(f"{name!r}: only gzip compression is supported for writing")
        return lower.endswith((".gz", ".tgz"))
    return False


class GzipStream:
    """Compress what is written into ``sink`` as one deterministic gzip member.

    Args:
        sink: a writable binary stream (not closed by :meth:`finish`).
        level: zlib compression level, 0-9.
    """

    def __init__(self, sink: Any, level: int) -> None:
        self._sink = sink
        self._zip = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS, zlib.DEF_MEM_LEVEL, 0)
        xfl = b"\x02" if level == 9 else b"\x04" if level == 1 else b"\x00"
        self._header: bytes | None = _HEADER + xfl + b"\xff"  # extra flags, OS unknown
        self._crc = 0
        self._size = 0

    def _emit(self, data: bytes) -> None:
        if self._header is not None:
            data, self._header = self._header + data, None
        if data:
            self._sink.write(data)

    def write(self, data: Any) -> int:
        """Compress ``data`` (any contiguous buffer); returns its size in bytes."""
        size = memoryview(data).nbytes
        self._crc = zlib.crc32(data, self._crc)
        self._size += size
        self._emit(self._zip.compress(data))
        return size

    def finish(self) -> None:
        """Write the rest of the deflate stream and the trailer (CRC32, size mod 2**32)."""
        self._emit(self._zip.flush() + struct.pack("<II", self._crc, self._size & 0xFFFFFFFF))


__all__ = ["GzipStream", "wants_gzip"]
