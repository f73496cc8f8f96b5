"""Archive reads the AIStore emulator serves: ``archpath``, ``archregx`` + ``archmode``, ARCH_DIR.

The server side of AIStore opens tar/tgz shards itself (``cmn/archive``); this module does the
same with :mod:`tarfile` over the in-memory object. Zip and ``.tar.lz4`` are not modelled.
"""

from __future__ import annotations

import io
import posixpath
import re
import tarfile
from collections.abc import Callable

ARCHIVE_SUFFIXES = (".tar", ".tgz", ".tar.gz")


def is_archive_name(name: str) -> bool:
    """Whether AIStore would treat the object as a (tar) archive from its name."""
    return name.endswith(ARCHIVE_SUFFIXES)


def _open(data: bytes) -> tarfile.TarFile:
    return tarfile.open(fileobj=io.BytesIO(data), mode="r:*")


def read_member(data: bytes, archpath: str) -> bytes | None:
    """The bytes of member ``archpath`` (one leading ``/`` ignored), or None when absent."""
    want = archpath.lstrip("/")
    with _open(data) as tar:
        for info in tar:
            if info.isfile() and info.name.lstrip("/") == want:
                f = tar.extractfile(info)
                return f.read() if f is not None else b""
    return None


def list_members(data: bytes) -> list[tuple[str, int]]:
    """``(name, size)`` of the regular-file members, in archive order."""
    with _open(data) as tar:
        return [(i.name, i.size) for i in tar if i.isfile()]


def wds_key(name: str) -> str:
    """AIStore's ``cos.WdsKey``: the path without its LAST extension, one leading ``/`` dropped."""
    name = name.lstrip("/")
    ext = posixpath.splitext(name)[1]
    return name[: len(name) - len(ext)] if ext else name


def matcher(regx: str, mode: str) -> Callable[[str], bool]:
    """The member predicate for ``archregx`` under ``archmode`` (default ``regexp``).

    Raises:
        ValueError: unknown mode or bad regular expression.
    """
    mode = mode or "regexp"
    if mode == "regexp":
        pattern = re.compile(regx)
        return lambda n: pattern.search(n) is not None
    if mode == "prefix":
        return lambda n: n.lstrip("/").startswith(regx)
    if mode == "suffix":
        return lambda n: n.endswith(regx)
    if mode == "substr":
        return lambda n: regx in n
    if mode == "wdskey":
        return lambda n: wds_key(n) == regx.lstrip("/")
    raise ValueError(f"invalid archmode {mode!r}")


def select_members(data: bytes, regx: str, mode: str) -> tuple[bytes, int]:
    """A tar of the matching members (original headers) and how many matched."""
    match = matcher(regx, mode)
    out = io.BytesIO()
    count = 0
    with _open(data) as tar, tarfile.open(fileobj=out, mode="w", format=tar.format) as dst:
        for info in tar:
            if info.isfile() and match(info.name):
                dst.addfile(info, tar.extractfile(info))
                count += 1
    return out.getvalue(), count
