"""Request handler of the AIStore emulator (routes of AIStore's HTTP API, docs/http_api.md in NVIDIA/aistore).

Real AIStore conventions kept here because the SDK depends on them: bodies are read on every
method (GET/DELETE carry JSON ActionMsgs) and ``Content-Type`` is never trusted (the SDK always
sends ``application/json``); every reply has an exact ``Content-Length`` (HTTP/1.1 keep-alive)
except relayed ETL replies of unknown length, which are chunked; errors are AIStore's JSON
(``{"message", "status", ...}``), in the ``Hdr-Error`` header on HEAD; list-objects replies
are msgpack with a non-empty ``UUID``.
"""

from __future__ import annotations

import email.utils
import http.client
import importlib
import json
import socket
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from tests.emulators.ais.etl import EtlError
from tests.emulators.ais.store import (
    NoSuchBucket,
    NoSuchObject,
    StoredObject,
    bucket_uri,
    normalize_provider,
)

NODE = "t[emu]"
CHUNK = 256 * 1024


class HttpError(Exception):
    """An error reply: status, AIStore-style message and AIStore's error type (``tcode``,
    e.g. ``ErrNotFound``; AIStore 5.0 leaves it out of some replies, so it is optional)."""

    def __init__(
        self,
        status: int,
        message: str,
        headers: dict[str, str] | None = None,
        *,
        tcode: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}
        self.tcode = tcode


