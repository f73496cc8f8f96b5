"""Configuration of the GCS backend: :class:`GcsConfig` and how it is resolved.

Order (first match wins), :data:`GCS_SETTINGS`: explicit argument > ``WDS_CLOUD_GCS_<FIELD>`` >
the SDK's own variable (``GOOGLE_CLOUD_PROJECT``, ``GOOGLE_APPLICATION_CREDENTIALS``,
``STORAGE_EMULATOR_HOST``) > default. The environment is read when :meth:`GcsConfig.resolve`
runs (opener construction), never at import.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

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
    Kind,
    at_least,
    multiple_of,
)

CHUNK_STEP = 256 << 10  # resumable uploads send multiples of 256 KiB


def _endpoint(text: str, source: str) -> str:
    """An endpoint without a trailing ``/``; ``host:port`` gets ``http://``."""
    endpoint = text.rstrip("/")
    return endpoint if "://" in endpoint or not endpoint.strip() else "http://" + endpoint


#: How each :class:`GcsConfig` field is resolved (``docs/gcs.md`` has the table in words).
GCS_SETTINGS = ConfigTable(
    section="GCS",
    owner="GcsConfig",
    what="GCS",
    fields=(
        Field("project", TEXT, env=("GOOGLE_CLOUD_PROJECT",)),
        Field("credentials", TEXT, env=("GOOGLE_APPLICATION_CREDENTIALS",)),
        Field("endpoint", Kind("an endpoint URL", _endpoint), env=("STORAGE_EMULATOR_HOST",)),
        Field(
            "anonymous",
            BOOL,
            derive=lambda v: bool(v["endpoint"]) and not v["credentials"],
        ),
        *retry_fields(retries=5, backoff=0.2),
        Field("chunk_size", BYTES, 16 << 20, checks=(at_least(1), multiple_of(CHUNK_STEP))),
        Field("connect_timeout", SECONDS, 10.0),
        Field("read_timeout", SECONDS, DEFAULT_READ_TIMEOUT),
        Field("page_size", INT, 1000, checks=(at_least(1),)),
        *PREFETCH_FIELDS,
    ),
)


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
        max_backoff: (class attribute) the longest retry delay of reads, 5 s.
    """

    max_backoff = 5.0  # a class attribute, not a field: RetryPolicy.from_config reads it

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
        environment (``environ``, default ``os.environ``), then the defaults
        (:data:`GCS_SETTINGS`).

        Raises:
            ConfigError: an unknown override, or an invalid value (argument or environment).
        """
        return GCS_SETTINGS.resolve(self, overrides, environ=environ)


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
