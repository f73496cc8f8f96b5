"""Undo what a failed ``create`` wrote: the shards it committed and the directories it made.

The openers can create objects but have no ``delete``; removing a committed remote shard goes
through the backend's own client (the opener's, so its endpoint and credentials apply).
"""

from __future__ import annotations

import logging
import os

from wds_cloud.openers.local import url_to_path
from wds_cloud.openers.registry import default_registry, url_scheme
from wds_cloud.redact import redact_url

_LOG = logging.getLogger(__name__)

__all__ = ["make_dirs", "remove_dirs", "remove_url", "undo"]


def make_dirs(path: str, made: list[str]) -> None:
    """``os.makedirs(path)``, appending every directory it created to ``made`` (outermost first)."""
    missing: list[str] = []
    head = os.path.abspath(path) if path else ""
    while head and not os.path.lexists(head):
        missing.append(head)
        parent = os.path.dirname(head)
        if parent == head:
            break
        head = parent
    for directory in reversed(missing):
        os.mkdir(directory)
        made.append(directory)


def remove_dirs(made: list[str]) -> list[str]:
    """Remove the directories in ``made`` (innermost first) that are empty; return the rest."""
    kept = []
    for directory in reversed(made):
        try:
            os.rmdir(directory)
        except OSError:
            kept.append(directory)
    return kept


def remove_url(url: str) -> None:
    """Delete one committed shard (a local file, or an ``s3://``, ``gs://``, ``az://``, ``ais://``
    object).

    Raises:
        OSError: the local file cannot be removed.
        ValueError: the scheme has no way to delete here (``pipe:``, ``http``...).
        Exception: whatever the backend's client raises.
    """
    scheme = url_scheme(url)
    if scheme == "file":
        os.remove(url_to_path(url))
        return
    opener = default_registry().for_url(url)
    if scheme == "s3":
        from wds_cloud.openers.s3.config import split_s3_url

        bucket, key = split_s3_url(url)
        opener.client().delete_object(Bucket=bucket, Key=key)
    elif scheme in ("gs", "gcs"):
        from wds_cloud.urls import parse_object_url

        parsed = parse_object_url(url)
        opener.client(url).bucket(parsed.bucket).blob(parsed.key).delete()
    elif scheme in ("az", "azure", "abfs", "abfss"):
        from wds_cloud.openers.azure.config import parse_blob_url

        blob = parse_blob_url(url)
        opener.service(url).get_blob_client(blob.container, blob.key).delete_blob()
    elif scheme == "ais":
        target = opener.target(url)
        opener.client().bucket(target.bucket, provider=target.provider).object(target.name).delete()
    else:
        raise ValueError(f"cannot delete {scheme}: targets")


def undo(shards: list[str], made: list[str]) -> list[str]:
    """Remove ``shards`` and then the empty directories in ``made``; return what is left.

    Never raises: every failure is logged as a warning and its URL is returned.
    """
    left = []
    for url in shards:
        try:
            remove_url(url)
        except Exception as exc:
            _LOG.warning("could not remove %s: %s", redact_url(url), exc)
            left.append(url)
    return left + remove_dirs(made)
