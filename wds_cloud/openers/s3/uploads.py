"""Incomplete S3 multipart uploads: list them under a prefix and abort them.

A :class:`~wds_cloud.openers.s3.write.S3Writer` that is killed (SIGKILL, OOM, a lost node)
before ``close()`` or ``abort()`` leaves its multipart upload open: nothing is visible under the
key, but the uploaded parts are stored, and billed, until the upload is aborted. These
functions find and abort such uploads with the S3 opener's own client and configuration; an S3
lifecycle rule (``AbortIncompleteMultipartUpload``, see ``docs/s3.md``) does it automatically.

S3 does not record which program started an upload, so every incomplete upload under the
prefix is listed, whoever started it; ``older_than`` leaves recent (possibly live) ones alone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from wds_cloud.errors import ConfigError
from wds_cloud.openers.s3.config import split_s3_url
from wds_cloud.openers.s3.errors import error_code, s3_request
from wds_cloud.openers.s3.opener import S3Opener

__all__ = ["IncompleteUpload", "abort_upload", "list_incomplete_uploads"]


@dataclass(frozen=True)
class IncompleteUpload:
    """One multipart upload that was started and neither completed nor aborted.

    Attributes:
        url: ``s3://bucket/key`` the upload would have created.
        upload_id: S3's id of the upload.
        initiated: when it was started (UTC), when the server says.
    """

    url: str
    upload_id: str
    initiated: dt.datetime | None

    @property
    def bucket(self) -> str:
        """The bucket."""
        return split_s3_url(self.url)[0]

    @property
    def key(self) -> str:
        """The object key."""
        return split_s3_url(self.url)[1]

    def age(self, now: dt.datetime | None = None) -> float | None:
        """Seconds since the upload started, or None when unknown."""
        if self.initiated is None:
            return None
        return ((now or dt.datetime.now(dt.UTC)) - self.initiated).total_seconds()

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible form."""
        when = self.initiated.isoformat() if self.initiated else None
        return {"url": self.url, "upload_id": self.upload_id, "initiated": when}


def _utc(value: Any) -> dt.datetime | None:
    if not isinstance(value, dt.datetime):
        return None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _pages(opener: S3Opener, bucket: str, prefix: str, url: str) -> Iterator[dict[str, Any]]:
    client = opener.client()
    extra = opener.config.request_args()
    paginator = client.get_paginator("list_multipart_uploads")
    size = opener.config.list_page_size or 1000
    with s3_request(opener.translate_error, url=url):
        yield from paginator.paginate(
            Bucket=bucket, Prefix=prefix, PaginationConfig={"PageSize": size}, **extra
        )


def list_incomplete_uploads(
    url: str,
    *,
    opener: S3Opener | None = None,
    older_than: float | None = None,
    now: dt.datetime | None = None,
) -> list[IncompleteUpload]:
    """Every incomplete multipart upload whose key starts with the prefix of ``url``.

    Args:
        url: ``s3://bucket/prefix`` (``s3://bucket`` for the whole bucket).
        opener: the S3 opener whose client and settings are used (default: configured from
            the environment, as the default registry's).
        older_than: only uploads started at least this many seconds ago.
        now: the reference time for ``older_than`` (default: the current time).

    Returns:
        The uploads sorted by URL, then start time; all pages are read.

    Raises:
        ShardNotFoundError: the bucket does not exist.
        ShardOpenError: access denied, endpoint unreachable, other request failures.
    """
    opener = opener or S3Opener()
    bucket, prefix = split_s3_url(url)
    found = []
    for page in _pages(opener, bucket, prefix, url):
        for item in page.get("Uploads", ()):
            upload = IncompleteUpload(
                url=f"s3://{bucket}/{item['Key']}",
                upload_id=str(item["UploadId"]),
                initiated=_utc(item.get("Initiated")),
            )
            age = upload.age(now)
            if older_than is not None and (age is None or age < older_than):
                continue
            found.append(upload)
    epoch = dt.datetime.min.replace(tzinfo=dt.UTC)
    found.sort(key=lambda u: (u.url, u.initiated or epoch, u.upload_id))
    return found


def abort_upload(upload: IncompleteUpload, *, opener: S3Opener | None = None) -> bool:
    """Abort one upload; its parts are deleted. Returns False when it was already gone.

    Raises:
        UploadError: the server refused (access denied, endpoint unreachable...).
    """
    opener = opener or S3Opener()
    extra = opener.config.request_args()
    doing = f"aborting multipart upload {upload.upload_id} failed"
    with s3_request(opener.translate_error, url=upload.url, as_upload=doing):
        try:
            opener.client().abort_multipart_upload(
                Bucket=upload.bucket, Key=upload.key, UploadId=upload.upload_id, **extra
            )
        except Exception as exc:
            if error_code(exc) == "NoSuchUpload":
                return False
            raise
    return True


def parse_duration(text: str) -> float:
    """``"90s"``, ``"30m"``, ``"12h"``, ``"7d"``, ``"2w"`` or plain seconds -> seconds.

    Raises:
        ConfigError: not a non-negative number with one of those units.
    """
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    raw = text.strip().lower()
    scale = units.get(raw[-1:]) if raw else None
    number = raw[:-1] if scale else raw
    try:
        value = float(number) * (scale or 1)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also NaN
        raise ConfigError(
            f"bad duration {text!r}: use a number with s, m, h, d or w (e.g. 36h, 7d)"
        )
    return value
