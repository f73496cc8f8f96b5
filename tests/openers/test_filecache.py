"""webdataset.cache's names (FileCache, StreamingOpen, LRUCleanup, ...) over wds_cloud's cache.

Where webdataset's function is deterministic it is run on the same input and compared.
"""

from __future__ import annotations

import gzip
import io
import itertools
import os
import shutil
import tarfile
import time
from pathlib import Path

import pytest
import webdataset.cache as upstream

import wds_cloud
from tests.openers.conftest import make_shard
from tests.support.http_server import HttpFileServer
from wds_cloud.core import filecache as fc
from wds_cloud.core.handlers import ignore_and_continue, ignore_and_stop
from wds_cloud.errors import ConfigError, ShardNotFoundError
from wds_cloud.openers.cache.lru import LRUCleanup, evict_lru
from wds_cloud.openers.cache.shardcache import TEMP_DIR, ShardCache
from wds_cloud.webdataset_api import webdataset_module

SCHEMES = ["", "file://", "http://", "https://", "ftp://", "gs://", "s3://", "ais://", "unknown://"]
HOSTS = ["", "example.com", "host:8080", "u:p@h"]
PATHS = [
    "",
    "/",
    "/x.tar",
    "/a/b/c.tar",
    "/a//b.tar",
    "/dir/",
    "/a b/c%20d.tar",
    "/q.tar?x=1&y=2",
    "/f.tar#frag",
    "/" + "n" * 200 + ".tar",
    "/{a,b}/*.tar",
]


def generated_urls() -> list[str]:
    urls = [s + h + p for s, h, p in itertools.product(SCHEMES, HOSTS, PATHS) if s or not h]
    urls += [
        "pipe:curl -s http://x/a.tar",
        "pipe:cat /data/x.tar | gzip -d",
        "relative/path.tar",
        "C:/data/x.tar",
        "/abs/x.tar",
        "-",
    ]
    return urls


def test_url_to_cache_name_matches_webdataset_on_generated_urls() -> None:
    urls = generated_urls()
    assert len(urls) > 250
    for url in urls:
        for ndir in (0, 1, 2, 5):
            assert fc.url_to_cache_name(url, ndir) == upstream.url_to_cache_name(url, ndir), url


def test_url_to_cache_name_rejects_non_strings_like_an_assert() -> None:
    for bad in (123, None, b"x.tar", Path("x.tar")):
        with pytest.raises(AssertionError):
            fc.url_to_cache_name(bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="URL string"):
            fc.url_to_cache_name(bad)  # type: ignore[arg-type]


def test_pipe_cleaner_matches_webdataset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALLOW_OBSOLETE", "1")  # webdataset's version refuses to run otherwise
    specs = [
        "pipe:curl -s -L https://h/a.tar",
        "pipe:aws s3 cp s3://b/k.tar -",
        "pipe:gsutil cat gs://b/k.tar",
        "pipe:hdfs dfs -cat hdfs://n/x.tar",
        "pipe:ais get ais://b/x.tar -",
        "pipe:cat /local/x.tar",
        "pipe:",
        "http://h/x.tar",
        "/local/x.tar",
        "pipe:curl  http://h/double-space.tar",
        "pipe:echo s3x://not-a-url",
    ]
    for spec in specs:
        assert fc.pipe_cleaner(spec) == upstream.pipe_cleaner(spec), spec
    assert fc.pipe_cleaner("pipe:curl -s http://h/a.tar") == "http://h/a.tar"


def test_islocal_matches_webdataset_on_ordinary_urls() -> None:
    for url in [
        "/abs/x.tar",
        "rel/x.tar",
        "file:///abs/x.tar",
        "file:rel.tar",
        "http://h/x.tar",
        "s3://b/x.tar",
        "pipe:cat x.tar",
        "ais://b/x",
    ]:
        assert fc.islocal(url) == upstream.islocal(url), url
    # deliberate: wds_cloud reads these as local paths, as every wds_cloud opener does
    assert fc.islocal("C:/data/x.tar") and fc.islocal("name:with:colons.tar")


