"""Helpers for the index tests: write generated archives to files, read them sequentially, and
:class:`PreadOpener`, local files served like a remote backend."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from wds_cloud.core.samples import tar_samples
from wds_cloud.errors import ShardReadError
from wds_cloud.openers.streams.batchread import RangeBatchReads


def write(directory: Path, name: str, blob: bytes) -> str:
    """Store ``blob`` as ``directory/name``; return the path."""
    path = directory / name
    path.write_bytes(blob)
    return str(path)


def sequential(url: str, registry: Any = None) -> list[dict[str, Any]] | BaseException:
    """The samples ``WebDataset`` yields for one shard (with ``__local_path__`` for files), or
    the error the reader raises."""
    from wds_cloud.openers.registry import default_registry, url_scheme

    registry = registry or default_registry()
    stream = registry.open(url)
    local = url if url_scheme(url) == "file" else None
    try:
        return list(tar_samples(stream, url, local_path=local))
    except Exception as exc:
        return exc
    finally:
        stream.close()


class PreadOpener(RangeBatchReads):
    """``pread://`` + a local path: the files read with ``os.pread``, served as a remote
    backend is (``remote``, ``read_range``, the shared ``read_batch``), so random access takes
    the network path (batched, coalesced, concurrent ranged reads) without a server.
    ``reads`` counts the ranged reads."""

    remote = True

    def __init__(self) -> None:
        self.reads = 0
        self._lock = threading.Lock()

    def open(self, url: str, **options: Any) -> Any:
        return open(url.removeprefix("pread://"), "rb")

    def read_range(self, url: str, offset: int, length: int, **options: Any) -> bytes:
        with self._lock:
            self.reads += 1
        fd = os.open(url.removeprefix("pread://"), os.O_RDONLY)
        try:
            data = os.pread(fd, length, offset)
        finally:
            os.close(fd)
        if len(data) < length:
            raise ShardReadError(
                f"the file has {offset + len(data)} bytes; the range ends at {offset + length}",
                url=url,
                offset=offset,
            )
        return data
