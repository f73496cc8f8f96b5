"""Tar members -> WebDataset samples, exactly as webdataset 1.0.2 groups them.

Key rule (``base_plus_ext``): the key is the member path up to the first dot of its last path
component, the extension is the rest, lowercased. Consecutive members with the same key form one
sample ``{"__key__": key, "__url__": url, ext: bytes, ...}``; samples never span shards; a
repeated extension inside one sample is an error passed to the handler (with a skipping handler
the second file is dropped). Members whose names have no usable key (``noext``, ``.hidden``) are
skipped, as webdataset does; so are ``__meta__``-style names.

The fast path fuses tar parsing and grouping in one loop (:func:`tar_samples`); the
webdataset-compatible building blocks (:func:`url_opener`, :func:`tar_file_expander`,
:func:`group_by_keys`) are here too for pipelines that use them directly.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from wds_cloud.core.curry import pipelinefilter
from wds_cloud.core.handlers import Handler, reraise_exception
from wds_cloud.core.tar import Warn, iter_tar, iter_tar_positions
from wds_cloud.errors import SampleError, ShardError
from wds_cloud.openers.readahead import open_ahead
from wds_cloud.openers.registry import OpenerRegistry, default_registry, url_scheme
from wds_cloud.openers.stream import ReadStream
from wds_cloud.redact import redact_url

log = logging.getLogger(__name__)

Sample = dict[str, Any]
_META = re.compile(r"__[^/]*__($|/)")


def base_plus_ext(path: str) -> tuple[str | None, str | None]:
    """Split a member name into (key, extension) like webdataset's regex, without the regex.

    Equivalent to ``re.match(r"^((?:.*/|)[^.]+)[.]([^/]*)$", path)``; (None, None) when the
    name has no usable key.
    """
    slash = path.rfind("/")
    dot = path.find(".", slash + 1)
    if dot < 0:
        return None, None
    if dot > slash + 1:
        return path[:dot], path[dot + 1 :]
    # The last component starts with a dot: the regex can only match when the directory
    # component before it has no dot; then the key is the path up to and including the slash.
    if slash < 0:
        return None, None
    if "." in path[path.rfind("/", 0, slash) + 1 : slash]:
        return None, None
    return path[: slash + 1], path[slash + 2 :]


def split_member(name: str) -> tuple[str, str] | None:
    """``(key, extension)`` of a member name as the sample reader groups it, the extension's
    case kept; None for a name the reader skips (``__meta__`` names, names without a key).

    Shard indexes group members with this, so an index has exactly the reader's samples.
    """
    if name[:2] == "__" and _is_meta(name):
        return None
    key, ext = base_plus_ext(name)
    if key is None or ext is None:
        return None
    return key, ext


def _is_meta(name: str) -> bool:
    if "/" not in name and name.startswith("__") and name.endswith("__"):
        return True
    return name.startswith("__") and _META.match(name) is not None


class StopShards(Exception):
    """Raised by the readers when the handler asks to stop the whole iteration."""


def tar_samples(
    stream: ReadStream | IO[bytes],
    url: str,
    *,
    local_path: str | None = None,
    handler: Handler = reraise_exception,
    select_files: Callable[[str], bool] | None = None,
    rename_files: Callable[[str], str] | None = None,
    concatenated: bool = False,
    on_warning: Warn | None = None,
    zero_copy: bool = False,
) -> Iterator[Sample]:
    """Yield the samples of one shard read from ``stream``.

    Args:
        stream: the shard's bytes (plain or compressed tar).
        url: stored as ``__url__`` and named in errors.
        local_path: stored as ``__local_path__`` when given.
        handler: error policy for duplicate extensions and read errors; a read error ends this
            shard once the handler has seen it (a raising handler ends everything). Under a
            handler that continues or stops, the sample being assembled is yielded with the
            members read in full before the error, as webdataset does.
        select_files: keep only members for which this returns True (after renaming).
        rename_files: map each member name before grouping.
        concatenated: keep reading after end-of-archive markers (several tars in one stream).
        on_warning: receives ``(message, offset)`` for oddities read past; see
            :func:`~wds_cloud.core.tar.iter_tar`.
        zero_copy: member data as read-only ``memoryview``s, not ``bytes`` (no copy); see
            :func:`~wds_cloud.core.tar.iter_tar` for how long they stay valid.
    """
    try:
        yield from _shard_samples(
            stream,
            url,
            local_path=local_path,
            handler=handler,
            select_files=select_files,
            rename_files=rename_files,
            concatenated=concatenated,
            on_warning=on_warning,
            zero_copy=zero_copy,
        )
    except StopShards:
        return


def _shard_samples(
    stream: ReadStream | IO[bytes],
    url: str,
    *,
    local_path: str | None = None,
    handler: Handler = reraise_exception,
    select_files: Callable[[str], bool] | None = None,
    rename_files: Callable[[str], str] | None = None,
    concatenated: bool = False,
    on_warning: Warn | None = None,
    zero_copy: bool = False,
) -> Iterator[Sample]:
    """The reader behind :func:`tar_samples`; raises :class:`StopShards` to stop."""
    entries = iter_tar_positions(
        stream,
        url=url,
        concatenated=concatenated,
        skip=_skipper(select_files, rename_files),
        on_warning=on_warning,
        zero_copy=zero_copy,
    )
    for sample, _, _ in group_members(
        entries,
        url,
        local_path=local_path,
        handler=handler,
        select_files=select_files,
        rename_files=rename_files,
    ):
        yield sample


def _skipper(
    select_files: Callable[[str], bool] | None, rename_files: Callable[[str], str] | None
) -> Callable[[str], bool] | None:
    """What the tar reader may skip without reading: members ``select_files`` refuses, when
    names are not renamed first."""
    if select_files is None or rename_files is not None:
        return None
    select = select_files

    def skip(name: str) -> bool:
        return not select(name)

    return skip


def group_members(
    entries: Iterable[tuple[str | None, Any, int]],
    url: str,
    *,
    start: int | None = None,
    base: int = 0,
    local_path: str | None = None,
    handler: Handler = reraise_exception,
    select_files: Callable[[str], bool] | None = None,
    rename_files: Callable[[str], str] | None = None,
) -> Iterator[tuple[Sample, int, int]]:
    """Group tar members into samples, webdataset's way; the one grouping of every reader.

    ``entries`` are :func:`~wds_cloud.core.tar.iter_tar_positions`' ``(name, data, first header
    offset)`` ending with ``(None, b"", end)``. Yields ``(sample, start, end)``: the sample's
    byte extent, from its first header (``start`` for the first sample, default its own) to the
    next sample's first header or the end of the archive, each shifted by ``base``; extents of
    consecutive samples touch. A repeated extension in one sample goes to the handler. After a
    read error the handler decides, and the sample being assembled is yielded with the members
    read in full before it (as webdataset does) and ``end == -1``.

    Raises:
        StopShards: the handler asked to stop.
    """
    current: Sample | None = None
    current_key: str | None = None
    cur_start = -1 if start is None else start  # set when the first sample begins
    unkeyed: list[str] = []
    try:
        for name, data, offset in entries:
            if name is None:  # the end of the archive (or of the byte range read)
                if current is not None:
                    yield current, cur_start, base + offset
                break
            if name[:2] == "__" and _is_meta(name):
                continue
            if rename_files is not None:
                name = rename_files(name)
                if select_files is not None and not select_files(name):
                    continue
            slash = name.rfind("/")
            dot = name.find(".", slash + 1)
            if dot > slash + 1:
                key = name[:dot]
                ext = name[dot + 1 :].lower()
            else:
                k, e = base_plus_ext(name)
                if k is None or e is None:
                    unkeyed.append(name)
                    continue
                key, ext = k, e.lower()
            if key == current_key and current is not None:
                if ext in current:
                    error = SampleError(
                        f"{name}: duplicate file name in tar file {ext} {list(current)}",
                        url=url,
                        key=key,
                    )
                    if handler(error):
                        continue
                    raise StopShards
                current[ext] = data
            else:
                if current is not None:
                    yield current, cur_start, base + offset
                    cur_start = base + offset
                elif start is None:
                    cur_start = base + offset
                current_key = key
                current = {"__key__": key, "__url__": url, ext: data}
                if local_path is not None:
                    current["__local_path__"] = local_path
    except ShardError as exc:
        proceed = handler(exc)
        if current is not None:
            yield current, cur_start, -1
        if proceed:
            return  # the rest of this shard is skipped
        raise StopShards from exc
    if unkeyed:
        # webdataset drops these silently; we keep its grouping but say so.
        log.warning(
            "%s: skipped %d member(s) whose names have no sample key (e.g. %r)",
            redact_url(url),
            len(unkeyed),
            unkeyed[0],
        )


def _local_path(url: str) -> str | None:
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
        """The :class:`~wds_cloud.openers.cache.ShardCache`, or None without ``cache_dir``."""
        if self._cache is None and self.cache_dir is not None:
            from wds_cloud.openers.cache import ShardCache

            self._cache = ShardCache(
                self.cache_dir, max_bytes=self.cache_size, registry=self.registry
            )
        return self._cache

    def open(self, url: str) -> tuple[ReadStream, str | None]:
        """Open ``url``; return the stream and the local path of its bytes (if any)."""
        cache = self.cache
        if cache is not None and url_scheme(url) != "file":
            return cache.open(url, **self.open_options), cache.local_path(url)
        registry = self.registry or default_registry()
        return registry.open(url, **self.open_options), _local_path(url)

    def opens_early(self, url: str) -> bool:
        """Whether a shard reader may open ``url`` while the shard before it is being read
        (remote streams read ahead, no cache; see :mod:`wds_cloud.openers.readahead`)."""
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

    def early(item: Any) -> bool:  # open the next shard while this one is read?
        if _url_opener_override() is not None:
            return False
        try:
            return shard_opener.opens_early(_shard_url(item))
        except SampleError:
            return False  # reported when the item is reached

    for item, opened_stream in open_ahead(
        src,
        lambda item: shard_opener.open(_shard_url(item)),
        early=early,
        close=lambda opened: opened[0].close(),
    ):
        try:
            url = _shard_url(item)
            override = _url_opener_override()
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
            yield from _shard_samples(
                stream,
                url,
                local_path=local_path if local_paths else None,
                handler=handler,
                select_files=select_files,
                rename_files=rename_files,
                concatenated=concatenated,
                zero_copy=zero_copy,
            )
        except StopShards:
            return
        finally:
            stream.close()


tarfile_to_samples = pipelinefilter(tarfile_samples)

_logged_override = False


def _url_opener_override() -> Callable[..., Iterator[Sample]] | None:
    """A ``url_opener`` the user assigned in place of ours, as webdataset code does.

    webdataset looks ``tariterators.url_opener`` up each time a shard is opened, so code written
    for it (the SageMaker/S3 blog post plugs boto3 in this way) replaces that global. Assigning
    ``wds_cloud.url_opener`` or ``wds_cloud.core.samples.url_opener`` works the same here. The
    supported way to add a backend is :func:`wds_cloud.register_opener`.
    """
    global _logged_override
    package = sys.modules.get("wds_cloud")
    assigned: tuple[Callable[..., Iterator[Sample]] | None, ...] = (
        globals()["url_opener"],
        getattr(package, "__dict__", {}).get("url_opener"),
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


def tar_file_expander(
    data: Iterable[Sample],
    handler: Handler = reraise_exception,
    select_files: Callable[[str], bool] | None = None,
    rename_files: Callable[[str], str] | None = None,
    eof_value: Any = None,
) -> Iterator[Sample]:
    """For each opened shard yield ``{"fname", "data", "__url__"}`` per member.

    After each shard ``eof_value`` is yielded when it is not None (``group_by_keys`` uses an
    empty dict as the shard boundary).
    """
    for source in data:
        url = source["url"]
        stream = source["stream"]
        try:
            for name, payload in iter_tar(stream, url=url):
                if name[:2] == "__" and _is_meta(name):
                    continue
                if rename_files is not None:
                    name = rename_files(name)
                if select_files is not None and not select_files(name):
                    continue
                item: Sample = {"fname": name, "data": payload, "__url__": url}
                if "local_path" in source:
                    item["__local_path__"] = source["local_path"]
                yield item
        except Exception as exc:
            if not handler(exc):
                return
        finally:
            stream.close()
        if eof_value is not None:
            yield eof_value


def group_by_keys(
    data: Iterable[Sample],
    keys: Callable[[str], tuple[str | None, str | None]] = base_plus_ext,
    lcase: bool = True,
    suffixes: set[str] | None = None,
    handler: Handler = reraise_exception,
) -> Iterator[Sample]:
    """Group ``{"fname", "data"}`` items into samples; an empty dict marks a shard boundary."""
    current: Sample | None = None
    for filesample in data:
        if not filesample:  # end-of-shard marker
            if current is not None:
                yield current
            current = None
            continue
        fname, value = filesample["fname"], filesample["data"]
        prefix, suffix = keys(fname)
        if prefix is None or suffix is None:
            continue
        if lcase:
            suffix = suffix.lower()
        if current is None or prefix != current["__key__"]:
            if current is not None:
                yield current
            current = {"__key__": prefix, "__url__": filesample["__url__"]}
            if "__local_path__" in filesample:
                current["__local_path__"] = filesample["__local_path__"]
        if suffix in current:
            error = SampleError(
                f"{fname}: duplicate file name in tar file {suffix} {list(current)}",
                url=filesample.get("__url__"),
                key=prefix,
            )
            if handler(error):
                continue
            return
        if suffixes is None or suffix in suffixes:
            current[suffix] = value
    if current is not None:
        yield current
