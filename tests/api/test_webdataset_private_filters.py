"""``filters._shuffle`` and ``filters._decode`` through the webdataset facade against genuine
webdataset 1.0.2: the same order for the same ``rng`` (open_clip's ``detshuffle2`` seeds a
``random.Random`` and relies on it), and the same decoded samples for the same arguments."""

from __future__ import annotations

import io
import json
import random
from typing import Any

import numpy as np
import pytest
import webdataset.filters
from PIL import Image

from wds_cloud.webdataset_api import webdataset_module


def ours(name: str) -> Any:
    return getattr(webdataset_module("filters"), name)


@pytest.mark.parametrize("seed", range(40))
def test_shuffle_draws_as_webdataset(seed: int) -> None:
    shape = random.Random(seed)
    n = shape.choice([0, 1, 2, 3, 7, 50, 333])
    bufsize = shape.choice([1, 2, 3, 5, 10, 64, 1000])
    initial = shape.choice([0, 1, 2, 4, 10, 100, 2000])
    items = [{"__key__": f"k{i}", "i": i} for i in range(n)]
    a = list(ours("_shuffle")(iter(items), bufsize, initial, rng=random.Random(seed)))
    b = list(webdataset.filters._shuffle(iter(items), bufsize, initial, rng=random.Random(seed)))
    assert a == b, (n, bufsize, initial)
    a = list(ours("_shuffle")(iter(items), bufsize, initial, seed=seed))
    b = list(webdataset.filters._shuffle(iter(items), bufsize, initial, seed=seed))
    assert a == b
    assert sorted(x["i"] for x in a) == list(range(n))


def test_shuffle_leaves_the_rng_where_webdataset_does() -> None:
    # detshuffle-style code reuses the generator after the pass: the state must match too
    ra, rb = random.Random(3), random.Random(3)
    list(ours("_shuffle")(iter(range(500)), 40, 10, rng=ra))
    list(webdataset.filters._shuffle(iter(range(500)), 40, 10, rng=rb))
    assert ra.getstate() == rb.getstate()


def test_shuffle_refuses_rng_and_seed() -> None:
    with pytest.raises(ValueError, match="rng= or seed="):
        list(ours("_shuffle")(iter(range(3)), rng=random.Random(1), seed=1))


def _png(seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (5, 7, 3), dtype=np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def _samples() -> list[dict[str, Any]]:
    out = []
    for i in range(12):
        npy = io.BytesIO()
        np.save(npy, np.arange(i, dtype=np.int32))
        out.append(
            {
                "__key__": f"s{i:03d}",
                "__url__": "u.tar",
                "png": _png(i),
                "cls": str(i).encode(),
                "txt": f"caption {i}".encode(),
                "json": json.dumps({"i": i}).encode(),
                "npy": npy.getvalue(),
                "bin": bytes([i]),
            }
        )
    return out


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, np.ndarray):
        return ("ndarray", x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, Image.Image):
        return ("image", x.mode, x.size, x.tobytes())
    if hasattr(x, "numpy"):  # a torch tensor
        return ("tensor", _plain(x.numpy()))
    return x


@pytest.mark.parametrize(
    ("args", "kw"),
    [
        ((), {}),
        (("rgb",), {}),
        (("rgb8",), {}),
        (("pil",), {}),
        (("l",), {"only": ["png", "cls"]}),
        (("torchrgb",), {}),
        ((lambda key, data: data[::-1] if key == "bin" else None,), {}),
        (("pilrgb",), {"partial": True}),
        ((), {"post": []}),
    ],
)
def test_decode_as_webdataset(args: tuple[Any, ...], kw: dict[str, Any]) -> None:
    a = [_plain(s) for s in ours("_decode")(iter(_samples()), *args, **kw)]
    b = [_plain(s) for s in webdataset.filters._decode(iter(_samples()), *args, **kw)]
    assert a == b and len(a) == 12


def test_decode_handler_as_webdataset() -> None:
    samples = _samples()
    samples[3]["json"] = b"{not json"
    samples[7]["png"] = b"not an image"
    for handler in (webdataset.filters.reraise_exception,):
        with pytest.raises(Exception):  # noqa: B017 - both raise their decoder's error
            list(ours("_decode")(iter(samples), "rgb", handler=handler))
        with pytest.raises(Exception):  # noqa: B017
            list(webdataset.filters._decode(iter(samples), "rgb", handler=handler))

    def keys(fn: Any, handler: Any) -> list[str]:
        return [s["__key__"] for s in fn(iter(samples), "rgb", handler=handler)]

    for policy in (lambda exn: True, lambda exn: False):
        assert keys(ours("_decode"), policy) == keys(webdataset.filters._decode, policy)
