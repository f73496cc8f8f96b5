"""Differential tests over the Azure opener (see tests/core/test_tar_differential.py).

200 archives from :mod:`tests.support.targen` are uploaded once to the session's Azurite and
read through ``open_url(url)`` (the real :class:`AzureOpener`) and ``iter_tar`` with each
archive's small buffer; stdlib ``tarfile`` is the reference. The two original-failure shards
are read by ``wds.WebDataset``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.azure.conftest import azure_opener
from tests.support import targen
from tests.support.azurite import AzuriteServer
from wds_cloud.openers.registry import OpenerRegistry

pytestmark = pytest.mark.azure

SEEDS = range(400_000, 400_200)


@pytest.fixture(scope="module")
def registry(azurite: AzuriteServer) -> OpenerRegistry:
    registry = OpenerRegistry()
    registry.register("az", azure_opener(azurite), override=True)
    return registry


@pytest.fixture(scope="module")
def uploaded(azurite: AzuriteServer) -> Iterator[Any]:
    """(archive, URL) pairs and the original-failure shard URLs; deleted afterwards."""
    container = azurite.container("differential")
    yield targen.upload_all(
        SEEDS,
        lambda key, data: container.upload_blob(key, data, overwrite=True),
        "az://differential/",
    )
    container.delete_container()


def test_azure_reads_like_tarfile(uploaded: Any, registry: OpenerRegistry) -> None:
    targen.assert_reads_like_tarfile(uploaded[0], registry)


def test_webdataset_over_azure_reads_the_original_failure(
    uploaded: Any, registry: OpenerRegistry
) -> None:
    targen.assert_pipeline_reads_the_original_failure(uploaded[1], registry)
