"""Settings of the HTTP backend: :class:`HttpConfig` and the read loop's :func:`policy`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Self

from wds_cloud.openers.streams.backoff import (
    DEFAULT_READ_TIMEOUT,
    DEFAULT_STALL_TIMEOUT,
    RetryPolicy,
    positive_seconds,
)
from wds_cloud.openers.streams.prefetch import resolve_prefetch
from wds_cloud.settings import apply_overrides, env_float

__all__ = ["HttpConfig", "policy"]


@dataclass(frozen=True)
class HttpConfig:
    """HTTP settings; None fields are resolved from the environment, then defaults.

    Attributes:
        timeout: socket timeout in seconds for connect and each read (default 20), clipped
            to ``stall_timeout``.
        retries: consecutive attempts without progress allowed after a failed request or a
            dropped stream (default 5).
        backoff: first delay between attempts, doubled each time up to 10 s (default 0.2).
        stall_timeout: seconds without a new byte before a read gives up (default 60).
        headers: extra request headers (e.g. ``Authorization``).
        max_redirects: redirects followed before giving up.
        prefetch: parallel ranged GETs in flight per stream (``WDS_CLOUD_HTTP_PREFETCH``);
            0 streams one GET (:mod:`wds_cloud.openers.streams.prefetch`).
        prefetch_chunk: bytes per ranged GET (``WDS_CLOUD_HTTP_PREFETCH_CHUNK``).
    """

    timeout: float | None = None
    retries: int | None = None
    backoff: float | None = None
    stall_timeout: float | None = None
    headers: dict[str, str] = field(default_factory=dict)
    max_redirects: int = 10
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
        environment (``environ``, default ``os.environ``) or the default.

        Raises:
            ConfigError: an unknown override, or an invalid value.
        """
        base = apply_overrides(self, overrides, "HTTP")
        stall = base.stall_timeout
        source = "HttpConfig.stall_timeout"
        if stall is None:
            source = "WDS_CLOUD_HTTP_STALL_TIMEOUT"
            stall = env_float(source, DEFAULT_STALL_TIMEOUT, environ=environ)
        timeout = base.timeout
        if timeout is None:
            timeout = env_float("WDS_CLOUD_HTTP_TIMEOUT", DEFAULT_READ_TIMEOUT, environ=environ)
        retries = base.retries
        if retries is None:
            retries = int(env_float("WDS_CLOUD_HTTP_RETRIES", 5, environ=environ))
        backoff = base.backoff
        if backoff is None:
            backoff = env_float("WDS_CLOUD_HTTP_BACKOFF", 0.2, environ=environ)
        prefetch, chunk = resolve_prefetch(
            "HTTP", base.prefetch, base.prefetch_chunk, environ=environ
        )
        return replace(
            base,
            prefetch=prefetch,
            prefetch_chunk=chunk,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            stall_timeout=positive_seconds(stall, source),
        )


def policy(config: HttpConfig) -> RetryPolicy:
    """The retry policy of reads (``config`` resolved)."""
    return RetryPolicy.from_config(config, max_backoff=10.0)
