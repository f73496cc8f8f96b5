"""Indexes and random access over HTTP (the threaded test server, through a counting proxy).

An HTTP server cannot be written to, so the indexes are built where the files are and served
beside them; everything else (check, ``WebDataset(index.json)``, ``IndexedWebDataset``, loaders)
runs over ``http://``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import wds_cloud as wds
from tests.support import indexcheck
from tests.support.http_server import HttpFileServer
from wds_cloud.index.build import build_index, scan_shard
from wds_cloud.index.check import check_index
from wds_cloud.openers.http.opener import HttpOpener
from wds_cloud.openers.registry import OpenerRegistry


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("http-index")
    names = []
    for name, blob in indexcheck.indexable_archives(40):
        (root / name).write_bytes(blob)
        names.append(name)
    build_index([str(root / n) for n in names], json=str(root / "index.json"))
    with HttpFileServer(root) as server:
        yield server, root, names


def _registry(**config: Any) -> OpenerRegistry:
    registry = OpenerRegistry()
    registry.register("http", HttpOpener(backoff=0.01, **config), override=True)
    return registry


def test_build_check_and_read(served: Any) -> None:
    server, root, names = served
    registry = _registry()
    urls = [server.url(n) for n in names]
    for url, name in zip(urls, names, strict=True):  # built over HTTP: the same bytes
        assert (
            scan_shard(url, registry=registry).idx == (root / name).with_suffix(".idx").read_bytes()
        )
    assert all(c.ok for c in check_index(server.url("index.json"), registry=registry))
    want = indexcheck.sequential_samples(urls, registry)
    assert len(wds.WebDataset(server.url("index.json"), registry=registry)) == len(want)
    ds = wds.IndexedWebDataset(server.url("index.json"), registry=registry)
    assert ds.urls == urls
    assert [ds[i] for i in range(len(ds))] == want


def test_one_request_per_sample_on_kept_alive_connections(
    served: Any, faulty_proxy: Callable[..., Any]
) -> None:
    server = served[0]
    proxy = faulty_proxy(server.port)
    ds = wds.IndexedWebDataset(f"{proxy.url}/index.json", registry=_registry())
    start = proxy.connections
    indexcheck.assert_one_request_per_sample(
        ds, lambda: proxy.ranged_requests, list(range(0, len(ds), 3))
    )
    assert proxy.connections - start == 1  # one kept-alive connection served every read


@pytest.mark.parametrize("context", ["fork", pytest.param("spawn", marks=pytest.mark.slow)])
def test_dataloader_workers(served: Any, context: str) -> None:
    server = served[0]
    ds = wds.IndexedWebDataset(server.url("index.json"), registry=_registry())
    indexcheck.assert_dataloader(ds, context)


def test_distributed_sampler(served: Any) -> None:
    ds = wds.IndexedWebDataset(served[0].url("index.json"), registry=_registry())
    indexcheck.assert_distributed_sampler(ds)


def test_ranged_reads_resume_after_cuts_and_survive_ignored_ranges(served: Any) -> None:
    server, root, names = served
    registry = _registry()
    url = server.url(names[0])
    data = (root / names[0]).read_bytes()
    server.cut_after = 700  # every response breaks after 700 bytes: resumed each time
    try:
        assert wds.read_range(url, 1000, 5000, registry=registry) == data[1000:6000]
    finally:
        server.cut_after = None
    server.ignore_range = True  # whole object answered: the bytes before the range skipped
    try:
        assert wds.read_range(url, 1000, 5000, registry=registry) == data[1000:6000]
    finally:
        server.ignore_range = False
    with pytest.raises(wds.ShardReadError, match="ends at byte"):
        wds.read_range(url, len(data) - 10, 20, registry=registry)
    with pytest.raises(wds.ShardNotFoundError):
        wds.read_range(server.url("nope.tar"), 0, 10, registry=registry)


def test_missing_indexes_built_in_memory(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from tests.support import samplegen

    for seed in range(2):
        (tmp_path / f"s{seed}.tar").write_bytes(samplegen.generate(seed, dali_safe=True).blob)
    with HttpFileServer(tmp_path) as server:
        urls = [server.url(f"s{seed}.tar") for seed in range(2)]
        with pytest.raises(wds.ShardNotFoundError, match="wds-cloud index"):
            wds.IndexedWebDataset(urls, registry=_registry())
        with caplog.at_level(logging.INFO, logger="wds_cloud"):
            ds = wds.IndexedWebDataset(urls, registry=_registry(), build_missing=True)
        assert "building them now" in caplog.text and "using it from memory" in caplog.text
        assert [ds[i] for i in range(len(ds))] == indexcheck.sequential_samples(urls, _registry())


def test_cache_dir_downloads_each_shard_once(served: Any, tmp_path: Path) -> None:
    """With ``cache_dir`` the first access to a shard downloads it whole (one GET), later ones
    are slices of the cached file: samples equal ``WebDataset(..., cache_dir=)``'s, whose
    ``__local_path__`` is the same cache file."""
    server = served[0]
    json_url = server.url("index.json")
    ds = wds.IndexedWebDataset(json_url, registry=_registry(), cache_dir=str(tmp_path / "c"))
    before = server.requests
    got = [ds[i] for i in range(len(ds))]
    assert server.requests - before == len(ds.urls)
    stream = wds.WebDataset(json_url, registry=_registry(), cache_dir=str(tmp_path / "c"))
    assert got == list(stream)
    assert all(s["__local_path__"].startswith(str(tmp_path / "c")) for s in got)


def test_read_range_without_a_ranged_opener_skips_a_stream(served: Any) -> None:
    _, root, names = served
    path = root / names[1]
    data = path.read_bytes()
    registry = OpenerRegistry()
    assert wds.read_range(f"pipe:cat {path}", 3000, 700, registry=registry) == data[3000:3700]
    with pytest.raises(wds.ShardReadError, match="ended before byte"):
        wds.read_range(f"pipe:cat {path}", len(data) - 5, 10, registry=registry)
