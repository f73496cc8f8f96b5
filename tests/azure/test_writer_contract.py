"""The writer contract for ``az://`` (AzureWriter, TarWriter, ShardWriter) on Azurite."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.azure.conftest import azure_opener
from tests.contract.writer_contract import WriterCase, WriterContract
from tests.support.azurite import AzuriteServer
from wds_cloud.openers.registry import OpenerRegistry

pytestmark = pytest.mark.azure

BLOCK = 64 << 10


class TestAzureWriters(WriterContract):
    @pytest.fixture
    def writer_case(self, azurite: AzuriteServer, container: Any) -> WriterCase:
        registry = OpenerRegistry(builtins=False)
        registry.register("az", azure_opener(azurite, block_size=BLOCK))

        def name(url: str) -> str:
            return url.split("/", 3)[3]

        def exists(url: str) -> bool:
            return bool(container.get_blob_client(name(url)).exists())

        def read(url: str) -> bytes:
            return bytes(container.download_blob(name(url)).readall())

        return WriterCase(
            registry=registry,
            url=lambda key: f"az://{container.container_name}/{key}",
            exists=exists,
            read=read,
            # staged blocks cannot be deleted without committing them; Azure drops them after
            # a week. That nothing becomes visible is the contract's exists() check, and
            # test_write.py shows where the blocks stay.
            leftovers=list,
            data=os.urandom(4 * BLOCK + 777),  # blocks are staged before the end
        )
