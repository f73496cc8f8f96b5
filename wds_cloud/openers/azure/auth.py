"""Which account, endpoint and credential an ``az://`` URL is read and written with.

:func:`resolve_account` turns a resolved :class:`AzureConfig` (and the account a URL may name)
into an :class:`Account`: the Blob endpoint and one credential, the first that is set of the
connection string, the account key, the SAS token, ``anonymous``, else
``DefaultAzureCredential`` (``azure-identity``, a separate install). Listing, metadata and
uploads use the SDK client made from it (:func:`service_client`); blob GETs carry the same
credential themselves (:meth:`Account.sign`): a short-lived read-only SAS generated from the
account key, the given SAS, or a bearer token.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from wds_cloud.errors import ConfigError, MissingDependencyError
from wds_cloud.openers.azure.config import AzureConfig

#: The Blob service REST version sent with every GET (a bearer token needs one).
API_VERSION = "2023-11-03"
#: The scope of a storage bearer token.
TOKEN_SCOPE = "https://storage.azure.com/.default"
#: How long a read SAS generated from the account key stays valid (one GET uses it once).
_SAS_LIFETIME = datetime.timedelta(hours=1)


def parse_connection_string(text: str) -> dict[str, str]:
    """The ``Key=Value;`` pairs of a connection string, keys lower-cased.

    Raises:
        ConfigError: a part without ``=`` (the text itself is never shown: it holds a key).
    """
    pairs: dict[str, str] = {}
    for number, part in enumerate(p for p in text.strip().split(";") if p.strip()):
        name, eq, value = part.partition("=")
        if not eq:
            raise ConfigError(
                f"the Azure connection string's part {number + 1} has no '=' "
                "(expected Key=Value;Key=Value...)"
            )
        pairs[name.strip().lower()] = value.strip()
    return pairs


@dataclass(frozen=True)
class Account:
    """One storage account's endpoint and credential.

    Attributes:
        name: the account name (None when only an endpoint is known).
        endpoint: the Blob service endpoint, without a trailing ``/``.
        key: the shared key, when that is the credential.
        sas: a SAS token without the leading ``?``, when that is the credential.
        token: a ``TokenCredential`` (``DefaultAzureCredential``), when that is the credential.
        source: the credential in words, for messages (never its value).
    """

    name: str | None
    endpoint: str
    key: str | None = field(default=None, repr=False)
    sas: str | None = field(default=None, repr=False)
    token: Any = field(default=None, repr=False)
    source: str = "anonymous"

    def blob_url(self, container: str, key: str, *, sign: bool = True) -> str:
        """The HTTP URL of ``container/key``, with a read SAS when the credential is a key
        or a SAS (``sign=False``: without)."""
        url = f"{self.endpoint}/{quote(container, safe='')}/{quote(key, safe='/~')}"
        if not sign:
            return url
        if self.key is not None:
            return f"{url}?{self._read_sas(container, key)}"
        if self.sas is not None:
            return f"{url}?{self.sas}"
        return url

    def headers(self) -> dict[str, str]:
        """The headers of a blob GET: the API version, and a bearer token when the
        credential is a token credential (refreshed by it as needed)."""
        headers = {"x-ms-version": API_VERSION}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token.get_token(TOKEN_SCOPE).token}"
        return headers

    def _read_sas(self, container: str, key: str) -> str:
        from azure.storage.blob import BlobSasPermissions, generate_blob_sas

        return str(
            generate_blob_sas(
                account_name=str(self.name),
                container_name=container,
                blob_name=key,
                account_key=self.key,
                permission=BlobSasPermissions(read=True),
                expiry=datetime.datetime.now(datetime.UTC) + _SAS_LIFETIME,
            )
        )

    def sdk_credential(self) -> Any:
        """The credential argument of the SDK's clients."""
        if self.key is not None:
            from azure.core.credentials import AzureNamedKeyCredential

            return AzureNamedKeyCredential(str(self.name), self.key)
        if self.sas is not None:
            from azure.core.credentials import AzureSasCredential

            return AzureSasCredential(self.sas)
        return self.token


