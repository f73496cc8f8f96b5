"""Read-ahead (:mod:`wds_cloud.openers.streams.readahead`) against the bytes read without it.

Real servers: the HTTP file server fixture and SeaweedFS (the S3 tests' session server). Each
generated object is read through read-ahead with small limits and pieces (so the thread waits
for the reader many times) by tiny and uneven ``read``/``read1``/``readinto`` calls, and compared
with the object's bytes; a connection cut mid-body raises at the same offset, after every byte
before it; closing early ends the thread.
"""

from __future__ import annotations

import io
import pickle
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.openers.conftest import make_shard
from tests.s3 import conftest as s3_fixtures
from tests.support.http_server import HttpFileServer
from tests.support.ownership import NewThreads
from wds_cloud.core.shardopen import tarfile_samples
from wds_cloud.errors import ConfigError, ShardError, ShardReadError
from wds_cloud.openers.http.opener import HttpOpener
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.openers.streams.readahead import (
    DEFAULT_READAHEAD,
    ReadAhead,
    open_ahead,
    readahead_bytes,
)

# The S3 tests' fixtures over the one session SeaweedFS (tests/conftest.py), same names.
s3_endpoint = s3_fixtures.s3_endpoint
raw_client = s3_fixtures.raw_client
bucket = s3_fixtures.bucket
make_config = s3_fixtures.make_config

SIZES = [0, 1, 511, 512, 1000, 4095, 4096, 4097, 65_537, 300_001, 2_000_003]


def _objects(seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(n) for n in SIZES] + [
        rng.randbytes(rng.randrange(1, 200_000)) for _ in range(6)
    ]


def _drain(stream: Any, rng: random.Random) -> bytes:
    """Read ``stream`` to its end with a random mix of tiny and uneven calls."""
    out = bytearray()
    while True:
        how = rng.randrange(4)
        n = rng.choice([1, 2, 3, 7, 511, 513, 4096, 70_000])
        if how == 0:
            data = stream.read(n)
        elif how == 1:
            data = stream.read1(n)
        else:
            buf = bytearray(n)
            got = stream.readinto(buf)
            data = bytes(buf[:got])
        if not data:
            # read() / readinto() may only come back empty at the end: check it stays empty.
            assert stream.read(1) == b""
            return bytes(out)
        out += data


def _threads(new_threads: NewThreads) -> list[threading.Thread]:
    """This test's read-ahead threads still alive."""
    return new_threads(("wds-readahead", "wds-open-next"))


def _no_threads_left(new_threads: NewThreads) -> None:
    deadline = time.monotonic() + 10
    while _threads(new_threads) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _threads(new_threads) == []


@pytest.fixture
def www(tmp_path: Path) -> Iterator[tuple[HttpFileServer, Path]]:
    root = tmp_path / "www"
    root.mkdir()
    with HttpFileServer(root) as server:
        yield server, root


# -- the setting -------------------------------------------------------------------------------


def test_setting_resolution() -> None:
    assert readahead_bytes(None, {}) == DEFAULT_READAHEAD
    assert readahead_bytes(None, {"WDS_CLOUD_READAHEAD": "0"}) == 0
    assert readahead_bytes(None, {"WDS_CLOUD_READAHEAD": "32M"}) == 32 << 20
    assert readahead_bytes(None, {"WDS_CLOUD_READAHEAD": "512k"}) == 512 << 10
    assert readahead_bytes(None, {"WDS_CLOUD_READAHEAD": "1GiB"}) == 1 << 30
    assert readahead_bytes(4096, {"WDS_CLOUD_READAHEAD": "0"}) == 4096  # argument wins
    for bad in ("lots", "-1", "1.5M", "M"):
        with pytest.raises(ConfigError, match="WDS_CLOUD_READAHEAD"):
            readahead_bytes(None, {"WDS_CLOUD_READAHEAD": bad})
    with pytest.raises(ConfigError, match=r"OpenerRegistry\.readahead=-5 must be at least 0"):
        readahead_bytes(-5)


