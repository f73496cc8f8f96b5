"""Tar members -> WebDataset samples, exactly as webdataset 1.0.2 groups them.

Key rule (``base_plus_ext``): the key is the member path up to the first dot of its last path
component, the extension is the rest, lowercased. Consecutive members with the same key form one
sample ``{"__key__": key, "__url__": url, ext: bytes, ...}``; samples never span shards; a
repeated extension inside one sample is an error passed to the handler (with a skipping handler
the second file is dropped). Members whose names have no usable key (``noext``, ``.hidden``) are
skipped, as webdataset does; so are ``__meta__``-style names.

The fast path fuses tar parsing and grouping in one loop (:func:`tar_samples`); the
webdataset-compatible :func:`group_by_keys` is here too for pipelines that use it directly.
Opening shards (URLs to streams, ``tarfile_samples``, ``url_opener``, ``tar_file_expander``)
is :mod:`wds_cloud.core.shardopen`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import IO, Any

from wds_cloud.core.handlers import Handler, reraise_exception
from wds_cloud.core.tar import Warn, iter_tar_positions
from wds_cloud.errors import SampleError, ShardError
from wds_cloud.openers.streams.stream import ReadStream
from wds_cloud.redact import redact_url

log = logging.getLogger(__name__)

Sample = dict[str, Any]
_META = re.compile(r"__[^/]*__($|/)")

# a top-level member named ``__name__`` is metadata, not a sample field (webdataset's names)
meta_prefix = "__"
meta_suffix = "__"


def valid_sample(sample: Any) -> bool:
    """Whether ``sample`` is a sample worth yielding: a non-empty dict not marked ``__bad__``
    (webdataset's ``tariterators.valid_sample``)."""
    return isinstance(sample, dict) and len(sample) > 0 and not sample.get("__bad__", False)


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
    if name[:2] == "__" and is_meta(name):
        return None
    key, ext = base_plus_ext(name)
    if key is None or ext is None:
        return None
    return key, ext


def is_meta(name: str) -> bool:
    """Whether member ``name`` is a ``__name__`` entry (or under a ``__name__/`` folder), not a
    sample field."""
    if "/" not in name and name.startswith(meta_prefix) and name.endswith(meta_suffix):
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
) -> Generator[Sample, None, bool]:
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

    Returns:
        As the generator's return value (``stopped = yield from tar_samples(...)``): True when
        the handler asked to stop, so that a reader of several shards stops too.
    """
    entries = iter_tar_positions(
        stream,
        url=url,
        concatenated=concatenated,
        skip=member_skipper(select_files, rename_files),
        on_warning=on_warning,
        zero_copy=zero_copy,
    )
    try:
        for sample, _, _ in group_members(
            entries,
            url,
            local_path=local_path,
            handler=handler,
            select_files=select_files,
            rename_files=rename_files,
        ):
            yield sample
    except StopShards:
        return True
    return False


def member_skipper(
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
            # runs per member: inline, not a helper shared with shardopen.tar_file_expander
            if name[:2] == "__" and is_meta(name):
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
