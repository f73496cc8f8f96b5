"""Differential tests over the GCS opener (see tests/core/test_tar_differential.py).

200 archives from :mod:`tests.support.targen` are uploaded once to the session's
fake-gcs-server and read through ``open_url(url)`` (the real :class:`GcsOpener`,
google-cloud-storage) and ``iter_tar`` with each archive's small buffer; stdlib ``tarfile`` is
the reference. The two original-failure shards are read by ``wds.WebDataset``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import targen
from tests.support.fake_gcs import FakeGcsServer
from tests.support.targen import Archive
from wds_cloud.openers.gcs.opener import GcsOpener
from wds_cloud.openers.registry import OpenerRegistry

pytestmark = pytest.mark.gcs

SEEDS = range(300_000, 300_200)


@pytest.fixture(scope="module")
def registry(fake_gcs: FakeGcsServer) -> OpenerRegistry:
    registry = OpenerRegistry()
    registry.register("gs", GcsOpener(endpoint=fake_gcs.endpoint, backoff=0.01), override=True)
    return registry


@pytest.fixture(scope="module")
def uploaded(gcs_client: Any) -> Iterator[tuple[list[tuple[Archive, str]], list[str]]]:
    """(archive, URL) pairs and the original-failure shard URLs; deleted afterwards."""
    bucket = gcs_client.create_bucket("differential")
    yield targen.upload_all(
        SEEDS,
        lambda key, data: bucket.blob(key).upload_from_string(data),
        "gs://differential/",
    )
    for blob in gcs_client.list_blobs("differential"):
        blob.delete()


def test_gcs_reads_like_tarfile(uploaded: Any, registry: OpenerRegistry) -> None:
    targen.assert_reads_like_tarfile(uploaded[0], registry)


def test_webdataset_over_gcs_reads_the_original_failure(
    uploaded: Any, registry: OpenerRegistry
) -> None:
    targen.assert_pipeline_reads_the_original_failure(uploaded[1], registry)
