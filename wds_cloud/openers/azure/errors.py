"""The one place that maps azure-storage-blob / azure-core / HTTP errors to ours.

:func:`translate_error` has the signature every backend's errors module shares
(``translate_error(exc, *, url, offset=None)``, plus the endpoint as a keyword). Blob GETs are
made on a ``requests`` session of our own (:mod:`wds_cloud.openers.azure.read`); their non-2xx
answers become :class:`AzureStatusError` first, which carries the ``x-ms-error-code``.
"""

from __future__ import annotations

import http.client

from wds_cloud.errors import ShardError, ShardNotFoundError, ShardOpenError, ShardReadError
from wds_cloud.openers.streams.resumable import NETWORK_ERRORS

try:
    import requests
    import urllib3
    from azure.core import exceptions as aexc

    HAVE_SDK = True
except ImportError:  # pragma: no cover - exercised only without the extra
    HAVE_SDK = False

__all__ = ["AzureStatusError", "read_errors", "translate_error"]

_MISSING = {"BlobNotFound", "ContainerNotFound", "ResourceNotFound"}
_DENIED = {
    "AuthenticationFailed",
    "AuthorizationFailure",
    "AuthorizationPermissionMismatch",
    "InsufficientAccountPermissions",
    "NoAuthenticationInformation",
}


class AzureStatusError(Exception):
    """A blob GET answered with an error status.

    Attributes:
        status: the HTTP status.
        code: Azure's ``x-ms-error-code`` (``BlobNotFound``), or ``""``.
    """

    def __init__(self, status: int, code: str, message: str = "") -> None:
        super().__init__(
            f"Azure answered {status} {code}".rstrip() + (f": {message}" if message else "")
        )
        self.status = status
        self.code = code


def read_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean "the connection or the body stream dropped"."""
    extra: tuple[type[BaseException], ...] = (http.client.HTTPException,)
    if HAVE_SDK:
        extra += (
            requests.RequestException,
            urllib3.exceptions.HTTPError,
            aexc.ServiceRequestError,
            aexc.ServiceResponseError,
        )
    return NETWORK_ERRORS + extra


def _status_and_code(exc: BaseException) -> tuple[int | None, str]:
    if isinstance(exc, AzureStatusError):
        return exc.status, exc.code
    if HAVE_SDK and isinstance(exc, aexc.HttpResponseError):
        return exc.status_code, str(getattr(exc, "error_code", None) or "")
    return None, ""


def translate_error(
    exc: BaseException,
    /,
    *,
    url: str,
    offset: int | None = None,
    endpoint: str = "the Azure Blob endpoint",
) -> ShardError:
    """The :class:`ShardError` for what the SDK or the HTTP layer raised.

    Args:
        exc: the exception (a :class:`ShardError` is returned as it is).
        url: the ``az://`` URL involved.
        offset: byte offset in the blob, when known.
        endpoint: the Blob endpoint, named when it cannot be reached.

    Returns:
        The exception to raise (``raise translate_error(...) from exc``).
    """
    if isinstance(exc, ShardError):
        return exc
    status, code = _status_and_code(exc)
    kind: type[ShardError] = ShardOpenError
    reason = _first_line(exc)
    if code in _MISSING or status == 404:
        kind = ShardNotFoundError
        what = {"ContainerNotFound": "container does not exist"}.get(code, "not found")
        message = f"{what}: {reason}"
    elif code == "ConditionNotMet" or status == 412:
        kind = ShardReadError
        message = f"blob changed while it was being read (its ETag no longer matches): {reason}"
    elif code in _DENIED or status in (401, 403):
        message = f"access denied by Azure: {reason}"
    elif HAVE_SDK and isinstance(exc, aexc.ClientAuthenticationError):
        message = f"Azure credentials could not be used: {reason}"
    elif status is not None:
        message = f"Azure request failed ({status} {code}): {reason}".replace(" )", ")")
    elif isinstance(exc, TimeoutError) or (HAVE_SDK and isinstance(exc, requests.Timeout)):
        message = f"timed out talking to the Azure endpoint {endpoint}: {reason}"
    elif HAVE_SDK and isinstance(exc, aexc.ServiceRequestError | requests.ConnectionError):
        message = f"cannot connect to the Azure endpoint {endpoint}: {reason}"
    elif isinstance(exc, read_errors()):
        message = f"the connection to the Azure endpoint {endpoint} broke: {reason}"
    else:
        message = f"Azure error: {type(exc).__name__}: {reason}"
    return kind(message, url=url, offset=offset)


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's message (an SDK's goes on with XML and request ids)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else repr(exc)
