"""Indexes and random access on GCS (fake-gcs-server): build, check, read, loaders, one GET a
sample."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import wds_cloud as wds
from tests.support import indexcheck
from tests.support.fake_gcs import FakeGcsServer
from wds_cloud.openers.gcs.opener import GcsOpener
from wds_cloud.openers.registry import OpenerRegistry

pytestmark = pytest.mark.gcs

BUCKET = "index-tests"


def _registry(endpoint: str) -> OpenerRegistry:
    registry = OpenerRegistry()
    registry.register("gs", GcsOpener(endpoint=endpoint, backoff=0.01), override=True)
    return registry


@pytest.fixture(scope="module")
def registry(fake_gcs: FakeGcsServer) -> OpenerRegistry:
    return _registry(fake_gcs.endpoint)


@pytest.fixture(scope="module")
def uploaded(gcs_client: Any) -> Iterator[tuple[list[str], str]]:
    bucket = gcs_client.create_bucket(BUCKET)
    urls = []
    for name, blob in indexcheck.indexable_archives(40):
        bucket.blob(f"train/{name}").upload_from_string(blob)
        urls.append(f"gs://{BUCKET}/train/{name}")
    yield urls, f"gs://{BUCKET}/train/index.json"
    for blob in gcs_client.list_blobs(BUCKET):
        blob.delete()


def test_build_check_and_read(uploaded: Any, registry: OpenerRegistry, gcs_client: Any) -> None:
    urls, json_url = uploaded
    indexcheck.assert_build_check_and_read(urls, json_url, registry)
    names = {b.name for b in gcs_client.list_blobs(BUCKET)}
    assert {u.replace(f"gs://{BUCKET}/", "")[:-4] + ".idx" for u in urls} <= names
    assert "train/index.json" in names


@pytest.fixture(scope="module")
def dataset(uploaded: Any, registry: OpenerRegistry) -> wds.IndexedWebDataset:
    urls, json_url = uploaded
    wds.build_index(urls, json=json_url, registry=registry)
    return wds.IndexedWebDataset(json_url, registry=registry)


def test_one_ranged_get_per_sample(
    dataset: wds.IndexedWebDataset, fake_gcs: FakeGcsServer, faulty_proxy: Callable[..., Any]
) -> None:
    proxy = faulty_proxy(int(fake_gcs.endpoint.rsplit(":", 1)[1]))
    ds = wds.IndexedWebDataset(dataset.urls, registry=_registry(proxy.url), workers=2)
    indexes = list(range(0, len(ds), 4))
    before = proxy.requests
    indexcheck.assert_one_request_per_sample(ds, lambda: proxy.ranged_requests, indexes)
    assert proxy.requests - before == len(indexes)


@pytest.mark.parametrize("context", ["fork", pytest.param("spawn", marks=pytest.mark.slow)])
def test_dataloader_workers(dataset: wds.IndexedWebDataset, context: str) -> None:
    indexcheck.assert_dataloader(dataset, context)


def test_distributed_sampler(dataset: wds.IndexedWebDataset) -> None:
    indexcheck.assert_distributed_sampler(dataset)


def test_shardwriter_commits_indexes_and_json(registry: OpenerRegistry, bucket: Any) -> None:
    with wds.ShardWriter(
        f"gs://{bucket.name}/w/s-%03d.tar", maxcount=5, registry=registry, index=True
    ) as sink:
        for i in range(12):
            sink.write({"__key__": f"k{i:03d}", "txt": f"{i}" * (i * 50)})
    checks = wds.check_index(f"gs://{bucket.name}/w/index.json", registry=registry)
    assert [c.status for c in checks] == ["ok"] * 3
    ds = wds.IndexedWebDataset(f"gs://{bucket.name}/w/index.json", registry=registry)
    assert len(ds) == 12 and ds[11]["txt"] == b"11" * 550


def test_missing_object_and_short_range(
    dataset: wds.IndexedWebDataset, registry: OpenerRegistry
) -> None:
    with pytest.raises(wds.ShardNotFoundError):
        wds.read_range(f"gs://{BUCKET}/train/none.tar", 0, 10, registry=registry)
    with pytest.raises(wds.ShardReadError, match=r"has \d+ bytes; the range ends"):
        wds.read_range(dataset.urls[0], 512, 10**9, registry=registry)
