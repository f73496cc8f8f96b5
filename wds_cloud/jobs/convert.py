"""``convert``: files grouped by key, a Parquet dataset, or existing shards -> WebDataset shards.

Inputs (``source``):

- a local directory or an object prefix ending in ``/`` (``s3://b/raw/``) of files grouped by
  key as ``wds-cloud create`` groups them (key = relative path up to the first dot of the
  basename, extension = the rest): samples in key order, cut by ``maxcount`` and ``maxsize``
  (the tar bytes each sample will take, from the files' sizes) exactly as reshard cuts
  (:func:`~wds_cloud.jobs.plan.group_samples`);
- a Parquet dataset: a local ``.parquet`` file or directory of them, or on any backend one
  ``.parquet`` object, a list of them, a glob, or a prefix whose objects are ``.parquet`` files (read through
  the openers with ranged reads, :mod:`wds_cloud.jobs.parquet`): a row is a sample, a column a
  member (``key=`` names the key column; else ``<file stem>/<row>``); ``maxcount`` rows a
  shard;
- anything else is a shard list (URLs, brace patterns, globs, prefixes, a dataset JSON): cut
  as :func:`~wds_cloud.jobs.reshard.reshard` cuts, in input order.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from wds_cloud.errors import ConfigError
from wds_cloud.jobs.engines import Engine, make_engine
from wds_cloud.jobs.plan import group_samples
from wds_cloud.jobs.reshard import run_spans
from wds_cloud.jobs.runner import check_pattern, run_job
from wds_cloud.jobs.sources import FilesSource, ShardSource
from wds_cloud.jobs.summary import JobSummary
from wds_cloud.jobs.task import Ops, Task
from wds_cloud.listing import resolve_shards
from wds_cloud.openers.registry import OpenerRegistry, default_registry, url_scheme

Sample = dict[str, Any]
_SHARD_SUFFIXES = (".tar", ".tar.gz", ".tgz")
_PARQUET = ".parquet"
_SIZE_BATCH = 256  # objects sized per engine task
_SIZE_THREADS = 16  # size requests in flight per engine task


Listed = list[tuple[str, int | None]]  # (url, size when the listing gave it)


def _remote_files(prefix: str, listed: Listed) -> list[tuple[str, str, str, str]]:
    """``(key, ext, url, url)`` for every object ``listed`` under ``prefix`` (keys relative to
    it), sorted by (key, ext) as a directory's files are (URL order differs: ``x-1.jpg`` <
    ``x.jpg``)."""
    from wds_cloud.writing.members import split_name

    out = []
    for url, _ in listed:
        rel = url[len(prefix) :]
        key, ext = split_name(rel, url)
        out.append((key, ext, url, url))
    out.sort(key=lambda m: (m[0], m[1]))
    return out


def file_samples(
    source: str, registry: OpenerRegistry, listed: Listed | None = None
) -> list[tuple[str, list[tuple[str, str]]]]:
    """``(key, [(ext, url)...])`` per sample of a directory or object prefix, checked as
    ``wds-cloud create`` checks (a key seen again later, a repeated extension: errors).
    ``listed``: the prefix's listing when the caller has it (else it is listed here)."""
    from wds_cloud.writing.members import directory_members, group_members

    if url_scheme(source) == "file":
        members = [(k, e, None, where) for k, e, _, where in directory_members(source)]
    else:
        from wds_cloud.listing import list_sizes

        listed = list_sizes(source, registry=registry) if listed is None else listed
        members = [(k, e, None, url) for k, e, url, _ in _remote_files(source, listed)]
    samples = [(group[0][0], [(m[1], m[3]) for m in group]) for group in group_members(members)]
    if not samples:
        raise ConfigError(f"convert: nothing to convert: {source!r} holds no files")
    return samples


def _size_batch(urls: list[str], registry: OpenerRegistry | None) -> list[int]:
    """The sizes of ``urls`` (one engine task: a few requests in flight)."""
    from wds_cloud.openers.streams.rangefile import object_size

    if len(urls) == 1:
        return [object_size(urls[0], registry)]
    with ThreadPoolExecutor(min(_SIZE_THREADS, len(urls))) as pool:
        return list(pool.map(lambda u: object_size(u, registry), urls))


