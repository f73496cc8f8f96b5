"""Reading samples with their positions, and reading them again by position.

:func:`read_item` reads one :class:`~wds_cloud.resume.state.WorkItem` and yields
``(sample, [sample id])`` pairs. A whole shard is streamed as usual (through the shard cache when
there is one); a tail is streamed from its byte offset (a seek on local files, a ranged request
where the backend's opener has ``open_at``, else the stream is opened and the bytes before the
offset are read and dropped: ``pipe:`` commands, FIFOs, AIStore ETL output); byte ranges of
samples read but never delivered are fetched with ``read_range`` and parsed as tar. Compressed
shards (``.tar.gz`` ...) have no byte-addressable samples: they are read from the start and the
samples outside the wanted ranges are dropped.
"""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import logging
from collections import deque
from collections.abc import Callable, Generator, Iterator
from typing import IO, Any

from wds_cloud.core.curry import FilterFunction
from wds_cloud.core.handlers import Handler, reraise_exception
from wds_cloud.core.samples import StopShards, group_members, member_skipper
from wds_cloud.core.shardopen import ShardOpener, local_path_of
from wds_cloud.core.tar import iter_tar_positions
from wds_cloud.openers.capabilities import Seekable
from wds_cloud.openers.registry import default_registry, url_scheme
from wds_cloud.openers.streams.stream import ReadStream, skip_bytes
from wds_cloud.resume.state import SampleId, WorkItem

log = logging.getLogger(__name__)

Pair = tuple[dict[str, Any], list[SampleId]]

_COMPRESSED = (".gz", ".tgz", ".bz2", ".xz", ".zst", ".lz4")


def _quiet(message: str, offset: int) -> None:
    """A byte range of samples has no end-of-archive marker: expected, not worth a warning."""


def samples_with_positions(
    stream: IO[bytes] | Any,
    url: str,
    *,
    base: int = 0,
    start: int = 0,
    complete: bool = True,
    handler: Handler = reraise_exception,
    select_files: Callable[[str], bool] | None = None,
    rename_files: Callable[[str], str] | None = None,
    local_path: str | None = None,
    warn: bool = True,
    zero_copy: bool = False,
) -> Iterator[Pair]:
    """Group tar members into samples (as :func:`~wds_cloud.core.samples.tar_samples`) and
    yield each with its id ``(url, start, end, last)``.

    Args:
        stream: the bytes, from shard offset ``start``; offsets reported by the tar reader are
            shifted by ``base`` (0 for a local file positioned with ``seek``).
        complete: the stream runs to the shard's end (its last sample is the shard's last).
    """
    entries = iter_tar_positions(
        stream,
        url=url,
        skip=member_skipper(select_files, rename_files),
        on_warning=None if warn else _quiet,
        zero_copy=zero_copy,
    )
    grouped = group_members(
        entries,
        url,
        start=start,
        base=base,
        local_path=local_path,
        handler=handler,
        select_files=select_files,
        rename_files=rename_files,
    )
    last: tuple[dict[str, Any], int, int] | None = None  # held back: is it the shard's last?
    try:
        for item in grouped:
            if last is not None:  # _pair, inlined: this runs once per sample
                sample, a, b = last
                yield sample, ([] if b < 0 else [(url, a, b, False)])
            last = item
    except StopShards:
        if last is not None:
            yield _pair(url, last, False)
        raise
    if last is not None:
        yield _pair(url, last, complete)


def _pair(url: str, item: tuple[dict[str, Any], int, int], final: bool) -> Pair:
    """A grouped sample with its id; one cut short by a read error (``end == -1``, kept under a
    continuing handler) is tied to no position and is read again on resume."""
    sample, start, end = item
    return sample, [] if end < 0 else [(url, start, end, final)]


def _handled(call: Callable[[], Any], handler: Handler) -> Any:
    """``call()``; an error goes to ``handler``: None to skip the item, or stop reading."""
    try:
        return call()
    except Exception as exc:
        if handler(exc):
            return None
        raise StopShards from exc


def _cached_file(opener: ShardOpener, url: str) -> str | None:
    """The shard cache's complete local copy of a remote ``url``, if there is one."""
    if url_scheme(url) == "file":
        return None
    cache = opener.cache
    if cache is not None:
        path = cache.local_path(url)
        if path is not None:
            import os

            if os.path.exists(path):
                return str(path)
    return None


def open_at(opener: ShardOpener, url: str, offset: int) -> tuple[ReadStream, int]:
    """Open ``url`` positioned at byte ``offset``; return the stream and the base to add to
    offsets the tar reader reports (0 when the stream is a seeked local file)."""
    if url != "-" and url_scheme(url) == "file":
        local, _ = opener.open(url)  # through the local opener and its checks: a FileIO
        assert isinstance(local, io.IOBase), type(local)
        local.seek(offset)
        return local, 0
    path = _cached_file(opener, url)
    if path is not None:
        cached = open(path, "rb", buffering=0)
        cached.seek(offset)
        return cached, 0
    registry = opener.registry or default_registry()
    seeker = registry.capability(url, Seekable)
    if seeker is not None:
        return seeker.open_at(url, offset, **opener.open_options), offset
    stream, _ = opener.open(url)  # cannot seek: read the bytes before the offset and drop them
    skip_bytes(stream, offset)
    return stream, offset


