"""Session fixtures for the local servers every test package shares, and the environment
restored after every test.

Each server starts at most once per test session, and only when a test asks for it:
``seaweed`` (SeaweedFS S3, auth on with the identity in :mod:`tests.support.seaweed`),
``fake_gcs`` (fake-gcs-server), ``azurite`` (Azurite's Blob service) and ``ais_server`` (the AIStore emulator). ``ais_emulator`` is
the emulator reset for each test (empty store, no ETLs, jobs, faults, token or request log).
Packages use these fixtures as they are; redefining or re-importing one in a package conftest
would start a second server. The server modules are imported inside the fixtures, so this file
imports nothing heavy. Under pytest-xdist (``-n logical`` in ``pyproject.toml``) every worker is a
session of its own, with its own servers on free ports.

``isolated_environ`` (autouse) puts ``os.environ`` back as each test found it; ``new_threads``
tells the threads a test started from those it found (``tests/support/ownership.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.ownership import Detached, NewThreads

# the real AIStore cluster's fixtures (``ais_cluster``, ``ais_cluster_authn``), and pytester:
# tests/test_environ.py runs a session of its own
pytest_plugins = ["tests.servers.conftest_plugin", "pytester"]

if TYPE_CHECKING:
    from tests.emulators.ais.server import AisEmulator
    from tests.support.azurite import AzuriteServer
    from tests.support.fake_gcs import FakeGcsServer
    from tests.support.seaweed import SeaweedServer


#: pytest sets this one for each phase of each test, and removes it itself
_PYTEST_CURRENT = "PYTEST_CURRENT_TEST"


@pytest.fixture(autouse=True)
def isolated_environ() -> Iterator[None]:
    """``os.environ`` as this test found it, once it is over: a variable it set (itself, through
    ``monkeypatch`` or in the code it ran) is removed, one it changed or removed is put back.
    Session and module fixtures set theirs before this snapshot, so theirs stay."""
    before = dict(os.environ)
    yield
    for name in [n for n in os.environ if n not in before and n != _PYTEST_CURRENT]:
        del os.environ[name]
    for name, value in before.items():
        if name != _PYTEST_CURRENT and os.environ.get(name) != value:
            os.environ[name] = value


@pytest.fixture
def new_threads() -> NewThreads:
    """The threads started during this test (``new_threads("wds-s3-prefetch")``): one left
    over from an earlier test, or a server's, is not this test's."""
    return NewThreads()


@pytest.fixture
def unrelated_process() -> Iterator[Detached]:
    """A process that is no process of this test's (detached), making ``/dev/shm`` segments
    when asked; they are removed and it is ended after the test."""
    proc = Detached()
    try:
        yield proc
    finally:
        proc.end()


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedServer]:
    """The session's SeaweedFS S3 server (auth on). Fails loudly if ``weed`` is missing."""
    from tests.support.seaweed import ACCESS_KEY, SECRET_KEY, SeaweedServer

    server = SeaweedServer(
        tmp_path_factory.mktemp("seaweed"), access_key=ACCESS_KEY, secret_key=SECRET_KEY
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def fake_gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeGcsServer]:
    """The session's fake-gcs-server on 127.0.0.1 (fails loudly if missing)."""
    from tests.support.fake_gcs import FakeGcsServer

    server = FakeGcsServer(tmp_path_factory.mktemp("fake-gcs") / "server.log").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AzuriteServer]:
    """The session's Azurite Blob server on 127.0.0.1, with an account and key of its own
    (installed by ``python -m tests.support.azurite install`` when missing)."""
    from tests.support.azurite import AzuriteServer

    server = AzuriteServer(tmp_path_factory.mktemp("azurite")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def ais_server() -> Iterator[AisEmulator]:
    """The session's AIStore emulator; tests use :func:`ais_emulator`, which resets it."""
    from tests.emulators.ais.server import AisEmulator

    emu = AisEmulator().start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture
def ais_emulator(ais_server: AisEmulator) -> AisEmulator:
    """The session's AIStore emulator, emptied for this test (see ``AisEmulator.reset``)."""
    ais_server.reset()
    return ais_server


@pytest.fixture
def ais_client(ais_emulator: AisEmulator) -> Any:
    """A real ``aistore.sdk.Client`` for the emulator, retries off."""
    from aistore.sdk import Client

    from tests.emulators.ais.fixtures import no_retry_config

    return Client(ais_emulator.url, retry_config=no_retry_config(), timeout=(2, 20))
