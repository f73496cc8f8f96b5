"""``IndexedWebDataset``: random access to the samples of indexed shards on any backend.

``ds[i]`` is sample ``i`` of the dataset (shards in order, samples in shard order) as the same
dict the sequential reader yields for it (``__key__``, ``__url__``, ``__local_path__`` for local
files, one entry per member, lowercased extensions). Only that sample's bytes are read: one
ranged request spanning its members on ``s3://``, ``gs://``, ``http(s)://`` and ``ais://`` (the
openers' ``read_range``, resumed like every network read), a slice of a memory-mapped file for
local shards. The tar header before every member is checked (checksum, regular file), so an
index that no longer matches its shard raises :class:`ShardReadError` instead of returning
other bytes.

The torch version (``wds_cloud.IndexedWebDataset`` when torch is installed) is a map-style
``torch.utils.data.Dataset``: ``DataLoader(shuffle=True)``, ``DistributedSampler`` and worker
processes (fork and spawn) work as with any map-style dataset. The dataset holds the parsed
indexes and configuration only; memory maps and the shard cache are opened per process.
"""

from __future__ import annotations

import bisect
import logging
import mmap
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from wds_cloud.core.tarheader import BLOCK, is_member_header
from wds_cloud.errors import ConfigError, SampleError, ShardNotFoundError, ShardReadError
from wds_cloud.index.build import load_shard_index, scan_shard
from wds_cloud.index.format import IdxSample, ShardIndex, idx_url
from wds_cloud.listing import resolve_spec
from wds_cloud.openers.registry import OpenerRegistry, default_registry, url_scheme
from wds_cloud.redact import redact_url

log = logging.getLogger(__name__)

_COMPRESSED = (".gz", ".tgz", ".bz2", ".xz")


class _Handles:
    """Memory maps of local (or cached) shard files of this process, least recently used
    closed first."""

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
                _, old = self._maps.popitem(last=False)
                old.close()
            return mapped

    def close(self) -> None:
        with self._lock:
            for mapped in self._maps.values():
                mapped.close()
            self._maps.clear()


