"""The listing contract for every opener with ``list``: local paths, ``file://`` URLs, s3://
(SeaweedFS), gs:// (fake-gcs-server), az:// (Azurite), ais:// (the AIStore emulator) and hf://
(the local Hub). ``http(s)://`` and ``pipe:`` have no ``list``."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.contract.listing_contract import ListingCase, ListingContract
from tests.support.seaweed import ACCESS_KEY, REGION, SECRET_KEY, boto3_client, create_bucket
from wds_cloud.openers.local import LocalOpener, path_to_url

_buckets = itertools.count()


def _put_file(root: Path) -> Any:
    def put(name: str, data: bytes) -> None:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    return put


class TestLocalPathListing(ListingContract):
    @pytest.fixture
    def listing_case(self, tmp_path: Path) -> ListingCase:
        return ListingCase(LocalOpener(), _put_file(tmp_path), lambda name: f"{tmp_path}/{name}")


class TestFileUrlListing(ListingContract):
    @pytest.fixture
    def listing_case(self, tmp_path: Path) -> ListingCase:
        base = path_to_url(str(tmp_path))
        return ListingCase(LocalOpener(), _put_file(tmp_path), lambda name: f"{base}/{name}")


@pytest.mark.s3
class TestS3Listing(ListingContract):
    @pytest.fixture
    def listing_case(self, seaweed: Any) -> ListingCase:
        from wds_cloud.openers.s3.opener import S3Config, S3Opener

        client = boto3_client(seaweed.endpoint_url)
        bucket = create_bucket(client, f"listing-{next(_buckets)}")
        config = S3Config(
            endpoint_url=seaweed.endpoint_url,
            region=REGION,
            access_key_id=ACCESS_KEY,
            secret_access_key=SECRET_KEY,
            # a small page size, so listing "p/" takes several pages
            list_page_size=2,
        )
        return ListingCase(
            S3Opener(config),
            lambda name, data: client.put_object(Bucket=bucket, Key=name, Body=data),
            lambda name: f"s3://{bucket}/{name}",
        )


@pytest.mark.gcs
class TestGcsListing(ListingContract):
    @pytest.fixture
    def listing_case(self, fake_gcs: Any) -> ListingCase:
        from wds_cloud.openers.gcs.opener import GcsOpener

        bucket = fake_gcs.client().create_bucket(f"listing-{next(_buckets)}")
        return ListingCase(
            GcsOpener(endpoint=fake_gcs.endpoint, backoff=0.01, page_size=2),
            lambda name, data: bucket.blob(name).upload_from_string(data),
            lambda name: f"gs://{bucket.name}/{name}",
        )


@pytest.mark.azure
class TestAzureListing(ListingContract):
    @pytest.fixture
    def listing_case(self, azurite: Any) -> ListingCase:
        from wds_cloud.openers.azure.opener import AzureOpener

        container = azurite.container(f"listing-{next(_buckets)}")
        opener = AzureOpener(connection_string=azurite.connection_string, backoff=0.01, page_size=2)
        return ListingCase(
            opener,
            lambda name, data: container.upload_blob(name, data, overwrite=True),
            lambda name: f"az://{container.container_name}/{name}",
        )


@pytest.mark.ais
class TestAisListing(ListingContract):
    @pytest.fixture
    def listing_case(self, ais_emulator: Any) -> ListingCase:
        from wds_cloud.openers.ais.opener import AisOpener

        ais_emulator.store.create_bucket("listing")
        return ListingCase(
            AisOpener(endpoint=ais_emulator.url, retries=2, backoff=0.0, page_size=2),
            lambda name, data: ais_emulator.store.put_object("listing", name, data),
            lambda name: f"ais://listing/{name}",
        )


class TestHfListing(ListingContract):
    """The local Hub (tests/support/hub_server.py): tree pages of 2 entries, small files served
    by the Hub and large ones by its CDN."""

    @pytest.fixture
    def listing_case(self, tmp_path: Path) -> Iterator[ListingCase]:
        from tests.support.hub_server import HubServer
        from wds_cloud.openers.hf.opener import HfOpener

        with HubServer(tmp_path / "hub", page_size=2, lfs_threshold=50) as hub:

            def put(name: str, data: bytes) -> None:
                hub.add("datasets/org/listing", name, data)

            yield ListingCase(
                HfOpener(endpoint=hub.endpoint, token=""),
                put,
                lambda name: f"hf://datasets/org/listing/{name}",
            )
