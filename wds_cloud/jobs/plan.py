"""Planning: where every input sample is (a scan of the shards, in parallel on the engine) and
which samples go into which output shard. Plans are computed by the driver from the inputs and
the parameters only, so the same job gives the same plan however many workers run it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, overload

from wds_cloud.errors import ConfigError
from wds_cloud.jobs.engines import Engine
from wds_cloud.jobs.sources import ShardSource, SpanSource
from wds_cloud.jobs.task import Task
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


def _scan_task(url: str, registry: OpenerRegistry | None) -> Any:
    import numpy as np

    return np.array(sample_spans(url, registry), dtype=np.int64).reshape(-1, 2)


def scan_inputs(urls: Sequence[str], engine: Engine, registry: OpenerRegistry | None) -> list[Any]:
    """The sample spans of every shard (an ``(n, 2)`` array each), scanned on ``engine``; in
    the order of ``urls``.

    Raises:
        WdsCloudError: naming every shard that could not be scanned.
    """
    from wds_cloud.jobs.runner import raise_failures

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
    sizes: Any,
    *,
    maxcount: int | None = None,
    maxsize: float | None = None,
    nshards: int | None = None,
) -> list[tuple[int, int]]:
    """Cut a sequence of samples (their tar sizes: a list or numpy array) into output shards:
    ``[lo, hi)`` ranges, none empty.

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
    if maxsize is None:
        return [(lo, min(lo + limit_count, n)) for lo in range(0, n, limit_count)]
    limit_size = maxsize
    out, lo, size = [], 0, 0
    for i, s in enumerate(sizes.tolist() if hasattr(sizes, "tolist") else sizes):
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


class SpanPlan(Sequence[Task]):
    """The tasks of a reshard, built on demand from compact arrays.

    The driver keeps, for every sample in output order, its input shard, start and end (numpy
    arrays: 20 bytes a sample, not a Python object each) and the bounds of each output shard;
    task ``i`` (its :class:`SpanSource`, consecutive samples of one input merged into one
    span) is made only when an engine asks for it.

    Args:
        urls: the input shards.
        shard: input shard of each sample, in output order.
        start: byte offset where each sample's span starts.
        end: byte offset where it ends.
        bounds: output shard ``i`` holds samples ``bounds[i]:bounds[i + 1]``.
        pattern: output names, ``pattern % i``.
    """

    def __init__(
        self, urls: Sequence[str], shard: Any, start: Any, end: Any, bounds: Any, pattern: str
    ) -> None:
        self.urls = list(urls)
        self.shard, self.start, self.end, self.bounds = shard, start, end, bounds
        self.pattern = pattern

    def __len__(self) -> int:
        return max(0, len(self.bounds) - 1)

    @overload
    def __getitem__(self, i: int) -> Task: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[Task]: ...

    def __getitem__(self, i: int | slice) -> Task | Sequence[Task]:
        import numpy as np

        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        lo, hi = int(self.bounds[i]), int(self.bounds[i + 1])
        shard, start, end = self.shard[lo:hi], self.start[lo:hi], self.end[lo:hi]
        cut = np.flatnonzero((shard[1:] != shard[:-1]) | (start[1:] != end[:-1])) + 1
        first = np.concatenate(([0], cut)).astype(np.int64)
        last = np.concatenate((cut, [hi - lo])).astype(np.int64) - 1
        spans = tuple(
            (self.urls[s], a, b)
            for s, a, b in zip(
                shard[first].tolist(), start[first].tolist(), end[last].tolist(), strict=True
            )
        )
        return Task(i, SpanSource(spans), self.pattern % i)

    def describe(self) -> str:
        """A digest of the whole plan (inputs, order, cuts, names), for the job fingerprint."""
        digest = hashlib.sha256(json.dumps([self.urls, self.pattern]).encode())
        for array in (self.shard, self.start, self.end, self.bounds):
            digest.update(array.tobytes())
        return digest.hexdigest()


def plan_spans(
    urls: Sequence[str],
    spans: Sequence[Any],
    pattern: str,
    *,
    seed: int | None,
    maxcount: int | None,
    maxsize: float | None,
    nshards: int | None,
) -> SpanPlan:
    """The reshard plan: samples of ``urls`` (their ``spans``, one ``(n, 2)`` array a shard) in
    input order, or permuted by a generator seeded with ``seed`` (numpy's PCG64), cut into
    output shards (:func:`group_samples`)."""
    import numpy as np

    counts = [len(s) for s in spans]
    shard = np.repeat(np.arange(len(urls), dtype=np.int32), counts)
    both = (
        np.concatenate([np.asarray(s, dtype=np.int64).reshape(-1, 2) for s in spans])
        if spans
        else np.zeros((0, 2), dtype=np.int64)
    )
    start, end = both[:, 0].copy(), both[:, 1].copy()
    if seed is not None:
        perm = np.random.Generator(np.random.PCG64(seed)).permutation(len(shard))
        shard, start, end = shard[perm], start[perm], end[perm]
    groups = group_samples(end - start, maxcount=maxcount, maxsize=maxsize, nshards=nshards)
    bounds = np.array([0] + [hi for _, hi in groups], dtype=np.int64)
    return SpanPlan(urls, shard, start, end, bounds, pattern)


__all__ = ["SpanPlan", "group_samples", "plan_spans", "sample_spans", "scan_inputs"]
