"""The Azure side of parallel ranged reads (``AzureConfig.prefetch = N``).

A first GET of ``Range: bytes=0-(part-1)`` learns the blob's size (``Content-Range``) and ETag;
its body becomes part 0. Every other part is a ranged GET with ``If-Match: ETAG``, so a blob
rewritten meanwhile answers 412 and the read raises :class:`ShardReadError`. An empty blob or an
answer without a range falls back to one streaming GET. The parts are read in order by
:class:`~wds_cloud.openers.streams.prefetch.PrefetchReader`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wds_cloud.openers.azure.errors import read_errors
from wds_cloud.openers.azure.read import BlobFetch
from wds_cloud.openers.streams.backoff import RetryPolicy
from wds_cloud.openers.streams.prefetch import PrefetchReader, probe_first
from wds_cloud.openers.streams.resumable import Opened
from wds_cloud.openers.streams.throttle import limiter_for

if TYPE_CHECKING:
    from wds_cloud.openers.azure.config import AzureAccess, AzureConfig, BlobUrl


class AzurePrefetchReader(PrefetchReader):
    """A :class:`PrefetchReader` that says which ETag it reads, like ``AzureReader``."""

    @property
    def etag(self) -> str | None:
        """The ETag every part is pinned to."""
        return str(self.version) if self.version is not None else None


def open_prefetching(
    access: AzureAccess, cfg: AzureConfig, url: str, parsed: BlobUrl
) -> AzurePrefetchReader | None:
    """An :class:`AzurePrefetchReader` over ``url``, or None to stream it with one GET.

    Args:
        access: the opener's session, URL signer, headers, timeouts and error translation.
        cfg: the resolved config of this call (``prefetch``, ``prefetch_chunk``, retries).
        url: ``az://`` URL.
        parsed: ``url`` parsed.

    Raises:
        ShardNotFoundError: no such blob or container.
    """
    chunk = int(cfg.prefetch_chunk or 1)
    probe = BlobFetch(access, url, parsed, None)
    probed = probe_first(probe, chunk)
    if probed is None:
        return None
    first, total = probed
    etag = probe.etag
    if etag is None:
        first.body.close()  # nothing to pin the parts to: stream the blob instead
        return None

    def span(start: int, end: int) -> Opened:
        return BlobFetch(access, url, parsed, etag).span(start, end)

    return AzurePrefetchReader(
        url=url,
        size=total,
        span=span,
        first=first,
        parts=max(1, int(cfg.prefetch or 1)),
        part_size=chunk,
        policy=RetryPolicy.from_config(cfg),
        retry_on=read_errors(),
        explain=probe.explain,
        version=etag,
        name="wds-azure-prefetch",
        limiter=limiter_for(access.blob_url(parsed.container, parsed.key)),
    )
