"""A real threaded HTTP file server on 127.0.0.1 with failure modes for opener tests.

It serves the files under ``root`` with ``Range`` (single ``bytes=N-``/``N-M``/``-N``),
``If-Range``, ``ETag`` and ``Last-Modified``, and answers 404 for missing files. Behaviour can be
changed on the live object (attributes are read on every request):

- ``cut_after``: close the connection after this many body bytes of a response...
- ``cut_every``: ...on GETs number 1, 1+k, 1+2k, ... (default 1: every response).
- ``ignore_range``: answer every GET with 200 and the whole file.
- ``no_validators``: send neither ``ETag`` nor ``Last-Modified``.
- ``before_response``: ``callable(request_number, path)`` run before each GET is answered;
  tests use it to rewrite a file between requests (a shard changing mid-read).
- ``status_for``: ``{url_path: status}`` to answer with an error status and a short body.
- ``redirects``: ``{url_path: location}`` answered with 302.
- ``received``: ``(request_target, headers)`` of every GET, in order (what a client sent;
  the target as sent, query included).

``tls`` (an :class:`ssl.SSLContext`) serves HTTPS instead (the URLs start with ``https``).

Usage::

    with HttpFileServer(tmp_path) as server:
        url = server.url("shard-000.tar")
"""

from __future__ import annotations

import email.utils
import hashlib
import os
import ssl
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: with Nagle on, every response on a kept-alive
    # connection waits for the client's delayed ACK (40 ms). Real servers set TCP_NODELAY too.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        owner = self.server.owner
        number = owner._next_request()
        path = unquote(urlsplit(self.path).path)
        owner.received.append((self.path, dict(self.headers.items())))
        if path in owner.redirects:
            self._reply_empty(302, {"Location": owner.redirects[path]})
            return
        if path in owner.status_for:
            status = owner.status_for[path]
            body = f"status {status} for {path}\n".encode()
            self._reply_bytes(status, body)
            return
        if owner.before_response is not None:
            owner.before_response(number, path)
        file = (owner.root / path.lstrip("/")).resolve()
        if not file.is_relative_to(owner.root) or not file.is_file():
            self._reply_bytes(404, b"not found\n")
            return
        stat = file.stat()
        size = stat.st_size
        etag = '"' + hashlib.sha1(f"{stat.st_mtime_ns}-{stat.st_size}".encode()).hexdigest() + '"'
        last_modified = email.utils.formatdate(stat.st_mtime, usegmt=True)
        headers: dict[str, str] = {}
        if not owner.no_validators:
            headers["ETag"] = etag
            headers["Last-Modified"] = last_modified
        start, end, status = 0, size, 200
        wanted = self.headers.get("Range")
        if_range = self.headers.get("If-Range")
        if wanted and not owner.ignore_range and if_range in (None, etag, last_modified):
            parsed = _parse_range(wanted, size)
            if parsed is None:
                self._reply_empty(416, {"Content-Range": f"bytes */{size}"})
                return
            start, end = parsed
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
        if owner.ignore_range:
            headers.pop("Accept-Ranges", None)
        else:
            headers["Accept-Ranges"] = "bytes"
        with file.open("rb") as f:  # only the bytes served (benchmarks serve 256 MiB files)
            f.seek(start)
            body = f.read(end - start)
        cut = None
        if owner.cut_after is not None and (number - 1) % max(1, owner.cut_every) == 0:
            cut = owner.cut_after
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        if cut is not None:
            self.send_header("Connection", "close")
        self.end_headers()
        if cut is not None and cut < len(body):
            self.wfile.write(body[:cut])
            self.wfile.flush()
            owner.cuts += 1
            self.close_connection = True
            return
        self.wfile.write(body)

    def _reply_bytes(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(body)

    def _reply_empty(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()


def _parse_range(value: str, size: int) -> tuple[int, int] | None:
    if not value.startswith("bytes=") or "," in value:
        return None
    first, _, last = value[len("bytes=") :].partition("-")
    if not first:
        n = int(last)
        return (max(0, size - n), size) if n else None
    start = int(first)
    end = min(size, int(last) + 1) if last else size
    if start >= size or start >= end:
        return None
    return start, end


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: HttpFileServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that hang up mid-answer are expected (tests cut streams); stay quiet for
        those and print any other error as socketserver does."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class HttpFileServer:
    """Serves ``root`` over HTTP on 127.0.0.1 with a free port; see the module docstring."""

    def __init__(self, root: str | os.PathLike[str], tls: ssl.SSLContext | None = None) -> None:
        self.root = Path(root).resolve()
        self.cut_after: int | None = None
        self.cut_every = 1
        self.ignore_range = False
        self.no_validators = False
        self.before_response: Callable[[int, str], None] | None = None
        self.status_for: dict[str, int] = {}
        self.redirects: dict[str, str] = {}
        self.received: list[tuple[str, dict[str, str]]] = []
        self.requests = 0
        self.cuts = 0
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self.scheme = "http"
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
            self.scheme = "https"
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def _next_request(self) -> int:
        with self._lock:
            self.requests += 1
            return self.requests

    def url(self, path: str = "") -> str:
        """The URL of ``path`` (relative to ``root``)."""
        return f"{self.scheme}://127.0.0.1:{self.port}/{path.lstrip('/')}"

    def start(self) -> HttpFileServer:
        """Start serving on a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> HttpFileServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextmanager
def serving(root: Path, files: dict[str, bytes]) -> Iterator[HttpFileServer]:
    """``files`` (name -> bytes) written to the new folder ``root`` and served from it."""
    root.mkdir()
    for name, data in files.items():
        (root / name).write_bytes(data)
    with HttpFileServer(root) as server:
        yield server
