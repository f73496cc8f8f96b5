"""Configuration of the Azure Blob Storage backend: :class:`AzureConfig`, how it is resolved,
and ``az://`` URL parsing.

Order (first match wins), :data:`AZURE_SETTINGS`: explicit argument > ``WDS_CLOUD_AZURE_<FIELD>``
> Azure's own variables (``AZURE_STORAGE_CONNECTION_STRING``, ``AZURE_STORAGE_ACCOUNT_NAME``,
``AZURE_STORAGE_ACCOUNT_KEY``, ``AZURE_STORAGE_SAS_TOKEN``) > default. The environment is read
when :meth:`AzureConfig.resolve` runs (opener construction), never at import.

URLs (``docs/azure.md``): ``az://CONTAINER/BLOB``, ``azure://`` (Mosaic Streaming, LitData) and
``abfs://``/``abfss://`` (fsspec/adlfs) the same; adlfs's ``abfs://CONTAINER@ACCOUNT.dfs.core.windows.net/BLOB``
(or ``.blob.core.windows.net``) names the account in the URL too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self
from urllib.parse import urlsplit

from wds_cloud.errors import ConfigError
from wds_cloud.openers.streams.backoff import DEFAULT_READ_TIMEOUT, retry_fields
from wds_cloud.openers.streams.prefetch import PREFETCH_FIELDS
from wds_cloud.openers.streams.resumable import TranslateError
from wds_cloud.redact import config_repr, redact_url
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
)

#: ``az://`` and the spellings users bring from fsspec/adlfs, Mosaic Streaming and LitData.
SCHEMES = ("az", "azure", "abfs", "abfss")
#: Host suffixes of an account named in the URL (``CONTAINER@ACCOUNT.<suffix>``).
ACCOUNT_HOSTS = (".dfs.core.windows.net", ".blob.core.windows.net")
#: Azure's limit on one staged block (4000 MiB) and on the blocks of one blob.
MAX_BLOCK_SIZE = 4000 << 20
MAX_BLOCKS = 50_000


def _endpoint(text: str, source: str) -> str:
    """An endpoint without a trailing ``/``; ``host:port`` gets ``http://``."""
    endpoint = text.rstrip("/")
    return endpoint if "://" in endpoint or not endpoint.strip() else "http://" + endpoint


#: How each :class:`AzureConfig` field is resolved (``docs/azure.md`` has the table in words).
AZURE_SETTINGS = ConfigTable(
    section="AZURE",
    owner="AzureConfig",
    what="Azure",
    fields=(
        Field("connection_string", TEXT, env=("AZURE_STORAGE_CONNECTION_STRING",), secret=True),
        # AZURE_ACCOUNT_NAME / AZURE_ACCOUNT_ACCESS_KEY: what Mosaic Streaming's azure:// reads
        Field(
            "account_name",
            TEXT,
            env=("AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT", "AZURE_ACCOUNT_NAME"),
        ),
        Field(
            "account_key",
            TEXT,
            env=("AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_KEY", "AZURE_ACCOUNT_ACCESS_KEY"),
            secret=True,
        ),
        Field("sas_token", TEXT, env=("AZURE_STORAGE_SAS_TOKEN",), secret=True),
        Field("endpoint", Kind("an endpoint URL", _endpoint)),
        Field("anonymous", BOOL, False),
        *retry_fields(retries=5, backoff=0.2),
        Field("block_size", BYTES, 16 << 20, checks=(at_least(1),)),
        Field("connect_timeout", SECONDS, 10.0),
        Field("read_timeout", SECONDS, DEFAULT_READ_TIMEOUT),
        Field("page_size", INT, 1000, checks=(at_least(1),)),
        *PREFETCH_FIELDS,
    ),
)


