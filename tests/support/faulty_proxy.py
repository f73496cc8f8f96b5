"""A fault-injecting TCP proxy for tests: cut or stall connections after N response bytes.

:class:`FaultyProxy` listens on ``127.0.0.1`` (a free port chosen by the OS) and forwards every
connection to ``target_host:target_port``. Once ``cut_after`` bytes of *response* (server ->
client) have been forwarded on a connection it can cut it: an orderly close, or with
``reset=True`` a TCP reset (``SO_LINGER`` 0: the client's next read fails with
``ConnectionResetError``). With ``stall_after`` instead, it stops forwarding on that connection
(the connection stays open, nothing more arrives) for ``stall_for`` seconds, then carries on;
``stall_for=None`` stalls until the client gives up and closes, or the proxy stops. Either fault
applies:

- for the first ``first`` connections only (``FaultyProxy(port, cut_after=N, first=k)``), or
- for every connection whose request bytes match a rule (``match=b"GET /bucket/shard"``, or a
  callable ``(conn_index, request_head) -> bool`` evaluated when the first response bytes
  arrive; ``request_head`` is what the client sent on that connection so far, up to 64 KiB).

With neither ``first`` nor ``match`` every connection is hit. ``cut_after=None`` and
``stall_after=None`` (the default) never interfere.
The rule can be changed while the proxy runs with :meth:`FaultyProxy.set_fault`, and
:meth:`FaultyProxy.drop_connections` cuts every live connection at once. The rule is decided
once per connection, when its first response bytes arrive (keep-alive connections carrying
several requests are judged by their first one).

Counters (thread-safe reads): ``connections`` (accepted so far), ``cuts`` (connections cut),
``stalls`` (connections stalled), ``bytes_forwarded`` (server -> client, all connections),
``requests`` and ``ranged_requests`` (HTTP/1.1 request lines, and ``Range:`` headers, seen from
clients so far; counted in the request bytes, so only meaningful while no upload body can hold
them).

Usage::

    with FaultyProxy(server_port, cut_after=1 << 20, first=3) as proxy:
        url = proxy.url            # "http://127.0.0.1:<port>"
        ...
        assert proxy.cuts == 3

or as a pytest fixture factory (import ``faulty_proxy`` into a ``conftest.py``)::

    def test_x(faulty_proxy):
        proxy = faulty_proxy(server_port, cut_after=4096, match=b"/shard-0001.tar")

Every proxy started by the fixture is stopped at the end of the test.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

Rule = Callable[[int, bytes], bool]

_HEAD_LIMIT = 64 << 10


class _Conn:
    def __init__(self, index: int, client: socket.socket, upstream: socket.socket) -> None:
        self.index = index
        self.client = client
        self.upstream = upstream
        self.head = bytearray()
        self.tail = b""  # the last request bytes, for patterns split across reads
        self.sent = 0
        self.decided = False
        self.limit: int | None = None
        self.stall = False  # at ``limit``: stall (True) or cut (False)
        self.closed = False
        self.gone = threading.Event()  # the client went away or the proxy stopped
        self.lock = threading.Lock()


class FaultyProxy:
    """TCP proxy on 127.0.0.1 that can cut or stall connections after N response bytes.

    Args:
        target_port: port of the real server.
        target_host: host of the real server.
        cut_after: response bytes forwarded on a connection before it is cut; None: never.
        first: hit only the first ``first`` connections (counted from the last ``set_fault``).
        match: hit only connections whose request bytes contain this, or for which this
            callable ``(conn_index, request_head) -> bool`` returns True.
        reset: cut with a TCP reset (SO_LINGER 0) instead of an orderly close.
        stall_after: response bytes forwarded on a connection before it stalls (instead of
            a cut; give one of ``cut_after`` and ``stall_after``).
        stall_for: seconds a stalled connection stays silent; None: until it is closed.
    """

    def __init__(
        self,
        target_port: int,
        target_host: str = "127.0.0.1",
        *,
        cut_after: int | None = None,
        first: int | None = None,
        match: bytes | Rule | None = None,
        reset: bool = False,
        stall_after: int | None = None,
        stall_for: float | None = None,
    ) -> None:
        self.target = (target_host, target_port)
        self.reset = reset
        self._lock = threading.Lock()
        self._conns: set[_Conn] = set()
        self._threads: list[threading.Thread] = []
        self.connections = 0
        self.cuts = 0
        self.stalls = 0
        self.bytes_forwarded = 0
        self.requests = 0
        self.ranged_requests = 0
        self._listener: socket.socket | None = None
        self._stopping = threading.Event()
        self.set_fault(
            cut_after=cut_after,
            first=first,
            match=match,
            stall_after=stall_after,
            stall_for=stall_for,
        )

    # -- configuration -------------------------------------------------------------------

    def set_fault(
        self,
        *,
        cut_after: int | None = None,
        first: int | None = None,
        match: bytes | Rule | None = None,
        stall_after: int | None = None,
        stall_for: float | None = None,
    ) -> None:
        """Replace the fault rule for connections accepted from now on (see the class)."""
        if cut_after is not None and stall_after is not None:
            raise ValueError("give cut_after or stall_after, not both")
        with self._lock:
            self._cut_after = cut_after if stall_after is None else stall_after
            self._stall = stall_after is not None
            self._stall_for = stall_for
            self._first_left = first
            self._match = match

    def _cut_limit(self, conn: _Conn) -> int | None:
        """The fault point for ``conn`` under the current rule, or None to let it through."""
        with self._lock:
            conn.stall = self._stall
            if self._cut_after is None:
                return None
            match = self._match
            if match is not None:
                if callable(match):
                    hit = bool(match(conn.index, bytes(conn.head)))
                else:
                    hit = match in conn.head
                if not hit:
                    return None
            if self._first_left is not None:
                if self._first_left <= 0:
                    return None
                self._first_left -= 1
            return self._cut_after

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The port the proxy listens on."""
        assert self._listener is not None, "proxy not started"
        return int(self._listener.getsockname()[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FaultyProxy:
        """Bind 127.0.0.1:0 and start accepting; returns self."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        self._listener = listener
        self._spawn(self._accept_loop)
        return self

    def stop(self) -> None:
        """Stop accepting, close every live connection and join all threads."""
        self._stopping.set()
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            self._close(conn, reset=False)
        for thread in list(self._threads):
            thread.join(timeout=10)

    def drop_connections(self) -> int:
        """Close every live connection now (counted in ``cuts``); returns how many."""
        with self._lock:
            conns = list(self._conns)
            self.cuts += len(conns)
        for conn in conns:
            self._close(conn, reset=self.reset)
        return len(conns)

    def __enter__(self) -> FaultyProxy:
        return self.start() if self._listener is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals -----------------------------------------------------------------------

    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True, name="faulty-proxy")
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=10)
                upstream.settimeout(None)
                for sock in (client, upstream):  # forward small writes at once, as they came
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                client.close()
                continue
            with self._lock:
                index = self.connections
                self.connections += 1
                conn = _Conn(index, client, upstream)
                self._conns.add(conn)
            self._spawn(self._pump_request, conn)
            self._spawn(self._pump_response, conn)

    def _pump_request(self, conn: _Conn) -> None:
        try:
            while True:
                data = conn.client.recv(1 << 16)
                if not data:
                    break
                if len(conn.head) < _HEAD_LIMIT:
                    conn.head += data[: _HEAD_LIMIT - len(conn.head)]
                self._count_requests(conn, data)
                conn.upstream.sendall(data)
        except OSError:
            pass
        finally:
            conn.gone.set()
            try:
                conn.upstream.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def _pump_response(self, conn: _Conn) -> None:
        try:
            while True:
                data = conn.upstream.recv(1 << 16)
                if not data:
                    break
                if not conn.decided:
                    conn.limit = self._cut_limit(conn)
                    conn.decided = True
                limit = conn.limit
                if limit is not None and conn.sent + len(data) >= limit:
                    cut = max(0, limit - conn.sent)
                    part, data = data[:cut], data[cut:]
                    if part:
                        self._count(len(part))  # before sending: the reader may finish first
                        conn.client.sendall(part)
                        conn.sent += len(part)
                    if not conn.stall:
                        with self._lock:
                            self.cuts += 1
                        self._close(conn, reset=self.reset)
                        return
                    with self._lock:
                        self.stalls += 1
                        stall_for = self._stall_for
                    conn.limit = None
                    if conn.gone.wait(stall_for) or self._stopping.is_set():
                        break
                self._count(len(data))  # before sending: the reader may finish first
                conn.client.sendall(data)
                conn.sent += len(data)
        except OSError:
            pass
        self._close(conn, reset=False)

    def _count_requests(self, conn: _Conn, data: bytes) -> None:
        seen = (conn.tail + data).lower()
        start = len(conn.tail)  # count each occurrence once: it must end in the new bytes
        requests = sum(1 for _ in _ends_after(seen, b" http/1.1\r\n", start))
        ranged = sum(1 for _ in _ends_after(seen, b"\r\nrange: bytes=", start))
        conn.tail = seen[-32:]
        if requests or ranged:
            with self._lock:
                self.requests += requests
                self.ranged_requests += ranged

    def _count(self, n: int) -> None:
        with self._lock:
            self.bytes_forwarded += n

    def _close(self, conn: _Conn, *, reset: bool) -> None:
        with conn.lock:
            if conn.closed:
                return
            conn.closed = True
        conn.gone.set()
        if reset:
            try:
                conn.client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
        for sock in (conn.client, conn.upstream):
            # SHUT_RD wakes a thread blocked in recv without sending FIN, so the close that
            # follows sends RST when SO_LINGER is 0.
            how = socket.SHUT_RD if reset and sock is conn.client else socket.SHUT_RDWR
            try:
                sock.shutdown(how)
            except OSError:
                pass
            sock.close()
        with self._lock:
            self._conns.discard(conn)


def _ends_after(data: bytes, pattern: bytes, start: int) -> Iterator[int]:
    """Positions of ``pattern`` in ``data`` that end after ``start``."""
    pos = data.find(pattern)
    while pos >= 0:
        if pos + len(pattern) > start:
            yield pos
        pos = data.find(pattern, pos + 1)


@pytest.fixture
def faulty_proxy() -> Iterator[Callable[..., FaultyProxy]]:
    """Fixture factory: ``faulty_proxy(target_port, **rule) -> started FaultyProxy``.

    Keyword arguments are those of :class:`FaultyProxy`. All proxies are stopped at teardown.
    """
    proxies: list[FaultyProxy] = []

    def start(target_port: int, **kwargs: Any) -> FaultyProxy:
        proxy = FaultyProxy(target_port, **kwargs).start()
        proxies.append(proxy)
        return proxy

    yield start
    for proxy in proxies:
        proxy.stop()
