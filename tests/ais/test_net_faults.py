"""ais:// through the faulty proxy: resets keep what arrived, stalls fail within the bound.

On the real cluster the proxy redirects every GET (301) to the target that owns the object, so
a fault proxy in front of the proxy node would see only the redirect: the bytes come from the
target. The fault proxy therefore sits in front of the owning target (its port read from the
redirect's ``Location``, :meth:`~tests.ais.backends.AisBackend.port_for`) and the opener's
endpoint is the fault proxy: a target serves object GETs sent to it directly, as it serves the
redirected ones, so every GET and resume of the read flows through the faults.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.ais.backends import AisBackend
from tests.support.netfaults import NetCase, NetFaultContract
from wds_cloud.openers.ais.opener import AisOpener

pytestmark = pytest.mark.ais


class TestAisNetFaults(NetFaultContract):
    @pytest.fixture
    def net_case(self, ais_backend: AisBackend) -> NetCase:
        bucket = ais_backend.create_bucket("nf")

        def put(name: str, data: bytes) -> None:
            ais_backend.put_object(bucket, name, data)

        def opener(
            endpoint: str, read_timeout: float | None = None, stall_timeout: float | None = None
        ) -> AisOpener:
            settings: dict[str, Any] = {"endpoint": endpoint, "backoff": 0.0}
            settings["timeout"] = (2.0, 20.0 if read_timeout is None else read_timeout)
            if stall_timeout is not None:
                settings["stall_timeout"] = stall_timeout
            return AisOpener(**settings)

        return NetCase(
            port=lambda name: ais_backend.port_for(bucket, name),
            put=put,
            url=lambda proxy, name: f"ais://{bucket}/{name}",
            opener=opener,
            default_opener=AisOpener,
        )
