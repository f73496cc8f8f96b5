"""``reshard``: new shard size or count, optionally a seeded global shuffle across shards.

Plan: every input shard is scanned once (in parallel, on the engine) for the byte span of each
sample; the driver orders the samples (input order, or a permutation drawn from ``seed``), cuts
the order into output shards (``maxcount``/``maxsize``/``nshards``) and gives each output shard
to one task, which fetches its samples by ranged reads (consecutive samples of one input: one
read) and writes them in order. Memory per task: one output shard at most.

On AIStore (inputs and output ``ais://``) a shuffle bounded by ``maxsize`` runs server-side as
one dSort job (:func:`wds_cloud.aistore.dsort.reshard_via_dsort`, chosen by :func:`dsort_hook`;
``dsort=False`` keeps it on the engine).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from wds_cloud.errors import ConfigError
from wds_cloud.jobs.engines import Engine, make_engine
from wds_cloud.jobs.plan import plan_spans, scan_inputs
from wds_cloud.jobs.runner import check_pattern, run_job
from wds_cloud.jobs.summary import JobSummary, TaskResult
from wds_cloud.jobs.task import Ops
from wds_cloud.listing import resolve_shards
from wds_cloud.openers.registry import OpenerRegistry

Sample = dict[str, Any]


def dsort_hook(
    urls: Any,
    output: str,
    *,
    maxcount: int | None,
    maxsize: float | None,
    nshards: int | None,
    registry: OpenerRegistry | None = None,
) -> Callable[..., JobSummary] | None:
    """A function running this shuffled reshard as one AIStore dSort job (on the cluster, no
    sample through this machine) when dSort can: every input and the output ``ais://``, shards
    bounded by ``maxsize`` only (dSort packs by size). Else None: the job runs on the engine."""
    from wds_cloud.aistore.dsort.reshard import can_reshard_via_dsort

    inputs = [urls] if isinstance(urls, str) else list(urls)
    if nshards is not None or maxsize is None:
        return None
    if not can_reshard_via_dsort(inputs, output, maxcount=maxcount):
        return None
    bound = int(maxsize)
    # the cluster the job's ais:// opener talks to (its endpoint and token), else the default
    config = getattr(registry.for_url(output), "config", None) if registry is not None else None

    def run(seed: int, progress: bool) -> JobSummary:
        from wds_cloud.aistore.dsort.reshard import reshard_via_dsort

        started = time.monotonic()
        done = reshard_via_dsort(
            inputs[0] if len(inputs) == 1 else inputs,
            output,
            maxsize=bound,
            seed=seed,
            progress=progress,
            config=config,
        )
        result = TaskResult(
            0, samples_in=done.samples, samples_out=done.samples, bytes_in=done.bytes
        )
        result.extra = {"dsort_job": done.job_id, "shards": done.shards}
        return JobSummary(
            "reshard",
            [result],
            seconds=time.monotonic() - started,
            extra={"engine": "dsort", "dsort_job": done.job_id, "shards": done.shards},
        )

    return run


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
    dsort: bool | None = None,
) -> JobSummary:
    """Rewrite a dataset into shards of a new size or count.

    Args:
        urls: input shards: a spec (brace pattern, glob, prefix, dataset JSON) or a list of
            URLs taken as given (:func:`wds_cloud.listing.resolve_shards`); uncompressed tar.
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
        dsort: a shuffled reshard from ``ais://`` to ``ais://`` bounded by ``maxsize`` runs as
            one AIStore dSort job on the cluster (:func:`wds_cloud.aistore.dsort.reshard_via_dsort`)
            when None (the default) or True; False runs it on ``engine``. dSort's shards are
            its own shuffle (not the engine's bytes) and it keeps no manifest.

    Returns:
        A :class:`~wds_cloud.jobs.summary.JobSummary` (with ``extra["engine"] == "dsort"``
        and the dSort job id when dSort ran it).

    Raises:
        ConfigError: ``dsort=True`` for a reshard dSort cannot run.
    """
    if shuffle and map is None and select is None and dsort is not False:
        hook = dsort_hook(
            urls, output, maxcount=maxcount, maxsize=maxsize, nshards=nshards, registry=registry
        )
        if hook is not None:
            return hook(seed, progress)
    if dsort:
        raise ConfigError(
            "reshard(dsort=True): dSort runs a shuffled reshard from ais:// shards to ais:// "
            "bounded by maxsize only, without map/select/maxcount/nshards"
        )
    return run_spans(
        "reshard",
        resolve_shards(urls, registry=registry, literal_paths=True),
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


__all__ = ["dsort_hook", "reshard", "run_spans"]
