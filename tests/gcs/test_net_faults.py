"""gs:// through the faulty proxy: resets keep what arrived, stalls fail within the bound."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.netfaults import NetCase, NetFaultContract
from wds_cloud.openers.gcs.opener import GcsOpener

pytestmark = pytest.mark.gcs


class TestGcsNetFaults(NetFaultContract):
    @pytest.fixture
    def net_case(self, fake_gcs: Any, bucket: Any) -> NetCase:
        def put(name: str, data: bytes) -> None:
            bucket.blob(name).upload_from_string(data)

        def opener(
            endpoint: str, read_timeout: float | None = None, stall_timeout: float | None = None
        ) -> GcsOpener:
            settings: dict[str, Any] = {"endpoint": endpoint, "backoff": 0.0}
            if read_timeout is not None:
                settings["read_timeout"] = read_timeout
            if stall_timeout is not None:
                settings["stall_timeout"] = stall_timeout
            return GcsOpener(**settings)

        return NetCase(
            port=fake_gcs.port,
            put=put,
            url=lambda proxy, name: f"gs://{bucket.name}/{name}",
            opener=opener,
            default_opener=GcsOpener,
        )
