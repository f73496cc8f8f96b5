"""Listing a Hub repo folder through the tree API, page after page.

``GET {endpoint}/api/{type}s/{org}/{repo}/tree/{revision}/{folder}?recursive=true`` answers a
JSON array of entries (``{"type": "file", "path": ..., "size": ...}`` and
``{"type": "directory", ...}``) and, when there are more, a ``Link: <URL>; rel="next"`` header
naming the next page (the Hub pages at 1,000 entries, 50 with ``expand``). Each page is read
with the HTTP backend's request and redirect rules (:func:`wds_cloud.openers.http.conn.get`:
the token never leaves the Hub's origin) and its retry loop
(:class:`~wds_cloud.openers.streams.resumable.ResumableReader`: a dropped page is asked
again). A folder that is not there (404 ``EntryNotFound``) lists nothing; a missing repo or
revision, or a refused token, raises (:func:`wds_cloud.openers.hf.errors.status_error`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from urllib.parse import urljoin

from wds_cloud.errors import ShardReadError
from wds_cloud.openers.hf.errors import status_error
from wds_cloud.openers.hf.urls import HfPath
from wds_cloud.openers.http.config import HttpConfig
from wds_cloud.openers.http.conn import RETRY_ON, Body, get
from wds_cloud.openers.http.errors import TRANSIENT, explain
from wds_cloud.openers.streams.backoff import RetryPolicy
from wds_cloud.openers.streams.resumable import Opened, ResumableReader, RetryableError

__all__ = ["next_link", "tree"]

_LINK = re.compile(r"<([^>]*)>\s*;([^,]*)")
_REL_NEXT = re.compile(r"""rel\s*=\s*"?next"?""")


def next_link(value: str | None) -> str | None:
    """The ``rel="next"`` target of a ``Link`` header (RFC 8288), or None."""
    for target, params in _LINK.findall(value or ""):
        if _REL_NEXT.search(params):
            return str(target)
    return None


def _page(
    config: HttpConfig, url: str, where: HfPath, headers: dict[str, str], has_token: bool
) -> tuple[list[dict[str, object]] | None, str | None]:
    """One page: its entries (None for a folder that is not there) and the next page's URL."""
    link: list[str | None] = [None]
    missing = [False]

    def fetch(position: int) -> Opened:
        conn, resp = get(config, url, headers)
        if resp.status != 200:
            detail = f"HTTP {resp.status} {resp.reason}"
            code = resp.getheader("X-Error-Code")
            conn.close()
            if resp.status in TRANSIENT:
                raise RetryableError(detail)
            listed = where.head + where.path
            error = status_error(listed, where, resp.status, code, has_token, f"{detail} {url}")
            if error is not None:
                raise error
            missing[0] = True
            return Opened(_Empty(), 0, 0)
        link[0] = resp.getheader("Link")
        length = resp.getheader("Content-Length")
        return Opened(Body(conn, resp), 0, int(length) if length and length.isdigit() else None)

    reader = ResumableReader(
        fetch,
        url=url,
        policy=RetryPolicy.from_config(config),
        retry_on=RETRY_ON,
        explain=explain,
    )
    try:
        data = reader.start().read()
    finally:
        reader.close()
    if missing[0]:
        return None, None
    try:
        entries = json.loads(data)
    except ValueError:
        entries = None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ShardReadError(
            "the Hub's tree API answered something that is not a JSON array of entries", url=url
        )
    following = next_link(link[0])
    return entries, urljoin(url, following) if following else None


class _Empty:
    def read1(self, n: int) -> bytes:
        return b""

    def close(self) -> None:
        pass


def tree(
    config: HttpConfig, endpoint: str, where: HfPath, folder: str, token: str
) -> Iterator[tuple[str, int | None]]:
    """``(path in repo, size)`` of every file under ``folder`` (``""``: the whole repo),
    recursively, following the pages; nothing for a folder that is not there.

    Raises:
        ShardNotFoundError: the repo or the revision does not exist.
        ShardOpenError: access refused (401/403: set ``HF_TOKEN``), or another error status.
        ShardReadError: a page that is not a JSON array, or pages that loop.
    """
    headers = {**(config.headers or {}), "Accept-Encoding": "identity"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    url: str | None = where.tree_url(endpoint, folder) + "?recursive=true"
    seen: set[str] = set()
    while url is not None:
        if url in seen:
            raise ShardReadError("the Hub's tree API pages loop (a next page seen twice)", url=url)
        seen.add(url)
        entries, url = _page(config, url, where, headers, bool(token))
        for entry in entries or ():
            path, size = entry.get("path"), entry.get("size")
            if entry.get("type") == "file" and isinstance(path, str):
                yield path, size if isinstance(size, int) else None
