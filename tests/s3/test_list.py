"""Listing s3:// prefixes (all pages) and shard specs through wds_cloud.listing."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.s3.conftest import make_config
from wds_cloud.errors import ShardNotFoundError
from wds_cloud.listing import list_shards
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.openers.s3 import S3Opener

pytestmark = pytest.mark.s3


@pytest.fixture
def populated(raw_client: Any, bucket: str) -> list[str]:
    keys = [f"train/shard-{i:06d}.tar" for i in range(230)]
    keys += ["train/sub/deep-000.tar", "val/shard-000000.tar", "trainmore/x.tar", "top.tar"]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: raw_client.put_object(Bucket=bucket, Key=k, Body=b"x"), keys))
    return sorted(keys)


def test_list_reads_every_page(opener: S3Opener, bucket: str, populated: list[str]) -> None:
    urls = opener.list(f"s3://{bucket}/train/", page_size=40)  # 6 pages
    expected = [f"s3://{bucket}/{k}" for k in populated if k.startswith("train/")]
    assert len(expected) == 231
    assert urls == expected


def test_list_page_size_from_config(s3_endpoint: str, bucket: str, populated: list[str]) -> None:
    opener = S3Opener(make_config(s3_endpoint, list_page_size=25))
    assert opener.list(f"s3://{bucket}") == [f"s3://{bucket}/{k}" for k in populated]
    assert opener.list(f"s3://{bucket}/") == [f"s3://{bucket}/{k}" for k in populated]


def test_list_plain_prefix_and_empty(opener: S3Opener, bucket: str, populated: list[str]) -> None:
    assert opener.list(f"s3://{bucket}/train") == [
        f"s3://{bucket}/{k}" for k in populated if k.startswith("train")
    ]
    assert opener.list(f"s3://{bucket}/nothing-here/") == []


def test_list_missing_bucket(opener: S3Opener) -> None:
    with pytest.raises(ShardNotFoundError, match="bucket does not exist"):
        opener.list("s3://no-such-bucket-for-listing/")


def test_list_shards_uses_the_s3_opener(
    opener: S3Opener, bucket: str, populated: list[str]
) -> None:
    registry = OpenerRegistry()
    registry.register("s3", opener, override=True)
    found = list_shards(f"s3://{bucket}/val/", registry=registry)
    assert found == [f"s3://{bucket}/val/shard-000000.tar"]
    globbed = list_shards(f"s3://{bucket}/train/shard-00000*.tar", registry=registry)
    assert globbed == [f"s3://{bucket}/train/shard-{i:06d}.tar" for i in range(10)]
