"""``check_index``: verify stored shard indexes (and a dataset JSON's counts) against the shards.

Each shard is read again and its index rebuilt in memory (:func:`~wds_cloud.index.build.scan_shard`);
the stored ``.idx`` must be the same bytes. Nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from wds_cloud.errors import ShardError
from wds_cloud.index.build import DEFAULT_WORKERS, run_parallel, scan_shard
from wds_cloud.index.format import idx_url
from wds_cloud.listing import resolve_spec
from wds_cloud.openers.registry import OpenerRegistry, default_registry


@dataclass
class IndexCheck:
    """One shard's verdict from :func:`check_index`.

    Attributes:
        url: the shard.
        status: ``ok``, ``missing`` (no ``.idx``), ``differs`` (the ``.idx`` does not describe
            the shard), ``unindexable`` (a member name the format cannot hold),
            ``unreadable`` (the shard or its index could not be read), ``count`` (the dataset
            JSON's ``nsamples`` is wrong).
        detail: what differs.
        nsamples: samples in the shard (None when unreadable).
    """

    url: str
    status: str
    detail: str = ""
    nsamples: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _first_difference(stored: bytes, built: bytes) -> str:
    old, new = stored.split(b"\n"), built.split(b"\n")
    for i, (a, b) in enumerate(zip(old, new, strict=False)):
        if a != b:
            return f"line {i + 1}: stored {a[:80]!r}, shard gives {b[:80]!r}"
    return f"stored {len(old)} lines, shard gives {len(new)}"


def check_index(
    urls: str | Iterable[str],
    *,
    workers: int = DEFAULT_WORKERS,
    progress: bool = False,
    registry: OpenerRegistry | None = None,
) -> list[IndexCheck]:
    """Verify the stored indexes of ``urls`` against their shards (nothing is written).

    Each shard is read again and its index rebuilt in memory; the stored ``.idx`` must be the
    same bytes. With a dataset JSON as ``urls`` its sample counts are checked too.

    Returns:
        One :class:`IndexCheck` per shard, in order.
    """
    registry = registry or default_registry()
    resolved = resolve_spec(urls, registry=registry, literal_paths=True)
    shard_urls = resolved.urls
    counts = {s.url: s.nsamples for s in resolved.index.shards} if resolved.index else {}

    def work(url: str) -> IndexCheck:
        try:
            scan = scan_shard(url, registry=registry)
        except ShardError as exc:
            return IndexCheck(url, "unreadable", str(exc))
        n = scan.nsamples
        if url in counts and counts[url] != n:
            return IndexCheck(url, "count", f"the JSON says {counts[url]}, the shard has {n}", n)
        if scan.idx is None:
            return IndexCheck(url, "unindexable", str(scan.problem), n)
        try:
            stream = registry.open(idx_url(url))
        except FileNotFoundError:
            return IndexCheck(url, "missing", f"no {idx_url(url)}", n)
        except ShardError as exc:
            return IndexCheck(url, "unreadable", str(exc), n)
        try:
            stored = stream.read()
        finally:
            stream.close()
        if stored != scan.idx:
            return IndexCheck(url, "differs", _first_difference(stored, scan.idx), n)
        return IndexCheck(url, "ok", "", n)

    results = run_parallel(shard_urls, work, workers, progress)
    out = []
    for url in shard_urls:
        result = results[url]
        if isinstance(result, BaseException):
            result = IndexCheck(url, "unreadable", f"{type(result).__name__}: {result}")
        out.append(result)
    return out


__all__ = ["IndexCheck", "check_index"]
