"""The one place that maps boto3/botocore exceptions to the wds_cloud error tree.

:func:`translate_error` has the signature every backend's errors module shares
(``translate_error(exc, *, url, offset=None)``, plus the backend's own context as keywords
with defaults: here the endpoint). Readers and writers receive it bound to the opener's
endpoint (a :class:`~wds_cloud.openers.streams.resumable.TranslateError`), never the opener itself.

Every S3 request runs inside :func:`s3_request`, which raises what the request raised as the
error of the tree (a read's dropped connection or throttling as what the read loop retries,
a write's failure as :class:`UploadError`); :func:`read_errors` and :func:`retryable` say what
the read loop retries.
"""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from contextlib import contextmanager

from wds_cloud.errors import (
    ShardError,
    ShardNotFoundError,
    ShardOpenError,
    ShardReadError,
    UploadError,
)
from wds_cloud.openers.streams.resumable import (
    NETWORK_ERRORS,
    RetryableError,
    TranslateError,
    transient_error,
)
from wds_cloud.openers.streams.throttle import retry_after_seconds

try:
    import botocore.exceptions as bexc
    import urllib3.exceptions as u3exc
except ImportError:  # pragma: no cover - exercised only without the extra
    bexc = None

__all__ = [
    "error_code",
    "read_errors",
    "retryable",
    "s3_request",
    "translate_error",
    "upload_error",
]

_THROTTLED = {
    "SlowDown",
    "Throttling",
    "ThrottlingException",
    "RequestLimitExceeded",
    "RequestTimeout",
    "InternalError",
    "ServiceUnavailable",
}
#: The codes among them that mean "slow down" (a :class:`ThrottledError`, like 429 and 503).
_SLOW_DOWN = {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded"}
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


def read_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean "the connection dropped mid-body": resume from the offset."""
    return (
        *NETWORK_ERRORS,
        http.client.IncompleteRead,
        bexc.ResponseStreamingError,
        bexc.IncompleteReadError,
        bexc.ReadTimeoutError,
        bexc.ConnectionClosedError,
        bexc.EndpointConnectionError,
        bexc.ConnectTimeoutError,
        u3exc.ProtocolError,
        u3exc.ReadTimeoutError,
    )


def retryable(exc: BaseException) -> RetryableError | None:
    """A :class:`RetryableError` for a throttling or 5xx ``ClientError`` (a
    :class:`ThrottledError` for ``SlowDown``, 429 and 503), else None."""
    if not isinstance(exc, bexc.ClientError):
        return None
    error = exc.response.get("Error", {})
    code = str(error.get("Code", ""))
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
    if code in _THROTTLED or status == 429 or status >= 500:
        what = f"S3 answered {code or status}: {error.get('Message') or exc}"
        headers = exc.response.get("ResponseMetadata", {}).get("HTTPHeaders") or {}
        wait = retry_after_seconds(headers.get("retry-after"))
        return transient_error(what, 503 if code in _SLOW_DOWN else status, wait)
    return None


def error_code(exc: BaseException) -> str | None:
    """The S3 error code of a botocore ``ClientError`` (``"InvalidRange"``), else None (other
    exceptions may have a ``response`` of another kind, or None)."""
    response = getattr(exc, "response", None)
    error = response.get("Error") if isinstance(response, dict) else None
    code = error.get("Code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None


def upload_error(exc: Exception, translate: TranslateError, *, url: str, doing: str) -> UploadError:
    """The :class:`UploadError` ``"{doing}: {reason}"`` for what a write request raised (the
    reason of a wds_cloud error as it is, else of its translation)."""
    if isinstance(exc, ShardError | UploadError):
        reason = exc.reason
    else:
        reason = translate(exc, url=url).reason
    return UploadError(f"{doing}: {reason}", url=url)


@contextmanager
def s3_request(
    translate: TranslateError,
    *,
    url: str,
    offset: int | None = None,
    retry: bool = False,
    as_read: str | None = None,
    as_upload: str | None = None,
) -> Iterator[None]:
    """Run S3 requests (one call, or a paginated listing read through) and raise what they
    raise as the error of the tree (:func:`translate_error`), from the SDK's exception.

    Args:
        translate: the opener's error translation (endpoint bound).
        url: the URL the request is about, for the error.
        offset: the byte offset the request is about, for the error.
        retry: a request of the resumable read loop: a dropped connection (:func:`read_errors`)
            is raised as it is and a throttling or 5xx answer as a :class:`RetryableError`,
            for the loop to retry.
        as_read: the error is a :class:`ShardReadError`, with this before the reason when the
            translation is another kind (``"resuming the read failed"``).
        as_upload: the error is an :class:`UploadError` with this before the reason
            (``"uploading part 3 failed: S3 upload failed"``).
    """
    try:
        yield
    except Exception as exc:
        if retry:
            if isinstance(exc, read_errors()):
                raise
            if (transient := retryable(exc)) is not None:
                raise transient from exc
        if as_upload is not None:
            raise upload_error(exc, translate, url=url, doing=as_upload) from exc
        error = translate(exc, url=url, offset=offset)
        if as_read is not None and not isinstance(error, ShardReadError):
            error = ShardReadError(f"{as_read}: {error.reason}", url=url, offset=offset)
        if error is exc:
            raise
        raise error from exc
