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

__all__ = ["AisTranslate", "translate_error"]


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
    if isinstance(exc, ais_errors.AISError):
        status = exc.status_code
        cls = ShardNotFoundError if status == 404 else ShardOpenError
        return cls(f"AIStore answered {status} ({where}): {_message(exc)}", url=url, offset=offset)
    if isinstance(exc, (requests.ConnectionError, requests.Timeout)):
        return ShardOpenError(
            f"cannot reach AIStore at {endpoint} ({action}): {exc}", url=url, offset=offset
        )
    return ShardOpenError(f"{where} failed: {type(exc).__name__}: {exc}", url=url, offset=offset)
