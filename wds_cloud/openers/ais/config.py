"""Settings and parsed URLs of the AIStore backend: :class:`AisConfig`, :class:`AisTarget`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Self

from wds_cloud.errors import ConfigError
from wds_cloud.openers.streams.backoff import DEFAULT_STALL_TIMEOUT, positive_seconds
from wds_cloud.openers.streams.prefetch import resolve_prefetch
from wds_cloud.settings import apply_overrides, env_str

__all__ = [
    "DEFAULT_ENDPOINT",
    "PROVIDERS",
    "URL_OPTIONS",
    "AisConfig",
    "AisTarget",
    "etl_args_text",
    "provider_name",
]

DEFAULT_ENDPOINT = "http://localhost:8080"
PROVIDERS = {"ais": "ais", "aws": "aws", "s3": "aws", "gcp": "gcp", "gs": "gcp"}
PROVIDERS.update({"azure": "azure", "az": "azure", "oci": "oci", "ht": "ht"})
URL_OPTIONS = ("provider", "etl", "etl_args")


def etl_args_text(args: str | dict[str, Any] | None) -> str | None:
    """AIStore's ``etl_args`` value: strings verbatim, dicts as compact JSON."""
    if args is None or isinstance(args, str):
        return args
    if isinstance(args, dict):
        return json.dumps(args, separators=(",", ":"))
    raise ConfigError(f"etl_args must be a str or a dict, got {type(args).__name__}")


def provider_name(value: str, where: str) -> str:
    try:
        return PROVIDERS[value.lower()]
    except KeyError:
        raise ConfigError(
            f"unknown AIStore provider {value!r} in {where}; use one of {sorted(PROVIDERS)}"
        ) from None


@dataclass(frozen=True)
class AisConfig:
    """How to reach AIStore. ``None`` fields are resolved by :meth:`resolve` (the opener does it).

    Attributes:
        endpoint: cluster URL; argument > ``AIS_ENDPOINT`` > ``http://localhost:8080``.
        token: AuthN token; argument > ``AIS_AUTHN_TOKEN`` > none.
        timeout: seconds, or ``(connect, read)``; None leaves the SDK's default ``(3, 20)``
            (``AIS_CONNECT_TIMEOUT``/``AIS_READ_TIMEOUT``). A slow inline ETL needs a long read.
        retries: attempts after the first for failed requests (SDK level for listing and
            writes: connection errors, 429/5xx); for reads, consecutive attempts without a
            new byte (first request and resumes after a broken stream). Default 3.
        backoff: first retry delay in seconds, doubling. Default 0.5.
        stall_timeout: seconds without a new byte before a read gives up with "stalled";
            argument > ``WDS_CLOUD_AIS_STALL_TIMEOUT`` > 60.
        etl: default inline ETL name for every read (URL ``?etl=`` and ``open(etl=)`` win).
        etl_args: default ETL arguments; a dict is sent as compact JSON.
        provider: default bucket provider: ``ais`` (default), ``aws``, ``gcp``, ``azure``, ``oci``.
        page_size: objects per list page; 0 lets the cluster choose (10000 for ais buckets).
        part_size: bytes per multipart-upload part when writing (default 16 MiB); objects
            smaller than one part are sent with a single PUT.
        prefetch: parallel ranged GETs in flight per stream (``WDS_CLOUD_AIS_PREFETCH``); 0
            streams one GET (:mod:`wds_cloud.openers.streams.prefetch`).
        prefetch_chunk: bytes per ranged GET (``WDS_CLOUD_AIS_PREFETCH_CHUNK``).
    """

    endpoint: str | None = None
    token: str | None = None
    timeout: float | tuple[float, float] | None = None
    retries: int | None = None
    backoff: float | None = None
    stall_timeout: float | None = None
    etl: str | None = None
    etl_args: str | dict[str, Any] | None = None
    provider: str | None = None
    page_size: int | None = None
    part_size: int | None = None
    prefetch: int | None = None
    prefetch_chunk: int | None = None

    def __repr__(self) -> str:
        from wds_cloud.redact import config_repr

        return config_repr(self, secrets=("token",))

    def resolve(
        self,
        overrides: Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
    ) -> Self:
        """A copy with ``overrides`` applied, then every ``None`` field filled from the
        environment (``environ``, default ``os.environ``) or the default, and normalised
        (endpoint without a trailing ``/``, provider canonical, ``etl_args`` as text).

        Raises:
            ConfigError: an unknown override, or an invalid value.
        """
        base = apply_overrides(self, overrides, "AIStore")
        endpoint: str = env_str("AIS_ENDPOINT", DEFAULT_ENDPOINT, environ=environ)
        endpoint = base.endpoint or endpoint
        if not endpoint.startswith(("http://", "https://")):
            raise ConfigError(f"AIStore endpoint {endpoint!r} must start with http:// or https://")
        stall: Any = base.stall_timeout
        source = "AisConfig.stall_timeout"
        if stall is None:
            source = "WDS_CLOUD_AIS_STALL_TIMEOUT"
            stall = env_str(source, DEFAULT_STALL_TIMEOUT, environ=environ)
        prefetch, chunk = resolve_prefetch(
            "AIS", base.prefetch, base.prefetch_chunk, environ=environ
        )
        resolved = replace(
            base,
            prefetch=prefetch,
            prefetch_chunk=chunk,
            endpoint=endpoint.rstrip("/"),
            token=base.token or env_str("AIS_AUTHN_TOKEN", None, environ=environ),
            retries=3 if base.retries is None else int(base.retries),
            backoff=0.5 if base.backoff is None else float(base.backoff),
            stall_timeout=positive_seconds(stall, source),
            provider=provider_name(base.provider or "ais", "AisConfig.provider"),
            page_size=0 if base.page_size is None else int(base.page_size),
            part_size=16 << 20 if base.part_size is None else int(base.part_size),
            etl_args=etl_args_text(base.etl_args),
        )
        if resolved.retries < 0 or resolved.page_size < 0 or resolved.part_size <= 0:  # type: ignore[operator]
            raise ConfigError(f"retries and page_size must be >= 0 and part_size > 0: {resolved}")
        return resolved


@dataclass(frozen=True)
class AisTarget:
    """One parsed ``ais://`` URL with its options resolved."""

    url: str
    bucket: str
    name: str
    provider: str
    etl: str | None
    etl_args: str | None
    query: str
