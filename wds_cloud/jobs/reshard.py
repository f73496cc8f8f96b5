"""``reshard``: new shard size or count, optionally a seeded global shuffle across shards.

Plan: every input shard is scanned once (in parallel, on the engine) for the byte span of each
sample; the driver orders the samples (input order, or a permutation drawn from ``seed``), cuts
the order into output shards (``maxcount``/``maxsize``/``nshards``) and gives each output shard
to one task, which fetches its samples by ranged reads (consecutive samples of one input: one
read) and writes them in order. Memory per task: one output shard at most.

On AIStore (both URLs ``ais://``) a shuffle can run server-side as a dSort job: when
:func:`wds_cloud.dsort.reshard_via_dsort` exists, ``reshard(..., shuffle=True)`` hands the job
to it (see :func:`dsort_hook`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from wds_cloud.errors import ConfigError
from wds_cloud.jobs.engines import Engine, make_engine
from wds_cloud.jobs.plan import plan_spans, scan_inputs
from wds_cloud.jobs.runner import check_pattern, run_job
from wds_cloud.jobs.summary import JobSummary
from wds_cloud.jobs.task import Ops
from wds_cloud.openers.registry import OpenerRegistry, url_scheme

Sample = dict[str, Any]


def input_shards(urls: Any, registry: OpenerRegistry | None) -> list[str]:
    """The shard URLs of a spec (list, brace pattern, glob, prefix, dataset JSON)."""
    from wds_cloud.index.build import shard_list

    found = shard_list(urls, registry)
    if not found:
        raise ConfigError(f"no input shards in {urls!r}")
    return found


def dsort_hook(urls: Any, output: str) -> Callable[..., Any] | None:
    """``wds_cloud.dsort.reshard_via_dsort`` when every input and the output are ``ais://`` and
    that function exists, else None (the job runs on the engine)."""
    inputs = [urls] if isinstance(urls, str) else list(urls)
    if url_scheme(output) != "ais" or not all(url_scheme(u) == "ais" for u in inputs):
        return None
    import wds_cloud.dsort as dsort

    fn = getattr(dsort, "reshard_via_dsort", None)
    return fn if callable(fn) else None


def run_spans(
    kind: str,
    shards: list[str],
    pattern: str,
    *,
    maxcount: int | None,
    maxsize: float | None,
    nshards: int | None,
    seed: int | None,
    map: Callable[[Sample], Sample | None] | None,
    select: Callable[[Sample], bool] | None,
    engine: str | Engine,
    address: str | None,
    registry: OpenerRegistry | None,
    manifest: str | bool | None,
    progress: bool,
    writer_kw: dict[str, Any] | None,
) -> JobSummary:
    """Scan ``shards``, order (and shuffle with ``seed``) and cut their samples, write them."""
    started = time.monotonic()
    check_pattern(pattern)
    runner = make_engine(engine, address=address)
    spans = scan_inputs(shards, runner, registry)
    tasks = plan_spans(
        shards, spans, pattern, seed=seed, maxcount=maxcount, maxsize=maxsize, nshards=nshards
    )
    ops = Ops(map=map, select=select, registry=registry, pattern=pattern, writer_kw=writer_kw or {})
    return run_job(
        kind,
        tasks,
        ops,
        engine=runner,
        manifest=manifest,
        progress=progress,
        started=started,
        description={"seed": seed},
    )


def reshard(
    urls: Any,
    output: str,
    *,
    maxcount: int | None = None,
    maxsize: float | None = None,
    nshards: int | None = None,
    shuffle: bool = False,
    seed: int = 0,
    map: Callable[[Sample], Sample | None] | None = None,
    select: Callable[[Sample], bool] | None = None,
    engine: str | Engine = "local",
    address: str | None = None,
    registry: OpenerRegistry | None = None,
    manifest: str | bool | None = None,
    progress: bool = False,
    writer_kw: dict[str, Any] | None = None,
) -> Any:
    """Rewrite a dataset into shards of a new size or count.

    Args:
        urls: input shards (list, brace pattern, glob, prefix, dataset JSON); uncompressed tar.
        output: output shard names, one integer format: ``"s3://b/out/shard-%06d.tar"``.
        maxcount: samples per output shard at most.
        maxsize: input tar bytes per output shard at most (a sample larger alone gets a shard).
        nshards: this many output shards of equal count (instead of maxcount/maxsize).
        shuffle: permute all samples across shards (seeded by ``seed``) before cutting.
        seed: the shuffle's seed: same seed, same bytes.
        map: per-sample function (None drops the sample; an exception drops it, counted).
        select: per-sample filter (False drops the sample, counted).
        engine: ``"local"``, ``"ray"`` or an engine object.
        address: Ray cluster address (ray engine).
        registry: opener registry (endpoints, credentials); pickled into the workers.
        manifest: the manifest URL (None: beside the outputs; False: not resumable).
        progress: progress on stderr.
        writer_kw: more ``ShardWriter`` arguments (``encoder``, ``compress``, ``mtime``...).

    Returns:
        A :class:`~wds_cloud.jobs.summary.JobSummary` (the dSort hook's result on AIStore).
    """
    if shuffle and map is None and select is None:
        hook = dsort_hook(urls, output)
        if hook is not None:
            return hook(
                urls, output, maxcount=maxcount, maxsize=maxsize, nshards=nshards, seed=seed
            )
    return run_spans(
        "reshard",
        input_shards(urls, registry),
        output,
        maxcount=maxcount,
        maxsize=maxsize,
        nshards=nshards,
        seed=seed if shuffle else None,
        map=map,
        select=select,
        engine=engine,
        address=address,
        registry=registry,
        manifest=manifest,
        progress=progress,
        writer_kw=writer_kw,
    )


__all__ = ["dsort_hook", "input_shards", "reshard", "run_spans"]
