"""HttpOpener.open_at against the real local HTTP server: bytes from an offset, resumed after
cuts, a server that ignores Range, offsets at and past the end."""

from __future__ import annotations

import logging
import os
import random
from typing import Any

import pytest

from tests.openers.open_at_cases import check_ends, check_open_at
from tests.support.http_server import HttpFileServer
from wds_cloud.errors import ShardNotFoundError, ShardOpenError, ShardReadError
from wds_cloud.openers.http.opener import HttpOpener


def _opener(**kw: Any) -> HttpOpener:
    kw.setdefault("backoff", 0.0)
    return HttpOpener(**kw)


def _put(server: HttpFileServer, name: str, data: bytes) -> str:
    (server.root / name).write_bytes(data)
    return server.url(name)


@pytest.mark.parametrize("size", [1, 513, 10_240, 250_001, 1_300_000])
def test_open_at_equals_the_bytes_from_the_offset(http_server: HttpFileServer, size: int) -> None:
    data = random.Random(size).randbytes(size)
    url = _put(http_server, f"obj-{size}.bin", data)
    assert len(check_open_at(_opener(), url, data, seed=size)) == 40


def test_open_at_resumes_after_cuts(http_server: HttpFileServer, faulty_proxy: Any) -> None:
    data = os.urandom(400_000)
    _put(http_server, "x.bin", data)
    proxy = faulty_proxy(http_server.port, cut_after=30_000)  # every connection is cut
    url = f"{proxy.url}/x.bin"
    opener = _opener(retries=3)
    for off in (1, 100_000, 399_000):
        with opener.open_at(url, off) as stream:
            assert stream.read() == data[off:]
    assert proxy.cuts >= 10  # (400_000 - 100_000) / 30_000 resumes at least


def test_open_at_reads_only_from_the_offset(http_server: HttpFileServer, faulty_proxy: Any) -> None:
    """The server sends the bytes from the offset, not the ones before (counted by a proxy)."""
    data = os.urandom(1_000_000)
    _put(http_server, "x.bin", data)
    proxy = faulty_proxy(http_server.port)
    with _opener().open_at(f"{proxy.url}/x.bin", 900_000) as stream:
        assert stream.read() == data[900_000:]
    assert proxy.ranged_requests == 1
    assert 100_000 <= proxy.bytes_forwarded < 100_000 + 2_000  # the tail and one header


def test_server_ignoring_range_is_read_and_skipped(
    http_server: HttpFileServer, faulty_proxy: Any, caplog: pytest.LogCaptureFixture
) -> None:
    data = os.urandom(300_000)
    _put(http_server, "x.bin", data)
    http_server.ignore_range = True
    proxy = faulty_proxy(http_server.port)
    logger = "wds_cloud.openers.http.read"
    with (
        caplog.at_level(logging.WARNING, logger=logger),
        _opener().open_at(f"{proxy.url}/x.bin", 123_456) as stream,
    ):
        assert stream.read() == data[123_456:]
    assert proxy.bytes_forwarded >= 300_000  # the whole object came, and was skipped
    assert "ignored Range" in caplog.text


def test_server_ignoring_range_past_the_end(http_server: HttpFileServer) -> None:
    url = _put(http_server, "x.bin", os.urandom(1000))
    http_server.ignore_range = True
    with pytest.raises(ShardOpenError, match=r"offset 1001 is beyond the end.*1000 bytes"):
        _opener().open_at(url, 1001)


def test_resume_of_a_stream_from_a_server_ignoring_range_is_an_error(
    http_server: HttpFileServer,
) -> None:
    url = _put(http_server, "x.bin", os.urandom(100_000))
    http_server.ignore_range = True
    http_server.cut_after = 60_000
    stream = _opener().open_at(url, 10_000)
    with pytest.raises(ShardReadError, match="HTTP 200, not 206"):
        stream.read()
    stream.close()


def test_shard_changed_between_requests(http_server: HttpFileServer) -> None:
    path = http_server.root / "x.bin"
    path.write_bytes(os.urandom(200_000))

    def rewrite(number: int, _path: str) -> None:
        if number == 2:
            path.write_bytes(os.urandom(200_001))

    http_server.before_response = rewrite
    http_server.cut_after = 50_000
    stream = _opener().open_at(http_server.url("x.bin"), 20_000)
    with pytest.raises(ShardReadError) as info:
        stream.read()
    stream.close()
    assert info.value.offset == 70_000
    assert info.value.url == http_server.url("x.bin")


def test_offsets_at_and_past_the_end(http_server: HttpFileServer) -> None:
    url = _put(http_server, "x.bin", os.urandom(5000))
    check_ends(_opener(), url, 5000)


def test_missing_object(http_server: HttpFileServer) -> None:
    with pytest.raises(ShardNotFoundError):
        _opener().open_at(http_server.url("nope.tar"), 10)
