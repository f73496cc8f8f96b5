"""Fixtures for the opener tests: shard files and a live HTTP server over them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import tarbuild
from tests.support.faulty_proxy import faulty_proxy  # noqa: F401 - fixture re-export
from tests.support.http_server import HttpFileServer


def make_shard(path: Path, index: int, samples: int = 20, size: int = 3000) -> list[str]:
    """Write a tar shard of ``samples`` samples (.txt + .bin) and return their keys."""
    keys = [f"s{index:03d}_{i:04d}" for i in range(samples)]
    members = [
        (f"{key}.{ext}", payload)
        for i, key in enumerate(keys)
        for ext, payload in (
            ("txt", key.encode()),
            ("bin", bytes([(index + i) % 256]) * (size + i)),
        )
    ]
    tarbuild.write(str(path), tarbuild.tar_bytes(members, mtime=0))
    return keys


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[HttpFileServer]:
    """An :class:`HttpFileServer` over ``tmp_path / "www"``."""
    root = tmp_path / "www"
    root.mkdir()
    with HttpFileServer(root) as server:
        yield server
