"""Fixtures for the ais:// tests: the backend (emulator or real cluster), a test ETL process, shards.

``ais_backend`` (per test) and ``ais_module_backend`` (per module, for data shared by a module's
tests) are :class:`~tests.ais.backends.AisBackend` s, parametrised over ``emulator`` and
``real`` by :func:`pytest_generate_tests`; a test marked ``@pytest.mark.emulator_only(reason)``
gets the emulator only (the reason says what the real cluster here cannot do), and one marked
``@pytest.mark.slow_on_real`` has its ``real`` case marked ``slow``. The ``real``
cases carry the ``ais_real`` mark and skip, with the reason, where no real cluster can start
(see ``tests/servers/conftest_plugin.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.ais.backends import AisBackend, EmulatorBackend, RealBackend
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


BACKENDS = ("emulator", "real")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise ``ais_backend``/``ais_module_backend`` over the emulator and the real cluster."""
    emulator_only = metafunc.definition.get_closest_marker("emulator_only") is not None
    kinds = BACKENDS[:1] if emulator_only else BACKENDS
    real_marks = [pytest.mark.ais_real]
    if metafunc.definition.get_closest_marker("slow_on_real") is not None:
        real_marks.append(pytest.mark.slow)
    params = [pytest.param(k, id=k, marks=real_marks if k == "real" else []) for k in kinds]
    for name, scope in (("ais_backend", "function"), ("ais_module_backend", "module")):
        if name in metafunc.fixturenames:
            metafunc.parametrize(name, params, indirect=True, scope=scope)


def _backend(request: pytest.FixtureRequest, emulator_fixture: str) -> Iterator[AisBackend]:
    if request.param == "emulator":
        yield EmulatorBackend(request.getfixturevalue(emulator_fixture))
        return
    backend = RealBackend(request.getfixturevalue("ais_cluster"))
    try:
        yield backend
    finally:
        backend.cleanup()


@pytest.fixture
def ais_backend(request: pytest.FixtureRequest) -> Iterator[AisBackend]:
    """The AIStore this test runs on: the emulator (reset) or the real cluster (fresh buckets,
    destroyed after the test)."""
    yield from _backend(request, "ais_emulator")


@pytest.fixture(scope="module")
def ais_module_backend(request: pytest.FixtureRequest) -> Iterator[AisBackend]:
    """:func:`ais_backend` for a module whose tests share data (the emulator reset once)."""
    yield from _backend(request, "emulator")


@dataclass
class Shards:
    """Shards stored on a backend: URLs and the samples each holds."""

    bucket: str
    urls: list[str]
    expected: dict[str, list[dict[str, bytes]]]


def put_shards(
    backend: AisBackend, bucket: str, count: int, samples: int, payload: int = 64
) -> Shards:
    """Create ``bucket`` and store ``count`` shards in it (URLs use its actual name)."""
    bucket = backend.create_bucket(bucket)
    urls, expected = [], {}
    for i in range(count):
        data, samples_i = make_shard(i, samples, payload)
        name = f"train/shard-{i:04d}.tar"
        backend.put_object(bucket, name, data)
        url = f"ais://{bucket}/{name}"
        urls.append(url)
        expected[url] = samples_i
    return Shards(bucket, urls, expected)


@pytest.fixture
def shards(ais_backend: AisBackend) -> Shards:
    """Four shards of 50 samples each in bucket ``data``."""
    return put_shards(ais_backend, "data", 4, 50)


@pytest.fixture
def opener(ais_backend: AisBackend) -> AisOpener:
    """An opener for the backend: 2 retries without backoff."""
    return ais_backend.opener()


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
def registry(ais_module_backend: AisBackend) -> OpenerRegistry:
    """An opener registry on :func:`ais_module_backend` (module-scoped, like the data it reads)."""
    return ais_module_backend.registry()
