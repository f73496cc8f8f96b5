"""The shared opener contract for az:// and its aliases against Azurite."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.azure.conftest import azure_opener
from tests.contract.opener_contract import OpenerCase, OpenerContract
from tests.support.azurite import AzuriteServer
from wds_cloud.openers.azure.opener import AzureOpener

pytestmark = pytest.mark.azure

DATA = os.urandom(300_000) + bytes(range(256)) * 100


def _case(opener: AzureOpener, container: Any, base: str) -> OpenerCase:
    container.upload_blob("contract/shard.tar", DATA, overwrite=True)
    return OpenerCase(opener, f"{base}/contract/shard.tar", f"{base}/contract/missing.tar", DATA)


class TestAzureContract(OpenerContract):
    @pytest.fixture
    def opener_case(self, azurite: AzuriteServer, container: Any) -> OpenerCase:
        return _case(azure_opener(azurite), container, f"az://{container.container_name}")


class TestAbfsAccountUrlContract(OpenerContract):
    """adlfs's spelling: ``abfs://CONTAINER@ACCOUNT.dfs.core.windows.net/BLOB``."""

    @pytest.fixture
    def opener_case(self, azurite: AzuriteServer, container: Any) -> OpenerCase:
        base = f"abfs://{container.container_name}@{azurite.account}.dfs.core.windows.net"
        return _case(azure_opener(azurite), container, base)


class TestAzureUrlConnectionStringContract(OpenerContract):
    """Mosaic Streaming's and LitData's ``azure://``, credentials from a connection string."""

    @pytest.fixture
    def opener_case(self, azurite: AzuriteServer, container: Any) -> OpenerCase:
        opener = AzureOpener(connection_string=azurite.connection_string, backoff=0.01)
        return _case(opener, container, f"azure://{container.container_name}")


class TestAzurePrefetchContract(OpenerContract):
    """The same contract with parallel ranged reads (64 KiB parts, 4 in flight)."""

    @pytest.fixture
    def opener_case(self, azurite: AzuriteServer, container: Any) -> OpenerCase:
        opener = azure_opener(azurite, prefetch=4, prefetch_chunk=64 << 10)
        return _case(opener, container, f"az://{container.container_name}")


class TestAzureCutConnectionsContract(OpenerContract):
    """The same contract while every connection is cut after 50 000 response bytes."""

    @pytest.fixture
    def opener_case(self, azurite: AzuriteServer, container: Any, faulty_proxy: Any) -> OpenerCase:
        proxy = faulty_proxy(azurite.port, cut_after=50_000)
        opener = azure_opener(azurite, proxy.url, backoff=0.0, retries=3)
        return _case(opener, container, f"az://{container.container_name}")
