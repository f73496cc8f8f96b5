"""S3Opener.open_at against SeaweedFS: bytes from an offset (the same cases as the HTTP, GCS and
AIStore openers), offsets at and past the end, a negative offset."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.openers.open_at_cases import check_ends, check_open_at
from wds_cloud.openers.s3.opener import S3Opener

pytestmark = [pytest.mark.s3]


@pytest.mark.parametrize("size", [1, 513, 10_240, 250_001, 1_300_000])
def test_open_at_equals_the_bytes_from_the_offset(
    opener: S3Opener, raw_client: Any, bucket: str, size: int
) -> None:
    data = random.Random(size).randbytes(size)
    raw_client.put_object(Bucket=bucket, Key=f"obj-{size}.bin", Body=data)
    url = f"s3://{bucket}/obj-{size}.bin"
    assert len(check_open_at(opener, url, data, seed=size)) == 40


@pytest.mark.parametrize("size", [1, 512, 70_000])
def test_open_at_the_end_and_past_it(
    opener: S3Opener, raw_client: Any, bucket: str, size: int
) -> None:
    raw_client.put_object(Bucket=bucket, Key="end.bin", Body=bytes(size))
    check_ends(opener, f"s3://{bucket}/end.bin", size)
