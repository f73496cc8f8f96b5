"""Google Cloud Storage backend: ``gs://bucket/blob`` (also ``gcs://``).

SDK: ``google-cloud-storage`` (``pip install 'wds_cloud[gcs]'``), used for credentials, the
authorized HTTP session and object metadata. The body is one streaming ``GET ...?alt=media``
pinned to the generation seen at open time, wrapped in :class:`ResumableReader` so a dropped
connection resumes with ``Range: bytes=N-`` from the exact offset; memory stays bounded and the
first sample arrives long before the download ends.

Configuration (first match wins): :class:`GcsConfig` arguments > ``WDS_CLOUD_GCS_*`` environment
variables > the SDK's own variables (``STORAGE_EMULATOR_HOST``,
``GOOGLE_APPLICATION_CREDENTIALS``, ``GOOGLE_CLOUD_PROJECT``) > application default credentials.
"""

from __future__ import annotations

import http.client
import io
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import IO, Any
from urllib.parse import quote

from wds_cloud.errors import (
    ConfigError,
    MissingDependencyError,
    ShardError,
    ShardNotFoundError,
    ShardOpenError,
    ShardReadError,
    UploadError,
)
from wds_cloud.openers.resume import NETWORK_ERRORS, ResumableReader
from wds_cloud.urls import ObjectUrl, parse_object_url

try:
    import google.auth
    import requests
    import urllib3
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as auth_exc
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage
except ImportError:  # pragma: no cover - exercised only without the extra
    storage = None

SCHEMES = ("gs", "gcs")

_SCOPES = ("https://www.googleapis.com/auth/devstorage.read_write",)
_ENV_PREFIX = "WDS_CLOUD_GCS_"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _parse_bool(name: str, value: str) -> bool:
    low = value.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ConfigError(f"{name}={value!r} is not a boolean (use 1/0, true/false)")


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
        retries: consecutive failed attempts to resume a dropped read (default 5).
        backoff: first retry delay in seconds, doubled per attempt (default 0.2).
        chunk_size: resumable-upload chunk in bytes, a multiple of 256 KiB (default 16 MiB);
            the writer holds at most one chunk in memory.
        connect_timeout: seconds to establish a connection (default 30).
        read_timeout: seconds without data before a read counts as dropped (default 120).
        page_size: blobs per listing page (default 1000).
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
    page_size: int | None = None

    def resolve(self, environ: Mapping[str, str] | None = None) -> GcsConfig:
        """Return a copy with every field filled from the environment or the defaults.

        Raises:
            ConfigError: a value (argument or environment variable) is invalid.
        """
        env = os.environ if environ is None else environ
        defaults: dict[str, Any] = {
            "retries": 5,
            "backoff": 0.2,
            "chunk_size": 16 << 20,
            "connect_timeout": 30.0,
            "read_timeout": 120.0,
            "page_size": 1000,
        }
        sdk_env = {
            "project": "GOOGLE_CLOUD_PROJECT",
            "credentials": "GOOGLE_APPLICATION_CREDENTIALS",
            "endpoint": "STORAGE_EMULATOR_HOST",
        }
        values: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            source = f"GcsConfig.{f.name}"
            if value is None:
                for var in (_ENV_PREFIX + f.name.upper(), sdk_env.get(f.name)):
                    if var and env.get(var):
                        value, source = env[var], var
                        break
            if value is None:
                value = defaults.get(f.name)
            values[f.name] = _coerce(f.name, value, source)
        if values["anonymous"] is None:
            values["anonymous"] = bool(values["endpoint"]) and not values["credentials"]
        if values["endpoint"]:
            endpoint = str(values["endpoint"]).rstrip("/")
            if "://" not in endpoint:
                endpoint = "http://" + endpoint
            values["endpoint"] = endpoint
        return replace(self, **values)


