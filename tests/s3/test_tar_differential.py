"""Differential tests over the S3 opener (see tests/core/test_tar_differential.py).

200 archives from :mod:`tests.support.targen` are uploaded once to the session's SeaweedFS
server and read through ``open_url(url)`` (the real :class:`S3Opener`, boto3) and ``iter_tar``
with each archive's small buffer; stdlib ``tarfile`` is the reference. The two original-failure
shards (a member over 4 MiB, then 4 MiB of small members) are read by ``wds.WebDataset``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import targen
from tests.support.seaweed import create_bucket
from tests.support.targen import Archive
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.openers.s3.opener import S3Config, S3Opener

pytestmark = pytest.mark.s3

SEEDS = range(200_000, 200_200)


@pytest.fixture(scope="module")
def registry(s3_config: S3Config) -> OpenerRegistry:
    registry = OpenerRegistry()
    registry.register("s3", S3Opener(s3_config), override=True)
    return registry


@pytest.fixture(scope="module")
def uploaded(raw_client: Any) -> tuple[list[tuple[Archive, str]], list[str]]:
    """(archive, URL) pairs and the original-failure shard URLs, in a bucket of their own."""
    bucket = "differential"
    create_bucket(raw_client, bucket)
    return targen.upload_all(
        SEEDS,
        lambda key, data: raw_client.put_object(Bucket=bucket, Key=key, Body=data),
        f"s3://{bucket}/",
    )


def test_s3_reads_like_tarfile(uploaded: Any, registry: OpenerRegistry) -> None:
    targen.assert_reads_like_tarfile(uploaded[0], registry)


def test_webdataset_over_s3_reads_the_original_failure(
    uploaded: Any, registry: OpenerRegistry
) -> None:
    targen.assert_pipeline_reads_the_original_failure(uploaded[1], registry)
