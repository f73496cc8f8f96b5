"""Configuration of the GCS backend: :class:`GcsConfig` and how it is resolved.

Order (first match wins): explicit argument > ``WDS_CLOUD_GCS_<FIELD>`` > the SDK's own variable
(``GOOGLE_CLOUD_PROJECT``, ``GOOGLE_APPLICATION_CREDENTIALS``, ``STORAGE_EMULATOR_HOST``) >
default. The environment is read when :meth:`GcsConfig.resolve` runs (opener construction),
never at import.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Self

from wds_cloud.errors import ConfigError
from wds_cloud.openers.streams.backoff import positive_seconds
from wds_cloud.openers.streams.prefetch import PREFETCH_OPTIONS, resolve_prefetch
from wds_cloud.openers.streams.resumable import TranslateError
from wds_cloud.redact import config_repr
from wds_cloud.settings import apply_overrides, env_first, parse_bool, parse_float, parse_int

_ENV_PREFIX = "WDS_CLOUD_GCS_"


@dataclass(frozen=True)
class GcsConfig:
    """Settings of the GCS backend; ``None`` fields are resolved by :meth:`resolve`.

    Attributes:
        project: billing/quota project (``WDS_CLOUD_GCS_PROJECT``, ``GOOGLE_CLOUD_PROJECT``).
        credentials: path to a service-account or authorized-user JSON file
            (``WDS_CLOUD_GCS_CREDENTIALS``, ``GOOGLE_APPLICATION_CREDENTIALS``); ``None`` uses
            application default credentials.
        anonymous: no credentials at all, for public buckets and emulators
            (``WDS_CLOUD_GCS_ANONYMOUS``); defaults to True when an endpoint is set and no
            credentials file is given.
        endpoint: API endpoint such as ``http://127.0.0.1:4443`` (``WDS_CLOUD_GCS_ENDPOINT``,
            ``STORAGE_EMULATOR_HOST``); ``None`` means ``https://storage.googleapis.com``.
        retries: consecutive attempts without progress allowed when a read fails (first
            request and resumes), and transient failures retried per listing, metadata or
            upload call (default 5).
        backoff: first retry delay in seconds, doubled per attempt (default 0.2).
        chunk_size: resumable-upload chunk in bytes, a multiple of 256 KiB (default 16 MiB);
            the writer holds at most one chunk in memory.
        connect_timeout: seconds to establish a connection (default 10).
        read_timeout: seconds one socket read may wait before the request counts as dropped
            (default 20; clipped to ``stall_timeout`` for object reads).
        stall_timeout: seconds without a new byte before a read gives up with "stalled"
            (default 60).
        page_size: blobs per listing page (default 1000).
        prefetch: parallel ranged media GETs in flight per stream
            (``WDS_CLOUD_GCS_PREFETCH``); 0 streams one GET (:mod:`wds_cloud.openers.streams.prefetch`).
        prefetch_chunk: bytes per ranged GET (``WDS_CLOUD_GCS_PREFETCH_CHUNK``).
    """

    project: str | None = None
    credentials: str | None = None
    anonymous: bool | None = None
    endpoint: str | None = None
    retries: int | None = None
    backoff: float | None = None
    chunk_size: int | None = None
    connect_timeout: float | None = None
    read_timeout: float | None = None
    stall_timeout: float | None = None
    page_size: int | None = None
    prefetch: int | None = None
    prefetch_chunk: int | None = None

    def __repr__(self) -> str:
        return config_repr(self, secrets=("credentials",))

    def resolve(
        self,
        overrides: Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
    ) -> Self:
        """A copy with ``overrides`` applied, then every ``None`` field filled from the
        environment (``environ``, default ``os.environ``), then the defaults.

        Raises:
            ConfigError: an unknown override, or an invalid value (argument or environment).
        """
        base = apply_overrides(self, overrides, "GCS")
        defaults: dict[str, Any] = {
            "retries": 5,
            "backoff": 0.2,
            "chunk_size": 16 << 20,
            "connect_timeout": 10.0,
            "read_timeout": 20.0,
            "stall_timeout": 60.0,
            "page_size": 1000,
        }
        sdk_env = {
            "project": "GOOGLE_CLOUD_PROJECT",
            "credentials": "GOOGLE_APPLICATION_CREDENTIALS",
            "endpoint": "STORAGE_EMULATOR_HOST",
        }
        values: dict[str, Any] = {}
        for f in fields(base):
            if f.name in PREFETCH_OPTIONS:
                continue
            value = getattr(base, f.name)
            source = f"GcsConfig.{f.name}"
            if value is None:
                names = [_ENV_PREFIX + f.name.upper()]
                if f.name in sdk_env:
                    names.append(sdk_env[f.name])
                found = env_first(names, environ)
                if found is not None:
                    source, value = found
            if value is None:
                value = defaults.get(f.name)
            values[f.name] = _coerce(f.name, value, source)
        values["prefetch"], values["prefetch_chunk"] = resolve_prefetch(
            "GCS", base.prefetch, base.prefetch_chunk, environ=environ
        )
        if values["anonymous"] is None:
            values["anonymous"] = bool(values["endpoint"]) and not values["credentials"]
        if values["endpoint"]:
            endpoint = str(values["endpoint"]).rstrip("/")
            if "://" not in endpoint:
                endpoint = "http://" + endpoint
            values["endpoint"] = endpoint
        return replace(base, **values)


def _coerce(name: str, value: Any, source: str) -> Any:
    if name == "stall_timeout" and value is not None:
        return positive_seconds(value, source)
    if value is None or not isinstance(value, str):
        if (
            name in ("retries", "chunk_size", "page_size")
            and value is not None
            and (not isinstance(value, int) or value < 0)
        ):
            raise ConfigError(f"{source} must be a non-negative integer, got {value!r}")
        if name == "chunk_size" and value is not None and (value <= 0 or value % (256 << 10)):
            raise ConfigError(f"{source} must be a positive multiple of 262144, got {value}")
        if name == "page_size" and value is not None and value == 0:
            raise ConfigError(f"{source} must be positive")
        return value
    if name == "anonymous":
        return parse_bool(value, source)
    if name in ("retries", "chunk_size", "page_size"):
        return _coerce(name, parse_int(value, source), source)
    if name in ("backoff", "connect_timeout", "read_timeout"):
        return parse_float(value, source)
    return value


@dataclass(frozen=True)
class GcsAccess:
    """What a GCS reader needs from its opener, passed explicitly.

    Attributes:
        client: the ``google.cloud.storage.Client`` (metadata after a 404 or a 416).
        session: the authorized ``requests`` session of media GETs (the opener's read client).
        media_timeout: ``(connect, read)`` seconds of media GETs.
        timeout: ``(connect, read)`` seconds of metadata requests.
        retry: the SDK retry policy of metadata requests (None: no retries).
        translate: the opener's error translation (endpoint bound).
    """

    client: Any
    session: Any
    media_timeout: tuple[float, float]
    timeout: tuple[float, float]
    retry: Any
    translate: TranslateError
