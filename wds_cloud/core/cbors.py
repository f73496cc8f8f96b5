"""Concatenated-record sources: ``.cbors`` (CBOR items back to back) and MsgPack streams.

webdataset 0.2 had ``cbors_to_samples`` (removed in 2024) and its README still says it "can also
read concatenated MsgPack and CBORs sources": each decoded item was yielded as is, so
``cbor.dump((i, str(i)[-5:]), stream)`` comes back as ``[i, "..."]``. This module does the same,
through the opener registry (so ``s3://``, ``gs://``, ``ais://``, ``http://``, ``pipe:`` all
work). Items are yielded unchanged, with two sample shapes made usable by the pipeline:

- a map with string keys (``{"__key__": "000001", "jpg": b"...", "cls": b"3"}``) is yielded as a
  dict with ``__url__`` added (unless it has one);
- an array ``[key, {ext: value, ...}]`` whose key is a string and whose map has string keys is
  yielded as ``{"__key__": key, ext: value, ..., "__url__": url}``.

Anything else (numbers, strings, other arrays) is yielded exactly as decoded. A truncated or
undecodable stream raises :class:`~wds_cloud.errors.ShardReadError` naming the URL, the item's
index and its byte offset; with a skipping ``handler`` the rest of that file is skipped and
counted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, cast

from wds_cloud.core.curry import pipelinefilter
from wds_cloud.core.handlers import Handler, reraise_exception
from wds_cloud.errors import MissingDependencyError, SampleError, ShardReadError
from wds_cloud.openers.registry import OpenerRegistry, default_registry
from wds_cloud.openers.streams.stream import ReadStream, read_full as _read_full

__all__ = [
    "cbors_samples",
    "cbors_to_samples",
    "iter_cbors",
    "iter_msgpacks",
    "msgpacks_samples",
    "msgpacks_to_samples",
]

_CHUNK = 1 << 20

#: ``(stream, url) -> iterator of (byte offset, item)``: one decoder per record format.
Items = Callable[[ReadStream, str], Iterator[tuple[int, Any]]]


class _Counting:
    """Read-only wrapper that counts the bytes handed out (for error offsets)."""

    def __init__(self, stream: ReadStream) -> None:
        self.stream = stream
        self.offset = 0

    def read(self, n: int = -1) -> bytes:
        # The CBOR decoder takes a short read for the end of the stream: loop until ``n``
        # bytes (network streams and pipes return whatever has arrived).
        data = _read_full(self.stream, n) if n >= 0 else self.stream.read()
        self.offset += len(data)
        return data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False


def _as_item(item: Any, url: str) -> Any:
    """``item`` unchanged, except the two sample shapes (see the module docstring)."""
    if isinstance(item, dict):
        if all(isinstance(k, str) for k in item):
            item.setdefault("__url__", url)
        return item
    if (
        isinstance(item, list)
        and len(item) == 2
        and isinstance(item[0], str)
        and isinstance(item[1], dict)
        and all(isinstance(k, str) for k in item[1])
    ):
        sample: dict[str, Any] = {"__key__": item[0]}
        sample.update(item[1])
        sample.setdefault("__url__", url)
        return sample
    return item


def _cbor_items(stream: ReadStream, url: str) -> Iterator[tuple[int, Any]]:
    try:
        import cbor2
    except ImportError as exc:  # pragma: no cover - cbor2 is a dev/encoders dependency
        raise MissingDependencyError("reading .cbors needs cbor2", extra="encoders") from exc
    counting = _Counting(stream)
    decoder = cbor2.CBORDecoder(cast("IO[bytes]", counting))  # cbor2 types fp so; it only reads
    index = 0
    while True:
        start = counting.offset
        try:
            item = decoder.decode()
        except cbor2.CBORDecodeEOF as exc:
            if counting.offset == start:
                return
            raise ShardReadError(
                f"truncated CBOR item {index} (ends after {counting.offset - start} bytes)",
                url=url,
                offset=start,
            ) from exc
        except (cbor2.CBORDecodeError, ValueError) as exc:
            raise ShardReadError(
                f"bad CBOR item {index}: {type(exc).__name__}: {exc}", url=url, offset=start
            ) from exc
        yield start, item
        index += 1


def _msgpack_items(stream: ReadStream, url: str) -> Iterator[tuple[int, Any]]:
    try:
        import msgpack
    except ImportError as exc:
        raise MissingDependencyError(
            "reading MsgPack streams needs msgpack", extra="encoders"
        ) from exc
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=0)
    fed = index = end = 0  # end: where the last complete item ended (the next one starts)
    while True:
        chunk = stream.read(_CHUNK)
        if chunk:
            unpacker.feed(chunk)
            fed += len(chunk)
        while True:
            try:
                item = unpacker.unpack()
            except msgpack.OutOfData:
                break
            except (msgpack.UnpackException, ValueError) as exc:
                raise ShardReadError(
                    f"bad MsgPack item {index}: {type(exc).__name__}: {exc}", url=url, offset=end
                ) from exc
            yield end, item
            end = unpacker.tell()
            index += 1
        if not chunk:
            if end != fed:
                raise ShardReadError(
                    f"truncated MsgPack item {index} (ends after {fed - end} bytes)",
                    url=url,
                    offset=end,
                )
            return


def _iter_records(items: Items, stream: ReadStream, url: str) -> Iterator[Any]:
    for _, item in items(stream, url):
        yield _as_item(item, url)


def iter_cbors(stream: ReadStream, url: str) -> Iterator[Any]:
    """Yield the items of one ``.cbors`` stream (see the module docstring for their shape).

    Args:
        stream: the open binary stream.
        url: its URL (for ``__url__`` and error messages).

    Raises:
        ShardReadError: truncated or undecodable CBOR (with the URL and byte offset).
    """
    return _iter_records(_cbor_items, stream, url)


def iter_msgpacks(stream: ReadStream, url: str) -> Iterator[Any]:
    """Yield the items of one stream of concatenated MsgPack objects (like :func:`iter_cbors`).

    Raises:
        ShardReadError: truncated or undecodable MsgPack (with the URL and byte offset).
    """
    return _iter_records(_msgpack_items, stream, url)


def _url(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict) and isinstance(item.get("url"), str):
        return str(item["url"])
    raise SampleError(f"shard list items must be URL strings or dicts with 'url', got {item!r}")


def _records_samples(
    items: Items,
    src: Iterable[Any],
    handler: Handler,
    registry: OpenerRegistry | None,
    open_options: dict[str, Any],
) -> Iterator[Any]:
    reg = registry or default_registry()
    for entry in src:
        try:
            url = _url(entry)
            stream = reg.open(url, **open_options)
        except Exception as exc:
            if handler(exc):
                continue
            return
        try:
            yield from _iter_records(items, stream, url)
        except ShardReadError as exc:
            if not handler(exc):
                return
        finally:
            stream.close()


def cbors_samples(
    src: Iterable[Any],
    *,
    handler: Handler = reraise_exception,
    registry: OpenerRegistry | None = None,
    **open_options: Any,
) -> Iterator[Any]:
    """Open each ``.cbors`` URL of ``src`` through the registry and yield its items.

    Args:
        src: URLs, or dicts with a ``"url"`` key (what shard lists yield).
        handler: error policy for open errors and broken files. When it returns True the rest
            of a broken file (or a file that cannot be opened) is skipped; False stops.
        registry: opener registry (the default one when None).
        **open_options: passed to the backend's ``open``.
    """
    return _records_samples(_cbor_items, src, handler, registry, open_options)


def msgpacks_samples(
    src: Iterable[Any],
    *,
    handler: Handler = reraise_exception,
    registry: OpenerRegistry | None = None,
    **open_options: Any,
) -> Iterator[Any]:
    """Like :func:`cbors_samples`, for files of concatenated MsgPack objects."""
    return _records_samples(_msgpack_items, src, handler, registry, open_options)


cbors_to_samples = pipelinefilter(cbors_samples)
"""Stage: ``DataPipeline(SimpleShardList(urls), cbors_to_samples(), ...)``."""

msgpacks_to_samples = pipelinefilter(msgpacks_samples)
"""Stage: ``DataPipeline(SimpleShardList(urls), msgpacks_to_samples(), ...)``."""
