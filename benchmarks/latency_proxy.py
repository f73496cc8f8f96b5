"""A TCP proxy on 127.0.0.1 that makes a loopback server look like a far-away one.

Every request waits ``delay`` seconds before it is forwarded (20 ms: a cross-region round trip),
and each connection's responses are paced to ``rate`` bytes per second (50 MB/s: what one S3
GET gets across regions). Requests are told apart by direction: the first client bytes after
the server has answered (or on a fresh connection) start a new request; the pacing restarts
with each request, so an idle keep-alive connection earns no burst. One thread per direction
and connection; the HTTP bytes are never parsed or changed.

Usage::

    with LatencyProxy(target_port, delay=0.02, rate=50e6) as proxy:
        endpoint = proxy.url   # "http://127.0.0.1:<port>"
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

_BUF = 256 << 10


class _Conn:
    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.new_request = True  # the next client bytes start a request
        self.start = 0.0  # when the current response's pacing started
        self.sent = 0  # response bytes since then
        self.lock = threading.Lock()


class LatencyProxy:
    """Forwards ``127.0.0.1:<port>`` to ``host:target_port`` with a delay and a rate cap.

    Args:
        target_port: the real server's port.
        delay: seconds added before each request is forwarded.
        rate: bytes per second per connection (server -> client); None: no cap.
        host: the real server's address.

    Attributes:
        port: the proxy's port.
        requests: requests seen so far (all connections).
    """

    def __init__(
        self,
        target_port: int,
        *,
        delay: float = 0.02,
        rate: float | None = 50e6,
        host: str = "127.0.0.1",
    ) -> None:
        self.target = (host, target_port)
        self.delay = delay
        self.rate = rate
        self.requests = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._conns: list[_Conn] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, name="latency-proxy", daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LatencyProxy:
        """Start accepting connections."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the listener and every connection."""
        self._stop.set()
        self._thread.join(5)
        self._listener.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            for sock in (conn.client, conn.upstream):
                try:
                    sock.close()
                except OSError:
                    pass

    def __enter__(self) -> LatencyProxy:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _accept(self) -> None:
        self._listener.settimeout(0.1)  # so that stop() is seen
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Conn(client, upstream)
            with self._lock:
                self._conns.append(conn)
            threading.Thread(target=self._requests, args=(conn,), daemon=True).start()
            threading.Thread(target=self._responses, args=(conn,), daemon=True).start()

    def _requests(self, conn: _Conn) -> None:
        """client -> server: delay the first bytes of each request."""
        buf = bytearray(_BUF)
        view = memoryview(buf)
        try:
            while n := conn.client.recv_into(buf):
                with conn.lock:
                    starting, conn.new_request = conn.new_request, False
                if starting:
                    with self._lock:
                        self.requests += 1
                    time.sleep(self.delay)
                    with conn.lock:
                        conn.start, conn.sent = time.monotonic(), 0
                conn.upstream.sendall(view[:n])
        except OSError:
            pass
        finally:
            _shut(conn.upstream)

    def _responses(self, conn: _Conn) -> None:
        """server -> client: pace to ``rate``; server bytes end the current request."""
        buf = bytearray(_BUF)
        view = memoryview(buf)
        rate = self.rate
        try:
            while n := conn.upstream.recv_into(buf, min(_BUF, int(rate / 100) if rate else _BUF)):
                with conn.lock:
                    conn.new_request = True
                    conn.sent += n
                    due = conn.start + conn.sent / rate if rate else 0.0
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                conn.client.sendall(view[:n])
        except OSError:
            pass
        finally:
            _shut(conn.client)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
