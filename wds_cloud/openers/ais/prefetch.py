"""The AIStore side of parallel ranged reads (``AisConfig.prefetch = N``).

A first GET of ``Range: bytes=0-(part-1)`` learns the object's size (``Content-Range``) and its
checksum (``Ais-Checksum-Value``); its body becomes part 0. Every other part is a ranged GET
whose answer must carry the same checksum, so a replaced object raises
:class:`ShardReadError` (the SDK exposes no request-side version pin for plain GETs; the check
is on the answer). Reads through an inline ETL (not byte-addressable) and clusters that ignore
``Range`` fall back to one streaming GET. The parts are read in order by
:class:`~wds_cloud.openers.streams.prefetch.PrefetchReader`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wds_cloud.openers.ais.read import Fetcher
from wds_cloud.openers.streams.backoff import RetryPolicy
from wds_cloud.openers.streams.prefetch import PrefetchReader, probe_first
from wds_cloud.openers.streams.resumable import Opened
from wds_cloud.openers.streams.throttle import limiter_for

if TYPE_CHECKING:
    from wds_cloud.openers.ais.config import AisConfig, AisTarget
    from wds_cloud.openers.ais.read import AisAccess


def open_prefetching(access: AisAccess, cfg: AisConfig, target: AisTarget) -> PrefetchReader | None:
    """A :class:`PrefetchReader` over ``target``, or None to stream it with one GET instead.

    Args:
        access: the opener's clients, settings and error translation.
        cfg: the resolved config of this call (``prefetch``, ``prefetch_chunk``).
        target: the parsed URL.

    Raises:
        ShardNotFoundError: no such object or bucket.
    """
    if target.etl:
        return None
    chunk = int(cfg.prefetch_chunk or 1)
    probe = Fetcher(access, target)
    probed = probe_first(probe, chunk)
    if probed is None:
        return None
    first, total = probed
    checksum = probe.checksum

    def span(start: int, end: int) -> Opened:
        return Fetcher(access, target).pinned(checksum).span(start, end)

    return PrefetchReader(
        url=target.url,
        size=total,
        span=span,
        first=first,
        parts=max(1, int(cfg.prefetch or 1)),
        part_size=chunk,
        policy=RetryPolicy.from_config(cfg),
        retry_on=probe.retry_on,
        explain=probe.explain,
        version=checksum,
        name="wds-ais-prefetch",
        limiter=limiter_for(str(cfg.endpoint)),
    )
