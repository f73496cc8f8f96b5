"""Collation: turn a list of samples (dicts or tuples) into one batch.

:func:`default_collation_fn` behaves like webdataset's (numpy batches, torch tensors stacked
with torch); :func:`torch_collate` makes torch tensors of every array/number column, for
batching in a ``WebLoader``. Torch is never imported here unless a torch batch is built.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from wds_cloud.errors import SampleError

__all__ = ["batch_samples", "default_collation_fn", "torch_collate"]


def _is_tensor(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _check_shapes(column: Any, values: Sequence[Any]) -> None:
    first = values[0].shape
    for v in values:
        if v.shape != first:
            shapes = sorted({tuple(x.shape) for x in values})
            raise SampleError(
                f"collation: column {column!r} has values of different shapes {shapes}; "
                "all shapes must be equal to stack them"
            )


def _combine(column: Any, values: list[Any], combine_tensors: bool, combine_scalars: bool) -> Any:
    first = values[0]
    if isinstance(first, int | float):
        return np.array(values) if combine_scalars else values
    if _is_tensor(first):
        if not combine_tensors:
            return values
        _check_shapes(column, values)
        return stack_tensors(values)
    if isinstance(first, np.ndarray):
        if not combine_tensors:
            return values
        try:
            return np.stack(values)
        except ValueError:
            _check_shapes(column, values)
            raise
    return values


def _columns(samples: Sequence[Any]) -> tuple[list[Any], list[list[Any]], bool]:
    """Return (column names, column values, is_tuple) for dict or tuple/list samples."""
    if not samples:
        raise SampleError("collation: cannot collate an empty list of samples")
    first = samples[0]
    if isinstance(first, dict):
        names = list(first)
        keyset = set(names)
        for s in samples:
            if not isinstance(s, dict) or s.keys() != keyset:
                got = sorted(s) if isinstance(s, dict) else type(s).__name__
                raise SampleError(
                    f"collation: samples have different keys: {sorted(keyset)} vs {got}",
                    key=s.get("__key__") if isinstance(s, dict) else None,
                )
        return names, [[s[n] for s in samples] for n in names], False
    if isinstance(first, list | tuple):
        width = len(first)
        for s in samples:
            if not isinstance(s, list | tuple) or len(s) != width:
                raise SampleError(
                    f"collation: tuple samples of different lengths ({width} and "
                    f"{len(s) if isinstance(s, list | tuple) else type(s).__name__})"
                )
        return list(range(width)), [list(col) for col in zip(*samples, strict=True)], True
    raise SampleError(f"collation: samples must be dicts or tuples, got {type(first).__name__}")


def default_collation_fn(
    samples: Sequence[Any], combine_tensors: bool = True, combine_scalars: bool = True
) -> Any:
    """Collate samples into a batch, as webdataset does.

    Tuples (and lists) come back as a tuple of columns, dicts as a dict of columns. In each
    column: ints/floats become an ``np.array`` (``combine_scalars``), numpy arrays are stacked
    into one array and torch tensors with ``torch.stack`` (``combine_tensors``; shapes must
    match), anything else becomes a list.

    Args:
        samples: the samples of one batch (all dicts with the same keys, or all tuples of the
            same length).
        combine_tensors: stack arrays and tensors.
        combine_scalars: turn numbers into numpy arrays.

    Raises:
        SampleError: mismatching keys, lengths or shapes.
    """
    names, columns, is_tuple = _columns(samples)
    combined = [
        _combine(n, c, combine_tensors, combine_scalars)
        for n, c in zip(names, columns, strict=True)
    ]
    if is_tuple:
        return tuple(combined)
    return dict(zip(names, combined, strict=True))


def rows_view(values: Sequence[Any]) -> Any:
    """``torch.stack(values)`` as a view, when ``values`` are consecutive rows of one tensor.

    That is what a main-process ``unbatched()`` then ``batched()`` over the same batch sizes
    collates (``make_loader`` without a main-process shuffle): the worker's batch comes back
    without a copy. The rows must share one storage, dtype, shape and strides, with storage
    offsets in one positive step; then the view reads exactly the memory ``values`` read.
    None otherwise (including tensors that require grad, which ``torch.stack`` should track).
    """
    first = values[0]
    if len(values) < 2 or first.requires_grad:
        return None
    ptr = first.untyped_storage().data_ptr()
    offset = first.storage_offset()
    step = values[1].storage_offset() - offset
    if step <= 0:
        return None
    dtype, shape, strides = first.dtype, first.shape, first.stride()
    for k, v in enumerate(values):
        if (
            v.storage_offset() != offset + k * step
            or v.dtype != dtype
            or v.shape != shape
            or v.stride() != strides
            or v.untyped_storage().data_ptr() != ptr
            or v.requires_grad
        ):
            return None
    return first.as_strided((len(values), *shape), (step, *strides), offset)


def array_rows_view(values: Sequence[Any]) -> np.ndarray | None:
    """:func:`rows_view` for numpy arrays: ``np.stack(values)`` as a view of the one
    C-contiguous array whose consecutive rows ``values`` are (a batch split by
    ``unbatched()`` and collected again in order), else None."""
    first = values[0]
    base = first.base
    if (
        len(values) < 2
        or type(base) is not np.ndarray
        or not base.flags.c_contiguous
        or base.shape[1:] != first.shape
        or base.dtype != first.dtype
    ):
        return None
    step = base.strides[0]
    origin = base.__array_interface__["data"][0]
    start = first.__array_interface__["data"][0] - origin
    if step <= 0 or start % step:
        return None
    for k, v in enumerate(values):
        if v.base is not base or v.__array_interface__["data"][0] != origin + start + k * step:
            return None
    row = start // step
    view: np.ndarray = base[row : row + len(values)]
    return view


def stack_tensors(values: Sequence[Any]) -> Any:
    """``torch.stack(values)``, copied by numpy for CPU tensors numpy can view.

    Same values, dtype, shape and (contiguous) layout; the copy is one single-threaded
    ``np.stack``. In a loader's main process ``torch.stack`` runs on torch's intra-op threads,
    which compete with the DataLoader workers for the cores: measured 20-50 ms for a batch of
    64 256x256 RGB images on 2 busy cores against about 1 ms with numpy. Tensors that require
    grad, live on another device or have no numpy dtype (``bfloat16``) go to ``torch.stack``.
    """
    import torch

    try:
        arrays = [v.numpy() for v in values]  # raises for grad, device, bfloat16, conj bit
    except (TypeError, RuntimeError):
        return torch.stack(list(values))
    dtype = arrays[0].dtype
    if any(a.dtype != dtype for a in arrays):  # torch.stack promotes mixed dtypes
        return torch.stack(list(values))
    out = np.empty((len(arrays), *arrays[0].shape), dtype=dtype)  # C order, always
    return torch.from_numpy(np.stack(arrays, out=out))


def _torch_combine(column: Any, values: list[Any]) -> Any:
    import torch

    first = values[0]
    if isinstance(first, torch.Tensor):
        _check_shapes(column, values)
        view = rows_view(values)
        return stack_tensors(values) if view is None else view
    if isinstance(first, np.ndarray | np.number | np.bool_):
        if isinstance(first, np.ndarray):
            _check_shapes(column, values)
            view = array_rows_view(values)
            if view is not None and view.dtype.kind in "biufc":
                return torch.from_numpy(view)
        stacked = np.stack(values) if isinstance(first, np.ndarray) else np.array(values)
        if stacked.dtype.kind in "biufc":
            return torch.from_numpy(stacked)
        return values
    if isinstance(first, bool | int | float) and all(
        isinstance(v, bool | int | float) for v in values
    ):
        return torch.tensor(values)
    return values


def torch_collate(samples: Sequence[Any]) -> Any:
    """Collate samples into torch tensors (arrays, tensors, numbers); other values stay lists.

    Used as the default ``collation_fn`` of ``WebLoader.batched``. Dicts come back as dicts,
    tuples as tuples. Tensors that are consecutive rows of one tensor (a batch split by
    ``unbatched()`` and collected again in order) are returned as a view of it, sharing its
    memory, instead of a copy (:func:`rows_view`).

    Raises:
        SampleError: mismatching keys, lengths or shapes.
    """
    names, columns, is_tuple = _columns(samples)
    combined = [_torch_combine(n, c) for n, c in zip(names, columns, strict=True)]
    if is_tuple:
        return tuple(combined)
    return dict(zip(names, combined, strict=True))


Collate = Callable[[Sequence[Any]], Any]


def batch_samples(batch: Any) -> int:
    """Samples in a collated batch (a dict, tuple or list of columns, or a tensor): the length
    of its first column (the benchmark's and the autotune trials' count)."""
    if isinstance(batch, dict):
        batch = next(iter(batch.values()), [])
    elif isinstance(batch, tuple | list) and batch and hasattr(batch[0], "__len__"):
        batch = batch[0]
    return len(batch)
