"""Fixtures for the CLI tests: real image shards on disk, a runner for ``wds-cloud`` and a
fresh bucket on every backend (``backend``: local, SeaweedFS S3, fake-gcs-server, Azurite,
AIStore emulator)."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.backends import (
    Backend,
    ais_backend,
    azure_backend,
    clean_env,
    gcs_backend,
    local_backend,
    s3_backend,
)
from tests.support import tarbuild

NSHARDS = 2
PER_SHARD = 6


def _png(value: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (40, 30), (value * 20 % 256, 100, 200)).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="session")
def image_shards(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """``NSHARDS`` shards of ``PER_SHARD`` samples: ``png``, ``cls``, ``json``."""
    root = tmp_path_factory.mktemp("cli-shards")
    paths = []
    for s in range(NSHARDS):
        members = []
        for i in range(PER_SHARD):
            n = s * PER_SHARD + i
            members += [
                (f"s{n:04d}.png", _png(n)),
                (f"s{n:04d}.cls", str(n % 3).encode()),
                (f"s{n:04d}.json", b'{"label": "L%d"}' % n),
            ]
        paths.append(
            Path(tarbuild.write(str(root / f"img-{s:03d}.tar"), tarbuild.tar_bytes(members)))
        )
    return paths


Runner = Callable[..., subprocess.CompletedProcess[bytes]]


@pytest.fixture
def wds_cli() -> Runner:
    """Run ``python -m wds_cloud.cli ARGS``; returns the completed process (bytes).

    ``env=`` replaces the environment (see ``backends.clean_env``); ``input=`` is stdin.
    """

    def run(
        *args: str,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        input: bytes | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "wds_cloud.cli", *args],
            capture_output=True,
            cwd=cwd,
            env=env,
            input=input,
            timeout=120,
            check=False,
        )

    return run


@pytest.fixture(params=["local", "s3", "gs", "az", "ais"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """A fresh bucket (or folder) on each backend in turn, with the CLI's environment for it."""
    kind = request.param
    if kind == "local":
        return local_backend(tmp_path)
    if kind == "s3":
        return s3_backend(request.getfixturevalue("seaweed"))
    if kind == "gs":
        return gcs_backend(request.getfixturevalue("fake_gcs"))
    if kind == "az":
        return azure_backend(request.getfixturevalue("azurite"))
    return ais_backend(request.getfixturevalue("ais_emulator"))


__all__ = ["Backend", "Runner", "clean_env"]