def resolve_account(config: AzureConfig, url_account: str | None = None) -> Account:
    """The account, endpoint and credential for a URL under ``config``.

    Args:
        config: a resolved :class:`AzureConfig`.
        url_account: the account the URL names (``CONTAINER@ACCOUNT.dfs.core.windows.net``).

    Raises:
        ConfigError: no account can be found, or the URL names another account than the
            configuration's.
        MissingDependencyError: no key, SAS or connection string, not anonymous, and
            ``azure-identity`` (``DefaultAzureCredential``) is not installed.
    """
    pairs = parse_connection_string(config.connection_string or "")
    name = config.account_name or pairs.get("accountname") or url_account
    if url_account is not None and name is not None and url_account != name:
        raise ConfigError(
            f"the URL names the storage account {url_account!r} but the configuration's "
            f"account is {name!r} (AzureConfig.account_name, AZURE_STORAGE_ACCOUNT_NAME or the "
            "connection string)"
        )
    endpoint = config.endpoint or pairs.get("blobendpoint", "").rstrip("/")
    if not endpoint:
        if name is None:
            raise ConfigError(
                "no Azure storage account: set AZURE_STORAGE_ACCOUNT_NAME (or "
                "AzureConfig.account_name), AZURE_STORAGE_CONNECTION_STRING, or name it in the "
                "URL as az://CONTAINER@ACCOUNT.blob.core.windows.net/BLOB"
            )
        protocol = pairs.get("defaultendpointsprotocol", "https")
        suffix = pairs.get("endpointsuffix", "core.windows.net")
        endpoint = f"{protocol}://{name}.blob.{suffix}"
    if config.connection_string:
        key, sas = pairs.get("accountkey"), pairs.get("sharedaccesssignature")
        if key is None and sas is None:
            raise ConfigError(
                "the Azure connection string has neither AccountKey nor SharedAccessSignature"
            )
        source = "connection string"
    else:
        key, sas = config.account_key, config.sas_token
        source = "account key" if key is not None else "SAS token"
    if key is not None:
        if name is None:
            raise ConfigError("an Azure account key needs the account name (account_name)")
        return Account(name, endpoint, key=key, source=source)
    if sas is not None:
        return Account(name, endpoint, sas=sas.lstrip("?"), source=source)
    if config.anonymous:
        return Account(name, endpoint)
    return Account(name, endpoint, token=default_credential(), source="DefaultAzureCredential")


def default_credential() -> Any:
    """``azure.identity.DefaultAzureCredential()``.

    Raises:
        MissingDependencyError: ``azure-identity`` is not installed.
    """
    try:
        from azure.identity import DefaultAzureCredential
    except ImportError as exc:
        raise MissingDependencyError(
            "no Azure account key, SAS token or connection string is configured, and "
            "DefaultAzureCredential needs azure-identity (pip install azure-identity); or set "
            "AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_ACCOUNT_KEY or "
            "AZURE_STORAGE_SAS_TOKEN, or WDS_CLOUD_AZURE_ANONYMOUS=1 for a public container",
            extra="azure",
        ) from exc
    return DefaultAzureCredential()


def service_client(account: Account, config: AzureConfig) -> Any:
    """An ``azure.storage.blob.BlobServiceClient`` for ``account`` with the config's
    retries and timeouts (listing, metadata, uploads)."""
    from azure.storage.blob import BlobServiceClient

    return BlobServiceClient(
        account_url=account.endpoint,
        credential=account.sdk_credential(),
        retry_total=int(config.retries or 0),
        retry_backoff_factor=float(config.backoff or 0.0),
        retry_backoff_max=int(config.max_backoff),
        connection_timeout=float(config.connect_timeout or 10),
        read_timeout=float(config.read_timeout or 20),
    )
