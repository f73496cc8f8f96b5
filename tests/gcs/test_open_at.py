"""GcsOpener.open_at against a real fake-gcs-server: bytes from an offset, resumed after cuts,
the generation pinned, offsets at and past the end."""

from __future__ import annotations

import os
import random
from typing import Any

import pytest

from tests.openers.open_at_cases import check_ends, check_open_at
from wds_cloud.errors import ShardNotFoundError, ShardReadError
from wds_cloud.openers.gcs.opener import GcsOpener

pytestmark = pytest.mark.gcs


@pytest.mark.parametrize("size", [1, 513, 10_240, 250_001, 1_300_000])
def test_open_at_equals_the_bytes_from_the_offset(
    opener: GcsOpener, bucket: Any, size: int
) -> None:
    data = random.Random(size).randbytes(size)
    bucket.blob(f"obj-{size}.bin").upload_from_string(data)
    url = f"gs://{bucket.name}/obj-{size}.bin"
    assert len(check_open_at(opener, url, data, seed=size)) == 40


def test_open_at_resumes_after_cuts(fake_gcs: Any, bucket: Any, faulty_proxy: Any) -> None:
    data = os.urandom(400_000)
    bucket.blob("x.bin").upload_from_string(data)
    proxy = faulty_proxy(fake_gcs.port, cut_after=30_000, match=b"alt=media")
    opener = GcsOpener(endpoint=proxy.url, backoff=0.0, retries=3)
    for off in (1, 100_000, 399_000):
        with opener.open_at(f"gs://{bucket.name}/x.bin", off) as stream:
            assert stream.read() == data[off:]
    assert proxy.cuts >= 10


def test_open_at_reads_only_from_the_offset(fake_gcs: Any, bucket: Any, faulty_proxy: Any) -> None:
    """The server sends the bytes from the offset, not the ones before (counted by a proxy)."""
    data = os.urandom(1_000_000)
    bucket.blob("x.bin").upload_from_string(data)
    proxy = faulty_proxy(fake_gcs.port)
    opener = GcsOpener(endpoint=proxy.url, backoff=0.0)
    with opener.open_at(f"gs://{bucket.name}/x.bin", 900_000) as stream:
        assert stream.read() == data[900_000:]
    assert proxy.ranged_requests == 1
    assert 100_000 <= proxy.bytes_forwarded < 100_000 + 4_000  # the tail and its headers


def test_generation_option(opener: GcsOpener, bucket: Any) -> None:
    data = os.urandom(50_000)
    bucket.blob("x.bin").upload_from_string(data)
    generation = bucket.get_blob("x.bin").generation
    url = f"gs://{bucket.name}/x.bin"
    with opener.open_at(url, 1000) as stream:
        assert stream.generation == generation
        assert stream.read() == data[1000:]
    with opener.open_at(url, 1000, generation=generation) as stream:
        assert stream.read() == data[1000:]
    with pytest.raises(ShardNotFoundError):
        opener.open_at(url, 1000, generation=generation + 1)


def test_resume_after_the_object_changed_is_a_read_error(
    fake_gcs: Any, bucket: Any, faulty_proxy: Any
) -> None:
    blob = bucket.blob("x.bin")
    blob.upload_from_string(os.urandom(200_000))
    proxy = faulty_proxy(fake_gcs.port, cut_after=30_000, match=b"alt=media", first=1)
    opener = GcsOpener(endpoint=proxy.url, backoff=0.0, retries=2)
    stream = opener.open_at(f"gs://{bucket.name}/x.bin", 5000)
    blob.upload_from_string(os.urandom(200_000))  # replaced before the resume
    with pytest.raises(ShardReadError, match="changed while being read"):
        stream.read()
    stream.close()


def test_offsets_at_and_past_the_end(opener: GcsOpener, bucket: Any) -> None:
    bucket.blob("x.bin").upload_from_string(os.urandom(5000))
    url = f"gs://{bucket.name}/x.bin"
    check_ends(opener, url, 5000)


def test_missing_object(opener: GcsOpener, bucket: Any) -> None:
    with pytest.raises(ShardNotFoundError, match="does not exist"):
        opener.open_at(f"gs://{bucket.name}/nope.tar", 10)
