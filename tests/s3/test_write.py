"""Writing s3:// objects through S3Opener.create (multipart, atomic commit, abort)."""

from __future__ import annotations

import os
from typing import Any

import pytest

import wds_cloud as wds
from tests.s3.conftest import make_config
from wds_cloud import security
from wds_cloud.errors import UploadError
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.openers.s3.opener import S3Opener

pytestmark = pytest.mark.s3

PART = 5 << 20


def _exists(raw_client: Any, bucket: str, key: str) -> bool:
    listing = raw_client.list_objects_v2(Bucket=bucket, Prefix=key)
    return any(item["Key"] == key for item in listing.get("Contents", ()))


def _uploads(raw_client: Any, bucket: str) -> list[dict[str, Any]]:
    return list(raw_client.list_multipart_uploads(Bucket=bucket).get("Uploads", ()))


@pytest.fixture
def writer_opener(s3_endpoint: str) -> S3Opener:
    return S3Opener(make_config(s3_endpoint, multipart_chunksize=PART))


def test_small_object_single_put_round_trip(
    writer_opener: S3Opener, raw_client: Any, bucket: str
) -> None:
    url = f"s3://{bucket}/small/obj.tar"
    data = os.urandom(123_457)
    with writer_opener.create(url) as writer:
        writer.write(data[:1000])
        writer.write(memoryview(data)[1000:])
        assert not _exists(raw_client, bucket, "small/obj.tar")
    assert writer.parts == 0
    with writer_opener.open(url) as stream:
        assert stream.read() == data


def test_multipart_round_trip_invisible_until_close(
    writer_opener: S3Opener, raw_client: Any, bucket: str
) -> None:
    url = f"s3://{bucket}/big.tar"
    data = os.urandom(2 * PART + 777)
    writer = writer_opener.create(url)
    step = 1_000_003  # odd sizes straddle part boundaries
    for pos in range(0, len(data), step):
        writer.write(data[pos : pos + step])
    assert writer.parts == 2  # two full parts uploaded, the tail is still buffered
    assert not _exists(raw_client, bucket, "big.tar")
    writer.close()
    assert writer.parts == 3
    assert raw_client.head_object(Bucket=bucket, Key="big.tar")["ContentLength"] == len(data)
    with writer_opener.open(url) as stream:
        assert stream.read() == data
    writer.close()  # idempotent


def test_exact_multiple_of_part_size(writer_opener: S3Opener, bucket: str) -> None:
    url = f"s3://{bucket}/exact.bin"
    data = os.urandom(2 * PART)
    with writer_opener.create(url) as writer:
        writer.write(data)
    assert writer.parts == 2
    with writer_opener.open(url) as stream:
        assert stream.read() == data


def test_abort_leaves_nothing(writer_opener: S3Opener, raw_client: Any, bucket: str) -> None:
    writer = writer_opener.create(f"s3://{bucket}/aborted.tar")
    writer.write(os.urandom(PART + 10))
    assert writer.parts == 1
    assert len(_uploads(raw_client, bucket)) == 1
    writer.abort()
    assert not _exists(raw_client, bucket, "aborted.tar")
    assert _uploads(raw_client, bucket) == []
    with pytest.raises(ValueError, match="closed or aborted"):
        writer.write(b"x")
    writer.close()  # after abort: a no-op, commits nothing
    assert not _exists(raw_client, bucket, "aborted.tar")


def test_exception_in_with_block_aborts(
    writer_opener: S3Opener, raw_client: Any, bucket: str
) -> None:
    with (
        pytest.raises(RuntimeError, match="boom"),
        writer_opener.create(f"s3://{bucket}/e.tar") as w,
    ):
        w.write(os.urandom(PART + 1))
        raise RuntimeError("boom")
    assert not _exists(raw_client, bucket, "e.tar")
    assert _uploads(raw_client, bucket) == []


def test_unclosed_writer_is_discarded_not_committed(
    writer_opener: S3Opener, raw_client: Any, bucket: str
) -> None:
    writer = writer_opener.create(f"s3://{bucket}/forgotten.tar")
    writer.write(b"partial")
    del writer
    assert not _exists(raw_client, bucket, "forgotten.tar")


def test_failed_part_aborts_and_raises_upload_error(
    writer_opener: S3Opener, raw_client: Any, bucket: str
) -> None:
    url = f"s3://{bucket}/fails.tar"
    writer = writer_opener.create(url)
    writer.write(os.urandom(PART))  # part 1 uploaded
    (upload,) = _uploads(raw_client, bucket)
    # The upload disappears server-side (as after a lifecycle expiry): the next part fails.
    raw_client.abort_multipart_upload(Bucket=bucket, Key="fails.tar", UploadId=upload["UploadId"])
    with pytest.raises(UploadError, match="uploading part 2 failed") as info:
        writer.write(os.urandom(PART))
    assert info.value.url == url
    writer.close()  # must not commit the remainder after a failure
    assert not _exists(raw_client, bucket, "fails.tar")


def test_wrong_credentials_upload_error(s3_endpoint: str, raw_client: Any, bucket: str) -> None:
    bad = S3Opener(make_config(s3_endpoint, secret_access_key="nope", multipart_chunksize=PART))
    url = f"s3://{bucket}/denied.tar"
    writer = bad.create(url)
    writer.write(b"abc")
    with pytest.raises(UploadError, match="SignatureDoesNotMatch") as info:
        writer.close()
    assert info.value.url == url
    big = bad.create(f"s3://{bucket}/denied-big.tar")
    with pytest.raises(UploadError, match="starting the multipart upload failed"):
        big.write(os.urandom(PART))
    assert not _exists(raw_client, bucket, "denied.tar")
    assert not _exists(raw_client, bucket, "denied-big.tar")


def test_gopen_round_trip_also_in_secure_mode(
    writer_opener: S3Opener, raw_client: Any, bucket: str
) -> None:

    registry = OpenerRegistry()
    registry.register("s3", writer_opener, override=True)
    data = os.urandom(PART + 99)
    before = security.enforce_security
    wds.utils.enforce_security = True  # object stores stay open, as in webdataset
    try:
        url = f"s3://{bucket}/gopen/obj.tar"
        with pytest.raises(RuntimeError), wds.gopen(url, "wb", registry=registry) as stream:
            stream.write(data)
            raise RuntimeError("discard")
        assert not _exists(raw_client, bucket, "gopen/obj.tar") and not _uploads(raw_client, bucket)
        with wds.gopen(url, "wb", registry=registry) as stream:
            stream.write(data)
        with wds.gopen(url, "rb", registry=registry) as stream:
            assert stream.read() == data
    finally:
        security.enforce_security = before
