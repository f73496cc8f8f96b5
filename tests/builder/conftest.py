"""Fixtures for the loader-builder tests: small real shards on disk."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest

NSHARDS = 4
PER_SHARD = 10


def _npy(a: np.ndarray) -> bytes:
    stream = io.BytesIO()
    np.save(stream, a)
    return stream.getvalue()


@pytest.fixture(scope="session")
def shard_urls(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """``NSHARDS`` shards of ``PER_SHARD`` samples (``cls`` = index, ``npy`` 2x2 = index)."""
    root: Path = tmp_path_factory.mktemp("builder")
    urls = []
    for s in range(NSHARDS):
        path = root / f"shard-{s:03d}.tar"
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
            for i in range(PER_SHARD):
                index = s * PER_SHARD + i
                for ext, data in (
                    ("cls", str(index).encode()),
                    ("npy", _npy(np.full((2, 2), index, dtype=np.float32))),
                ):
                    info = tarfile.TarInfo(f"k{index:04d}.{ext}")
                    info.size = len(data)
                    tf.addfile(info, io.BytesIO(data))
        urls.append(str(path))
    return urls