def test_registry_setting_travels_and_switches_off(
    www: tuple[HttpFileServer, Path], new_threads: NewThreads
) -> None:
    server, root = www
    (root / "a.bin").write_bytes(b"x" * 5000)
    registry = OpenerRegistry(readahead="64K")
    assert pickle.loads(pickle.dumps(registry)).readahead == 64 << 10
    assert registry.copy().readahead == 64 << 10
    with registry.open(server.url("a.bin")) as stream:
        assert isinstance(stream, ReadAhead)
        assert stream.read() == b"x" * 5000
    with OpenerRegistry(readahead=0).open(server.url("a.bin")) as stream:
        assert not isinstance(stream, ReadAhead)
    local = root / "a.bin"
    with registry.open(str(local)) as stream:
        assert not isinstance(stream, ReadAhead)  # local files are mapped, not read ahead
    _no_threads_left(new_threads)


# -- differential: same bytes as the object -----------------------------------------------------


@pytest.mark.parametrize(
    "limit,piece", [(1, 1), (4096, 1000), (100_000, 65_536), (16 << 20, 1 << 20)]
)
def test_http_bytes_equal(
    www: tuple[HttpFileServer, Path], limit: int, piece: int, new_threads: NewThreads
) -> None:
    server, root = www
    objects = _objects(limit)
    if limit == 1:
        objects = [o for o in objects if len(o) <= 70_000]  # byte-at-a-time: keep it short
    opener = HttpOpener()
    rng = random.Random(limit ^ piece)
    for i, data in enumerate(objects):
        (root / f"o{i}.bin").write_bytes(data)
        url = server.url(f"o{i}.bin")
        plain = _drain(opener.open(url), random.Random(i))
        with ReadAhead(opener.open(url), url=url, limit=limit, piece=piece) as stream:
            ahead = _drain(stream, rng)
        assert plain == data
        assert ahead == data, (i, len(data), len(ahead))
    _no_threads_left(new_threads)


def test_s3_bytes_equal(
    s3_endpoint: str, raw_client: Any, bucket: str, new_threads: NewThreads
) -> None:
    registry = OpenerRegistry(readahead=0)
    registry.register("s3", "wds_cloud.openers.s3.opener:S3Opener", override=True)
    from wds_cloud.openers.s3.opener import S3Opener

    for prefetch in (0, 3):
        opener = S3Opener(make_config(s3_endpoint, prefetch=prefetch, prefetch_chunk=70_001))
        rng = random.Random(prefetch)
        for i, data in enumerate(_objects(7 + prefetch)):
            key = f"o{prefetch}-{i}.bin"
            raw_client.put_object(Bucket=bucket, Key=key, Body=data)
            url = f"s3://{bucket}/{key}"
            for limit, piece in ((4096, 999), (1 << 20, 1 << 20)):
                with ReadAhead(opener.open(url), url=url, limit=limit, piece=piece) as stream:
                    assert _drain(stream, rng) == data, (prefetch, i, limit)
    _no_threads_left(new_threads)


def test_shard_samples_equal_with_and_without(
    www: tuple[HttpFileServer, Path], new_threads: NewThreads
) -> None:
    """tarfile_samples over several shards: next shard opened early, same samples in order."""
    server, root = www
    urls = []
    for i in range(5):
        make_shard(root / f"shard-{i}.tar", i, samples=30, size=2000 + 997 * i)
        urls.append(server.url(f"shard-{i}.tar"))
    urls.append(str(root / "shard-0.tar"))  # a local shard among them: opened on the spot

    def samples(readahead: int) -> list[tuple[str, bytes]]:
        registry = OpenerRegistry(readahead=readahead)
        return [(s["__key__"], s["bin"]) for s in tarfile_samples(urls, registry=registry)]

    expected = samples(0)
    assert len(expected) == 6 * 30
    assert samples(4096) == expected
    assert samples(16 << 20) == expected
    _no_threads_left(new_threads)


