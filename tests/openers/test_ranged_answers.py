"""The helpers the S3, GCS, Azure and AIStore readers share for a GET's answer
(``openers/streams/resumable.py``): ``first_answer`` (where a body starts, a whole object
shorter than the offset), ``fetch_span`` (a ranged read's ``Content-Range`` checked, the body
closed on error) and ``explain``; against a real local HTTP server and urllib3."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3

from tests.support.http_server import HttpFileServer, serving
from wds_cloud.errors import ShardError, ShardOpenError, ShardReadError
from wds_cloud.openers.streams.resumable import (
    Opened,
    ThrottledError,
    content_range_total,
    explain,
    fetch_span,
    first_answer,
)

SIZE = 1000
DATA = random.Random(7).randbytes(SIZE)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[HttpFileServer]:
    with serving(tmp_path / "www", {"x.bin": DATA}) as server:
        yield server


def _get(pool: urllib3.PoolManager, url: str, offset: int, end: int | None = None) -> Any:
    last = "" if end is None else str(end - 1)
    return pool.request(
        "GET", url, headers={"Range": f"bytes={offset}-{last}"}, preload_content=False
    )


def _read(opened: Opened) -> bytes:
    out = b""
    while chunk := opened.body.read1(1 << 16):
        out += chunk
    opened.body.close()
    return out


def _size(raw: Any) -> int | None:
    if raw.status == 206:
        return content_range_total(raw.headers.get("Content-Range"))
    return int(raw.headers["Content-Length"])


@pytest.mark.parametrize("ignore_range", [False, True])
def test_the_body_starts_where_the_server_says(served: HttpFileServer, ignore_range: bool) -> None:
    """A ranged answer (206) starts at the offset, one that ignored the range (200) at 0; the
    bytes are the file's from there, at every offset up to the end."""
    served.ignore_range = ignore_range
    url = served.url("x.bin")
    with urllib3.PoolManager() as pool:
        for offset in [0, 1, 511, SIZE - 1]:
            raw = _get(pool, url, offset)
            opened = first_answer(raw, url, offset, raw.status, _size(raw))
            assert (raw.status, opened.start, opened.size) == (
                (200, 0, SIZE) if ignore_range else (206, offset, SIZE)
            )
            assert _read(opened) == DATA[opened.start :]


def test_a_whole_object_shorter_than_the_offset_is_an_error_and_frees_its_connection(
    served: HttpFileServer,
) -> None:
    served.ignore_range = True
    url = served.url("x.bin")
    with urllib3.PoolManager(maxsize=1) as pool:
        raw = _get(pool, url, SIZE + 5)
        assert raw.status == 200
        with pytest.raises(ShardOpenError, match=f"byte offset {SIZE + 5} is beyond the end") as e:
            first_answer(raw, url, SIZE + 5, raw.status, SIZE)
        assert f"{SIZE} bytes" in str(e.value) and e.value.url == url
        assert raw.closed
        slots = pool.connection_from_url(url).pool
        assert slots is not None and slots.qsize() == 1  # handed back, as requests would
        raw = _get(pool, url, 0)  # the pool serves again
        assert _read(first_answer(raw, url, 0, raw.status, _size(raw))) == DATA


class _Fetch:
    """A ``SpanFetch`` over plain HTTP: GETs stop at ``end``, the last ``Content-Range``."""

    def __init__(self, pool: urllib3.PoolManager, url: str) -> None:
        self.pool = pool
        self.url = url
        self.end: int | None = None
        self.content_range: str | None = None
        self.bodies: list[Any] = []

    def __call__(self, offset: int) -> Opened:
        raw = _get(self.pool, self.url, offset, self.end)
        self.bodies.append(raw)
        self.content_range = raw.headers.get("Content-Range")
        return first_answer(raw, self.url, offset, raw.status, _size(raw))


def test_fetch_span_reads_exactly_the_span(served: HttpFileServer) -> None:
    rng = random.Random(11)
    url = served.url("x.bin")
    with urllib3.PoolManager() as pool:
        for _ in range(200):
            first = rng.randrange(SIZE)
            end = rng.randint(first + 1, SIZE)
            fetch = _Fetch(pool, url)
            opened = fetch_span(fetch, first, end, url)
            assert fetch.end == end and opened.start == first
            assert _read(opened) == DATA[first:end]


def test_a_span_past_the_object_is_an_error_and_its_body_closed(served: HttpFileServer) -> None:
    url = served.url("x.bin")
    with urllib3.PoolManager() as pool:
        fetch = _Fetch(pool, url)
        with pytest.raises(ShardReadError, match=f"the object has {SIZE} bytes; the range ends"):
            fetch_span(fetch, 100, SIZE + 50, url)
        assert fetch.bodies[-1].closed


def test_explain_says_a_throttle_as_it_is_and_translates_the_rest() -> None:
    seen: list[tuple[BaseException, str]] = []

    def translate(exc: BaseException, /, *, url: str, offset: int | None = None) -> ShardError:
        seen.append((exc, url))
        return ShardReadError(f"translated: {exc}", url=url)

    assert explain(translate, "s3://b/k", ThrottledError("503 SlowDown")) == "503 SlowDown"
    failure = OSError("connection reset")
    assert "translated: connection reset" in explain(translate, "s3://b/k", failure)
    assert explain(translate, "s3://b/k", KeyboardInterrupt()) == "KeyboardInterrupt()"
    assert seen == [(failure, "s3://b/k")]
