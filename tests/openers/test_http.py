"""HttpOpener against a real local HTTP server: statuses, redirects, resume, pinning."""

from __future__ import annotations

import os
import pickle
from collections import Counter
from pathlib import Path

import pytest

from tests.openers.conftest import make_shard
from tests.support.http_server import HttpFileServer
from tests.support.ownership import refused_port
from wds_cloud.core.shardopen import tarfile_samples
from wds_cloud.errors import ConfigError, ShardNotFoundError, ShardOpenError, ShardReadError
from wds_cloud.openers.http.opener import HttpConfig, HttpOpener
from wds_cloud.openers.registry import OpenerRegistry


def _opener(**kw: object) -> HttpOpener:
    kw.setdefault("backoff", 0.0)
    return HttpOpener(**kw)  # type: ignore[arg-type]


def _put(server: HttpFileServer, name: str, data: bytes) -> str:
    (server.root / name).write_bytes(data)
    return server.url(name)


def test_every_sample_arrives_exactly_once_through_a_cutting_server(
    http_server: HttpFileServer,
) -> None:
    expected: list[str] = []
    urls = []
    for i in range(8):
        expected += make_shard(http_server.root / f"shard-{i}.tar", i, samples=15)
        urls.append(http_server.url(f"shard-{i}.tar"))
    http_server.cut_after = 7000  # every response breaks after 7000 bytes
    registry = OpenerRegistry()
    registry.register("http", _opener(retries=3), override=True)
    seen = Counter()
    for sample in tarfile_samples(urls, registry=registry):
        key = sample["__key__"]
        seen[key] += 1
        index, i = int(key[1:4]), int(key[5:])
        assert sample["txt"] == key.encode()
        assert sample["bin"] == bytes([(index + i) % 256]) * (3000 + i)
    assert sorted(seen) == sorted(expected)
    assert set(seen.values()) == {1}
    assert http_server.cuts >= 8 * 5  # the resumes really happened


def test_cut_every_other_response(http_server: HttpFileServer) -> None:
    data = os.urandom(400_000)
    url = _put(http_server, "x.bin", data)
    http_server.cut_after, http_server.cut_every = 30_000, 2
    with _opener().open(url) as stream:
        assert stream.read() == data
    assert http_server.cuts >= 1


def test_resume_without_validators(http_server: HttpFileServer) -> None:
    data = os.urandom(200_000)
    url = _put(http_server, "x.bin", data)
    http_server.no_validators = True
    http_server.cut_after = 50_000
    with _opener().open(url) as stream:
        assert stream.read() == data


def test_shard_changed_mid_read_is_a_read_error(http_server: HttpFileServer) -> None:
    path = http_server.root / "x.bin"
    path.write_bytes(os.urandom(200_000))

    def rewrite(number: int, _path: str) -> None:
        if number == 2:  # the resume request sees a new version of the file
            path.write_bytes(os.urandom(200_001))

    http_server.before_response = rewrite
    http_server.cut_after = 50_000
    stream = _opener().open(http_server.url("x.bin"))
    with pytest.raises(ShardReadError, match="changed") as info:
        stream.read()
    stream.close()
    assert info.value.offset == 50_000
    assert info.value.url == http_server.url("x.bin")


def test_server_ignoring_range_is_a_read_error(http_server: HttpFileServer) -> None:
    url = _put(http_server, "x.bin", os.urandom(100_000))
    http_server.ignore_range = True
    http_server.cut_after = 10_000
    stream = _opener().open(url)
    with pytest.raises(ShardReadError, match="HTTP 200, not 206"):
        stream.read()
    stream.close()


def test_retries_exhausted_is_a_read_error(http_server: HttpFileServer) -> None:
    url = _put(http_server, "x.bin", os.urandom(100_000))
    http_server.cut_after = 0  # every response ends before its first byte
    stream = _opener(retries=2).open(url)
    with pytest.raises(ShardReadError, match="giving up after 2 retries") as info:
        stream.read()
    stream.close()
    assert info.value.offset == 0


@pytest.mark.parametrize("status", [404, 410])
def test_not_found_statuses(http_server: HttpFileServer, status: int) -> None:
    http_server.status_for["/gone.tar"] = status
    with pytest.raises(ShardNotFoundError, match=f"HTTP {status}"):
        _opener().open(http_server.url("gone.tar"))