def write_kinds(root: Path) -> dict[str, Path]:
    root.mkdir(parents=True, exist_ok=True)
    tar_path = root / "a.tar"
    make_shard(tar_path, 0, samples=2, size=10)
    gnu = root / "gnu.tar"
    with tarfile.open(gnu, "w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo("x.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"1"))
    tgz = root / "a.tgz"
    tgz.write_bytes(gzip.compress(tar_path.read_bytes()))
    text = root / "page.html"
    text.write_bytes(b"<html>not found</html>")
    empty = root / "empty"
    empty.write_bytes(b"")
    odd = root / "-starts-with-dash.tar"
    shutil.copy(tar_path, odd)
    return {"tar": tar_path, "gnu": gnu, "tgz": tgz, "html": text, "empty": empty, "odd": odd}


def test_magic_filetype_and_check_tar_format_match_webdataset(tmp_path: Path) -> None:
    kinds = write_kinds(tmp_path)
    for path in kinds.values():
        assert fc.magic_filetype(str(path)) == upstream.magic_filetype(str(path))
        assert fc.check_tar_format(str(path)) == upstream.check_tar_format(str(path))
    assert fc.check_tar_format(str(kinds["tar"])) and fc.check_tar_format(str(kinds["tgz"]))
    assert not fc.check_tar_format(str(kinds["html"]))
    with pytest.raises(FileNotFoundError):
        fc.check_tar_format(str(tmp_path / "missing"))


def test_get_filetype_runs_file_or_falls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kinds = write_kinds(tmp_path)
    if shutil.which("file"):
        assert "tar archive" in fc.get_filetype(str(kinds["tar"]))
        # a name starting with "-" is a file name, not an option of `file`
        monkeypatch.chdir(tmp_path)
        assert "tar archive" in fc.get_filetype(kinds["odd"].name)
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    assert fc.get_filetype(str(kinds["tgz"])) == f"{kinds['tgz']}: gzip compressed data"
    with pytest.raises(FileNotFoundError):
        fc.get_filetype(str(tmp_path / "missing"))


def _fill(
    directory: Path, count: int, size: int = 4096, start: int = 0, step: int = 1
) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = directory / f"{i:06d}"
        path.write_bytes(b"x" * size)
        t = 1_000_000 + start + i * step  # file i was used at time start + i * step
        os.utime(path, (t, t))
        paths.append(path)
    return paths


def _by_mtime(path: str) -> float:
    return os.stat(path).st_mtime


