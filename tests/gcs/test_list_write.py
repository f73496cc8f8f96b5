"""Listing prefixes and streaming uploads against a real fake-gcs-server."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import wds_cloud as wds
from wds_cloud.errors import ShardNotFoundError, ShardOpenError, UploadError
from wds_cloud.openers.gcs.opener import GcsOpener
from wds_cloud.openers.registry import OpenerRegistry

pytestmark = pytest.mark.gcs

CHUNK = 256 << 10


def test_list_reads_every_page(fake_gcs: Any, bucket: Any) -> None:
    names = [f"data/shard-{i:04d}.tar" for i in range(301)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: bucket.blob(n).upload_from_string(b"x"), names))
    bucket.blob("other/ignored.tar").upload_from_string(b"x")
    opener = GcsOpener(endpoint=fake_gcs.endpoint, page_size=50)  # 7 pages
    urls = opener.list(f"gs://{bucket.name}/data/")
    assert urls == [f"gs://{bucket.name}/{n}" for n in names]
    assert len(opener.list(f"gcs://{bucket.name}")) == 302
    assert opener.list(f"gcs://{bucket.name}/other/")[0].startswith("gcs://")


def test_list_empty_prefix_is_empty(opener: GcsOpener, bucket: Any) -> None:
    assert opener.list(f"gs://{bucket.name}/nothing-here/") == []


def test_list_missing_bucket(opener: GcsOpener) -> None:
    with pytest.raises(ShardNotFoundError) as info:
        opener.list("gs://no-such-bucket-for-listing/x/")
    assert info.value.url == "gs://no-such-bucket-for-listing/x/"


def test_write_then_read_round_trip(fake_gcs: Any, bucket: Any) -> None:
    opener = GcsOpener(endpoint=fake_gcs.endpoint, chunk_size=CHUNK)
    data = os.urandom(5 * CHUNK + 12345)  # several chunks plus a partial last one
    url = f"gs://{bucket.name}/out/shard-0000.tar"
    with opener.create(url) as writer:
        for start in range(0, len(data), 100_000):
            assert writer.write(data[start : start + 100_000]) == len(data[start : start + 100_000])
    assert writer.bytes_written == len(data)
    with opener.open(url) as stream:
        assert stream.read() == data
    assert bucket.get_blob("out/shard-0000.tar").content_type == "application/x-tar"


def test_small_and_empty_uploads(opener: GcsOpener, bucket: Any) -> None:
    for name, payload in (("small", b"tiny"), ("empty", b"")):
        url = f"gs://{bucket.name}/{name}"
        writer = opener.create(url)
        writer.write(payload)
        writer.close()
        with opener.open(url) as stream:
            assert stream.read() == payload


def test_abort_after_chunks_leaves_no_object(fake_gcs: Any, bucket: Any) -> None:
    opener = GcsOpener(endpoint=fake_gcs.endpoint, chunk_size=CHUNK)
    writer = opener.create(f"gs://{bucket.name}/aborted.tar")
    writer.write(os.urandom(3 * CHUNK))  # chunks already sent: a session exists
    writer.abort()
    assert bucket.get_blob("aborted.tar") is None
    writer.abort()  # idempotent
    writer.close()  # closing an aborted writer commits nothing
    assert bucket.get_blob("aborted.tar") is None
    with pytest.raises(ValueError, match="closed"):
        writer.write(b"more")


def test_exception_inside_with_aborts(fake_gcs: Any, bucket: Any) -> None:
    opener = GcsOpener(endpoint=fake_gcs.endpoint, chunk_size=CHUNK)
    with pytest.raises(KeyError), opener.create(f"gs://{bucket.name}/half.tar") as writer:
        writer.write(os.urandom(2 * CHUNK + 1))
        raise KeyError("producer failed")
    assert bucket.get_blob("half.tar") is None


def test_upload_to_missing_bucket_is_an_upload_error(opener: GcsOpener) -> None:
    url = "gs://no-such-bucket-for-upload/x.tar"
    writer = opener.create(url)
    writer.write(b"data")
    with pytest.raises(UploadError) as info:
        writer.close()
    assert info.value.url == url
    assert url in str(info.value)


def test_overwrite_replaces_existing_object(opener: GcsOpener, bucket: Any) -> None:
    bucket.blob("replace.tar").upload_from_string(b"old")
    url = f"gs://{bucket.name}/replace.tar"
    with opener.create(url) as writer:
        writer.write(b"new")
    assert bucket.blob("replace.tar").download_as_bytes() == b"new"


def test_endpoint_lost_mid_upload_is_an_upload_error_and_no_object(
    fake_gcs: Any, bucket: Any, faulty_proxy: Any
) -> None:
    proxy = faulty_proxy(fake_gcs.port)
    opener = GcsOpener(endpoint=proxy.url, chunk_size=CHUNK, retries=1, backoff=0.0)
    url = f"gs://{bucket.name}/lost.tar"
    writer = opener.create(url)
    writer.write(os.urandom(2 * CHUNK))  # two chunks sent through the proxy
    proxy.stop()  # the endpoint disappears
    with pytest.raises(UploadError) as info:
        writer.write(os.urandom(2 * CHUNK))
        writer.close()
    assert info.value.url == url
    assert "after" in str(info.value)
    assert bucket.get_blob("lost.tar") is None
    with pytest.raises(ValueError, match="closed"):
        writer.write(b"x")  # the failed writer was aborted


def test_abort_keeps_the_existing_object(fake_gcs: Any, bucket: Any) -> None:
    bucket.blob("keep.tar").upload_from_string(b"old")
    opener = GcsOpener(endpoint=fake_gcs.endpoint, chunk_size=CHUNK)
    writer = opener.create(f"gs://{bucket.name}/keep.tar")
    writer.write(os.urandom(3 * CHUNK))
    writer.abort()
    assert bucket.blob("keep.tar").download_as_bytes() == b"old"


@pytest.fixture
def no_sdk_background_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stop google-cloud-storage's background bucket-metadata GET (its telemetry), whose
    connection would race ours for the proxy's "first N connections" rule."""
    monkeypatch.setenv("DISABLE_GCS_PYTHON_CLIENT_OTEL_BUCKET_METADATA", "true")


