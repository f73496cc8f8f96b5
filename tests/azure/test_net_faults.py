"""az:// through the faulty proxy: resets keep what arrived, stalls fail within the bound."""

from __future__ import annotations

from typing import Any

import pytest

from tests.azure.conftest import azure_opener
from tests.support.azurite import AzuriteServer
from tests.support.netfaults import NetCase, NetFaultContract
from wds_cloud.openers.azure.opener import AzureOpener

pytestmark = pytest.mark.azure


class TestAzureNetFaults(NetFaultContract):
    @pytest.fixture
    def net_case(self, azurite: AzuriteServer, container: Any) -> NetCase:
        def put(name: str, data: bytes) -> None:
            container.upload_blob(name, data, overwrite=True)

        def opener(
            endpoint: str, read_timeout: float | None = None, stall_timeout: float | None = None
        ) -> AzureOpener:
            settings: dict[str, Any] = {"backoff": 0.0}
            if read_timeout is not None:
                settings["read_timeout"] = read_timeout
            if stall_timeout is not None:
                settings["stall_timeout"] = stall_timeout
            return azure_opener(azurite, endpoint, **settings)

        def default_opener() -> AzureOpener:
            return AzureOpener(
                account_name=azurite.account, account_key=azurite.key, endpoint=azurite.endpoint
            )

        return NetCase(
            port=azurite.port,
            put=put,
            url=lambda proxy, name: f"az://{container.container_name}/{name}",
            opener=opener,
            default_opener=default_opener,
        )
