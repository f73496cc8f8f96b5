"""cbors_to_samples: concatenated CBOR samples read through the opener registry."""

from __future__ import annotations

from pathlib import Path

import cbor2
import pytest

from wds_cloud.core.cbors import cbors_samples, cbors_to_samples
from wds_cloud.core.decode import decode
from wds_cloud.core.handlers import ContinueHandler
from wds_cloud.core.pipeline import DataPipeline
from wds_cloud.core.shards import SimpleShardList
from wds_cloud.errors import SampleError, ShardNotFoundError, ShardReadError


def _write(path: Path, items: list[object]) -> str:
    path.write_bytes(b"".join(cbor2.dumps(x) for x in items))
    return str(path)


@pytest.fixture()
def files(tmp_path: Path) -> list[str]:
    a = _write(
        tmp_path / "a.cbors",
        [{"__key__": "a0", "txt": b"hello", "cls": b"1"}, ["a1", {"txt": b"x", "cls": b"2"}]],
    )
    b = _write(tmp_path / "b.cbors", [["b0", {"json": b"[1, 2]"}]])
    return [a, b]


def test_both_item_shapes_and_url(files: list[str]) -> None:
    out = list(cbors_samples(iter(files)))
    assert out == [
        {"__key__": "a0", "txt": b"hello", "cls": b"1", "__url__": files[0]},
        {"__key__": "a1", "txt": b"x", "cls": b"2", "__url__": files[0]},
        {"__key__": "b0", "json": b"[1, 2]", "__url__": files[1]},
    ]


def test_pipeline_with_decode_and_pipe_scheme(files: list[str]) -> None:
    ds = DataPipeline(
        SimpleShardList([files[0], f"pipe:cat {files[1]}"]), cbors_to_samples(), decode()
    )
    out = list(ds)
    assert [s["__key__"] for s in out] == ["a0", "a1", "b0"]
    assert out[0]["txt"] == "hello" and out[1]["cls"] == 2 and out[2]["json"] == [1, 2]
    assert out[2]["__url__"] == f"pipe:cat {files[1]}"


def test_empty_file_yields_nothing(tmp_path: Path) -> None:
    assert list(cbors_samples([_write(tmp_path / "e.cbors", [])])) == []


def test_bad_item_names_url_index_offset(tmp_path: Path) -> None:
    url = _write(tmp_path / "bad.cbors", [{"__key__": "k", "txt": b"a"}, 42, ["k2", {}]])
    with pytest.raises(SampleError) as info:
        list(cbors_samples([url]))
    text = str(info.value)
    assert "item 1" in text and f"offset {len(cbor2.dumps({'__key__': 'k', 'txt': b'a'}))}" in text
    assert url in text
    skip = ContinueHandler()
    out = list(cbors_samples([url], handler=skip))
    assert [s["__key__"] for s in out] == ["k", "k2"] and skip.count == 1


def test_non_string_field_names(tmp_path: Path) -> None:
    url = _write(tmp_path / "nk.cbors", [{1: b"a"}])
    with pytest.raises(SampleError, match="non-string field names"):
        list(cbors_samples([url]))


def test_truncated_file_is_read_error(tmp_path: Path) -> None:
    good = cbor2.dumps(["k0", {"txt": b"a"}])
    path = tmp_path / "t.cbors"
    path.write_bytes(good + cbor2.dumps(["k1", {"txt": b"abcdef"}])[:-3])
    with pytest.raises(ShardReadError) as info:
        list(cbors_samples([str(path)]))
    assert info.value.offset == len(good) and info.value.url == str(path)
    assert "truncated CBOR item 1" in str(info.value)
    skip = ContinueHandler()
    assert [s["__key__"] for s in cbors_samples([str(path)], handler=skip)] == ["k0"]
    assert skip.count == 1


def test_missing_file_goes_through_handler(tmp_path: Path, files: list[str]) -> None:
    missing = str(tmp_path / "missing.cbors")
    with pytest.raises(ShardNotFoundError):
        list(cbors_samples([missing]))
    skip = ContinueHandler()
    out = list(cbors_samples([missing, files[1]], handler=skip))
    assert [s["__key__"] for s in out] == ["b0"] and skip.count == 1