class AisHandler(BaseHTTPRequestHandler):
    """One connection; methods dispatch on the path under ``/v1``."""

    protocol_version = "HTTP/1.1"
    # Headers and body are separate writes: with Nagle on, each response on a kept-alive
    # connection waits for the client's delayed ACK (40 ms). AIStore's servers send at once.
    disable_nagle_algorithm = True
    server_version = "AIStoreEmulator/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    # plumbing --------------------------------------------------------------------------------
    @property
    def emu(self) -> Any:
        return self.server.emulator  # type: ignore[attr-defined]

    def _read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is not None:
            return self.rfile.read(int(length))
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        return b""

    def _json_body(self, body: bytes) -> dict[str, Any]:
        if not body:
            return {}
        try:
            value = json.loads(body)
        except ValueError as exc:
            raise HttpError(400, f"invalid JSON body: {exc}") from None
        return value if isinstance(value, dict) else {"value": value}

    def _dispatch(self, method: str) -> None:
        parts = urlsplit(self.path)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        body = self._read_body()
        auth = self.headers.get("Authorization")
        self.emu.record(method, parts.path, query, self.headers.get("Range"), auth)
        self._method = method
        try:
            token = self.emu.required_token
            if token is not None and auth != f"Bearer {token}":
                self._missing_bucket_first(parts.path, query)
                # AIStore 5.0 tags a rejected token (not a missing one) with tcode wrapError
                raise HttpError(401, _auth_message(auth), tcode=auth and "wrapError")
            if not parts.path.startswith("/v1/"):
                raise HttpError(404, f"invalid route {parts.path!r}")
            self._route(method, parts.path[4:], query, body)
        except HttpError as err:
            self._error(err.status, err.message, err.headers, tcode=err.tcode)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # an emulator bug: make it loud, not a hang
            self._error(500, f"emulator failure: {type(exc).__name__}: {exc}")

    def _missing_bucket_first(self, path: str, query: dict[str, str]) -> None:
        """AIStore 5.0 looks up the bucket of an object or bucket request before the token:
        a missing bucket is a 404 even without a valid token."""
        head, _, rest = path.removeprefix("/v1/").partition("/")
        bucket = unquote(rest.partition("/")[0])
        if head not in ("objects", "buckets") or not bucket:
            return
        provider = normalize_provider(query.get("provider"))
        if not self.emu.store.has_bucket(bucket, provider):
            where = bucket_uri(provider, bucket)
            raise HttpError(404, f'bucket "{where}" does not exist', tcode="ErrBckNotFound")

    def _route(self, method: str, rest: str, query: dict[str, str], body: bytes) -> None:
        head, _, tail = rest.partition("/")
        if head == "buckets":
            from tests.emulators.ais.buckets import handle_bucket

            handle_bucket(self, method, unquote(tail), query, body)
        elif head == "objects":
            bucket, _, obj = tail.partition("/")
            if not bucket or not obj:
                raise HttpError(400, f"invalid object path {rest!r}")
            self._object(method, bucket, unquote(obj), query, body)
        elif head == "etl":
            self._etl(method, tail, query, body)
        elif head == "cluster" and not tail:
            from tests.emulators.ais.xactions import handle_cluster

            handle_cluster(self, method, query, self._json_body(body))
        elif head == "ml" and (tail == "moss" or tail.startswith("moss/")):
            from tests.emulators.ais.moss import handle_moss

            handle_moss(self, method, tail, query, body)
        elif head == "sort":
            self._dsort(method, "/v1/" + rest, query, body)
        else:
            raise HttpError(404, f"unsupported route /v1/{rest}")

    def send_bytes(
        self, status: int, body: bytes | memoryview = b"", headers: dict[str, str] | None = None
    ) -> None:
        """Reply with ``body`` and an exact Content-Length (no body on HEAD)."""
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self._method != "HEAD" and body:
            self.wfile.write(body)

    def send_json(self, status: int, value: Any) -> None:
        self.send_bytes(status, json.dumps(value).encode(), {"Content-Type": "application/json"})

    def _error(
        self,
        status: int,
        message: str,
        headers: dict[str, str] | None = None,
        *,
        tcode: str | None = None,
    ) -> None:
        payload = json.dumps(
            {
                **({"tcode": tcode} if tcode else {}),
                "message": message,
                "method": self._method,
                "url_path": unquote(urlsplit(self.path).path),  # Go's decoded URL.Path
                "remote_addr": self.client_address[0],
                "caller": "",
                "node": NODE,
                "status": status,
            }
        )
        extra = dict(headers or {})
        if self._method == "HEAD":
            extra["Hdr-Error"] = payload
            self.send_bytes(status, b"", extra)
        else:
            extra["Content-Type"] = "application/json"
            self.send_bytes(status, payload.encode(), extra)

    def _stream(
        self, status: int, headers: dict[str, str], chunks: Iterable[bytes], length: int | None
    ) -> None:
        """Send a GET body, honouring the emulator's cut faults; chunked when length is None."""
        cut = self.emu.take_cut(self.path)
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        if length is None:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(length))
        self.end_headers()
        sent = 0
        for chunk in chunks:
            if cut is not None and sent + len(chunk) > cut:
                chunk = chunk[: cut - sent]
                self._write(chunk, length is None, final=False)
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self._write(chunk, length is None, final=False)
            sent += len(chunk)
        if length is None:
            self._write(b"", True, final=True)

    def _write(self, data: bytes | memoryview, chunked: bool, *, final: bool) -> None:
        if not chunked:
            if data:
                self.wfile.write(data)
        elif final:
            self.wfile.write(b"0\r\n\r\n")
        elif data:
            self.wfile.write(b"%x\r\n" % len(data) + bytes(data) + b"\r\n")

    # objects ---------------------------------------------------------------------------------
    def _lookup(self, bucket: str, name: str, provider: str) -> StoredObject:
        try:
            return self.emu.store.get_object(bucket, name, provider)
        except NoSuchBucket:
            raise HttpError(
                404,
                f'bucket "{bucket_uri(provider, bucket)}" does not exist',
                tcode="ErrBckNotFound",
            ) from None
        except NoSuchObject:
            raise HttpError(
                404,
                f"{NODE}: {bucket_uri(provider, bucket, name)} does not exist",
                tcode="ErrNotFound",
            ) from None

    def _object(
        self, method: str, bucket: str, name: str, query: dict[str, str], body: bytes
    ) -> None:
        from tests.emulators.ais import objects

        provider = normalize_provider(query.get("provider"))
        if method == "GET":
            if query.get("etl_name"):
                self._etl_get(bucket, name, provider, query)
                return
            objects.get(self, self._lookup(bucket, name, provider), bucket, provider, query)
        elif method == "HEAD":
            objects.head(self, self._lookup(bucket, name, provider), query)
        else:
            objects.write(self, method, bucket, name, provider, query, body)

    def _etl_get(self, bucket: str, name: str, provider: str, query: dict[str, str]) -> None:
        etl_name = query["etl_name"]
        entry = self.emu.etls.get(etl_name)
        if entry is None:
            raise HttpError(
                404,
                f"{NODE}: {etl_name} does not exist - try starting new ETL with "
                f'"{self.emu.url}/v1/etl/init" endpoint',
            )
        obj = self._lookup(bucket, name, provider)
        target = urlsplit(entry.url)
        path = f"{target.path.rstrip('/')}/{bucket}/{quote(name)}"
        if "etl_args" in query:
            path += "?etl_args=" + quote(query["etl_args"], safe="")
        conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
        try:
            conn.request("PUT", path, body=obj.data, headers={"Content-Length": str(obj.size)})
            resp = conn.getresponse()
            entry.obj_count += 1
            entry.in_bytes += obj.size
            if resp.status >= 400:
                detail = resp.read().decode(errors="replace")
                raise HttpError(resp.status, f"ETL error: {etl_name}: {detail}")
            length = resp.getheader("Content-Length")
            headers = {"Content-Type": resp.getheader("Content-Type", "application/octet-stream")}
            self._stream(resp.status, headers, _counting(_chunks(resp), entry), _int(length))
        except OSError as exc:
            raise HttpError(500, f"ETL {etl_name} at {entry.url} failed: {exc}") from None
        finally:
            conn.close()

    # ETL and dSort ---------------------------------------------------------------------------
    def _etl(self, method: str, tail: str, query: dict[str, str], body: bytes) -> None:
        etls = self.emu.etls
        name, _, action = tail.partition("/")
        if not name:
            if method == "PUT":
                try:
                    entry = etls.init(self._json_body(body))
                except EtlError as err:
                    raise HttpError(err.status, str(err)) from None
                self.send_bytes(200, entry.job_id.encode(), {"Content-Type": "text/plain"})
            elif method == "GET":
                self.send_json(200, [_etl_info(e) for e in etls.all()])
            else:
                raise HttpError(405, f"{method} /v1/etl is not supported")
            return
        entry = etls.lookup(name)
        if entry is None:
            raise HttpError(404, f"p[emu]: etl job {name} does not exist")
        if method == "GET" and not action:
            from tests.emulators.ais.xactions import obj_errors

            errors = obj_errors(entry, query.get("uuid", ""))
            self.send_json(200, {"init_msg": entry.init_msg, "obj_errors": errors})
        elif method == "POST" and action in ("stop", "start"):
            etls.set_stage(name, "Aborted" if action == "stop" else "Running")
            self.send_bytes(200)
        elif method == "DELETE" and not action:
            etls.delete(name)
            self.send_bytes(200)
        else:
            raise HttpError(405, f"{method} /v1/etl/{tail} is not supported by the emulator")

    def _dsort(self, method: str, path: str, query: dict[str, str], body: bytes) -> None:
        try:
            module = importlib.import_module("tests.emulators.ais.dsort")
        except ModuleNotFoundError:
            raise HttpError(501, "dsort is not available in this emulator build") from None
        status, headers, reply = module.handle(self.emu.store, method, path, query, body)
        self.send_bytes(status, reply, dict(headers))


