"""``map``: a per-sample function over every shard; output shard ``i`` holds input shard ``i``'s
samples (those the function kept), streamed (memory: one sample)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wds_cloud.jobs.engines import Engine, make_engine
from wds_cloud.jobs.runner import check_pattern, run_job
from wds_cloud.jobs.sources import ShardSource
from wds_cloud.jobs.summary import JobSummary
from wds_cloud.jobs.task import Ops, Task
from wds_cloud.listing import resolve_shards
from wds_cloud.openers.registry import OpenerRegistry

Sample = dict[str, Any]


def map_shards(
    urls: Any,
    output: str,
    fn: Callable[[Sample], Sample | None],
    *,
    select: Callable[[Sample], bool] | None = None,
    engine: str | Engine = "local",
    address: str | None = None,
    registry: OpenerRegistry | None = None,
    manifest: str | bool | None = None,
    progress: bool = False,
    writer_kw: dict[str, Any] | None = None,
) -> JobSummary:
    """Apply ``fn`` to every sample and write the results, one output shard per input shard.

    ``fn(sample) -> sample | None`` gets the raw sample (``__key__``, ``__url__``, member
    bytes by extension) and returns the sample to write; None drops it, and an exception drops
    it too: both are counted by reason in the summary (a broken image, a failed resize), never
    silently. Input shards may be compressed. Other arguments: see
    :func:`~wds_cloud.jobs.reshard.reshard`.
    """
    check_pattern(output)
    shards = resolve_shards(urls, registry=registry, literal_paths=True)
    tasks = [Task(i, ShardSource(url), output % i) for i, url in enumerate(shards)]
    ops = Ops(map=fn, select=select, registry=registry, pattern=output, writer_kw=writer_kw or {})
    return run_job(
        "map",
        tasks,
        ops,
        engine=make_engine(engine, address=address),
        manifest=manifest,
        progress=progress,
    )


__all__ = ["map_shards"]
