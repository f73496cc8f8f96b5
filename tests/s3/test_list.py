"""Listing s3:// prefixes (all pages) and shard specs through wds_cloud.listing."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.s3.conftest import make_config
from wds_cloud.errors import ShardNotFoundError
from wds_cloud.listing import list_shards
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.openers.s3.opener import S3Opener

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


def test_list_sizes_of_a_glob_and_a_prefix(opener: S3Opener, raw_client: Any, bucket: str) -> None:
    """``listing.list_sizes``: what ``list_pattern(extensions=None)`` lists, with the sizes the
    listing carried (compared with each object's HEAD); a query or a local path gives None."""
    import random

    from wds_cloud.listing import list_pattern, list_sizes

    rng = random.Random(5)
    stored = {f"raw/{d}/k{i:03d}.{e}": rng.choice((0, 1, 511, 512, rng.randint(0, 70000)))
              for i in range(60) for d in ("a", "b") for e in ("jpg", "json")}  # fmt: skip
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda kv: raw_client.put_object(Bucket=bucket, Key=kv[0],
                                                       Body=b"z" * kv[1]), stored.items()))  # fmt: skip
    registry = OpenerRegistry()
    registry.register(
        "s3", S3Opener(make_config(opener.config.endpoint_url, list_page_size=7)), override=True
    )
    for pattern in (f"s3://{bucket}/raw/", f"s3://{bucket}/raw/*/k01*.json"):
        got = list_sizes(pattern, registry=registry)
        assert [u for u, _ in got] == list_pattern(pattern, registry=registry, extensions=None)
        for url, size in got:
            key = url.split("/", 3)[3]
            head = raw_client.head_object(Bucket=bucket, Key=key)["ContentLength"]
            assert size == stored[key] == head, url
    assert len(list_sizes(f"s3://{bucket}/raw/", registry=registry)) == len(stored)
    queried = list_sizes(f"s3://{bucket}/raw/a/?x=1", registry=registry)
    assert len(queried) == 120 and {s for _, s in queried} == {None}
    with pytest.raises(ShardNotFoundError, match="no shards match"):
        list_sizes(f"s3://{bucket}/raw/*.png", registry=registry)
