"""A local Hugging Face Hub: the ``resolve`` and tree endpoints, from a directory, with tokens.

:class:`HubServer` serves ``root/{datasets,models,spaces}/{org}/{repo}/{revision}/{path}``
(a revision with ``/``, ``refs/convert/parquet``, is nested folders) on 127.0.0.1, and sends
the reads of large files to a second server, the "CDN" (a
:class:`~tests.support.http_server.HttpFileServer` on another port serving the same root), as
the Hub sends LFS/Xet files to its CDN hosts.

Hub behaviours it models:

- ``GET``/``HEAD {prefix}{org}/{repo}/resolve/{revision}/{path}`` (``prefix`` ``datasets/``,
  ``spaces/`` or none for models; the revision one path segment, percent-encoded when it holds
  ``/``: an unencoded ``refs/convert/parquet`` is not found, as on the Hub). A file of
  ``lfs_threshold`` bytes or more is answered ``302`` to the CDN, with a signed-looking query
  (``X-Amz-Signature=...``) and the headers ``X-Linked-Size``, ``X-Linked-Etag``,
  ``X-Repo-Commit``; a smaller one is served by the Hub itself (200, or 206 for a single
  ``Range``, with a quoted ``ETag``).
- ``GET /api/{datasets,models,spaces}/{org}/{repo}/tree/{revision}[/{path}]`` with
  ``recursive`` (``true``/``True``/``1``): a JSON array of ``{"type": "file", "oid", "size",
  "path"[, "lfs"]}`` and ``{"type": "directory", "oid", "path"}`` entries, directories
  included in recursive listings, paged ``page_size`` at a time with a
  ``Link: <...&cursor=N>; rel="next"`` header (the folder path may be encoded with or without
  ``/``, as clients send both).
- Errors as the Hub answers them, a JSON ``{"error": ...}`` body and ``X-Error-Code``: a
  missing repo is 401 ``RepoNotFound`` without a valid token (the Hub does not reveal private
  repos) and 404 with one; a missing revision 404 ``RevisionNotFound``; a missing file or
  folder 404 ``EntryNotFound``; a token not in ``tokens`` 401 (invalid credentials); a
  ``private`` repo 401 ``RepoNotFound`` without a valid token; a ``gated`` repo 401
  ``GatedRepo`` without one, 403 ``GatedRepo`` for a valid token not granted access.
- ``renamed``: ``{old: new}`` repo keys (``"datasets/org/repo"``) answered ``307`` to the
  same request on the new name (same origin: the token goes along).

Not modelled: the Xet protocol, commit hashes as revisions (any folder name is a revision),
``expand``/``paths-info``, uploads, rate limits (429), the CDN's URL expiry, ``refs/pr``
write semantics. ``received`` records ``(method, target, headers)`` of every request.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from tests.support.http_server import HttpFileServer

_TYPES = {"datasets": "datasets", "spaces": "spaces"}  # a resolve URL's first word


class _Refused(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_GET(self) -> None:
        self._answer(head=False)

    def _answer(self, *, head: bool) -> None:
        hub = self.server.owner
        hub.received.append((self.command, self.path, dict(self.headers.items())))
        parts = urlsplit(self.path)
        segments = parts.path.split("/")[1:]
        try:
            if segments[:1] == ["api"] and len(segments) >= 6 and segments[4] == "tree":
                self._tree(hub, segments, parse_qs(parts.query))
            elif "resolve" in segments[1:4]:
                self._resolve(hub, segments, head)
            else:
                raise _Refused(
                    404, "NotFound", "Sorry, we can't find the page you are looking for."
                )
        except _Refused as refused:
            body = b"" if head else json.dumps({"error": refused.message}).encode()
            self._send(
                refused.status,
                body,
                {"X-Error-Code": refused.code, "Content-Type": "application/json"},
                length=len(json.dumps({"error": refused.message}).encode()),
            )

    # -- endpoints ---------------------------------------------------------------------------

    def _resolve(self, hub: HubServer, segments: list[str], head: bool) -> None:
        kind = _TYPES.get(segments[0], "models")
        if kind != "models":
            segments = segments[1:]
        if len(segments) < 5 or segments[2] != "resolve":
            raise _Refused(404, "NotFound", "Sorry, we can't find the page you are looking for.")
        org, repo, _, rev, *rest = segments
        key = f"{kind}/{org}/{repo}"
        if key in hub.renamed:
            self._moved(hub.renamed[key], key, kind)
            return
        revision, path = unquote(rev), unquote("/".join(rest))
        folder = hub.revision_folder(key, revision, self._token(hub))
        file = hub.inside(folder, path)
        if not file.is_file():
            raise _Refused(404, "EntryNotFound", f"Entry not found: {path}")
        size = file.stat().st_size
        etag = '"' + hashlib.sha1(file.read_bytes()).hexdigest() + '"'
        headers = {"ETag": etag, "X-Repo-Commit": hashlib.sha1(revision.encode()).hexdigest()}
        if size >= hub.lfs_threshold:
            location = hub.cdn.url(f"{key}/{quote(revision)}/{quote(path)}")
            headers.update(
                {
                    "Location": location + "?X-Amz-Signature=cdn-signature&Expires=4102444800",
                    "X-Linked-Size": str(size),
                    "X-Linked-Etag": etag,
                }
            )
            self._send(302, b"", headers)
            return
        data = file.read_bytes()
        status, wanted = 200, self.headers.get("Range")
        headers["Accept-Ranges"] = "bytes"
        if wanted and self.headers.get("If-Range") in (None, etag):
            first, _, last = wanted.removeprefix("bytes=").partition("-")
            start = int(first)
            end = min(size, int(last) + 1) if last else size
            if start >= size:
                self._send(416, b"", {"Content-Range": f"bytes */{size}"})
                return
            status, data = 206, data[start:end]
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
        self._send(status, b"" if head else data, headers, length=len(data))

    def _tree(self, hub: HubServer, segments: list[str], query: dict[str, list[str]]) -> None:
        _, word, org, repo, _, rev, *rest = segments
        if word not in ("datasets", "models", "spaces"):
            raise _Refused(404, "NotFound", "Sorry, we can't find the page you are looking for.")
        key = f"{word}/{org}/{repo}"
        if key in hub.renamed:
            self._moved(hub.renamed[key], key, "api")
            return
        revision, path = unquote(rev), unquote("/".join(rest)).strip("/")
        folder = hub.revision_folder(key, revision, self._token(hub))
        base = hub.inside(folder, path)
        if not base.is_dir():
            raise _Refused(404, "EntryNotFound", f"Entry not found: {path}")
        recursive = query.get("recursive", ["false"])[0] in ("true", "True", "1")
        found = sorted(base.rglob("*") if recursive else base.iterdir())
        cursor = int(query.get("cursor", ["0"])[0])
        page = found[cursor : cursor + hub.page_size]
        entries = [hub.entry(folder, p) for p in page]
        headers = {"Content-Type": "application/json"}
        if cursor + hub.page_size < len(found):
            nxt = dict(query, cursor=[str(cursor + hub.page_size)])
            q = "&".join(f"{k}={v[0]}" for k, v in sorted(nxt.items()))
            path_part = urlsplit(self.path).path
            headers["Link"] = f'<{hub.url(path_part.lstrip("/"))}?{q}>; rel="next"'
        self._send(200, json.dumps(entries).encode(), headers)

    def _moved(self, new: str, old: str, where: str) -> None:
        """307 to the same request on the repo's new name (a model's URL has no type word)."""
        if where != "api":
            old, new = old.removeprefix("models/"), new.removeprefix("models/")
        self._send(307, b"", {"Location": self.path.replace(f"/{old}/", f"/{new}/", 1)})

    # -- helpers -----------------------------------------------------------------------------

    def _token(self, hub: HubServer) -> str | None:
        value = self.headers.get("Authorization") or ""
        if not value:
            return None
        token = value.removeprefix("Bearer ")
        if token not in hub.tokens:
            raise _Refused(401, "", "Invalid credentials in Authorization header")
        return token

    def _send(
        self, status: int, body: bytes, headers: dict[str, str], length: int | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if body:
            self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: HubServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet for clients that hang up (a read cut short, a kept connection closed)."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class HubServer:
    """A local Hub on 127.0.0.1 over ``root``, its CDN another server; see the module docstring.

    Args:
        root: the repos' files, ``root/{datasets,models,spaces}/{org}/{repo}/{revision}/...``.
        page_size: tree entries per page.
        lfs_threshold: files of this many bytes or more are sent to the CDN.
    """

    def __init__(
        self, root: str | os.PathLike[str], *, page_size: int = 3, lfs_threshold: int = 1024
    ) -> None:
        self.root = Path(root).resolve()
        self.page_size = page_size
        self.lfs_threshold = lfs_threshold
        self.tokens: set[str] = set()
        self.private: set[str] = set()
        self.gated: dict[str, set[str]] = {}
        self.renamed: dict[str, str] = {}
        self.received: list[tuple[str, str, dict[str, str]]] = []
        self.cdn = HttpFileServer(self.root)
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self.port = self._server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def url(self, path: str = "") -> str:
        return f"{self.endpoint}/{path}"

    def add(self, repo: str, path: str, data: bytes, revision: str = "main") -> Path:
        """Write ``data`` as ``path`` of ``repo`` (``"datasets/org/name"``, ``"models/org/x"``)
        at ``revision``; returns the file."""
        file = self.root / repo / revision / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(data)
        return file

    def revision_folder(self, key: str, revision: str, token: str | None) -> Path:
        """The folder of ``key`` at ``revision``, after the access checks (raises the Hub's
        refusals)."""
        repo = self.root / key
        if key in self.private and token is None:
            raise _Refused(401, "RepoNotFound", "Repository not found")
        if key in self.gated and token not in self.gated[key]:
            if token is None:
                raise _Refused(401, "GatedRepo", f"Access to {key} is restricted: log in")
            raise _Refused(403, "GatedRepo", f"Access to {key} is restricted; ask for access")
        if not repo.is_dir():
            raise _Refused(401 if token is None else 404, "RepoNotFound", "Repository not found")
        folder = self.inside(repo, revision)
        if not revision or not folder.is_dir():
            raise _Refused(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        return folder

    def inside(self, folder: Path, path: str) -> Path:
        target = (folder / path).resolve()
        if not target.is_relative_to(folder.resolve()):
            raise _Refused(404, "EntryNotFound", "Entry not found")
        return target

    def entry(self, folder: Path, path: Path) -> dict[str, Any]:
        name = path.relative_to(folder.resolve()).as_posix()
        oid = hashlib.sha1(name.encode()).hexdigest()
        if path.is_dir():
            return {"type": "directory", "oid": oid, "path": name}
        data = path.read_bytes()
        out: dict[str, Any] = {"type": "file", "oid": oid, "size": len(data), "path": name}
        if len(data) >= self.lfs_threshold:
            out["lfs"] = {
                "oid": hashlib.sha256(data).hexdigest(),
                "size": len(data),
                "pointerSize": 134,
            }
        return out

    def start(self) -> HubServer:
        self.cdn.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
        self.cdn.stop()

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
