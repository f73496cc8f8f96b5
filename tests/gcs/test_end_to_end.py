"""gs:// through the whole product: ShardWriter uploads, list_shards lists, tarfile_samples reads."""

from __future__ import annotations

from typing import Any

import pytest

from wds_cloud.core.shardopen import tarfile_samples
from wds_cloud.listing import list_shards
from wds_cloud.openers.gcs.opener import GcsOpener
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.writing.shardwriter import ShardWriter

pytestmark = pytest.mark.gcs


def test_write_list_read(fake_gcs: Any, bucket: Any) -> None:
    registry = OpenerRegistry()
    opener = GcsOpener(endpoint=fake_gcs.endpoint, chunk_size=256 << 10, page_size=2)
    registry.register("gs", opener, override=True)
    samples = [
        {"__key__": f"k{i:04d}", "txt": f"sample {i}", "bin": bytes([i % 256]) * 5000}
        for i in range(95)
    ]
    with ShardWriter(
        f"gs://{bucket.name}/train/part-%04d.tar", maxcount=20, registry=registry
    ) as sink:
        for sample in samples:
            sink.write(sample)
    urls = list_shards(f"gs://{bucket.name}/train/*.tar", registry=registry)
    assert urls == [f"gs://{bucket.name}/train/part-{i:04d}.tar" for i in range(5)]
    got = list(tarfile_samples(iter(urls), registry=registry))
    assert [s["__key__"] for s in got] == [s["__key__"] for s in samples]
    assert [s["txt"] for s in got] == [f"sample {i}".encode() for i in range(95)]
    assert all(s["bin"] == x["bin"] for s, x in zip(got, samples, strict=True))
