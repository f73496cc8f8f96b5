"""Decoding JPEGs straight into batches (``core/batchdecode.py``): differential against
``.decode(spec)`` then the same collation, over generated JPEGs, and through make_loader."""

from __future__ import annotations

import io
import random
import re
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import PIL.Image
import pytest
import torch

from tests.decode.test_jpeg_fast import FALLBACKS, JPEGS, _pil_jpeg, _pixels
from wds_cloud.core.batchdecode import (
    BATCH_SPECS,
    Buffers,
    PendingImage,
    batch_decode,
    can_batch_decode,
    decode_columns,
)
from wds_cloud.core.collate import array_rows_view, torch_collate
from wds_cloud.core.decode import DecodingError, decode
from wds_cloud.pytorch.builder import make_loader
from wds_cloud.pytorch.threadloader import inner_columns

pytest.importorskip("simplejpeg")

SPECS = sorted(BATCH_SPECS)


def _generated(n: int, seed: int) -> list[bytes]:
    """``n`` JPEGs: in runs of one size (so batches share a size), grayscale, CMYK,
    progressive and subsampled ones, and damaged ones (truncated, bytes flipped, header only)."""
    rng = random.Random(seed)
    out: list[bytes] = []
    sizes = [(8, 8), (16, 16), (9, 17), (1, 1), (24, 7)]
    for i in range(n):
        if i % 32 == 0:
            run = rng.choice(sizes)  # runs of one size, so that most batches can be stacked
        h, w = run if rng.random() < 0.95 else rng.choice(sizes)
        rgb = _pixels(h, w, i)
        kind = rng.random()
        if kind < 0.15:
            data = _pil_jpeg(rgb[:, :, 0].copy(), quality=rng.choice([50, 90]))
        elif kind < 0.2:
            data = _pil_jpeg(rgb, "CMYK")
        else:
            data = _pil_jpeg(
                rgb,
                quality=rng.choice([30, 75, 95]),
                subsampling=rng.choice([0, 1, 2]),
                progressive=rng.random() < 0.3,
            )
        damage = rng.random()
        if damage < 0.01:
            data = data[: rng.randrange(2, len(data))]  # truncated
        elif damage < 0.02:
            flip = bytearray(data)
            at = rng.randrange(len(flip) // 2, len(flip))
            flip[at] ^= 0xFF
            data = bytes(flip)
        out.append(data)
    return out


def _samples(images: list[bytes], start: int) -> list[dict[str, Any]]:
    return [
        {"__key__": f"k{start + i:05d}", "__url__": "shard-0.tar", "jpg": data, "cls": b"7"}
        for i, data in enumerate(images)
    ]


def _outcome(f: Any) -> Any:
    try:
        return "ok", f()
    except DecodingError as exc:
        message = re.sub(r" at 0x[0-9a-f]+", "", str(exc))  # PIL names its stream object
        return "error", (type(exc.__cause__), message, exc.key, exc.url, exc.k)


def _eager(spec: str, samples: list[dict[str, Any]]) -> Any:
    stage = decode(spec)
    rows = [(s["jpg"], s["cls"]) for s in stage(iter(samples))]
    return inner_columns(rows)


def _deferred(spec: str, samples: list[dict[str, Any]]) -> Any:
    stage = batch_decode(spec)
    rows = [(s["jpg"], s["cls"]) for s in stage(iter(samples))]
    return decode_columns(inner_columns)(rows)


def _same(got: Any, want: Any) -> None:
    """The deferred batch equals the eager one: the same images, stacked when they can be."""
    np.testing.assert_array_equal(got[1], want[1])
    images = want[0]
    if all(a.shape == images[0].shape for a in images):
        assert isinstance(got[0], np.ndarray) and got[0].dtype == np.uint8
        assert got[0].flags.c_contiguous
        np.testing.assert_array_equal(got[0], np.stack(images))
    else:
        assert isinstance(got[0], list) and len(got[0]) == len(images)
        for a, b in zip(got[0], images, strict=True):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("spec", SPECS)
def test_generated_batches_equal_decode_then_collate(spec: str) -> None:
    """3,000 generated JPEGs per spec in batches of 1..16: the same pixels, or the same error
    (cause, message, key, URL, field) as decoding each sample first."""
    images = _generated(3000, seed=len(spec))
    rng = random.Random(spec)
    at, batches, stacked, errors = 0, 0, 0, 0
    while at < len(images):
        n = rng.randint(1, 16)
        samples = _samples(images[at : at + n], at)
        want = _outcome(lambda s=samples: _eager(spec, s))
        got = _outcome(lambda s=samples: _deferred(spec, s))
        assert got[0] == want[0], (spec, at)
        if want[0] == "ok":
            _same(got[1], want[1])
            stacked += isinstance(got[1][0], np.ndarray)
        else:
            assert got[1] == want[1]
            errors += 1
        batches += 1
        at += n
    assert stacked > batches // 4 and errors > 0  # both kinds of batches and failures met


@pytest.mark.parametrize("spec", SPECS)
def test_every_fast_path_case_and_fallback(spec: str) -> None:
    """The fast path's verified cases (sizes, subsamplings, progressive, EXIF) and the PIL
    fallbacks (CMYK), one batch per image size."""
    by_size: dict[tuple[int, ...], list[bytes]] = {}
    for data in [*JPEGS.values(), *FALLBACKS.values()]:
        with PIL.Image.open(io.BytesIO(data)) as img:
            by_size.setdefault(img.size, []).append(data)
    for images in by_size.values():
        samples = _samples(images, 0)
        _same(_deferred(spec, samples), _eager(spec, samples))


def test_only_jpegs_wait_for_the_batch() -> None:
    png = io.BytesIO()
    PIL.Image.fromarray(_pixels(8, 8, 5)).save(png, format="PNG")
    jpeg = _pil_jpeg(_pixels(8, 8, 5))
    stage = batch_decode("rgb8")
    out = list(stage(iter([{"__key__": "a", "__url__": "u", "jpg": jpeg, "png": png.getvalue()}])))
    assert type(out[0]["jpg"]) is PendingImage and isinstance(out[0]["png"], np.ndarray)
    assert (out[0]["jpg"].key, out[0]["jpg"].url, out[0]["jpg"].field) == ("a", "u", "jpg")
    # a column mixing a decoded image with pending ones is decoded one by one
    mixed = decode_columns(inner_columns)([(out[0]["png"],), (out[0]["jpg"],)])
    assert isinstance(mixed[0], list) and all(isinstance(a, np.ndarray) for a in mixed[0])


def test_can_batch_decode() -> None:
    assert can_batch_decode("rgb8") and can_batch_decode("l8") and can_batch_decode("rgba8")
    assert not can_batch_decode("torchrgb8") and not can_batch_decode("rgb")
    assert not can_batch_decode(("rgb8",)) and not can_batch_decode(None)
    assert not can_batch_decode("rgb8", map=abs)  # a map must see decoded images
    assert not can_batch_decode("rgb8", shuffle_buffer=1)  # a main-process shuffle


def test_array_rows_view() -> None:
    base = np.arange(5 * 4 * 3, dtype=np.uint8).reshape(5, 4, 3).copy()  # owns its memory
    rows = list(base)
    view = array_rows_view(rows[1:4])
    assert view is not None and np.shares_memory(view, base)
    np.testing.assert_array_equal(view, base[1:4])
    assert array_rows_view([rows[0], rows[2]]) is None  # not consecutive
    assert array_rows_view([rows[1], rows[0]]) is None  # not in order
    assert array_rows_view([rows[0], base.copy()[1]]) is None  # two arrays
    assert array_rows_view([rows[0]]) is None
    reshaped = np.arange(60, dtype=np.uint8).reshape(5, 4, 3)  # rows of a view: copied
    assert array_rows_view(list(reshaped)[:2]) is None
    strided = np.arange(40, dtype=np.uint8).reshape(10, 4)[::2]
    assert array_rows_view(list(strided)[:3]) is None  # rows of a non-contiguous array
    # torch_collate of unbatched numpy rows: the batch again, without a copy
    batch = torch_collate([(r, i) for i, r in enumerate(rows)])
    assert isinstance(batch[0], torch.Tensor) and np.shares_memory(batch[0].numpy(), base)
    assert torch.equal(batch[0], torch.from_numpy(base)) and batch[1].tolist() == [0, 1, 2, 3, 4]


def _tar(path: Path, members: list[tuple[str, bytes]]) -> str:
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return str(path)


def _image_shards(tmp_path: Path) -> list[str]:
    """Same-sized images of every kind: YCbCr, grayscale, CMYK (PIL), PNG (not a JPEG)."""
    rng = random.Random(3)
    shards = []
    for s in range(3):
        members = []
        for i in range(40):
            rgb = _pixels(12, 10, s * 100 + i)
            kind = rng.random()
            if kind < 0.1:
                png = io.BytesIO()
                PIL.Image.fromarray(rgb).save(png, format="PNG")
                name, data = "png", png.getvalue()
            elif kind < 0.2:
                name, data = "jpg", _pil_jpeg(rgb, "CMYK")
            elif kind < 0.35:
                name, data = "jpg", _pil_jpeg(rgb[:, :, 1].copy())
            else:
                name, data = "jpg", _pil_jpeg(rgb, quality=80)
            members += [(f"s{s}-{i:03d}.{name}", data), (f"s{s}-{i:03d}.cls", str(i).encode())]
        shards.append(_tar(tmp_path / f"img-{s}.tar", members))
    return shards


@pytest.mark.parametrize("spec", ["rgb8", "l8"])
@pytest.mark.parametrize("shuffle", [0, 16])
def test_make_loader_threads_equal_processes(tmp_path: Path, spec: str, shuffle: int) -> None:
    shards = _image_shards(tmp_path)
    kw: dict[str, Any] = {
        "batch_size": 8,
        "num_workers": 2,
        "decode": spec,
        "to_tuple": "jpg;png cls",
        "shuffle_buffer": shuffle,
        "seed": 5,
    }
    want = list(make_loader(shards, executor="processes", **kw))
    got = list(make_loader(shards, executor="threads", **kw))
    assert len(got) == len(want) == 15
    for a, b in zip(got, want, strict=True):
        assert a[0].dtype == b[0].dtype == torch.uint8 and a[0].is_contiguous()
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_make_loader_threads_corrupt_jpeg_names_key_and_url(tmp_path: Path) -> None:
    """A JPEG whose header reads but whose data is damaged fails in the batch with the error
    ``.decode()`` gives: the field, the sample key and the shard URL."""
    good = _pil_jpeg(_pixels(12, 10, 1))
    bad = good[:30] + b"\x00" * 40  # SOI and a header start, then nothing decodable
    shard = _tar(
        tmp_path / "bad.tar",
        [("a.jpg", good), ("a.cls", b"1"), ("b.jpg", bad), ("b.cls", b"2")],
    )
    errors = []
    for executor in ("threads", "processes"):
        loader = make_loader(
            [shard],
            batch_size=2,
            num_workers=1,
            decode="rgb8",
            to_tuple="jpg cls",
            executor=executor,
        )
        with pytest.raises(DecodingError) as info:
            list(loader)
        errors.append(info.value)
    threads, processes = errors
    assert (threads.key, threads.url, threads.k) == ("b", shard, "jpg")
    # a worker process's error comes back as its message (torch re-raises the class with it)
    assert str(threads) in str(processes)


def test_buffers_reuse_only_arrays_nothing_holds() -> None:
    pool = Buffers()
    a = pool.take((2, 3))
    b = pool.take((2, 3))
    assert b is not a  # ``a`` is held here
    a_at, b_at = a.ctypes.data, b.ctypes.data
    view, tensor = a[1:], torch.from_numpy(b)
    del a, b
    c = pool.take((2, 3))  # a view holds one, a tensor the other
    assert c.ctypes.data not in (a_at, b_at)
    del view
    d = pool.take((2, 3))
    assert d.ctypes.data == a_at  # nothing holds it any more
    del tensor
    assert pool.take((2, 3)).ctypes.data == b_at
    assert pool.take((4, 3)).shape == (4, 3)  # another shape: another array
    for _ in range(3 * Buffers.keep):
        pool.take((9,))
    assert len(pool.arrays) <= Buffers.keep


def test_held_batches_are_never_overwritten(tmp_path: Path) -> None:
    """Batches kept by the caller (more than a reader's pool keeps) keep their pixels while
    later batches are decoded; batches dropped as they come give the same pixels."""
    shards = _image_shards(tmp_path)
    kw: dict[str, Any] = {
        "batch_size": 4,
        "num_workers": 2,
        "decode": "rgb8",
        "to_tuple": "jpg;png cls",
        "shuffle_buffer": 0,
    }
    held = list(make_loader(shards, executor="threads", **kw))
    assert len(held) == 30 and len({b[0].data_ptr() for b in held}) == 30
    dropped = [b[0].clone() for b in make_loader(shards, executor="threads", **kw)]
    want = list(make_loader(shards, executor="processes", **kw))
    for a, b, c in zip(held, dropped, want, strict=True):
        assert torch.equal(a[0], c[0]) and torch.equal(b, c[0])


def test_profiles_name_the_decode_into_batches() -> None:
    """A profile charges the readers' decoding to ``decode (into batches)``, which the verdict
    reads as decode-bound (docs/pytorch.md)."""
    from wds_cloud.observe import profile

    label = profile._rule(PendingImage.decode_into.__code__)
    assert label == "decode (into batches)" and label.startswith("decode")
