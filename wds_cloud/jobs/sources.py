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
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from wds_cloud.jobs.parquet import ParquetSource
from wds_cloud.openers.registry import OpenerRegistry

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
    """Samples made of whole files: ``(key, ((ext, url), ...))`` each, read one at a time."""

    samples: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]

    def describe(self) -> Any:
        return [[key, [list(m) for m in members]] for key, members in self.samples]

    def read(self, registry: OpenerRegistry) -> Iterator[tuple[Sample, int]]:
        for key, members in self.samples:
            sample: Sample = {"__key__": key}
            size = 0
            for ext, url in members:
                stream = registry.open(url)
                try:
                    data = bytes(stream.read())
                finally:
                    stream.close()
                sample[ext.lower()] = data
                size += len(data)
            yield sample, size


Source = SpanSource | ShardSource | FilesSource | ParquetSource

__all__ = ["FilesSource", "ParquetSource", "ShardSource", "Source", "SpanSource"]
