"""The test SeaweedFS server (``tests/support/seaweed.py``): a port taken between its choice and
the launch (another pytest-xdist worker's server) costs a relaunch on new ports, not the
session's S3 tests."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.support import seaweed

pytestmark = pytest.mark.s3


def test_a_port_taken_before_the_launch_is_given_up_for_new_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chosen: list[list[int]] = []
    real_free_ports = seaweed.free_ports
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])

        def first_one_taken(count: int) -> list[int]:
            ports = real_free_ports(count)
            chosen.append([port, *ports[1:]] if not chosen else ports)
            return chosen[-1]

        monkeypatch.setattr(seaweed, "free_ports", first_one_taken)
        server = seaweed.SeaweedServer(tmp_path / "weed")
        try:
            server.start()
            assert len(chosen) == 2 and port not in server.ports.values()
            assert server.process is not None and server.process.poll() is None
        finally:
            server.stop()
