"""tenbin: byte compatibility with webdataset and clear errors on bad buffers."""

from __future__ import annotations

import numpy as np
import pytest
import webdataset.tenbin as wtb

from wds_cloud.core import tenbin

ARRAYS = [
    np.arange(24, dtype=np.float32).reshape(2, 3, 4),
    np.array([1, -2, 3], dtype=np.int64),
    np.zeros((0, 5), dtype=np.uint8),
    np.array(3.5, dtype=np.float64),
]


def test_non_contiguous_input_round_trips() -> None:
    a = np.arange(7, dtype=np.int16)[::2]
    (out,) = tenbin.decode_buffer(tenbin.encode_buffer([a]))
    np.testing.assert_array_equal(out, a)


def test_bytes_identical_to_webdataset() -> None:
    ours = tenbin.encode_buffer(ARRAYS)
    theirs = bytes(wtb.encode_buffer(list(ARRAYS)))
    assert ours == theirs


def test_cross_decode() -> None:
    arrays = ARRAYS[:3]  # webdataset cannot decode 0-d arrays (reshape(*()) fails)
    for decoded in (
        tenbin.decode_buffer(bytes(wtb.encode_buffer(list(arrays)))),
        wtb.decode_buffer(tenbin.encode_buffer(arrays)),
        tenbin.decode_buffer(tenbin.encode_buffer(arrays)),
    ):
        assert len(decoded) == len(arrays)
        for got, want in zip(decoded, arrays, strict=True):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)


def test_zero_dim_round_trips() -> None:
    (out,) = tenbin.decode_buffer(tenbin.encode_buffer([np.array(3.5)]))
    assert out.shape == () and out == 3.5


def test_uint32_and_infos() -> None:
    a = np.array([1, 2**32 - 1], dtype=np.uint32)
    buf = tenbin.encode_buffer([a], infos=["label"])
    (out,) = tenbin.decode_buffer(buf)
    assert out.dtype == np.uint32
    np.testing.assert_array_equal(out, a)


def test_errors_name_the_problem() -> None:
    buf = tenbin.encode_buffer([np.ones(3, dtype=np.float32)])
    with pytest.raises(ValueError, match="bad magic at byte offset 0"):
        tenbin.decode_buffer(b"x" + buf[1:])
    with pytest.raises(ValueError, match="bad length"):
        tenbin.decode_buffer(buf[:-64])
    with pytest.raises(ValueError, match="without data chunk"):
        tenbin.decode_buffer(buf[:64])
    with pytest.raises(ValueError, match="unsupported dtype"):
        tenbin.encode_buffer([np.array(["a"])])
    with pytest.raises(ValueError, match="infos"):
        tenbin.encode_buffer([np.ones(1)], infos=["a", "b"])
