"""ShardCache: names, tee-while-streaming, atomic commit, early close, failures, LRU, processes."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
from pathlib import Path

import pytest

from tests.openers.conftest import make_shard
from tests.support.http_server import HttpFileServer
from wds_cloud.core.shardopen import tarfile_samples
from wds_cloud.errors import ConfigError, ShardReadError
from wds_cloud.openers.cache.shardcache import TEMP_DIR, ShardCache, cache_name
from wds_cloud.openers.http.opener import HttpOpener
from wds_cloud.openers.pipe import PipeCommandError
from wds_cloud.openers.registry import OpenerRegistry


def _registry(**http: object) -> OpenerRegistry:
    registry = OpenerRegistry()
    http.setdefault("backoff", 0.0)
    registry.register("http", HttpOpener(**http), override=True)  # type: ignore[arg-type]
    return registry


def _cached_files(cache_dir: Path) -> list[str]:
    return sorted(
        str(p.relative_to(cache_dir))
        for p in cache_dir.rglob("*")
        if p.is_file() and TEMP_DIR not in p.parts
    )


def _temp_files(cache_dir: Path) -> list[Path]:
    temp = cache_dir / TEMP_DIR
    return list(temp.iterdir()) if temp.exists() else []


def test_cache_names_are_readable_and_distinct() -> None:
    assert cache_name("s3://bucket/a/x.tar") == "s3/bucket/a/x.tar"
    names = {
        cache_name(u)
        for u in (
            "s3://bucket/a/x.tar",
            "s3://bucket/b/x.tar",
            "gs://bucket/a/x.tar",
            "s3://other/a/x.tar",
            "ais://bucket/a/x.tar?etl=resize",
            "ais://bucket/a/x.tar?etl=crop",
            "ais://bucket/a/x.tar",
            "s3://bucket/a/x y.tar",
            "s3://bucket/a/x_y.tar",
            "s3://bucket/a/x%20y.tar",
            "http://127.0.0.1:8000/a/x.tar",
            "pipe:cat a/x.tar",
            "pipe:cat b/x.tar",
        )
    }
    assert len(names) == 13
    assert cache_name("http://127.0.0.1:8000/a/x.tar") == "http/127.0.0.1%3A8000/a/x.tar"
    for weird in ("s3://b/../x.tar", "s3://b/./x.tar", "s3://b//x.tar", "s3://b/a/"):
        name = cache_name(weird)
        assert ".." not in name.split("/") and "." not in name.split("/")
        assert "" not in name.split("/")
    long_name = cache_name("s3://bucket/" + "n" * 300 + ".tar")
    assert long_name.startswith("%long/") and len(long_name) < 200


def test_stream_fills_the_cache_and_hits_need_no_server(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    www = tmp_path / "www"
    www.mkdir()
    data = os.urandom(1_500_000)
    (www / "x.tar").write_bytes(data)
    with HttpFileServer(www) as server:
        url = server.url("x.tar")
        cache = ShardCache(cache_dir, registry=_registry())
        assert cache.local_path(url) is None
        with cache.open(url) as stream:
            assert stream.read() == data
        path = cache.path_for(url)
        assert cache.local_path(url) == path
        assert Path(path).read_bytes() == data
    # the server is gone: a hit is served from the file
    with cache.open(url) as stream:
        assert stream.read() == data
    assert _temp_files(cache_dir) == []


def test_local_files_are_never_cached(tmp_path: Path) -> None:
    shard = tmp_path / "x.tar"
    shard.write_bytes(b"local")
    cache = ShardCache(tmp_path / "cache")
    for url in (str(shard), shard.as_uri()):
        with cache.open(url) as stream:
            assert stream.read() == b"local"
        assert cache.local_path(url) == str(shard)
    assert not (tmp_path / "cache").exists() or _cached_files(tmp_path / "cache") == []


def test_early_close_leaves_no_partial_file(tmp_path: Path) -> None:
    data = os.urandom(3_000_000)
    (tmp_path / "x.tar").write_bytes(data)
    url = f"pipe:cat {tmp_path / 'x.tar'}"
    cache = ShardCache(tmp_path / "cache", drain_bytes=100_000)
    stream = cache.open(url)
    assert stream.read(10_000) == data[:10_000]
    stream.close()
    assert not os.path.exists(cache.path_for(url))
    assert _temp_files(tmp_path / "cache") == []


def test_close_near_the_end_completes_the_file(tmp_path: Path) -> None:
    # a tar reader stops at the end-of-archive marker and leaves the zero padding unread
    data = os.urandom(300_000)
    (tmp_path / "x.tar").write_bytes(data)
    url = f"pipe:cat {tmp_path / 'x.tar'}"
    cache = ShardCache(tmp_path / "cache")
    stream = cache.open(url)
    got = b""
    while len(got) < len(data) - 5000:
        got += stream.read(len(data) - 5000 - len(got))
    stream.close()
    assert Path(cache.path_for(url)).read_bytes() == data


def test_a_broken_download_is_never_served(http_server: HttpFileServer, tmp_path: Path) -> None:
    data = os.urandom(400_000)
    (http_server.root / "x.tar").write_bytes(data)
    url = http_server.url("x.tar")
    cache_dir = tmp_path / "cache"
    http_server.cut_after = 100_000
    cache = ShardCache(cache_dir, registry=_registry(retries=0))
    stream = cache.open(url)
    with pytest.raises(ShardReadError):
        stream.read()
    stream.close()
    assert not os.path.exists(cache.path_for(url))
    assert _temp_files(cache_dir) == []
    # once the server behaves, the next open downloads it again
    http_server.cut_after = None
    with cache.open(url) as stream:
        assert stream.read() == data
    assert Path(cache.path_for(url)).read_bytes() == data


def test_a_failing_command_removes_the_temporary_file(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    url = "pipe:head -c 50000 /dev/zero; exit 1"
    cache = ShardCache(cache_dir)
    stream = cache.open(url)
    assert len(stream.read(1000)) == 1000
    assert len(_temp_files(cache_dir)) == 1  # the file being written
    with pytest.raises(PipeCommandError):
        stream.read()
    stream.close()
    assert _temp_files(cache_dir) == []
    assert not os.path.exists(cache.path_for(url))


def test_lru_eviction_by_max_bytes(tmp_path: Path) -> None:
    shard = 100_000
    for name in "abcd":
        (tmp_path / f"{name}.tar").write_bytes(name.encode() * shard)
    cache = ShardCache(tmp_path / "cache", max_bytes=int(2.5 * shard))

    def read(name: str) -> None:
        with cache.open(f"pipe:cat {tmp_path / name}.tar") as stream:
            assert stream.read() == name.encode() * shard

    read("a")
    read("b")
    read("a")  # a hit makes "a" the most recently used
    read("c")  # 3 files > 2.5 shards: the least recently used ("b") goes
    cached = {os.path.basename(cache_name(f"pipe:cat {tmp_path / n}.tar")): n for n in "abcd"}
    left = sorted(cached[os.path.basename(p)] for p in _cached_files(tmp_path / "cache"))
    assert left == ["a", "c"]
    assert cache.size() == 2 * shard
    read("d")
    left = sorted(cached[os.path.basename(p)] for p in _cached_files(tmp_path / "cache"))
    assert left == ["c", "d"]


def test_file_larger_than_the_bound_is_kept_alone(tmp_path: Path) -> None:
    (tmp_path / "big.tar").write_bytes(b"x" * 50_000)
    (tmp_path / "small.tar").write_bytes(b"y" * 10)
    cache = ShardCache(tmp_path / "cache", max_bytes=1000)
    for name in ("small", "big"):
        with cache.open(f"pipe:cat {tmp_path / name}.tar") as stream:
            stream.read()
    assert cache.size() == 50_000


def _read_through_cache(args: tuple[str, str]) -> str:
    cache_dir, url = args
    cache = ShardCache(cache_dir, registry=_registry())
    digest = hashlib.sha256()
    with cache.open(url) as stream:
        while chunk := stream.read(65536):
            digest.update(chunk)
    return digest.hexdigest()


def test_concurrent_processes_share_one_cache(http_server: HttpFileServer, tmp_path: Path) -> None:
    data = os.urandom(4_000_000)
    (http_server.root / "x.tar").write_bytes(data)
    url = http_server.url("x.tar")
    cache_dir = tmp_path / "cache"
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        digests = pool.map(_read_through_cache, [(str(cache_dir), url)] * 6, chunksize=1)
    assert set(digests) == {hashlib.sha256(data).hexdigest()}
    assert _cached_files(cache_dir) == [cache_name(url)]
    assert Path(cache_dir, cache_name(url)).read_bytes() == data
    assert _temp_files(cache_dir) == []


def test_samples_through_the_cache(http_server: HttpFileServer, tmp_path: Path) -> None:
    keys = []
    for i in range(3):
        keys += make_shard(http_server.root / f"s-{i}.tar", i, samples=5)
    urls = [http_server.url(f"s-{i}.tar") for i in range(3)]
    cache_dir = tmp_path / "cache"
    for _ in range(2):  # the second pass reads from the cache
        got = [s["__key__"] for s in tarfile_samples(urls, cache_dir=str(cache_dir))]
        assert got == keys
    cache = ShardCache(cache_dir)
    for i, url in enumerate(urls):
        path = cache.local_path(url)
        assert path is not None
        assert Path(path).read_bytes() == (http_server.root / f"s-{i}.tar").read_bytes()


def test_configuration_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("WDS_CLOUD_CACHE_DIR", raising=False)
    monkeypatch.delenv("WDS_CLOUD_CACHE_SIZE", raising=False)
    with pytest.raises(ConfigError, match="WDS_CLOUD_CACHE_DIR"):
        ShardCache()
    monkeypatch.setenv("WDS_CLOUD_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("WDS_CLOUD_CACHE_SIZE", "12345")
    cache = ShardCache()
    assert (cache.cache_dir, cache.max_bytes) == (str(tmp_path), 12345)
    monkeypatch.setenv("WDS_CLOUD_CACHE_SIZE", "lots")
    with pytest.raises(ConfigError, match="WDS_CLOUD_CACHE_SIZE"):
        ShardCache()


@pytest.mark.parametrize("variable", ["WDS_CLOUD_CACHE_DIR", "WDS_CACHE"])
def test_webdataset_caches_when_the_environment_says_so(
    http_server: HttpFileServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    variable: str,
) -> None:
    """As in webdataset: setting the cache variable switches caching on without code changes;
    WDS_VERBOSE_CACHE=1 reports misses, commits, hits and evictions on stderr."""
    import wds_cloud as wds

    for name in ("WDS_CLOUD_CACHE_DIR", "WDS_CACHE", "WDS_CLOUD_CACHE_SIZE", "WDS_CACHE_SIZE"):
        monkeypatch.delenv(name, raising=False)
    keys = []
    for i in range(2):
        keys += make_shard(http_server.root / f"e-{i}.tar", i, samples=4)
    urls = [http_server.url(f"e-{i}.tar") for i in range(2)]
    cache_dir = tmp_path / "envcache"
    monkeypatch.setenv(variable, str(cache_dir))
    monkeypatch.setenv("WDS_VERBOSE_CACHE", "1")
    size = (http_server.root / "e-0.tar").stat().st_size
    size_var = "WDS_CLOUD_CACHE_SIZE" if variable == "WDS_CLOUD_CACHE_DIR" else "WDS_CACHE_SIZE"
    monkeypatch.setenv(size_var, str(size))  # room for one shard: the second evicts the first
    assert [s["__key__"] for s in wds.WebDataset(urls)] == keys
    err = capfd.readouterr().err
    for i in range(2):
        assert f"[wds_cloud cache] miss {urls[i]}" in err
        assert f"[wds_cloud cache] commit {urls[i]}" in err
    assert "[wds_cloud cache] evict " in err and "e-0.tar" in err.split("evict ", 1)[1]
    assert _cached_files(cache_dir) == [cache_name(urls[1])]
    assert [s["__key__"] for s in wds.WebDataset(urls[1])] == keys[4:]
    assert f"[wds_cloud cache] hit {urls[1]}" in capfd.readouterr().err
    # the explicit argument wins over the environment
    other = tmp_path / "explicit"
    assert [s["__key__"] for s in wds.WebDataset(urls[0], cache_dir=str(other))] == keys[:4]
    assert _cached_files(other) != []
