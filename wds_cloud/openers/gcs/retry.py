"""Retries and timeouts of the GCS backend, from a resolved :class:`GcsConfig`.

Object reads retry in the one read loop (``RetryPolicy.from_config(config)``, with
:func:`media_timeout` per socket read); metadata, listing and upload requests go through the SDK with :func:`sdk_retry` and
:func:`request_timeout`.
"""

from __future__ import annotations

from typing import Any

from wds_cloud.openers.gcs.config import GcsConfig
from wds_cloud.openers.gcs.errors import transient
from wds_cloud.openers.streams.backoff import RetryPolicy

__all__ = ["media_timeout", "request_timeout", "sdk_retry"]


def request_timeout(config: GcsConfig) -> tuple[float, float]:
    """``(connect, read)`` seconds of metadata, listing and upload requests."""
    return (float(config.connect_timeout or 10), float(config.read_timeout or 20))


def media_timeout(config: GcsConfig) -> tuple[float, float]:
    """``(connect, read)`` seconds of object reads: the read clipped to the stall deadline."""
    connect, read = request_timeout(config)
    return connect, RetryPolicy.from_config(config).read_timeout(read)


def sdk_retry(config: GcsConfig) -> Any:
    """The SDK retry policy for metadata, listing and upload requests (None: no retries).

    At most ``retries`` transient failures (connection errors, timeouts, 429, 5xx) are
    retried per call (per upload for writers), with exponential backoff from ``backoff``
    up to ``max_backoff`` (5 s); there is no overall deadline, so a slow but healthy request is never cut.
    """
    retries = int(config.retries or 0)
    if not retries:
        return None
    from google.api_core.retry import Retry

    budget = [retries]

    def predicate(exc: BaseException) -> bool:
        if not transient(exc):
            return False
        budget[0] -= 1
        return budget[0] >= 0

    backoff = float(config.backoff or 0.0)
    delays: dict[str, Any] = {"initial": backoff, "maximum": config.max_backoff, "multiplier": 2.0}
    try:
        return Retry(predicate=predicate, timeout=None, **delays)
    except TypeError:  # google-api-core before "timeout" called the overall limit "deadline"
        return Retry(predicate=predicate, deadline=None, **delays)
