"""Collation: shapes and types like webdataset's default_collation_fn; torch_collate."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
import torch
import webdataset.filters as wf

from wds_cloud.core.collate import default_collation_fn, rows_view, torch_collate
from wds_cloud.errors import SampleError


def _tuples(n: int = 4) -> list[tuple[object, ...]]:
    return [
        (np.full((2, 3), i, dtype=np.float32), i, float(i) / 2, f"s{i}", torch.full((3,), i))
        for i in range(n)
    ]


def test_tuples_like_webdataset() -> None:
    samples = _tuples()
    ours = default_collation_fn(samples)
    theirs = wf.default_collation_fn(samples)
    assert isinstance(ours, tuple) and len(ours) == 5
    arr, ints, floats, strs, tens = ours
    assert arr.shape == (4, 2, 3) and arr.dtype == np.float32
    np.testing.assert_array_equal(arr, theirs[0])
    assert isinstance(ints, np.ndarray) and ints.tolist() == [0, 1, 2, 3]
    np.testing.assert_array_equal(ints, theirs[1])
    assert floats.dtype == np.float64
    assert strs == ["s0", "s1", "s2", "s3"] == theirs[3]
    assert isinstance(tens, torch.Tensor) and tens.shape == (4, 3)
    assert torch.equal(tens, theirs[4])


def test_dicts_keep_keys_in_order() -> None:
    samples = [{"__key__": f"k{i}", "img": np.zeros((2, 2)), "cls": i} for i in range(3)]
    batch = default_collation_fn(samples)
    assert list(batch) == ["__key__", "img", "cls"]
    assert batch["__key__"] == ["k0", "k1", "k2"]
    assert batch["img"].shape == (3, 2, 2)
    assert batch["cls"].tolist() == [0, 1, 2]


def test_combine_flags() -> None:
    samples = _tuples(2)
    arr, ints, _, _, tens = default_collation_fn(samples, combine_tensors=False)
    assert isinstance(arr, list) and isinstance(tens, list) and isinstance(ints, np.ndarray)
    _, ints, floats, _, _ = default_collation_fn(samples, combine_scalars=False)
    assert ints == [0, 1] and floats == [0.0, 0.5]


def test_lists_count_as_tuples() -> None:
    assert default_collation_fn([[1, "a"], [2, "b"]])[1] == ["a", "b"]


def test_errors() -> None:
    with pytest.raises(SampleError, match="different shapes"):
        default_collation_fn([(np.zeros(2),), (np.zeros(3),)])
    with pytest.raises(SampleError, match="different shapes"):
        default_collation_fn([(torch.zeros(2),), (torch.zeros(3),)])
    with pytest.raises(SampleError, match="different keys"):
        default_collation_fn([{"a": 1}, {"b": 1}])
    with pytest.raises(SampleError, match="different lengths"):
        default_collation_fn([(1, 2), (1,)])
    with pytest.raises(SampleError, match="empty"):
        default_collation_fn([])
    with pytest.raises(SampleError, match="dicts or tuples"):
        default_collation_fn([1, 2])


def test_torch_collate() -> None:
    samples = [
        {
            "__key__": f"k{i}",
            "img": np.full((2, 2), i, dtype=np.uint8),
            "t": torch.ones(3) * i,
            "cls": i,
            "w": 0.5,
            "np_scalar": np.float32(i),
            "name": f"n{i}",
            "strs": np.array(["x"]),
        }
        for i in range(3)
    ]
    batch = torch_collate(samples)
    assert batch["__key__"] == ["k0", "k1", "k2"]
    assert isinstance(batch["img"], torch.Tensor) and batch["img"].dtype == torch.uint8
    assert batch["img"].shape == (3, 2, 2)
    assert batch["t"].shape == (3, 3)
    assert batch["cls"].dtype == torch.int64 and batch["cls"].tolist() == [0, 1, 2]
    assert batch["w"].dtype == torch.float32
    assert batch["np_scalar"].dtype == torch.float32
    assert batch["name"] == ["n0", "n1", "n2"]
    assert isinstance(batch["strs"], list)  # string arrays have no torch dtype
    tup = torch_collate([(np.zeros(2), 1), (np.ones(2), 2)])
    assert isinstance(tup, tuple) and tup[0].shape == (2, 2) and tup[1].tolist() == [1, 2]


# -- rows_view: torch_collate of consecutive rows of one tensor is a view, never other values


def _row_cases(rng: random.Random) -> list[tuple[str, list[Any]]]:
    dtype = rng.choice([torch.uint8, torch.int64, torch.float32, torch.bool])
    shape = tuple(rng.randint(1, 4) for _ in range(rng.randint(0, 3)))
    n = rng.randint(2, 9)
    base = (torch.rand((n + 3, *shape)) * 100).to(dtype)
    start = rng.randint(0, 3)
    rows = list(base[start : start + n])
    other = (torch.rand((n, *shape)) * 100).to(dtype)
    cases = [("consecutive", rows), ("reversed", rows[::-1])]
    cases.append(("every other", list(base)[::2]))
    cases.append(("two tensors", rows[: n // 2] + list(other)[n // 2 :]))
    cases.append(("separate tensors", [r.clone() for r in rows]))
    if shape:
        cases.append(("transposed rows", list(base.transpose(0, -1))[:n]))
    if len(shape) == 1:  # rows of a 1-d window sliding by one element overlap
        flat = base.reshape(-1)
        cases.append(("overlapping", [flat[i : i + shape[0]] for i in range(n)]))
    return cases


def test_torch_collate_rows_are_views_with_stack_values() -> None:

    rng = random.Random(5)
    viewed = copied = 0
    for _ in range(400):
        for name, values in _row_cases(rng):
            expected = torch.stack(values)
            got = torch_collate([(v,) for v in values])[0]
            assert got.dtype == expected.dtype and got.shape == expected.shape, name
            assert torch.equal(got, expected), name
            view = rows_view(values)
            if name == "consecutive":
                assert view is not None
                assert view.untyped_storage().data_ptr() == values[0].untyped_storage().data_ptr()
            if view is None:
                copied += 1
            else:
                viewed += 1
            if name in ("reversed", "two tensors", "separate tensors"):
                assert view is None, name
    assert viewed > 400 and copied > 400


def test_rows_view_leaves_autograd_to_stack() -> None:

    base = torch.rand(4, 3, requires_grad=True)
    rows = list(base)
    assert rows_view(rows) is None
    torch_collate([(r,) for r in rows])[0].sum().backward()
    assert base.grad is not None and torch.equal(base.grad, torch.ones(4, 3))


def _tensor_columns(rng: random.Random) -> list[list[Any]]:
    dtypes = [torch.uint8, torch.int16, torch.int64, torch.float16, torch.float32]
    dtypes += [torch.float64, torch.bool, torch.complex64, torch.bfloat16]
    dtype = rng.choice(dtypes)
    shape = tuple(rng.randint(1, 5) for _ in range(rng.randint(0, 3)))
    n = rng.randint(1, 6)
    base = (torch.randn((n, *shape), dtype=torch.float64) * 50).to(dtype)
    columns = [list(base), [t.clone() for t in base]]
    if len(shape) >= 2:
        columns.append([t.transpose(0, 1) for t in base])  # non-contiguous values
    if dtype == torch.complex64:
        columns.append([t.conj() for t in base])  # conjugate bit set
    if dtype.is_floating_point and dtype != torch.bfloat16:
        columns.append([t.clone().requires_grad_() for t in base])
    if n > 1 and dtype not in (torch.bool, torch.complex64):
        columns.append([base[0].to(torch.float64), *base[1:]])  # mixed dtypes: promoted
    return columns


def test_stack_tensors_matches_torch_stack() -> None:
    from wds_cloud.core.collate import stack_tensors

    rng = random.Random(11)
    for _ in range(600):
        for values in _tensor_columns(rng):
            expected = torch.stack(values)
            got = stack_tensors(values)
            assert got.dtype == expected.dtype and got.shape == expected.shape
            assert got.is_contiguous() and got.requires_grad == expected.requires_grad
            assert torch.equal(got.resolve_conj(), expected.resolve_conj())
            for batch in (torch_collate([(v,) for v in values])[0],
                          default_collation_fn([(v,) for v in values])[0]):  # fmt: skip
                assert torch.equal(batch.resolve_conj(), expected.resolve_conj())
