"""The simplejpeg fast path: same pixels as PIL for every array spec, and the PIL fallback."""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys

import numpy as np
import PIL.Image
import pytest
import torch
import webdataset.autodecode as wad

from wds_cloud.core import jpegdecode
from wds_cloud.core.decode import Decoder, DecodingError, decode
from wds_cloud.core.imagedecode import ImageHandler, imagehandler, imagespecs
from wds_cloud.errors import ConfigError

simplejpeg = pytest.importorskip("simplejpeg")

ARRAY_SPECS = sorted(s for s, (atype, _, _) in imagespecs.items() if atype != "pil")
SIZES = [(1, 1), (7, 13), (8, 8), (16, 16), (17, 33), (64, 64), (100, 3), (3, 100), (256, 256)]
PIL_OPTIONS = {
    "q90-444": {"quality": 90, "subsampling": 0},
    "q75-422": {"quality": 75, "subsampling": 1},
    "q75-420": {"quality": 75, "subsampling": 2},
    "q30-420": {"quality": 30, "subsampling": 2},
    "q100-444-optimize": {"quality": 100, "subsampling": 0, "optimize": True},
    "q85-420-progressive": {"quality": 85, "subsampling": 2, "progressive": True},
    "q85-444-progressive": {"quality": 85, "subsampling": 0, "progressive": True},
}
SJ_SUBSAMPLINGS = ["444", "422", "420", "440", "411"]


