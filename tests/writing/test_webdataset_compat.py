"""Round trips with the ``webdataset`` package in both directions."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import webdataset

from tests.writing.conftest import read_samples
from wds_cloud.writing.shardwriter import ShardWriter
from wds_cloud.writing.tarwriter import TarWriter


def raw_samples(n: int) -> list[dict[str, Any]]:
    return [
        {
            "__key__": f"dir/k{i:04d}",
            "txt": f"text {i}".encode(),
            "seg.png": bytes(range(i % 7, i % 7 + 40)),
            "json": json.dumps({"i": i}).encode(),
            "bin": bytes(i * 37 % 600),
        }
        for i in range(n)
    ]


def strip_meta(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in s.items() if k == "__key__" or not k.startswith("__")} for s in samples
    ]


def test_wds_cloud_shards_read_by_webdataset(tmp_path: Path) -> None:
    expected = raw_samples(25)
    pattern = str(tmp_path / "w-%02d.tar")
    with ShardWriter(pattern, maxcount=10) as writer:
        for s in expected:
            writer.write(s)
    urls = str(tmp_path / "w-{00..02}.tar")
    got = list(webdataset.WebDataset(urls, shardshuffle=False))
    assert strip_meta(got) == expected
    assert [s["__url__"] for s in got][::10] == writer.shards


def test_encoded_samples_decode_with_webdataset(tmp_path: Path) -> None:
    rgb = np.random.default_rng(2).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    path = tmp_path / "enc.tar"
    with TarWriter(str(path)) as writer:
        writer.write(
            {
                "__key__": "a",
                "png": rgb,
                "json": {"x": [1, 2]},
                "cls": 4,
                "npy": np.arange(3.0),
                "txt": "t",
                "pyd": {"p": 1},
            }
        )
    (got,) = list(webdataset.WebDataset(str(path), shardshuffle=False).decode("rgb8"))
    assert np.array_equal(got["png"], rgb)
    assert got["json"] == {"x": [1, 2]} and got["cls"] == 4 and got["txt"] == "t"
    assert np.array_equal(got["npy"], np.arange(3.0)) and got["pyd"] == {"p": 1}


def test_webdataset_shards_read_by_wds_cloud(tmp_path: Path) -> None:
    expected = raw_samples(12)
    plain, gz = tmp_path / "wd.tar", tmp_path / "wd.tar.gz"
    for path in (plain, gz):
        with webdataset.TarWriter(str(path)) as writer:
            for s in expected:
                writer.write(s)
        assert strip_meta(list(read_samples(path))) == expected


def test_same_samples_through_both_writers(tmp_path: Path) -> None:
    samples = raw_samples(8)
    ours, theirs = io.BytesIO(), io.BytesIO()
    with TarWriter(ours) as writer:
        for s in samples:
            writer.write(s)
    with webdataset.TarWriter(theirs, mtime=0) as wd_writer:
        for s in samples:
            wd_writer.write(s)
    # different header bytes, same members and sample contents whichever reader is used
    ours_path, theirs_path = tmp_path / "ours.tar", tmp_path / "theirs.tar"
    ours_path.write_bytes(ours.getvalue())
    theirs_path.write_bytes(theirs.getvalue())
    assert strip_meta(list(read_samples(ours_path))) == strip_meta(list(read_samples(theirs_path)))
    assert strip_meta(list(webdataset.WebDataset(str(ours_path), shardshuffle=False))) == samples
