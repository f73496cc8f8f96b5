"""Settings of the S3 backend: :class:`S3Config` and ``s3://`` URL parsing.

Every field is resolved by :data:`S3_SETTINGS` when an opener is created (never at import):
explicit value > ``WDS_CLOUD_S3_<FIELD>`` > ``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL``
(endpoint), ``AWS_REGION``/``AWS_DEFAULT_REGION`` (region), ``AWS_PROFILE`` (profile) > defaults.
Credentials are left to boto3's own chain unless given explicitly (argument or
``WDS_CLOUD_S3_ACCESS_KEY_ID``...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from wds_cloud.errors import ConfigError
from wds_cloud.openers.streams.backoff import DEFAULT_READ_TIMEOUT, retry_fields
from wds_cloud.openers.streams.prefetch import PREFETCH_FIELDS
from wds_cloud.openers.streams.resumable import TranslateError
from wds_cloud.redact import config_repr
from wds_cloud.settings import (
    BOOL,
    BYTES,
    INT,
    SECONDS,
    TEXT,
    ConfigTable,
    Field,
    at_least,
    choice,
)

MIN_PART_SIZE = 5 << 20

#: How each :class:`S3Config` field is resolved (``docs/s3.md`` has the table in words).
S3_SETTINGS = ConfigTable(
    section="S3",
    owner="S3Config",
    what="S3",
    fields=(
        Field("endpoint_url", TEXT, env=("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")),
        Field("region", TEXT, env=("AWS_REGION", "AWS_DEFAULT_REGION")),
        Field("profile", TEXT, env=("AWS_PROFILE",)),
        Field(
            "addressing_style",
            choice("path", "virtual", "auto"),
            derive=lambda v: "path" if v["endpoint_url"] else "auto",
        ),
        Field("requester_pays", BOOL, False),
        Field("max_attempts", INT, 5, checks=(at_least(1),)),
        *retry_fields(retries=5, backoff=0.1),
        Field("multipart_chunksize", BYTES, 16 << 20, checks=(at_least(MIN_PART_SIZE, "5 MiB"),)),
        *PREFETCH_FIELDS,
        Field("connect_timeout", SECONDS, 10.0),
        Field("read_timeout", SECONDS, DEFAULT_READ_TIMEOUT),
        Field("list_page_size", INT, 1000, checks=(at_least(1),)),
        Field("access_key_id", TEXT, secret=True),
        Field("secret_access_key", TEXT, secret=True),
        Field("session_token", TEXT, secret=True),
    ),
)


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
        backoff: first retry delay in seconds (doubles each time, up to ``max_backoff``).
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
        max_backoff: (class attribute) the longest retry delay of reads, 5 s.
    """

    max_backoff = 5.0  # a class attribute, not a field: RetryPolicy.from_config reads it

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
        environment (``environ``, default ``os.environ``), then the defaults
        (:data:`S3_SETTINGS`).

        Raises:
            ConfigError: an unknown override, or a value of the wrong type or out of range.
        """
        return S3_SETTINGS.resolve(self, overrides, environ=environ)

    def throttle_endpoint(self, bucket: str) -> str:
        """The endpoint whose requests share a throttling limiter: the custom endpoint, else
        the bucket's AWS host (S3 throttles per bucket prefix)."""
        return self.endpoint_url or f"{bucket}.s3.amazonaws.com"

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