class IndexedWebDataset:
    """Map-style dataset over indexed shards: ``ds[i]`` reads sample ``i`` only.

    Args:
        source: a dataset JSON (``"s3://b/train/index.json"``), or shards (a brace pattern,
            a glob or prefix, or a list of URLs taken as given: see
            :func:`wds_cloud.listing.resolve_shards`) each with its ``.idx`` beside it.
        transform: applied to every sample dict before it is returned.
        registry: opener registry (the default one when None).
        build_missing: when a shard has no ``.idx``: False (default) raises naming the command
            that builds them; True reads those shards once now (in parallel, logged), writes
            their ``.idx`` beside them where the backend can write, and goes on.
        cache_dir: keep a local copy of every remote shard touched (downloaded whole on first
            access, then sliced); default: no cache, ranged reads.
        cache_size: bound of the cache in bytes (least recently used evicted).
        max_open: memory-mapped files kept open per process (least recently used closed).
        workers: threads that load (or build) the shard indexes at construction.
        **read_options: passed to the backend's ``read_range`` (``headers=`` for HTTP, ...).

    Raises:
        ShardNotFoundError: a shard has no index (and ``build_missing`` is False).
        ShardReadError: an index is malformed, or the dataset JSON's sample count for a
            shard disagrees with its index.
        ConfigError: compressed shards (offsets describe the uncompressed tar), no shards.
    """

    def __init__(
        self,
        source: str | Iterable[str],
        transform: Callable[[dict[str, Any]], Any] | None = None,
        *,
        registry: OpenerRegistry | None = None,
        build_missing: bool = False,
        cache_dir: str | None = None,
        cache_size: int | None = None,
        max_open: int = 16,
        workers: int = 16,
        **read_options: Any,
    ) -> None:
        super().__init__()
        self.registry = registry
        self.transform = transform
        self.cache_dir = cache_dir
        self.cache_size = cache_size
        self.max_open = max_open
        self.read_options = read_options
        reg = registry or default_registry()
        resolved = resolve_spec(source, registry=reg, literal_paths=True)
        urls = resolved.urls
        counts = {s.url: s.nsamples for s in resolved.index.shards} if resolved.index else {}
        for url in urls:
            if url.partition("?")[0].lower().endswith(_COMPRESSED):
                raise ConfigError(
                    f"{redact_url(url)!r} is compressed: its index offsets describe the "
                    "uncompressed tar, so its samples cannot be read at random; store the "
                    "shards uncompressed for random access"
                )
        self.urls: list[str] = list(urls)
        self.indexes: list[ShardIndex] = _load_indexes(
            self.urls, reg, build_missing=build_missing, workers=workers, source=source
        )
        for url, index in zip(self.urls, self.indexes, strict=True):
            if url in counts and counts[url] != len(index):
                raise ShardReadError(
                    f"the dataset JSON says {counts[url]} samples, the index {idx_url(url)} has "
                    f"{len(index)}; rebuild with 'wds-cloud index'",
                    url=url,
                )
        self.starts: list[int] = [0]
        for index in self.indexes:
            self.starts.append(self.starts[-1] + len(index))
        self._local: list[str | None] = [_local_file(url) for url in self.urls]
        self._handles: _Handles | None = None
        self._cache: Any = None

    # -- size and lookup ---------------------------------------------------------------------

    def __len__(self) -> int:
        return self.starts[-1]

    def locate(self, index: int) -> tuple[int, int]:
        """``(shard number, sample number in the shard)`` of dataset sample ``index``.

        Raises:
            IndexError: out of range.
        """
        total = self.starts[-1]
        if index < 0:
            index += total
        if not 0 <= index < total:
            raise IndexError(f"sample {index} out of range for a dataset of {total} samples")
        shard = bisect.bisect_right(self.starts, index) - 1
        return shard, index - self.starts[shard]

    def __getitem__(self, index: int) -> Any:
        shard, local = self.locate(int(index))
        key, members = self.indexes[shard].sample(local)
        url = self.urls[shard]
        sample = self._read(shard, url, key, members)
        return self.transform(sample) if self.transform is not None else sample

    # -- reading -----------------------------------------------------------------------------

    def _process_state(self) -> _Handles:
        handles = self._handles
        if handles is None or handles.pid != os.getpid():
            handles = self._handles = _Handles(self.max_open)
            self._cache = None
        return handles

    def _shard_cache(self) -> Any:
        if self._cache is None:
            from wds_cloud.openers.cache.shardcache import ShardCache

            self._cache = ShardCache(
                self.cache_dir, max_bytes=self.cache_size, registry=self.registry
            )
        return self._cache

    def _cached_path(self, url: str) -> str:
        """The local copy of remote shard ``url``, downloaded whole first if needed."""
        cache = self._shard_cache()
        path = cache.local_path(url)
        if path is None:
            log.info("random access: caching %s whole in %s", redact_url(url), self.cache_dir)
            stream = cache.open(url)
            try:
                while stream.read(8 << 20):
                    pass
            finally:
                stream.close()
            path = cache.local_path(url)
            if path is None:
                raise ShardReadError("the shard could not be cached", url=url)
        return str(path)

    def _read(self, shard: int, url: str, key: str, members: IdxSample) -> dict[str, Any]:
        handles = self._process_state()
        first = members[0].offset - BLOCK
        end = max(m.offset + m.size for m in members)
        if first < 0:
            raise self._stale(url, members[0].name, members[0].offset, "offset before the start")
        path = self._local[shard]
        if path is None and self.cache_dir is not None:
            path = self._cached_path(url)
        if path is not None:
            mapped = handles.get(path)
            if end > len(mapped):
                raise self._stale(url, members[-1].name, end, f"the file has {len(mapped)} bytes")
            span: Any = mapped
            base = 0
        else:
            reg = self.registry or default_registry()
            span = reg.read_range(url, first, end - first, **self.read_options)
            base = first
        sample: dict[str, Any] = {"__key__": key, "__url__": url}
        if path is not None:
            sample["__local_path__"] = path
        for member in members:
            at = member.offset - base
            if member.offset - BLOCK < first or not is_member_header(span[at - BLOCK : at]):
                raise self._stale(url, member.name, member.offset, "no tar header before it")
            ext = member.ext.lower()
            if ext in sample:
                raise SampleError(
                    f"{member.name}: duplicate file name in tar file {ext} {list(sample)}",
                    url=url,
                    key=key,
                )
            sample[ext] = span[at : at + member.size]
        return sample

    @staticmethod
    def _stale(url: str, member: str, offset: int, what: str) -> ShardReadError:
        return ShardReadError(
            f"the index does not match the shard ({what}); was the shard rewritten after it "
            f"was indexed? Rebuild with: wds-cloud index {url}",
            url=url,
            offset=offset,
            member=member,
        )

    # -- processes ---------------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_handles"] = None  # memory maps and the cache are per process
        state["_cache"] = None
        return state

    def close(self) -> None:
        """Close this process's memory maps (they reopen on the next access)."""
        if self._handles is not None:
            self._handles.close()
            self._handles = None

    def __repr__(self) -> str:
        first = redact_url(self.urls[0]) if self.urls else None
        return (
            f"{type(self).__name__}({len(self)} samples in {len(self.urls)} shards, "
            f"first={first!r})"
        )


