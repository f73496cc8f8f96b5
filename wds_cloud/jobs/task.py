"""One task of a job: read its source, ``select`` and ``map`` each sample, write one shard.

A task is a pure function of its :class:`Task` and the job's :class:`Ops`: the same task
always writes the same bytes under the same name, so running it again (a retry after its worker
died, a rerun of the job) replaces what an earlier attempt left. Before writing, a task removes
its own output's leftovers from killed attempts (temporary files beside a local shard,
incomplete multipart uploads of an ``s3://`` shard); the shard itself is committed atomically
by the target's committing writer (``docs/writing.md``).
"""

from __future__ import annotations

import glob
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from wds_cloud.errors import SampleError, WdsCloudError
from wds_cloud.jobs.sources import Source
from wds_cloud.jobs.summary import TaskResult
from wds_cloud.openers.registry import OpenerRegistry, default_registry, url_scheme
from wds_cloud.redact import redact_url

log = logging.getLogger(__name__)

Sample = dict[str, Any]
_REASON_CHARS = 160


@dataclass(frozen=True)
class Task:
    """One unit of work: its number, its input and the one shard it writes.

    Attributes:
        index: the task's number; the output is ``pattern % index``.
        source: where the samples come from (see :mod:`wds_cloud.jobs.sources`).
        output: the shard URL it writes (None for tasks that write no shard: index, verify).
    """

    index: int
    source: Source
    output: str | None


@dataclass
class Ops:
    """What every task of a job applies (shipped once to each worker).

    Attributes:
        map: ``map(sample) -> sample | None``; None drops the sample (counted), an exception
            drops it under the exception's type and message (counted).
        select: ``select(sample) -> bool``; False drops the sample (counted as ``select``).
        registry: opener registry for reading and writing (the default one when None).
        pattern: the output shard names, ``pattern % task.index``.
        writer_kw: ``ShardWriter`` keyword arguments (``encoder``, ``compress``, ...).
    """

    map: Callable[[Sample], Sample | None] | None = None
    select: Callable[[Sample], bool] | None = None
    registry: OpenerRegistry | None = None
    pattern: str | None = None
    writer_kw: dict[str, Any] = field(default_factory=dict)


def _reason(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
    return text[:_REASON_CHARS]


def remove_leftovers(url: str, registry: OpenerRegistry) -> int:
    """Remove what killed attempts at writing ``url`` left: temp files, incomplete uploads
    (best effort on S3: without the permission to list them, a warning says so).

    Returns:
        How many leftovers were removed.
    """
    scheme = url_scheme(url)
    removed = 0
    if scheme == "file":
        from wds_cloud.openers.local import url_to_path

        path = url_to_path(url)
        directory, base = os.path.split(os.path.abspath(path))
        for temp in glob.glob(os.path.join(glob.escape(directory), f".{glob.escape(base)}.tmp-*")):
            try:
                os.unlink(temp)
                removed += 1
            except FileNotFoundError:
                pass
    elif scheme == "s3":
        from wds_cloud.openers.s3.uploads import abort_upload, list_incomplete_uploads

        opener = registry.for_url(url)
        try:
            for upload in list_incomplete_uploads(url, opener=opener):
                if upload.url == url and abort_upload(upload, opener=opener):
                    removed += 1
        except WdsCloudError as exc:  # e.g. no s3:ListBucketMultipartUploads permission
            log.warning("cannot clear incomplete uploads of %s: %s", redact_url(url), exc)
    if removed:
        log.info("removed %d leftover(s) of earlier attempts at %s", removed, url)
    return removed


def _apply(sample: Sample, ops: Ops, result: TaskResult) -> Sample | None:
    key = sample.get("__key__")
    if ops.select is not None:
        try:
            keep = ops.select(sample)
        except Exception as exc:
            result.skip(f"select raised {_reason(exc)}", key)
            return None
        if not keep:
            result.skip("select", key)
            return None
    if ops.map is not None:
        try:
            out = ops.map(sample)
        except Exception as exc:
            result.skip(_reason(exc), key)
            return None
        if out is None:
            result.skip("map returned None", key)
            return None
        return out
    return sample


def run_task(task: Task, ops: Ops) -> TaskResult:
    """Run one task; return what it did.

    Raises:
        ShardError: an input could not be read (the task fails; nothing is committed).
        UploadError: the output could not be written.
    """
    from wds_cloud.writing.shardwriter import ShardWriter

    registry = ops.registry or default_registry()
    result = TaskResult(task.index)
    assert task.output is not None
    remove_leftovers(task.output, registry)
    assert ops.pattern is not None and ops.pattern % task.index == task.output
    writer = ShardWriter(
        ops.pattern,
        start_shard=task.index,
        maxcount=1 << 62,
        maxsize=float("inf"),
        registry=registry,
        **ops.writer_kw,
    )
    with writer:
        for sample, size in task.source.read(registry):
            result.samples_in += 1
            result.bytes_in += size
            out = _apply(sample, ops, result)
            if out is None:
                continue
            try:
                written = writer.write(out)
            except SampleError as exc:
                result.skip(f"cannot be written: {_reason(exc)}", out.get("__key__"))
                continue
            result.samples_out += 1
            result.bytes_out += written
    if writer.shards:
        result.output = writer.shards[0]
        result.bytes_out += 1024  # the end-of-archive blocks
    return result


__all__ = ["Ops", "Task", "remove_leftovers", "run_task"]
