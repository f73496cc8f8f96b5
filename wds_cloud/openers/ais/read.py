"""The resumable GET behind :mod:`wds_cloud.openers.ais.opener`.

Imported only by :mod:`wds_cloud.openers.ais.opener` after the ``aistore`` SDK import succeeded. The
reader gets what it needs from the opener as an :class:`AisAccess`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import requests
import urllib3

from wds_cloud.errors import ShardError, ShardReadError
from wds_cloud.openers.ais.config import SDK_TIMEOUT, AisConfig, AisTarget
from wds_cloud.openers.ais.errors import AisTranslate
from wds_cloud.openers.streams.backoff import RetryPolicy
from wds_cloud.openers.streams.resumable import (
    NETWORK_ERRORS,
    Opened,
    RetryableError,
    Urllib3Body,
    content_range_total,
    fetch_span,
    first_answer,
    past_end,
    transient_error,
)

_TRANSIENT = (429, 500, 502, 503, 504)


@dataclass(frozen=True)
class AisAccess:
    """What an AIStore reader needs from its opener, passed explicitly.

    Attributes:
        client: the SDK client with SDK retries (the HEAD after a 416).
        read_client: the SDK client of object reads (one attempt per request).
        config: the opener's resolved settings (the read loop's policy).
        translate: the opener's error translation (endpoint bound).
    """

    client: Any
    read_client: Any
    config: AisConfig
    translate: AisTranslate


def read_timeouts(config: AisConfig) -> tuple[float, float]:
    """``(connect, read)`` seconds of object reads: the config's resolved ``timeout`` (0 is
    no limit), each clipped to the stall deadline so that no read waits forever."""
    timeout = SDK_TIMEOUT if config.timeout is None else config.timeout
    connect: float | None
    read: float | None
    if isinstance(timeout, tuple):
        connect, read = (float(t) or None for t in timeout)
    else:
        connect = read = float(timeout) or None
    policy = RetryPolicy.from_config(config)
    return policy.read_timeout(connect), policy.read_timeout(read)


def make_read_client(config: AisConfig) -> Any:
    """An SDK ``Client`` for object reads: no SDK retries, timeouts from :func:`read_timeouts`."""
    from aistore.sdk import Client
    from aistore.sdk.retry_config import RetryConfig
    from tenacity import Retrying, stop_after_attempt

    once = RetryConfig(
        http_retry=urllib3.Retry(total=0, connect=0, read=0, status=0, redirect=0),
        network_retry=Retrying(stop=stop_after_attempt(1), reraise=True),
    )
    return Client(
        str(config.endpoint),
        timeout=read_timeouts(config),
        retry_config=once,
        token=config.token,
    )


class Fetcher:
    """``fetch(offset) -> Opened`` for :class:`ResumableReader` (see ``AisOpener.open``).

    Without an ETL a resume (and the first GET of ``AisOpener.open_at``) is ranged and the
    checksum of the first answer is compared; through an ETL (AIStore ignores ``Range`` there,
    and the transformed object has other offsets than the stored one) the object is requested
    again from its start and the reader skips the bytes before the position.
    """

    retry_on: tuple[type[BaseException], ...] = (
        *NETWORK_ERRORS,
        requests.RequestException,
        urllib3.exceptions.HTTPError,
    )

    def __init__(self, access: AisAccess, target: AisTarget) -> None:
        self.access = access
        self.target = target
        self.checksum: str | None = None
        self._answered = False
        self.end: int | None = None  # set by span(): every GET stops there
        self.content_range: str | None = None  # of the last answer

    def pinned(self, checksum: str | None) -> Fetcher:
        """This fetcher, its first answer already seen with ``checksum`` (a prefetch part):
        every answer must carry the same checksum."""
        self.checksum = checksum
        self._answered = True
        return self

    def span(self, first: int, end: int) -> Opened:
        """The ``RangeFetch`` of :func:`~wds_cloud.openers.streams.resumable.read_span`: bytes
        ``first .. end - 1`` (``Range: bytes=first-(end-1)``), checksum pinned after the first
        answer."""
        return fetch_span(self, first, end, self.target.url)

    def explain(self, exc: BaseException) -> str:
        """The text of the final error for ``exc`` (the reader's ``explain``)."""
        if isinstance(exc, RetryableError):
            return str(exc)
        return self._error(exc, "GET").reason

    def _error(self, exc: BaseException, action: str) -> ShardError:
        return self.access.translate(exc, url=self.target.url, action=action, etl=self.target.etl)

    def _get(self, offset: int) -> Any:
        from aistore.sdk.etl import ETLConfig

        t = self.target
        kwargs: dict[str, Any] = {}
        if t.etl:
            kwargs["etl"] = ETLConfig(t.etl, t.etl_args)
        elif self.end is not None:
            kwargs["byte_range"] = f"bytes={offset}-{self.end - 1}"
        elif offset:
            kwargs["byte_range"] = f"bytes={offset}-"
        bucket = self.access.read_client.bucket(t.bucket, provider=t.provider)
        return bucket.object(t.name).get_reader(**kwargs).raw()

    def __call__(self, offset: int) -> Opened:
        from aistore.sdk import errors as ais_errors

        try:
            raw = self._get(offset)
        except self.retry_on:
            raise
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            if status == 416 and not self._answered and self.end is None and offset:
                return self._past_end(offset, exc)
            if isinstance(exc, ais_errors.ErrGETConflict) or (
                isinstance(exc, ais_errors.AISError) and status in _TRANSIENT
            ):
                raise transient_error(f"AIStore answered {status}: {exc}", status) from exc
            action = f"GET from byte {offset}" if self._answered else "GET"
            raise self._error(exc, action) from exc
        length = raw.headers.get("Content-Length")
        self.content_range = raw.headers.get("Content-Range")
        if raw.status == 200:
            size = int(length) if length is not None else None
        else:  # a ranged answer: the object's size is in Content-Range
            size = content_range_total(self.content_range)
        if not self._answered:
            self._answered = True
            self.checksum = raw.headers.get("Ais-Checksum-Value")
            return first_answer(raw, self.target.url, offset, raw.status, size)
        if self.target.etl:
            return Opened(Urllib3Body(raw), 0, size)
        checksum = raw.headers.get("Ais-Checksum-Value")
        if self.checksum and checksum and checksum != self.checksum:
            raw.close()
            raise ShardReadError(
                f"object changed while it was read (checksum {self.checksum} -> {checksum})",
                url=self.target.url,
                offset=offset,
            )
        return Opened(Urllib3Body(raw), offset if raw.status == 206 else 0, size)

    def _past_end(self, offset: int, exc: Exception) -> Opened:
        """A first GET from ``offset`` refused with 416: empty at the object's end, else an
        error naming its size (from a HEAD)."""
        t = self.target
        try:
            bucket = self.access.client.bucket(t.bucket, provider=t.provider)
            size = bucket.object(t.name).head().size
        except Exception as head_exc:
            raise self._error(head_exc, "HEAD") from exc
        return past_end(t.url, offset, int(size))