def test_next_shard_is_opened_while_the_first_is_read(
    www: tuple[HttpFileServer, Path], new_threads: NewThreads
) -> None:
    server, root = www
    seen: list[str] = []
    server.before_response = lambda n, path: seen.append(path)
    for i in range(3):
        make_shard(root / f"shard-{i}.tar", i, samples=50)
    urls = [server.url(f"shard-{i}.tar") for i in range(3)]
    it = tarfile_samples(urls, registry=OpenerRegistry(readahead=1 << 20))
    first = next(it)
    assert first["__url__"] == urls[0]
    deadline = time.monotonic() + 10
    while not any(p.endswith("shard-1.tar") for p in seen) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert any(p.endswith("shard-1.tar") for p in seen), seen  # requested before shard 0 ended
    assert not any(p.endswith("shard-2.tar") for p in seen)  # one shard ahead, not more
    it.close()  # stops both streams: the one read and the one opened early
    _no_threads_left(new_threads)


def test_open_ahead_order_errors_and_close(new_threads: NewThreads) -> None:
    opened: list[int] = []
    closed: list[int] = []

    def open_item(item: int) -> int:
        if item == 3:
            raise KeyError("three")
        opened.append(item)
        return item

    got = []
    for _item, get in open_ahead(
        range(6), open_item, early=lambda i: i % 2 == 1, close=closed.append
    ):
        try:
            got.append(get())
        except KeyError:
            got.append(-1)
    assert got == [0, 1, 2, -1, 4, 5]
    pulled: list[int] = []

    def source(n: int) -> Iterator[int]:
        for i in range(n):
            pulled.append(i)
            yield i

    # Items that are not opened early are not taken ahead either (a directory queue deletes
    # the previous file when the next one is asked for).
    for item, _get in open_ahead(source(4), open_item, early=lambda i: False, close=closed.append):
        assert pulled[-1] == item
    gen = open_ahead(range(6), open_item, early=lambda i: True, close=closed.append)
    _item, get = next(gen)
    assert get() == 0
    gen.close()  # item 1 was opened early and never taken: closed
    assert closed == [1]
    _no_threads_left(new_threads)


# -- errors keep their place in the stream -------------------------------------------------------


@pytest.mark.parametrize("cut", [1, 100_000])
def test_http_cut_raises_at_its_offset(
    www: tuple[HttpFileServer, Path], cut: int, new_threads: NewThreads
) -> None:
    server, root = www
    data = random.Random(cut).randbytes(1_000_000)
    (root / "cut.bin").write_bytes(data)
    server.cut_after = cut  # the first response is cut; every later one is refused

    def refuse_resumes(number: int, path: str) -> None:
        server.status_for["/cut.bin"] = 503  # checked before this hook: from request 2 on

    server.before_response = refuse_resumes
    url = server.url("cut.bin")
    registry = OpenerRegistry(readahead=8192)
    registry.register("http", HttpOpener(retries=0), override=True)
    stream = registry.open(url)
    assert isinstance(stream, ReadAhead)
    out = bytearray()
    rng = random.Random(cut)
    with pytest.raises(ShardReadError) as info:
        while chunk := stream.read(rng.choice([1, 3, 4096, 50_000])):
            out += chunk
    assert bytes(out) == data[:cut]  # every byte before the cut, none invented
    assert info.value.url == url
    assert info.value.offset == cut
    with pytest.raises(ShardReadError):
        stream.read(1)  # still failing, never a silent end
    stream.close()
    _no_threads_left(new_threads)


