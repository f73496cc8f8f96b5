"""Settings of the HTTP backend: :class:`HttpConfig`, resolved by :data:`HTTP_SETTINGS`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from wds_cloud.errors import ConfigError
from wds_cloud.openers.streams.backoff import DEFAULT_READ_TIMEOUT, retry_fields
from wds_cloud.openers.streams.prefetch import PREFETCH_FIELDS
from wds_cloud.settings import BOOL, INT, SECONDS, ConfigTable, Field, Kind, at_least

__all__ = ["HTTP_SETTINGS", "HttpConfig"]


def _headers(text: str, source: str) -> dict[str, str]:
    """A JSON object of header names to values (the value is not shown: it may hold a token)."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ConfigError(
            f"{source}=<hidden> is not a JSON object of header names to strings "
            '(e.g. {"Authorization": "Bearer ..."})'
        )
    return value


def _header_mapping(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise TypeError(value)
    return dict(value)


#: A JSON object as text, a mapping as an argument.
HEADERS = Kind("a mapping of header names to values", _headers, _header_mapping)

#: How each :class:`HttpConfig` field is resolved (``docs/openers.md`` has the table in words).
HTTP_SETTINGS = ConfigTable(
    section="HTTP",
    owner="HttpConfig",
    what="HTTP",
    fields=(
        Field("timeout", SECONDS, DEFAULT_READ_TIMEOUT),
        *retry_fields(retries=5, backoff=0.2),
        Field("headers", HEADERS, derive=lambda _: {}, secret=True),
        Field("max_redirects", INT, 10, checks=(at_least(0),)),
        Field("allow_downgrade", BOOL, False),
        *PREFETCH_FIELDS,
    ),
)


@dataclass(frozen=True)
class HttpConfig:
    """HTTP settings; None fields are resolved from the environment, then defaults.

    Attributes:
        timeout: socket timeout in seconds for connect and each read (default 20), clipped
            to ``stall_timeout``.
        retries: consecutive attempts without progress allowed after a failed request or a
            dropped stream (default 5).
        backoff: first delay between attempts, doubled each time up to ``max_backoff``
            (default 0.2).
        stall_timeout: seconds without a new byte before a read gives up (default 60).
        headers: extra request headers (e.g. ``Authorization``); ``WDS_CLOUD_HTTP_HEADERS``
            is a JSON object; default none.
        max_redirects: redirects followed before giving up (default 10).
        allow_downgrade: follow a redirect from ``https`` to ``http``
            (``WDS_CLOUD_HTTP_ALLOW_DOWNGRADE``; default False: refused). Credentials never
            follow a redirect to another origin (:mod:`wds_cloud.openers.http.redirects`).
        prefetch: parallel ranged GETs in flight per stream (``WDS_CLOUD_HTTP_PREFETCH``);
            0 streams one GET (:mod:`wds_cloud.openers.streams.prefetch`).
        prefetch_chunk: bytes per ranged GET (``WDS_CLOUD_HTTP_PREFETCH_CHUNK``).
        max_backoff: (class attribute) the longest retry delay of reads, 10 s.
    """

    max_backoff = 10.0  # a class attribute, not a field: RetryPolicy.from_config reads it

    timeout: float | None = None
    retries: int | None = None
    backoff: float | None = None
    stall_timeout: float | None = None
    headers: Mapping[str, str] | None = None
    max_redirects: int | None = None
    allow_downgrade: bool | None = None
    prefetch: int | None = None
    prefetch_chunk: int | None = None

    def __repr__(self) -> str:
        from wds_cloud.redact import config_repr

        return config_repr(self, headers=("headers",))

    def resolve(
        self,
        overrides: Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
    ) -> Self:
        """A copy with ``overrides`` applied, then every None field filled from the
        environment (``environ``, default ``os.environ``) or the default
        (:data:`HTTP_SETTINGS`).

        Raises:
            ConfigError: an unknown override, or an invalid value.
        """
        return HTTP_SETTINGS.resolve(self, overrides, environ=environ)
