"""The one place that maps boto3/botocore exceptions to the wds_cloud error tree.

:func:`translate_error` has the signature every backend's errors module shares
(``translate_error(exc, *, url, offset=None)``, plus the backend's own context as keywords
with defaults: here the endpoint). Readers and writers receive it bound to the opener's
endpoint (a :class:`~wds_cloud.openers.streams.resumable.TranslateError`), never the opener itself.
"""

from __future__ import annotations

from wds_cloud.errors import (
    ShardError,
    ShardNotFoundError,
    ShardOpenError,
    ShardReadError,
)
from wds_cloud.openers.s3.read import read_errors

try:
    import botocore.exceptions as bexc
except ImportError:  # pragma: no cover - exercised only without the extra
    bexc = None

__all__ = ["translate_error"]

_NOT_FOUND = {"NoSuchKey", "NoSuchBucket", "404", "NotFound", "NoSuchUpload"}
_DENIED = {
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "403",
    "ExpiredToken",
    "InvalidToken",
    "AllAccessDisabled",
    "AccountProblem",
}
_CHANGED = {"PreconditionFailed", "412"}


def translate_error(
    exc: BaseException,
    /,
    *,
    url: str,
    offset: int | None = None,
    endpoint: str | None = None,
) -> ShardError:
    """The :class:`ShardError` for what boto3 raised.

    Args:
        exc: what boto3 raised (a :class:`ShardError` is returned as it is).
        url: the ``s3://`` URL involved.
        offset: byte offset reached when reading, if any.
        endpoint: the endpoint in use (None: AWS), named when it cannot be reached.
    """
    where = endpoint or "the AWS S3 endpoint"
    if isinstance(exc, ShardError):
        return exc
    if isinstance(exc, bexc.ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        message = error.get("Message") or str(exc)
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        op = getattr(exc, "operation_name", "request")
        if code in _NOT_FOUND or status == 404:
            what = {"NoSuchBucket": "bucket does not exist", "NoSuchKey": "object does not exist"}
            return ShardNotFoundError(
                f"S3 {what.get(code, 'object or bucket not found')} ({code}: {message})", url=url
            )
        if code in _DENIED or status == 403:
            return ShardOpenError(f"S3 access denied by {where} ({code}: {message})", url=url)
        if code in _CHANGED or status == 412:
            return ShardReadError(
                "S3 object changed while it was being read (its ETag no longer matches); "
                "re-run with the new version",
                url=url,
                offset=offset,
            )
        return ShardOpenError(
            f"S3 {op} failed ({code or status}: {message})", url=url, offset=offset
        )
    if isinstance(exc, (bexc.EndpointConnectionError, bexc.ConnectTimeoutError)):
        return ShardOpenError(f"cannot reach S3 endpoint {where}: {exc}", url=url, offset=offset)
    if isinstance(exc, bexc.NoCredentialsError | bexc.PartialCredentialsError):
        return ShardOpenError(f"no usable AWS credentials for {where}: {exc}", url=url)
    if isinstance(exc, read_errors()):
        return ShardReadError(f"S3 connection to {where} broke: {exc!r}", url=url, offset=offset)
    return ShardOpenError(f"S3 request to {where} failed: {exc!r}", url=url, offset=offset)
