"""Batching stages: ``batched``, ``unbatched``, ``listed``, ``unlisted``.

``batched`` collates with :func:`wds_cloud.core.collate.default_collation_fn` by default.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from wds_cloud.core.collate import default_collation_fn
from wds_cloud.core.curry import pipelinefilter
from wds_cloud.core.handlers import reraise_exception
from wds_cloud.core.stagekind import stage_kind
from wds_cloud.errors import SampleError


@stage_kind("batch", lazy=True)
def _batched(
    data: Iterable[Any],
    batchsize: int = 20,
    collation_fn: Callable[[list[Any]], Any] | None = default_collation_fn,
    partial: bool = True,
    handler: Callable[[BaseException], bool] = reraise_exception,
) -> Iterator[Any]:
    """Group samples into batches of ``batchsize`` (webdataset ``batched``).

    Args:
        data: source iterator.
        batchsize: samples per batch.
        collation_fn: turns a list of samples into a batch; ``None`` yields plain lists.
        partial: whether to emit the last, smaller batch.
        handler: called when ``collation_fn`` fails (the batch is then dropped or the
            iteration stops); the default re-raises.

    Yields:
        Batches.
    """
    if batchsize < 1:
        raise ValueError(f"batched: batchsize must be >= 1, got {batchsize}")
    batch: list[Any] = []
    for sample in data:
        batch.append(sample)
        if len(batch) < batchsize:
            continue
        if collation_fn is None:
            yield batch
        else:
            try:
                collated = collation_fn(batch)
            except Exception as exn:
                if handler(exn):
                    batch = []
                    continue
                return
            yield collated
        batch = []
    if batch and (partial or len(batch) == batchsize):
        if collation_fn is None:
            yield batch
            return
        try:
            collated = collation_fn(batch)
        except Exception as exn:
            handler(exn)
            return
        yield collated


batched = pipelinefilter(_batched)


@stage_kind("batch", lazy=True)
def _listed(data: Iterable[Any], batchsize: int = 20, partial: bool = True) -> Iterator[Any]:
    """Group samples into plain lists of ``batchsize``.

    Unlike webdataset 1.0.2 (which ignores it), ``partial=False`` drops a short last list.
    """
    return _batched(data, batchsize, collation_fn=None, partial=partial)


listed = pipelinefilter(_listed)


@stage_kind("unbatch")
def _unlisted(data: Iterable[Any]) -> Iterator[Any]:
    """Flatten lists of samples back into samples.

    Raises:
        SampleError: an item is not a list.
    """
    for batch in data:
        if not isinstance(batch, list):
            raise SampleError(f"unlisted: expected a list of samples, got {type(batch).__name__}")
        yield from batch


unlisted = pipelinefilter(_unlisted)


@stage_kind("unbatch")
def _unbatched(data: Iterable[Any]) -> Iterator[Any]:
    """Split collated batches back into samples (webdataset ``unbatched``).

    Tuples/lists of batched fields yield tuples; dicts of equally long values yield dicts.

    Raises:
        SampleError: dict values of different lengths, or an item that is no batch.
    """
    for batch in data:
        if isinstance(batch, (list, tuple)):
            if not batch:
                continue
            n = len(batch[0])
            for field in batch[1:]:
                if len(field) != n:
                    raise SampleError(
                        f"unbatched: fields of a batch differ in length ({[len(f) for f in batch]})"
                    )
            yield from zip(*batch, strict=True)
        elif isinstance(batch, dict):
            lengths = {k: len(v) for k, v in batch.items()}
            if len(set(lengths.values())) > 1:
                raise SampleError(f"unbatched: dict values differ in length: {lengths}")
            n = next(iter(lengths.values()), 0)
            keys = list(batch.keys())
            values = [batch[k] for k in keys]
            for i in range(n):
                yield {k: v[i] for k, v in zip(keys, values, strict=True)}
        else:
            raise SampleError(f"unbatched: unknown batch type {type(batch).__name__}")


unbatched = pipelinefilter(_unbatched)
