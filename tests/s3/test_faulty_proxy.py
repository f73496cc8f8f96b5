"""Tests of the shared fault-injecting proxy (tests/support/faulty_proxy.py)."""

from __future__ import annotations

import http.client
import http.server
import threading
from collections.abc import Iterator

import pytest

from tests.support.faulty_proxy import FaultyProxy

BODY = bytes(range(256)) * 4096  # 1 MiB
_release = threading.Event()  # "/stall" sends half the body, then waits for this


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        if self.path == "/stall":
            self.wfile.write(BODY[: len(BODY) // 2])
            self.wfile.flush()
            _release.wait(30)
            self.wfile.write(BODY[len(BODY) // 2 :])
        else:
            self.wfile.write(BODY)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_port() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _release.clear()
    yield server.server_address[1]
    _release.set()
    server.shutdown()
    server.server_close()
    thread.join()


def _get(port: int, path: str = "/x") -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.read()
    finally:
        conn.close()


def test_passes_through_without_fault(http_port: int) -> None:
    with FaultyProxy(http_port) as proxy:
        assert _get(proxy.port) == BODY
        assert proxy.connections == 1
        assert proxy.cuts == 0


@pytest.mark.parametrize("reset", [False, True])
def test_cuts_first_k_connections(http_port: int, reset: bool) -> None:
    with FaultyProxy(http_port, cut_after=100_000, first=2, reset=reset) as proxy:
        for _ in range(2):
            with pytest.raises((http.client.IncompleteRead, ConnectionError)):
                _get(proxy.port)
        assert _get(proxy.port) == BODY
        assert proxy.connections == 3
        assert proxy.cuts == 2


def test_cuts_only_matching_requests(http_port: int, faulty_proxy) -> None:
    proxy = faulty_proxy(http_port, cut_after=1000, match=b"GET /bad")
    assert _get(proxy.port, "/good") == BODY
    with pytest.raises((http.client.IncompleteRead, ConnectionError)):
        _get(proxy.port, "/bad")
    proxy.set_fault(cut_after=1000, match=lambda index, head: index == 2)
    with pytest.raises((http.client.IncompleteRead, ConnectionError)):
        _get(proxy.port, "/good")
    assert _get(proxy.port, "/bad") == BODY
    assert proxy.cuts == 2
    assert proxy.connections == 4


def test_drop_connections_cuts_live_ones(http_port: int) -> None:
    with FaultyProxy(http_port) as proxy:
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        conn.request("GET", "/stall")
        resp = conn.getresponse()
        resp.read(10)
        assert proxy.drop_connections() == 1
        with pytest.raises((http.client.IncompleteRead, ConnectionError)):
            resp.read()  # the second half is never sent before the drop
        conn.close()
        assert proxy.cuts == 1


def test_stall_for_a_while_then_delivers_everything(http_port: int) -> None:
    with FaultyProxy(http_port, stall_after=10_000, stall_for=0.3) as proxy:
        assert _get(proxy.port) == BODY
        assert proxy.stalls == 1
        assert proxy.cuts == 0


def test_stall_forever_until_the_client_gives_up(http_port: int) -> None:
    with FaultyProxy(http_port, stall_after=10_000) as proxy:
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=0.3)
        conn.request("GET", "/x")
        resp = conn.getresponse()
        with pytest.raises(TimeoutError):
            resp.read()  # the proxy forwards 10 000 bytes, then nothing
        conn.close()
        assert proxy.stalls == 1
        proxy.set_fault()  # later connections pass
        assert _get(proxy.port) == BODY


def test_cut_and_stall_are_exclusive(http_port: int) -> None:
    with pytest.raises(ValueError, match="not both"):
        FaultyProxy(http_port, cut_after=1, stall_after=1)