def test_lru_cleanup_deletes_what_webdataset_deletes(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for root in (ours, theirs):  # the same tree twice, interleaved times, no ties
        _fill(root / "sub", 7, start=0, step=2)
        _fill(root, 13, start=1, step=2)
    for bound in (20 * 4096, 15.5 * 4096, 9 * 4096, 0):
        LRUCleanup(ours, bound, keyfn=_by_mtime, interval=None).cleanup()
        upstream.LRUCleanup(str(theirs), bound, keyfn=_by_mtime, interval=None).cleanup()
        left = sorted(str(p.relative_to(ours)) for p in ours.rglob("*") if p.is_file())
        right = sorted(str(p.relative_to(theirs)) for p in theirs.rglob("*") if p.is_file())
        assert left == right
        assert sum((ours / name).stat().st_size for name in left) <= bound
    assert left == []


def test_lru_cleanup_interval_and_default_key(tmp_path: Path) -> None:
    paths = []
    for i in range(4):
        path = tmp_path / f"f{i}"
        path.write_bytes(b"y" * 1000)
        paths.append(path)
        time.sleep(0.02)  # distinct ctimes: the default key, as in webdataset
    cleaner = LRUCleanup(str(tmp_path), cache_size=2500, interval=3600)
    cleaner.cleanup()
    assert [p.exists() for p in paths] == [False, False, True, True]
    (tmp_path / "f4").write_bytes(b"y" * 1000)
    cleaner.cleanup()  # ran less than an hour ago: nothing happens
    assert len(list(tmp_path.iterdir())) == 3
    cleaner.interval = None
    cleaner.cleanup()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f3", "f4"]
    LRUCleanup(str(tmp_path / "missing"), 0, interval=None).cleanup()  # no directory: no-op
    LRUCleanup(None, 0).cleanup()


def test_evict_lru_skips_kept_and_temporary_files(tmp_path: Path) -> None:
    paths = _fill(tmp_path, 5, size=100)
    (tmp_path / TEMP_DIR).mkdir()
    (tmp_path / TEMP_DIR / "123-x.part").write_bytes(b"z" * 1000)
    deleted = evict_lru(str(tmp_path), 150, keep=(str(paths[0]),))
    assert deleted == [str(p) for p in paths[1:]]  # oldest first, never the kept one
    assert paths[0].exists()
    assert (tmp_path / TEMP_DIR / "123-x.part").exists()
    assert evict_lru(str(tmp_path), 10**6) == []


def test_download_is_atomic(tmp_path: Path, http_server: HttpFileServer) -> None:
    make_shard(http_server.root / "x.tar", 1)
    dest = tmp_path / "out" / "x.tar"
    dest.parent.mkdir()
    fc.download(http_server.url("x.tar"), str(dest))
    assert dest.read_bytes() == (http_server.root / "x.tar").read_bytes()
    fc.download(f"pipe:cat {http_server.root / 'x.tar'}", str(tmp_path / "out" / "y.tar"))
    assert (tmp_path / "out" / "y.tar").read_bytes() == dest.read_bytes()
    with pytest.raises(OSError):  # the command fails after some output
        fc.download(f"pipe:cat {dest}; exit 3", str(tmp_path / "out" / "z.tar"))
    with pytest.raises(FileNotFoundError):
        fc.download(http_server.url("missing.tar"), str(tmp_path / "out" / "m.tar"))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["x.tar", "y.tar"]


def test_streaming_open(tmp_path: Path, http_server: HttpFileServer) -> None:
    make_shard(http_server.root / "r.tar", 2)
    local = tmp_path / "l.tar"
    make_shard(local, 3)
    missing = str(tmp_path / "missing.tar")
    got = list(fc.StreamingOpen()([{"url": str(local)}, http_server.url("r.tar")]))
    assert [d["url"] for d in got] == [str(local), http_server.url("r.tar")]
    assert got[0]["local_path"] == str(local) and "local_path" not in got[1]
    assert got[0]["stream"].read() == local.read_bytes()
    assert got[1]["stream"].read() == (http_server.root / "r.tar").read_bytes()
    for d in got:
        d["stream"].close()
    file_url = "file://" + str(local)
    (only,) = fc.StreamingOpen()([file_url])
    assert only["local_path"] == str(local)
    only["stream"].close()
    urls = [missing, str(local)]
    with pytest.raises(ShardNotFoundError):
        list(fc.StreamingOpen()(urls))
    skipped = list(fc.StreamingOpen(handler=ignore_and_continue)(urls))
    assert [d["url"] for d in skipped] == [str(local)]
    skipped[0]["stream"].close()
    assert list(fc.StreamingOpen(handler=ignore_and_stop)(urls)) == []


def test_file_cache_downloads_once_and_serves_without_the_server(tmp_path: Path) -> None:
    www = tmp_path / "www"
    www.mkdir()
    make_shard(www / "a.tar", 4)
    cache_dir = tmp_path / "cache"
    with HttpFileServer(www) as server:
        url = server.url("a.tar")
        cache = fc.FileCache(str(cache_dir))
        (first,) = cache([{"url": url}])
        with first["stream"] as stream:
            assert stream.read() == (www / "a.tar").read_bytes()
        assert first["local_path"] == str(cache_dir / "a.tar")  # webdataset's flat name
        requests = server.requests
    (again,) = fc.FileCache(str(cache_dir))([url])  # server gone: a hit
    again["stream"].close()
    assert again["local_path"] == first["local_path"] and requests == 1
    assert not list((cache_dir / TEMP_DIR).iterdir())


def test_file_cache_rejects_what_the_validator_rejects(
    tmp_path: Path, http_server: HttpFileServer
) -> None:
    (http_server.root / "page.tar").write_bytes(b"<html>login required</html>")
    cache = fc.FileCache(str(tmp_path / "c"))
    with pytest.raises(ValueError, match=r"not a tar archive.*login required"):
        cache.get_file(http_server.url("page.tar"))
    assert not (tmp_path / "c" / "page.tar").exists()
    lenient = fc.FileCache(str(tmp_path / "c"), validator=None)
    assert Path(lenient.get_file(http_server.url("page.tar"))).read_bytes().startswith(b"<html>")


def test_file_cache_names_bound_and_local_files(
    tmp_path: Path, http_server: HttpFileServer
) -> None:
    for i in range(4):
        make_shard(http_server.root / f"s{i}.tar", i, samples=5, size=1000)
    size = (http_server.root / "s0.tar").stat().st_size
    cache_dir = tmp_path / "c"
    cache = fc.FileCache(
        str(cache_dir), cache_size=int(2.5 * size), cache_cleanup_interval=0, verbose=False
    )
    for i in range(4):
        cache.get_file(http_server.url(f"s{i}.tar"))
        time.sleep(0.02)
    # the cleaner runs before each download (as webdataset's): before s3 it found 3 files
    # over the bound and deleted the oldest
    assert sorted(p.name for p in cache_dir.iterdir() if p.is_file()) == [
        "s1.tar",
        "s2.tar",
        "s3.tar",
    ]
    (http_server.root / "d").mkdir()
    shutil.copy(http_server.root / "s0.tar", http_server.root / "d" / "n.tar")
    nested = fc.FileCache(str(cache_dir), url_to_name=lambda u: fc.url_to_cache_name(u, 1))
    path = nested.get_file(http_server.url("d/n.tar"))
    assert path == str(cache_dir / "d" / "n.tar")
    assert Path(path).read_bytes() == (http_server.root / "s0.tar").read_bytes()
    for bad in ("", "..", "/etc/passwd"):
        with pytest.raises(ConfigError, match="not a file name inside the cache"):
            fc.FileCache(str(cache_dir), url_to_name=lambda u, b=bad: b).get_file(
                http_server.url("s1.tar")
            )
    local = http_server.root / "s0.tar"
    assert cache.get_file(str(local)) == str(local)
    assert cache.get_file("file://" + str(local)) == str(local)
    with pytest.raises(AssertionError):
        cache.get_file(7)  # type: ignore[arg-type]


def test_file_cache_handler_retries_then_skips_or_stops(tmp_path: Path) -> None:
    late = tmp_path / "late.tar"
    calls: list[str] = []

    def make_it_appear(exn: BaseException) -> bool:
        calls.append(type(exn).__name__)
        make_shard(late, 0, samples=1)
        return True

    cache = fc.FileCache(str(tmp_path / "c"), handler=make_it_appear)
    cache.retry_delay = 0.01
    (got,) = cache([str(late)])
    got["stream"].close()
    assert calls == ["FileNotFoundError"] and got["local_path"] == str(late)

    def always(exn: BaseException) -> bool:
        calls.append("again")
        return True

    calls.clear()
    retrying = fc.FileCache(str(tmp_path / "c"), handler=always)
    retrying.retries, retrying.retry_delay = 3, 0.001
    (got,) = retrying([str(tmp_path / "never.tar"), str(late)])
    got["stream"].close()
    assert got["url"] == str(late) and calls == ["again"] * 3
    stopping = fc.FileCache(str(tmp_path / "c"), handler=ignore_and_stop)
    assert list(stopping([str(tmp_path / "never.tar"), str(late)])) == []


def test_default_cache_dir_and_size_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("WDS_CLOUD_CACHE_DIR", "WDS_CACHE", "WDS_CLOUD_CACHE_SIZE", "WDS_CACHE_SIZE"):
        monkeypatch.delenv(name, raising=False)
    assert fc.default_cache_dir == "./_cache" == upstream.default_cache_dir
    assert fc.default_cache_size == 1e18
    monkeypatch.setenv("WDS_CACHE", "/tmp/wds-here")
    monkeypatch.setenv("WDS_CACHE_SIZE", "1e11")
    assert fc.default_cache_dir == "/tmp/wds-here"
    assert fc.default_cache_size == 1e11
    assert fc.FileCache().cache_dir == "/tmp/wds-here"
    assert ShardCache().max_bytes == 10**11
    monkeypatch.setenv("WDS_CLOUD_CACHE_DIR", "/tmp/wds-cloud-first")
    assert fc.default_cache_dir == "/tmp/wds-cloud-first"
    monkeypatch.setenv("WDS_CACHE_SIZE", "lots")
    with pytest.raises(ConfigError, match="WDS_CACHE_SIZE"):
        fc.default_cache_size  # noqa: B018
    with pytest.raises(AttributeError):
        fc.no_such_name  # noqa: B018


def test_webdataset_module_names_resolve_to_these() -> None:
    cache = webdataset_module("cache")
    assert cache.FileCache is fc.FileCache and cache.StreamingOpen is fc.StreamingOpen
    assert cache.LRUCleanup is LRUCleanup is wds_cloud.LRUCleanup
    assert cache.pipe_cleaner is fc.pipe_cleaner is wds_cloud.pipe_cleaner
    for name in ("url_to_cache_name", "download", "islocal", "check_tar_format"):
        assert getattr(cache, name) is getattr(fc, name)
