"""Settings of the S3 backend: :class:`S3Config` and ``s3://`` URL parsing.

Resolution order, applied by :meth:`S3Config.resolve` when an opener is created (never at
import): explicit value > ``WDS_CLOUD_S3_<FIELD>`` > ``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL``
(endpoint), ``AWS_REGION``/``AWS_DEFAULT_REGION`` (region), ``AWS_PROFILE`` (profile) > defaults.
Credentials are left to boto3's own chain unless given explicitly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Self

from wds_cloud.errors import ConfigError
from wds_cloud.openers.streams.prefetch import PREFETCH_OPTIONS, resolve_prefetch
from wds_cloud.openers.streams.resumable import TranslateError
from wds_cloud.redact import config_repr
from wds_cloud.settings import apply_overrides, env_first, parse_bool, parse_float, parse_int

MIN_PART_SIZE = 5 << 20

_DEFAULTS: dict[str, Any] = {
    "endpoint_url": None,
    "region": None,
    "profile": None,
    "addressing_style": None,  # "path" with a custom endpoint, else "auto"
    "requester_pays": False,
    "max_attempts": 5,
    "retries": 5,
    "backoff": 0.1,
    "multipart_chunksize": 16 << 20,
    "connect_timeout": 10.0,
    "read_timeout": 20.0,
    "stall_timeout": 60.0,
    "list_page_size": 1000,
    "access_key_id": None,
    "secret_access_key": None,
    "session_token": None,
}

# Fields that may come from the environment, with the AWS fallbacks after WDS_CLOUD_S3_*.
_AWS_ENV: dict[str, tuple[str, ...]] = {
    "endpoint_url": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
    "region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
    "profile": ("AWS_PROFILE",),
}
_NO_WDS_ENV = {"access_key_id", "secret_access_key", "session_token"}  # boto3's chain does this


def _convert(name: str, value: Any, source: str) -> Any:
    kind = type(_DEFAULTS[name]) if _DEFAULTS[name] is not None else str
    if isinstance(value, str) and kind in _PARSERS:
        return _PARSERS[kind](value, source)
    try:
        if kind is bool:
            return bool(value)
        if kind is int:
            if isinstance(value, bool):
                raise ValueError(value)
            return int(value)
        if kind is float:
            return float(value)
        return str(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"S3 setting {name} from {source} is not a valid {kind.__name__}: {value!r}"
        ) from exc


_PARSERS: dict[type, Callable[[str, str], Any]] = {
    bool: parse_bool,
    int: parse_int,
    float: parse_float,
}


@dataclass(frozen=True)
class S3Config:
    """S3 settings; ``None`` fields are resolved by :meth:`resolve` (the opener does it).

    Attributes:
        endpoint_url: custom endpoint (MinIO, SeaweedFS, ...); None means AWS.
        region: signing region; None lets boto3 decide.
        profile: named profile of the shared AWS config files.
        addressing_style: ``"path"``, ``"virtual"`` or ``"auto"``.
        requester_pays: send ``RequestPayer=requester``.
        max_attempts: boto3 attempts per request (standard retry mode).
        retries: read attempts in a row without a new byte (first request, resumes,
            prefetch chunks) before giving up.
        backoff: first retry delay in seconds (doubles each time, up to 5 s).
        multipart_chunksize: upload part size in bytes (at least 5 MiB).
        prefetch: parallel ranged GETs in flight per stream; 0 streams one GET.
        prefetch_chunk: bytes per ranged GET when prefetching.
        connect_timeout: seconds.
        read_timeout: seconds one socket read may wait before the request counts as
            dropped (clipped to ``stall_timeout``).
        stall_timeout: seconds without a new byte before a read gives up ("stalled").
        list_page_size: ``MaxKeys`` per ``ListObjectsV2`` page.
        access_key_id: explicit credentials (otherwise boto3's chain).
        secret_access_key: explicit credentials.
        session_token: explicit credentials.
    """

    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    addressing_style: str | None = None
    requester_pays: bool | None = None
    max_attempts: int | None = None
    retries: int | None = None
    backoff: float | None = None
    multipart_chunksize: int | None = None
    prefetch: int | None = None
    prefetch_chunk: int | None = None
    connect_timeout: float | None = None
    read_timeout: float | None = None
    stall_timeout: float | None = None
    list_page_size: int | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None

    def __repr__(self) -> str:
        return config_repr(self, secrets=("access_key_id", "secret_access_key", "session_token"))

    def resolve(
        self,
        overrides: Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
    ) -> Self:
        """A copy with ``overrides`` applied, then every ``None`` field filled from the
        environment (``environ``, default ``os.environ``), then the defaults.

        Raises:
            ConfigError: an unknown override, or a value of the wrong type or out of range.
        """
        base = apply_overrides(self, overrides, "S3")
        values: dict[str, Any] = {}
        for f in fields(base):
            if f.name in PREFETCH_OPTIONS:
                continue
            value = getattr(base, f.name)
            source = "argument"
            if value is None and f.name not in _NO_WDS_ENV:
                names = (f"WDS_CLOUD_S3_{f.name.upper()}", *_AWS_ENV.get(f.name, ()))
                found = env_first(names, environ)
                if found is not None:
                    source, value = found
            if value is None:
                value = _DEFAULTS[f.name]
            elif f.name in _DEFAULTS:
                value = _convert(f.name, value, source)
            values[f.name] = value
        values["prefetch"], values["prefetch_chunk"] = resolve_prefetch(
            "S3", base.prefetch, base.prefetch_chunk, environ=environ
        )
        if values["addressing_style"] is None:
            values["addressing_style"] = "path" if values["endpoint_url"] else "auto"
        if values["addressing_style"] not in ("path", "virtual", "auto"):
            raise ConfigError(
                f"S3 addressing_style must be path, virtual or auto, got {values['addressing_style']!r}"
            )
        if values["multipart_chunksize"] < MIN_PART_SIZE:
            raise ConfigError(
                f"S3 multipart_chunksize must be at least 5 MiB, got {values['multipart_chunksize']}"
            )
        for name in ("max_attempts", "list_page_size"):
            if values[name] < 1:
                raise ConfigError(f"S3 {name} must be at least 1, got {values[name]}")
        if values["retries"] < 0:
            raise ConfigError(f"S3 retries must be >= 0, got {values['retries']}")
        if not values["stall_timeout"] > 0:
            raise ConfigError(
                f"S3 stall_timeout must be > 0 seconds, got {values['stall_timeout']}"
            )
        return replace(base, **values)

    def request_args(self) -> dict[str, str]:
        """Arguments every object request carries (``RequestPayer`` for requester-pays)."""
        return {"RequestPayer": "requester"} if self.requester_pays else {}


@dataclass(frozen=True)
class S3Access:
    """What an S3 reader or writer needs from its opener, passed explicitly.

    Attributes:
        client: the boto3 client to call (the opener's read client for reads).
        extra: arguments added to every request (:meth:`S3Config.request_args`).
        translate: the opener's error translation (endpoint bound).
    """

    client: Any
    extra: Mapping[str, str]
    translate: TranslateError


def split_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/key`` -> ``(bucket, key)``; the key is taken verbatim (``?`` included).

    Raises:
        ConfigError: not an ``s3://`` URL, or no bucket.
    """
    if not url.lower().startswith("s3://"):
        raise ConfigError(f"not an s3:// URL: {url!r}")
    bucket, _, key = url[5:].partition("/")
    if not bucket:
        raise ConfigError(f"URL {url!r} has no bucket name (expected s3://BUCKET/KEY)")
    return bucket, key
