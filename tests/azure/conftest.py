"""Fixtures for the Azure backend tests: a fresh container per test on the session's Azurite
(``azurite`` in ``tests/conftest.py``), and openers given the account explicitly."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.azurite import AzuriteServer
from tests.support.faulty_proxy import faulty_proxy  # noqa: F401 - fixture re-export
from wds_cloud.openers.azure.opener import AzureOpener

_container_ids = itertools.count()


def azure_opener(
    azurite: AzuriteServer, endpoint: str | None = None, **settings: Any
) -> AzureOpener:
    """An opener for the server's account by name and key; ``endpoint`` is a proxy's
    ``http://host:port`` in front of it (the account path is added)."""
    base = f"{endpoint}/{azurite.account}" if endpoint else azurite.endpoint
    settings.setdefault("backoff", 0.01)
    return AzureOpener(
        account_name=azurite.account, account_key=azurite.key, endpoint=base, **settings
    )


@pytest.fixture
def container(azurite: AzuriteServer) -> Iterator[Any]:
    """A new empty container (a ``ContainerClient``), deleted afterwards."""
    client = azurite.container(f"test-{next(_container_ids)}")
    yield client
    client.delete_container()


@pytest.fixture
def opener(azurite: AzuriteServer) -> AzureOpener:
    """An AzureOpener on Azurite (account key given explicitly, fast retries)."""
    return azure_opener(azurite)
