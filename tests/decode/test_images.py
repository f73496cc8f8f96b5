"""Image specs: dtype, shape, range, numpy/torch agreement, pixel equality with webdataset."""

from __future__ import annotations

import pickle

import numpy as np
import PIL.Image
import pytest
import torch
import webdataset.autodecode as wad

from wds_cloud.core.decode import Decoder, DecodingError, decode
from wds_cloud.core.imagedecode import IMAGE_EXTENSIONS, ImageHandler, imagehandler, imagespecs
from wds_cloud.errors import ConfigError, SampleError

CHANNELS = {"l": None, "rgb": 3, "rgba": 4}


def _decode_one(spec: str, ext: str, data: bytes):
    return Decoder([ImageHandler(spec)])({"__key__": "k", ext: data})[ext]


@pytest.mark.parametrize("spec", sorted(imagespecs))
@pytest.mark.parametrize("ext", ["png", "jpg", "gray.png", "rgba.png", "ppm"])
def test_spec_matches_webdataset(spec: str, ext: str, images: dict[str, bytes]) -> None:
    data = images[ext]
    ours = _decode_one(spec, ext, data)
    theirs = wad.ImageHandler(spec)("." + ext, data)
    assert type(ours) is type(theirs)
    if isinstance(ours, PIL.Image.Image):
        assert ours.mode == theirs.mode and ours.size == theirs.size
        assert ours.tobytes() == theirs.tobytes()
    elif isinstance(ours, torch.Tensor):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        assert torch.equal(ours, theirs)
    else:
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("spec", sorted(imagespecs))
def test_spec_dtype_shape_range(spec: str, images: dict[str, bytes]) -> None:
    atype, etype, mode = imagespecs[spec]
    out = _decode_one(spec, "png", images["png"])
    if atype == "pil":
        assert isinstance(out, PIL.Image.Image)
        assert out.mode == mode.upper()
        assert out.size == (9, 12)
        return
    channels = CHANNELS[mode]
    if atype == "numpy":
        assert isinstance(out, np.ndarray)
        expected = (12, 9) if channels is None else (12, 9, channels)
        assert out.shape == expected
        array = out
    else:
        assert isinstance(out, torch.Tensor)
        expected = (12, 9) if channels is None else (channels, 12, 9)
        assert tuple(out.shape) == expected
        array = out.numpy()
    if etype == "uint8":
        assert array.dtype == np.uint8
    else:
        assert array.dtype == np.float32
        assert array.min() >= 0.0 and array.max() <= 1.0
        assert array.max() > 0.5  # really scaled to [0, 1], not [0, 1/255]


@pytest.mark.parametrize(
    ("np_spec", "torch_spec"),
    [("l8", "torchl8"), ("rgb8", "torchrgb8"), ("rgba8", "torchrgba8"), ("l", "torchl"),
     ("rgb", "torchrgb"), ("rgb", "torch"), ("rgba", "torchrgba")],
)  # fmt: skip
def test_numpy_and_torch_agree(np_spec: str, torch_spec: str, images: dict[str, bytes]) -> None:
    a = _decode_one(np_spec, "jpg", images["jpg"])
    t = _decode_one(torch_spec, "jpg", images["jpg"])
    if a.ndim == 3:
        a = a.transpose(2, 0, 1)
    np.testing.assert_array_equal(a, t.numpy())


def test_pixel_values_exact(images: dict[str, bytes]) -> None:
    rgb8 = _decode_one("rgb8", "png", images["png"])
    rng = np.random.default_rng(7)
    np.testing.assert_array_equal(rgb8, rng.integers(0, 256, size=(12, 9, 3), dtype=np.uint8))
    rgb = _decode_one("rgb", "png", images["png"])
    np.testing.assert_array_equal(rgb, rgb8.astype(np.float32) / 255.0)


def test_extension_case_insensitive_and_nonimages_pass(images: dict[str, bytes]) -> None:
    d = Decoder([ImageHandler("rgb8")])
    out = d({"__key__": "k", "PNG": images["png"], "bin": b"\x00\x01", "txt": b"x"})
    assert out["PNG"].shape == (12, 9, 3)
    assert out["bin"] == b"\x00\x01"
    assert out["txt"] == "x"


def test_custom_extensions(images: dict[str, bytes]) -> None:
    d = Decoder([ImageHandler("l8", extensions=["raw"])])
    out = d({"raw": images["png"], "png": images["png"]})
    assert out["raw"].shape == (12, 9)
    assert out["png"] == images["png"]


def test_unknown_spec_is_config_error() -> None:
    with pytest.raises(ConfigError, match="Unknown imagespec"):
        ImageHandler("RGB8")  # case-sensitive, as in webdataset
    with pytest.raises(ValueError):
        decode("nope")
    assert isinstance(imagehandler("pil"), ImageHandler)
    assert "jpg" in IMAGE_EXTENSIONS and "webp" in IMAGE_EXTENSIONS


def test_corrupt_image_names_field_key_url(images: dict[str, bytes]) -> None:
    sample = {"__key__": "s1", "__url__": "shard-0.tar", "jpg": images["jpg"][:40]}
    with pytest.raises(DecodingError) as info:
        Decoder([ImageHandler("rgb")])(sample)
    err = info.value
    assert isinstance(err, SampleError) and isinstance(err, ValueError)
    assert err.key == "s1" and err.url == "shard-0.tar" and err.k == "jpg"
    assert "'jpg'" in str(err) and "shard-0.tar" in str(err) and "s1" in str(err)
    assert err.__cause__ is not None


def test_image_handler_pickles(images: dict[str, bytes]) -> None:
    d = pickle.loads(pickle.dumps(Decoder([ImageHandler("torchrgb8")])))
    out = d({"png": images["png"]})["png"]
    assert out.shape == (3, 12, 9)