@pytest.mark.usefixtures("no_sdk_background_requests")
def test_list_retries_cut_connections(fake_gcs: Any, bucket: Any, faulty_proxy: Any) -> None:
    names = [f"r/{i:03d}.tar" for i in range(60)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: bucket.blob(n).upload_from_string(b"x"), names))
    # The first two connections break in the middle of a listing page.
    proxy = faulty_proxy(fake_gcs.port, cut_after=3000, first=2)
    opener = GcsOpener(endpoint=proxy.url, page_size=20, retries=3, backoff=0.0)
    assert opener.list(f"gs://{bucket.name}/r/") == [f"gs://{bucket.name}/{n}" for n in names]
    assert proxy.cuts == 2


@pytest.mark.usefixtures("no_sdk_background_requests")
def test_list_without_retries_reports_the_endpoint(
    fake_gcs: Any, bucket: Any, faulty_proxy: Any
) -> None:
    for i in range(30):
        bucket.blob(f"r/{i:03d}.tar").upload_from_string(b"x")
    proxy = faulty_proxy(fake_gcs.port, cut_after=3000, first=1)
    opener = GcsOpener(endpoint=proxy.url, page_size=20, retries=0)
    with pytest.raises(ShardOpenError) as info:
        opener.list(f"gs://{bucket.name}/r/")
    assert proxy.url in str(info.value)


@pytest.mark.usefixtures("no_sdk_background_requests")
@pytest.mark.parametrize("cut_after", [600, 1200, 2000, 3000])
def test_cut_during_upload_never_leaves_a_wrong_object(
    fake_gcs: Any, bucket: Any, faulty_proxy: Any, cut_after: int
) -> None:
    # The first connection breaks inside a response of the session (initiation or a chunk);
    # the SDK retries. fake-gcs-server stores a re-sent chunk twice, which the SDK's CRC32C
    # check catches after the commit. Either the right object is there, or none is.
    proxy = faulty_proxy(fake_gcs.port, cut_after=cut_after, first=1)
    opener = GcsOpener(endpoint=proxy.url, chunk_size=CHUNK, retries=3, backoff=0.0)
    data = os.urandom(6 * CHUNK + 1000)
    url = f"gs://{bucket.name}/cut-{cut_after}.tar"
    try:
        with opener.create(url) as writer:
            for start in range(0, len(data), 100_000):
                writer.write(data[start : start + 100_000])
    except UploadError as exc:
        assert exc.url == url
        assert bucket.get_blob(f"cut-{cut_after}.tar") is None, str(exc)
    else:
        assert bucket.blob(f"cut-{cut_after}.tar").download_as_bytes() == data
    assert proxy.cuts == 1


def test_upload_error_carries_the_gcs_answer(opener: GcsOpener) -> None:
    writer = opener.create("gs://no-such-bucket-for-upload/y.tar")
    writer.write(b"data")
    with pytest.raises(UploadError, match=r"committing the upload failed after 4 bytes: not found"):
        writer.close()


def test_gopen_round_trip(fake_gcs: Any, bucket: Any) -> None:
    registry = OpenerRegistry()
    registry.register("gs", GcsOpener(endpoint=fake_gcs.endpoint, chunk_size=CHUNK), override=True)
    data = os.urandom(2 * CHUNK + 5)
    url = f"gs://{bucket.name}/gopen/obj.tar"
    with wds.gopen(url, "wb", registry=registry) as stream:
        stream.write(data)
    with wds.gopen(url, registry=registry) as stream:
        assert stream.read() == data
