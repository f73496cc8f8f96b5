"""A GcsOpener travels into DataLoader workers started with spawn."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.gcs.shards import upload_shards
from wds_cloud.openers.gcs.opener import GcsOpener

pytestmark = [pytest.mark.gcs, pytest.mark.slow]


def test_two_spawned_workers_read_every_sample_once(fake_gcs: Any, bucket: Any) -> None:
    import torch.utils.data as torch_data

    from tests.gcs.loader_ds import GcsShards

    shards = upload_shards(bucket, count=6, samples=20, payload=3000)
    opener = GcsOpener(endpoint=fake_gcs.endpoint)
    with opener.open(next(iter(shards))) as stream:  # the parent has a live client now
        stream.read(10)
    loader = torch_data.DataLoader(
        GcsShards(opener, list(shards)),
        num_workers=2,
        batch_size=None,
        multiprocessing_context="spawn",
    )
    rows = list(loader)
    keys = [row[2] for row in rows]
    expected = [s["__key__"] for samples in shards.values() for s in samples]
    assert sorted(keys) == sorted(expected)
    assert len(keys) == len(set(keys))
    assert {row[0] for row in rows} == {0, 1}
    pids = {int(row[1]) for row in rows}
    assert len(pids) == 2 and os.getpid() not in pids
    assert {int(row[3]) for row in rows} == {3000}