def _local_file(url: str) -> str | None:
    if url_scheme(url) != "file" or url == "-":
        return None
    from wds_cloud.openers.local import url_to_path

    return url_to_path(url)


def _load_indexes(
    urls: Sequence[str],
    registry: OpenerRegistry,
    *,
    build_missing: bool,
    workers: int,
    source: Any,
) -> list[ShardIndex]:
    """The index of every shard, read in parallel; missing ones built or reported."""

    def load(url: str) -> ShardIndex | None:
        try:
            return load_shard_index(url, registry=registry)
        except FileNotFoundError:
            return None

    with ThreadPoolExecutor(max(1, min(workers, len(urls)))) as pool:
        found = list(pool.map(load, urls))
    missing = [url for url, index in zip(urls, found, strict=True) if index is None]
    if not missing:
        return [index for index in found if index is not None]
    spec = source if isinstance(source, str) else " ".join(missing[:3])
    if not build_missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ShardNotFoundError(
            f"no index {redact_url(idx_url(missing[0]))} for this shard{more}; build the "
            f"indexes with: wds-cloud index {redact_url(spec)}   (or pass build_missing=True)",
            url=missing[0],
        )
    log.warning(
        "IndexedWebDataset: %d of %d shards have no index; building them now (each is read "
        "once) and writing <shard>.idx beside them where possible; next time, build them ahead "
        "with: wds-cloud index %s",
        len(missing),
        len(urls),
        redact_url(spec),
    )

    def build(url: str) -> ShardIndex:
        scan = scan_shard(url, registry=registry)
        if scan.idx is None:
            assert scan.problem is not None
            raise scan.problem
        try:
            from wds_cloud.openers.registry import open_sink

            with open_sink(idx_url(url), registry) as sink:
                sink.write(scan.idx)
        except Exception as exc:  # read-only backend (http), permissions: keep it in memory
            log.info("could not write %s (%s); using it from memory", redact_url(idx_url(url)), exc)
        return ShardIndex(scan.idx, url=idx_url(url))

    with ThreadPoolExecutor(max(1, min(workers, len(missing)))) as pool:
        built = dict(zip(missing, pool.map(build, missing), strict=True))
    return [
        index if index is not None else built[url] for url, index in zip(urls, found, strict=True)
    ]


__all__ = ["IndexedWebDataset"]
