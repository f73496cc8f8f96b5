"""Object routes of the AIStore emulator: GET (plain, Range, archpath, archregx), HEAD, writes."""

from __future__ import annotations

from typing import Any

from tests.emulators.ais import archive
from tests.emulators.ais.handler import CHUNK, NODE, AisHandler, HttpError, http_date
from tests.emulators.ais.store import NoSuchBucket, NoSuchObject, StoredObject, bucket_uri


def _chunks(data: bytes) -> list[memoryview]:
    view = memoryview(data)
    return [view[i : i + CHUNK] for i in range(0, len(view), CHUNK)]


def _attr_headers(obj: StoredObject) -> dict[str, str]:
    return {
        "Ais-Checksum-Type": "xxhash2",
        "Ais-Checksum-Value": obj.checksum,
        "Ais-Atime": str(obj.atime_ns),
        "Ais-Version": str(obj.version),
    }


def _parse_range(spec: str, size: int) -> tuple[int, int] | None:
    """``(start, end_inclusive)`` of a single ``bytes=`` range, or None when unsatisfiable."""
    unit, _, ranges = spec.partition("=")
    if unit.strip() != "bytes" or "," in ranges:
        return None
    first, _, last = ranges.strip().partition("-")
    try:
        if not first:
            n = int(last)
            return (max(0, size - n), size - 1) if n > 0 and size else None
        start = int(first)
        end = int(last) if last else size - 1
    except ValueError:
        return None
    if start >= size or end < start:
        return None
    return start, min(end, size - 1)


def get(
    h: AisHandler, obj: StoredObject, bucket: str, provider: str, query: dict[str, str]
) -> None:
    """Plain/ranged/archive GET (the ETL path is in the handler)."""
    rng = h.headers.get("Range")
    archpath = query.get("archpath", "")
    archregx = query.get("archregx", "")
    where = bucket_uri(provider, bucket, obj.name)
    if archpath or archregx:
        mode = query.get("archmode", "")
        arch_query = (
            f"(archpath={archpath})" if archpath else f"(archregx={archregx}, archmode={mode})"
        )
        if rng:
            raise HttpError(
                400,
                f"cannot range-read archived content range: {rng}, arch query: {arch_query}"
                " - operation not supported",
                tcode="ErrUnsupp",
            )
        if archpath:
            data = archive.read_member(obj.data, archpath)
            if data is None:
                raise HttpError(
                    404, f"{NODE}: {archpath} in {where} does not exist", tcode="ErrNotFound"
                )
            h._stream(200, {"Content-Type": "application/octet-stream"}, _chunks(data), len(data))
            return
        try:
            data, count = archive.select_members(obj.data, archregx, mode)
        except ValueError as exc:
            raise HttpError(400, f"{where}: {exc}") from None
        if not count:
            raise HttpError(
                404, f"{NODE}: {arch_query} in {where} does not exist", tcode="ErrNotFound"
            )
        h._stream(200, {"Content-Type": "application/x-tar"}, _chunks(data), len(data))
        return
    headers = {"Content-Type": "application/octet-stream", **_attr_headers(obj)}
    if rng:
        span = _parse_range(rng, obj.size)
        if span is None:
            raise HttpError(
                416,
                f"size={obj.size}: not satisfiable range [{rng.partition('=')[2].strip()}]",
                {"Content-Range": f"bytes */{obj.size}"},
                tcode="ErrRangeNotSatisfiable",
            )
        start, end = span
        headers["Content-Range"] = f"bytes {start}-{end}/{obj.size}"
        headers["Accept-Ranges"] = "bytes"
        data = memoryview(obj.data)[start : end + 1]
        h._stream(
            206, headers, [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)], len(data)
        )
        return
    h._stream(200, headers, _chunks(obj.data), obj.size)


def head(h: AisHandler, obj: StoredObject, query: dict[str, str]) -> None:
    """HEAD with the requested ``props``; Content-Length is the object size, no body."""
    props = set(filter(None, query.get("props", "name,size").split(",")))
    headers = {"Ais-Present": "true"}
    if "checksum" in props:
        headers["Ais-Checksum-Type"] = "xxhash2"
        headers["Ais-Checksum-Value"] = obj.checksum
    if "atime" in props:
        headers["Ais-Atime"] = str(obj.atime_ns)
    if "version" in props:
        headers["Ais-Version"] = str(obj.version)
    if "last-modified" in props:
        headers["Last-Modified"] = http_date(obj.atime_ns)
    if "etag" in props:
        headers["ETag"] = f'"{obj.checksum}"'
    h.send_response(200)
    for k, v in headers.items():
        h.send_header(k, v)
    h.send_header("Content-Length", str(obj.size))
    h.end_headers()


def _action(h: AisHandler, body: bytes) -> tuple[str, Any]:
    msg = h._json_body(body)
    return str(msg.get("action", "")), msg.get("value")


def write(
    h: AisHandler,
    method: str,
    bucket: str,
    name: str,
    provider: str,
    query: dict[str, str],
    body: bytes,
) -> None:
    """PUT (object or multipart part), POST (multipart create/complete), DELETE."""
    store = h.emu.store
    where = bucket_uri(provider, bucket, name)
    upload_id = query.get("uploadId")
    try:
        if method == "PUT":
            if query.get("append_type"):
                raise HttpError(501, f"{where}: append is not supported by the emulator")
            if query.get("object_to"):
                raise HttpError(501, f"{where}: object copy is not supported by the emulator")
            if upload_id:
                store.put_part(upload_id, int(query.get("partNumber", "0")), body)
            else:
                store.put_object(bucket, name, body, provider)
            h.send_bytes(200)
        elif method == "POST":
            action, value = _action(h, body)
            if action == "mpt-upload":
                new_id = store.create_upload(bucket, name, provider)
                h.send_bytes(200, new_id.encode(), {"Content-Type": "text/plain"})
            elif action == "mpt-complete" and upload_id:
                numbers = [int(p["part-number"]) for p in value or []]
                try:
                    store.complete_upload(upload_id, numbers)
                except NoSuchObject:  # AIStore names the upload by o[bucket/object(-)]
                    raise HttpError(
                        404,
                        f"o[{bucket}/{name}(-)]: {upload_id} does not exist",
                        tcode="ErrNotFound",
                    ) from None
                h.send_bytes(200)
            else:
                raise HttpError(400, f"{where}: unsupported action {action!r}")
        elif method == "DELETE":
            if upload_id:
                store.abort_upload(upload_id)
            else:
                try:
                    store.delete_object(bucket, name, provider)
                except NoSuchObject:  # AIStore's DELETE says it without node and tcode
                    raise HttpError(404, f"{where} doesn't exist") from None
            h.send_bytes(200)
        else:
            raise HttpError(405, f"{method} {where} is not supported")
    except NoSuchBucket:
        raise HttpError(
            404, f'bucket "{bucket_uri(provider, bucket)}" does not exist', tcode="ErrBckNotFound"
        ) from None
    except NoSuchObject:
        what = f"upload {upload_id} of {where}" if upload_id else where
        raise HttpError(404, f"{NODE}: {what} does not exist") from None
