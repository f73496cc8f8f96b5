"""ais:// through the faulty proxy: resets keep what arrived, stalls fail within the bound."""

from __future__ import annotations

from typing import Any

import pytest

from tests.emulators.ais.server import AisEmulator
from tests.support.netfaults import NetCase, NetFaultContract
from wds_cloud.openers.ais.opener import AisOpener

pytestmark = pytest.mark.ais


class TestAisNetFaults(NetFaultContract):
    @pytest.fixture
    def net_case(self, ais_emulator: AisEmulator) -> NetCase:
        ais_emulator.store.create_bucket("nf")

        def put(name: str, data: bytes) -> None:
            ais_emulator.store.put_object("nf", name, data)

        def opener(
            endpoint: str, read_timeout: float | None = None, stall_timeout: float | None = None
        ) -> AisOpener:
            settings: dict[str, Any] = {"endpoint": endpoint, "backoff": 0.0}
            settings["timeout"] = (2.0, 20.0 if read_timeout is None else read_timeout)
            if stall_timeout is not None:
                settings["stall_timeout"] = stall_timeout
            return AisOpener(**settings)

        return NetCase(
            port=ais_emulator.port,
            put=put,
            url=lambda proxy, name: f"ais://nf/{name}",
            opener=opener,
            default_opener=AisOpener,
        )
