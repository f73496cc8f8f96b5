"""``FilesSource.read``: samples in order with their bytes from local files (read one after
the other) and over HTTP (several requests in flight, a bounded read-ahead), errors at the
sample they belong to naming the file, and no thread left behind."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.http_server import HttpFileServer
from tests.support.ownership import NewThreads
from wds_cloud.errors import ShardNotFoundError
from wds_cloud.jobs.sources import FILES_IN_FLIGHT, SAMPLES_AHEAD, FilesSource
from wds_cloud.openers.registry import OpenerRegistry

Expected = list[tuple[str, dict[str, bytes]]]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[HttpFileServer]:
    with HttpFileServer(tmp_path) as srv:
        yield srv


def _tree(root: Path, n: int, seed: int, url: object = str) -> tuple[FilesSource, Expected]:
    """``n`` samples of 1-3 files of random sizes under ``root``; ``url(path)`` names a file."""
    rng = random.Random(seed)
    samples, expected = [], []
    for i in range(n):
        members, data = [], {}
        for ext in rng.sample(("jpg", "json", "cls", "Txt"), rng.randint(1, 3)):
            body = rng.randbytes(rng.choice((0, 1, 700, rng.randint(0, 5000))))
            path = root / f"k{i:04d}.{ext}"
            path.write_bytes(body)
            members.append((ext, url(path)))  # type: ignore[operator]
            data[ext.lower()] = body
        samples.append((f"k{i:04d}", tuple(members)))
        expected.append((f"k{i:04d}", data))
    return FilesSource(tuple(samples)), expected


def _over_http(server: HttpFileServer) -> object:
    return lambda path: server.url(path.name)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("where", ["local", "http"])
def test_samples_in_order_with_their_bytes(
    tmp_path: Path, server: HttpFileServer, seed: int, where: str
) -> None:
    n = random.Random(seed).randint(0, 150)
    source, expected = _tree(tmp_path, n, seed, str if where == "local" else _over_http(server))
    got = list(source.read(OpenerRegistry()))
    assert [(s.pop("__key__"), s) for s, _ in got] == expected
    assert [n for _, n in got] == [sum(map(len, d.values())) for _, d in expected]


def test_remote_files_are_read_several_at_once_a_bounded_way_ahead(
    tmp_path: Path, server: HttpFileServer, new_threads: NewThreads
) -> None:
    source, expected = _tree(tmp_path, 200, seed=9, url=_over_http(server))
    lock = threading.Lock()
    state = {"now": 0, "most": 0, "asked": 0}

    def slow(number: int, path: str) -> None:  # a 10 ms round trip, counted
        with lock:
            state["now"] += 1
            state["asked"] += 1
            state["most"] = max(state["most"], state["now"])
        time.sleep(0.01)
        with lock:
            state["now"] -= 1

    server.before_response = slow
    reader = source.read(OpenerRegistry())
    first, _ = next(reader)
    assert first["__key__"] == "k0000"
    time.sleep(0.3)  # the read-ahead fills up to its bound, no further
    reader.close()
    files = [len(d) for _, d in expected]
    assert files[0] <= state["asked"] <= sum(files[: SAMPLES_AHEAD + 1]), state
    assert 2 <= state["most"] <= FILES_IN_FLIGHT, state  # several requests at once, never more
    assert not new_threads("wds-files")


def test_local_files_are_read_without_threads(tmp_path: Path, new_threads: NewThreads) -> None:
    source, expected = _tree(tmp_path, 30, seed=2)
    seen, threads = 0, []
    for _sample in source.read(OpenerRegistry()):
        seen += 1
        threads += new_threads(("wds-", "ThreadPoolExecutor-"))  # the names the package's carry
    assert seen == len(expected) and threads == []


@pytest.mark.parametrize("where", ["local", "http"])
def test_a_missing_file_fails_at_its_sample_naming_it(
    tmp_path: Path, server: HttpFileServer, where: str
) -> None:
    source, _ = _tree(tmp_path, 40, seed=3, url=str if where == "local" else _over_http(server))
    gone = source.samples[25][1][0][1]
    (tmp_path / gone.rsplit("/", 1)[1]).unlink()
    keys = []
    with pytest.raises(ShardNotFoundError) as info:
        for sample, _ in source.read(OpenerRegistry()):
            keys.append(sample["__key__"])
    assert keys == [f"k{i:04d}" for i in range(25)]
    assert gone in str(info.value)