def file_sizes(
    urls: Sequence[str],
    engine: Engine,
    registry: OpenerRegistry | None,
    known: Mapping[str, int | None] | None = None,
) -> list[int]:
    """The size of every file: ``os.stat`` for local files; for objects, the size their
    listing gave (``known``: S3, GCS and AIStore listings carry sizes), else one size request
    each, in batches run on ``engine``.

    Raises:
        WdsCloudError: naming the objects that could not be sized (a missing object...).
    """
    from wds_cloud.jobs.runner import raise_failures

    known = known or {}
    out: list[int | None] = [None] * len(urls)
    remote = []
    for i, url in enumerate(urls):
        if url_scheme(url) == "file":
            out[i] = os.path.getsize(url)
        elif known.get(url) is not None:
            out[i] = known[url]
        else:
            remote.append(i)
    batches = [remote[lo : lo + _SIZE_BATCH] for lo in range(0, len(remote), _SIZE_BATCH)]
    failures = []
    items = [[urls[i] for i in batch] for batch in batches]
    for position, outcome in engine.run(_size_batch, items, registry):
        first = items[position][0]
        if isinstance(outcome, BaseException):
            failures.append((Task(position, ShardSource(first), first), outcome))
            continue
        for i, size in zip(batches[position], outcome, strict=True):
            out[i] = size
    if failures:
        raise_failures("convert (sizing the input files)", failures)
    return [int(s or 0) for s in out]


def sample_tar_sizes(
    samples: Sequence[tuple[str, Sequence[tuple[str, str]]]], sizes: Sequence[int]
) -> list[int]:
    """The tar bytes each sample will take in its shard (headers, data, padding: what
    ``ShardWriter``'s ``maxsize`` counts), from ``sizes``, the sizes of the samples' files in
    order."""
    from wds_cloud.writing.tarformat import SampleFormatter

    header = SampleFormatter().header
    out, it = [], iter(sizes)
    for key, members in samples:
        total = 0
        for ext, _ in members:
            n = next(it)
            total += len(header(f"{key}.{ext.lower()}", n)) + n + (-n % 512)
        out.append(total)
    return out


def _data_names(urls: Sequence[str]) -> list[str]:
    """Names that are data: neither hidden (``.x``) nor markers (``_SUCCESS``)."""
    return [u for u in urls if not u.rstrip("/").rsplit("/", 1)[-1].startswith((".", "_"))]


def is_parquet_name(url: str) -> bool:
    """A URL naming a Parquet object (``.parquet``, query aside)."""
    return url.split("?", 1)[0].lower().endswith(_PARQUET)


def _kind(source: Any, registry: OpenerRegistry) -> tuple[str, Listed | None]:
    """The input kind of ``source``, and the listing of a remote prefix when one was made to
    tell (planning the files reuses it: a prefix is listed once)."""
    from wds_cloud.jobs.parquet import is_parquet

    if not isinstance(source, str):
        names = list(source) if isinstance(source, list | tuple) else []
        if names and all(isinstance(u, str) and is_parquet_name(u) for u in names):
            return "parquet", None
        return "shards", None
    if url_scheme(source) == "file":
        if os.path.isdir(source) or (os.path.isfile(source) and source.endswith(_PARQUET)):
            return ("parquet" if is_parquet(source) else "files"), None
        return "shards", None
    if is_parquet_name(source):
        return "parquet", None  # one object, or a glob of them
    if source.endswith("/"):
        from wds_cloud.listing import list_sizes

        listed = list_sizes(source, registry=registry)
        names = _data_names([u for u, _ in listed])
        if names and all(u.lower().endswith(_SHARD_SUFFIXES) for u in names):
            return "shards", None
        if names and all(u.lower().endswith(_PARQUET) for u in names):
            return "parquet", None
        return "files", listed
    return "shards", None


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
        source: a directory, an object prefix ending in ``/``, a Parquet dataset (a local
            file or directory; a ``.parquet`` URL, glob or prefix on any backend, or a list of
            ``.parquet`` URLs), or a shard list.
        output: output shard names with one integer format (local, s3, gs, ais).
        maxcount: samples per output shard at most.
        maxsize: tar bytes per output shard at most, measured on the input (files: their
            sizes; shards: the samples' spans); a sample larger alone gets a shard. Not for
            Parquet (rows are cut by ``maxcount``).
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
    kind, listed = _kind(source, reg) if kind == "auto" else (kind, None)
    runner = make_engine(engine, address=address)
    ops = Ops(map=map, select=select, registry=registry, pattern=output, writer_kw=writer_kw or {})
    if kind == "shards":
        return run_spans(
            "convert",
            resolve_shards(source, registry=registry, literal_paths=True),
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

        if maxsize is not None:
            raise ConfigError("convert: maxsize is not supported for Parquet input; use maxcount")
        sources: list[Any] = plan_parquet(source, maxcount, key, columns, registry)
    elif kind == "files":
        if listed is None and url_scheme(source) != "file":
            from wds_cloud.listing import list_sizes

            listed = list_sizes(source, registry=reg)
        samples = file_samples(source, reg, listed)
        sizes: list[int] = [0] * len(samples)
        if maxsize is not None:
            urls = [url for _, members in samples for _, url in members]
            known = dict(listed or ())
            sizes = sample_tar_sizes(samples, file_sizes(urls, runner, registry, known))
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


__all__ = ["convert", "file_samples", "file_sizes", "sample_tar_sizes"]
