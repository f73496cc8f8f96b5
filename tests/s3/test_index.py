"""Indexes and random access on S3 (SeaweedFS): build, check, read, loaders, one GET a sample."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import wds_cloud as wds
from tests.s3.conftest import make_config
from tests.support import indexcheck
from tests.support.seaweed import create_bucket
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.openers.s3.opener import S3Config, S3Opener

pytestmark = pytest.mark.s3

BUCKET = "index-tests"


def _registry(config: S3Config) -> OpenerRegistry:
    registry = OpenerRegistry()
    registry.register("s3", S3Opener(config), override=True)
    return registry


@pytest.fixture(scope="module")
def uploaded(raw_client: Any, s3_config: S3Config) -> tuple[list[str], str]:
    """The shared archives in a bucket of their own, indexed through the S3 opener."""
    create_bucket(raw_client, BUCKET)
    urls = []
    for name, blob in indexcheck.indexable_archives(40):
        raw_client.put_object(Bucket=BUCKET, Key=f"train/{name}", Body=blob)
        urls.append(f"s3://{BUCKET}/train/{name}")
    return urls, f"s3://{BUCKET}/train/index.json"


def test_build_check_and_read(uploaded: Any, s3_config: S3Config, raw_client: Any) -> None:
    urls, json_url = uploaded
    indexcheck.assert_build_check_and_read(urls, json_url, _registry(s3_config))
    keys = {o["Key"] for o in raw_client.list_objects_v2(Bucket=BUCKET)["Contents"]}
    assert {u.replace(f"s3://{BUCKET}/", "")[:-4] + ".idx" for u in urls} <= keys
    assert "train/index.json" in keys


@pytest.fixture(scope="module")
def dataset(uploaded: Any, s3_config: S3Config) -> wds.IndexedWebDataset:
    urls, json_url = uploaded
    wds.build_index(urls, json=json_url, registry=_registry(s3_config))
    return wds.IndexedWebDataset(json_url, registry=_registry(s3_config))


def test_one_ranged_get_per_sample(
    dataset: wds.IndexedWebDataset, s3_endpoint: str, faulty_proxy: Callable[..., Any]
) -> None:
    proxy = faulty_proxy(int(s3_endpoint.rsplit(":", 1)[1]))
    ds = wds.IndexedWebDataset(dataset.urls, registry=_registry(make_config(proxy.url)), workers=2)
    indexes = list(range(0, len(ds), 4))
    before = proxy.requests
    indexcheck.assert_one_request_per_sample(ds, lambda: proxy.ranged_requests, indexes)
    assert proxy.requests - before == len(indexes)  # nothing else was asked for


def test_a_dropped_ranged_read_resumes(
    dataset: wds.IndexedWebDataset, s3_endpoint: str, faulty_proxy: Callable[..., Any]
) -> None:
    proxy = faulty_proxy(int(s3_endpoint.rsplit(":", 1)[1]), cut_after=900, first=2, reset=True)
    registry = _registry(make_config(proxy.url, read_timeout=5))
    url = dataset.urls[0]
    want = wds.read_range(url, 512, 20000, registry=_registry(make_config(s3_endpoint)))
    assert wds.read_range(url, 512, 20000, registry=registry) == want
    assert proxy.cuts == 2


@pytest.mark.parametrize("context", ["fork", pytest.param("spawn", marks=pytest.mark.slow)])
def test_dataloader_workers(dataset: wds.IndexedWebDataset, context: str) -> None:
    indexcheck.assert_dataloader(dataset, context)


def test_distributed_sampler(dataset: wds.IndexedWebDataset) -> None:
    indexcheck.assert_distributed_sampler(dataset)


def test_shardwriter_commits_indexes_and_json(s3_config: S3Config, bucket: str) -> None:
    registry = _registry(s3_config)
    with wds.ShardWriter(
        f"s3://{bucket}/w/s-%03d.tar", maxcount=5, registry=registry, index=True
    ) as sink:
        for i in range(12):
            sink.write({"__key__": f"k{i:03d}", "txt": f"{i}" * (i * 50)})
    checks = wds.check_index(f"s3://{bucket}/w/index.json", registry=registry)
    assert [c.status for c in checks] == ["ok"] * 3
    ds = wds.IndexedWebDataset(f"s3://{bucket}/w/index.json", registry=registry)
    assert len(ds) == 12 and ds[11]["txt"] == b"11" * 550


def test_missing_object_and_short_range(
    dataset: wds.IndexedWebDataset, s3_config: S3Config
) -> None:
    registry = _registry(s3_config)
    with pytest.raises(wds.ShardNotFoundError):
        wds.read_range(f"s3://{BUCKET}/train/none.tar", 0, 10, registry=registry)
    with pytest.raises(wds.ShardReadError, match=r"has \d+ bytes; the range ends"):
        wds.read_range(dataset.urls[0], 512, 10**9, registry=registry)
