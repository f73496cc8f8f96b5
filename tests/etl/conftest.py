"""Fixtures for the ETL tests: the AIStore emulator and the ETL servers as real subprocesses."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PIL import Image

from tests.emulators.ais.server import AisEmulator
from wds_cloud.openers.ais.opener import AisOpener
from wds_cloud.openers.registry import OpenerRegistry

ROOT = Path(__file__).resolve().parents[2]


def start_etl(module: str) -> tuple[subprocess.Popen[str], str]:
    """Start ``python -m <module> --host 127.0.0.1 --port 0``; returns the process and its URL."""
    env = dict(os.environ, AIS_TARGET_URL="http://127.0.0.1:9/v1/objects")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        [sys.executable, "-m", module, "--host", "127.0.0.1", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.kill()
        err = proc.stderr.read() if proc.stderr else ""
        raise RuntimeError(f"ETL {module} did not start: {line!r} {err}")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}"


def stop_etl(proc: subprocess.Popen[str]) -> None:
    """SIGTERM, then kill after 10 s."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _etl_fixture(module: str) -> Callable[[], Iterator[str]]:
    def fixture() -> Iterator[str]:
        proc, url = start_etl(module)
        try:
            yield url
        finally:
            stop_etl(proc)

    return fixture


resize_etl_url = pytest.fixture(scope="session")(_etl_fixture("etl.wds_transform.server"))
pets_etl_url = pytest.fixture(scope="session")(_etl_fixture("etl.pets.server"))


@pytest.fixture
def registry(ais_emulator: AisEmulator) -> OpenerRegistry:
    """A registry whose ``ais://`` opener talks to the emulator (no retries)."""
    reg = OpenerRegistry()
    reg.register(
        "ais",
        AisOpener(endpoint=ais_emulator.url, retries=0, backoff=0.0, timeout=(2.0, 30.0)),
        override=True,
    )
    return reg


def image_bytes(size: tuple[int, int], fmt: str, seed: int, mode: str = "RGB") -> bytes:
    """A small deterministic image encoded as ``fmt`` (PIL name)."""
    img = Image.new(mode, size)
    px = img.load()
    assert px is not None
    for x in range(size[0]):
        for y in range(size[1]):
            if mode == "L":
                px[x, y] = 1 + (x * 3 // size[0])  # trimap-like values 1..3 in bands
            else:
                px[x, y] = ((x * 7 + seed) % 256, (y * 5 + seed) % 256, (x + y + seed) % 256)
    out = io.BytesIO()
    img.save(out, format=fmt)
    return out.getvalue()


def tar_bytes(members: list[tuple[str, bytes]]) -> bytes:
    """A tar of ``(name, data)`` members in order."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 1700000000
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def read_tar(data: bytes) -> list[tuple[str, bytes]]:
    """``(name, data)`` of each regular member, in order (stdlib reader, independent of ETLs)."""
    out = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for info in tar:
            f = tar.extractfile(info)
            out.append((info.name, f.read() if f is not None else b""))
    return out
