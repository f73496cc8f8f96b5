"""Azure Blob Storage backend: ``az://container/blob`` (also ``azure://``, ``abfs://``,
``abfss://``, and ``abfs://container@account.dfs.core.windows.net/blob``).

SDK: ``azure-storage-blob`` (``pip install 'wds_cloud[azure]'``), used for listing, uploads
and container checks. The body is one streaming GET on a ``requests`` session of our own,
carrying the account's credential (:mod:`wds_cloud.openers.azure.auth`), pinned to the ETag of
its first answer and read by :class:`ResumableReader`, so a dropped connection resumes with
``Range: bytes=N-`` after the last byte received and a blob rewritten mid-read raises
:class:`ShardReadError` instead of mixing two versions. A read that gets no new byte for
``stall_timeout`` seconds raises "stalled".

Configuration (first match wins): :class:`AzureConfig` arguments > ``WDS_CLOUD_AZURE_*``
environment variables > Azure's own variables (``AZURE_STORAGE_CONNECTION_STRING``,
``AZURE_STORAGE_ACCOUNT_NAME``, ``AZURE_STORAGE_ACCOUNT_KEY``, ``AZURE_STORAGE_SAS_TOKEN``) >
``DefaultAzureCredential`` (``azure-identity``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wds_cloud.errors import (
    ConfigError,
    MissingDependencyError,
    ShardError,
    ShardNotFoundError,
    UploadError,
)
from wds_cloud.openers.azure.auth import Account, resolve_account, service_client
from wds_cloud.openers.azure.config import (
    SCHEMES,
    AzureAccess,
    AzureConfig,
    BlobUrl,
    parse_blob_url,
)
from wds_cloud.openers.azure.errors import read_errors, translate_error
from wds_cloud.openers.azure.read import AzureReader, BlobFetch
from wds_cloud.openers.clients import ProcessLocal
from wds_cloud.openers.streams.backoff import RetryPolicy, stall_bound
from wds_cloud.openers.streams.prefetch import PREFETCH_OPTIONS, split_prefetch_options
from wds_cloud.openers.streams.resumable import read_span
from wds_cloud.openers.streams.throttle import limiter_for
from wds_cloud.settings import reject_unknown_options

try:
    import azure.storage.blob  # noqa: F401  (only whether it can be imported)
    import requests

    HAVE_SDK = True
except ImportError:  # pragma: no cover - exercised only without the extra
    HAVE_SDK = False

if TYPE_CHECKING:
    from wds_cloud.openers.azure.prefetch import AzurePrefetchReader

__all__ = ["SCHEMES", "AzureConfig", "AzureOpener", "translate_error"]


def _require_sdk() -> None:
    if not HAVE_SDK:
        raise MissingDependencyError("azure-storage-blob is required for az:// URLs", extra="azure")


@dataclass
class _Clients:
    """What one process uses for one account: the SDK client and the GET session."""

    account: Account
    service: Any
    session: Any


class AzureOpener:
    """Opens, lists and creates ``az://`` blobs.

    Args:
        config: an :class:`AzureConfig`; ``None`` fields are resolved from the environment.
        **overrides: individual :class:`AzureConfig` fields, applied over ``config``.

    Raises:
        ConfigError: an unknown override or an invalid value.
    """

    remote: bool = True  # streams come over a network: the registry reads them ahead

    def __init__(self, config: AzureConfig | None = None, **overrides: Any) -> None:
        self.config = (config or AzureConfig()).resolve(overrides)
        # account named in the URL (or None) -> clients of this process; never pickled
        self._clients: ProcessLocal[dict[str | None, _Clients]] = ProcessLocal()

    def __repr__(self) -> str:
        return f"AzureOpener({self.config!r})"

    # -- clients --------------------------------------------------------------------------

    def _for(self, parsed: BlobUrl) -> _Clients:
        _require_sdk()
        table = self._clients.get(dict)
        found = table.get(parsed.account)
        if found is None:
            account = resolve_account(self.config, parsed.account)
            session = requests.Session()
            found = table.setdefault(
                parsed.account, _Clients(account, service_client(account, self.config), session)
            )
        return found

    def account(self, url: str) -> Account:
        """The account, endpoint and credential ``url`` is read with.

        Raises:
            ConfigError: no account is configured, or the URL names another one.
            MissingDependencyError: the SDK (or ``azure-identity``, when needed) is missing.
        """
        return self._for(parse_blob_url(url)).account

    def service(self, url: str = "az://") -> Any:
        """The ``BlobServiceClient`` of this process for the account of ``url``."""
        return self._for(parse_blob_url(url)).service

    def endpoint(self, url: str) -> str:
        """The Blob endpoint ``url`` is read from."""
        return self.account(url).endpoint

    def translate_error(
        self, exc: BaseException, /, *, url: str, offset: int | None = None
    ) -> ShardError:
        """:func:`wds_cloud.openers.azure.errors.translate_error` with the URL's endpoint."""
        try:
            endpoint = self.endpoint(url)
        except Exception:
            endpoint = "the Azure Blob endpoint"
        return translate_error(exc, url=url, offset=offset, endpoint=endpoint)

    def access(self, url: str) -> AzureAccess:
        """The session, URL signer, headers, timeouts and error translation a reader gets."""
        clients = self._for(parse_blob_url(url))
        service = clients.service

        def container_exists(container: str) -> bool:
            return bool(service.get_container_client(container).exists())

        return AzureAccess(
            session=clients.session,
            blob_url=clients.account.blob_url,
            headers=clients.account.headers,
            timeout=self.media_timeout(),
            container_exists=container_exists,
            translate=self.translate_error,
        )

    # -- reading --------------------------------------------------------------------------

    def _parse(self, url: str) -> BlobUrl:
        parsed = parse_blob_url(url)
        if not parsed.key or parsed.key.endswith("/"):
            raise ConfigError(
                f"URL {url!r} names a container or a folder, not a blob (az://CONTAINER/BLOB)"
            )
        return parsed

    def open(self, url: str, **options: Any) -> AzureReader | AzurePrefetchReader:
        """Open ``az://container/blob`` as a resumable streaming binary reader.

        One GET starts the download; its ETag is pinned for every resumed request.

        Args:
            url: ``az://``, ``azure://``, ``abfs://`` or ``abfss://`` URL.
            **options: ``prefetch``/``prefetch_chunk`` override the config for this call.

        Raises:
            ShardNotFoundError: the blob or the container does not exist.
            ShardOpenError: credentials, permission or endpoint problems, or no answer after
                the retries or within the stall deadline.
            MissingDependencyError: azure-storage-blob is not installed.
            ConfigError: an unknown option, a URL without a blob name.
        """
        reject_unknown_options(options, PREFETCH_OPTIONS, "azure open()")
        wanted, _ = split_prefetch_options(options)
        cfg = self.config.resolve(wanted, environ={}) if wanted else self.config
        parsed = self._parse(url)
        if cfg.prefetch:
            from wds_cloud.openers.azure.prefetch import open_prefetching

            stream = open_prefetching(self.access(url), cfg, url, parsed)
            if stream is not None:
                return stream
        return self._reader(url, parsed, 0)

    def open_at(self, url: str, offset: int, **options: Any) -> AzureReader:
        """Open ``az://container/blob`` for streaming reads from byte ``offset``: one GET with
        ``Range: bytes=offset-``, its ETag pinned and resumed like :meth:`open`.

        Raises:
            ConfigError: a negative offset or an unknown option.
            ShardOpenError: ``offset`` beyond the end of the blob; as :meth:`open`.
            ShardNotFoundError: as :meth:`open`.
        """
        if offset < 0:
            raise ConfigError(f"open_at() offset must be >= 0, got {offset} for {url!r}")
        reject_unknown_options(options, (), "azure open_at()")
        return self._reader(url, self._parse(url), offset)

    def _reader(self, url: str, parsed: BlobUrl, offset: int) -> AzureReader:
        fetch = BlobFetch(self.access(url), url, parsed, None)
        reader = AzureReader(
            fetch,
            url=url,
            policy=RetryPolicy.from_config(self.config),
            retry_on=read_errors(),
            explain=fetch.explain,
            limiter=limiter_for(self.endpoint(url)),
        )
        reader.position = offset
        reader.start()
        reader.etag = fetch.etag
        return reader

    def read_range(self, url: str, offset: int, length: int, **options: Any) -> bytes:
        """Bytes ``offset .. offset + length`` of ``az://container/blob`` with one ranged GET
        (resumed, pinned to the ETag of its first answer, if the connection drops).

        Raises:
            ShardNotFoundError: the blob or the container does not exist.
            ShardReadError: the blob is shorter, or the read failed.
            ShardOpenError: credentials, permission or endpoint problems.
        """
        reject_unknown_options(options, (), "azure read_range()")
        fetch = BlobFetch(self.access(url), url, self._parse(url), None)
        return read_span(
            fetch.span,
            url=url,
            offset=offset,
            length=length,
            policy=RetryPolicy.from_config(self.config),
            retry_on=read_errors(),
            explain=fetch.explain,
            limiter=limiter_for(self.endpoint(url)),
        )

    def media_timeout(self) -> tuple[float, float]:
        """``(connect, read)`` seconds of blob GETs: the read clipped to the stall deadline."""
        cfg = self.config
        read = RetryPolicy.from_config(cfg).read_timeout(float(cfg.read_timeout or 20))
        return float(cfg.connect_timeout or 10), read

    def stall_bound(self) -> float:
        """Seconds a read can go without a new byte before it raises (with these settings)."""
        connect, read = self.media_timeout()
        return stall_bound(float(self.config.stall_timeout or 0), connect, read)

    # -- listing and writing --------------------------------------------------------------

    def list_sizes(self, url: str) -> list[tuple[str, int]]:
        """``(url, size in bytes)`` of every blob under the prefix ``az://container/prefix``,
        every page (``page_size`` blobs each), in the listing's (lexicographic) order; the
        URLs are spelled like ``url`` (scheme and ``container@account`` kept).

        Raises:
            ShardNotFoundError: the container does not exist.
            ShardOpenError: credentials, permission or endpoint problems.
        """
        parsed = parse_blob_url(url)
        service = self._for(parsed).service
        try:
            container = service.get_container_client(parsed.container)
            pages = container.list_blobs(
                name_starts_with=parsed.key or None, results_per_page=self.config.page_size
            ).by_page()
            return [(parsed.child(b.name), int(b.size or 0)) for page in pages for b in page]
        except Exception as exc:
            error = self.translate_error(exc, url=url)
            if isinstance(error, ShardNotFoundError):  # a listing 404s only for the container
                raise ShardNotFoundError(
                    f"Azure container {parsed.container!r} does not exist", url=url
                ) from exc
            raise error from exc

    def list(self, url: str) -> list[str]:
        """All blob URLs under the prefix ``az://container/prefix`` (every page).

        See :meth:`list_sizes`, which this is without the sizes.
        """
        return [u for u, _ in self.list_sizes(url)]

    def create(self, url: str, *, content_type: str | None = None) -> Any:
        """A writable stream staging blocks of ``url``; ``close()`` commits, ``abort()``
        discards (nothing appears).

        Args:
            url: destination ``az://container/blob``.
            content_type: stored content type (default ``application/x-tar``).

        Raises:
            UploadError: the client cannot be made (credentials, configuration).
        """
        from wds_cloud.openers.azure.write import AzureWriter

        parsed = self._parse(url)
        try:
            service = self._for(parsed).service
        except (ConfigError, MissingDependencyError):
            raise
        except ShardError as exc:
            raise UploadError(exc.reason, url=url) from exc
        blob = service.get_blob_client(parsed.container, parsed.key)
        return AzureWriter(
            blob,
            url=url,
            translate=self.translate_error,
            block_size=int(self.config.block_size or 16 << 20),
            content_type=content_type or "application/x-tar",
        )
