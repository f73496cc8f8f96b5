"""Dropped connections and objects replaced mid-read, through a real cutting TCP proxy."""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pytest

from tests.gcs.shards import upload_shards
from wds_cloud.core.samples import tar_samples
from wds_cloud.errors import ShardReadError
from wds_cloud.openers.gcs.opener import GcsOpener

pytestmark = pytest.mark.gcs


def test_cut_connections_resume_every_sample_exactly_once(
    bucket: Any, fake_gcs: Any, faulty_proxy: Any
) -> None:
    shards = upload_shards(bucket, count=12, samples=30, payload=7000)
    # Every connection is cut after ~100 KB of response (headers included; pooled connections
    # carry the metadata request first); each shard is about 230 KB, so every shard needs
    # several resumed Range requests.
    proxy = faulty_proxy(fake_gcs.port, cut_after=100_000)
    opener = GcsOpener(endpoint=proxy.url, backoff=0.0, retries=3)
    seen: Counter[str] = Counter()
    resumes = 0
    for url, expected in shards.items():
        with opener.open(url) as stream:
            got = list(tar_samples(stream, url))
            resumes += stream.resumes
        assert [{k: v for k, v in s.items() if k != "__url__"} for s in got] == expected
        seen.update(s["__key__"] for s in got)
    assert proxy.cuts >= 2 * len(shards)
    assert resumes >= 2 * len(shards)
    assert len(seen) == 12 * 30
    assert set(seen.values()) == {1}


def test_endpoint_gone_mid_read_gives_up_with_offset(
    bucket: Any, fake_gcs: Any, faulty_proxy: Any
) -> None:
    size = 16 << 20
    bucket.blob("cut").upload_from_string(os.urandom(size))
    proxy = faulty_proxy(fake_gcs.port)
    opener = GcsOpener(endpoint=proxy.url, backoff=0.0, retries=2)
    url = f"gs://{bucket.name}/cut"
    with opener.open(url) as stream:
        assert len(stream.read(1000)) == 1000
        proxy.stop()  # the endpoint disappears: the connection drops, reconnects are refused
        with pytest.raises(ShardReadError) as info:
            while stream.read(1 << 16):
                pass
    assert "giving up after 2 retries" in str(info.value)
    assert info.value.url == url
    assert info.value.offset is not None and 1000 <= info.value.offset < size


def _open_then_cut(bucket: Any, fake_gcs: Any, faulty_proxy: Any, name: str) -> tuple[Any, str]:
    data = os.urandom(4 << 20)
    bucket.blob(name).upload_from_string(data)
    # Every connection is cut after 256 KiB: the first media GET delivers at most that much, and
    # the bytes after it need a resumed request, made after the caller changed the object.
    proxy = faulty_proxy(fake_gcs.port, cut_after=256 << 10)
    opener = GcsOpener(endpoint=proxy.url, backoff=0.0, retries=3)
    url = f"gs://{bucket.name}/{name}"
    stream = opener.open(url)
    assert stream.read(1000) == data[:1000]
    return stream, url


def test_object_replaced_mid_read_is_a_read_error(
    bucket: Any, fake_gcs: Any, faulty_proxy: Any
) -> None:
    stream, url = _open_then_cut(bucket, fake_gcs, faulty_proxy, "replaced")
    bucket.blob("replaced").upload_from_string(b"a different object")
    with stream, pytest.raises(ShardReadError) as info:
        while stream.read(1 << 16):
            pass
    assert "changed while being read (generation" in str(info.value)
    assert info.value.url == url
    assert info.value.offset is not None and 1000 <= info.value.offset < 4 << 20


def test_object_deleted_mid_read_is_a_read_error(
    bucket: Any, fake_gcs: Any, faulty_proxy: Any
) -> None:
    stream, _ = _open_then_cut(bucket, fake_gcs, faulty_proxy, "deleted")
    bucket.blob("deleted").delete()
    with stream, pytest.raises(ShardReadError, match="deleted while being read"):
        while stream.read(1 << 16):
            pass
