"""Basic handlers, .gz, Continue, handle_extension, only/partial, secure mode, errors."""

from __future__ import annotations

import gzip
import io
import json
import pickle
from typing import Any

import cbor2
import msgpack
import numpy as np
import pytest
import torch

from wds_cloud import security
from wds_cloud.core import tenbin
from wds_cloud.core.decode import (
    Continue,
    Decoder,
    DecodingError,
    basichandlers,
    decode,
    gzfilter,
    handle_extension,
)
from wds_cloud.core.handlers import ContinueHandler, StopHandler
from wds_cloud.core.loads import decoders, torch_loads, unpickle_loads
from wds_cloud.errors import ConfigError, SampleError


def _npy(a: np.ndarray) -> bytes:
    stream = io.BytesIO()
    np.save(stream, a)
    return stream.getvalue()


def _npz(**arrays: np.ndarray) -> bytes:
    stream = io.BytesIO()
    np.savez(stream, **arrays)
    return stream.getvalue()


def _pth(obj: object) -> bytes:
    stream = io.BytesIO()
    torch.save(obj, stream)
    return stream.getvalue()


@pytest.mark.parametrize(
    ("ext", "raw", "expected"),
    [
        ("txt", "héllo".encode(), "héllo"),
        ("text", b"a", "a"),
        ("transcript", b"b", "b"),
        ("cls", b"7", 7),
        ("cls2", b" 8\n", 8),
        ("index", b"9", 9),
        ("inx", b"10", 10),
        ("id", b"11", 11),
        ("json", b'{"a": [1, 2]}', {"a": [1, 2]}),
        ("jsn", b"[1]", [1]),
        ("pyd", pickle.dumps({"x": 1}), {"x": 1}),
        ("pickle", pickle.dumps((1, 2)), (1, 2)),
        ("pkl", pickle.dumps("s"), "s"),
        ("mp", msgpack.packb({"a": 1}), {"a": 1}),
        ("msg", msgpack.packb([1, 2]), [1, 2]),
        ("msgpack", msgpack.packb("m"), "m"),
        ("cbor", cbor2.dumps({"c": b"\x00"}), {"c": b"\x00"}),
        ("bin", b"\x00raw", b"\x00raw"),
        ("seg.txt", b"multi", "multi"),
    ],
)
def test_basic_handler(ext: str, raw: bytes, expected: object) -> None:
    out = Decoder([])({"__key__": "k", ext: raw})
    assert out[ext] == expected
    assert type(out[ext]) is type(expected)


def test_npy_npz_ten_pth() -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.arange(5, dtype=np.int64)
    sample = {
        "npy": _npy(a),
        "npz": _npz(a=a, b=b),
        "ten": tenbin.encode_buffer([a, b]),
        "tb": tenbin.encode_buffer([b]),
        "pth": _pth({"t": torch.ones(2)}),
    }
    out = Decoder([])(sample)
    np.testing.assert_array_equal(out["npy"], a)
    assert out["npy"].dtype == np.float32
    assert set(out["npz"]) == {"a", "b"}
    np.testing.assert_array_equal(out["npz"]["b"], b)
    assert len(out["ten"]) == 2
    np.testing.assert_array_equal(out["ten"][0], a)
    np.testing.assert_array_equal(out["ten"][1], b)
    np.testing.assert_array_equal(out["tb"][0], b)
    assert torch.equal(out["pth"]["t"], torch.ones(2))


def test_npy_refuses_pickled_objects() -> None:
    data = _npy(np.array([{"a": 1}], dtype=object))
    with pytest.raises(DecodingError, match="npy"):
        Decoder([])({"__key__": "k", "npy": data})


def test_gz_on_any_type_keeps_key() -> None:
    sample = {
        "__key__": "k",
        "txt.gz": gzip.compress(b"zipped"),
        "json.gz": gzip.compress(b'{"a": 1}'),
        "npy.gz": gzip.compress(_npy(np.ones(3))),
        "bin.gz": gzip.compress(b"\x01"),
    }
    out = Decoder([])(sample)
    assert out["txt.gz"] == "zipped"
    assert out["json.gz"] == {"a": 1}
    np.testing.assert_array_equal(out["npy.gz"], np.ones(3))
    assert out["bin.gz"] == b"\x01"  # unknown type: gunzipped bytes


def test_bad_gzip_is_decoding_error() -> None:
    with pytest.raises(DecodingError, match=r"txt\.gz"):
        Decoder([])({"__key__": "k", "txt.gz": b"not gzip"})


