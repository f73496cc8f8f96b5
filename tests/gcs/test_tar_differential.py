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
from wds_cloud.openers.gcs import GcsOpener
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
    items = []
    for arch in targen.archives(SEEDS):
        bucket.blob(f"{arch.seed}.tar").upload_from_string(arch.blob)
        items.append((arch, f"gs://differential/{arch.seed}.tar"))
    straddle = []
    for i, (data, _) in enumerate(targen.default_straddle_shards()):
        bucket.blob(f"straddle-{i}.tar").upload_from_string(data)
        straddle.append(f"gs://differential/straddle-{i}.tar")
    yield items, straddle
    for blob in gcs_client.list_blobs("differential"):
        blob.delete()


def test_gcs_reads_like_tarfile(uploaded: Any, registry: OpenerRegistry) -> None:
    items, _ = uploaded
    failures = targen.compare(items, targen.url_reader(registry))
    assert not failures, targen.report(failures, len(items))


def test_webdataset_over_gcs_reads_the_original_failure(
    uploaded: Any, registry: OpenerRegistry
) -> None:
    _, urls = uploaded
    expected = [s for _, samples in targen.default_straddle_shards() for s in samples]
    assert targen.pipeline_samples(urls, registry) == expected
