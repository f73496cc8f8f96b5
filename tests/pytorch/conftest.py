"""Fixtures for the PyTorch layer tests: small real shards on disk."""

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


def write_shard(path: Path, keys: list[str]) -> None:
    """Write a shard with ``.cls`` (int), ``.npy`` (2x2 float32) and ``.txt`` per key."""
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
        for key in keys:
            index = int(key.rsplit("_", 1)[1])
            for ext, data in (
                ("cls", str(index).encode()),
                ("npy", _npy(np.full((2, 2), index, dtype=np.float32))),
                ("txt", f"sample {index}".encode()),
            ):
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))


@pytest.fixture(scope="session")
def shards(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """``NSHARDS`` shards of ``PER_SHARD`` samples; returns pattern, urls and all keys."""
    root = tmp_path_factory.mktemp("shards")
    urls = []
    keys = []
    for s in range(NSHARDS):
        shard_keys = [f"s{s}_{s * PER_SHARD + i:04d}" for i in range(PER_SHARD)]
        path = root / f"shard-{s:03d}.tar"
        write_shard(path, shard_keys)
        urls.append(str(path))
        keys.extend(shard_keys)
    return {
        "pattern": str(root / f"shard-{{000..{NSHARDS - 1:03d}}}.tar"),
        "urls": urls,
        "keys": keys,
    }
