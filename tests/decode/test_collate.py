"""Collation: shapes and types like webdataset's default_collation_fn; torch_collate."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import webdataset.filters as wf

from wds_cloud.core.collate import default_collation_fn, torch_collate
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
