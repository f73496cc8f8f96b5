"""A tiny hpush ETL for tests, built on the SDK's ``HTTPMultiThreadedServer``.

It rewrites a tar shard: ``.txt`` members are upper-cased; with ``etl_args`` (JSON
``{"suffix": "..."}``) the suffix is appended to them too; other members pass unchanged.
Run as a script it serves on ``127.0.0.1`` (free port), prints ``PORT <n>`` and serves until
terminated; the AIStore emulator is told the URL with ``register_etl``.
"""

from __future__ import annotations

import io
import json
import sys
import tarfile

from aistore.sdk.etl.webserver.http_multi_threaded_server import (
    HTTPMultiThreadedServer,
    ThreadedHTTPServer,
)


def transform_tar(data: bytes, etl_args: str) -> bytes:
    """Upper-case (and optionally suffix) the ``.txt`` members of a tar."""
    suffix = json.loads(etl_args).get("suffix", "") if etl_args else ""
    out = io.BytesIO()
    with (
        tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as src,
        tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as dst,
    ):
        for info in src:
            f = src.extractfile(info)
            payload = f.read() if f is not None else b""
            if info.name.endswith(".txt"):
                payload = payload.upper() + suffix.encode()
            info.size = len(payload)
            dst.addfile(info, io.BytesIO(payload))
    return out.getvalue()


class UpperEtl(HTTPMultiThreadedServer):
    """hpush transform: tar in, tar out."""

    def transform(self, data: bytes | str, path: str, etl_args: str) -> bytes:
        if isinstance(data, str):  # direct file access mode: a local path
            with open(data, "rb") as f:
                data = f.read()
        return transform_tar(data, etl_args)

    def get_mime_type(self) -> str:
        return "application/x-tar"


class _QuietServer(ThreadedHTTPServer):
    def handle_error(self, request, client_address):  # type: ignore[no-untyped-def]
        """Clients that hang up mid-answer are expected (tests cut streams); stay quiet for
        those and print any other error as socketserver does."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def main() -> None:
    etl = UpperEtl(host="127.0.0.1", port=0)
    server = _QuietServer(("127.0.0.1", 0), etl.RequestHandler, etl_server=etl)
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    sys.exit(main())
