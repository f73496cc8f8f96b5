"""Streaming tar in, tar out, for hpush ETLs built on ``aistore.sdk.etl.webserver``.

Dependency-free on purpose (stdlib ``tarfile`` + ``json``): an ETL image needs only
``aistore[etl]`` and its transform's own packages (Pillow), not ``wds_cloud``.

The input tar (plain or gzip) is read with ``tarfile`` in stream mode, so memory is bounded by
one member (or one sample, for transforms that group members by WebDataset key). Output is an
uncompressed tar in the same member order; members a transform does not touch keep their data
byte for byte.

Error contract of :class:`TarEtlServer` (``HTTPMultiThreadedServer`` with its request handler
extended):

* bad ``etl_args`` -> **400** before any input is read, body ``<etl>: bad etl_args for <path>: ...``;
* bad input found before the first output byte (not a tar, a corrupt first image) -> **422**;
* any later failure -> the chunked reply is cut off without its final chunk, so the receiver
  (AIStore, then the client) sees an incomplete body instead of a short, valid-looking tar.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tarfile
import threading
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO
from urllib.parse import parse_qs, unquote, urlparse

from aistore.sdk.etl.webserver.http_multi_threaded_server import (
    HTTPMultiThreadedServer,
    ThreadedHTTPServer,
)

BLOCK = 512


class EtlArgsError(ValueError):
    """``etl_args`` that the transform cannot use (answered with HTTP 400)."""


class EtlInputError(ValueError):
    """An object that is not what the transform expects (answered with HTTP 422)."""


def parse_json_args(etl_args: str, allowed: set[str]) -> dict[str, Any]:
    """Parse ``etl_args`` as a JSON object with only ``allowed`` keys ('' -> ``{}``).

    Raises:
        EtlArgsError: not JSON, not an object, or an unknown key.
    """
    if not etl_args:
        return {}
    try:
        args = json.loads(etl_args)
    except json.JSONDecodeError as exc:
        raise EtlArgsError(f"etl_args is not JSON ({exc}): {etl_args!r}") from None
    if not isinstance(args, dict):
        raise EtlArgsError(f"etl_args must be a JSON object, got {etl_args!r}")
    unknown = sorted(set(args) - allowed)
    if unknown:
        raise EtlArgsError(f"unknown etl_args key(s) {unknown}; allowed: {sorted(allowed)}")
    return args


def parse_size(value: Any, name: str = "size") -> tuple[int, int]:
    """``n`` -> ``(n, n)``, ``[w, h]`` -> ``(w, h)``; both positive ints.

    Raises:
        EtlArgsError: anything else.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value, value]
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 65535 for v in value)
    ):
        return int(value[0]), int(value[1])
    raise EtlArgsError(f"{name} must be a positive int or [width, height], got {value!r}")


def object_path(path: str) -> str:
    """The object path as ``bucket/object`` (the threaded server passes ``/b/o%20x``)."""
    return unquote(path).lstrip("/")


def member_bytes(info: tarfile.TarInfo, data: bytes) -> bytes:
    """One member as tar bytes: header (PAX only where needed), data, zero padding."""
    info.size = len(data)
    header = info.tobuf(format=tarfile.PAX_FORMAT, encoding="utf-8", errors="surrogateescape")
    return header + data + b"\0" * (-len(data) % BLOCK)


END_OF_ARCHIVE = b"\0" * (2 * BLOCK)


def iter_members(reader: BinaryIO, where: str) -> Iterator[tuple[tarfile.TarInfo, bytes]]:
    """``(header, data)`` of each member of a tar stream, in order (data ``b""`` for non-files).

    Raises:
        EtlInputError: the stream is not a (complete) tar or gzip-compressed tar.
    """
    try:
        tar = tarfile.open(fileobj=reader, mode="r|*")
    except tarfile.TarError as exc:
        raise EtlInputError(f"{where}: not a tar archive: {exc}") from None
    name = "(none yet)"
    try:
        with tar:
            for info in tar:
                name = info.name
                data = b""
                if info.isreg():
                    f = tar.extractfile(info)
                    data = f.read() if f is not None else b""
                    if len(data) != info.size:
                        raise EtlInputError(f"{where}: member {name!r} is truncated")
                yield info, data
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise EtlInputError(f"{where}: broken tar after member {name!r}: {exc}") from None