@pytest.mark.parametrize("status", [401, 403, 400, 500])
def test_error_statuses_show_status_and_body(http_server: HttpFileServer, status: int) -> None:
    http_server.status_for["/x.tar"] = status
    with pytest.raises(ShardOpenError, match=f"HTTP {status}.*status {status} for /x.tar"):
        _opener(retries=1).open(http_server.url("x.tar"))


@pytest.mark.parametrize("status", [408, 500, 502, 504])
def test_transient_status_is_retried(http_server: HttpFileServer, status: int) -> None:
    """A transient answer is retried after the opener's backoff. (429 and 503 are throttling:
    the endpoint's limiter paces the retry instead, tests/openers/test_throttle*.py.)"""
    url = _put(http_server, "x.bin", b"payload")
    http_server.status_for["/x.bin"] = status
    opener = _opener(retries=3)
    # the server recovers while the opener backs off
    opener._sleep = lambda _delay: http_server.status_for.clear()
    with opener.open(url) as stream:
        assert stream.read() == b"payload"
    assert http_server.requests == 2


def test_connection_refused() -> None:
    with (
        refused_port() as port,
        pytest.raises(ShardOpenError, match=r"giving up after 1 retries .*cannot connect") as info,
    ):
        _opener(retries=1).open(f"http://127.0.0.1:{port}/x.tar")
    assert isinstance(info.value.__cause__, ConnectionRefusedError)


def test_redirects_are_followed_and_bounded(http_server: HttpFileServer) -> None:
    data = os.urandom(10_000)
    _put(http_server, "real.tar", data)
    http_server.redirects["/a.tar"] = "/b.tar"
    http_server.redirects["/b.tar"] = http_server.url("real.tar")
    with _opener().open(http_server.url("a.tar")) as stream:
        assert stream.read() == data
    http_server.redirects["/loop.tar"] = "/loop.tar"
    with pytest.raises(ShardOpenError, match="redirects"):
        _opener(max_redirects=3).open(http_server.url("loop.tar"))


def test_query_strings_reach_the_server(http_server: HttpFileServer) -> None:
    data = b"abc"
    _put(http_server, "q.tar", data)
    with _opener().open(http_server.url("q.tar") + "?sig=1&x=%20") as stream:
        assert stream.read() == data


def test_config_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WDS_CLOUD_HTTP_TIMEOUT", "7.5")
    monkeypatch.setenv("WDS_CLOUD_HTTP_RETRIES", "9")
    monkeypatch.setenv("WDS_CLOUD_HTTP_BACKOFF", "0.01")
    monkeypatch.setenv("WDS_CLOUD_HTTP_STALL_TIMEOUT", "30")
    config = OpenerRegistry().get("http").config
    assert (config.timeout, config.retries, config.backoff) == (7.5, 9, 0.01)
    assert config.stall_timeout == 30
    assert HttpOpener(retries=1).config.retries == 1
    monkeypatch.setenv("WDS_CLOUD_HTTP_STALL_TIMEOUT", "0")
    with pytest.raises(ConfigError, match="WDS_CLOUD_HTTP_STALL_TIMEOUT"):
        HttpOpener()
    monkeypatch.setenv("WDS_CLOUD_HTTP_TIMEOUT", "soon")
    with pytest.raises(ConfigError, match="WDS_CLOUD_HTTP_TIMEOUT"):
        HttpOpener()


def test_bad_url() -> None:
    with pytest.raises(ConfigError):
        _opener().open("http:///nohost")


def test_opener_pickles_with_its_config(http_server: HttpFileServer) -> None:
    url = _put(http_server, "x.bin", b"123")
    opener = pickle.loads(pickle.dumps(HttpOpener(HttpConfig(headers={"X-A": "1"}), retries=2)))
    assert opener.config.retries == 2 and opener.config.headers == {"X-A": "1"}
    with opener.open(url) as stream:
        assert stream.read() == b"123"


def test_large_file_in_big_reads(tmp_path: Path, http_server: HttpFileServer) -> None:
    data = os.urandom(8 << 20)
    url = _put(http_server, "big.bin", data)
    buffer = bytearray(1 << 20)
    out = bytearray()
    with _opener().open(url) as stream:
        while n := stream.readinto(buffer):
            out += buffer[:n]
    assert out == data