def _coerce(name: str, value: Any, source: str) -> Any:
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
        return _parse_bool(source, value)
    if name in ("retries", "chunk_size", "page_size"):
        try:
            number = int(value)
        except ValueError:
            raise ConfigError(f"{source}={value!r} is not an integer") from None
        return _coerce(name, number, source)
    if name in ("backoff", "connect_timeout", "read_timeout"):
        try:
            return float(value)
        except ValueError:
            raise ConfigError(f"{source}={value!r} is not a number") from None
    return value


def _require_sdk() -> None:
    if storage is None:
        raise MissingDependencyError("google-cloud-storage is required for gs:// URLs", extra="gcs")


def translate_error(
    exc: BaseException,
    *,
    url: str,
    endpoint: str,
    offset: int | None = None,
    writing: bool = False,
) -> ShardError | UploadError:
    """The one place that maps google-cloud-storage / google-auth / HTTP errors to ours.

    Args:
        exc: the exception raised by the SDK or the HTTP layer.
        url: the ``gs://`` URL involved.
        endpoint: the API endpoint, named when it cannot be reached.
        offset: byte offset in the object, when known.
        writing: map to :class:`UploadError` (the write path).

    Returns:
        The exception to raise (``raise translate_error(...) from exc``).
    """
    if isinstance(exc, ShardError | UploadError):
        return exc
    if storage is not None and isinstance(exc, gexc.RetryError) and exc.cause is not None:
        exc = exc.cause  # the SDK gave up retrying: report what actually went wrong
    kind: type[ShardError] = ShardOpenError
    if storage is not None and isinstance(exc, gexc.NotFound):
        kind = ShardNotFoundError
        message = f"not found: {exc.message}"
    elif storage is not None and isinstance(exc, gexc.Unauthorized | gexc.Forbidden):
        message = f"access denied by GCS: {exc.message}"
    elif storage is not None and isinstance(exc, auth_exc.GoogleAuthError):
        message = f"GCS credentials could not be used: {exc}"
    elif storage is not None and isinstance(exc, gexc.GoogleAPICallError):
        message = f"GCS request failed ({exc.code}): {exc.message}"
    elif storage is not None and isinstance(exc, requests.ConnectionError | ConnectionError):
        message = f"cannot connect to the GCS endpoint {endpoint}: {exc}"
    elif storage is not None and isinstance(exc, requests.Timeout | TimeoutError):
        message = f"timed out talking to the GCS endpoint {endpoint}: {exc}"
    else:
        message = f"GCS error: {type(exc).__name__}: {exc}"
    if writing:
        return UploadError(f"upload failed: {message}", url=url)
    return kind(message, url=url, offset=offset)


#: Exceptions that mean "the body stream dropped, resume from the offset".
def _read_errors() -> tuple[type[BaseException], ...]:
    extra: tuple[type[BaseException], ...] = (http.client.HTTPException,)
    if storage is not None:
        extra += (requests.RequestException, urllib3.exceptions.HTTPError)
    return NETWORK_ERRORS + extra


class _Body(io.RawIOBase):
    """The raw bytes of one streaming HTTP response (no content decoding)."""

    def __init__(self, response: Any) -> None:
        super().__init__()
        self._response = response
        self._fp = response.raw._fp  # http.client.HTTPResponse: readinto without a copy

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return int(self._fp.readinto(buffer) or 0)

    def close(self) -> None:
        if not self.closed:
            self._response.close()
        super().close()


