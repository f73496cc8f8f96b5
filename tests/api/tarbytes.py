"""Small tar archives in memory, for the webdataset compatibility tests."""

from __future__ import annotations

import io
import tarfile


def tar_bytes(members: list[tuple[str, bytes]]) -> bytes:
    """A tar archive of ``(name, data)`` members, in that order."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
