"""Fixtures for the ais:// tests: the AIStore emulator, a test ETL process, shards."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.emulators.ais.server import AisEmulator
from tests.support import tarbuild
from tests.support.faulty_proxy import faulty_proxy  # noqa: F401 - fixture re-export
from wds_cloud.openers.ais.opener import AisOpener
from wds_cloud.openers.registry import OpenerRegistry

ETL_NAME = "upper-etl"


def make_shard(index: int, samples: int, payload: int = 64) -> tuple[bytes, list[dict[str, bytes]]]:
    """A tar shard of ``samples`` samples (``.txt``, ``.cls``, ``.bin``) and the expected dicts."""
    members, expected = [], []
    for j in range(samples):
        key = f"dir{index}/s{index:02d}_{j:05d}"
        sample = {
            "txt": f"text {index} {j}".encode(),
            "cls": str(j % 7).encode(),
            "bin": bytes((index * 31 + j + k) % 256 for k in range(payload)),
        }
        members += [(f"{key}.{ext}", data) for ext, data in sample.items()]
        expected.append({"__key__": key, **sample})  # type: ignore[dict-item]
    return tarbuild.tar_bytes(members, mtime=0), expected


@dataclass
class Shards:
    """Shards stored in the emulator: URLs and the samples each holds."""

    bucket: str
    urls: list[str]
    expected: dict[str, list[dict[str, bytes]]]


def put_shards(
    emu: AisEmulator, bucket: str, count: int, samples: int, payload: int = 64
) -> Shards:
    """Create ``bucket`` and store ``count`` shards in it."""
    emu.store.create_bucket(bucket, exist_ok=True)
    urls, expected = [], {}
    for i in range(count):
        data, samples_i = make_shard(i, samples, payload)
        name = f"train/shard-{i:04d}.tar"
        emu.store.put_object(bucket, name, data)
        url = f"ais://{bucket}/{name}"
        urls.append(url)
        expected[url] = samples_i
    return Shards(bucket, urls, expected)


@pytest.fixture
def shards(ais_emulator: AisEmulator) -> Shards:
    """Four shards of 50 samples each in bucket ``data``."""
    return put_shards(ais_emulator, "data", 4, 50)


@pytest.fixture
def opener(ais_emulator: AisEmulator) -> AisOpener:
    """An opener for the emulator: 2 retries without backoff."""
    return AisOpener(endpoint=ais_emulator.url, retries=2, backoff=0.0, timeout=(2.0, 20.0))


@pytest.fixture(scope="session")
def etl_url() -> Iterator[str]:
    """URL of a running ``etl_upper.py`` ETL server process (shared by the session)."""
    env = dict(os.environ, AIS_TARGET_URL="http://127.0.0.1:9/v1/objects")
    script = os.path.join(os.path.dirname(__file__), "etl_upper.py")
    proc = subprocess.Popen(
        [sys.executable, script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("PORT "):
            proc.kill()
            err = proc.stderr.read() if proc.stderr else ""
            raise RuntimeError(f"test ETL did not start: {line!r} {err}")
        # the server logs every failed request (stdout and stderr): drain both, or a pipe
        # fills after a few hundred failures and the server blocks
        for pipe in (proc.stdout, proc.stderr):
            threading.Thread(target=pipe.read, daemon=True).start()
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def upper_etl(ais_emulator: AisEmulator, etl_url: str) -> str:
    """Registers the test ETL with the emulator under :data:`ETL_NAME`; returns the name."""
    ais_emulator.register_etl(ETL_NAME, etl_url)
    return ETL_NAME


@pytest.fixture(scope="module")
def emulator(ais_server: AisEmulator) -> AisEmulator:
    """The session's emulator, emptied once for a module that shares data between its tests."""
    ais_server.reset()
    return ais_server


@pytest.fixture(scope="module")
def registry(emulator: AisEmulator) -> OpenerRegistry:
    """An opener registry on :func:`emulator` (module-scoped, like the data it reads)."""
    registry = OpenerRegistry()
    opener = AisOpener(endpoint=emulator.url, retries=2, backoff=0.0, timeout=(2.0, 20.0))
    registry.register("ais", opener, override=True)
    return registry
