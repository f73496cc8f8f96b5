"""ShardWriter: rollover by count and size, post, lazy open, atomic commit, remote sinks."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import pytest

from tests.writing.conftest import DirStore, read_samples
from wds_cloud.errors import ConfigError, SampleError, UnsupportedSchemeError, UploadError
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.writing.shardwriter import ShardWriter


def sample(i: int, size: int = 100) -> dict[str, Any]:
    return {"__key__": f"s{i:05d}", "bin": bytes([i % 256]) * size, "cls": i}


def keys(path: str | Path) -> list[str]:
    return [s["__key__"] for s in read_samples(path)]


def test_rollover_by_maxcount_and_post(tmp_path: Path) -> None:
    posted: list[str] = []
    pattern = str(tmp_path / "shard-%03d.tar")
    with ShardWriter(pattern, maxcount=3, post=posted.append) as writer:
        for i in range(10):
            writer.write(sample(i))
        assert posted == [pattern % n for n in range(3)], "full shards are committed at once"
        assert writer.count == 1 and writer.total == 10
    names = [pattern % n for n in range(4)]
    assert posted == names and writer.shards == names
    assert [keys(n) for n in names] == [
        [f"s{i:05d}" for i in range(start, min(start + 3, 10))] for start in (0, 3, 6, 9)
    ]
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(n) for n in names]


def test_rollover_by_maxsize_bound(tmp_path: Path) -> None:
    # each sample: 2 headers (1024) + 1000 data padded to 1024 + "cls" 1 byte padded = 2560
    maxsize = 1024 + 3 * 2560 + 100  # room for exactly three samples plus end-of-archive
    pattern = str(tmp_path / "s-%02d.tar")
    with ShardWriter(pattern, maxsize=maxsize) as writer:
        sizes = [writer.write(sample(i, 1000)) for i in range(7)]
    assert set(sizes) == {2560}
    assert [len(keys(n)) for n in writer.shards] == [3, 3, 1]
    for name in writer.shards:
        assert os.path.getsize(name) <= maxsize


def test_sample_larger_than_maxsize_gets_its_own_shard(tmp_path: Path) -> None:
    pattern = str(tmp_path / "s-%02d.tar")
    with ShardWriter(pattern, maxsize=5000) as writer:
        writer.write(sample(0, 100))
        writer.write(sample(1, 20000))
        writer.write(sample(2, 100))
    assert [keys(n) for n in writer.shards] == [["s00000"], ["s00001"], ["s00002"]]


def test_zero_writes_make_no_shard(tmp_path: Path) -> None:
    posted: list[str] = []
    with ShardWriter(str(tmp_path / "s-%02d.tar"), post=posted.append) as writer:
        pass
    assert writer.shards == [] and posted == [] and list(tmp_path.iterdir()) == []


def test_start_shard_and_gzip_pattern(tmp_path: Path) -> None:
    pattern = str(tmp_path / "s-%04d.tar.gz")
    with ShardWriter(pattern, maxcount=2, start_shard=7) as writer:
        for i in range(3):
            writer.write(sample(i))
    assert writer.shards == [pattern % 7, pattern % 8]
    assert all(open(n, "rb").read(2) == b"\x1f\x8b" for n in writer.shards)
    assert keys(pattern % 8) == ["s00002"]


def test_exception_mid_shard_keeps_finished_shards_only(tmp_path: Path) -> None:
    pattern = str(tmp_path / "s-%02d.tar")
    posted: list[str] = []
    with (
        pytest.raises(RuntimeError, match="crash"),
        ShardWriter(pattern, maxcount=4, post=posted.append) as writer,
    ):
        for i in range(6):
            writer.write(sample(i))
        assert any(n.startswith(".s-01.tar.tmp-") for n in os.listdir(tmp_path))
        raise RuntimeError("crash")
    assert sorted(os.listdir(tmp_path)) == ["s-00.tar"], "no half shard, no temp file"
    assert posted == writer.shards == [pattern % 0]
    assert writer.total == 4
    with pytest.raises(ValueError, match="closed"):
        writer.write(sample(9))


def test_bad_sample_does_not_break_the_shard(tmp_path: Path) -> None:
    with ShardWriter(str(tmp_path / "s-%02d.tar")) as writer:
        writer.write(sample(0))
        with pytest.raises(SampleError, match="no encoder for extension 'weird'"):
            writer.write({"__key__": "bad", "weird": object()})
        writer.write(sample(1))
    assert keys(writer.shards[0]) == ["s00000", "s00001"]


def test_opener_callable_gets_each_name_and_stream_is_closed(tmp_path: Path) -> None:
    opened: dict[str, io.BytesIO] = {}
    contents: dict[str, bytes] = {}

    class Recorder(io.BytesIO):
        def close(self) -> None:
            contents[self.name] = self.getvalue()
            super().close()

    def opener(name: str) -> io.BytesIO:
        stream = Recorder()
        stream.name = name  # type: ignore[misc]
        opened[name] = stream
        return stream

    with ShardWriter("mem-%d.tgz", maxcount=2, opener=opener) as writer:
        for i in range(3):
            writer.write(sample(i))
    assert list(opened) == ["mem-0.tgz", "mem-1.tgz"] == writer.shards
    assert all(s.closed for s in opened.values())
    assert all(data[:2] == b"\x1f\x8b" for data in contents.values()), "gzip from the name"


def test_remote_shards_commit_and_post_urls(registry: OpenerRegistry, store: DirStore) -> None:
    posted: list[str] = []
    pattern = "tstore://bucket/train/s-%03d.tar"
    with ShardWriter(pattern, maxcount=2, post=posted.append, registry=registry) as writer:
        for i in range(5):
            writer.write(sample(i))
    urls = [pattern % n for n in range(3)]
    assert posted == store.commits == writer.shards == urls
    assert store.stored() == [f"bucket/train/s-00{n}.tar" for n in range(3)]
    assert [keys(store.path(u)) for u in urls] == [
        ["s00000", "s00001"],
        ["s00002", "s00003"],
        ["s00004"],
    ]


def test_remote_exception_aborts_open_shard(registry: OpenerRegistry, store: DirStore) -> None:
    with (
        pytest.raises(KeyError),
        ShardWriter("tstore://b/s-%d.tar", maxcount=2, registry=registry) as writer,
    ):
        for i in range(3):
            writer.write(sample(i))
        raise KeyError("stop")
    assert store.commits == ["tstore://b/s-0.tar"]
    assert store.aborts == ["tstore://b/s-1.tar"]
    assert store.stored() == ["b/s-0.tar"]


def test_remote_write_failure_is_upload_error(
    registry: OpenerRegistry, failing_store: DirStore
) -> None:
    posted: list[str] = []
    writer = ShardWriter("tfail://b/s-%d.tar", post=posted.append, registry=registry)
    with pytest.raises(UploadError, match=r"injected failure.*url='tfail://b/s-0.tar'"):
        for i in range(50):
            writer.write(sample(i, 500))
    assert failing_store.aborts == ["tfail://b/s-0.tar"]
    assert failing_store.stored() == [] and posted == [] and writer.shards == []
    assert writer.total == 0 and writer.shard == 0, "the discarded shard's number is reused"
    writer.close()


def test_remote_scheme_without_create(registry: OpenerRegistry) -> None:
    writer = ShardWriter("tro://b/s-%d.tar", registry=registry)
    with pytest.raises(UnsupportedSchemeError, match="cannot write"):
        writer.write(sample(0))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pattern": "fixed.tar"}, "integer format"),
        ({"pattern": "s-%d-%d.tar"}, "integer format"),
        ({"pattern": "s-%d.tar", "maxcount": 0}, "maxcount"),
        ({"pattern": "s-%d.tar", "maxsize": 0}, "maxsize"),
        ({"pattern": "s-%d.tar", "bogus": 1}, "unknown ShardWriter arguments: bogus"),
        ({"pattern": "s-%d.tar", "compress": "xz"}, "compress"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ShardWriter(**kwargs)


def test_verbose_prints_to_stderr(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    with ShardWriter(str(tmp_path / "s-%d.tar"), verbose=1) as writer:
        writer.write(sample(0))
    out, err = capfd.readouterr()
    assert out == "" and "# writing" in err and "s-0.tar" in err
