"""A ``url_opener`` assigned by the program (webdataset style) is looked up once per shard, when
the shard is taken from the shard list, and used from then on."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import wds_cloud.core.shardopen as shardopen
from tests.support.http_server import HttpFileServer
from tests.support.tarbuild import tar_bytes
from wds_cloud.core.handlers import reraise_exception
from wds_cloud.core.shardopen import tarfile_samples
from wds_cloud.openers.registry import OpenerRegistry

SHARDS, PER_SHARD = 3, 4


def write_shards(root: Path) -> list[str]:
    names = []
    for s in range(SHARDS):
        members = [(f"s{s}_{i}.txt", f"{s}-{i}".encode()) for i in range(PER_SHARD)]
        (root / f"shard-{s}.tar").write_bytes(tar_bytes(members))
        names.append(f"shard-{s}.tar")
    return names


def lookups(run: Callable[[], Any]) -> tuple[int, Any]:
    """How many times ``run()`` looks the assigned ``url_opener`` up, and its result."""
    code = shardopen.url_opener_override.__code__
    calls = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call" and frame.f_code is code:
            calls += 1

    before = sys.getprofile()
    sys.setprofile(profile)
    try:
        result = run()
    finally:
        sys.setprofile(before)
    return calls, result


def keys(urls: list[str], registry: OpenerRegistry | None = None) -> list[str]:
    return [s["__key__"] for s in tarfile_samples(urls, registry=registry)]


def test_once_per_shard_for_local_and_read_ahead_shards(tmp_path: Path) -> None:
    names = write_shards(tmp_path)
    expected = [f"s{s}_{i}" for s in range(SHARDS) for i in range(PER_SHARD)]
    local = [str(tmp_path / n) for n in names]
    assert lookups(lambda: keys(local)) == (SHARDS, expected)
    with HttpFileServer(tmp_path) as server:  # remote: the next shard is opened early
        remote = [server.url(n) for n in names]
        registry = OpenerRegistry(readahead="64K")
        assert registry.reads_ahead(remote[0])
        assert lookups(lambda: keys(remote, registry)) == (SHARDS, expected)


def test_assigned_while_reading_applies_from_the_next_shard_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = [str(tmp_path / n) for n in write_shards(tmp_path)]
    opened: list[str] = []

    def url_opener(data: Any, handler: Any = reraise_exception, **kw: Any) -> Iterator[Any]:
        for sample in data:
            opened.append(sample["url"])
            yield dict(sample, stream=open(sample["url"], "rb"))

    got = []
    for sample in tarfile_samples(local):
        got.append(sample["__key__"])
        if len(got) == 1:  # local shards are not opened early: shard 1 is not taken yet
            monkeypatch.setattr(shardopen, "url_opener", url_opener)
    assert got == [f"s{s}_{i}" for s in range(SHARDS) for i in range(PER_SHARD)]
    assert opened == local[1:]
