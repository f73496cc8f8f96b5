"""http:// through the faulty proxy: resets keep what arrived, stalls fail within the bound."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from tests.support.http_server import HttpFileServer
from tests.support.netfaults import NetCase, NetFaultContract
from wds_cloud.openers.http.opener import HttpOpener


class TestHttpNetFaults(NetFaultContract):
    @pytest.fixture
    def net_case(self, http_server: HttpFileServer) -> NetCase:
        def put(name: str, data: bytes) -> None:
            (http_server.root / name).write_bytes(data)

        def opener(
            endpoint: str, read_timeout: float | None = None, stall_timeout: float | None = None
        ) -> HttpOpener:
            settings: dict[str, Any] = {"backoff": 0.0}
            if read_timeout is not None:
                settings["timeout"] = read_timeout
            if stall_timeout is not None:
                settings["stall_timeout"] = stall_timeout
            return HttpOpener(**settings)

        return NetCase(
            port=http_server.port,
            put=put,
            url=lambda proxy, name: f"{proxy}/{name}",
            opener=opener,
            default_opener=HttpOpener,
        )


def test_a_pause_of_the_caller_is_not_a_stall(http_server: HttpFileServer) -> None:
    # The stall deadline counts time spent waiting inside a read, not time between reads: the
    # connection ends (after exactly the bytes read) while the caller spends longer than
    # stall_timeout on a training step; the next read resumes instead of calling it a stall.
    data = os.urandom(300_000)
    (http_server.root / "p.bin").write_bytes(data)
    http_server.cut_after, http_server.cut_every = 100_000, 2  # the first response only
    stream = HttpOpener(backoff=0.0, stall_timeout=1).open(http_server.url("p.bin"))
    first = stream.read(100_000)
    time.sleep(1.2)
    with stream:
        assert first + stream.read() == data
    assert stream.resumes == 1  # type: ignore[attr-defined]
