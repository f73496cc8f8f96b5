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
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NamedTuple

from wds_cloud.core.handlers import Handler
from wds_cloud.core.tarheader import BLOCK, is_member_header
from wds_cloud.errors import (
    ConfigError,
    SampleError,
    ShardError,
    ShardReadError,
)
from wds_cloud.index.format import IdxSample, ShardIndex, idx_url
from wds_cloud.index.loading import load_indexes, local_file
from wds_cloud.index.mmaps import MemoryMaps
from wds_cloud.listing import resolve_spec
from wds_cloud.openers.capabilities import RangeRequest
from wds_cloud.openers.registry import OpenerRegistry, default_registry
from wds_cloud.openers.streams.batchread import BatchConfig, read_batch
from wds_cloud.redact import redact_url

log = logging.getLogger(__name__)

_COMPRESSED = (".gz", ".tgz", ".bz2", ".xz")


class _Plan(NamedTuple):
    """What one sample needs: its shard, key and members, and bytes ``first .. end`` (from
    the first member's tar header to the last member's end)."""

    shard: int
    url: str
    key: str
    members: IdxSample
    first: int
    end: int


class _Span(NamedTuple):
    """Bytes holding a sample: ``data[i]`` is shard byte ``base + i``; ``path`` is the local
    file (``__local_path__``) when they are a memory map."""

    data: Any
    base: int
    path: str | None


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
        handler: what :meth:`get_batch` (and ``__getitems__``, which ``DataLoader`` calls)
            does with a sample it cannot read: None raises; a handler returning True skips
            and counts it (``wds.ignore_and_continue``). ``ds[i]`` always raises.
        batch: how batches of remote samples are read (:class:`BatchConfig`: reads in
            flight, coalescing gap and span, batches read ahead), or a dict of its fields;
            None fields come from ``WDS_CLOUD_BATCH_*`` or the defaults, read here.
        **read_options: passed to the backend's ``read_range`` (``headers=`` for HTTP, ...).

    Raises:
        ShardNotFoundError: a shard has no index (and ``build_missing`` is False).
        ShardReadError: an index is malformed, or the dataset JSON's sample count for a
            shard disagrees with its index.
        ConfigError: compressed shards, a bad ``batch`` setting (offsets describe the uncompressed tar), no shards.
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
        handler: Handler | None = None,
        batch: BatchConfig | dict[str, Any] | None = None,
        **read_options: Any,
    ) -> None:
        super().__init__()
        self.registry = registry
        self.handler = handler
        if isinstance(batch, dict):
            batch = BatchConfig(**batch)
        self.batch: BatchConfig = (batch or BatchConfig()).resolved()
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
        self.indexes: list[ShardIndex] = load_indexes(
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
        self._local: list[str | None] = [local_file(url) for url in self.urls]
        self._handles: MemoryMaps | None = None
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
        sample = self._read(self._plan(index))
        return self.transform(sample) if self.transform is not None else sample

    # -- batches -----------------------------------------------------------------------------

    def get_batch(self, indices: Iterable[int], *, handler: Handler | None = None) -> list[Any]:
        """Samples ``indices``, in the order asked (duplicates included), each exactly
        ``ds[i]``, read as one batch: slices of memory maps for local shards; for remote
        ones every sample's byte range at once, through its opener's ``read_batch`` (one
        AIStore GetBatch request; elsewhere coalesced concurrent ranged reads, see
        :mod:`wds_cloud.openers.streams.batchread`).

        Args:
            indices: dataset sample numbers (negative ones count from the end).
            handler: what to do with a sample that cannot be read (a stale index, a missing
                or short range, a duplicate member): None (the dataset's ``handler``, by
                default raise). A handler returning True skips that sample (the batch comes
                back shorter; the handler counts, e.g. ``wds.ignore_and_continue.count``),
                False ends the batch before it. When the batch read itself fails and a
                handler is set, the batch's remote samples are read again one by one, so
                only the failing ones are handed to it.

        Raises:
            IndexError: an index out of range (never handed to the handler).
            ShardReadError: a sample's range cannot be read or its index is stale, naming
                the URL and offset (without a skipping handler).
        """
        handler = handler if handler is not None else self.handler
        plans: list[_Plan | ShardError] = []
        for i in indices:
            try:
                plans.append(self._plan(i))
            except ShardError as exc:  # an index entry that cannot be right
                if handler is None:
                    raise
                plans.append(exc)
        good = [plan for plan in plans if isinstance(plan, _Plan)]
        spans = iter(self._spans(good, skipping=handler is not None))
        out: list[Any] = []
        for plan in plans:
            try:
                if isinstance(plan, ShardError):
                    raise plan
                span = next(spans)
                if isinstance(span, ShardError):
                    raise span
                sample = self._sample(plan, span)
            except (ShardError, SampleError) as exc:
                if handler is None:
                    raise
                if handler(exc):
                    continue
                break
            out.append(self.transform(sample) if self.transform is not None else sample)
        return out

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """:meth:`get_batch`: what torch's ``DataLoader`` calls with a batch of indices (when
        it batches: ``batch_size=`` or ``batch_sampler=``)."""
        return self.get_batch(indices)

    def iter_batches(
        self,
        batches: Iterable[Sequence[int]],
        *,
        readahead: int | None = None,
        handler: Handler | None = None,
    ) -> Iterator[list[Any]]:
        """:meth:`get_batch` of every batch of ``batches``, in order, with the next
        ``readahead`` batches read while one is consumed: memory holds at most
        ``readahead + 1`` batches' bytes (never a shard).

        Args:
            batches: lists of dataset sample numbers.
            readahead: batches read ahead (None: the ``batch`` setting, 2 by default; 0
                reads each when asked, in the caller's thread).
            handler: as for :meth:`get_batch`.
        """
        ahead = (self.batch.readahead or 0) if readahead is None else readahead
        if ahead < 1:
            for indices in batches:
                yield self.get_batch(indices, handler=handler)
            return
        pending: deque[Future[list[Any]]] = deque()
        source = iter(batches)
        with ThreadPoolExecutor(ahead, thread_name_prefix="wds-batch-ahead") as pool:
            try:
                for indices in source:
                    pending.append(pool.submit(self.get_batch, list(indices), handler=handler))
                    if len(pending) > ahead:
                        yield pending.popleft().result()
                while pending:
                    yield pending.popleft().result()
            finally:
                for future in pending:
                    future.cancel()

    # -- reading -----------------------------------------------------------------------------

    def _process_state(self) -> MemoryMaps:
        handles = self._handles
        if handles is None or handles.pid != os.getpid():
            handles = self._handles = MemoryMaps(self.max_open)
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

    def _plan(self, index: int) -> _Plan:
        """What sample ``index`` needs: its shard, key, members and byte span."""
        shard, local = self.locate(int(index))
        key, members = self.indexes[shard].sample(local)
        url = self.urls[shard]
        first = members[0].offset - BLOCK
        if first < 0:
            raise self._stale(url, members[0].name, members[0].offset, "offset before the start")
        end = max(m.offset + m.size for m in members)
        return _Plan(shard, url, key, members, first, end)

    def _local_span(self, plan: _Plan) -> _Span | None:
        """The memory map holding ``plan``'s bytes when its shard is a local file (or cached
        with ``cache_dir``), else None."""
        path = self._local[plan.shard]
        if path is None and self.cache_dir is not None:
            path = self._cached_path(plan.url)
        if path is None:
            return None
        mapped = self._process_state().get(path)
        if plan.end > len(mapped):
            last = plan.members[-1]
            raise self._stale(plan.url, last.name, plan.end, f"the file has {len(mapped)} bytes")
        return _Span(mapped, 0, path)

    def _remote_span(self, plan: _Plan) -> _Span:
        """``plan``'s bytes with one ranged read."""
        reg = self.registry or default_registry()
        data = reg.read_range(plan.url, plan.first, plan.end - plan.first, **self.read_options)
        return _Span(data, plan.first, None)

    def _read(self, plan: _Plan) -> dict[str, Any]:
        span = self._local_span(plan)
        return self._sample(plan, span if span is not None else self._remote_span(plan))

    def _spans(self, plans: Sequence[_Plan], *, skipping: bool) -> list[_Span | ShardError]:
        """The bytes of every plan: local ones mapped, remote ones read as one batch. With
        ``skipping``, a failed batch read is repeated one sample at a time and each failure
        is returned in its place instead of raised."""
        spans: list[_Span | ShardError | None] = []
        remote: list[int] = []
        for i, plan in enumerate(plans):
            span: _Span | ShardError | None
            try:
                span = self._local_span(plan)
            except ShardError as exc:
                if not skipping:
                    raise
                span = exc
            spans.append(span)
            if span is None:
                remote.append(i)
        if remote:
            requests = [
                RangeRequest(plans[i].url, plans[i].first, plans[i].end - plans[i].first)
                for i in remote
            ]
            reg = self.registry or default_registry()
            try:
                blobs = read_batch(reg, requests, self.batch, **self.read_options)
            except ShardError:
                if not skipping:
                    raise
                for i in remote:
                    try:
                        spans[i] = self._remote_span(plans[i])
                    except ShardError as exc:
                        spans[i] = exc
            else:
                for i, blob in zip(remote, blobs, strict=True):
                    spans[i] = _Span(blob, plans[i].first, None)
        done = [span for span in spans if span is not None]
        assert len(done) == len(plans)
        return done

    def _sample(self, plan: _Plan, span: _Span) -> dict[str, Any]:
        """The sample dict of ``plan`` from ``span``, every member's tar header checked."""
        url, key = plan.url, plan.key
        blob, base = span.data, span.base
        sample: dict[str, Any] = {"__key__": key, "__url__": url}
        if span.path is not None:
            sample["__local_path__"] = span.path
        for member in plan.members:
            at = member.offset - base
            if member.offset - BLOCK < plan.first or not is_member_header(blob[at - BLOCK : at]):
                raise self._stale(url, member.name, member.offset, "no tar header before it")
            ext = member.ext.lower()
            if ext in sample:
                raise SampleError(
                    f"{member.name}: duplicate file name in tar file {ext} {list(sample)}",
                    url=url,
                    key=key,
                )
            sample[ext] = blob[at : at + member.size]
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


__all__ = ["IndexedWebDataset"]
