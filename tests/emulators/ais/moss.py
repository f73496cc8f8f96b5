"""GetBatch (``GET /v1/ml/moss[/<bucket>]``, AIStore's ``docs/get_batch.md``) in the emulator.

Modelled as AIStore 5.0 answers it (``tests/ais_real/test_conformance.py`` compares): the body
is a ``MossReq`` (``in``: entries with ``objname`` and optional ``bucket``, ``provider``,
``archpath``, ``start``/``length``; ``coer``, ``onob``, ``strm``); the URL's bucket is the
default of the entries. A bucket that does not exist fails the whole request with 404 before
anything is sent. The answer is one chunked TAR stream (``Content-Type: application/x-tar``),
one member per entry in the order asked, named ``<bucket>/<object>[/<archpath>]`` (``onob``:
without the bucket), mode 0644, mtime 0. An entry that cannot be read is, with ``coer``, an
empty member under ``__404__/``; without it the archive ends there. A range is ``start`` and
``length`` (-1: to the end); one that runs past the object's end gives the whole object (what
AIStore 5.0 does, after a 20 s wait the emulator leaves out).

Not modelled (a 501 names them): buffered multipart answers (``"strm": false``) and output
formats other than ``.tar``. The cut faults of the emulator (``cut_after(match="/v1/ml/moss")``)
apply to the answer's body.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from tests.emulators.ais.archive import read_member
from tests.emulators.ais.store import NoSuchBucket, NoSuchObject, bucket_uri, normalize_provider

if TYPE_CHECKING:
    from tests.emulators.ais.handler import AisHandler

MISSING_DIR = "__404__"


def _error(status: int, message: str, tcode: str | None = None) -> Exception:
    from tests.emulators.ais.handler import HttpError

    return HttpError(status, message, tcode=tcode)


def _request(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body or b"{}")
    except ValueError as exc:
        raise _error(400, f"invalid GetBatch request: {exc}") from None
    if isinstance(value, dict) and isinstance(value.get("value"), dict):
        value = value["value"]  # the {"action": "getbatch", "value": {...}} form of the docs
    if not isinstance(value, dict) or not value.get("in"):
        raise _error(400, "GetBatch request without entries ('in')")
    return value


def _member(name: str, data: bytes) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.mtime = 0
    return info.tobuf(tarfile.PAX_FORMAT) + data + bytes(-len(data) % 512)


def _slice(data: bytes, entry: dict[str, Any]) -> bytes:
    start = int(entry.get("start") or 0)
    length = int(entry.get("length") or 0)
    if not start and not length:
        return data
    end = len(data) if length == -1 else start + length
    if start > len(data) or end > len(data):
        return data  # AIStore 5.0: a range past the end gives the whole object
    return data[start:end]


def handle_moss(h: AisHandler, method: str, tail: str, query: dict[str, str], body: bytes) -> None:
    """Answer ``GET /v1/ml/moss[/<bucket>]``."""
    if method != "GET":
        raise _error(405, f"invalid method {method} for /v1/ml/moss")
    req = _request(body)
    if req.get("strm") is False or req.get("strm") is None:
        raise _error(501, "emulator: GetBatch answers in streaming mode only ('strm': true)")
    if (req.get("mime") or ".tar") not in (".tar", "tar"):
        raise _error(501, f"emulator: GetBatch output format {req.get('mime')!r} not modelled")
    default_bucket = unquote(tail.partition("/")[2])
    default_provider = normalize_provider(query.get("provider"))
    entries = []
    for entry in req["in"]:
        bucket = entry.get("bucket") or default_bucket
        provider = normalize_provider(entry.get("provider") or default_provider)
        if not bucket:
            raise _error(400, f"GetBatch entry {entry.get('objname')!r} without a bucket")
        if not h.emu.store.has_bucket(bucket, provider):
            raise _error(
                404, f'bucket "{bucket_uri(provider, bucket)}" does not exist', "ErrBckNotFound"
            )
        entries.append((bucket, provider, entry))
    chunks = _archive(h, entries, coer=bool(req.get("coer")), onob=bool(req.get("onob")))
    h._stream(200, {"Content-Type": "application/x-tar"}, chunks, None)


def _archive(
    h: AisHandler, entries: list[tuple[str, str, dict[str, Any]]], *, coer: bool, onob: bool
) -> Iterator[bytes]:
    for bucket, provider, entry in entries:
        name = str(entry["objname"])
        archpath = entry.get("archpath")
        member = name if onob else f"{bucket}/{name}"
        if archpath:
            member = f"{member}/{archpath.lstrip('/')}"
        data: bytes | None
        try:
            stored = bytes(h.emu.store.get_object(bucket, name, provider).data)
        except (NoSuchBucket, NoSuchObject):
            data = None
        else:
            data = stored if not archpath else read_member(stored, archpath)
        if data is None:
            if not coer:
                break
            yield _member(f"{MISSING_DIR}/{member}", b"")
            continue
        yield _member(member, _slice(data, entry))
    yield bytes(1024)