class _Breaks(io.RawIOBase):
    """A source that delivers ``good`` bytes, then raises a plain OSError."""

    def __init__(self, good: bytes) -> None:
        self.good = good
        self.closed_by_reader = False

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if not self.good:
            raise OSError("connection reset by peer")
        data, self.good = self.good[:n], self.good[n:]
        return data

    def close(self) -> None:
        self.closed_by_reader = True
        super().close()


@pytest.mark.parametrize("size", [0, 5, 3000])
def test_plain_error_becomes_shard_read_error(size: int, new_threads: NewThreads) -> None:
    source = _Breaks(bytes(range(256)) * 12)
    source.good = source.good[:size]
    expected = source.good
    stream = ReadAhead(source, url="https://example.invalid/s.tar", limit=1000, piece=333)
    out = b""
    with pytest.raises(ShardError) as info:
        while chunk := stream.read(7):
            out += chunk
    assert out == expected
    assert isinstance(info.value, ShardReadError)
    assert info.value.offset == size
    assert info.value.url == "https://example.invalid/s.tar"
    assert "connection reset" in str(info.value)
    stream.close()
    assert source.closed_by_reader
    _no_threads_left(new_threads)


# -- closing early ends the thread ----------------------------------------------------------------


def test_close_early_ends_thread(
    www: tuple[HttpFileServer, Path],
    s3_endpoint: str,
    raw_client: Any,
    bucket: str,
    new_threads: NewThreads,
) -> None:
    server, root = www
    data = random.Random(1).randbytes(3_000_000)
    (root / "big.bin").write_bytes(data)
    raw_client.put_object(Bucket=bucket, Key="big.bin", Body=data)
    registry = OpenerRegistry(readahead=65_536)
    registry.register("s3", _S3Factory(s3_endpoint), override=True)
    for url in (server.url("big.bin"), f"s3://{bucket}/big.bin"):
        for consumed in (0, 1, 200_000):
            stream = registry.open(url)
            assert stream.read(consumed) == data[:consumed]
            assert _threads(new_threads)  # reading ahead
            stream.close()
            assert stream.source.closed  # type: ignore[attr-defined]
            _no_threads_left(new_threads)
    # Dropped without close(): garbage collection closes it.
    stream = registry.open(server.url("big.bin"))
    stream.read(10)
    del stream
    _no_threads_left(new_threads)


class _S3Factory:
    """An S3 opener for the test server with the test credentials, registered as an object
    (a plugin: it says that its streams come over a network, so they are read ahead)."""

    remote = True

    def __init__(self, endpoint: str) -> None:
        from wds_cloud.openers.s3.opener import S3Opener

        self._opener = S3Opener(make_config(endpoint))

    def open(self, url: str, **options: Any) -> Any:
        return self._opener.open(url, **options)


@pytest.mark.parametrize("cut", [2000, 200_000])
def test_s3_cut_raises_at_its_offset(
    seaweed: Any, raw_client: Any, bucket: str, faulty_proxy: Any, cut: int, new_threads: NewThreads
) -> None:
    """Every connection to SeaweedFS is reset after ``cut`` response bytes (headers
    included) and no retry is allowed: the bytes before the cut arrive, then the error, with
    the URL and the offset of the first byte that did not."""
    data = random.Random(cut).randbytes(1_000_000)
    raw_client.put_object(Bucket=bucket, Key="cut.bin", Body=data)
    proxy = faulty_proxy(seaweed.ports["s3.port"], cut_after=cut, reset=True)
    from wds_cloud.openers.s3.opener import S3Opener

    url = f"s3://{bucket}/cut.bin"
    source = S3Opener(make_config(proxy.url, retries=0)).open(url)
    stream = ReadAhead(source, url=url, limit=4096, piece=1000)
    out = bytearray()
    with pytest.raises(ShardReadError) as info:
        while chunk := stream.read(777):
            out += chunk
    assert 0 < len(out) < cut
    assert bytes(out) == data[: len(out)]
    assert info.value.url == url
    assert info.value.offset == len(out)
    stream.close()
    _no_threads_left(new_threads)
