"""Where a task's samples come from: each source is a small picklable description of its input
(plain data, no open handle) with ``read(registry)`` yielding ``(sample, input bytes)``.

- :class:`SpanSource`: byte spans of uncompressed tar shards, read with one ranged read each
  (``reshard`` and ``convert`` from shards: a span is one sample, or a run of consecutive ones).
- :class:`ShardSource`: one whole shard, streamed (``map``).
- :class:`FilesSource`: files grouped by key (``convert`` from a directory or object prefix).
- :class:`ParquetSource`: a row range of one Parquet file, local or at any URL (``convert``
  from Parquet); defined in :mod:`wds_cloud.jobs.parquet` beside the code that reads it.
"""

from __future__ import annotations

import io
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from wds_cloud.jobs.parquet import ParquetSource
from wds_cloud.openers.registry import OpenerRegistry, url_scheme

Sample = dict[str, Any]
_END_OF_ARCHIVE = bytes(1024)


@dataclass(frozen=True)
class SpanSource:
    """Samples in byte spans of uncompressed tar shards, in the given order.

    Attributes:
        spans: ``(url, start, end)``: the span starts at a member header and ends after the
            padding of a sample's last member.
    """

    spans: tuple[tuple[str, int, int], ...]

    def describe(self) -> Any:
        return [list(s) for s in self.spans]

    def read(self, registry: OpenerRegistry) -> Iterator[tuple[Sample, int]]:
        from wds_cloud.core.samples import tar_samples

        for url, start, end in self.spans:
            data = registry.read_range(url, start, end - start)
            samples = list(tar_samples(io.BytesIO(data + _END_OF_ARCHIVE), url))
            size = len(data) // max(1, len(samples))
            for sample in samples:
                yield sample, size


@dataclass(frozen=True)
class ShardSource:
    """Every sample of one shard, streamed (memory: one sample)."""

    url: str

    def describe(self) -> Any:
        return self.url

    def read(self, registry: OpenerRegistry) -> Iterator[tuple[Sample, int]]:
        from wds_cloud.core.samples import tar_samples

        stream = registry.open(self.url)
        try:
            for sample in tar_samples(stream, self.url):
                size = sum(len(v) for k, v in sample.items() if not k.startswith("__"))
                yield sample, size
        finally:
            stream.close()


@dataclass(frozen=True)
class FilesSource:
    """Samples made of whole files: ``(key, ((ext, url), ...))`` each, in order.

    Remote files are read with up to :data:`FILES_IN_FLIGHT` requests at once and at most
    :data:`SAMPLES_AHEAD` samples read ahead of the one handed out (memory: that many samples),
    so a task over an object store waits for one round trip per 16 files, not per file. Local
    files are read one after the other (threads only add their hand-offs there).
    """

    samples: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]

    def describe(self) -> Any:
        return [[key, [list(m) for m in members]] for key, members in self.samples]

    def read(self, registry: OpenerRegistry) -> Iterator[tuple[Sample, int]]:
        if all(url_scheme(u) == "file" for _, members in self.samples for _, u in members):
            for key, members in self.samples:
                yield _files_sample(key, ((e, _read_file(registry, u)) for e, u in members))
            return
        from concurrent.futures import Future, ThreadPoolExecutor

        ahead: deque[tuple[str, list[tuple[str, Future[bytes]]]]] = deque()
        todo = iter(self.samples)
        pool = ThreadPoolExecutor(FILES_IN_FLIGHT, thread_name_prefix="wds-files")
        try:
            while True:
                while len(ahead) < SAMPLES_AHEAD and (nxt := next(todo, None)) is not None:
                    key, members = nxt
                    ahead.append(
                        (key, [(e, pool.submit(_read_file, registry, u)) for e, u in members])
                    )
                if not ahead:
                    return
                key, futures = ahead.popleft()
                yield _files_sample(key, ((e, f.result()) for e, f in futures))
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def _files_sample(key: str, members: Iterable[tuple[str, bytes]]) -> tuple[Sample, int]:
    """The sample of ``key`` from its ``(extension, bytes)`` members, and its input bytes."""
    sample: Sample = {"__key__": key}
    size = 0
    for ext, data in members:
        sample[ext.lower()] = data
        size += len(data)
    return sample, size


#: requests in flight while a :class:`FilesSource` reads its files
FILES_IN_FLIGHT = 16
#: samples of a :class:`FilesSource` read ahead of the one handed out (bounds its memory)
SAMPLES_AHEAD = 32


def _read_file(registry: OpenerRegistry, url: str) -> bytes:
    stream = registry.open(url)
    try:
        return bytes(stream.read())
    finally:
        stream.close()


Source = SpanSource | ShardSource | FilesSource | ParquetSource

__all__ = ["FilesSource", "ParquetSource", "ShardSource", "Source", "SpanSource"]
