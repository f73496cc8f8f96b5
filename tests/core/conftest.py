"""Fixtures for the pipeline tests: small WebDataset shards written with
:mod:`tests.support.tarbuild` (stdlib tarfile)."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import tarbuild


@dataclass
class Shards:
    """A directory of shards ``shard-000.tar`` ... with ``per_shard`` samples each."""

    root: Path
    nshards: int
    per_shard: int

    @property
    def urls(self) -> list[str]:
        return [str(self.root / f"shard-{i:03d}.tar") for i in range(self.nshards)]

    @property
    def pattern(self) -> str:
        return str(self.root / f"shard-{{000..{self.nshards - 1:03d}}}.tar")

    @property
    def keys(self) -> list[str]:
        return [f"s{s:03d}_{i:04d}" for s in range(self.nshards) for i in range(self.per_shard)]


def _png(value: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (4, 3), (value % 256, 7, 9)).save(buf, format="PNG")
    return buf.getvalue()


def write_shards(root: Path, nshards: int, per_shard: int, *, images: bool = False) -> Shards:
    """Write ``nshards`` tars; sample ``s{shard}_{i}`` has ``txt``, ``cls``, ``json`` (+ ``png``)."""
    root.mkdir(parents=True, exist_ok=True)
    for s in range(nshards):
        members = []
        for i in range(per_shard):
            key = f"s{s:03d}_{i:04d}"
            n = s * per_shard + i
            members += [
                (f"{key}.txt", f"text {key}".encode()),
                (f"{key}.cls", str(n).encode()),
                (f"{key}.json", json.dumps({"n": n, "key": key}).encode()),
            ]
            if images:
                members.append((f"{key}.png", _png(n)))
        tarbuild.write(str(root / f"shard-{s:03d}.tar"), tarbuild.tar_bytes(members))
    return Shards(root, nshards, per_shard)


@pytest.fixture(scope="session")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Shards:
    """8 shards x 10 samples, no images."""
    return write_shards(tmp_path_factory.mktemp("shards"), 8, 10)


@pytest.fixture(scope="session")
def image_shards(tmp_path_factory: pytest.TempPathFactory) -> Shards:
    """4 shards x 6 samples with a small PNG per sample."""
    return write_shards(tmp_path_factory.mktemp("imgshards"), 4, 6, images=True)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Remove the rank/worker environment variables for the test."""
    for name in ("RANK", "WORLD_SIZE", "WORKER", "NUM_WORKERS", "WDS_SEED", "WDS_CLOUD_SEED"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch
