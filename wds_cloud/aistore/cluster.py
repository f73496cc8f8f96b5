"""The one AIStore job client that dSort and the offline transforms share: how a call reaches
the cluster and waits for its job (:class:`JobOptions`, whose SDK client is the AIStore opener's,
so its token, timeouts and retries apply), the SDK's request errors, the cluster's message in an
error, and the times a job status reports.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wds_cloud.errors import ConfigError
from wds_cloud.settings import env_first

if TYPE_CHECKING:
    from wds_cloud.openers.ais.opener import AisConfig


@dataclass(frozen=True)
class JobOptions:
    """How a dSort or offline-ETL call reaches the cluster and waits for its job.

    The public functions (``dsort.start``, ``dsort.wait``, ``reshard_via_dsort``,
    ``start_transform``, ``wait_transform``, ...) take these as keyword arguments, build one
    and pass it on.

    Attributes:
        client: an ``aistore.sdk.Client``; None: the AIStore opener's client for ``config``.
        endpoint: the AIStore URL (default: ``config``'s, else ``WDS_CLOUD_AIS_ENDPOINT`` /
            ``AIS_ENDPOINT``).
        config: an :class:`~wds_cloud.openers.ais.opener.AisConfig` (token, timeouts,
            retries); default: one from the settings (``WDS_CLOUD_AIS_*`` and the ``AIS_*``
            variables, see :data:`~wds_cloud.openers.ais.config.AIS_SETTINGS`).
        timeout: seconds to wait for the job before giving up (the job keeps running).
        progress: show a progress bar on stderr while waiting.
        poll_interval: seconds between status requests while waiting.
    """

    client: Any = None
    endpoint: str | None = None
    config: AisConfig | None = None
    timeout: float = 3600.0
    progress: bool = True
    poll_interval: float = 1.0

    def sdk_client(self) -> Any:
        """The SDK client: :attr:`client`, else the AIStore opener's (token, timeouts, retries).

        Raises:
            ConfigError: no client, endpoint, config nor
                ``WDS_CLOUD_AIS_ENDPOINT``/``AIS_ENDPOINT``.
        """
        if self.client is not None:
            return self.client
        from wds_cloud.openers.ais.config import AIS_SETTINGS
        from wds_cloud.openers.ais.opener import AisConfig, AisOpener

        config, endpoint = self.config, self.endpoint
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

    def connected(self) -> JobOptions:
        """These options with :attr:`client` made, so that the calls they are passed to share
        one client (starting a job, then waiting for it).

        Raises:
            ConfigError: as :meth:`sdk_client`.
        """
        if self.client is not None:
            return self
        return dataclasses.replace(self, client=self.sdk_client())


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
