"""Building and checking shard indexes on any backend: streamed, several shards at once.

:func:`build_index` reads each shard once through its opener (local files are memory-mapped,
remote ones streamed: nothing is downloaded first), records where every member's data starts
(:func:`~wds_cloud.core.tar.iter_tar_entries`, the sample reader's own tar parser, data never
copied), groups members into samples exactly as the reader does, writes ``<shard>.idx`` beside
each shard (committed only when complete, like every writer here) and the dataset JSON.
:func:`~wds_cloud.index.check.check_index` rebuilds in memory and compares with what is stored.
"""

from __future__ import annotations

import io
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from wds_cloud.core.tar import iter_tar_entries
from wds_cloud.errors import SampleError, ShardError, WdsCloudError
from wds_cloud.index.datasetjson import (
    DatasetIndex,
    ShardInfo,
    default_json_url,
    save_dataset_json,
)
from wds_cloud.index.format import IdxSample, ShardIndex, format_index, group_entries, idx_url
from wds_cloud.listing import resolve_spec
from wds_cloud.openers.registry import OpenerRegistry, default_registry, url_scheme
from wds_cloud.redact import redact_url

log = logging.getLogger(__name__)

DEFAULT_WORKERS = 8


class _Counting(io.RawIOBase):
    """Counts the bytes read from a stream (the shard's stored size)."""

    def __init__(self, stream: Any) -> None:
        super().__init__()
        self._stream = stream
        self.count = 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        data = self._stream.read(n)
        self.count += len(data)
        return bytes(data)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


@dataclass
class ShardScan:
    """What one pass over a shard found.

    Attributes:
        url: the shard.
        samples: its samples (members with data offsets), as the reader groups them.
        filesize: bytes of the stored shard.
        idx: the ``.idx`` bytes, or None when a member cannot be represented.
        problem: why there is no ``idx`` (a :class:`SampleError`), else None.
        write_error: why writing the ``.idx`` failed (:func:`build_index`), else None.
    """

    url: str
    samples: list[IdxSample]
    filesize: int
    idx: bytes | None
    problem: SampleError | None = None
    write_error: BaseException | None = None

    @property
    def nsamples(self) -> int:
        return len(self.samples)


def scan_shard(url: str, *, registry: OpenerRegistry | None = None) -> ShardScan:
    """Read ``url`` once and compute its index (nothing is written).

    Raises:
        ShardError: the shard cannot be opened or read (not found, corrupt, truncated).
    """
    registry = registry or default_registry()
    stream = registry.open(url)
    counting: _Counting | None = None
    try:
        size: int | None = None
        if url_scheme(url) == "file" and url != "-" and isinstance(stream, io.IOBase):
            size = os.fstat(stream.fileno()).st_size  # a file: fileno is not part of ReadStream
            source: Any = stream
        else:
            source = counting = _Counting(stream)
        samples = group_entries(iter_tar_entries(source, url=url))
        if size is None:
            assert counting is not None
            counting.read(-1)  # the padding after the end-of-archive marker counts too
            size = counting.count
    finally:
        stream.close()
    try:
        data: bytes | None = format_index(samples, url=url)
        problem = None
    except SampleError as exc:
        data, problem = None, exc
    return ShardScan(url, samples, size, data, problem)


@dataclass
class IndexBuild:
    """The result of :func:`build_index`.

    Attributes:
        dataset: the shards that were read, with their sample counts.
        json_url: where the dataset JSON was written (None: not written).
        idx_urls: the ``.idx`` files written, by shard URL.
        failed: ``(shard URL, error)`` for each shard that got no index.
        bytes: shard bytes read.
        seconds: wall time.
    """

    dataset: DatasetIndex
    json_url: str | None = None
    idx_urls: dict[str, str] = field(default_factory=dict)
    failed: list[tuple[str, BaseException]] = field(default_factory=list)
    bytes: int = 0
    seconds: float = 0.0

    @property
    def nsamples(self) -> int:
        return self.dataset.nsamples

    def raise_failures(self) -> None:
        """Raise one error naming every shard that got no index.

        Raises:
            WdsCloudError: (the first failure's type when it is one) naming them all.
        """
        if not self.failed:
            return
        lines = "; ".join(f"{redact_url(url)}: {exc}" for url, exc in self.failed[:5])
        more = f" (and {len(self.failed) - 5} more)" if len(self.failed) > 5 else ""
        first = self.failed[0][1]
        message = f"{len(self.failed)} shard(s) could not be indexed: {lines}{more}"
        if isinstance(first, ShardError):
            raise type(first)(message, url=self.failed[0][0]) from first
        if isinstance(first, SampleError):
            raise SampleError(message) from first
        raise WdsCloudError(message) from first


def _progress(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc="indexing", unit="shard", leave=False, file=sys.stderr)


