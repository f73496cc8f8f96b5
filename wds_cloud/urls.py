"""Shard URL strings: brace expansion, ``::`` lists, env substitution, bucket/key parsing."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

import braceexpand

from wds_cloud.errors import ConfigError

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


def expand_urls(urls: str | Iterable[str]) -> list[str]:
    """Expand a shard specification into a list of URLs.

    A string may hold several patterns separated by ``::``; each is brace-expanded
    (``shard-{000..009}.tar``) after ``${NAME}`` is replaced by the environment variable
    ``WDS_NAME`` (as in webdataset) or ``WDS_CLOUD_NAME``. Lists are expanded element-wise.

    Raises:
        ConfigError: an empty specification, a malformed brace pattern, an unset variable.
    """
    if isinstance(urls, str):
        patterns = [p for p in urls.split("::") if p]
    else:
        patterns = []
        for u in urls:
            if not isinstance(u, str):
                raise ConfigError(f"shard URLs must be strings, got {type(u).__name__}: {u!r}")
            patterns.append(u)
    result: list[str] = []
    for pattern in patterns:
        pattern = _substitute_env(pattern)
        try:
            result.extend(braceexpand.braceexpand(pattern))
        except Exception as exc:  # braceexpand raises its own error types
            raise ConfigError(f"bad brace pattern in shard URL {pattern!r}: {exc}") from exc
    if not result:
        raise ConfigError(f"no shard URLs in {urls!r}")
    return result


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
