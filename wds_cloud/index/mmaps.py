"""``MemoryMaps``: the memory-mapped shard files of one process, for random access."""

from __future__ import annotations

import mmap
import os
import threading
from collections import OrderedDict

__all__ = ["MemoryMaps"]


class MemoryMaps:
    """Memory maps of local (or cached) shard files of this process, at most ``limit`` kept,
    the least recently used dropped first.

    A dropped map is not closed here: it is unmapped when the last reference to it goes, so a
    batch (or another thread) still slicing it is never handed a closed map.
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.pid = os.getpid()
        self._maps: OrderedDict[str, mmap.mmap] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: str) -> mmap.mmap:
        with self._lock:
            mapped = self._maps.get(path)
            if mapped is not None:
                self._maps.move_to_end(path)
                return mapped
            with open(path, "rb") as f:
                mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            self._maps[path] = mapped
            while len(self._maps) > self.limit:
                self._maps.popitem(last=False)  # unmapped once nobody slices it any more
            return mapped

    def close(self) -> None:
        with self._lock:
            for mapped in self._maps.values():
                mapped.close()
            self._maps.clear()