def fetch_range(opener: ShardOpener, url: str, a: int, b: int) -> bytes:
    """Bytes ``a .. b`` of ``url`` (a local file or cached copy: ``pread``; else a ranged
    read)."""
    path = _cached_file(opener, url)
    if path is not None:
        import os

        with open(path, "rb", buffering=0) as f:
            return os.pread(f.fileno(), b - a, a)
    registry = opener.registry or default_registry()
    return registry.read_range(url, a, b - a, **opener.open_options)


def read_item(
    item: WorkItem,
    opener: ShardOpener,
    *,
    handler: Handler = reraise_exception,
    select_files: Callable[[str], bool] | None = None,
    rename_files: Callable[[str], str] | None = None,
    local_paths: bool = False,
    zero_copy: bool = False,
) -> Iterator[Pair]:
    """Yield the samples of one work item with their ids."""
    url = item.url
    kw: dict[str, Any] = {
        "handler": handler,
        "select_files": select_files,
        "rename_files": rename_files,
        "zero_copy": zero_copy,
    }
    compressed = url.lower().endswith(_COMPRESSED)
    if item.whole or compressed or (item.ranges and not _byte_addressable(opener, url)):
        opened = _handled(lambda: opener.open(url), handler)
        if opened is None:
            return
        stream, local_path = opened
        try:
            pairs = samples_with_positions(
                stream, url, local_path=local_path if local_paths else None, **kw
            )
            if item.whole:
                yield from pairs
                return
            log.info("%s: reading it from the start to resume inside it", url)
            for sample, ids in pairs:
                if ids and _wanted(item, ids[0][1]):
                    yield sample, ids
        finally:
            stream.close()
        return
    local_path = local_path_of(url) if local_paths else None
    with contextlib.closing(_fetch_ranges(opener, url, item.ranges, handler)) as fetched:
        for a, data in fetched:
            if data is None:
                return
            yield from samples_with_positions(
                io.BytesIO(data),
                url,
                base=a,
                start=a,
                complete=False,
                warn=False,
                local_path=local_path,
                **kw,
            )
    if item.tail is not None:
        tail = item.tail
        opened = _handled(lambda: open_at(opener, url, tail), handler)
        if opened is None:
            return
        stream, base = opened
        try:
            yield from samples_with_positions(
                stream, url, base=base, start=item.tail, local_path=local_path, **kw
            )
        finally:
            stream.close()


_READ_OPTIONS = ("handler", "select_files", "rename_files", "local_paths", "zero_copy")


def reader_options(reader: FilterFunction) -> tuple[ShardOpener, dict[str, Any]]:
    """The shard opener and the :func:`read_item` options of a ``tarfile_to_samples`` stage."""
    kw = dict(reader.kw)
    opener = kw.pop("opener", None) or ShardOpener(
        kw.pop("registry", None),
        kw.pop("cache_dir", None),
        kw.pop("cache_size", None),
        **{k: v for k, v in kw.items() if k not in _READ_OPTIONS},
    )
    return opener, {k: kw[k] for k in _READ_OPTIONS if k in kw}


RANGE_READS = 8
"""Ranged reads of one shard's gaps kept in flight at once (see :func:`_fetch_ranges`)."""


def _fetch_ranges(
    opener: ShardOpener, url: str, ranges: tuple[tuple[int, int], ...], handler: Handler
) -> Generator[tuple[int, bytes | None], None, None]:
    """``(a, bytes a .. b)`` for each range, in order; ``(a, None)`` then stop when a read
    failed and ``handler`` said to skip.

    The samples that were in buffers when the state was taken lie scattered over the shard: a
    resumed reader has one gap per sample or two, hundreds of small ranged reads before its
    first batch. Each is a round trip to an object store, so on remote shards up to
    :data:`RANGE_READS` of them run at once on threads (yielded in order; nothing outside the
    ranges is read). Local files and cached copies are read one range after the other.
    """
    if len(ranges) < 2 or url_scheme(url) == "file" or _cached_file(opener, url) is not None:
        for a, b in ranges:
            data = _handled(functools.partial(fetch_range, opener, url, a, b), handler)
            yield a, data
            if data is None:
                return
        return
    from concurrent.futures import Future, ThreadPoolExecutor

    pool = ThreadPoolExecutor(RANGE_READS, thread_name_prefix="wds-cloud-range")
    todo = iter(ranges)
    pending: deque[tuple[int, Future[bytes]]] = deque()
    try:
        for a, b in itertools.islice(todo, 2 * RANGE_READS):
            pending.append((a, pool.submit(fetch_range, opener, url, a, b)))
        while pending:
            a, future = pending.popleft()
            data = _handled(future.result, handler)
            nxt = next(todo, None)
            if nxt is not None and data is not None:
                pending.append((nxt[0], pool.submit(fetch_range, opener, url, *nxt)))
            yield a, data
            if data is None:
                return
    finally:
        for _, future in pending:
            future.cancel()
        pool.shutdown(wait=False)


def _byte_addressable(opener: ShardOpener, url: str) -> bool:
    """Whether byte ranges of ``url`` can be fetched as the reader saw them. An opener says
    otherwise with ``byte_addressable(url) -> False`` (an AIStore inline ETL: the offsets are
    the transformed stream's, which has no ranged reads); such shards are read from the start
    and the wanted samples picked, like compressed ones."""
    registry = opener.registry or default_registry()
    check = getattr(registry.for_url(url), "byte_addressable", None)
    return True if check is None else bool(check(url))


def _wanted(item: WorkItem, start: int) -> bool:
    if item.tail is not None and start >= item.tail:
        return True
    return any(a <= start < b for a, b in item.ranges)
