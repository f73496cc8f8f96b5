"""ShardWriter and upload_shards against a real S3 server (SeaweedFS) via S3Opener.create."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.seaweed import (
    ACCESS_KEY,
    REGION,
    SECRET_KEY,
    SeaweedServer,
    boto3_client,
    create_bucket,
)
from wds_cloud.core.samples import tar_samples
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.openers.s3.opener import S3Config, S3Opener
from wds_cloud.writing.shardwriter import ShardWriter
from wds_cloud.writing.upload import upload_shards

pytestmark = [pytest.mark.s3, pytest.mark.slow]


@pytest.fixture(scope="module")
def s3(seaweed: SeaweedServer) -> tuple[OpenerRegistry, Any]:
    """(registry with a real s3:// opener, boto3 client) on the session's SeaweedFS server."""
    config = S3Config(
        endpoint_url=seaweed.endpoint_url,
        region=REGION,
        access_key_id=ACCESS_KEY,
        secret_access_key=SECRET_KEY,
        addressing_style="path",
        backoff=0.01,
    )
    registry = OpenerRegistry(builtins=False)
    registry.register("s3", S3Opener(config))
    client = boto3_client(seaweed.endpoint_url)
    create_bucket(client, "wbucket")
    return registry, client


def object_keys(client: Any, prefix: str) -> list[str]:
    listing = client.list_objects_v2(Bucket="wbucket", Prefix=prefix)
    return sorted(item["Key"] for item in listing.get("Contents", ()))


def test_shardwriter_streams_shards_to_s3(s3: tuple[OpenerRegistry, Any]) -> None:
    registry, client = s3
    posted: list[str] = []
    pattern = "s3://wbucket/train/s-%03d.tar"
    with ShardWriter(pattern, maxcount=3, post=posted.append, registry=registry) as writer:
        for i in range(7):
            writer.write({"__key__": f"k{i}", "txt": f"t{i}", "bin": bytes([i]) * 3000})
    assert posted == [pattern % n for n in range(3)]
    assert object_keys(client, "train/") == [f"train/s-00{n}.tar" for n in range(3)]
    got = []
    for url in posted:
        with registry.open(url) as stream:
            got += [(s["__key__"], s["txt"]) for s in tar_samples(stream, url)]
    assert got == [(f"k{i}", f"t{i}".encode()) for i in range(7)]


def test_exception_leaves_no_s3_object(s3: tuple[OpenerRegistry, Any]) -> None:
    registry, client = s3
    with (
        pytest.raises(KeyError),
        ShardWriter("s3://wbucket/crash/s-%d.tar", maxcount=2, registry=registry) as writer,
    ):
        for i in range(3):
            writer.write({"__key__": f"k{i}", "txt": "x"})
        raise KeyError("stop")
    assert object_keys(client, "crash/") == ["crash/s-0.tar"]


def test_upload_shards_to_s3(tmp_path: Path, s3: tuple[OpenerRegistry, Any]) -> None:
    registry, client = s3
    paths = []
    for i in range(4):
        path = tmp_path / f"u-{i}.tar"
        path.write_bytes(bytes([i]) * 10_000)
        paths.append(path)
    urls = upload_shards(paths, "s3://wbucket/up", concurrency=2, progress=False, registry=registry)
    assert urls == [f"s3://wbucket/up/u-{i}.tar" for i in range(4)]
    for path, url in zip(paths, urls, strict=True):
        body = client.get_object(Bucket="wbucket", Key=url.split("wbucket/")[1])["Body"].read()
        assert body == path.read_bytes()
