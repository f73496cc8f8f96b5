"""The GCS side of parallel ranged reads (``GcsConfig.prefetch = N``).

A first media GET of ``Range: bytes=0-(part-1)`` learns the object's size (``Content-Range``)
and generation (``X-Goog-Generation``); its body becomes part 0. Every other part is a ranged
media GET with ``generation=G``, so a replaced object answers 404 and the read raises
:class:`ShardReadError` naming both generations. An endpoint that ignores ``Range`` falls back
to one streaming GET. The parts are read in order by
:class:`~wds_cloud.openers.streams.prefetch.PrefetchReader`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wds_cloud.openers.gcs.errors import DEFAULT_ENDPOINT
from wds_cloud.openers.gcs.read import MediaFetch, read_errors
from wds_cloud.openers.streams.backoff import RetryPolicy
from wds_cloud.openers.streams.prefetch import PrefetchReader, probe_first
from wds_cloud.openers.streams.resumable import Opened
from wds_cloud.openers.streams.throttle import limiter_for

if TYPE_CHECKING:
    from wds_cloud.openers.gcs.config import GcsAccess, GcsConfig
    from wds_cloud.urls import ObjectUrl


class GcsPrefetchReader(PrefetchReader):
    """A :class:`PrefetchReader` that says which generation it reads, like ``GcsReader``."""

    @property
    def generation(self) -> int | None:
        """The object generation every part is pinned to."""
        return self.version  # type: ignore[no-any-return]


def open_prefetching(
    access: GcsAccess, cfg: GcsConfig, url: str, parsed: ObjectUrl, wanted: Any
) -> GcsPrefetchReader | None:
    """A :class:`GcsPrefetchReader` over ``url``, or None to stream it with one GET instead.

    Args:
        access: the opener's client, media session, timeouts and error translation.
        cfg: the resolved config of this call (``prefetch``, ``prefetch_chunk``, retries).
        url: ``gs://`` URL.
        parsed: ``url`` parsed.
        wanted: a generation asked for by the caller, or None for the live object.

    Raises:
        ShardNotFoundError: no such object or bucket.
    """
    chunk = int(cfg.prefetch_chunk or 1)
    probe = MediaFetch(access, url, parsed, wanted)
    probed = probe_first(probe, chunk)
    if probed is None:
        return None
    first, total = probed
    if probe.generation is None:
        first.body.close()  # no generation to pin the parts to: stream the object instead
        return None
    generation = probe.generation

    def span(start: int, end: int) -> Opened:
        fetch = MediaFetch(access, url, parsed, generation)
        fetch.generation = generation  # pinned: a 404 means "replaced", not "missing"
        return fetch.span(start, end)

    return GcsPrefetchReader(
        url=url,
        size=total,
        span=span,
        first=first,
        parts=max(1, int(cfg.prefetch or 1)),
        part_size=chunk,
        policy=RetryPolicy.from_config(cfg),
        retry_on=read_errors(),
        explain=probe.explain,
        version=generation,
        name="wds-gcs-prefetch",
        limiter=limiter_for(cfg.endpoint or DEFAULT_ENDPOINT),
    )
