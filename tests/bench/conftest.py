"""Fixtures for the bench tests: small real shards on disk."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

NSHARDS = 3
PER_SHARD = 20
PAYLOAD = 100  # bytes of .bin per sample; .cls adds len(str(index))


@pytest.fixture(scope="session")
def bench_shards(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], int]:
    """Shards of ``.bin`` (PAYLOAD bytes) + ``.cls`` samples; returns (urls, payload bytes)."""
    root: Path = tmp_path_factory.mktemp("bench")
    urls = []
    total = 0
    for s in range(NSHARDS):
        path = root / f"b-{s:03d}.tar"
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
            for i in range(PER_SHARD):
                index = s * PER_SHARD + i
                for ext, data in (
                    ("bin", bytes([index % 256]) * PAYLOAD),
                    ("cls", str(index).encode()),
                ):
                    info = tarfile.TarInfo(f"k{index:04d}.{ext}")
                    info.size = len(data)
                    tf.addfile(info, io.BytesIO(data))
                    total += len(data)
        urls.append(str(path))
    return urls, total
