"""Credentials and settings of ``az://``: connection string, account key, SAS, anonymous and
``DefaultAzureCredential``, resolved by the one config resolver (arguments > ``WDS_CLOUD_AZURE_*``
> Azure's variables), each tried against Azurite."""

from __future__ import annotations

import datetime
import subprocess
import sys
from typing import Any

import pytest

from tests.support.azurite import AzuriteServer
from wds_cloud.errors import ConfigError, MissingDependencyError, ShardOpenError, UploadError
from wds_cloud.openers.azure.auth import resolve_account
from wds_cloud.openers.azure.config import AzureConfig
from wds_cloud.openers.azure.opener import AzureOpener
from wds_cloud.openers.registry import OpenerRegistry

pytestmark = pytest.mark.azure


def _sas(azurite: AzuriteServer, container: str, **permissions: bool) -> str:
    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    return str(
        generate_container_sas(
            azurite.account,
            container,
            account_key=azurite.key,
            permission=ContainerSasPermissions(**permissions),
            expiry=datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1),
        )
    )


def _roundtrip(opener: AzureOpener, container: Any) -> None:
    url = f"az://{container.container_name}/dir/a.tar"
    with opener.create(url) as sink:
        sink.write(b"hello")
    assert opener.open(url).read() == b"hello"
    assert opener.list_sizes(f"az://{container.container_name}/dir/") == [(url, 5)]


def test_connection_string_from_the_environment(
    azurite: AzuriteServer, container: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string)
    opener = AzureOpener()
    assert opener.account("az://c/x").source == "connection string"
    _roundtrip(opener, container)


def test_account_name_and_key_from_the_environment(
    azurite: AzuriteServer, container: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", azurite.account)
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", azurite.key)
    monkeypatch.setenv("WDS_CLOUD_AZURE_ENDPOINT", azurite.endpoint)
    opener = AzureOpener()
    assert opener.account("az://c/x").source == "account key"
    _roundtrip(opener, container)


def test_a_sas_token_reads_lists_and_writes_within_its_permissions(
    azurite: AzuriteServer, container: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    full = _sas(azurite, container.container_name, read=True, write=True, list=True)
    monkeypatch.setenv("AZURE_STORAGE_SAS_TOKEN", "?" + full)  # the leading ? is dropped
    settings = {"account_name": azurite.account, "endpoint": azurite.endpoint, "retries": 0}
    opener = AzureOpener(**settings)
    assert opener.account("az://c/x").source == "SAS token"
    _roundtrip(opener, container)
    read_only = AzureOpener(
        sas_token=_sas(azurite, container.container_name, read=True), **settings
    )
    assert read_only.open(f"az://{container.container_name}/dir/a.tar").read() == b"hello"
    denied = pytest.raises(UploadError, match=r"after 5 bytes.*(denied|403)")
    with denied, read_only.create(f"az://{container.container_name}/b.tar") as sink:
        sink.write(b"12345")
    assert not container.get_blob_client("b.tar").exists()


def test_a_wrong_key_is_an_open_error_naming_the_url(
    azurite: AzuriteServer, container: Any
) -> None:
    container.upload_blob("a.tar", b"x")
    wrong = AzureOpener(
        account_name=azurite.account,
        account_key="d3Jvbmc=" * 11,
        endpoint=azurite.endpoint,
        retries=0,
    )
    url = f"az://{container.container_name}/a.tar"
    with pytest.raises(ShardOpenError, match="access denied by Azure") as info:
        wrong.open(url)
    assert info.value.url == url


def test_anonymous_reads_a_public_container(azurite: AzuriteServer, container: Any) -> None:
    container.set_container_access_policy(signed_identifiers={}, public_access="container")
    container.upload_blob("a.tar", b"public")
    opener = AzureOpener(account_name=azurite.account, endpoint=azurite.endpoint, anonymous=True)
    assert opener.open(f"az://{container.container_name}/a.tar").read() == b"public"


def test_the_arguments_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "fromenv")
    monkeypatch.setenv("WDS_CLOUD_AZURE_ACCOUNT_NAME", "fromours")
    monkeypatch.setenv("WDS_CLOUD_AZURE_PAGE_SIZE", "7")
    config = AzureConfig(account_key="a2V5").resolve()
    assert (config.account_name, config.page_size) == ("fromours", 7)
    config = AzureConfig(account_name="arg", account_key="a2V5").resolve()
    assert config.account_name == "arg"
    account = resolve_account(config)
    assert account.endpoint == "https://arg.blob.core.windows.net" and account.key == "a2V5"


def test_the_connection_string_gives_account_and_endpoint() -> None:
    text = "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5;EndpointSuffix=core.chinacloudapi.cn"
    account = resolve_account(AzureConfig(connection_string=text).resolve(environ={}))
    assert (account.name, account.endpoint) == ("acct", "https://acct.blob.core.chinacloudapi.cn")
    with pytest.raises(ConfigError, match="part 2 has no '='") as info:
        resolve_account(
            AzureConfig(connection_string="AccountName=a;AccountKeyXYZ").resolve(environ={})
        )
    assert "XYZ" not in str(info.value)
    with pytest.raises(ConfigError, match="neither AccountKey nor SharedAccessSignature"):
        resolve_account(AzureConfig(connection_string="AccountName=a").resolve(environ={}))


def test_no_account_at_all_says_what_to_set() -> None:
    with pytest.raises(ConfigError, match="AZURE_STORAGE_ACCOUNT_NAME"):
        resolve_account(AzureConfig(sas_token="sv=1&sig=x").resolve(environ={}))


def test_without_azure_identity_the_default_credential_error_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "azure.identity", None)  # as if it were not installed
    config = AzureConfig(account_name="acct").resolve(environ={})
    with pytest.raises(MissingDependencyError, match="pip install azure-identity"):
        resolve_account(config)


def test_default_credential_is_used_when_nothing_else_is_set() -> None:
    account = resolve_account(AzureConfig(account_name="acct").resolve(environ={}))
    assert account.source == "DefaultAzureCredential" and account.token is not None


def test_without_the_sdk_the_error_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['azure.storage.blob'] = None\n"
        "from wds_cloud.openers.registry import OpenerRegistry\n"
        "from wds_cloud.errors import MissingDependencyError\n"
        "try:\n"
        "    OpenerRegistry().open('az://c/a.tar')\n"
        "except MissingDependencyError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'wds_cloud[azure]'" in out.stdout


def test_repr_masks_every_credential() -> None:
    config = AzureConfig(
        connection_string="AccountKey=CSKEY", account_key="ACCKEY", sas_token="sig=SASSIG"
    )
    shown = repr(config) + repr(AzureOpener(config))
    for secret in ("CSKEY", "ACCKEY", "SASSIG"):
        assert secret not in shown


def test_mosaic_streamings_variables_and_url(
    azurite: AzuriteServer, container: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mosaic Streaming reads ``azure://CONTAINER/BLOB`` with ``AZURE_ACCOUNT_NAME`` and
    ``AZURE_ACCOUNT_ACCESS_KEY``; the same environment works here."""
    monkeypatch.setenv("AZURE_ACCOUNT_NAME", azurite.account)
    monkeypatch.setenv("AZURE_ACCOUNT_ACCESS_KEY", azurite.key)
    monkeypatch.setenv("WDS_CLOUD_AZURE_ENDPOINT", azurite.endpoint)  # Azurite, not Azure
    container.upload_blob("m.tar", b"mosaic")
    assert OpenerRegistry().open(f"azure://{container.container_name}/m.tar").read() == b"mosaic"
