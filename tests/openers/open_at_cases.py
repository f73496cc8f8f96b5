"""The differential check every backend's ``open_at`` runs: ``open_at(url, off).read()`` against
the object's bytes ``data[off:]`` at many random offsets, in whole and in tiny reads.

Used by tests/openers/test_open_at.py (HTTP), tests/gcs/test_open_at.py and
tests/ais/test_open_at.py, each against its real local server.
"""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from wds_cloud.errors import ConfigError, ShardOpenError

_TINY_TAIL = 20_000  # tiny reads only over the last bytes (thousands of calls per stream)


def offsets(rng: random.Random, size: int, count: int, near_end: int) -> list[int]:
    """``count`` offsets in ``0 .. size``: ``near_end`` random ones in the last
    ``_TINY_TAIL`` bytes first, then both ends and block boundaries, then random ones."""
    picked = [rng.randrange(max(0, size - _TINY_TAIL), size + 1) for _ in range(near_end)]
    picked += [o for o in (0, 1, 511, 512, 513, size - 1, size) if 0 <= o <= size]
    picked += [rng.randrange(size + 1) for _ in range(max(0, count - len(picked)))]
    return picked


def read_tiny(stream: Any, rng: random.Random) -> bytes:
    """The rest of ``stream`` through reads and ``readinto`` calls of 1 to 7 bytes."""
    parts = []
    while True:
        n = rng.randint(1, 7)
        if rng.random() < 0.5:
            chunk = stream.read(n)
        else:
            buf = bytearray(n)
            got = stream.readinto(buf)
            chunk = bytes(buf[:got])
        if not chunk:
            return b"".join(parts)
        assert len(chunk) <= n
        parts.append(chunk)


def check_open_at(
    opener: Any,
    url: str,
    data: bytes,
    *,
    seed: int,
    count: int = 40,
    tiny: int = 6,
    **options: Any,
) -> list[int]:
    """Assert ``open_at(url, off)`` yields ``data[off:]`` at ``count`` offsets: ``tiny`` of
    them (near the end) through 1-7 byte reads, the others in one ``read()``; returns the
    offsets checked, in order."""
    rng = random.Random(seed)
    checked = []
    for i, off in enumerate(offsets(rng, len(data), count, tiny)):
        stream = opener.open_at(url, off, **options)
        try:
            if i < tiny:
                got = read_tiny(stream, rng)
            else:
                got = stream.read()
            assert got == data[off:], f"offset {off}: {len(got)} bytes, {len(data) - off} wanted"
            assert stream.read() == b""
        finally:
            stream.close()
        checked.append(off)
    return checked


def check_ends(opener: Any, url: str, size: int) -> None:
    """``open_at`` at the object's ``size`` is an empty stream; past it, a
    :class:`ShardOpenError` naming the URL, the offset and the size; below 0, a ConfigError."""
    with opener.open_at(url, size) as stream:
        assert stream.read() == b""
    wanted = re.escape(f"offset {size + 1} is beyond the end of the object ({size} bytes)")
    with pytest.raises(ShardOpenError, match=wanted) as info:
        opener.open_at(url, size + 1)
    assert (info.value.url, info.value.offset) == (url, size + 1)
    with pytest.raises(ConfigError, match="offset must be >= 0"):
        opener.open_at(url, -1)
