"""Pytest fixture factory for the AIStore emulator, importable from any test folder.

In a ``conftest.py``::

    from tests.emulators.ais.fixtures import ais_emulator, ais_client  # noqa: F401

``ais_emulator`` yields a started :class:`~tests.emulators.ais.server.AisEmulator` (``.url``,
``.store``, ``.register_etl(name, url)``, ``.register_etl_image(image, url)``,
``.cut_after(n)``, ``.requests``, ``.authorizations``, ``.required_token``) and stops it
afterwards. ``ais_client`` is an ``aistore`` SDK ``Client`` for it with retries off
(``no_retry_config()``), so error paths fail at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.emulators.ais.server import AisEmulator


def no_retry_config() -> Any:
    """An SDK ``RetryConfig`` with HTTP and network retries off (the SDK's ``aistore.sdk.retry_config``)."""
    from aistore.sdk.retry_config import RetryConfig
    from tenacity import Retrying, stop_after_attempt
    from urllib3 import Retry

    return RetryConfig(
        http_retry=Retry(total=0),
        network_retry=Retrying(stop=stop_after_attempt(1), reraise=True),
    )


def start_emulator() -> AisEmulator:
    """A started emulator; the caller stops it."""
    return AisEmulator().start()


@pytest.fixture
def ais_emulator() -> Iterator[AisEmulator]:
    """A fresh AIStore emulator per test."""
    emu = start_emulator()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture
def ais_client(ais_emulator: AisEmulator) -> Any:
    """A real ``aistore.sdk.Client`` for the emulator, retries off."""
    from aistore.sdk import Client

    return Client(ais_emulator.url, retry_config=no_retry_config(), timeout=(2, 20))