def _pixels(h: int, w: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng([seed, h, w])
    grad = np.add.outer(np.arange(h), np.arange(w)).astype(np.int16)[:, :, None]
    noise = rng.integers(0, 96, (h, w, 3), dtype=np.int16)
    return np.clip(grad * 2 + noise, 0, 255).astype(np.uint8)


def _pil_jpeg(array: np.ndarray, mode: str | None = None, **options: object) -> bytes:
    stream = io.BytesIO()
    PIL.Image.fromarray(array).convert(mode or ("L" if array.ndim == 2 else "RGB")).save(
        stream, format="JPEG", **options
    )
    return stream.getvalue()


def _jpegs() -> dict[str, bytes]:
    out = {}
    for h, w in SIZES:
        rgb = _pixels(h, w, 1)
        for name, options in PIL_OPTIONS.items():
            out[f"{h}x{w}-pil-{name}"] = _pil_jpeg(rgb, **options)
        for sub in SJ_SUBSAMPLINGS:
            out[f"{h}x{w}-sj-{sub}"] = simplejpeg.encode_jpeg(rgb, 85, "RGB", sub)
        out[f"{h}x{w}-gray"] = _pil_jpeg(rgb[:, :, 1].copy(), quality=90)
        out[f"{h}x{w}-gray-progressive"] = _pil_jpeg(rgb[:, :, 2].copy(), progressive=True)
    exif = PIL.Image.Exif()
    exif[0x0112] = 6  # orientation: neither library applies it
    stream = io.BytesIO()
    PIL.Image.fromarray(_pixels(40, 30, 2)).save(stream, format="JPEG", exif=exif, dpi=(300, 300))
    out["40x30-exif-dpi"] = stream.getvalue()
    return out


JPEGS = _jpegs()
FALLBACKS = {
    "cmyk": _pil_jpeg(_pixels(24, 20, 3), "CMYK"),
    "cmyk-progressive": _pil_jpeg(_pixels(33, 17, 3), "CMYK", progressive=True),
}


def _pil_path(spec: str, data: bytes) -> object:
    return ImageHandler(spec, jpeg_decoder="pil")._decode(data)


def _assert_same(ours: object, theirs: object) -> None:
    assert type(ours) is type(theirs)
    if isinstance(ours, torch.Tensor):
        assert isinstance(theirs, torch.Tensor)
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        assert ours.is_contiguous()
        assert torch.equal(ours, theirs)
    else:
        assert isinstance(ours, np.ndarray) and isinstance(theirs, np.ndarray)
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("name", sorted(JPEGS))
def test_fast_path_pixels_equal_pil(name: str) -> None:
    data = JPEGS[name]
    image = PIL.Image.open(io.BytesIO(data))
    gray = image.mode == "L"
    for mode in ("rgb", "rgba", "l"):
        fast = jpegdecode.decode_jpeg(data, mode)
        if mode == "l" and not gray:
            assert fast is None  # colour to L: PIL's weights, not libjpeg's Y
            continue
        assert fast is not None, f"{name} {mode}: the fast path did not take it"
        assert fast.flags.c_contiguous and fast.flags.writeable
        np.testing.assert_array_equal(fast, np.asarray(image.convert(mode.upper())))


@pytest.mark.parametrize("spec", ARRAY_SPECS)
def test_every_array_spec_equals_pil_path_and_webdataset(spec: str) -> None:
    fast = ImageHandler(spec, jpeg_decoder="simplejpeg")
    reference = wad.ImageHandler(spec)
    for name, data in {**JPEGS, **FALLBACKS}.items():
        ours = fast("." + "jpg", data)
        _assert_same(ours, _pil_path(spec, data))
        if name.startswith(("64x64", "17x33", "1x1", "cmyk")):  # webdataset itself: a subset
            _assert_same(ours, reference(".jpg", data))


@pytest.mark.parametrize("name", sorted(FALLBACKS))
def test_cmyk_falls_back_to_pil(name: str) -> None:
    data = FALLBACKS[name]
    assert PIL.Image.open(io.BytesIO(data)).mode == "CMYK"
    for mode in ("rgb", "rgba", "l"):
        assert jpegdecode.decode_jpeg(data, mode) is None
    # simplejpeg would decode CMYK to RGB, but not with PIL's conversion: that is why
    different = simplejpeg.decode_jpeg(data, "RGB")
    assert not np.array_equal(different, _pil_path("rgb8", data))


def test_recoverable_corruption_falls_back_to_pil() -> None:
    data = JPEGS["64x64-pil-q90-444"]
    sof = data.index(b"\xff\xc0")
    damaged = data[:sof] + b"\x00\x00\x00" + data[sof:]  # libjpeg: "extraneous bytes" warning
    assert jpegdecode.decode_jpeg(damaged, "rgb") is None
    with pytest.raises(ValueError, match="extraneous bytes"):
        simplejpeg.decode_jpeg(damaged)
    ours = ImageHandler("rgb8", jpeg_decoder="simplejpeg")(".jpg", damaged)
    _assert_same(ours, _pil_path("rgb8", damaged))
    _assert_same(ours, wad.ImageHandler("rgb8")(".jpg", damaged))


def test_truncated_jpeg_raises_as_before() -> None:
    data = JPEGS["64x64-pil-q90-444"][:300]
    assert jpegdecode.decode_jpeg(data, "rgb") is None
    for jpeg_decoder in ("simplejpeg", "pil"):
        with pytest.raises(DecodingError) as info:
            Decoder([ImageHandler("rgb8", jpeg_decoder=jpeg_decoder)])(
                {"__key__": "k", "jpg": data}
            )
        assert isinstance(info.value.__cause__, OSError)


def test_non_jpeg_data_under_jpg_goes_to_pil(images: dict[str, bytes]) -> None:
    png = images["png"]
    assert jpegdecode.decode_jpeg(png, "rgb") is None
    ours = ImageHandler("torchrgb", jpeg_decoder="simplejpeg")(".jpg", png)
    _assert_same(ours, wad.ImageHandler("torchrgb")(".jpg", png))


@pytest.mark.parametrize("spec", ["pil", "pill", "pilrgb", "pilrgba"])
def test_pil_specs_stay_on_pil(spec: str) -> None:
    data = JPEGS["40x30-exif-dpi"]
    ours = ImageHandler(spec, jpeg_decoder="simplejpeg")(".jpg", data)
    theirs = wad.ImageHandler(spec)(".jpg", data)
    assert isinstance(ours, PIL.Image.Image)
    assert ours.mode == theirs.mode and ours.tobytes() == theirs.tobytes()
    assert ours.info["dpi"] == theirs.info["dpi"] and "exif" in ours.info


def test_choice_argument_environment_and_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(jpegdecode.ENV_VAR, raising=False)
    assert ImageHandler("rgb8").jpeg_decoder == "simplejpeg"  # auto, installed
    assert ImageHandler("rgb8", jpeg_decoder="PIL").jpeg_decoder == "pil"
    monkeypatch.setenv(jpegdecode.ENV_VAR, "pil")
    assert ImageHandler("rgb8").jpeg_decoder == "pil"
    assert not ImageHandler("rgb8")._decode.fast
    assert imagehandler("rgb8", jpeg_decoder="auto").jpeg_decoder == "simplejpeg"
    monkeypatch.setenv(jpegdecode.ENV_VAR, "turbo")
    with pytest.raises(ConfigError, match="WDS_CLOUD_JPEG_DECODER='turbo'"):
        decode("rgb8")
    with pytest.raises(ConfigError, match="jpeg_decoder='x'"):
        ImageHandler("rgb8", jpeg_decoder="x")


def test_environment_reaches_decode_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    data = FALLBACKS["cmyk"]
    monkeypatch.setenv(jpegdecode.ENV_VAR, "pil")
    stage = decode("rgb8")
    monkeypatch.setenv(jpegdecode.ENV_VAR, "simplejpeg")
    fast_stage = decode("rgb8")
    sample = {"__key__": "k", "jpg": JPEGS["17x33-sj-420"], "cmyk.jpg": data}
    a, b = next(iter(stage([dict(sample)]))), next(iter(fast_stage([dict(sample)])))
    for key in ("jpg", "cmyk.jpg"):
        _assert_same(a[key], b[key])


def test_fast_decoder_pickles() -> None:
    handler = ImageHandler("torchrgb8", jpeg_decoder="simplejpeg")
    clone = pickle.loads(pickle.dumps(handler))
    assert clone._decode.fast and clone.jpeg_decoder == "simplejpeg"
    data = JPEGS["64x64-sj-422"]
    _assert_same(clone(".jpg", data), handler(".jpg", data))
    slow = pickle.loads(pickle.dumps(ImageHandler("torchrgb8", jpeg_decoder="pil")))
    assert not slow._decode.fast


def test_without_simplejpeg_auto_is_pil_and_explicit_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['simplejpeg'] = None\n"  # as if it were not installed
        "from wds_cloud.core.imagedecode import ImageHandler\n"
        "from wds_cloud.errors import MissingDependencyError\n"
        "print(ImageHandler('rgb8').jpeg_decoder)\n"
        "try:\n    ImageHandler('rgb8', jpeg_decoder='simplejpeg')\n"
        "except MissingDependencyError as exc:\n    print(exc.extra, exc)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != jpegdecode.ENV_VAR}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    ).stdout.splitlines()
    assert out[0] == "pil"
    assert out[1].startswith("jpeg ") and "pip install 'wds_cloud[jpeg]'" in out[1]
