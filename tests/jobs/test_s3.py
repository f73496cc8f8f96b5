"""Jobs against a real S3 server (SeaweedFS): read and write ``s3://`` end to end, on the local
engine and on Ray (the registry with its endpoint and credentials travels to the workers)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from tests.jobs import helpers
from tests.jobs.helpers import multiset, read_samples, write_inputs
from tests.s3.conftest import make_config
from wds_cloud.jobs import convert, reshard
from wds_cloud.listing import resolve_shards
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.openers.s3.opener import S3Opener

pytestmark = [pytest.mark.s3, pytest.mark.slow]


def _registry(endpoint: str) -> OpenerRegistry:
    registry = OpenerRegistry()
    registry.register("s3", S3Opener(make_config(endpoint)), override=True)
    return registry


def _objects(raw_client: Any, bucket: str) -> dict[str, str]:
    listed = raw_client.list_objects_v2(Bucket=bucket).get("Contents", [])
    return {
        o["Key"]: hashlib.sha256(
            raw_client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
        ).hexdigest()
        for o in listed
    }


def test_convert_directory_to_s3_on_ray(ray_session, s3_endpoint, raw_client, bucket, tmp_path):
    src = tmp_path / "files"
    src.mkdir()
    for i in range(17):
        (src / f"{i:03d}.txt").write_text(f"caption {i}")
        (src / f"{i:03d}.bin").write_bytes(bytes([i]) * (50 + i))
    registry = _registry(s3_endpoint)
    out = f"s3://{bucket}/out/f-%03d.tar"
    summary = convert(str(src), out, maxcount=5, engine="ray", registry=registry)
    assert summary.shards == [out % i for i in range(4)] and summary.samples_out == 17
    local = convert(str(src), str(tmp_path / "local" / "f-%03d.tar"), maxcount=5)
    remote = _objects(raw_client, bucket)
    assert {k: v for k, v in remote.items() if k.endswith(".tar")} == {
        f"out/{name}": digest for name, digest in helpers.digests(tmp_path / "local").items()
    }
    assert read_samples(summary.shards, registry) == read_samples(local.shards)
    assert "out/f-N.tar.manifest.json" in remote


def test_reshard_s3_to_s3_resumes_and_clears_leftovers(s3_endpoint, raw_client, bucket, tmp_path):
    registry = _registry(s3_endpoint)
    for url in resolve_shards(write_inputs(tmp_path / "in", 3, 10)):
        name = url.rsplit("/", 1)[1]
        raw_client.put_object(Bucket=bucket, Key=f"in/{name}", Body=open(url, "rb").read())
    inputs = f"s3://{bucket}/in/"
    out = f"s3://{bucket}/out/r-%02d.tar"
    # an upload a killed attempt at shard 1 left behind
    stale = raw_client.create_multipart_upload(Bucket=bucket, Key="out/r-01.tar")["UploadId"]
    first = reshard(inputs, out, maxcount=8, shuffle=True, seed=2, registry=registry)
    uploads = raw_client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert stale not in {u["UploadId"] for u in uploads}
    assert multiset(read_samples(first.shards, registry)) == multiset(
        read_samples(resolve_shards(str(tmp_path / "in" / "in-{000..002}.tar")))
    )
    before = _objects(raw_client, bucket)
    again = reshard(inputs, out, maxcount=8, shuffle=True, seed=2, registry=registry)
    assert again.resumed == len(first.shards) == 4
    assert {k: v for k, v in _objects(raw_client, bucket).items() if k.endswith(".tar")} == {
        k: v for k, v in before.items() if k.endswith(".tar")
    }
