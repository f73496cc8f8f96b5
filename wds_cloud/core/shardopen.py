"""Shard URLs -> open streams -> samples: the shard-opening half of the sample readers.

:class:`ShardOpener` opens a shard URL through an opener registry (optionally through a shard
cache); :func:`tarfile_samples` (``tarfile_to_samples`` as a pipeline stage) opens each shard of
a shard list, the next one while the current one is read where the backend reads ahead, and
groups its members with :func:`~wds_cloud.core.samples.tar_samples`. The webdataset-compatible
building blocks for opening are here too: :func:`url_opener` (which code written for webdataset
may replace by assignment) and :func:`tar_file_expander`; the grouping ones are in
:mod:`wds_cloud.core.samples`.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from wds_cloud.core.curry import pipelinefilter
from wds_cloud.core.handlers import Handler, reraise_exception
from wds_cloud.core.samples import Sample, is_meta, meta_prefix, meta_suffix, tar_samples
from wds_cloud.core.tar import iter_tar
from wds_cloud.errors import SampleError
from wds_cloud.observe.profile import current as current_recorder
from wds_cloud.observe.stream import open_timed
from wds_cloud.openers.registry import OpenerRegistry, default_registry, url_scheme
from wds_cloud.openers.streams.readahead import open_ahead
from wds_cloud.openers.streams.stream import ReadStream

log = logging.getLogger(__name__)

#: A ``url_opener``: ``{"url": ...}`` dicts in, the same dicts with an open ``"stream"`` out.
UrlOpener = Callable[..., Iterator[Sample]]


def local_path_of(url: str) -> str | None:
    """The local file path of ``url`` (a ``file:`` URL or plain path), else None."""
    if url_scheme(url) != "file" or url == "-":
        return None
    from wds_cloud.openers.local import url_to_path

    return url_to_path(url)


def _shard_url(item: Any) -> str:
    if isinstance(item, str):
        return item
    url = item.get("url") if isinstance(item, dict) else None
    if isinstance(url, str):
        return url
    raise SampleError(f"shard list items must be URL strings or dicts with 'url', got {item!r}")


class ShardOpener:
    """Opens shard URLs through a registry, optionally through a shard cache.

    Picklable: holds the registry and the cache configuration, never open streams.
    """

    def __init__(
        self,
        registry: OpenerRegistry | None = None,
        cache_dir: str | None = None,
        cache_size: int | None = None,
        **open_options: Any,
    ) -> None:
        self.registry = registry
        self.cache_dir = cache_dir
        self.cache_size = cache_size
        self.open_options = open_options
        self._cache: Any = None

    @property
    def cache(self) -> Any:
        """The :class:`~wds_cloud.openers.cache.shardcache.ShardCache`, or None without ``cache_dir``."""
        if self._cache is None and self.cache_dir is not None:
            from wds_cloud.openers.cache.shardcache import ShardCache

            self._cache = ShardCache(
                self.cache_dir, max_bytes=self.cache_size, registry=self.registry
            )
        return self._cache

    def open(self, url: str) -> tuple[ReadStream, str | None]:
        """Open ``url``; return the stream and the local path of its bytes (if any)."""
        rec = current_recorder()  # None unless profiling is on in this process
        if rec is not None:
            return open_timed(lambda: self._open(url), rec, url, url_scheme(url))
        return self._open(url)

    def _open(self, url: str) -> tuple[ReadStream, str | None]:
        cache = self.cache
        if cache is not None and url_scheme(url) != "file":
            return cache.open(url, **self.open_options), cache.local_path(url)
        registry = self.registry or default_registry()
        return registry.open(url, **self.open_options), local_path_of(url)

    def opens_early(self, url: str) -> bool:
        """Whether a shard reader may open ``url`` while the shard before it is being read
        (remote streams read ahead, no cache; see :mod:`wds_cloud.openers.streams.readahead`)."""
        registry = self.registry or default_registry()
        return self.cache_dir is None and registry.reads_ahead(url)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_cache"] = None
        return state


def tarfile_samples(
    src: Iterable[Any],
    *,
    handler: Handler = reraise_exception,
    select_files: Callable[[str], bool] | None = None,
    rename_files: Callable[[str], str] | None = None,
    registry: OpenerRegistry | None = None,
    cache_dir: str | None = None,
    cache_size: int | None = None,
    local_paths: bool = False,
    opener: ShardOpener | None = None,
    concatenated: bool = False,
    zero_copy: bool = False,
    **open_options: Any,
) -> Iterator[Sample]:
    """Open each shard of ``src`` and yield its samples.

    Args:
        src: shard URLs, or dicts with a ``"url"`` key (what shard lists yield).
        handler: error policy for open errors, read errors and malformed samples.
        select_files: keep only members whose name satisfies this predicate.
        rename_files: map member names before grouping.
        registry: opener registry (the default one when None).
        cache_dir: cache remote shards here while streaming them.
        cache_size: bound of the cache in bytes (least recently used evicted).
        local_paths: add ``__local_path__`` for shards read from local files (as
            ``WebDataset`` does; ``tarfile_to_samples`` does not, like webdataset).
        opener: a prepared :class:`ShardOpener` (overrides registry/cache/options).
        concatenated: keep reading after end-of-archive markers, for streams that hold
            several tar archives back to back (a SageMaker Pipe-mode FIFO).
        zero_copy: member data as read-only ``memoryview``s of the mapped shard file or of the
            block read, not ``bytes`` (no copy; for code that decodes from buffers). Views stay
            valid while referenced; see docs/pipeline.md, "Zero-copy members".
        **open_options: passed to the backend's ``open`` (e.g. ``etl="name"`` for ais://).
    """
    if opener is None:
        opener = ShardOpener(registry, cache_dir, cache_size, **open_options)
    shard_opener = opener

    def shards() -> Iterator[tuple[Any, UrlOpener | None, bool]]:
        # each item with the url_opener the program assigned (looked up once per shard, when
        # the shard is taken from src) and whether to open it while the one before is read
        for item in src:
            override = url_opener_override()
            yield item, override, override is None and _opens_early(shard_opener, item)

    for (item, override, _), opened_stream in open_ahead(
        shards(),
        lambda shard: shard_opener.open(_shard_url(shard[0])),
        early=lambda shard: bool(shard[2]),
        close=lambda opened: opened[0].close(),
    ):
        try:
            url = _shard_url(item)
            if override is None:
                stream, local_path = opened_stream()
            else:
                opened = next(iter(override([{"url": url}], handler=handler)), None)
                if opened is None:
                    continue  # the user's opener skipped it through the handler
                stream, local_path = opened["stream"], None
        except Exception as exc:
            if handler(exc):
                continue
            return
        try:
            stopped = yield from tar_samples(
                stream,
                url,
                local_path=local_path if local_paths else None,
                handler=handler,
                select_files=select_files,
                rename_files=rename_files,
                concatenated=concatenated,
                zero_copy=zero_copy,
            )
        finally:
            stream.close()
        if stopped:
            return


tarfile_to_samples = pipelinefilter(tarfile_samples)


def _opens_early(opener: ShardOpener, item: Any) -> bool:
    """Whether to open shard ``item`` while the one before it is being read."""
    try:
        return opener.opens_early(_shard_url(item))
    except SampleError:
        return False  # reported when the item is reached


_logged_override = False


def url_opener_override() -> UrlOpener | None:
    """A ``url_opener`` the user assigned in place of ours, as webdataset code does.

    webdataset looks ``tariterators.url_opener`` up each time a shard is opened, so code written
    for it (the SageMaker/S3 blog post plugs boto3 in this way) replaces that global. Assigning
    ``wds_cloud.url_opener`` or ``wds_cloud.core.shardopen.url_opener`` works the same here, and
    so does ``wds_cloud.core.samples.url_opener``, where it was documented before this module
    was split off. The supported way to add a backend is :func:`wds_cloud.register_opener`.
    """
    global _logged_override
    package = sys.modules.get("wds_cloud")
    old_home = sys.modules.get("wds_cloud.core.samples")
    assigned: tuple[UrlOpener | None, ...] = (
        globals()["url_opener"],
        getattr(package, "__dict__", {}).get("url_opener"),
        getattr(old_home, "__dict__", {}).get("url_opener"),
    )
    for candidate in assigned:
        if candidate is not None and candidate is not _default_url_opener:
            if not _logged_override:
                _logged_override = True
                log.info(
                    "using the url_opener assigned by the program (%r); "
                    "wds_cloud.register_opener(scheme, opener) is the supported way",
                    candidate,
                )
            return candidate
    return None


# --- webdataset-compatible building blocks ----------------------------------------------------


def url_opener(
    data: Iterable[Any],
    handler: Handler = reraise_exception,
    registry: OpenerRegistry | None = None,
    **options: Any,
) -> Iterator[Sample]:
    """For each ``{"url": ...}`` yield the dict with an open ``"stream"`` added."""
    opener = ShardOpener(registry, **options)
    for item in data:
        sample = dict(item) if isinstance(item, dict) else {"url": item}
        try:
            sample["stream"], local_path = opener.open(sample["url"])
            if local_path is not None:
                sample["local_path"] = local_path
        except Exception as exc:
            if handler(exc):
                continue
            return
        yield sample


_default_url_opener = url_opener


META_PATTERN = r"__[^/]*__($|/)"
_FRESH_DICT: Any = object()  # the default eof_value: a new ``{}`` after each shard


def tar_file_iterator(
    fileobj: ReadStream | IO[bytes],
    skip_meta: str | None = META_PATTERN,
    handler: Handler = reraise_exception,
    select_files: Callable[[str], bool] | None = None,
    rename_files: Callable[[str], str] | None = None,
) -> Iterator[Sample]:
    """Yield ``{"fname", "data"}`` for each regular member of one tar stream (webdataset's
    ``tariterators.tar_file_iterator``).

    Args:
        fileobj: the shard's bytes (plain or compressed tar).
        skip_meta: members whose names match this regular expression are skipped (top-level
            ``__name__`` members always are); None keeps them.
        handler: receives an error raised by ``select_files``/``rename_files``; True skips the
            member, False ends the shard. Errors reading the tar itself are raised.
        select_files: keep only members for which this returns True (after renaming).
        rename_files: map each member name before selecting.
    """
    yield from _members(fileobj, None, skip_meta, handler, select_files, rename_files)


def _members(
    stream: ReadStream | IO[bytes],
    url: str | None,
    skip_meta: str | None,
    handler: Handler,
    select_files: Callable[[str], bool] | None,
    rename_files: Callable[[str], str] | None,
) -> Iterator[Sample]:
    for name, payload in iter_tar(stream, url=url):
        try:
            if "/" not in name and name.startswith(meta_prefix) and name.endswith(meta_suffix):
                continue
            if skip_meta == META_PATTERN:
                if name[:2] == meta_prefix and is_meta(name):
                    continue
            elif skip_meta is not None and re.match(skip_meta, name):
                continue
            if rename_files is not None:
                name = rename_files(name)
            if select_files is not None and not select_files(name):
                continue
        except Exception as exc:
            if handler(exc):
                continue
            return
        yield {"fname": name, "data": payload}


def tar_file_expander(
    data: Iterable[Sample],
    handler: Handler = reraise_exception,
    select_files: Callable[[str], bool] | None = None,
    rename_files: Callable[[str], str] | None = None,
    eof_value: Any = _FRESH_DICT,
) -> Iterator[Sample]:
    """For each opened shard yield ``{"fname", "data", "__url__"}`` per member.

    After each shard ``eof_value`` is yielded when it is not None; by default an empty dict,
    the shard boundary ``group_by_keys`` expects (as in webdataset).
    """
    for source in data:
        url = source["url"]
        stream = source["stream"]
        try:
            for item in _members(stream, url, META_PATTERN, handler, select_files, rename_files):
                item["__url__"] = url
                if "local_path" in source:
                    item["__local_path__"] = source["local_path"]
                yield item
        except Exception as exc:
            if not handler(exc):
                return
        finally:
            stream.close()
        if eof_value is _FRESH_DICT:
            yield {}
        elif eof_value is not None:
            yield eof_value