def test_bad_json_names_key_url_field_and_cause() -> None:
    sample = {"__key__": "sample-3", "__url__": "s3://bucket/shard-7.tar", "json": b"{bad"}
    with pytest.raises(DecodingError) as info:
        Decoder([])(sample)
    err = info.value
    text = str(err)
    assert "sample-3" in text and "s3://bucket/shard-7.tar" in text and "'json'" in text
    assert "JSONDecodeError" in text
    assert isinstance(err.__cause__, json.JSONDecodeError)
    assert (err.url, err.key, err.k) == ("s3://bucket/shard-7.tar", "sample-3", "json")
    restored = pickle.loads(pickle.dumps(err))
    assert str(restored) == text and restored.k == "json"


def test_bad_int() -> None:
    with pytest.raises(DecodingError, match="'cls'"):
        Decoder([])({"__key__": "k", "cls": b"seven"})


@pytest.mark.parametrize("var", ["WDS_SECURE", "WDS_CLOUD_SECURE"])
@pytest.mark.parametrize("ext", ["pyd", "pickle", "pkl", "pth"])
def test_secure_mode_blocks(monkeypatch: pytest.MonkeyPatch, var: str, ext: str) -> None:
    data = pickle.dumps(1) if ext != "pth" else _pth(1)
    monkeypatch.setenv(var, "1")
    with pytest.raises(DecodingError, match="secure mode") as info:
        Decoder([])({"__key__": "k", ext: data})
    assert isinstance(info.value.__cause__, SampleError)
    monkeypatch.setenv(var, "0")
    assert Decoder([])({ext: data})[ext] == 1


@pytest.mark.parametrize(
    ("fn", "ext", "message"),
    [
        (
            unpickle_loads,
            "pkl",
            "Unpickling is not allowed for security reasons when enforce_security is set",
        ),
        (
            torch_loads,
            "pth",
            "torch.loads is not allowed for security reasons when enforce_security is set",
        ),
    ],
)
def test_secure_mode_program_switch(
    monkeypatch: pytest.MonkeyPatch, fn: Any, ext: str, message: str
) -> None:
    monkeypatch.delenv("WDS_SECURE", raising=False)
    monkeypatch.delenv("WDS_CLOUD_SECURE", raising=False)
    data = pickle.dumps(1) if ext == "pkl" else _pth(1)
    monkeypatch.setattr(security, "enforce_security", True)
    with pytest.raises(ValueError, match=message) as info:
        fn(data)
    assert isinstance(info.value, SampleError)
    assert "wds.utils.enforce_security = False" in str(info.value)
    with pytest.raises(DecodingError, match=message):
        Decoder([])({"__key__": "k", ext: data})
    monkeypatch.setattr(security, "enforce_security", False)
    assert fn(data) == 1 and decoders[ext](data) == 1


