"""The one place that maps google-cloud-storage / google-auth / HTTP errors to ours.

:func:`translate_error` has the signature every backend's errors module shares
(``translate_error(exc, *, url, offset=None)``, plus the backend's own context as keywords:
here the endpoint). Readers and writers receive it bound to the opener's endpoint (a
:class:`~wds_cloud.openers.streams.resumable.TranslateError`). :func:`transient` says which SDK failures
the SDK retry policy (:mod:`wds_cloud.openers.gcs.retry`) sends again.
"""

from __future__ import annotations

from typing import Any

from wds_cloud.errors import ShardError, ShardNotFoundError, ShardOpenError
from wds_cloud.openers.gcs.read import read_errors

try:
    import requests
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as auth_exc
except ImportError:  # pragma: no cover - exercised only without the extra
    gexc = None  # type: ignore[assignment]

__all__ = ["DEFAULT_ENDPOINT", "transient", "translate_error"]

DEFAULT_ENDPOINT = "https://storage.googleapis.com"


def transient(exc: BaseException) -> bool:
    """Whether a failed SDK request may succeed when sent again."""
    if isinstance(exc, auth_exc.TransportError) and exc.args:
        inner = exc.args[0]
        return isinstance(inner, BaseException) and transient(inner)
    retried: tuple[type[BaseException], ...] = (
        gexc.TooManyRequests,
        gexc.InternalServerError,
        gexc.BadGateway,
        gexc.ServiceUnavailable,
        gexc.GatewayTimeout,
        *read_errors(),
    )
    return isinstance(exc, retried)


def translate_error(
    exc: BaseException,
    /,
    *,
    url: str,
    offset: int | None = None,
    endpoint: str = DEFAULT_ENDPOINT,
) -> ShardError:
    """The :class:`ShardError` for what the SDK or the HTTP layer raised.

    Args:
        exc: the exception (a :class:`ShardError` is returned as it is).
        url: the ``gs://`` URL involved.
        offset: byte offset in the object, when known.
        endpoint: the API endpoint, named when it cannot be reached.

    Returns:
        The exception to raise (``raise translate_error(...) from exc``).
    """
    if isinstance(exc, ShardError):
        return exc
    sdk = gexc is not None
    if sdk and isinstance(exc, gexc.RetryError) and exc.cause is not None:
        exc = exc.cause  # the SDK gave up retrying: report what actually went wrong
    response: Any = getattr(exc, "response", None)
    if (
        sdk
        and not isinstance(exc, gexc.GoogleAPICallError)
        and isinstance(getattr(response, "status_code", None), int)
        and response.status_code >= 400
    ):
        # the upload library's InvalidResponse: read GCS's own error from the answer
        try:
            exc = gexc.from_http_response(response)
        except Exception:
            pass
    kind: type[ShardError] = ShardOpenError
    if sdk and isinstance(exc, gexc.NotFound):
        kind = ShardNotFoundError
        message = f"not found: {exc.message}"
    elif sdk and isinstance(exc, gexc.Unauthorized | gexc.Forbidden):
        message = f"access denied by GCS: {exc.message}"
    elif sdk and isinstance(exc, auth_exc.GoogleAuthError):
        message = f"GCS credentials could not be used: {exc}"
    elif sdk and isinstance(exc, gexc.GoogleAPICallError):
        message = f"GCS request failed ({exc.code}): {exc.message}"
    elif sdk and isinstance(exc, requests.ConnectionError | ConnectionError):
        message = f"cannot connect to the GCS endpoint {endpoint}: {exc}"
    elif sdk and isinstance(exc, requests.Timeout | TimeoutError):
        message = f"timed out talking to the GCS endpoint {endpoint}: {exc}"
    elif sdk and isinstance(exc, read_errors()):
        message = f"the connection to the GCS endpoint {endpoint} broke: {exc}"
    else:
        message = f"GCS error: {type(exc).__name__}: {exc}"
    return kind(message, url=url, offset=offset)