class GcsOpener:
    """Opens, lists and creates ``gs://`` objects.

    Args:
        config: a :class:`GcsConfig`; ``None`` fields are resolved from the environment.
        **overrides: individual :class:`GcsConfig` fields, applied over ``config``.

    Raises:
        ConfigError: an unknown override or an invalid value.
    """

    def __init__(self, config: GcsConfig | None = None, **overrides: Any) -> None:
        config = config or GcsConfig()
        try:
            config = replace(config, **overrides)
        except TypeError as exc:
            raise ConfigError(f"unknown GcsConfig option: {exc}") from None
        self.config = config.resolve()
        self._client_obj: Any = None
        self._pid: int | None = None
        self._lock = threading.Lock()

    # -- client ---------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """The API endpoint in use."""
        return self.config.endpoint or "https://storage.googleapis.com"

    def client(self, url: str = "gs://") -> Any:
        """The ``google.cloud.storage.Client`` of this process (created on first use).

        Raises:
            MissingDependencyError: google-cloud-storage is not installed.
            ShardOpenError: the credentials cannot be loaded.
        """
        _require_sdk()
        if self._client_obj is not None and self._pid == os.getpid():
            return self._client_obj
        with self._lock:
            if self._client_obj is None or self._pid != os.getpid():
                self._client_obj = self._make_client(url)
                self._pid = os.getpid()
            return self._client_obj

    def _make_client(self, url: str) -> Any:
        cfg = self.config
        options = {"api_endpoint": cfg.endpoint} if cfg.endpoint else None
        project = cfg.project
        try:
            if cfg.anonymous:
                client = storage.Client(
                    project=project or "<none>",
                    credentials=AnonymousCredentials(),
                    client_options=options,
                )
                if project is None:
                    client.project = None
                return client
            if cfg.credentials:
                credentials, file_project = google.auth.load_credentials_from_file(
                    cfg.credentials, scopes=_SCOPES
                )
            else:
                credentials, file_project = google.auth.default(scopes=_SCOPES)
            return storage.Client(
                project=project or file_project, credentials=credentials, client_options=options
            )
        except Exception as exc:
            where = f" from {cfg.credentials!r}" if cfg.credentials else ""
            raise ShardOpenError(
                f"cannot create the GCS client with credentials{where}: {exc}", url=url
            ) from exc

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.config = state["config"]
        self._client_obj = None
        self._pid = None
        self._lock = threading.Lock()

    # -- reading --------------------------------------------------------------------------

    def _parse(self, url: str) -> ObjectUrl:
        parsed = parse_object_url(url, schemes=SCHEMES)
        if not parsed.key:
            raise ConfigError(f"URL {url!r} names a bucket but no object (gs://BUCKET/BLOB)")
        return parsed

    def _missing(self, client: Any, parsed: ObjectUrl, url: str) -> ShardNotFoundError:
        try:
            bucket_exists = client.bucket(parsed.bucket).exists(
                timeout=self._timeout(), retry=self._retry()
            )
        except Exception:
            bucket_exists = True  # say the object is missing, which is certainly true
        what = (
            f"object {parsed.key!r} does not exist in bucket {parsed.bucket!r}"
            if bucket_exists
            else f"bucket {parsed.bucket!r} does not exist"
        )
        return ShardNotFoundError(what, url=url)

    def open(self, url: str, **options: Any) -> ResumableReader:
        """Open ``gs://bucket/blob`` as a resumable streaming binary reader.

        Args:
            url: ``gs://`` or ``gcs://`` URL.
            **options: ``generation=`` reads that object generation instead of the live one.

        Raises:
            ShardNotFoundError: the object or the bucket does not exist.
            ShardOpenError: credentials, permission or endpoint problems.
            MissingDependencyError: google-cloud-storage is not installed.
        """
        _require_sdk()
        parsed = self._parse(url)
        client = self.client(url)
        generation = options.get("generation")
        try:
            blob = client.bucket(parsed.bucket).get_blob(
                parsed.key, generation=generation, timeout=self._timeout(), retry=self._retry()
            )
        except Exception as exc:
            raise translate_error(exc, url=url, endpoint=self.endpoint) from exc
        if blob is None:
            raise self._missing(client, parsed, url)
        media = (
            f"{client.api_endpoint.rstrip('/')}/download/storage/v1/b/"
            f"{quote(parsed.bucket, safe='')}/o/{quote(parsed.key, safe='')}"
            f"?alt=media&generation={blob.generation}"
        )

        def fetch(offset: int) -> tuple[IO[bytes], int]:
            return self._fetch(client, media, url, parsed, int(blob.generation), offset)

        return ResumableReader(
            fetch,
            url=url,
            size=int(blob.size),
            retries=int(self.config.retries or 0),
            backoff=float(self.config.backoff or 0.0),
            retry_on=_read_errors(),
        )

    def _retry(self) -> Any:
        """The SDK retry policy for metadata and listing calls, from ``retries``/``backoff``."""
        retries = int(self.config.retries or 0)
        if not retries:
            return None
        from google.cloud.storage.retry import DEFAULT_RETRY

        backoff = float(self.config.backoff or 0.0)
        delays = [min(5.0, backoff * 2**i) for i in range(retries)]
        return DEFAULT_RETRY.with_delay(initial=backoff, maximum=5.0, multiplier=2.0).with_timeout(
            sum(delays) + 1.0
        )

    def _timeout(self) -> tuple[float, float]:
        return (float(self.config.connect_timeout or 30), float(self.config.read_timeout or 120))

    def _fetch(
        self, client: Any, media: str, url: str, parsed: ObjectUrl, generation: int, offset: int
    ) -> tuple[IO[bytes], int]:
        # Accept-Encoding: gzip returns the stored bytes as they are (no decompressive
        # transcoding), so offsets and the size from the metadata agree.
        headers = {"Accept-Encoding": "gzip"}
        if offset:
            headers["Range"] = f"bytes={offset}-"
        response = client._http.get(media, headers=headers, stream=True, timeout=self._timeout())
        status = response.status_code
        if status in (200, 206):
            body: IO[bytes] = _Body(response)  # type: ignore[assignment]
            return body, (offset if status == 206 else 0)
        try:
            error = gexc.from_http_response(response)
        finally:
            response.close()
        if status == 404:
            try:
                current = client.bucket(parsed.bucket).get_blob(
                    parsed.key, timeout=self._timeout(), retry=self._retry()
                )
            except Exception:
                current = None
            if current is None:
                what = "was deleted while being read"
            else:
                what = f"changed while being read (generation {generation} -> {current.generation})"
            raise ShardReadError(f"object {what}", url=url, offset=offset) from error
        if status >= 500 or status == 429:
            raise ConnectionError(f"GCS answered {status} at offset {offset}: {error.message}")
        raise translate_error(error, url=url, endpoint=self.endpoint, offset=offset) from error

    # -- listing and writing --------------------------------------------------------------

    def list(self, url: str) -> list[str]:
        """All object URLs under the prefix ``gs://bucket/prefix`` (every page).

        Raises:
            ShardNotFoundError: the bucket does not exist.
            ShardOpenError: credentials, permission or endpoint problems.
        """
        _require_sdk()
        parsed = parse_object_url(url, schemes=SCHEMES)
        client = self.client(url)
        try:
            blobs = client.list_blobs(
                parsed.bucket,
                prefix=parsed.key or None,
                page_size=self.config.page_size,
                timeout=self._timeout(),
                retry=self._retry(),
            )
            return [f"{parsed.scheme}://{parsed.bucket}/{blob.name}" for blob in blobs]
        except Exception as exc:
            raise translate_error(exc, url=url, endpoint=self.endpoint) from exc

    def create(self, url: str, *, content_type: str | None = None) -> Any:
        """A writable stream uploading to ``url``; ``close()`` commits, ``abort()`` discards.

        Args:
            url: destination ``gs://bucket/blob``.
            content_type: stored content type (default ``application/x-tar``).

        Raises:
            UploadError: the client cannot be created.
        """
        from wds_cloud.openers.gcs_write import GcsWriter

        _require_sdk()
        parsed = self._parse(url)
        try:
            client = self.client(url)
        except ShardError as exc:
            raise UploadError(exc.reason, url=url) from exc
        blob = client.bucket(parsed.bucket).blob(parsed.key)
        return GcsWriter(
            blob,
            url=url,
            endpoint=self.endpoint,
            chunk_size=int(self.config.chunk_size or 16 << 20),
            content_type=content_type or "application/x-tar",
            timeout=self._timeout(),
            retry=self._retry(),
        )
