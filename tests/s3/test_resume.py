"""Resuming mid-epoch over s3:// shards: exactly once, shard tails read from their offset."""

from __future__ import annotations

from typing import Any

import pytest

from tests.resume.helpers import assert_exactly_once, counting, run_interrupted, shard_bytes
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.openers.s3.opener import S3Opener

pytestmark = [pytest.mark.s3]


def test_resume_over_s3_exactly_once(s3_config: Any, raw_client: Any, bucket: str) -> None:
    import wds_cloud as wds

    urls, keys = [], []
    for i in range(5):
        data, k = shard_bytes(i, 30, payload=2000)
        raw_client.put_object(Bucket=bucket, Key=f"r/shard-{i}.tar", Body=data)
        urls.append(f"s3://{bucket}/r/shard-{i}.tar")
        keys.extend(k)
    opener = counting(S3Opener)(s3_config)
    opener.starts = []
    registry = OpenerRegistry()
    registry.register("s3", opener, override=True)

    def make() -> Any:
        return (
            wds.WebDataset(urls, shardshuffle=True, seed=4, registry=registry)
            .shuffle(15)
            .to_tuple("txt", "cls")
        )

    delivered, states = run_interrupted(make, [20, 40, 33])
    assert_exactly_once(delivered, keys)
    # each resume reads the shard being read at the checkpoint from an offset, not from 0
    assert sum(1 for s in opener.starts if s > 0) >= 3
    assert all(len(s["open"]) <= 3 for s in states)


@pytest.mark.slow
def test_sigkill_three_times_s3(
    s3_endpoint: str, raw_client: Any, bucket: str, tmp_path: Any
) -> None:
    """The SIGKILL training loop of tests/resume over s3:// shards."""
    from tests.resume.helpers import assert_exactly_once
    from tests.resume.sigkill import run_killed
    from tests.s3.conftest import ACCESS_KEY, REGION, SECRET_KEY

    urls, keys = [], []
    for i in range(8):
        data, k = shard_bytes(i, 30, payload=1000)
        raw_client.put_object(Bucket=bucket, Key=f"k/shard-{i}.tar", Body=data)
        urls.append(f"s3://{bucket}/k/shard-{i}.tar")
        keys.extend(k)
    env = {
        "WDS_CLOUD_S3_ENDPOINT_URL": s3_endpoint,
        "WDS_CLOUD_S3_REGION": REGION,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
    }
    delivered = run_killed(urls, tmp_path, [9, 5, 7], env)
    assert_exactly_once(delivered, keys)
