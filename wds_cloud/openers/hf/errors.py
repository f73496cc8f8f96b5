"""The one place that turns the HTTP backend's errors on Hub URLs into ``hf://`` errors.

Reads go through the HTTP opener, whose errors name the Hub's ``resolve`` URL and the HTTP
status (:func:`wds_cloud.openers.http.errors.status_error`: the reason starts with
``HTTP <status>``). :func:`translate` re-raises the ones a user acts on with the ``hf://`` URL,
the repo, revision and path, and what to do: 401 and 403 (a private or gated repo, or one
that does not exist: the Hub answers 401 for those without a token) say to set ``HF_TOKEN``;
404 names what was looked for. The token is never in a message (the HTTP errors never hold
request headers). Listing answers are translated by :func:`status_error` from their status
and the Hub's ``X-Error-Code`` header.
"""

from __future__ import annotations

import re

from wds_cloud.errors import ShardError, ShardNotFoundError, ShardOpenError
from wds_cloud.openers.hf.urls import HfPath

__all__ = ["denied", "not_found", "status_error", "translate"]

_STATUS = re.compile(r"^HTTP (\d{3})\b")


def denied(url: str, where: HfPath, status: int, has_token: bool, detail: str) -> ShardOpenError:
    """401/403: a private, gated or missing repo (the Hub does not tell them apart without a
    token that can read it)."""
    sent = (
        "the token that was sent cannot read it (a gated repo needs its access granted to "
        "the token's account on the Hub)"
        if has_token
        else "no token was sent: set HF_TOKEN (or run `huggingface-cli login`) to a token "
        "that can read it"
    )
    return ShardOpenError(
        f"HTTP {status}: the Hub refused access to {where.describe()}: it is private or "
        f"gated, or does not exist; {sent} ({detail})",
        url=url,
    )


def not_found(url: str, where: HfPath, detail: str) -> ShardNotFoundError:
    """404: the repo, the revision or the file is missing."""
    what = f"file {where.path!r}" if where.path else "the repo's root"
    return ShardNotFoundError(
        f"not found on the Hub: {what} in {where.describe()} ({detail})", url=url
    )


def translate(exc: ShardError, url: str, where: HfPath, has_token: bool) -> ShardError:
    """The ``hf://`` error for an error the HTTP opener raised on the ``resolve`` URL of
    ``url``: :func:`not_found` and :func:`denied` for those statuses, else ``exc`` itself."""
    if isinstance(exc, ShardNotFoundError):
        return not_found(url, where, exc.reason)
    match = _STATUS.match(exc.reason)
    if isinstance(exc, ShardOpenError) and match and match.group(1) in ("401", "403"):
        return denied(url, where, int(match.group(1)), has_token, exc.reason)
    return exc


def status_error(
    url: str, where: HfPath, status: int, code: str | None, has_token: bool, detail: str
) -> ShardError | None:
    """The error for a tree-API answer with ``status`` and the Hub's ``X-Error-Code``
    ``code``; None for a folder that is not there (``EntryNotFound``: an empty listing)."""
    if status in (401, 403):
        return denied(url, where, status, has_token, detail)
    if status == 404:
        if code == "EntryNotFound":
            return None
        if code == "RepoNotFound":
            what = f"the {where.repo_type} repo {where.repo_id}"
        elif code == "RevisionNotFound":
            what = f"revision {where.revision!r} of {where.repo_type} {where.repo_id}"
        else:
            what = where.describe()
        return ShardNotFoundError(f"not found on the Hub: {what} ({detail})", url=url)
    return ShardOpenError(f"listing failed: {detail}", url=url)
