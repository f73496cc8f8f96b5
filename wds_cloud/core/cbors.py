"""Samples from ``.cbors`` files: CBOR-encoded samples stored back to back.

webdataset 0.2 had ``cbors_to_samples`` (removed in 2024); it yielded each decoded CBOR item as
is. This module reads the same files, through the opener registry (so ``s3://``, ``gs://``,
``ais://``, ``http://``, ``pipe:`` all work), and accepts two item shapes:

- a map: ``{"__key__": "000001", "jpg": b"...", "cls": b"3"}``, yielded as a dict;
- an array ``[key, {ext: value, ...}]``, yielded as ``{"__key__": key, ext: value, ...}``.

Each sample gets ``__url__`` (unless it has one). Values are kept exactly as stored (bytes stay
bytes and can be decoded with ``.decode()``; other CBOR types pass through). Anything else (a
number, a map with non-string keys, a truncated item) is an error naming the URL, the item's
index and its byte offset; with a skipping ``handler`` a bad item is skipped and counted, a
truncated or undecodable stream ends that file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import IO, Any, cast

from wds_cloud.core.curry import pipelinefilter
from wds_cloud.core.handlers import Handler, reraise_exception
from wds_cloud.errors import MissingDependencyError, SampleError, ShardReadError
from wds_cloud.openers.registry import OpenerRegistry, default_registry

__all__ = ["cbors_samples", "cbors_to_samples", "iter_cbors"]


class _Counting:
    """Read-only wrapper that counts the bytes handed out (for error offsets)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.offset = 0

    def read(self, n: int = -1) -> bytes:
        data = self.stream.read(n)
        self.offset += len(data)
        return data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False


def _as_sample(item: Any, url: str, index: int, offset: int) -> dict[str, Any]:
    if isinstance(item, list) and len(item) == 2 and isinstance(item[1], dict):
        key, fields = item
        sample = {"__key__": key}
        sample.update(fields)
    elif isinstance(item, dict):
        sample = dict(item)
    else:
        raise SampleError(
            f"cbors item {index} at byte offset {offset} is a {type(item).__name__}; expected "
            "a map of fields or an array [key, {ext: value}]",
            url=url,
        )
    bad = [k for k in sample if not isinstance(k, str)]
    if bad:
        raise SampleError(
            f"cbors item {index} at byte offset {offset} has non-string field names {bad!r}",
            url=url,
            key=str(sample.get("__key__")),
        )
    sample.setdefault("__url__", url)
    return sample


def iter_cbors(
    stream: IO[bytes], url: str, *, handler: Handler = reraise_exception
) -> Iterator[dict[str, Any]]:
    """Yield the samples of one ``.cbors`` stream.

    Args:
        stream: the open binary stream.
        url: its URL (for ``__url__`` and error messages).
        handler: error policy for malformed items (skip counts them).

    Raises:
        ShardReadError: truncated or undecodable CBOR (with the URL and byte offset).
        SampleError: an item of the wrong shape (URL, item index and byte offset).
    """
    try:
        import cbor2
    except ImportError as exc:  # pragma: no cover - cbor2 is a dev/encoders dependency
        raise MissingDependencyError("reading .cbors needs cbor2", extra="encoders") from exc
    counting = _Counting(stream)
    decoder = cbor2.CBORDecoder(cast("IO[bytes]", counting))
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
        try:
            sample = _as_sample(item, url, index, start)
        except SampleError as exc:
            index += 1
            if handler(exc):
                continue
            return
        index += 1
        yield sample


def _url(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict) and isinstance(item.get("url"), str):
        return str(item["url"])
    raise SampleError(f"shard list items must be URL strings or dicts with 'url', got {item!r}")


def cbors_samples(
    src: Iterable[Any],
    *,
    handler: Handler = reraise_exception,
    registry: OpenerRegistry | None = None,
    **open_options: Any,
) -> Iterator[dict[str, Any]]:
    """Open each ``.cbors`` URL of ``src`` through the registry and yield its samples.

    Args:
        src: URLs, or dicts with a ``"url"`` key (what shard lists yield).
        handler: error policy for open errors, broken files and malformed items. When it
            returns True the bad item (or the rest of a broken file) is skipped; False stops.
        registry: opener registry (the default one when None).
        **open_options: passed to the backend's ``open``.
    """
    reg = registry or default_registry()
    for item in src:
        try:
            url = _url(item)
            stream = reg.open(url, **open_options)
        except Exception as exc:
            if handler(exc):
                continue
            return
        try:
            yield from iter_cbors(stream, url, handler=handler)
        except (ShardReadError, SampleError) as exc:
            if not handler(exc):
                return
        finally:
            stream.close()


cbors_to_samples = pipelinefilter(cbors_samples)
"""Stage: ``DataPipeline(SimpleShardList(urls), cbors_to_samples(), ...)``."""
