"""The ``.idx`` format: writing, parsing, errors, names."""

from __future__ import annotations

import pytest

from wds_cloud.errors import SampleError, ShardReadError
from wds_cloud.index.format import IdxMember, ShardIndex, format_index, group_entries, idx_url


def test_layout_matches_dali() -> None:
    samples = group_entries(
        [("a.jpg", 512, 10), ("a.cls", 1536, 1), ("dir/b.seg.png", 2560, 0), ("__meta__", 3584, 3)]
    )
    data = format_index(samples)
    assert data == b"v1.2 2\njpg 512 10 a.jpg cls 1536 1 a.cls\nseg.png 2560 0 dir/b.seg.png\n"
    index = ShardIndex(data)
    assert len(index) == 2 and index.to_bytes() == data
    assert index.sample(1) == ("dir/b", [IdxMember("seg.png", 2560, 0, "dir/b.seg.png")])


def test_empty_shard_and_raw_name_bytes() -> None:
    assert format_index([]) == b"v1.2 0\n"
    name = "lat\udce9/k.JPG"  # a name that is not UTF-8 (raw byte 0xe9)
    data = format_index(group_entries([(name, 512, 1)]))
    assert data == b"v1.2 1\nJPG 512 1 lat\xe9/k.JPG\n"
    assert ShardIndex(data).sample(0) == ("lat\udce9/k", [IdxMember("JPG", 512, 1, name)])


@pytest.mark.parametrize("name", ["a b.jpg", "a.j pg", "x\ty.txt", "n\nl.txt", "a."])
def test_unrepresentable_names(name: str) -> None:
    with pytest.raises(SampleError, match="cannot represent"):
        format_index(group_entries([(name, 512, 1)]), url="s.tar")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty index"),
        (b"hello\n", "not a DALI index"),
        (b"v1.1 1\njpg 512 1\n", "only v1.2"),
        (b"v1.2 2\njpg 512 1 a.jpg\n", "announces 2 samples but has 1"),
    ],
)
def test_malformed_files(data: bytes, message: str) -> None:
    with pytest.raises(ShardReadError, match=message):
        ShardIndex(data, url="s3://b/x.idx")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"jpg 512 1", "groups of"),
        (b"jpg x 1 a.jpg", "not a number"),
        (b"png 512 1 a.jpg", "not a sample member with extension"),
        (b"jpg 512 1 a.jpg jpg 1536 1 b.jpg", "does not belong to sample 'a'"),
    ],
)
def test_malformed_lines(line: bytes, message: str) -> None:
    index = ShardIndex(b"v1.2 1\n" + line + b"\n")
    with pytest.raises(ShardReadError, match=message):
        index.sample(0)


@pytest.mark.parametrize(
    ("shard", "idx"),
    [
        ("s3://b/train/shard-000001.tar", "s3://b/train/shard-000001.idx"),
        ("/data/x.tar.gz", "/data/x.idx"),
        ("x.tgz", "x.idx"),
        ("data.part1.tar", "data.part1.idx"),
        ("ais://b/x.tar?provider=aws", "ais://b/x.idx?provider=aws"),
        ("http://h/x.TAR", "http://h/x.idx"),
        ("gs://b/noext", "gs://b/noext.idx"),
        ("dir/.tar", "dir/.tar.idx"),
    ],
)
def test_idx_url(shard: str, idx: str) -> None:
    assert idx_url(shard) == idx
