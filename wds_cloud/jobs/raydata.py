"""Ray Data interop: datasets of samples read by wds_cloud's reader, and written as shards by
wds_cloud's committing writers, so every backend (s3, gs, ais, http, local) and every error
rule of the library hold inside Ray. Exposed as :mod:`wds_cloud.ray`.

A row is a sample: ``__key__``, ``__url__`` (str) and one bytes column per member extension;
samples without some member have null there (and get no such member when written back).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from wds_cloud.jobs.engines import ensure_ray
from wds_cloud.openers.registry import OpenerRegistry, url_scheme


class _ReadShard:
    """``flat_map`` function: the samples of one shard (memory: that shard)."""

    def __init__(self, registry: OpenerRegistry | None) -> None:
        self.registry = registry

    def __call__(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        from wds_cloud.jobs.sources import ShardSource
        from wds_cloud.openers.registry import default_registry

        source = ShardSource(row["url"])
        return [sample for sample, _ in source.read(self.registry or default_registry())]


def read_dataset(urls: Any, *, registry: OpenerRegistry | None = None) -> Any:
    """A ``ray.data.Dataset`` of the samples of ``urls`` (one read task per shard).

    Args:
        urls: a shard spec (brace pattern, glob, prefix, dataset JSON) on any backend, or a
            list of URLs taken as given (:func:`wds_cloud.listing.resolve_shards`).
        registry: opener registry (endpoints, credentials), pickled into the Ray workers.

    Raises:
        MissingDependencyError: Ray is not installed (``pip install 'wds_cloud[ray]'``).
    """
    from wds_cloud.listing import resolve_shards

    ray = ensure_ray()
    shards = resolve_shards(urls, registry=registry, literal_paths=True)
    items = [{"url": u} for u in shards]
    return ray.data.from_items(items, override_num_blocks=len(items)).flat_map(_ReadShard(registry))


def _rows(blocks: Iterable[Any]) -> Iterable[dict[str, Any]]:
    for block in blocks:
        table = block if hasattr(block, "to_pylist") else None
        rows = table.to_pylist() if table is not None else block.to_dict("records")
        for row in rows:
            yield {k: v for k, v in row.items() if v is not None and k != "__url__"}


def _datasink_class() -> Any:
    from ray.data import Datasink

    class ShardDatasink(Datasink[list[str]]):
        """Each write task writes its blocks into the one shard ``pattern % task_idx``."""

        def __init__(self, pattern: str, registry: OpenerRegistry | None, kw: dict[str, Any]):
            self.pattern = pattern
            self.registry = registry
            self.kw = kw
            self.shards: list[str] = []

        def write(self, blocks: Iterable[Any], ctx: Any) -> list[str]:
            from wds_cloud.jobs.task import remove_leftovers
            from wds_cloud.openers.registry import default_registry
            from wds_cloud.writing.shardwriter import ShardWriter

            name = self.pattern % ctx.task_idx
            remove_leftovers(name, self.registry or default_registry())
            with ShardWriter(
                self.pattern,
                start_shard=ctx.task_idx,
                maxcount=1 << 62,
                maxsize=float("inf"),
                registry=self.registry,
                **self.kw,
            ) as writer:
                for row in _rows(blocks):
                    writer.write(row)
            return list(writer.shards)

        def on_write_complete(self, write_result: Any) -> None:
            returns = getattr(write_result, "write_returns", write_result)
            self.shards = sorted(u for urls in returns for u in urls)

    return ShardDatasink


def write_dataset(
    ds: Any,
    pattern: str,
    *,
    num_shards: int | None = None,
    registry: OpenerRegistry | None = None,
    **writer_kw: Any,
) -> list[str]:
    """Write a Ray dataset of samples as shards ``pattern % i`` (any backend).

    Each Ray write task writes one shard, numbered by the task, committed atomically; a retried
    task rewrites its own shard. Rows are samples (``__key__`` and members; null values are
    left out, ``__url__`` is dropped).

    Args:
        ds: the dataset.
        pattern: shard names with one integer format, ``"s3://b/out/shard-%06d.tar"``.
        num_shards: repartition into this many blocks (= shards) first.
        registry: opener registry for the target.
        **writer_kw: ``ShardWriter`` arguments (``encoder``, ``compress``, ``mtime``...).

    Returns:
        The shards written, sorted.
    """
    from wds_cloud.jobs.runner import check_pattern

    check_pattern(pattern)
    if url_scheme(pattern) == "file":
        os.makedirs(os.path.dirname(os.path.abspath(pattern % 0)), exist_ok=True)
    if num_shards is not None:
        ds = ds.repartition(num_shards)
    sink = _datasink_class()(pattern, registry, writer_kw)
    ds.write_datasink(sink)
    return list(sink.shards)


__all__ = ["read_dataset", "write_dataset"]