def test_pth_weights_only(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _pth({"obj": io.BytesIO(b"x")})  # not loadable with weights_only=True
    assert isinstance(Decoder([])({"pth": data})["pth"]["obj"], io.BytesIO)
    monkeypatch.setenv("WDS_PYTORCH_WEIGHTS_ONLY", "1")
    with pytest.raises(DecodingError, match="pth"):
        Decoder([])({"pth": data})


def test_meta_keys_pass_and_bytes_become_str() -> None:
    out = Decoder([])({"__key__": b"k", "__url__": "u", "__local_path__": "/p", "__x__": b"\xff"})
    assert out == {"__key__": "k", "__url__": "u", "__local_path__": "/p", "__x__": b"\xff"}


def test_only_and_partial() -> None:
    sample = {"__key__": "k", "txt": b"a", "cls": b"1"}
    out = Decoder([], only="txt")(sample)
    assert out == {"__key__": "k", "txt": "a", "cls": b"1"}
    out = Decoder([], only=["cls"])(sample)
    assert out["cls"] == 1 and out["txt"] == b"a"
    once = Decoder([])(sample)
    with pytest.raises(DecodingError, match="not bytes"):
        Decoder([])(once)  # decoding twice is an error without partial
    assert Decoder([], partial=True)({**once, "id": b"5"}) == {**once, "id": 5}


def test_bytes_like_values_are_decoded() -> None:
    out = Decoder([])({"txt": bytearray(b"ba"), "json": memoryview(b"[1]")})
    assert out == {"txt": "ba", "json": [1]}


def test_handle_extension_multi_dot_and_case() -> None:
    seg = handle_extension("seg.png", lambda data: ("seg", data))
    img = handle_extension("png JPG", lambda data: ("img", data))
    d = Decoder([seg, img])
    out = d({"seg.png": b"1", "PNG": b"2", "input.jpg": b"3", "png.txt": b"4", "SEG.PNG": b"5"})
    assert out == {
        "seg.png": ("seg", b"1"),
        "PNG": ("img", b"2"),
        "input.jpg": ("img", b"3"),
        "png.txt": "4",
        "SEG.PNG": ("seg", b"5"),
    }
    assert seg(".a.seg.png", b"x") == ("seg", b"x")
    assert seg(".png", b"x") is None


def test_custom_function_handler_sees_dotted_key() -> None:
    seen: list[str] = []

    def upper(key: str, data: bytes) -> object:
        seen.append(key)
        if key.endswith(".up"):
            return data.upper()
        return None

    out = Decoder([upper])(
        {"__key__": "k", "a.up": b"x", "txt": b"t", "up.gz": gzip.compress(b"z")}
    )
    assert out == {"__key__": "k", "a.up": b"X", "txt": "t", "up.gz": b"Z"}
    assert seen == [".a.up", ".txt", ".up"]  # after gunzip the key continues as ".up"


def test_continue_redispatches_to_later_handlers() -> None:
    def rot(key: str, data: bytes) -> object:
        if key.endswith(".rot"):
            return Continue(key[:-4], bytes(reversed(data)))
        return None

    out = Decoder([rot])({"json.rot": b"]2,1["})
    assert out == {"json.rot": [1, 2]}
    # a handler earlier in the chain does not see the re-dispatched key
    out = Decoder([], pre=[basichandlers], post=[rot])({"txt.rot": b"ba"})
    assert out == {"txt.rot": b"ab"}


def test_pre_post_replace_defaults() -> None:
    out = Decoder([], pre=[], post=[])({"txt": b"a", "txt.gz": gzip.compress(b"b")})
    assert out == {"txt": b"a", "txt.gz": gzip.compress(b"b")}
    out = Decoder([], pre=[gzfilter], post=[])({"txt.gz": gzip.compress(b"b")})
    assert out == {"txt.gz": b"b"}


def test_handler_must_be_callable() -> None:
    with pytest.raises(ConfigError, match="not callable"):
        Decoder([1])
    with pytest.raises(ConfigError, match="must be a list"):
        Decoder("rgb")  # type: ignore[arg-type]


def test_keyed_handler_subclass_overriding_call_is_called() -> None:
    class Loud(type(basichandlers)):  # type: ignore[misc]
        def __call__(self, key: str, data: bytes) -> object:
            return ("loud", key)

    assert Decoder([], post=[Loud()])({"txt": b"a"}) == {"txt": ("loud", ".txt")}


def _samples() -> list[dict[str, object]]:
    return [
        {"__key__": "a", "__url__": "u", "json": b"[1]"},
        {"__key__": "b", "__url__": "u", "json": b"{bad"},
        {"__key__": "c", "__url__": "u", "json": b"[3]"},
    ]


def test_decode_stage_default_reraises() -> None:
    stage = decode()
    it = stage(iter(_samples()))
    assert next(it)["json"] == [1]
    with pytest.raises(DecodingError, match="'b'"):
        next(it)


def test_decode_stage_handlers_count() -> None:
    skip = ContinueHandler()
    out = list(decode(handler=skip)(iter(_samples())))
    assert [s["__key__"] for s in out] == ["a", "c"]
    assert skip.count == 1 and isinstance(skip.last, DecodingError)
    stop = StopHandler()
    out = list(decode(handler=stop)(iter(_samples())))
    assert [s["__key__"] for s in out] == ["a"] and stop.count == 1


def test_decode_stage_rejects_non_dict() -> None:
    with pytest.raises(DecodingError, match="dict samples"):
        list(decode()(iter([(b"a", b"b")])))


def test_decode_stage_pickles() -> None:
    stage = pickle.loads(pickle.dumps(decode("rgb8", handle_extension("foo", bytes.upper))))
    assert list(stage(iter([{"foo": b"x", "cls": b"2"}]))) == [{"foo": b"X", "cls": 2}]


def test_input_sample_not_mutated() -> None:
    sample = {"__key__": "k", "txt": b"a"}
    Decoder([])(sample)
    assert sample == {"__key__": "k", "txt": b"a"}
