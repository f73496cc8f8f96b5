"""Differential tests over the HTTP and ``pipe:`` openers (see tests/core/test_tar_differential.py).

Archives from :mod:`tests.support.targen` are written once per module and read through
``open_url(url)`` (the real :class:`HttpOpener` / :class:`PipeOpener`) and ``iter_tar`` with the
archive's small buffer; stdlib ``tarfile`` is the reference. 200 archives over HTTP (a module
HTTP server on 127.0.0.1; the package's ``http_server`` fixture is per test), 150 through
``pipe:cat FILE``, and the two original-failure shards through ``wds.WebDataset`` on both.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import targen
from tests.support.http_server import HttpFileServer
from tests.support.targen import Archive
from wds_cloud.openers.registry import OpenerRegistry

HTTP_SEEDS = range(100_000, 100_200)
PIPE_SEEDS = range(110_000, 110_150)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with the archives of both seed ranges and the original-failure shards."""
    root = tmp_path_factory.mktemp("differential")
    for arch in targen.archives(HTTP_SEEDS) + targen.archives(PIPE_SEEDS):
        (root / f"{arch.seed}.tar").write_bytes(arch.blob)
    for i, (data, _) in enumerate(targen.default_straddle_shards()):
        (root / f"straddle-{i}.tar").write_bytes(data)
    return root


@pytest.fixture(scope="module")
def server(root: Path) -> Iterator[HttpFileServer]:
    with HttpFileServer(root) as server:
        yield server


def test_http_reads_like_tarfile(server: HttpFileServer) -> None:
    items: list[tuple[Archive, str]] = [
        (a, server.url(f"{a.seed}.tar")) for a in targen.archives(HTTP_SEEDS)
    ]
    targen.assert_reads_like_tarfile(items, OpenerRegistry())
    assert server.requests >= len(items)


def test_pipe_reads_like_tarfile(root: Path) -> None:
    items = [(a, f"pipe:cat {root / f'{a.seed}.tar'}") for a in targen.archives(PIPE_SEEDS)]
    targen.assert_reads_like_tarfile(items, OpenerRegistry())


def test_webdataset_over_http_and_pipe_reads_the_original_failure(
    root: Path, server: HttpFileServer
) -> None:
    shards = targen.default_straddle_shards()
    urls = [server.url(f"straddle-{i}.tar") for i in range(len(shards))]
    urls += [f"pipe:cat {root / f'straddle-{i}.tar'}" for i in range(len(shards))]
    expected = [s for _, samples in shards for s in samples] * 2
    assert targen.pipeline_samples(urls, OpenerRegistry()) == expected