def sample_key(name: str) -> tuple[str, str]:
    """WebDataset split: ``dir/a.b.c`` -> ``("dir/a", "b.c")`` (``""`` ext without a dot)."""
    slash = name.rfind("/")
    dot = name.find(".", slash + 1)
    return (name, "") if dot < 0 else (name[:dot], name[dot + 1 :])


def iter_samples(
    members: Iterator[tuple[tarfile.TarInfo, bytes]],
) -> Iterator[list[tuple[tarfile.TarInfo, bytes]]]:
    """Group consecutive members with the same WebDataset key (one sample in memory at a time)."""
    group: list[tuple[tarfile.TarInfo, bytes]] = []
    key = None
    for info, data in members:
        k = sample_key(info.name)[0]
        if group and k != key:
            yield group
            group = []
        key = k
        group.append((info, data))
    if group:
        yield group


class TarEtlServer(HTTPMultiThreadedServer):
    """``HTTPMultiThreadedServer`` whose subclasses stream tar -> tar.

    Subclasses set ``etl_name`` and implement :meth:`check_args` (parse ``etl_args``; raise
    :class:`EtlArgsError`) and :meth:`transform_tar` (a generator of output bytes). Supports
    hpush (``PUT``) and hpull (``GET``) through the SDK's handler.
    """

    etl_name = "tar-etl"

    def check_args(self, etl_args: str) -> Any:
        """Parsed arguments, or :class:`EtlArgsError`."""
        raise NotImplementedError

    def transform_tar(self, reader: BinaryIO, where: str, args: Any) -> Iterator[bytes]:
        """Output tar bytes for the input tar ``reader``; ``where`` names the object."""
        raise NotImplementedError

    def transform_stream(self, reader: BinaryIO, path: str, etl_args: str) -> Iterator[bytes]:
        """SDK hook: validates ``etl_args`` at once, then returns the output generator."""
        where = f"{self.etl_name}: {object_path(path)}"
        args = self.check_args(etl_args)
        return self.transform_tar(reader, where, args)

    def get_mime_type(self) -> str:
        return "application/x-tar"

    class RequestHandler(HTTPMultiThreadedServer.RequestHandler):
        """The SDK handler plus clear 400/422 errors and a chunked, cut-on-error reply."""

        protocol_version = "HTTP/1.1"

        def _send_text(self, status: int, text: str) -> None:
            body = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True

        def _args_ok(self) -> bool:
            parsed = urlparse(self.path)
            if parsed.path == "/health":
                return True
            etl_args = parse_qs(parsed.query).get("etl_args", [""])[0].strip()
            etl = self.server.etl_server
            try:
                etl.check_args(etl_args)
            except EtlArgsError as exc:
                where = object_path(parsed.path)
                self._send_text(400, f"{etl.etl_name}: bad etl_args for {where}: {exc}")
                return False
            return True

        def do_PUT(self) -> None:
            if self._args_ok():
                super().do_PUT()

        def do_GET(self) -> None:
            if self._args_ok():
                super().do_GET()

        def _send_streaming_response(self, output_iter: Iterator[bytes]) -> None:
            etl = self.server.etl_server
            chunks = iter(output_iter)
            try:
                first = next(chunks, b"")
            except EtlInputError as exc:
                self._send_text(422, str(exc))
                return
            except Exception as exc:
                self._send_text(500, f"{etl.etl_name}: {type(exc).__name__}: {exc}")
                return
            self.send_response(200)
            self.send_header("Content-Type", etl.get_mime_type())
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                self._chunk(first)
                for chunk in chunks:
                    self._chunk(chunk)
            except Exception as exc:
                etl.logger.error("%s: reply cut off after an error: %s", etl.etl_name, exc)
                self.close_connection = True
                self.wfile.flush()
                return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def _chunk(self, data: bytes) -> None:
            if data:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))


def serve(cls: Callable[..., TarEtlServer], argv: list[str] | None = None) -> None:
    """Run ``cls`` as a server: ``--host`` (0.0.0.0), ``--port`` (8000; 0 picks a free one).

    Prints ``PORT <n>`` once listening; stops on SIGTERM/SIGINT. Needs ``AIS_TARGET_URL``.
    """
    parser = argparse.ArgumentParser(description=cls.__doc__)
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    opts = parser.parse_args(argv)
    etl = cls(host=opts.host, port=opts.port)
    server = ThreadedHTTPServer((opts.host, opts.port), etl.RequestHandler, etl_server=etl)
    server.daemon_threads = True

    def stop(_signum: int, _frame: Any) -> None:
        threading.Thread(target=server.shutdown).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"PORT {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    sys.stdout.flush()
