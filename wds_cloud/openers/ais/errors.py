"""The one place that maps ``aistore`` SDK and ``requests`` errors to the wds_cloud tree.

:func:`translate_error` has the signature every backend's errors module shares
(``translate_error(exc, *, url, offset=None)``) plus AIStore's own context as keywords: the
endpoint, the action that failed (named in the message) and the inline ETL of the URL.
Readers receive it bound to the opener's endpoint (:class:`AisTranslate`).
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from wds_cloud.errors import ShardError, ShardNotFoundError, ShardOpenError

try:
    import requests
    from aistore.sdk import errors as ais_errors
except ImportError:  # pragma: no cover - exercised only without the extra
    ais_errors = None

__all__ = ["AUTH_HINT", "AisTranslate", "auth_problem", "describe", "translate_error"]

#: What to do about a 401: where wds_cloud reads the token from.
AUTH_HINT = "set AIS_AUTHN_TOKEN (or WDS_CLOUD_AIS_TOKEN) to a valid AuthN token"


class AisTranslate(Protocol):
    """:func:`translate_error` with the endpoint bound (what readers get)."""

    def __call__(
        self,
        exc: BaseException,
        /,
        *,
        url: str,
        offset: int | None = None,
        action: str = "GET",
        etl: str | None = None,
    ) -> ShardError: ...


def _message(exc: Any) -> str:
    """The ``message`` of AIStore's JSON error body (the raw text when it is not JSON)."""
    text = str(getattr(exc, "message", "") or exc)
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return str(value.get("message", text)) if isinstance(value, dict) else text


def auth_problem(exc: BaseException) -> str | None:
    """What a 401 or 403 from AIStore means and what to do about it; None for anything else.

    AIStore answers 401 "token required" when no token was sent, 401 "invalid token ..." when
    it cannot verify the one sent (expired, malformed, or signed by another AuthN), and 403
    when the token's user lacks the permission. The token itself is never quoted.
    """
    status = getattr(exc, "status_code", None)
    if ais_errors is None or not isinstance(exc, ais_errors.AISError) or status not in (401, 403):
        return None
    message = _message(exc)
    if status == 403:
        return f"the AuthN token's user is not allowed to do this (403: {message})"
    if message == "token required":
        return f"AIStore requires an AuthN token and none was sent (401): {AUTH_HINT}"
    return (
        f"AIStore rejected the AuthN token: expired, malformed or not issued by this cluster's "
        f"AuthN (401: {message}); {AUTH_HINT}"
    )


def describe(exc: BaseException) -> str:
    """One line about an SDK error: :func:`auth_problem`, else the status and AIStore's
    message, else the exception."""
    problem = auth_problem(exc)
    if problem is not None:
        return problem
    if ais_errors is not None and isinstance(exc, ais_errors.AISError):
        return f"AIStore answered {exc.status_code}: {_message(exc)}"
    return f"{type(exc).__name__}: {exc}"


def translate_error(
    exc: BaseException,
    /,
    *,
    url: str,
    offset: int | None = None,
    endpoint: str | None = None,
    action: str = "GET",
    etl: str | None = None,
) -> ShardError:
    """The :class:`ShardError` for what the SDK or ``requests`` raised.

    Args:
        exc: the exception.
        url: the ``ais://`` URL involved.
        offset: byte offset in the object, when known (kept on the error).
        endpoint: the cluster URL, named in the message.
        action: what failed (``"GET"``, ``"HEAD"``, ``"list"``...), named in the message.
        etl: the URL's inline ETL, if any: a 404 naming it means the ETL is missing.
    """
    where = f"{action} on AIStore at {endpoint}"
    not_found = (
        ais_errors.ErrObjNotFound,
        ais_errors.ErrBckNotFound,
        ais_errors.ErrRemoteBckNotFound,
    )
    if isinstance(exc, not_found):
        return ShardNotFoundError(f"not found ({where}): {_message(exc)}", url=url, offset=offset)
    if isinstance(exc, ais_errors.ErrETLNotFound) or (
        isinstance(exc, ais_errors.AISError)
        and exc.status_code == 404
        and etl
        and etl in exc.message
    ):
        return ShardOpenError(
            f"ETL {etl!r} does not exist or is not running ({where}): {_message(exc)}",
            url=url,
            offset=offset,
        )
    problem = auth_problem(exc)
    if problem is not None:
        return ShardOpenError(f"{problem} ({where})", url=url, offset=offset)
    if isinstance(exc, ais_errors.AISError):
        status = exc.status_code
        cls = ShardNotFoundError if status == 404 else ShardOpenError
        return cls(f"AIStore answered {status} ({where}): {_message(exc)}", url=url, offset=offset)
    if isinstance(exc, (requests.ConnectionError, requests.Timeout)):
        return ShardOpenError(
            f"cannot reach AIStore at {endpoint} ({action}): {exc}", url=url, offset=offset
        )
    return ShardOpenError(f"{where} failed: {type(exc).__name__}: {exc}", url=url, offset=offset)
