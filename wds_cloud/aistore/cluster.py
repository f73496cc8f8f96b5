"""The one AIStore job client that dSort and the offline transforms share: the SDK client
(the AIStore opener's, so its token, timeouts and retries apply), the SDK's request errors, the
cluster's message in an error, and the times a job status reports.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import TYPE_CHECKING, Any

from wds_cloud.errors import ConfigError
from wds_cloud.settings import env_first

if TYPE_CHECKING:
    from wds_cloud.openers.ais.opener import AisConfig


def sdk_client(client: Any, endpoint: str | None, config: AisConfig | None = None) -> Any:
    """The SDK client: the one given, else the AIStore opener's (token, timeouts, retries).

    Raises:
        ConfigError: no client, endpoint, config nor ``WDS_CLOUD_AIS_ENDPOINT``/``AIS_ENDPOINT``.
    """
    if client is not None:
        return client
    from wds_cloud.openers.ais.config import AIS_SETTINGS
    from wds_cloud.openers.ais.opener import AisConfig, AisOpener

    if config is None:
        if not (endpoint or env_first(AIS_SETTINGS.variables("endpoint"))):
            raise ConfigError(
                "no AIStore endpoint: pass endpoint=, config= or client=, or set "
                "WDS_CLOUD_AIS_ENDPOINT or AIS_ENDPOINT"
            )
        config = AisConfig(endpoint=endpoint or None)
    elif endpoint:
        config = dataclasses.replace(config, endpoint=endpoint)
    return AisOpener(config).client()


def error_text(exc: Exception) -> str:
    """The cluster's message in an SDK error (AIStore's JSON ``message`` when there is one);
    for a 401/403, what it means and where the token comes from
    (:func:`wds_cloud.openers.ais.errors.auth_problem`)."""
    from wds_cloud.openers.ais.errors import auth_problem

    problem = auth_problem(exc)
    if problem is not None:
        return problem
    text = str(getattr(exc, "message", "") or exc)
    try:
        text = json.loads(text).get("message", text)
    except (ValueError, AttributeError):
        pass
    return str(text)


def sdk_errors() -> tuple[type[Exception], ...]:
    """The SDK's request errors (empty when the SDK is missing)."""
    try:
        import requests
        from aistore.sdk.errors import APIRequestError
    except ImportError:  # pragma: no cover - the caller passed its own client
        return ()
    return (APIRequestError, requests.RequestException)


def cluster_time(value: str | None) -> float | None:
    """A time as AIStore reports it (Go's ``time.Time`` in JSON) in seconds since the epoch;
    None for Go's zero time, an empty value, or one that does not parse."""
    if not value or value.startswith("0001-01-01"):
        return None
    value = re.sub(r"(\.\d{6})\d+", r"\1", value).replace("Z", "+00:00")
    try:
        from datetime import datetime

        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None
