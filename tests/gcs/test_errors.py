"""The one SDK-error translation function, fed the SDK's own exception types.

fake-gcs-server never answers 401/403, so those answers are built as the SDK builds them
(``google.api_core.exceptions``) and passed through ``translate_error``.
"""

from __future__ import annotations

import pytest
import requests
from google.api_core import exceptions as gexc
from google.auth import exceptions as auth_exc

from wds_cloud.errors import ShardNotFoundError, ShardOpenError
from wds_cloud.openers.gcs.errors import translate_error

URL = "gs://bkt/shard-0001.tar"
EP = "http://127.0.0.1:1"


@pytest.mark.parametrize(
    ("exc", "kind", "text"),
    [
        (gexc.NotFound("No such object: bkt/shard-0001.tar"), ShardNotFoundError, "No such object"),
        (
            gexc.Forbidden("loader@x does not have storage.objects.get"),
            ShardOpenError,
            "access denied by GCS: loader@x",
        ),
        (
            gexc.Unauthorized("Invalid Credentials"),
            ShardOpenError,
            "access denied by GCS: Invalid Credentials",
        ),
        (
            auth_exc.RefreshError("invalid_grant"),
            ShardOpenError,
            "credentials could not be used: invalid_grant",
        ),
        (
            gexc.ServiceUnavailable("backend error"),
            ShardOpenError,
            "GCS request failed (503): backend error",
        ),
        (
            requests.ConnectionError("refused"),
            ShardOpenError,
            f"cannot connect to the GCS endpoint {EP}",
        ),
        (
            requests.ReadTimeout("slow"),
            ShardOpenError,
            f"timed out talking to the GCS endpoint {EP}",
        ),
        (
            gexc.RetryError(
                "Timeout of 120.0s exceeded", cause=requests.ConnectionError("refused")
            ),
            ShardOpenError,
            f"cannot connect to the GCS endpoint {EP}: refused",
        ),
    ],
)
def test_read_errors(exc: BaseException, kind: type, text: str) -> None:
    error = translate_error(exc, url=URL, endpoint=EP, offset=7)
    assert type(error) is kind
    assert text in str(error)
    assert error.url == URL
    assert getattr(error, "offset", None) == 7


def test_write_errors_name_the_cause() -> None:
    # GcsWriter wraps this reason in its UploadError ("upload failed after N bytes: ...")
    error = translate_error(gexc.Forbidden("no storage.objects.create"), url=URL, endpoint=EP)
    assert type(error) is ShardOpenError
    assert "access denied by GCS: no storage.objects.create" in str(error)
    assert error.url == URL
