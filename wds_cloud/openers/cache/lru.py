"""Least-recently-used eviction for cache directories (the one LRU that every cache uses).

:func:`evict_lru` deletes the files with the smallest key (access time by default) until the
directory holds at most ``max_bytes``. :class:`~wds_cloud.openers.cache.shardcache.ShardCache` calls it
after each commit; :class:`LRUCleanup` is webdataset's public name for the same cleanup, with
webdataset's constructor (key ``os.path.getctime`` by default) and its ``interval`` throttle.

Files vanishing meanwhile (another process evicting or committing) are skipped, never an error.
A top-level ``%tmp`` folder (the shard cache's in-progress downloads) is never looked into.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Collection

log = logging.getLogger(__name__)

TEMP_DIR = "%tmp"


def cache_files(directory: str) -> list[tuple[float, int, str]]:
    """``(access time, size, path)`` of every file under ``directory`` (``%tmp`` excluded)."""
    files = []
    for root, dirs, names in os.walk(directory):
        if root == directory and TEMP_DIR in dirs:
            dirs.remove(TEMP_DIR)
        for name in names:
            path = os.path.join(root, name)
            try:
                st = os.stat(path)
            except FileNotFoundError:
                continue
            files.append((st.st_atime, st.st_size, path))
    return files


def evict_lru(
    directory: str,
    max_bytes: float,
    *,
    key: Callable[[str], float] | None = None,
    keep: Collection[str] = (),
    verbose: bool = False,
) -> list[str]:
    """Delete the files of ``directory`` with the smallest ``key`` until it holds ``<= max_bytes``.

    Args:
        directory: the cache directory (walked recursively; a missing one holds nothing).
        max_bytes: the bound for the total size of the files.
        key: ``key(path)`` orders the files, smallest deleted first; default: access time.
        keep: paths never deleted (the file just added).
        verbose: report each deletion on stderr.

    Returns:
        The deleted paths, in deletion order.
    """
    files = cache_files(directory)
    total = sum(size for _, size, _ in files)
    if total <= max_bytes:
        return []
    ranked: list[tuple[float, int, str]] = []
    for atime, size, path in files:
        if key is None:
            ranked.append((atime, size, path))
            continue
        try:
            ranked.append((key(path), size, path))
        except FileNotFoundError:
            total -= size
    ranked.sort()
    deleted = []
    for _, size, path in ranked:
        if total <= max_bytes:
            break
        if path in keep:
            continue
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        else:
            deleted.append(path)
            log.debug("evicted %s (%d bytes) from the cache %s", path, size, directory)
            if verbose:
                print(f"[wds_cloud cache] evict {path} ({size} bytes)", file=sys.stderr, flush=True)
        total -= size
    return deleted


class LRUCleanup:
    """webdataset's LRU cleanup of a cache directory: oldest files first until it fits.

    Args:
        cache_dir: the directory (files in subdirectories count too).
        cache_size: the bound, in bytes, for the total size of its files.
        keyfn: ``keyfn(path)`` orders the files; the smallest go first (default: ctime, as
            webdataset; :class:`~wds_cloud.openers.cache.shardcache.ShardCache` uses access time).
        verbose: report each deletion on stderr.
        interval: :meth:`cleanup` does nothing if it ran less than this many seconds ago
            (None: every call cleans).
    """

    def __init__(
        self,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_size: float = int(1e12),
        keyfn: Callable[[str], float] = os.path.getctime,
        verbose: bool = False,
        interval: float | None = 30,
    ) -> None:
        self.cache_dir = cache_dir
        self.cache_size = cache_size
        self.keyfn = keyfn
        self.verbose = verbose
        self.interval = interval
        self.last_run = 0.0

    def set_cache_dir(self, cache_dir: str | os.PathLike[str]) -> None:
        """Clean ``cache_dir`` from now on."""
        self.cache_dir = cache_dir

    def cleanup(self) -> None:
        """Delete files, smallest ``keyfn`` first, until the directory holds ``cache_size``."""
        if self.cache_dir is None or not os.path.isdir(self.cache_dir):
            return
        if self.interval is not None and time.time() - self.last_run < self.interval:
            return
        evict_lru(os.fspath(self.cache_dir), self.cache_size, key=self.keyfn, verbose=self.verbose)
        self.last_run = time.time()

    def __repr__(self) -> str:
        return f"LRUCleanup({self.cache_dir!r}, cache_size={self.cache_size})"
