"""Differential tests over the S3 opener (see tests/core/test_tar_differential.py).

200 archives from :mod:`tests.support.targen` are uploaded once to the session's SeaweedFS
server and read through ``open_url(url)`` (the real :class:`S3Opener`, boto3) and ``iter_tar``
with each archive's small buffer; stdlib ``tarfile`` is the reference. The two original-failure
shards (a member over 4 MiB, then 4 MiB of small members) are read by ``wds.WebDataset``.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest

from tests.support import targen
from tests.support.targen import Archive
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.openers.s3 import S3Config, S3Opener

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
    for attempt in itertools.count():  # the filer may still be starting (as in conftest)
        try:
            raw_client.create_bucket(Bucket=bucket)
            break
        except Exception:
            if attempt == 99:
                raise
            time.sleep(0.1)
    items = []
    for arch in targen.archives(SEEDS):
        raw_client.put_object(Bucket=bucket, Key=f"{arch.seed}.tar", Body=arch.blob)
        items.append((arch, f"s3://{bucket}/{arch.seed}.tar"))
    straddle = []
    for i, (data, _) in enumerate(targen.default_straddle_shards()):
        raw_client.put_object(Bucket=bucket, Key=f"straddle-{i}.tar", Body=data)
        straddle.append(f"s3://{bucket}/straddle-{i}.tar")
    return items, straddle


def test_s3_reads_like_tarfile(uploaded: Any, registry: OpenerRegistry) -> None:
    items, _ = uploaded
    failures = targen.compare(items, targen.url_reader(registry))
    assert not failures, targen.report(failures, len(items))


def test_webdataset_over_s3_reads_the_original_failure(
    uploaded: Any, registry: OpenerRegistry
) -> None:
    _, urls = uploaded
    expected = [s for _, samples in targen.default_straddle_shards() for s in samples]
    assert targen.pipeline_samples(urls, registry) == expected