def _auth_message(authorization: str | None) -> str:
    """AIStore 5.0's 401 texts: no token, a token that is not a JWT, one with a bad signature."""
    if authorization is None:
        return "token required"
    why = (
        "token signature is invalid: signature is invalid"
        if authorization.removeprefix("Bearer ").count(".") == 2
        else "token is malformed: token contains an invalid number of segments"
    )
    return f'invalid token from header "Authorization": invalid token [err: {why}]'


def _chunks(resp: http.client.HTTPResponse) -> Iterator[bytes]:
    while True:
        chunk = resp.read1(CHUNK) if hasattr(resp, "read1") else resp.read(CHUNK)
        if not chunk:
            return
        yield chunk


def _counting(chunks: Iterable[bytes], entry: Any) -> Iterator[bytes]:
    for chunk in chunks:
        entry.out_bytes += len(chunk)
        yield chunk


def _int(value: str | None) -> int | None:
    return int(value) if value is not None else None


def _etl_info(entry: Any) -> dict[str, Any]:
    return {
        "id": entry.name,
        "xaction_id": entry.job_id,
        "stage": entry.stage,
        "obj_count": entry.obj_count,
        "in_bytes": entry.in_bytes,
        "out_bytes": entry.out_bytes,
    }


def http_date(ns: int) -> str:
    """RFC 1123 date of a nanosecond timestamp (Last-Modified)."""
    return email.utils.formatdate(ns / 1e9, usegmt=True)
