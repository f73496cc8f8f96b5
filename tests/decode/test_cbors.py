"""cbors_to_samples / msgpacks_to_samples: concatenated records read through the registry."""

from __future__ import annotations

import io
import itertools
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cbor2
import msgpack
import pytest

from wds_cloud.core.cbors import (
    cbors_samples,
    cbors_to_samples,
    iter_cbors,
    iter_msgpacks,
    msgpacks_samples,
    msgpacks_to_samples,
)
from wds_cloud.core.decode import decode
from wds_cloud.core.handlers import ContinueHandler
from wds_cloud.core.pipeline import DataPipeline
from wds_cloud.core.shards import SimpleShardList
from wds_cloud.errors import ShardNotFoundError, ShardReadError

# name -> (encode one item, samples(), stage, iter_one)
FORMATS: dict[str, tuple[Callable[[Any], bytes], Any, Any, Any]] = {
    "cbor": (cbor2.dumps, cbors_samples, cbors_to_samples, iter_cbors),
    "msgpack": (msgpack.packb, msgpacks_samples, msgpacks_to_samples, iter_msgpacks),
}


@pytest.fixture(params=sorted(FORMATS))
def fmt(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _write(fmt: str, path: Path, items: list[object]) -> str:
    path.write_bytes(b"".join(FORMATS[fmt][0](x) for x in items))
    return str(path)


@pytest.fixture()
def files(tmp_path: Path, fmt: str) -> list[str]:
    a = _write(
        fmt,
        tmp_path / "a.rec",
        [{"__key__": "a0", "txt": b"hello", "cls": b"1"}, ["a1", {"txt": b"x", "cls": b"2"}]],
    )
    b = _write(fmt, tmp_path / "b.rec", [["b0", {"json": b"[1, 2]"}]])
    return [a, b]


def test_sample_shapes_get_url(files: list[str], fmt: str) -> None:
    out = list(FORMATS[fmt][1](iter(files)))
    assert out == [
        {"__key__": "a0", "txt": b"hello", "cls": b"1", "__url__": files[0]},
        {"__key__": "a1", "txt": b"x", "cls": b"2", "__url__": files[0]},
        {"__key__": "b0", "json": b"[1, 2]", "__url__": files[1]},
    ]


def test_other_items_are_yielded_unchanged(tmp_path: Path, fmt: str) -> None:
    items: list[Any] = [[-5.0, "-5.0"], 42, "text", [1, {"a": 2}], None, [b"k", {}]]
    url = _write(fmt, tmp_path / "x.rec", items)
    assert list(FORMATS[fmt][1]([url])) == items
    mixed = _write(fmt, tmp_path / "nk.rec", [{1: b"a"}])
    assert list(FORMATS[fmt][1]([mixed])) == [{1: b"a"}]  # not sample-shaped: no __url__


def test_pipeline_with_decode_and_pipe_scheme(files: list[str], fmt: str) -> None:
    stage = FORMATS[fmt][2]
    ds = DataPipeline(SimpleShardList([files[0], f"pipe:cat {files[1]}"]), stage(), decode())
    out = list(ds)
    assert [s["__key__"] for s in out] == ["a0", "a1", "b0"]
    assert out[0]["txt"] == "hello" and out[1]["cls"] == 2 and out[2]["json"] == [1, 2]
    assert out[2]["__url__"] == f"pipe:cat {files[1]}"


def test_empty_file_yields_nothing(tmp_path: Path, fmt: str) -> None:
    assert list(FORMATS[fmt][1]([_write(fmt, tmp_path / "e.rec", [])])) == []


def test_truncated_file_is_read_error(tmp_path: Path, fmt: str) -> None:
    encode = FORMATS[fmt][0]
    good = encode(["k0", {"txt": b"a"}])
    path = tmp_path / "t.rec"
    path.write_bytes(good + encode(["k1", {"txt": b"abcdef"}])[:-3])
    with pytest.raises(ShardReadError) as info:
        list(FORMATS[fmt][1]([str(path)]))
    assert info.value.offset == len(good) and info.value.url == str(path)
    assert "truncated" in str(info.value) and "item 1" in str(info.value)
    skip = ContinueHandler()
    assert [s["__key__"] for s in FORMATS[fmt][1]([str(path)], handler=skip)] == ["k0"]
    assert skip.count == 1


def test_missing_file_goes_through_handler(tmp_path: Path, files: list[str], fmt: str) -> None:
    missing = str(tmp_path / "missing.rec")
    with pytest.raises(ShardNotFoundError):
        list(FORMATS[fmt][1]([missing]))
    skip = ContinueHandler()
    out = list(FORMATS[fmt][1]([missing, files[1]], handler=skip))
    assert [s["__key__"] for s in out] == ["b0"] and skip.count == 1


def test_dict_shard_specs_are_accepted(files: list[str], fmt: str) -> None:
    out = list(FORMATS[fmt][1]([{"url": files[1]}]))
    assert [s["__key__"] for s in out] == ["b0"]


class _Tiny(io.RawIOBase):
    """Hands out 1..7 bytes per read, like a slow socket."""

    def __init__(self, data: bytes, seed: int) -> None:
        self.data, self.pos, self.rng = data, 0, random.Random(seed)

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = min(len(b), self.rng.randint(1, 7), len(self.data) - self.pos)
        b[:n] = self.data[self.pos : self.pos + n]
        self.pos += n
        return n


def _random_item(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(7 if depth < 3 else 4)
    if kind == 0:
        return rng.randrange(-(1 << 40), 1 << 40)
    if kind == 1:
        return rng.random() * 1e6
    if kind == 2:
        return "".join(chr(rng.randrange(32, 0x2FF)) for _ in range(rng.randrange(20)))
    if kind == 3:
        return rng.randbytes(rng.choice([0, 1, 30, 300, 5000]))
    if kind == 4:
        return [_random_item(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 5:
        return {f"k{i}": _random_item(rng, depth + 1) for i in range(rng.randrange(4))}
    return ["key", {"txt": rng.randbytes(5)}]


def test_differential_against_the_reference_decoders(fmt: str) -> None:
    """200 generated streams (about 3,000 items): same items as the format's own reference
    decoder reading the whole file, through a plain and a 1..7-bytes-per-read stream."""
    encode, _, _, iter_one = FORMATS[fmt]
    rng = random.Random(1234)
    for trial in range(200):
        items = [_random_item(rng) for _ in range(rng.randrange(30))]
        data = b"".join(encode(x) for x in items)
        if fmt == "cbor":
            ref_stream = io.BytesIO(data)
            reference = []
            while ref_stream.tell() < len(data):
                reference.append(cbor2.load(ref_stream))
        else:
            reference = list(msgpack.Unpacker(io.BytesIO(data), raw=False, strict_map_key=False))
        for item in reference:  # what the reader adds to the sample shapes
            if isinstance(item, dict) and all(isinstance(k, str) for k in item):
                item.setdefault("__url__", "u")
        reference = [  # [str key, {str: value}] is the other sample shape
            {"__key__": r[0], **r[1], "__url__": "u"}
            if isinstance(r, list)
            and len(r) == 2
            and isinstance(r[0], str)
            and isinstance(r[1], dict)
            and all(isinstance(k, str) for k in r[1])
            else r
            for r in reference
        ]
        assert list(iter_one(io.BytesIO(data), "u")) == reference, trial
        assert list(iter_one(_Tiny(data, trial), "u")) == reference, trial
        ends = set(itertools.accumulate(len(encode(x)) for x in items))
        inside = [n for n in range(1, len(data)) if n not in ends]
        if inside:  # cut inside an item: an error naming where that item starts
            cut = rng.choice(inside)
            with pytest.raises(ShardReadError) as info:
                list(iter_one(_Tiny(data[:cut], trial), "u"))
            assert info.value.offset == max([0, *(e for e in ends if e < cut)])
