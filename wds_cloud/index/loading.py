"""Loading the ``.idx`` of every shard of an ``IndexedWebDataset`` (building missing ones on
request), and where a shard URL is a local file."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from wds_cloud.errors import ShardNotFoundError
from wds_cloud.index.build import load_shard_index, scan_shard
from wds_cloud.index.format import ShardIndex, idx_url
from wds_cloud.openers.registry import OpenerRegistry, url_scheme
from wds_cloud.redact import redact_url

log = logging.getLogger("wds_cloud.index.indexed")

__all__ = ["load_indexes", "local_file"]


def local_file(url: str) -> str | None:
    if url_scheme(url) != "file" or url == "-":
        return None
    from wds_cloud.openers.local import url_to_path

    return url_to_path(url)


def load_indexes(
    urls: Sequence[str],
    registry: OpenerRegistry,
    *,
    build_missing: bool,
    workers: int,
    source: Any,
) -> list[ShardIndex]:
    """The index of every shard, read in parallel; missing ones built or reported."""

    def load(url: str) -> ShardIndex | None:
        try:
            return load_shard_index(url, registry=registry)
        except FileNotFoundError:
            return None

    with ThreadPoolExecutor(max(1, min(workers, len(urls)))) as pool:
        found = list(pool.map(load, urls))
    missing = [url for url, index in zip(urls, found, strict=True) if index is None]
    if not missing:
        return [index for index in found if index is not None]
    spec = source if isinstance(source, str) else " ".join(missing[:3])
    if not build_missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ShardNotFoundError(
            f"no index {redact_url(idx_url(missing[0]))} for this shard{more}; build the "
            f"indexes with: wds-cloud index {redact_url(spec)}   (or pass build_missing=True)",
            url=missing[0],
        )
    log.warning(
        "IndexedWebDataset: %d of %d shards have no index; building them now (each is read "
        "once) and writing <shard>.idx beside them where possible; next time, build them ahead "
        "with: wds-cloud index %s",
        len(missing),
        len(urls),
        redact_url(spec),
    )

    def build(url: str) -> ShardIndex:
        scan = scan_shard(url, registry=registry)
        if scan.idx is None:
            assert scan.problem is not None
            raise scan.problem
        try:
            from wds_cloud.openers.registry import open_sink

            with open_sink(idx_url(url), registry) as sink:
                sink.write(scan.idx)
        except Exception as exc:  # read-only backend (http), permissions: keep it in memory
            log.info("could not write %s (%s); using it from memory", redact_url(idx_url(url)), exc)
        return ShardIndex(scan.idx, url=idx_url(url))

    with ThreadPoolExecutor(max(1, min(workers, len(missing)))) as pool:
        built = dict(zip(missing, pool.map(build, missing), strict=True))
    return [
        index if index is not None else built[url] for url, index in zip(urls, found, strict=True)
    ]