@dataclass(frozen=True)
class AzureConfig:
    """Settings of the Azure backend; ``None`` fields are resolved by :meth:`resolve`.

    Credentials, the first that is set wins: ``connection_string``; ``account_key`` (with
    ``account_name``); ``sas_token``; ``anonymous=True`` (public containers); otherwise
    ``DefaultAzureCredential`` from ``azure-identity`` (installed separately).

    Attributes:
        connection_string: an Azure Storage connection string
            (``AZURE_STORAGE_CONNECTION_STRING``): account, key or SAS, and endpoint.
        account_name: the storage account (``AZURE_STORAGE_ACCOUNT_NAME``,
            ``AZURE_STORAGE_ACCOUNT``, Mosaic Streaming's ``AZURE_ACCOUNT_NAME``); an account
            named in the URL must be this one.
        account_key: the account's shared key (``AZURE_STORAGE_ACCOUNT_KEY``,
            ``AZURE_STORAGE_KEY``, Mosaic Streaming's ``AZURE_ACCOUNT_ACCESS_KEY``).
        sas_token: a shared access signature, with or without the leading ``?``
            (``AZURE_STORAGE_SAS_TOKEN``).
        endpoint: the Blob service endpoint, e.g. Azurite's
            ``http://127.0.0.1:10000/devstoreaccount1`` (``WDS_CLOUD_AZURE_ENDPOINT``); None
            means the connection string's ``BlobEndpoint`` or
            ``https://ACCOUNT.blob.core.windows.net``.
        anonymous: send no credentials (public containers).
        retries: consecutive read attempts without progress allowed (first request and
            resumes), and the SDK's retries per listing, metadata or upload call (default 5).
        backoff: first retry delay in seconds, doubled per attempt (default 0.2).
        block_size: bytes per staged block of the writer (default 16 MiB); the writer holds
            at most one block in memory.
        connect_timeout: seconds to establish a connection (default 10).
        read_timeout: seconds one socket read may wait (default 20; clipped to
            ``stall_timeout`` for blob reads).
        stall_timeout: seconds without a new byte before a read gives up (default 60).
        page_size: blobs per listing page (default 1000; Azure's most is 5000).
        prefetch: parallel ranged GETs in flight per stream; 0 streams one GET.
        prefetch_chunk: bytes per ranged GET.
        max_backoff: (class attribute) the longest retry delay of reads, 5 s.
    """

    max_backoff = 5.0  # a class attribute, not a field: RetryPolicy.from_config reads it

    connection_string: str | None = None
    account_name: str | None = None
    account_key: str | None = None
    sas_token: str | None = None
    endpoint: str | None = None
    anonymous: bool | None = None
    retries: int | None = None
    backoff: float | None = None
    stall_timeout: float | None = None
    block_size: int | None = None
    connect_timeout: float | None = None
    read_timeout: float | None = None
    page_size: int | None = None
    prefetch: int | None = None
    prefetch_chunk: int | None = None

    def __repr__(self) -> str:
        return config_repr(self, secrets=("connection_string", "account_key", "sas_token"))

    def resolve(
        self,
        overrides: Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
    ) -> Self:
        """A copy with ``overrides`` applied, then every ``None`` field filled from the
        environment (``environ``, default ``os.environ``), then the defaults
        (:data:`AZURE_SETTINGS`).

        Raises:
            ConfigError: an unknown override, or an invalid value (argument or environment).
        """
        return AZURE_SETTINGS.resolve(self, overrides, environ=environ)


@dataclass(frozen=True)
class BlobUrl:
    """An ``az://`` URL split into parts.

    Attributes:
        scheme: as written (``az``, ``azure``, ``abfs``, ``abfss``).
        container: the container name.
        key: the blob name (may be empty: a container or a prefix).
        account: the account named in the URL (``CONTAINER@ACCOUNT.dfs.core.windows.net``),
            else None.
        netloc: the URL's authority as written, so listings return URLs in the same form.
    """

    scheme: str
    container: str
    key: str
    account: str | None
    netloc: str

    def child(self, name: str) -> str:
        """The URL of blob ``name`` in the same container, spelled like this URL."""
        return f"{self.scheme}://{self.netloc}/{name}"


def parse_blob_url(url: str) -> BlobUrl:
    """Split ``az://CONTAINER/BLOB`` (or an alias, or ``CONTAINER@ACCOUNT.<host>``).

    Raises:
        ConfigError: another scheme, no container, or an account host that is not Azure's.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise ConfigError(f"URL {redact_url(url)!r} does not use one of the schemes {SCHEMES}")
    netloc = parts.netloc
    container, at, host = netloc.partition("@")
    account = None
    if at:
        lowered = host.lower()
        suffix = next((s for s in ACCOUNT_HOSTS if lowered.endswith(s)), None)
        if suffix is None or len(lowered) == len(suffix):
            raise ConfigError(
                f"URL {redact_url(url)!r}: the part after '@' must be ACCOUNT.dfs.core.windows.net "
                "or ACCOUNT.blob.core.windows.net"
            )
        account = host[: -len(suffix)]
    if not container:
        raise ConfigError(
            f"URL {redact_url(url)!r} has no container name (expected {scheme}://CONTAINER/BLOB)"
        )
    key = parts.path[1:] if parts.path.startswith("/") else parts.path
    return BlobUrl(scheme=scheme, container=container, key=key, account=account, netloc=netloc)


@dataclass(frozen=True)
class AzureAccess:
    """What an Azure reader needs from its opener, passed explicitly.

    Attributes:
        session: the ``requests`` session of blob GETs.
        blob_url: ``blob_url(container, key) -> str``: the blob's HTTP URL, credentials (a
            SAS) included.
        headers: ``headers() -> dict``: the headers of every GET (API version, a bearer token).
        timeout: ``(connect, read)`` seconds of blob GETs (the read clipped to the stall
            deadline).
        container_exists: ``container_exists(container) -> bool``, to say which is missing.
        translate: the opener's error translation (endpoint bound).
    """

    session: Any
    blob_url: Any
    headers: Any
    timeout: tuple[float, float]
    container_exists: Any
    translate: TranslateError
