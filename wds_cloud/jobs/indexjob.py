"""``index`` and ``verify`` as jobs: one task per shard on the engine.

``index`` writes each shard's DALI ``.idx`` (the single-machine builder,
:func:`~wds_cloud.index.build.build_index`, run on one shard per task) and then the dataset
JSON from the driver; ``verify`` parses every shard fully (the ``wds-cloud verify`` check)
and reports each corrupt one with its byte offset and member. Both write no shard.
"""

from __future__ import annotations

import time
from typing import Any

from wds_cloud.jobs.engines import Engine, make_engine
from wds_cloud.jobs.summary import JobSummary, Progress, TaskResult
from wds_cloud.listing import resolve_shards
from wds_cloud.openers.registry import OpenerRegistry


def _index_one(url: str, registry: OpenerRegistry | None) -> TaskResult:
    from wds_cloud.index.build import build_index

    build = build_index([url], json=False, workers=1, registry=registry, strict=False)
    result = TaskResult(0, samples_in=build.nsamples, bytes_in=build.bytes)
    result.samples_out = build.nsamples
    shard = build.dataset.shards[0] if build.dataset.shards else None
    result.extra = {
        "url": url,
        "idx": build.idx_urls.get(url),
        "nsamples": shard.nsamples if shard else None,
        "filesize": shard.filesize if shard else None,
        "error": f"{type(e).__name__}: {e}" if (e := _first_error(build)) else None,
    }
    return result


def _first_error(build: Any) -> BaseException | None:
    return build.failed[0][1] if build.failed else None


def _verify_one(url: str, registry: OpenerRegistry | None) -> TaskResult:
    from wds_cloud.tools.inspect import verify_shard

    report = verify_shard(url, registry)
    result = TaskResult(0, samples_in=report["samples"], samples_out=report["samples"])
    result.extra = report
    return result


def _run(
    kind: str,
    fn: Any,
    urls: Any,
    engine: str | Engine,
    address: str | None,
    registry: OpenerRegistry | None,
    progress: bool,
) -> JobSummary:
    started = time.monotonic()
    shards = resolve_shards(urls, registry=registry, literal_paths=True)
    runner = make_engine(engine, address=address)
    bar = Progress(kind, len(shards), enabled=progress, writes=False)
    results: dict[int, TaskResult] = {}
    try:
        for position, outcome in runner.run(fn, shards, registry):
            if isinstance(outcome, BaseException):
                outcome = TaskResult(
                    position,
                    extra={
                        "url": shards[position],
                        "ok": False,
                        "error": f"{type(outcome).__name__}: {outcome}",
                    },
                )
            outcome.index = position
            results[position] = outcome
            bar.update(outcome)
    finally:
        bar.close()
    summary = JobSummary(kind, tasks=[results[i] for i in range(len(shards))])
    summary.seconds = time.monotonic() - started
    return summary


def index_job(
    urls: Any,
    *,
    json: str | bool | None = None,
    name: str | None = None,
    description: str | None = None,
    engine: str | Engine = "local",
    address: str | None = None,
    registry: OpenerRegistry | None = None,
    progress: bool = False,
) -> JobSummary:
    """Write ``<shard>.idx`` beside every shard (one task per shard) and the dataset JSON.

    Args:
        urls: a shard spec or a list of URLs taken as given
            (:func:`wds_cloud.listing.resolve_shards`, ``literal_paths=True``).
        json: the dataset JSON's URL (None: ``index.json`` beside the first shard, updated when
            it exists; False: none). Written only when every shard could be read.
        name: dataset name stored in the JSON.
        description: description stored in the JSON.

    Returns:
        A summary; ``summary.extra`` has ``json`` (its URL or None) and ``failed`` (shards
        without an index, with the reason).
    """
    from wds_cloud.index.datasetjson import (
        DatasetIndex,
        ShardInfo,
        default_json_url,
        save_dataset_json,
    )

    summary = _run("index", _index_one, urls, engine, address, registry, progress)
    failed = [
        {"url": t.extra["url"], "error": t.extra["error"]}
        for t in summary.tasks
        if t.extra["error"]
    ]
    readable = all(t.extra.get("nsamples") is not None for t in summary.tasks)
    summary.extra = {"failed": failed, "json": None}
    if json is not False and readable:
        infos = [
            ShardInfo(t.extra["url"], t.extra["nsamples"], t.extra["filesize"])
            for t in summary.tasks
        ]
        target = json if isinstance(json, str) else default_json_url([i.url for i in infos])
        save_dataset_json(
            DatasetIndex(infos, name=name, description=description),
            target,
            registry=registry,
            update=True,
        )
        summary.extra["json"] = target
    return summary


def verify_job(
    urls: Any,
    *,
    engine: str | Engine = "local",
    address: str | None = None,
    registry: OpenerRegistry | None = None,
    progress: bool = False,
) -> JobSummary:
    """Parse every shard fully (one task per shard); ``summary.extra["corrupt"]`` lists the
    reports of the bad ones (URL, byte offset, member, error)."""
    summary = _run("verify", _verify_one, urls, engine, address, registry, progress)
    summary.extra = {"corrupt": [t.extra for t in summary.tasks if not t.extra.get("ok")]}
    return summary


__all__ = ["index_job", "verify_job"]
