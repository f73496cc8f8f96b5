"""Fixtures of the profiling tests: shards on disk and behind the local HTTP server, and the
process's recorder forgotten around every test (profiling state is per process)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.http_server import HttpFileServer
from tests.support.tarbuild import tar_bytes, write
from wds_cloud.observe.profile import reset

SHARDS = 4
PER_SHARD = 40


def shard_members(
    shard: int, per_shard: int = PER_SHARD, size: int = 64
) -> list[tuple[str, bytes]]:
    """The members of shard ``shard``: ``txt`` and ``cls`` per sample."""
    out = []
    for i in range(per_shard):
        key = f"s{shard:02d}-{i:04d}"
        out.append((f"{key}.txt", bytes([65 + i % 26]) * size))
        out.append((f"{key}.cls", str(i % 10).encode()))
    return out


#: The sampler's period in these tests (1 ms: twenty times the looks of the default
#: 20 ms, so the per-stage tolerances hold over runs of about a second)
TEST_PERIOD = "0.001"


@pytest.fixture(autouse=True)
def fresh_recorder(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No recorder before the test, none left after it; the sampler looks every 1 ms."""
    monkeypatch.setenv("WDS_CLOUD_PROFILE_PERIOD", TEST_PERIOD)
    reset()
    yield
    reset()


@pytest.fixture
def shard_dir(tmp_path: Path) -> Path:
    """``SHARDS`` shards of ``PER_SHARD`` small samples in ``tmp_path/shards``."""
    root = tmp_path / "shards"
    root.mkdir()
    for shard in range(SHARDS):
        write(str(root / f"shard-{shard:02d}.tar"), tar_bytes(shard_members(shard)))
    return root


@pytest.fixture
def local_urls(shard_dir: Path) -> list[str]:
    """The shards as local paths."""
    return [str(shard_dir / f"shard-{i:02d}.tar") for i in range(SHARDS)]


@pytest.fixture
def http_server(shard_dir: Path) -> Iterator[HttpFileServer]:
    """The shards served over HTTP on 127.0.0.1."""
    with HttpFileServer(shard_dir) as server:
        yield server
