"""Every default encoder, round-tripped through a decoder written here (PIL, numpy, json...)."""

from __future__ import annotations

import gzip
import io
import json
import pickle
import zipfile
from typing import Any

import cbor2
import msgpack
import numpy as np
import pytest
from PIL import Image

from wds_cloud.errors import ConfigError, SampleError
from wds_cloud.writing.encoders import encode_value, make_encoder, make_handlers

HANDLERS = make_handlers()


def enc(value: Any, field: str) -> bytes:
    return bytes(encode_value(value, field, HANDLERS, key="k"))


def pil_array(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)))


@pytest.mark.parametrize("ext", ["json", "jsn"])
def test_json(ext: str) -> None:
    value = {"a": [1, 2.5, "x"], "b": None, "n": np.int64(3), "arr": np.arange(2)}
    assert json.loads(enc(value, ext)) == {"a": [1, 2.5, "x"], "b": None, "n": 3, "arr": [0, 1]}


@pytest.mark.parametrize("ext", ["txt", "text", "transcript", "html"])
def test_text(ext: str) -> None:
    assert enc("héllo", ext).decode("utf-8") == "héllo"


@pytest.mark.parametrize("ext", ["cls", "cls2", "class", "count", "index", "inx", "id"])
def test_class_labels(ext: str) -> None:
    assert enc(7, ext) == b"7"
    assert enc(np.int32(12), ext) == b"12"


def test_class_label_rejects_float_and_bool() -> None:
    with pytest.raises(SampleError, match=r"'cls'.*float"):
        enc(1.5, "cls")
    with pytest.raises(SampleError, match="bool"):
        enc(True, "cls")


def test_npy() -> None:
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = np.load(io.BytesIO(enc(array, "npy")))
    assert out.dtype == np.float32 and np.array_equal(out, array)


def test_npz_round_trip_and_fixed_timestamps() -> None:
    value = {"a": np.arange(5), "b": np.eye(2)}
    data = enc(value, "npz")
    with np.load(io.BytesIO(data)) as npz:
        assert np.array_equal(npz["a"], value["a"]) and np.array_equal(npz["b"], value["b"])
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert [i.date_time for i in zf.infolist()] == [(1980, 1, 1, 0, 0, 0)] * 2
        assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in zf.infolist())


@pytest.mark.parametrize("ext", ["pyd", "pickle"])
def test_pickle(ext: str) -> None:
    value = {"x": (1, 2), "y": {3}}
    assert pickle.loads(enc(value, ext)) == value


@pytest.mark.parametrize("ext", ["msgpack", "mp", "msg"])
def test_msgpack(ext: str) -> None:
    value = {"a": [1, 2], "b": b"\x00\xff", "c": "s"}
    assert msgpack.unpackb(enc(value, ext)) == value


def test_cbor() -> None:
    value = {"a": [1, 2], "b": b"\x00\xff", "c": 1.5}
    assert cbor2.loads(enc(value, "cbor")) == value


def test_pth_and_tensor_images() -> None:
    torch = pytest.importorskip("torch")
    value = {"w": torch.arange(6).reshape(2, 3)}
    out = torch.load(io.BytesIO(enc(value, "pth")))
    assert torch.equal(out["w"], value["w"])
    # tensors are CHW; float in [0, 1]
    chw = torch.zeros(3, 4, 5)
    chw[1] = 1.0
    rgb = pil_array(enc(chw, "png"))
    assert rgb.shape == (4, 5, 3)
    assert (rgb[:, :, 1] == 255).all() and (rgb[:, :, 0] == 0).all()
    assert np.array_equal(np.load(io.BytesIO(enc(value["w"], "npy"))), np.arange(6).reshape(2, 3))


RNG = np.random.default_rng(0)
RGB = RNG.integers(0, 256, size=(8, 6, 3), dtype=np.uint8)
GRAY = RNG.integers(0, 256, size=(8, 6), dtype=np.uint8)


@pytest.mark.parametrize("ext", ["png", "ppm", "tiff", "tif"])
def test_lossless_images_rgb(ext: str) -> None:
    assert np.array_equal(pil_array(enc(RGB, ext)), RGB)


@pytest.mark.parametrize("ext", ["png", "pgm"])
def test_lossless_images_gray(ext: str) -> None:
    assert np.array_equal(pil_array(enc(GRAY, ext)), GRAY)
    assert np.array_equal(pil_array(enc(GRAY[:, :, None], ext)), GRAY)


