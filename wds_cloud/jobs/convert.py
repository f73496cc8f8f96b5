"""``convert``: files grouped by key, a Parquet dataset, or existing shards -> WebDataset shards.

Inputs (``source``):

- a local directory or an object prefix ending in ``/`` (``s3://b/raw/``) of files grouped by
  key as ``wds-cloud create`` groups them (key = relative path up to the first dot of the
  basename, extension = the rest): output shard ``i`` holds samples ``[i*maxcount, ...)`` in
  key order (with ``maxsize``, cut by file sizes where they are known: local files);
- a local ``.parquet`` file or a directory of them: a row is a sample, a column a member
  (``key=`` names the key column; else ``<file stem>/<row>``); ``maxcount`` rows a shard;
- anything else is a shard list (URLs, brace patterns, globs, prefixes, a dataset JSON): cut
  as :func:`~wds_cloud.jobs.reshard.reshard` cuts, in input order.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from wds_cloud.errors import ConfigError
from wds_cloud.jobs.engines import Engine, make_engine
from wds_cloud.jobs.plan import group_samples
from wds_cloud.jobs.reshard import input_shards, run_spans
from wds_cloud.jobs.runner import check_pattern, run_job
from wds_cloud.jobs.sources import FilesSource
from wds_cloud.jobs.summary import JobSummary
from wds_cloud.jobs.task import Ops, Task
from wds_cloud.openers.registry import OpenerRegistry, default_registry, url_scheme

Sample = dict[str, Any]
_SHARD_SUFFIXES = (".tar", ".tar.gz", ".tgz")


def _remote_files(prefix: str, registry: OpenerRegistry) -> list[tuple[str, str, str, str]]:
    """``(key, ext, url, url)`` for every object under ``prefix`` (keys relative to it)."""
    from wds_cloud.cli.create import _split

    listed = sorted(registry.for_url(prefix).list(prefix))
    out = []
    for url in listed:
        rel = url[len(prefix) :]
        key, ext = _split(rel, url)
        out.append((key, ext, url, url))
    return out


def file_samples(source: str, registry: OpenerRegistry) -> list[tuple[str, list[tuple[str, str]]]]:
    """``(key, [(ext, url)...])`` per sample of a directory or object prefix, checked as
    ``wds-cloud create`` checks (a key seen again later, a repeated extension: errors)."""
    from wds_cloud.cli.create import _group, directory_members

    if url_scheme(source) == "file":
        members = [(k, e, None, where) for k, e, _, where in directory_members(source)]
    else:
        members = [(k, e, None, url) for k, e, url, _ in _remote_files(source, registry)]
    samples = [(group[0][0], [(m[1], m[3]) for m in group]) for group in _group(members)]
    if not samples:
        raise ConfigError(f"convert: nothing to convert: {source!r} holds no files")
    return samples


def _file_size(url: str) -> int:
    return os.path.getsize(url) if url_scheme(url) == "file" else 0


def _kind(source: Any, registry: OpenerRegistry) -> str:
    from wds_cloud.jobs.parquet import is_parquet

    if not isinstance(source, str):
        return "shards"
    if url_scheme(source) == "file":
        if os.path.isdir(source) or (os.path.isfile(source) and source.endswith(".parquet")):
            return "parquet" if is_parquet(source) else "files"
        return "shards"
    if source.endswith("/"):
        listed = registry.for_url(source).list(source)
        if listed and all(u.lower().endswith(_SHARD_SUFFIXES) for u in listed):
            return "shards"
        return "files"
    return "shards"


def convert(
    source: Any,
    output: str,
    *,
    maxcount: int = 100000,
    maxsize: float | None = None,
    map: Callable[[Sample], Sample | None] | None = None,
    select: Callable[[Sample], bool] | None = None,
    key: str | None = None,
    columns: list[str] | None = None,
    kind: str = "auto",
    engine: str | Engine = "local",
    address: str | None = None,
    registry: OpenerRegistry | None = None,
    manifest: str | bool | None = None,
    progress: bool = False,
    writer_kw: dict[str, Any] | None = None,
) -> JobSummary:
    """Convert ``source`` into WebDataset shards ``output % i`` (see the module docstring).

    Args:
        source: a directory, an object prefix ending in ``/``, a Parquet file or directory,
            or a shard list.
        output: output shard names with one integer format (local, s3, gs, ais).
        maxcount: samples per output shard at most.
        maxsize: input bytes per output shard at most (files with known sizes, shards).
        map: per-sample function (None drops the sample; an exception drops it, counted).
        select: per-sample filter (False drops the sample, counted).
        key: Parquet: the key column.
        columns: Parquet: the columns to write (default: all but ``key``).
        kind: ``auto``, ``files``, ``parquet`` or ``shards``.
        engine, address, registry, manifest, progress, writer_kw: see
            :func:`~wds_cloud.jobs.reshard.reshard`.
    """
    started = time.monotonic()
    check_pattern(output)
    reg = registry or default_registry()
    kind = _kind(source, reg) if kind == "auto" else kind
    runner = make_engine(engine, address=address)
    ops = Ops(map=map, select=select, registry=registry, pattern=output, writer_kw=writer_kw or {})
    if kind == "shards":
        return run_spans(
            "convert",
            input_shards(source, registry),
            output,
            maxcount=maxcount,
            maxsize=maxsize,
            nshards=None,
            seed=None,
            map=map,
            select=select,
            engine=runner,
            address=None,
            registry=registry,
            manifest=manifest,
            progress=progress,
            writer_kw=writer_kw,
        )
    if kind == "parquet":
        from wds_cloud.jobs.parquet import plan_parquet

        sources: list[Any] = plan_parquet(source, maxcount, key, columns)
    elif kind == "files":
        samples = file_samples(source, reg)
        sizes = [sum(_file_size(url) for _, url in members) for _, members in samples]
        groups = group_samples(sizes, maxcount=maxcount, maxsize=maxsize)
        sources = [
            FilesSource(tuple((k, tuple(m)) for k, m in samples[lo:hi])) for lo, hi in groups
        ]
    else:
        raise ConfigError(f"convert: unknown input kind {kind!r} (auto, files, parquet, shards)")
    tasks = [Task(i, src, output % i) for i, src in enumerate(sources)]
    return run_job(
        "convert",
        tasks,
        ops,
        engine=runner,
        manifest=manifest,
        progress=progress,
        started=started,
        description={"kind": kind},
    )


__all__ = ["convert", "file_samples"]
