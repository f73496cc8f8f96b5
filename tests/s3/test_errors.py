"""``s3_request``, the one request-and-translate helper of the S3 backend, fed botocore's own
exception types (SeaweedFS does not throttle, so those answers are built as botocore builds
them). The real requests through it run in the other tests of this folder."""

from __future__ import annotations

import functools

import pytest
from botocore.exceptions import ClientError, ConnectionClosedError, EndpointConnectionError

from wds_cloud.errors import (
    ShardError,
    ShardNotFoundError,
    ShardOpenError,
    ShardReadError,
    UploadError,
)
from wds_cloud.openers.s3.errors import error_code, s3_request, translate_error, upload_error
from wds_cloud.openers.streams.resumable import RetryableError, ThrottledError

URL = "s3://bkt/shard-0001.tar"
EP = "http://127.0.0.1:1"
translate = functools.partial(translate_error, endpoint=EP)


def client_error(code: str, status: int, message: str = "it said no") -> ClientError:
    response = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return ClientError(response, "GetObject")


def raised(exc: BaseException, **kwargs: object) -> BaseException:
    """What leaves ``s3_request`` when ``exc`` is raised inside it."""
    with pytest.raises(BaseException) as info, s3_request(translate, url=URL, **kwargs):
        raise exc
    return info.value


@pytest.mark.parametrize("retry", [False, True])
def test_answers_become_errors_of_the_tree(retry: bool) -> None:
    missing = client_error("NoSuchKey", 404)
    got = raised(missing, retry=retry)
    assert isinstance(got, ShardNotFoundError) and got.__cause__ is missing
    assert got.reason == "S3 object does not exist (NoSuchKey: it said no)"
    denied = raised(client_error("AccessDenied", 403), offset=7, retry=retry)
    assert type(denied) is ShardOpenError
    assert denied.reason == f"S3 access denied by {EP} (AccessDenied: it said no)"


def test_a_read_loop_request_leaves_drops_and_throttling_to_the_loop() -> None:
    drop = EndpointConnectionError(endpoint_url=EP)
    assert raised(drop, retry=True) is drop
    assert isinstance(raised(drop), ShardOpenError)  # outside the read loop: translated
    slow = client_error("SlowDown", 503, "Please reduce your request rate.")
    got = raised(slow, retry=True)
    assert type(got) is ThrottledError and got.__cause__ is slow  # the limiter backs off
    assert str(got) == "S3 answered SlowDown: Please reduce your request rate."
    assert type(raised(client_error("InternalError", 500), retry=True)) is RetryableError
    assert type(raised(slow)) is ShardOpenError  # listing and writes: botocore retried already


def test_as_read_makes_every_failure_a_read_error_with_its_offset() -> None:
    got = raised(
        client_error("AccessDenied", 403),
        offset=4096,
        retry=True,
        as_read="resuming the read failed",
    )
    assert type(got) is ShardReadError and got.offset == 4096
    assert (
        got.reason
        == f"resuming the read failed: S3 access denied by {EP} (AccessDenied: it said no)"
    )
    changed = raised(
        client_error("PreconditionFailed", 412), offset=5, as_read="ranged read failed"
    )
    assert type(changed) is ShardReadError and changed.reason.startswith("S3 object changed")


def test_as_upload_makes_every_failure_an_upload_error() -> None:
    denied = client_error("AccessDenied", 403)
    got = raised(denied, as_upload="uploading part 2 failed: S3 upload failed")
    assert type(got) is UploadError and got.__cause__ is denied and got.url == URL
    assert got.reason == (
        f"uploading part 2 failed: S3 upload failed: S3 access denied by {EP} "
        "(AccessDenied: it said no)"
    )
    own = ShardOpenError("already translated", url=URL)
    assert (
        upload_error(own, translate, url=URL, doing="writing").reason
        == "writing: already translated"
    )


def test_an_error_of_the_tree_passes_as_it_is() -> None:
    own = ShardNotFoundError("gone", url=URL)
    got = raised(own, retry=True)
    assert got is own and got.__cause__ is None
    with s3_request(translate, url=URL):
        pass  # nothing raised: nothing to do


def test_error_code() -> None:
    assert error_code(client_error("InvalidRange", 416)) == "InvalidRange"
    assert error_code(EndpointConnectionError(endpoint_url=EP)) is None
    dropped = ConnectionClosedError(endpoint_url=EP)
    assert dropped.response is None and error_code(dropped) is None
    assert isinstance(raised(client_error("InvalidRange", 416)), ShardError)
