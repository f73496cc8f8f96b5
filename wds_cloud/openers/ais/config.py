"""Settings and parsed URLs of the AIStore backend: :class:`AisConfig` (resolved by
:data:`AIS_SETTINGS`), :class:`AisTarget`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from wds_cloud.errors import ConfigError
from wds_cloud.openers.streams.backoff import retry_fields
from wds_cloud.openers.streams.prefetch import PREFETCH_FIELDS
from wds_cloud.settings import (
    BYTES,
    INT,
    SECONDS,
    TEXT,
    ConfigTable,
    Field,
    Kind,
    at_least,
    choice,
    env_str,
    parse_seconds,
)

__all__ = [
    "AIS_SETTINGS",
    "DEFAULT_ENDPOINT",
    "PROVIDERS",
    "SDK_TIMEOUT",
    "URL_OPTIONS",
    "AisConfig",
    "AisTarget",
    "etl_args_text",
    "provider_name",
]

DEFAULT_ENDPOINT = "http://localhost:8080"
#: The SDK's default ``(connect, read)`` seconds, and the variables it reads them from.
SDK_TIMEOUT = (3.0, 20.0)
SDK_TIMEOUT_VARS = ("AIS_CONNECT_TIMEOUT", "AIS_READ_TIMEOUT")
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


def _endpoint(text: str, source: str) -> str:
    if not text.startswith(("http://", "https://")):
        raise ConfigError(f"{source}={text!r} must start with http:// or https://")
    return text.rstrip("/")


def _etl_args(value: Any) -> str:
    if not isinstance(value, dict):
        raise TypeError(value)
    return json.dumps(value, separators=(",", ":"))


_TIMEOUT_SYNTAX = "seconds, or connect,read seconds such as 3,20 (0: no limit)"


def _timeout(text: str, source: str) -> float | tuple[float, float]:
    parts = text.split(",")
    try:
        if len(parts) > 2:
            raise ConfigError(text)
        seconds = [parse_seconds(part, source) for part in parts]
    except ConfigError:
        raise ConfigError(f"{source}={text!r} is not a timeout ({_TIMEOUT_SYNTAX})") from None
    return seconds[0] if len(seconds) == 1 else (seconds[0], seconds[1])


def _timeout_value(value: Any) -> float | tuple[float, float]:
    if isinstance(value, tuple | list):
        connect, read = value
        return SECONDS.accept(connect), SECONDS.accept(read)
    seconds: float = SECONDS.accept(value)
    return seconds


def _sdk_timeout(environ: Mapping[str, str] | None) -> tuple[float, float] | None:
    """``(connect, read)`` from the SDK's variables when either is set (the other one keeps
    its default), else None."""
    texts = [env_str(name, None, environ=environ) for name in SDK_TIMEOUT_VARS]
    if texts == [None, None]:
        return None
    connect, read = (
        SDK_TIMEOUT[i] if text is None else parse_seconds(text, SDK_TIMEOUT_VARS[i])
        for i, text in enumerate(texts)
    )
    return connect, read


#: How each :class:`AisConfig` field is resolved (``docs/aistore.md`` has the table in words).
AIS_SETTINGS = ConfigTable(
    section="AIS",
    owner="AisConfig",
    what="AIStore",
    fields=(
        Field(
            "endpoint", Kind("an http(s) URL", _endpoint), DEFAULT_ENDPOINT, env=("AIS_ENDPOINT",)
        ),
        Field("token", TEXT, env=("AIS_AUTHN_TOKEN",), secret=True),
        Field(
            "timeout",
            Kind(f"a timeout ({_TIMEOUT_SYNTAX})", _timeout, _timeout_value),
            SDK_TIMEOUT,
            env=SDK_TIMEOUT_VARS,
            read_env=_sdk_timeout,
        ),
        *retry_fields(retries=3, backoff=0.5),
        Field("etl", TEXT),
        Field("etl_args", Kind("a string or a dict", lambda text, source: text, _etl_args)),
        Field("provider", choice(aliases=PROVIDERS), "ais"),
        Field("page_size", INT, 0, checks=(at_least(0),)),
        Field("part_size", BYTES, 16 << 20, checks=(at_least(1),)),
        *PREFETCH_FIELDS,
        Field("batch_entries", INT, 1000, checks=(at_least(1),)),
        Field("batch_bytes", BYTES, 64 << 20, checks=(at_least(1),)),
    ),
)


@dataclass(frozen=True)
class AisConfig:
    """How to reach AIStore. ``None`` fields are resolved by :meth:`resolve` (the opener does
    it): argument > ``WDS_CLOUD_AIS_<FIELD>`` > the SDK's variable, if the field has one >
    default.

    Attributes:
        endpoint: cluster URL; ``AIS_ENDPOINT``; default ``http://localhost:8080``.
        token: AuthN token; ``AIS_AUTHN_TOKEN``; default none.
        timeout: seconds, or ``(connect, read)``; 0 is no limit. ``AIS_CONNECT_TIMEOUT`` /
            ``AIS_READ_TIMEOUT``; default the SDK's ``(3, 20)``. A slow inline ETL needs a
            long read.
        retries: attempts after the first for failed requests (SDK level for listing and
            writes: connection errors, 429/5xx); for reads, consecutive attempts without a
            new byte (first request and resumes after a broken stream). Default 3.
        backoff: first retry delay in seconds, doubling. Default 0.5.
        stall_timeout: seconds without a new byte before a read gives up with "stalled";
            default 60.
        etl: default inline ETL name for every read (URL ``?etl=`` and ``open(etl=)`` win).
        etl_args: default ETL arguments; a dict is sent as compact JSON.
        provider: default bucket provider: ``ais`` (default), ``aws``, ``gcp``, ``azure``, ``oci``.
        page_size: objects per list page; 0 lets the cluster choose (10000 for ais buckets).
        part_size: bytes per multipart-upload part when writing (default 16 MiB); objects
            smaller than one part are sent with a single PUT.
        prefetch: parallel ranged GETs in flight per stream (``WDS_CLOUD_AIS_PREFETCH``); 0
            streams one GET (:mod:`wds_cloud.openers.streams.prefetch`).
        prefetch_chunk: bytes per ranged GET (``WDS_CLOUD_AIS_PREFETCH_CHUNK``).
        batch_entries: the most entries one GetBatch request of ``read_batch`` asks for
            (``WDS_CLOUD_AIS_BATCH_ENTRIES``, default 1000); a longer batch is sent as
            several requests, one after the other.
        batch_bytes: the most bytes one GetBatch request asks for (``WDS_CLOUD_AIS_BATCH_BYTES``,
            default 64 MiB); an entry larger than this gets a request of its own.
        max_backoff: (class attribute) the longest retry delay of reads, 10 s.
    """

    max_backoff = 10.0  # a class attribute, not a field: RetryPolicy.from_config reads it

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
    batch_entries: int | None = None
    batch_bytes: int | None = None

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
        environment (``environ``, default ``os.environ``) or the default
        (:data:`AIS_SETTINGS`), normalised (endpoint without a trailing ``/``, provider
        canonical, ``etl_args`` as text).

        Raises:
            ConfigError: an unknown override, or an invalid value.
        """
        return AIS_SETTINGS.resolve(self, overrides, environ=environ)


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
