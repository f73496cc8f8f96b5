"""Helpers for the AIStore emulator fixtures of ``tests/conftest.py``.

The fixtures themselves live in ``tests/conftest.py`` (one emulator per session):
``ais_emulator`` is a started :class:`~tests.emulators.ais.server.AisEmulator` (``.url``,
``.store``, ``.register_etl(name, url)``, ``.register_etl_image(image, url)``,
``.cut_after(n)``, ``.requests``, ``.authorizations``, ``.required_token``) reset for each
test; ``ais_client`` is an ``aistore`` SDK ``Client`` for it with retries off
(:func:`no_retry_config`), so error paths fail at once.
"""

from __future__ import annotations

from typing import Any


def no_retry_config() -> Any:
    """An SDK ``RetryConfig`` with HTTP and network retries off (the SDK's ``aistore.sdk.retry_config``)."""
    from aistore.sdk.retry_config import RetryConfig
    from tenacity import Retrying, stop_after_attempt
    from urllib3 import Retry

    return RetryConfig(
        http_retry=Retry(total=0),
        network_retry=Retrying(stop=stop_after_attempt(1), reraise=True),
    )
