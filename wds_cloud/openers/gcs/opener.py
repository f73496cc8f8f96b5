"""Google Cloud Storage backend: ``gs://bucket/blob`` (also ``gcs://``).

SDK: ``google-cloud-storage`` (``pip install 'wds_cloud[gcs]'``), used for credentials,
listing, uploads and object metadata. The body is one streaming ``GET ...?alt=media`` on an
authorized ``requests`` session of our own (``google.auth.transport.requests.AuthorizedSession``
over the same credentials), pinned to the generation seen at open time and read by
:class:`ResumableReader`, so a dropped connection resumes with ``Range: bytes=N-`` after the
last byte received; memory stays bounded and the first sample arrives long before the download
ends. A read that gets no new byte for ``stall_timeout`` seconds (``WDS_CLOUD_GCS_STALL_TIMEOUT``,
default 60; each socket read waits at most ``read_timeout``, default 20) raises
:class:`ShardReadError` ("stalled"), at most :meth:`GcsOpener.stall_bound` seconds (110 by
default) after its last byte.

Configuration (first match wins): :class:`GcsConfig` arguments > ``WDS_CLOUD_GCS_*`` environment
variables > the SDK's own variables (``STORAGE_EMULATOR_HOST``,
``GOOGLE_APPLICATION_CREDENTIALS``, ``GOOGLE_CLOUD_PROJECT``) > application default credentials.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wds_cloud.errors import (
    ConfigError,
    MissingDependencyError,
    ShardError,
    ShardNotFoundError,
    ShardOpenError,
    UploadError,
)
from wds_cloud.openers.clients import ProcessLocal
from wds_cloud.openers.gcs.config import GcsAccess, GcsConfig
from wds_cloud.openers.gcs.errors import DEFAULT_ENDPOINT, translate_error
from wds_cloud.openers.gcs.read import GcsReader, MediaFetch, read_errors
from wds_cloud.openers.gcs.retry import media_timeout, request_timeout, sdk_retry
from wds_cloud.openers.streams.backoff import RetryPolicy, stall_bound
from wds_cloud.openers.streams.batchread import RangeBatchReads, batch_connections
from wds_cloud.openers.streams.prefetch import PREFETCH_OPTIONS, split_prefetch_options
from wds_cloud.openers.streams.resumable import read_span
from wds_cloud.openers.streams.throttle import limiter_for
from wds_cloud.settings import reject_unknown_options
from wds_cloud.urls import ObjectUrl, parse_object_url

try:
    import google.auth
    import requests.adapters
    from google.auth.credentials import AnonymousCredentials
    from google.auth.transport.requests import AuthorizedSession
    from google.cloud import storage
except ImportError:  # pragma: no cover - exercised only without the extra
    storage = None

if TYPE_CHECKING:
    from wds_cloud.openers.gcs.prefetch import GcsPrefetchReader

SCHEMES = ("gs", "gcs")
OPEN_OPTIONS = ("generation",)  # what open(), open_at() and read_range() accept
__all__ = ["SCHEMES", "GcsConfig", "GcsOpener", "translate_error"]

_SCOPES = ("https://www.googleapis.com/auth/devstorage.read_write",)


def _require_sdk() -> None:
    if storage is None:
        raise MissingDependencyError("google-cloud-storage is required for gs:// URLs", extra="gcs")


class GcsOpener(RangeBatchReads):
    """Opens, lists and creates ``gs://`` objects.

    Args:
        config: a :class:`GcsConfig`; ``None`` fields are resolved from the environment.
        **overrides: individual :class:`GcsConfig` fields, applied over ``config``.

    Raises:
        ConfigError: an unknown override or an invalid value.
    """

    remote: bool = True  # streams come over a network: the registry reads them ahead

    def __init__(self, config: GcsConfig | None = None, **overrides: Any) -> None:
        self.config = (config or GcsConfig()).resolve(overrides)
        # (storage client, authorized session for media GETs) of this process, made together
        # on the same credentials; never pickled: an unpickled opener carries its config only
        self._client: ProcessLocal[tuple[Any, Any]] = ProcessLocal()

    # -- client ---------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """The API endpoint in use."""
        return self.config.endpoint or DEFAULT_ENDPOINT

    def client(self, url: str = "gs://") -> Any:
        """The ``google.cloud.storage.Client`` of this process (created on first use).

        Raises:
            MissingDependencyError: google-cloud-storage is not installed.
            ShardOpenError: the credentials cannot be loaded.
        """
        _require_sdk()
        return self._client.get(lambda: self._make_clients(url))[0]

    def read_client(self, url: str = "gs://") -> Any:
        """The authorized ``requests`` session of this process for media GETs (created with
        :meth:`client`, on the same credentials).

        Raises:
            As :meth:`client`.
        """
        _require_sdk()
        return self._client.get(lambda: self._make_clients(url))[1]

    def translate_error(
        self, exc: BaseException, /, *, url: str, offset: int | None = None
    ) -> ShardError:
        """:func:`wds_cloud.openers.gcs.errors.translate_error` with this opener's endpoint."""
        return translate_error(exc, url=url, offset=offset, endpoint=self.endpoint)

    def access(self, url: str = "gs://") -> GcsAccess:
        """The clients, timeouts, retry policy and error translation a reader gets."""
        client = self.client(url)
        return GcsAccess(
            client=client,
            session=self.read_client(url),
            media_timeout=self.media_timeout(),
            timeout=request_timeout(self.config),
            retry=sdk_retry(self.config),
            translate=self.translate_error,
        )

    def _make_clients(self, url: str) -> tuple[Any, Any]:
        client, credentials = self._make_client(url)
        # Media GETs go through a session of our own on the same credentials (the client's is
        # private); google-cloud-core builds its session the same way. Its connection pool
        # keeps as many connections as a batch read has in flight (requests keeps 10).
        session = AuthorizedSession(credentials)
        adapter = requests.adapters.HTTPAdapter(pool_maxsize=max(10, batch_connections()))
        session.mount("https://", adapter)
        session.mount("http://", adapter)
        return client, session

    def _make_client(self, url: str) -> tuple[Any, Any]:
        cfg = self.config
        options = {"api_endpoint": cfg.endpoint} if cfg.endpoint else None
        project = cfg.project
        try:
            if cfg.anonymous:
                anonymous = AnonymousCredentials()
                client = storage.Client(
                    project=project or "<none>", credentials=anonymous, client_options=options
                )
                if project is None:
                    client.project = None
                return client, anonymous
            if cfg.credentials:
                credentials, file_project = google.auth.load_credentials_from_file(
                    cfg.credentials, scopes=_SCOPES
                )
            else:
                credentials, file_project = google.auth.default(scopes=_SCOPES)
            client = storage.Client(
                project=project or file_project, credentials=credentials, client_options=options
            )
            return client, credentials
        except Exception as exc:
            where = f" from {cfg.credentials!r}" if cfg.credentials else ""
            raise ShardOpenError(
                f"cannot create the GCS client with credentials{where}: {exc}", url=url
            ) from exc

    # -- reading --------------------------------------------------------------------------

    def _parse(self, url: str) -> ObjectUrl:
        parsed = parse_object_url(url, schemes=SCHEMES)
        if not parsed.key:
            raise ConfigError(f"URL {url!r} names a bucket but no object (gs://BUCKET/BLOB)")
        return parsed

    def open(self, url: str, **options: Any) -> GcsReader | GcsPrefetchReader:
        """Open ``gs://bucket/blob`` as a resumable streaming binary reader.

        One GET starts the download (no separate metadata request); its generation is pinned
        for every resumed request.

        Args:
            url: ``gs://`` or ``gcs://`` URL.
            **options: ``generation=`` reads that object generation instead of the live one;
                ``prefetch``/``prefetch_chunk`` override the config for this call.

        Raises:
            ShardNotFoundError: the object or the bucket does not exist.
            ShardOpenError: credentials, permission or endpoint problems, or no answer after
                the retries or within the stall deadline.
            MissingDependencyError: google-cloud-storage is not installed.
            ConfigError: an unknown option.
        """
        reject_unknown_options(options, (*OPEN_OPTIONS, *PREFETCH_OPTIONS), "gcs open()")
        wanted, options = split_prefetch_options(options)
        cfg = self.config.resolve(wanted, environ={}) if wanted else self.config
        if cfg.prefetch:
            _require_sdk()
            from wds_cloud.openers.gcs.prefetch import open_prefetching

            stream = open_prefetching(
                self.access(url), cfg, url, self._parse(url), options.get("generation")
            )
            if stream is not None:
                return stream
        return self._reader(url, 0, options)

    def open_at(self, url: str, offset: int, **options: Any) -> GcsReader:
        """Open ``gs://bucket/blob`` for streaming reads from byte ``offset``: one media GET
        with ``Range: bytes=offset-``, its generation pinned and resumed like :meth:`open`.
        Resumable loading reads shard tails with it.

        Args:
            url: ``gs://`` or ``gcs://`` URL.
            offset: first byte; the object's size gives an empty stream.
            **options: ``generation=`` reads that object generation.

        Raises:
            ConfigError: a negative offset or an unknown option.
            ShardOpenError: ``offset`` beyond the end of the object; as :meth:`open`.
            ShardNotFoundError: as :meth:`open`.
        """
        if offset < 0:
            raise ConfigError(f"open_at() offset must be >= 0, got {offset} for {url!r}")
        reject_unknown_options(options, OPEN_OPTIONS, "gcs open_at()")
        return self._reader(url, offset, options)

    def _reader(self, url: str, offset: int, options: dict[str, Any]) -> GcsReader:
        _require_sdk()
        parsed = self._parse(url)
        fetch = MediaFetch(self.access(url), url, parsed, options.get("generation"))
        reader = GcsReader(
            fetch,
            url=url,
            policy=RetryPolicy.from_config(self.config),
            retry_on=read_errors(),
            explain=fetch.explain,
            limiter=limiter_for(self.endpoint),
        )
        reader.position = offset
        reader.start()
        reader.generation = fetch.generation
        return reader

    def read_range(self, url: str, offset: int, length: int, **options: Any) -> bytes:
        """Bytes ``offset .. offset + length`` of ``gs://bucket/blob`` with one ranged media
        GET (resumed like a streaming read if the connection drops).

        Args:
            url: ``gs://`` or ``gcs://`` URL.
            offset: first byte.
            length: number of bytes.
            **options: ``generation=`` reads that object generation.

        Raises:
            ShardNotFoundError: the object or the bucket does not exist.
            ShardReadError: the object is shorter, or the read failed.
            ShardOpenError: credentials, permission or endpoint problems.
        """
        reject_unknown_options(options, OPEN_OPTIONS, "gcs read_range()")
        _require_sdk()
        parsed = self._parse(url)
        fetch = MediaFetch(self.access(url), url, parsed, options.get("generation"))
        return read_span(
            fetch.span,
            url=url,
            offset=offset,
            length=length,
            policy=RetryPolicy.from_config(self.config),
            retry_on=read_errors(),
            explain=fetch.explain,
            limiter=limiter_for(self.endpoint),
        )

    def stall_bound(self) -> float:
        """Seconds a read can go without a new byte before it raises (with these settings)."""
        connect, read = self.media_timeout()
        return stall_bound(float(self.config.stall_timeout or 0), connect, read)

    def media_timeout(self) -> tuple[float, float]:
        """``(connect, read)`` seconds of object reads: the read clipped to the stall deadline."""
        return media_timeout(self.config)

    # -- listing and writing --------------------------------------------------------------

    def list_sizes(self, url: str) -> list[tuple[str, int]]:
        """``(url, size in bytes)`` of every object under the prefix ``gs://bucket/prefix``,
        every page, in the listing's (lexicographic) order; the sizes come with the listing.

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
                timeout=request_timeout(self.config),
                retry=sdk_retry(self.config),
            )
            return [
                (f"{parsed.scheme}://{parsed.bucket}/{b.name}", int(b.size or 0)) for b in blobs
            ]
        except Exception as exc:
            error = self.translate_error(exc, url=url)
            if isinstance(error, ShardNotFoundError):  # listing 404s only for the bucket
                raise ShardNotFoundError(
                    f"GCS bucket {parsed.bucket!r} does not exist", url=url
                ) from exc
            raise error from exc

    def list(self, url: str) -> list[str]:
        """All object URLs under the prefix ``gs://bucket/prefix`` (every page).

        See :meth:`list_sizes`, which this is without the sizes.
        """
        return [u for u, _ in self.list_sizes(url)]

    def create(self, url: str, *, content_type: str | None = None) -> Any:
        """A writable stream uploading to ``url``; ``close()`` commits, ``abort()`` discards.

        Args:
            url: destination ``gs://bucket/blob``.
            content_type: stored content type (default ``application/x-tar``).

        Raises:
            UploadError: the client cannot be created.
        """
        from wds_cloud.openers.gcs.write import GcsWriter

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
            translate=self.translate_error,
            chunk_size=int(self.config.chunk_size or 16 << 20),
            content_type=content_type or "application/x-tar",
            timeout=request_timeout(self.config),
            retry=sdk_retry(self.config),
        )
