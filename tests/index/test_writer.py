"""``TarWriter(index=...)`` and ``ShardWriter(index=...)``: the index written with the shard."""

from __future__ import annotations

import io
import json
import os
import random
from pathlib import Path

import pytest

from tests.index.conftest import sequential
from tests.support import samplegen
from wds_cloud.errors import ConfigError, SampleError, UploadError
from wds_cloud.index.build import scan_shard
from wds_cloud.index.check import check_index
from wds_cloud.index.datasetjson import load_dataset_json
from wds_cloud.index.indexed import IndexedWebDataset
from wds_cloud.writing.shardwriter import ShardWriter
from wds_cloud.writing.tarwriter import TarWriter


def _samples(seed: int) -> list[dict]:
    rng = random.Random(seed)
    odd = {"unicode"} if seed % 3 else set()
    samples = samplegen._samples(rng, rng.randint(0, 25), odd, set())
    if seed % 5 == 0 and samples:  # a member of 8 GiB would need a PAX size; long names do
        samples[0]["__key__"] = "d" * 120 + "/" + "k" * 120
    return samples


@pytest.mark.parametrize("suffix", [".tar", ".tar.gz"])
def test_written_index_is_the_built_one(tmp_path: Path, suffix: str) -> None:
    """300 random sample sets (long names with PAX records, non-ASCII keys, 0 to 25
    samples): the .idx the writer commits is the one build_index computes from the shard."""
    failures = []
    for seed in range(300 if suffix == ".tar" else 60):
        path = str(tmp_path / f"s{seed}{suffix}")
        with TarWriter(path, encoder=False, index=True) as w:
            for sample in _samples(seed):
                w.write(sample)
        written = (tmp_path / f"s{seed}.idx").read_bytes()
        if written != scan_shard(path).idx or len(w.index) != len(sequential(path)):
            failures.append(seed)
    assert not failures


def test_abort_discards_both(tmp_path: Path) -> None:
    path = tmp_path / "x.tar"
    with pytest.raises(RuntimeError), TarWriter(str(path), index=True) as w:
        w.write({"__key__": "a", "txt": "1"})
        raise RuntimeError("stop")
    assert os.listdir(tmp_path) == []


def test_an_index_that_cannot_be_written_discards_the_shard(tmp_path: Path) -> None:
    w = TarWriter(str(tmp_path / "x.tar"), index=str(tmp_path / "missing" / "x.idx"))
    w.write({"__key__": "a", "txt": "1"})
    with pytest.raises(UploadError):
        w.close()
    assert os.listdir(tmp_path) == []


def test_streams_need_an_explicit_index_target(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="index="):
        TarWriter(io.BytesIO(), index=True)
    out = io.BytesIO()
    with TarWriter(out, index=str(tmp_path / "s.idx")) as w:
        w.write({"__key__": "a", "txt": "1"})
    assert (tmp_path / "s.idx").read_bytes() == b"v1.2 1\ntxt 512 1 a.txt\n"


def test_keys_with_whitespace_are_refused_before_writing(tmp_path: Path) -> None:
    with TarWriter(str(tmp_path / "x.tar"), index=True) as w:
        w.write({"__key__": "a", "txt": "1"})
        with pytest.raises(SampleError, match="whitespace"):
            w.write({"__key__": "b c", "txt": "2"})
        w.write({"__key__": "d", "txt": "3"})
    assert [s["__key__"] for s in sequential(str(tmp_path / "x.tar"))] == ["a", "d"]
    assert len(w.index) == 2


def test_shardwriter_writes_indexes_and_the_dataset_json(tmp_path: Path) -> None:
    pattern = str(tmp_path / "train-%04d.tar")
    with ShardWriter(pattern, maxcount=7, index=True) as sink:
        for i in range(30):
            sink.write({"__key__": f"k{i:04d}", "txt": f"{i}", "cls": i % 3})
        with pytest.raises(SampleError):
            sink.write({"__key__": "with space", "txt": "x"})  # refused, the shard stays
        sink.write({"__key__": "last", "txt": "x"})
    assert len(sink.shards) == 5
    doc = json.loads((tmp_path / "index.json").read_text())
    assert [e["url"] for e in doc["shardlist"]] == [f"train-{i:04d}.tar" for i in range(5)]
    assert [e["nsamples"] for e in doc["shardlist"]] == [7, 7, 7, 7, 3]
    assert all(e["filesize"] == os.path.getsize(tmp_path / e["url"]) for e in doc["shardlist"])
    assert all(c.ok for c in check_index(str(tmp_path / "index.json")))
    # a second run adds shards to the same JSON
    with ShardWriter(pattern, maxcount=7, start_shard=5, index=True) as sink:
        for i in range(3):
            sink.write({"__key__": f"m{i}", "txt": "y"})
    dataset = load_dataset_json(str(tmp_path / "index.json"))
    assert len(dataset.shards) == 6 and dataset.nsamples == 34
    ds = IndexedWebDataset(str(tmp_path / "index.json"))
    assert len(ds) == 34 and ds[33]["__key__"] == "m2" and ds[7]["txt"] == b"7"


def test_shardwriter_index_json_elsewhere_and_opener_refused(tmp_path: Path) -> None:
    (tmp_path / "meta").mkdir()
    with ShardWriter(str(tmp_path / "s-%02d.tar"), index=str(tmp_path / "meta/d.json")) as sink:
        sink.write({"__key__": "a", "txt": "1"})
    doc = json.loads((tmp_path / "meta" / "d.json").read_text())
    assert doc["shardlist"][0]["url"] == str(tmp_path / "s-00.tar")  # not below the JSON
    assert load_dataset_json(str(tmp_path / "meta/d.json")).urls == [str(tmp_path / "s-00.tar")]
    with pytest.raises(ConfigError, match="opener"):
        ShardWriter(str(tmp_path / "o-%02d.tar"), index=True, opener=lambda name: open(name, "wb"))
