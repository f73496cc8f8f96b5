"""Build tar shards with odd corners for the reader's tests (stdlib tarfile, real bytes)."""

from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Iterable

Members = Iterable[tuple[str, bytes]]


def tar_bytes(
    members: Members,
    *,
    fmt: int = tarfile.USTAR_FORMAT,
    mtime: float = 1_700_000_000,
    pax_headers: dict[str, str] | None = None,
    extra: Iterable[tarfile.TarInfo] = (),
) -> bytes:
    """A tar archive of ``members`` (name, data) in the given format."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt, pax_headers=pax_headers or {}) as tf:
        for info in extra:
            tf.addfile(info)
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = mtime  # type: ignore[assignment]
            info.mode = 0o444
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def gz(data: bytes) -> bytes:
    """Gzip ``data`` deterministically."""
    return gzip.compress(data, mtime=0)


def write(path: str, data: bytes) -> str:
    """Write ``data`` to ``path`` and return the path."""
    with open(path, "wb") as f:
        f.write(data)
    return path
