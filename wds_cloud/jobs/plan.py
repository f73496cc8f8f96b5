"""Planning: where every input sample is (a scan of the shards, in parallel on the engine) and
which samples go into which output shard. Plans are computed by the driver from the inputs and
the parameters only, so the same job gives the same plan however many workers run it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wds_cloud.errors import ConfigError
from wds_cloud.jobs.engines import Engine
from wds_cloud.jobs.sources import ShardSource, SpanSource
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.redact import redact_url

_BLOCK = 512
_END_OF_ARCHIVE = 1024
_COMPRESSED = (".gz", ".tgz", ".zst", ".bz2", ".xz")


def sample_spans(url: str, registry: OpenerRegistry | None) -> list[tuple[int, int]]:
    """``(start, end)`` byte span of every sample of an uncompressed tar shard.

    A sample's span runs from the end of the previous sample (or byte 0) to the end of the
    padding of its last member, so it holds whatever headers precede its members.

    Raises:
        ConfigError: the shard is compressed (byte ranges of a compressed stream mean nothing).
        ShardError: the shard cannot be read.
    """
    from wds_cloud.index.build import scan_shard

    if url.lower().split("?")[0].endswith(_COMPRESSED):
        raise ConfigError(
            f"{redact_url(url)} is compressed; reshard and convert read samples by byte range "
            "and need uncompressed tar shards (use the map job to rewrite them uncompressed)"
        )
    spans = []
    start = 0
    for members in scan_shard(url, registry=registry).samples:
        end = max(m.offset + m.size for m in members)
        end += -end % _BLOCK
        spans.append((start, end))
        start = end
    return spans


def _scan_task(url: str, registry: OpenerRegistry | None) -> list[tuple[int, int]]:
    return sample_spans(url, registry)


def scan_inputs(
    urls: Sequence[str], engine: Engine, registry: OpenerRegistry | None
) -> list[list[tuple[int, int]]]:
    """The sample spans of every shard, scanned on ``engine``; in the order of ``urls``.

    Raises:
        WdsCloudError: naming every shard that could not be scanned.
    """
    from wds_cloud.jobs.runner import raise_failures
    from wds_cloud.jobs.task import Task

    results: dict[int, Any] = {}
    failures = []
    for position, outcome in engine.run(_scan_task, list(urls), registry):
        if isinstance(outcome, BaseException):
            failures.append((Task(position, ShardSource(urls[position]), urls[position]), outcome))
        else:
            results[position] = outcome
    if failures:
        raise_failures("scan", failures)
    return [results[i] for i in range(len(urls))]


def group_samples(
    sizes: Sequence[int],
    *,
    maxcount: int | None = None,
    maxsize: float | None = None,
    nshards: int | None = None,
) -> list[tuple[int, int]]:
    """Cut a sequence of samples into output shards: ``[lo, hi)`` ranges, none empty.

    ``nshards`` splits into that many shards of equal count (the first ones one larger);
    otherwise a shard closes after ``maxcount`` samples, or before a sample whose tar bytes
    would take it past ``maxsize`` (as ``ShardWriter`` rolls over).

    Raises:
        ConfigError: no limit, or a limit below 1.
    """
    n = len(sizes)
    if nshards is not None:
        if maxcount is not None or maxsize is not None:
            raise ConfigError("give nshards or maxcount/maxsize, not both")
        if nshards < 1:
            raise ConfigError(f"nshards must be >= 1, got {nshards}")
        k = min(nshards, n)
        base, extra = divmod(n, k) if k else (0, 0)
        out, lo = [], 0
        for i in range(k):
            hi = lo + base + (1 if i < extra else 0)
            out.append((lo, hi))
            lo = hi
        return out
    if maxcount is None and maxsize is None:
        raise ConfigError("give maxcount, maxsize or nshards")
    if maxcount is not None and maxcount < 1:
        raise ConfigError(f"maxcount must be >= 1, got {maxcount}")
    if maxsize is not None and maxsize <= 0:
        raise ConfigError(f"maxsize must be > 0, got {maxsize}")
    limit_count = maxcount or n or 1
    limit_size = maxsize if maxsize is not None else float("inf")
    out, lo, size = [], 0, 0
    for i, s in enumerate(sizes):
        if i > lo and size + s + _END_OF_ARCHIVE > limit_size:
            out.append((lo, i))
            lo, size = i, 0
        size += s
        if i + 1 - lo >= limit_count:
            out.append((lo, i + 1))
            lo, size = i + 1, 0
    if lo < n:
        out.append((lo, n))
    return out


def span_sources(
    urls: Sequence[str],
    spans: Sequence[Sequence[tuple[int, int]]],
    order: Sequence[tuple[int, int]],
    groups: Sequence[tuple[int, int]],
) -> list[SpanSource]:
    """One :class:`SpanSource` per group of ``order`` (``(shard, sample)`` pairs), consecutive
    samples of one shard merged into one span (one ranged read)."""
    sources = []
    for lo, hi in groups:
        merged: list[tuple[str, int, int]] = []
        for shard, sample in order[lo:hi]:
            start, end = spans[shard][sample]
            url = urls[shard]
            if merged and merged[-1][0] == url and merged[-1][2] == start:
                merged[-1] = (url, merged[-1][1], end)
            else:
                merged.append((url, start, end))
        sources.append(SpanSource(tuple(merged)))
    return sources


def shuffled(order: list[tuple[int, int]], seed: int) -> list[tuple[int, int]]:
    """``order`` permuted by a generator seeded with ``seed`` (numpy's PCG64)."""
    import numpy as np

    perm = np.random.Generator(np.random.PCG64(seed)).permutation(len(order))
    return [order[i] for i in perm.tolist()]


__all__ = ["group_samples", "sample_spans", "scan_inputs", "shuffled", "span_sources"]
