"""``hf://`` shards: files of Hugging Face Hub repos, read over the HTTP backend.

An ``hf://`` URL (:mod:`wds_cloud.openers.hf.urls`) names a file of a dataset, model or Space
repo at a revision; it is read from the Hub's ``resolve`` URL by the HTTP opener
(:class:`~wds_cloud.openers.http.opener.HttpOpener`), so every HTTP read behaviour holds: the
Hub's redirect to its CDN is followed, and the ``Authorization: Bearer`` token is dropped on
that hop to another origin (:mod:`wds_cloud.openers.http.redirects`); a dropped connection
resumes at its byte with ``Range`` pinned to the ``ETag``; ``open_at`` and ``read_range`` are
ranged GETs (index random access); the registry reads ahead (``remote``). Each request goes
to the Hub first (its answer redirects to a fresh signed CDN URL), so a ranged read is two
requests.

Listing (``list``/``list_sizes``: ``list_shards``, globs, ``/`` prefixes) goes through the
Hub's tree API, paged (:mod:`wds_cloud.openers.hf.listing`). Settings:
:class:`~wds_cloud.openers.hf.config.HfConfig` (endpoint, token) and the HTTP backend's
:class:`~wds_cloud.openers.http.config.HttpConfig` (``WDS_CLOUD_HTTP_*``). Errors name the
``hf://`` URL, the repo, the revision and the path (:mod:`wds_cloud.openers.hf.errors`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

from wds_cloud.errors import ConfigError, ShardError
from wds_cloud.openers.hf.config import HF_SETTINGS, TOKEN_VARIABLES, HfConfig
from wds_cloud.openers.hf.errors import translate
from wds_cloud.openers.hf.listing import tree
from wds_cloud.openers.hf.urls import HfPath, parse_hf_url
from wds_cloud.openers.http.config import HttpConfig
from wds_cloud.openers.http.opener import HttpOpener
from wds_cloud.openers.streams.stream import ReadStream
from wds_cloud.redact import redact_url

__all__ = ["SCHEMES", "HfConfig", "HfOpener"]

SCHEMES = ("hf",)

T = TypeVar("T")

#: variables whose change makes the default registry build a new opener (a refreshed token)
_WATCHED = (
    *(HF_SETTINGS.variables(f.name)[0] for f in HF_SETTINGS.fields),
    "HF_ENDPOINT",
    *TOKEN_VARIABLES,
    "HF_TOKEN_PATH",
    "HF_HOME",
)


def _snapshot() -> tuple[str | None, ...]:
    return tuple(os.environ.get(name) for name in _WATCHED)


class HfOpener:
    """Reads and lists ``hf://`` URLs; see the module docstring.

    Args:
        config: an :class:`HfConfig`; fields left None come from the environment.
        http: the HTTP settings of the reads (:class:`HttpConfig`; ``WDS_CLOUD_HTTP_*``).
        **overrides: individual :class:`HfConfig` fields, e.g. ``token="hf_..."``.
    """

    remote: bool = True  # streams come over a network: the registry reads them ahead

    def __init__(
        self, config: HfConfig | None = None, http: HttpConfig | None = None, **overrides: Any
    ) -> None:
        self._environ = _snapshot()
        self.config = (config or HfConfig()).resolve(overrides)
        self.http = HttpOpener(http)

    def __repr__(self) -> str:
        return f"HfOpener({self.config!r}, http={self.http.config!r})"

    def environment_changed(self) -> bool:
        """Whether a variable it was made from changed since (``HF_TOKEN``, ``HF_ENDPOINT``,
        ...): the default registry then makes a new opener, so a new token is used from the
        next shard on."""
        return _snapshot() != self._environ

    # -- reads -------------------------------------------------------------------------------

    def _where(self, url: str) -> HfPath:
        where = parse_hf_url(url)
        if not where.path or where.path.endswith("/"):
            raise ConfigError(
                f"{redact_url(url)!r} names a folder of {where.describe()}, not a file; "
                "list it with list_shards() or a glob to read the shards in it"
            )
        return where

    def _headers(self, options: dict[str, Any]) -> dict[str, Any]:
        headers = dict(options.pop("headers", None) or {})
        if self.config.token:
            headers.setdefault("Authorization", f"Bearer {self.config.token}")
        return {**options, "headers": headers}

    def _call(
        self, url: str, read: Callable[[str, dict[str, Any]], T], options: dict[str, Any]
    ) -> T:
        where = self._where(url)
        try:
            return read(where.resolve_url(str(self.config.endpoint)), self._headers(options))
        except ShardError as exc:
            error = translate(exc, url, where, bool(self.config.token))
            if error is exc:
                raise
            raise error from exc

    def open(self, url: str, **options: Any) -> ReadStream:
        """Start streaming ``url`` (see :meth:`HttpOpener.open`).

        Args:
            url: ``hf://`` URL of a file.
            **options: as :meth:`HttpOpener.open` (``headers``, ``prefetch``,
                ``prefetch_chunk``).

        Raises:
            ConfigError: a malformed ``hf://`` URL, a folder, or an unknown option.
            ShardNotFoundError: the repo, revision or file does not exist.
            ShardOpenError: access refused (the message says to set ``HF_TOKEN``), or the
                HTTP opener's errors.
        """
        return self._call(url, lambda u, o: self.http.open(u, **o), options)

    def open_at(self, url: str, offset: int, **options: Any) -> ReadStream:
        """Stream ``url`` from byte ``offset`` (one ``Range`` GET; :meth:`HttpOpener.open_at`)."""
        return self._call(url, lambda u, o: self.http.open_at(u, offset, **o), options)

    def read_range(self, url: str, offset: int, length: int, **options: Any) -> bytes:
        """Bytes ``offset .. offset + length`` of ``url`` with one ranged GET
        (:meth:`HttpOpener.read_range`)."""
        return self._call(url, lambda u, o: self.http.read_range(u, offset, length, **o), options)

    # -- listing -----------------------------------------------------------------------------

    def list_sizes(self, url: str) -> list[tuple[str, int | None]]:
        """``(url, size)`` of every file whose ``hf://`` URL starts with ``url``, sorted: the
        tree API's recursive listing of the folder ``url`` is in (or ends with).

        Raises:
            ConfigError: a prefix that does not name one repo (``hf://datasets/org/``).
            ShardNotFoundError: the repo or the revision does not exist.
            ShardOpenError: access refused (set ``HF_TOKEN``), or the listing failed.
        """
        try:
            where = parse_hf_url(url)
        except ConfigError as exc:
            raise ConfigError(
                f"cannot list {redact_url(url)!r}: an hf:// listing covers one repo at one "
                f"revision, and this prefix does not name one: give the org and repo (a glob "
                f"or brace in their names lists each repo it names). {exc}"
            ) from exc
        folder = where.path.rpartition("/")[0]
        found = [
            (where.head + path, size)
            for path, size in tree(
                self.http.config,
                str(self.config.endpoint),
                where,
                folder,
                str(self.config.token or ""),
            )
        ]
        return sorted((u, s) for u, s in found if u.startswith(url))

    def listing_scope(self, url: str) -> str:
        """What one listing can answer for ``url``: its repo at its revision (the URL's head),
        so that name prefixes of several repos or revisions given together are listed each in
        its own repo (:func:`wds_cloud.listing.list_prefixes`). A URL that names no repo is
        its own scope (listing it then says why it cannot)."""
        try:
            return parse_hf_url(url).head
        except ConfigError:
            return url

    def list(self, url: str) -> list[str]:
        """Every file ``hf://`` URL that starts with ``url``, sorted (see :meth:`list_sizes`)."""
        return [u for u, _ in self.list_sizes(url)]

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config, "http": self.http, "environ": self._environ}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.config = state["config"]
        self.http = state["http"]
        self._environ = state["environ"]
