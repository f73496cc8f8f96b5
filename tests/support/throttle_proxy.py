"""An HTTP proxy for tests that throttles like a cloud store: above R requests a second it
answers "slow down" the way each backend does, and forwards everything else to a real server.

:class:`ThrottleProxy` listens on ``127.0.0.1`` (a port chosen by the OS) and forwards each
request (method, path, headers as sent, ``Host`` included so S3 signatures still match, and
body) to ``127.0.0.1:target_port``. Requests of ``methods`` (GET and HEAD) take a token from a
bucket refilled at ``rate`` tokens a second (holding at most ``burst``); with no token left the
proxy answers itself, without forwarding:

- ``style="s3"``: 503 with S3's XML ``<Code>SlowDown</Code>`` body,
- ``style="gcs"``: 429 with GCS's JSON ``rateLimitExceeded`` body,
- ``style="ais"``: 503 with AIStore's JSON error body,
- ``style="azure"``: 503 with Azure's XML ``ServerBusy`` body,
- ``style="http"``: 503 with a text body,

each with ``Retry-After`` when ``retry_after`` is set. ``rate=None`` never throttles;
:meth:`ThrottleProxy.set_rate` changes it while the proxy runs. ``delay`` seconds are waited
before each forwarded request (a far-away server: request rates then depend on requests in
flight). The whole upstream answer is read and then sent with ``Content-Length``.

Counters (under a lock): ``forwarded`` and ``throttled`` requests, and ``forwarded_at``, the
monotonic times of the forwarded requests of ``methods`` (to compute rates).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "upgrade"}

_S3_BODY = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    "<Message>Please reduce your request rate.</Message><RequestId>throttle-proxy</RequestId>"
    "</Error>"
)


def slow_down(style: str, path: str) -> tuple[int, str, bytes]:
    """``(status, content type, body)`` of a throttling answer in ``style``."""
    if style == "s3":
        return 503, "application/xml", _S3_BODY.encode()
    if style == "gcs":
        error = {
            "code": 429,
            "message": "The rate of requests exceeds the limit.",
            "errors": [{"reason": "rateLimitExceeded", "domain": "usageLimits"}],
        }
        return 429, "application/json", json.dumps({"error": error}).encode()
    if style == "ais":
        error = {"message": "too many requests", "method": "GET", "url_path": path, "status": 503}
        return 503, "application/json", json.dumps(error).encode()
    if style == "azure":
        body = (
            '<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code>'
            "<Message>Ingress is over the account limit.</Message></Error>"
        )
        return 503, "application/xml", body.encode()
    if style == "http":
        return 503, "text/plain", b"slow down"
    raise ValueError(f"unknown throttling style {style!r}")


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # parallel readers connect at once (the default 5 drops SYNs)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that drops its kept-alive connection is no error of the proxy


class ThrottleProxy:
    """HTTP proxy on 127.0.0.1 answering "slow down" above ``rate`` requests a second.

    Args:
        target_port: the real server's port (on 127.0.0.1).
        rate: requests a second let through (a token bucket); None: all.
        style: how a throttling answer looks: ``"s3"``, ``"gcs"``, ``"ais"``, ``"azure"`` or
            ``"http"``.
        burst: the most tokens the bucket holds.
        retry_after: seconds sent in ``Retry-After``; None: no header.
        delay: seconds waited before forwarding a request.
        methods: the methods that are counted and throttled.

    Attributes:
        port: the proxy's port.
        url: ``http://127.0.0.1:<port>``.
    """

    def __init__(
        self,
        target_port: int,
        *,
        rate: float | None,
        style: str,
        burst: float = 1.0,
        retry_after: float | None = None,
        delay: float = 0.0,
        methods: tuple[str, ...] = ("GET", "HEAD"),
    ) -> None:
        slow_down(style, "/")  # checks the style
        self.target_port = target_port
        self.style = style
        self.burst = burst
        self.retry_after = retry_after
        self.delay = delay
        self.methods = methods
        self.forwarded = 0
        self.throttled = 0
        self.forwarded_at: list[float] = []
        self._lock = threading.Lock()
        self._rate = rate
        self._tokens = burst
        self._stamp = time.monotonic()
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="throttle-proxy", daemon=True
        )

    def start(self) -> ThrottleProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> ThrottleProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def set_rate(self, rate: float | None) -> None:
        """Requests a second from now on (None: no throttling)."""
        with self._lock:
            self._rate = rate
            self._tokens = self.burst
            self._stamp = time.monotonic()

    def admit(self, method: str) -> bool:
        """Whether a request of ``method`` may pass now (takes a token)."""
        if method not in self.methods:
            return True
        with self._lock:
            now = time.monotonic()
            if self._rate is not None:
                self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self._rate)
                self._stamp = now
                if self._tokens < 1:
                    self.throttled += 1
                    return False
                self._tokens -= 1
            self.forwarded += 1
            self.forwarded_at.append(now)
            return True

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _relay(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                if not proxy.admit(self.command):
                    status, kind, text = slow_down(proxy.style, self.path)
                    self.send_response(status)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(text)))
                    if proxy.retry_after is not None:
                        self.send_header("Retry-After", f"{proxy.retry_after:g}")
                    self.end_headers()
                    self.wfile.write(text)
                    return
                if proxy.delay:
                    time.sleep(proxy.delay)
                conn = self.upstream = getattr(
                    self, "upstream", None
                ) or http.client.HTTPConnection("127.0.0.1", proxy.target_port, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                    self.send_response(resp.status, resp.reason)
                    for k, v in resp.getheaders():
                        if k.lower() not in _HOP and k.lower() != "content-length":
                            self.send_header(k, v)
                    if self.command == "HEAD":
                        length_header = resp.getheader("Content-Length")
                        if length_header is not None:
                            self.send_header("Content-Length", length_header)
                    else:
                        self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                except BaseException:
                    conn.close()
                    self.upstream = None
                    raise

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _relay

        return Handler