def run_parallel(
    urls: Sequence[str],
    work: Callable[[str], Any],
    workers: int,
    progress: bool,
) -> dict[str, Any]:
    """``work(url)`` for every URL on ``workers`` threads; results (or exceptions) by URL."""
    results: dict[str, Any] = {}
    bar = _progress(len(urls), progress)
    lock = threading.Lock()
    read = 0
    start = time.monotonic()
    try:
        with ThreadPoolExecutor(max(1, min(workers, len(urls) or 1))) as pool:
            futures = {pool.submit(work, url): url for url in urls}
            for future in as_completed(futures):
                url = futures[future]
                try:
                    results[url] = future.result()
                except Exception as exc:
                    results[url] = exc
                if bar is not None:
                    with lock:
                        read += getattr(results[url], "filesize", None) or 0
                    elapsed = max(time.monotonic() - start, 1e-9)
                    bar.set_postfix_str(f"{read / elapsed / 1e6:.1f} MB/s", refresh=False)
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return results


def build_index(
    urls: str | Iterable[str],
    *,
    json: str | bool | None = None,
    write: bool = True,
    workers: int = DEFAULT_WORKERS,
    progress: bool = False,
    registry: OpenerRegistry | None = None,
    name: str | None = None,
    description: str | None = None,
    strict: bool = True,
) -> IndexBuild:
    """Index existing shards on any backend: ``<shard>.idx`` beside each, and a dataset JSON.

    Args:
        urls: a shard spec (a brace pattern, a glob or prefix, a dataset JSON: its shards
            are indexed and the JSON is rewritten with fresh counts) or a list of URLs, taken
            as given (:func:`wds_cloud.listing.resolve_shards`, ``literal_paths=True``).
        json: where to write the dataset JSON: a URL; None (default): the JSON given as
            ``urls``, else ``index.json`` in the first shard's directory (an existing one is
            updated: other shards' entries stay); False: no JSON.
        write: write the ``.idx`` files (False: compute only, see the result).
        workers: shards read at the same time (threads).
        progress: show a progress bar on stderr.
        registry: opener registry (the default one when None).
        name: dataset name stored in the JSON.
        description: description stored in the JSON.
        strict: raise after finishing when any shard could not be indexed (the others are
            written; the JSON is written when every shard could be read).

    Returns:
        An :class:`IndexBuild`.

    Raises:
        ShardError: (``strict``) a shard could not be read; SampleError: a member name cannot
            be represented in the ``.idx`` format (its count is still in the JSON).
        UploadError: writing an index or the JSON failed.
    """
    registry = registry or default_registry()
    resolved = resolve_spec(urls, registry=registry, literal_paths=True)
    existing = resolved.index  # a dataset JSON given as urls: re-indexed and rewritten
    given_json = existing.url if existing is not None else None
    shard_urls = resolved.urls
    started = time.monotonic()

    def work(url: str) -> ShardScan:
        scan = scan_shard(url, registry=registry)
        if write and scan.idx is not None:
            from wds_cloud.openers.registry import open_sink

            try:
                with open_sink(idx_url(url), registry) as sink:
                    sink.write(scan.idx)
            except (WdsCloudError, OSError) as exc:
                scan.write_error = exc
        return scan

    results = run_parallel(shard_urls, work, workers, progress)
    build = IndexBuild(DatasetIndex([], name=name, description=description))
    readable = True
    for url in shard_urls:
        result = results[url]
        if isinstance(result, BaseException):
            build.failed.append((url, result))
            readable = False
            continue
        build.dataset.shards.append(ShardInfo(url, result.nsamples, result.filesize))
        build.bytes += result.filesize
        if result.problem is not None or result.write_error is not None:
            build.failed.append((url, result.problem or result.write_error))
        elif write:
            build.idx_urls[url] = idx_url(url)
    if json is not False and readable:
        target = json if isinstance(json, str) else given_json or default_json_url(shard_urls)
        if existing is not None and target == given_json:
            build.dataset = existing.merged(build.dataset)
        build.dataset = save_dataset_json(
            build.dataset, target, registry=registry, update=existing is None
        )
        build.json_url = target
    build.seconds = time.monotonic() - started
    log.info(
        "indexed %d shard(s), %d samples, %.1f MB in %.2f s (%d failed)",
        len(build.dataset.shards),
        build.nsamples,
        build.bytes / 1e6,
        build.seconds,
        len(build.failed),
    )
    if strict:
        build.raise_failures()
    return build


def load_shard_index(url: str, *, registry: OpenerRegistry | None = None) -> ShardIndex:
    """The stored index of shard ``url`` (its ``.idx``).

    Raises:
        ShardNotFoundError: there is none.
        ShardReadError: it is malformed.
    """
    registry = registry or default_registry()
    where = idx_url(url)
    stream = registry.open(where)
    try:
        data = stream.read()
    finally:
        stream.close()
    return ShardIndex(data, url=where)


__all__ = [
    "DEFAULT_WORKERS",
    "IndexBuild",
    "ShardScan",
    "build_index",
    "load_shard_index",
    "run_parallel",
    "scan_shard",
]
