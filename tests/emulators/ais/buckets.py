"""Bucket routes of the AIStore emulator: create, destroy, HEAD, list buckets, list objects,
and the offline ETL actions ``etl-bck``/``etl-listrange`` (run by :mod:`.xactions`)."""

from __future__ import annotations

import email.utils
import json
import uuid
from typing import Any

from msgspec import msgpack

from tests.emulators.ais import archive
from tests.emulators.ais.handler import AisHandler, HttpError
from tests.emulators.ais.store import BucketExists, NoSuchBucket, bucket_uri, normalize_provider
from tests.emulators.ais.xactions import ETL_KINDS as ETL_ACTIONS, start_tcb

ARCH_DIR_FLAG = 1 << 3  # ListObjectFlag.ARCH_DIR
ENTRY_CACHED = 64
ENTRY_IN_ARCH = 128
ENTRY_IS_ARCHIVE = 512
#: AIStore's page caps: 10000 for ais buckets, 1000 for AWS/GCP/OCI, 5000 for Azure.
PAGE_CAPS = {"ais": 10000, "azure": 5000}


def handle_bucket(
    h: AisHandler, method: str, name: str, query: dict[str, str], body: bytes
) -> None:
    """Dispatch ``/v1/buckets[/<name>]``."""
    provider = normalize_provider(query.get("provider"))
    store = h.emu.store
    if not name:
        if method != "GET":
            raise HttpError(405, f"{method} /v1/buckets is not supported")
        want = query.get("provider")
        buckets = store.list_buckets(normalize_provider(want) if want else None)
        h.send_json(
            200,
            [{"name": n, "provider": p, "namespace": {"uuid": "", "name": ""}} for p, n in buckets],
        )
        return
    where = bucket_uri(provider, name)
    try:
        if method == "POST":
            msg = h._json_body(body)
            action = str(msg.get("action", ""))
            if action in ETL_ACTIONS:
                xid = start_tcb(h, action, name, provider, query, msg.get("value"))
                h.send_bytes(200, xid.encode(), {"Content-Type": "text/plain"})
                return
            if action != "create-bck":
                raise HttpError(501, f"{where}: action {action!r} is not supported by the emulator")
            store.create_bucket(name, provider)
            h.send_bytes(200)
        elif method == "DELETE":
            store.delete_bucket(name, provider)
            h.send_bytes(200)
        elif method == "HEAD":
            if not store.has_bucket(name, provider):
                raise NoSuchBucket(where)
            props = {"name": name, "provider": provider, "checksum": {"type": "xxhash2"}}
            h.send_bytes(200, b"", {"Ais-Bucket-Props": json.dumps(props)})
        elif method == "GET":
            list_objects(h, name, provider, h._json_body(body))
        else:
            raise HttpError(405, f"{method} {where} is not supported")
    except NoSuchBucket:
        raise HttpError(404, f'bucket "{where}" does not exist', tcode="ErrBckNotFound") from None
    except BucketExists:
        raise HttpError(
            409, f'bucket "{where}" already exists', tcode="ErrBucketAlreadyExists"
        ) from None


def _entries(
    h: AisHandler, bucket: str, provider: str, msg: dict[str, Any]
) -> list[dict[str, Any]]:
    prefix = str(msg.get("prefix") or "")
    flags = int(msg.get("flags") or 0)
    props = set(filter(None, str(msg.get("props") or "").split(",")))
    entries: list[dict[str, Any]] = []
    for obj in h.emu.store.list_objects(bucket, "", provider):
        is_arch = bool(flags & ARCH_DIR_FLAG) and archive.is_archive_name(obj.name)
        entry: dict[str, Any] = {"n": obj.name, "s": obj.size, "f": ENTRY_CACHED}
        if "checksum" in props:
            entry["cs"] = obj.checksum
        if "atime" in props:
            entry["a"] = email.utils.formatdate(obj.atime_ns / 1e9, usegmt=True)
        if "version" in props:
            entry["v"] = str(obj.version)
        if is_arch:
            entry["f"] |= ENTRY_IS_ARCHIVE
        if obj.name.startswith(prefix):
            entries.append(entry)
        if is_arch:
            for member, size in archive.list_members(obj.data):
                full = f"{obj.name}/{member}"
                if full.startswith(prefix):
                    entries.append({"n": full, "s": size, "f": ENTRY_CACHED | ENTRY_IN_ARCH})
    entries.sort(key=lambda e: e["n"])
    return entries


def list_objects(h: AisHandler, bucket: str, provider: str, body: dict[str, Any]) -> None:
    """L1: one msgpack page of ``list-objects``; names ``> continuation_token`` (and start_after)."""
    if body.get("action") not in (None, "list"):
        raise HttpError(501, f"action {body.get('action')!r} is not supported by the emulator")
    msg = body.get("value") or {}
    if not h.emu.store.has_bucket(bucket, provider):
        raise NoSuchBucket(bucket)
    entries = _entries(h, bucket, provider, msg)
    after = max(str(msg.get("continuation_token") or ""), str(msg.get("start_after") or ""))
    if after:
        entries = [e for e in entries if e["n"] > after]
    cap = PAGE_CAPS.get(provider, 1000)
    page_size = int(msg.get("pagesize") or 0)
    page_size = min(page_size, cap) if page_size > 0 else cap
    page = entries[:page_size]
    token = page[-1]["n"] if len(page) >= page_size else ""
    reply = {
        "UUID": str(msg.get("uuid") or "") or uuid.uuid4().hex,
        "ContinuationToken": token,
        "Entries": page,
        "Flags": 0,
    }
    h.send_bytes(200, msgpack.encode(reply), {"Content-Type": "application/msgpack"})
