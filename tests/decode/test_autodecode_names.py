"""webdataset.autodecode's names exist in wds_cloud.core.decode and behave like webdataset's.

Each function is run on the same bytes as webdataset 1.0.2's function of the same name.
"""

from __future__ import annotations

import io
import pickle

import msgpack
import numpy as np
import pytest
import webdataset.autodecode as upstream

import wds_cloud as wds
from wds_cloud.core import decode, loads, tenbin
from wds_cloud.webdataset_api import WEBDATASET_MODULES


def _npy(array: np.ndarray) -> bytes:
    stream = io.BytesIO()
    np.save(stream, array)
    return stream.getvalue()


def _npz(**arrays: np.ndarray) -> bytes:
    stream = io.BytesIO()
    np.savez(stream, **arrays)
    return stream.getvalue()


@pytest.mark.parametrize("name", sorted(WEBDATASET_MODULES["autodecode"]))
def test_every_autodecode_name_resolves(name: str) -> None:
    value = getattr(wds.webdataset_module("autodecode"), name)
    home = WEBDATASET_MODULES["autodecode"][name]
    assert value is getattr(decode if home else wds, name)


def test_public_names_are_the_implementation() -> None:
    # basichandlers dispatches to exactly these functions: one implementation each
    for ext, fn in [
        ("pkl", loads.unpickle_loads),
        ("pth", loads.torch_loads),
        ("ten", loads.tenbin_loads),
        ("mp", loads.msgpack_loads),
        ("npy", loads.npy_loads),
        ("npz", loads.npz_loads),
        ("cbor", loads.cbor_loads),
    ]:
        assert decode.decoders[ext] is fn and decode.basichandlers.resolve("." + ext) is fn
    assert set(upstream.decoders) <= set(decode.decoders)


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("unpickle_loads", pickle.dumps({"a": (1, 2)})),
        ("npy_loads", _npy(np.arange(6, dtype=np.int16).reshape(2, 3))),
        ("npz_loads", _npz(a=np.ones(3), b=np.zeros((2, 2), dtype=np.uint8))),
        ("tenbin_loads", tenbin.encode_buffer([np.arange(4.0), np.eye(2, dtype=np.int32)])),
        ("msgpack_loads", msgpack.packb({"k": [1, 2, "x"]})),
    ],
)
def test_same_values_as_webdataset(name: str, data: bytes) -> None:
    ours, theirs = getattr(decode, name)(data), getattr(upstream, name)(data)
    if isinstance(theirs, dict) and name == "npz_loads":
        assert set(ours) == set(theirs)
        for k in theirs:
            np.testing.assert_array_equal(ours[k], theirs[k])
    elif isinstance(theirs, list):
        for a, b in zip(ours, theirs, strict=True):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)
    elif isinstance(theirs, np.ndarray):
        assert ours.dtype == theirs.dtype
        np.testing.assert_array_equal(ours, theirs)
    else:
        assert ours == theirs


@pytest.mark.parametrize(
    ("key", "extensions"),
    [
        (".jpg", ["jpg", "jpeg"]),
        (".seg.png", ["seg.png"]),
        (".png", ["seg.png"]),
        (".a.seg.png", ["seg.png"]),
        (".JPG", ["jpg"]),
        (".txt", ["jpg"]),
        (".x.y", ["y", "x.y"]),
    ],
)
def test_call_extension_handler_matches_webdataset(key: str, extensions: list[str]) -> None:
    def f(data: bytes) -> str:
        return "decoded:" + data.decode()

    ours = decode.call_extension_handler(key, b"v", f, extensions)
    assert ours == upstream.call_extension_handler(key, b"v", f, extensions)


def test_default_decoder_and_default_handler_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    sample = {"__key__": "k", "txt": b"hi", "cls": b"3", "json": b"[1]", "bin": b"\x00"}
    assert decode.default_decoder(sample) == upstream.default_decoder(sample)
    assert decode.default_pre_handlers == [decode.gzfilter]
    assert decode.default_post_handlers == [decode.basichandlers]

    # as in webdataset, a Decoder built without pre/post reads the module's lists
    def shout(key: str, data: bytes) -> str | None:
        return data.decode().upper() if key.endswith(".txt") else None

    monkeypatch.setattr(decode, "default_post_handlers", [shout])
    assert decode.Decoder([])({"txt": b"hi"})["txt"] == "HI"


def test_image_names() -> None:
    assert decode.IMAGE_EXTENSIONS == upstream.IMAGE_EXTENSIONS
    assert decode.imagespecs == upstream.imagespecs
