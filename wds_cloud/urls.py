"""Shard URL strings: brace expansion, ``::`` lists, env substitution, bucket/key parsing."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from wds_cloud.braces import (
    BracePattern,
    check_count,
    describe_count,
    max_urls as _max_urls,
    parse_braces,
)
from wds_cloud.errors import ConfigError
from wds_cloud.redact import redact_url

_ENV_VAR = re.compile(r"\$\{(\w+)\}")


def _substitute_env(url: str) -> str:
    def repl(match: re.Match[str]) -> str:
        name = match.group(1)
        for candidate in (f"WDS_{name}", f"WDS_CLOUD_{name}"):
            if candidate in os.environ:
                return os.environ[candidate]
        raise ConfigError(
            f"URL {url!r} refers to ${{{name}}} but neither WDS_{name} nor WDS_CLOUD_{name} is set"
        )

    return _ENV_VAR.sub(repl, url)


def _patterns(urls: str | Iterable[str]) -> list[str]:
    if isinstance(urls, str):
        return [p for p in urls.split("::") if p]
    return literal_urls(urls)


def literal_urls(items: Iterable[Any]) -> list[str]:
    """The URLs of a list as given: strings, or webdataset's shard dicts ``{"url": ...}``.

    Nothing is expanded (:func:`expand_urls` expands each one; ``wds_cloud.listing`` takes a
    list of URLs this way with ``literal_paths=True``).

    Raises:
        ConfigError: an item that is neither a string nor a dict with a string ``url``.
    """
    patterns = []
    for u in items:
        if isinstance(u, dict):  # webdataset's shard items: {"url": ...}
            if not isinstance(u.get("url"), str):
                raise ConfigError(f"shard dicts need a string 'url', got {u!r}")
            u = u["url"]
        if not isinstance(u, str):
            raise ConfigError(
                f"shard URLs must be strings or {{'url': ...}} dicts, got {type(u).__name__}: {u!r}"
            )
        patterns.append(u)
    return patterns


def iter_urls(urls: str | Iterable[str], *, max_urls: int | None = None) -> Iterator[str]:
    """Expand a shard specification lazily: check everything first, then yield URL by URL.

    Same syntax as :func:`expand_urls`. Every pattern is parsed and counted before anything is
    generated, so a malformed or oversized specification fails here, at the call, in time
    proportional to its length; the returned iterator then generates one URL at a time.

    Args:
        urls: a pattern string (``::`` separated) or a list of patterns.
        max_urls: most URLs the brace patterns may expand to, all patterns together
            (default: ``WDS_CLOUD_MAX_URLS``, else 1,000,000). Plain URLs are not counted.

    Raises:
        ConfigError: an empty specification, a malformed brace pattern, an unset variable, or
            patterns that expand to more than ``max_urls`` URLs (the message gives the count).
    """
    limit = _max_urls(max_urls)
    parsed: list[BracePattern | str] = []
    total = 0
    for pattern in _patterns(urls):
        pattern = _substitute_env(pattern)
        if "{" not in pattern and "}" not in pattern and "\\" not in pattern:
            parsed.append(pattern)
            continue
        shown = redact_url(pattern)
        braces = parse_braces(pattern, shown=shown)
        check_count(braces, limit, shown=shown)
        total += braces.count
        if total > limit:
            raise ConfigError(
                f"the shard specification expands to more than {limit:,} URLs "
                f"({describe_count(total)} so far, at {shown!r}); pass max_urls= or set "
                "WDS_CLOUD_MAX_URLS to raise the limit"
            )
        parsed.append(braces)
    if not parsed:
        raise ConfigError(f"no shard URLs in {urls!r}")
    return chain.from_iterable([p] if isinstance(p, str) else p for p in parsed)


def expand_urls(urls: str | Iterable[str], *, max_urls: int | None = None) -> list[str]:
    """Expand a shard specification into a list of URLs.

    A string may hold several patterns separated by ``::``; each is brace-expanded
    (``shard-{000..009}.tar``) after ``${NAME}`` is replaced by the environment variable
    ``WDS_NAME`` (as in webdataset) or ``WDS_CLOUD_NAME``. Lists are expanded element-wise;
    their items may also be webdataset's shard dicts ``{"url": ...}`` (other keys ignored).
    Patterns that would expand to more than ``max_urls`` URLs (default ``WDS_CLOUD_MAX_URLS``,
    else 1,000,000) are refused before anything is generated; :func:`iter_urls` is the lazy
    form.

    Raises:
        ConfigError: an empty specification, a malformed brace pattern, an unset variable, or
            more URLs than ``max_urls``.
    """
    return list(iter_urls(urls, max_urls=max_urls))


@dataclass(frozen=True)
class ObjectUrl:
    """A ``scheme://bucket/key?query`` URL split into parts."""

    scheme: str
    bucket: str
    key: str
    query: dict[str, str]

    @property
    def base(self) -> str:
        """The URL without its query string."""
        return f"{self.scheme}://{self.bucket}/{self.key}"


def parse_object_url(url: str, *, schemes: Iterable[str] | None = None) -> ObjectUrl:
    """Split an object-store URL into scheme, bucket, key and query options.

    Args:
        url: ``s3://bucket/key``, ``gs://bucket/blob``, ``ais://bucket/obj?etl=name``.
        schemes: accepted schemes; other schemes raise :class:`ConfigError`.

    Raises:
        ConfigError: no bucket, or a scheme outside ``schemes``.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if schemes is not None and scheme not in set(schemes):
        raise ConfigError(f"URL {url!r} does not use one of the schemes {sorted(schemes)}")
    if not parts.netloc:
        raise ConfigError(f"URL {url!r} has no bucket name (expected {scheme}://BUCKET/KEY)")
    key = parts.path[1:] if parts.path.startswith("/") else parts.path
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    return ObjectUrl(scheme=scheme, bucket=parts.netloc, key=key, query=query)