def test_pbm_from_bilevel_pil_image() -> None:
    image = Image.fromarray(GRAY > 127)
    data = enc(image, "pbm")
    assert data.startswith(b"P4")
    assert np.array_equal(pil_array(data), GRAY > 127)


def test_webp_lossy_round_trip_close() -> None:
    smooth = np.tile(np.linspace(0, 255, 32, dtype=np.uint8), (32, 1))
    out = pil_array(enc(np.stack([smooth] * 3, axis=2), "webp"))
    assert out.shape == (32, 32, 3)
    assert np.abs(out.astype(int) - smooth[:, :, None]).max() < 40


@pytest.mark.parametrize("ext", ["jpg", "jpeg"])
def test_jpeg_quality_100(ext: str) -> None:
    smooth = np.tile(np.linspace(0, 255, 32, dtype=np.uint8), (32, 1))
    data = enc(smooth, ext)
    assert data[:2] == b"\xff\xd8"
    assert np.abs(pil_array(data).astype(int) - smooth).max() <= 3


def test_float_images_scale_to_uint8() -> None:
    image = np.array([[0.0, 0.5], [1.0, 0.25]], dtype=np.float64)
    # uint8(x * 255), truncated, as webdataset writes them (same bytes)
    assert pil_array(enc(image, "png")).tolist() == [[0, 127], [255, 63]]


def test_float_image_out_of_range_names_key_and_field() -> None:
    with pytest.raises(SampleError, match=r"'png'.*\[0, 1\].*key='k'"):
        enc(np.full((2, 2), 2.0), "png")


def test_bad_image_dtype_and_shape() -> None:
    with pytest.raises(SampleError, match="int64"):
        enc(np.zeros((2, 2), np.int64), "png")
    with pytest.raises(SampleError, match="shape"):
        enc(np.zeros((2, 2, 2), np.uint8), "png")


def test_pil_image_passes_through_encoder() -> None:
    image = Image.fromarray(RGB)
    assert np.array_equal(pil_array(enc(image, "png")), RGB)


def test_trailing_gz_gzips_with_zero_mtime() -> None:
    data = enc({"a": 1}, "json.gz")
    assert data[:2] == b"\x1f\x8b" and data[4:8] == b"\0\0\0\0"
    assert json.loads(gzip.decompress(data)) == {"a": 1}
    assert gzip.decompress(enc(b"raw", "bin.gz")) == b"raw"
    assert gzip.decompress(enc("s", "txt.gz")) == b"s"


def test_dispatch_on_last_extension_lowercased() -> None:
    assert np.array_equal(pil_array(enc(RGB, "seg.PNG")), RGB)


def test_bytes_and_str_pass_through_any_extension() -> None:
    assert enc(b"\x00\x01", "png") == b"\x00\x01"
    assert enc(bytearray(b"ab"), "weird") == b"ab"
    assert enc("text", "jpg") == b"text"


def test_unknown_extension_names_key_and_extension() -> None:
    with pytest.raises(SampleError, match=r"'bin'.*extension 'bin'.*int.*key='k'"):
        enc(5, "bin")


def test_encoder_false_accepts_only_bytes_and_str() -> None:
    encode = make_encoder(False)
    assert encode({"__key__": "a", "txt": "x", "bin": b"y"}) == {
        "__key__": "a",
        "txt": b"x",
        "bin": b"y",
    }
    with pytest.raises(SampleError, match=r"encoder=False.*int.*key='a'"):
        encode({"__key__": "a", "cls": 3})


def test_dict_encoder_replaces_table() -> None:
    encode = make_encoder({"Upper": lambda v: str(v).upper().encode()})
    assert encode({"__key__": "a", "upper": "already str"})["upper"] == b"already str"
    assert encode({"__key__": "a", "upper": 12.5})["upper"] == b"12.5"
    with pytest.raises(SampleError, match="no encoder for extension 'json'"):
        encode({"__key__": "a", "json": {"x": 1}})


def test_encoder_returning_non_bytes_is_an_error() -> None:
    encode = make_encoder({"x": lambda v: v})
    with pytest.raises(SampleError, match="returned int"):
        encode({"__key__": "a", "x": 3})


def test_callable_encoder_is_used_as_is() -> None:
    def upper(sample: dict[str, Any]) -> dict[str, Any]:
        return {k: (v.upper() if k == "txt" else v) for k, v in sample.items()}

    assert make_encoder(upper)({"__key__": "a", "txt": "x"})["txt"] == "X"


def test_bad_encoder_spec() -> None:
    with pytest.raises(ConfigError, match="encoder must be"):
        make_encoder(3)  # type: ignore[arg-type]
