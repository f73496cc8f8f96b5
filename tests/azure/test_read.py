"""Reads, ranges, listing and URLs of ``az://`` on Azurite: what the shared contracts do not
cover (ETag pinning, the URL spellings, the account in the URL, paging)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.azure.conftest import azure_opener
from tests.support.azurite import AzuriteServer
from wds_cloud.errors import ConfigError, ShardNotFoundError, ShardOpenError, ShardReadError
from wds_cloud.listing import list_shards
from wds_cloud.openers.azure.opener import AzureOpener
from wds_cloud.openers.registry import OpenerRegistry

pytestmark = pytest.mark.azure

DATA = os.urandom(2_000_000)


def test_a_blob_rewritten_mid_read_is_an_error_naming_the_url(
    opener: AzureOpener, container: Any
) -> None:
    container.upload_blob("a.tar", DATA)
    url = f"az://{container.container_name}/a.tar"
    stream = opener.open(url)
    first = stream.read(1000)
    assert first == DATA[:1000] and stream.etag
    container.upload_blob("a.tar", os.urandom(len(DATA)), overwrite=True)
    stream._drop()  # the connection drops: the resume must see the new ETag
    with pytest.raises(ShardReadError) as info:
        stream.read()
    assert info.value.url == url and info.value.offset == 1000
    assert "changed or was deleted while being read" in str(info.value) and url in str(info.value)


def test_prefetched_parts_are_pinned_to_the_first_etag(
    azurite: AzuriteServer, container: Any
) -> None:
    container.upload_blob("a.tar", DATA)
    url = f"az://{container.container_name}/a.tar"
    # one part in flight, so later parts are requested after the rewrite
    stream = azure_opener(azurite, prefetch=1, prefetch_chunk=256 << 10).open(url)
    assert stream.read(1000) == DATA[:1000]
    container.upload_blob("a.tar", os.urandom(len(DATA)), overwrite=True)
    with pytest.raises(ShardReadError) as info:
        stream.read()
    assert info.value.url == url and "changed or was deleted while being read" in str(info.value)
    stream.close()


def test_a_blob_deleted_mid_read_is_an_error(opener: AzureOpener, container: Any) -> None:
    container.upload_blob("a.tar", DATA)
    stream = opener.open(f"az://{container.container_name}/a.tar")
    stream.read(10)
    container.delete_blob("a.tar")
    stream._drop()
    with pytest.raises(ShardReadError, match="deleted while being read \\(ETag"):
        stream.read()


def test_ranges_and_tails(opener: AzureOpener, container: Any) -> None:
    container.upload_blob("a.tar", DATA)
    url = f"az://{container.container_name}/a.tar"
    assert opener.read_range(url, 12345, 1000) == DATA[12345:13345]
    assert opener.open_at(url, len(DATA) - 10).read() == DATA[-10:]
    assert opener.open_at(url, len(DATA)).read() == b""
    with pytest.raises(ShardOpenError, match=f"beyond the end.*{len(DATA)} bytes"):
        opener.open_at(url, len(DATA) + 1)
    with pytest.raises(ShardReadError, match=f"has {len(DATA)} bytes"):
        opener.read_range(url, len(DATA) - 5, 10)


def test_an_empty_blob_reads_empty_with_and_without_prefetch(
    azurite: AzuriteServer, container: Any
) -> None:
    container.upload_blob("empty.tar", b"")
    url = f"az://{container.container_name}/empty.tar"
    assert azure_opener(azurite).open(url).read() == b""
    assert azure_opener(azurite, prefetch=2).open(url).read() == b""


def test_missing_blob_and_container_are_named(opener: AzureOpener, container: Any) -> None:
    name = container.container_name
    with pytest.raises(
        ShardNotFoundError, match=f"blob 'x.tar' does not exist in container '{name}'"
    ):
        opener.open(f"az://{name}/x.tar")
    with pytest.raises(ShardNotFoundError, match="container 'no-such-container' does not exist"):
        opener.open("az://no-such-container/x.tar")
    with pytest.raises(ShardNotFoundError, match="container 'no-such-container'"):
        opener.list("az://no-such-container/")


def test_listing_is_paged_with_sizes_and_keeps_the_url_spelling(
    azurite: AzuriteServer, container: Any
) -> None:
    for i in range(7):
        container.upload_blob(f"train/s-{i}.tar", b"x" * (i + 1))
    container.upload_blob("val/v.tar", b"v")
    opener = azure_opener(azurite, page_size=2)  # 4 pages
    name = container.container_name
    assert opener.list_sizes(f"az://{name}/train/") == [
        (f"az://{name}/train/s-{i}.tar", i + 1) for i in range(7)
    ]
    for host in ("dfs", "blob"):
        base = f"abfss://{name}@{azurite.account}.{host}.core.windows.net"
        assert opener.list(f"{base}/val/") == [f"{base}/val/v.tar"]
        assert opener.open(f"{base}/val/v.tar").read() == b"v"


def test_list_shards_and_globs_go_through_the_registry(
    azurite: AzuriteServer, container: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(5):
        container.upload_blob(f"train/s-{i}.tar", b"x")
    container.upload_blob("train/readme.txt", b"x")
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string)
    registry = OpenerRegistry()  # the built-in az:// opener, from the environment
    name = container.container_name
    shards = [f"azure://{name}/train/s-{i}.tar" for i in range(5)]
    assert list_shards(f"azure://{name}/train/*.tar", registry=registry) == shards
    assert registry.open(shards[0]).read() == b"x"


def test_an_account_in_the_url_must_be_the_configured_one(opener: AzureOpener) -> None:
    with pytest.raises(ConfigError, match="names the storage account 'other'"):
        opener.open("abfs://c@other.dfs.core.windows.net/a.tar")


@pytest.mark.parametrize(
    "url",
    ["az:///a.tar", "abfs://c@host.example.com/a.tar", "az://cont/", "az://cont/dir/"],
)
def test_bad_urls_are_config_errors(opener: AzureOpener, url: str) -> None:
    with pytest.raises(ConfigError):
        opener.open(url)
