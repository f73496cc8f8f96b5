"""The wids dataset JSON: reading wids' own files, writing, relative URLs, updating."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from wds_cloud.errors import ConfigError
from wds_cloud.index.datasetjson import (
    KIND,
    DatasetIndex,
    ShardInfo,
    load_dataset_json,
    relative_url,
    resolve_url,
    save_dataset_json,
)
from wds_cloud.openers.local import url_to_path

BASES = [
    "s3://b/train/index.json",
    "gs://bucket/a/b/c.json",
    "ais://b/x.json",
    "http://127.0.0.1:8000/data/index.json",
    "https://h/d/i.json",
    "file:///srv/data/index.json",
    "/srv/data/index.json",
    "rel/dir/index.json",
    "index.json",
]


@pytest.mark.parametrize("base", BASES)
def test_relative_urls_round_trip(base: str) -> None:
    """Whatever a shard URL is, writing it relative to the JSON and resolving it back gives it
    again (1000 random URLs per base, below, beside and elsewhere)."""
    rng = random.Random(base)
    parts = ["a", "b", "x.y", "..", ".", "sub dir", "%20", "ü"]
    head = base.rsplit("/", 1)[0] + "/" if "/" in base else ""
    for _ in range(1000):
        tail = "/".join(rng.choice(parts) for _ in range(rng.randint(1, 4))) + ".tar"
        candidates = [head + tail, "s3://other/" + tail, "/abs/" + tail, "gs://b/" + tail]
        url = rng.choice(candidates)
        if url_is_normal(url):
            rel = relative_url(base, url)
            back = resolve_url(base, rel)
            if "://" not in url and back.startswith("file:"):
                back = url_to_path(back)  # a local path in a remote JSON is a file: URL
            assert back == (
                url if "://" in url or url.startswith("/") else os.path.normpath(url)
            ), (base, url, rel)


def url_is_normal(url: str) -> bool:
    path = url.split("://", 1)[-1]
    return not any(p in ("..", ".", "") for p in path.split("/")[1:])


def test_resolution_follows_wids() -> None:
    assert resolve_url("s3://b/train/index.json", "shard-0.tar") == "s3://b/train/shard-0.tar"
    assert resolve_url("s3://b/train/index.json", "../val/s.tar") == "s3://b/val/s.tar"
    assert resolve_url("s3://b/train/index.json", "/other/s.tar") == "s3://b/other/s.tar"
    assert resolve_url("http://h/a/i.json?sig=1", "s.tar") == "http://h/a/s.tar"
    assert resolve_url("/data/t/index.json", "s.tar") == "/data/t/s.tar"
    assert resolve_url("t/index.json", "s.tar") == "t/s.tar"
    assert resolve_url("s3://b/i.json", "gs://c/s.tar") == "gs://c/s.tar"
    with pytest.raises(ConfigError, match="no directory"):
        resolve_url("pipe:cat i.json", "s.tar")


def test_reads_a_file_written_by_wids_index_create(tmp_path: Path) -> None:
    """What ``wids_index create --base`` writes (md5sum, filesize, base, info) loads."""
    doc = {
        "__kind__": KIND,
        "wids_version": 1,
        "shardlist": [
            {"url": "s-0.tar", "md5sum": "0" * 32, "nsamples": 3, "filesize": 1024},
            {"url": "s-1.tar", "md5sum": "1" * 32, "nsamples": 4, "filesize": 2048},
        ],
        "name": "train",
        "base": "shards",
        "info": "some text",
    }
    (tmp_path / "i.json").write_text(json.dumps(doc))
    ds = load_dataset_json(str(tmp_path / "i.json"))
    assert ds.urls == [str(tmp_path / "shards" / "s-0.tar"), str(tmp_path / "shards" / "s-1.tar")]
    assert ds.nsamples == 7 and ds.name == "train" and ds.extra["info"] == "some text"


def test_sub_datasets(tmp_path: Path) -> None:
    (tmp_path / "val").mkdir()
    (tmp_path / "val" / "v.json").write_text(
        json.dumps({"wids_version": 1, "shardlist": [{"url": "v0.tar", "nsamples": 2}]})
    )
    doc = {
        "wids_version": 1,
        "shardlist": [{"url": "t0.tar", "nsamples": 5}],
        "datasets": [
            {"source_url": "val/v.json"},
            {"base": "extra", "shardlist": [{"url": "e.tar", "nsamples": 1}]},
        ],
    }
    (tmp_path / "all.json").write_text(json.dumps(doc))
    ds = load_dataset_json(str(tmp_path / "all.json"))
    assert ds.urls == [str(tmp_path / p) for p in ("t0.tar", "val/v0.tar", "extra/e.tar")]
    assert ds.nsamples == 8


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "JSON object"),
        ({"__kind__": "other", "shardlist": []}, "not a wids dataset index"),
        ({"wids_version": 2, "shardlist": []}, "not a wids dataset index"),
        ({"wids_version": 1}, "needs a 'shardlist'"),
        ({"wids_version": 1, "shardlist": [{"url": "a.tar"}]}, "needs 'nsamples'"),
        ({"wids_version": 1, "shardlist": [{"nsamples": 1}]}, "'url' string"),
        ({"wids_version": 1, "shardlist": [{"url": "a", "nsamples": -1}]}, "integer >= 0"),
    ],
)
def test_malformed(tmp_path: Path, doc: object, message: str) -> None:
    (tmp_path / "i.json").write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match=message):
        load_dataset_json(str(tmp_path / "i.json"))


def test_written_relative_and_updated_in_place(tmp_path: Path) -> None:
    target = str(tmp_path / "index.json")
    first = DatasetIndex(
        [ShardInfo(str(tmp_path / "a.tar"), 3, 10), ShardInfo("s3://b/x.tar", 1)], name="n"
    )
    save_dataset_json(first, target)
    doc = json.loads(Path(target).read_text())
    assert doc["__kind__"] == KIND and doc["wids_version"] == 1 and doc["name"] == "n"
    assert doc["shardlist"] == [
        {"url": "a.tar", "nsamples": 3, "filesize": 10},
        {"url": "s3://b/x.tar", "nsamples": 1},
    ]
    save_dataset_json(
        DatasetIndex(
            [ShardInfo(str(tmp_path / "a.tar"), 4), ShardInfo(str(tmp_path / "c.tar"), 2)]
        ),
        target,
        update=True,
    )
    again = load_dataset_json(target)
    assert [(s.url, s.nsamples) for s in again.shards] == [
        (str(tmp_path / "a.tar"), 4),
        ("s3://b/x.tar", 1),
        (str(tmp_path / "c.tar"), 2),
    ]
    assert again.name == "n"
    assert not [p for p in os.listdir(tmp_path) if "tmp" in p]  # committed atomically


def test_a_relative_local_path_is_written_relative_to_the_json(tmp_path: Path, monkeypatch) -> None:
    """A shard path relative to the working folder, outside the JSON's folder, is written as
    the JSON's reader reads it (relative to the JSON); a name that would read as a URL
    (``pipe:...``) is written absolute."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "meta").mkdir()
    base = "meta/index.json"
    for url in ("x[1].tar", "w?.tar", "pipe:cat z.tar", "meta/pipe:y.tar"):
        rel = relative_url(base, url)
        assert os.path.abspath(resolve_url(base, rel)) == os.path.abspath(url), (url, rel)
    assert relative_url(base, "x.tar") == os.path.join("..", "x.tar")
    assert relative_url(base, "meta/pipe:y.tar") == str(tmp_path / "meta" / "pipe:y.tar")
