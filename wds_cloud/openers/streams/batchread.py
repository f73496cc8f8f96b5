"""Batch reads built on ranged reads: coalesced, concurrent, in order, for every backend.

:func:`read_ranges` serves many byte ranges (of one or many objects) with one backend's
``read_range``: the ranges are coalesced by :func:`~wds_cloud.openers.streams.batchplan.plan_fetches`
(ranges of one object closer than ``coalesce_gap`` bytes read as one, spans capped at
``max_span``), the reads run on at most ``concurrency`` threads of a per-process pool, and the
bytes come back in the order asked. Each read is the backend's ``read_range`` (resumed by the one
retry loop, :mod:`wds_cloud.openers.streams.resumable`), so a short or missing range raises its
:class:`~wds_cloud.errors.ShardReadError` naming the URL and offset; the first failure is
raised and the reads not yet started are cancelled.

:class:`RangeBatchReads` gives an opener with ``read_range`` the
:class:`~wds_cloud.openers.capabilities.BatchReader` method ``read_batch`` with this one
implementation (the s3, gs and http openers inherit it). :func:`read_batch` serves a batch
through a registry: each object's opener's own ``read_batch`` where it has one, else this path.

Settings (:class:`BatchConfig`; argument > ``WDS_CLOUD_BATCH_<FIELD>`` > default):
``concurrency`` (reads in flight, default 32), ``coalesce_gap`` (bytes, default 64 KiB; -1 never
merges), ``max_span`` (bytes of one merged read, default 8 MiB) and ``readahead`` (whole batches
read ahead by :meth:`~wds_cloud.index.indexed.IndexedWebDataset.iter_batches`, default 2).
``docs/indexes.md`` ("Batch reads") has the measurement behind the defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wds_cloud.openers.capabilities import BatchReader, RangeReader, RangeRequest
from wds_cloud.openers.clients import ProcessLocal
from wds_cloud.openers.streams.batchplan import plan_fetches, slices
from wds_cloud.settings import BYTES, INT, ConfigTable, Field, at_least

if TYPE_CHECKING:
    from wds_cloud.openers.registry import OpenerRegistry

__all__ = [
    "BATCH_SETTINGS",
    "BatchConfig",
    "RangeBatchReads",
    "batch_connections",
    "read_batch",
    "read_ranges",
]

#: Ranged reads in flight per batch by default.
DEFAULT_CONCURRENCY = 32
#: The most bytes between two ranges of one object that are read (and dropped) to serve both
#: with one request.
DEFAULT_COALESCE_GAP = 64 << 10
#: The most bytes one merged read spans (a single longer range is still read whole).
DEFAULT_MAX_SPAN = 8 << 20
#: Whole batches read ahead by ``IndexedWebDataset.iter_batches``.
DEFAULT_BATCH_READAHEAD = 2

BATCH_SETTINGS = ConfigTable(
    section="BATCH",
    owner="BatchConfig",
    what="batch read",
    fields=(
        Field("concurrency", INT, DEFAULT_CONCURRENCY, checks=(at_least(1),)),
        Field("coalesce_gap", BYTES, DEFAULT_COALESCE_GAP, checks=(at_least(-1),)),
        Field("max_span", BYTES, DEFAULT_MAX_SPAN, checks=(at_least(1),)),
        Field("readahead", INT, DEFAULT_BATCH_READAHEAD, checks=(at_least(0),)),
    ),
)


@dataclass(frozen=True)
class BatchConfig:
    """How a batch of ranges is read; None fields come from ``WDS_CLOUD_BATCH_<FIELD>`` or the
    default (:meth:`resolved`).

    Attributes:
        concurrency: ranged reads in flight (at least 1).
        coalesce_gap: ranges of one object at most this many bytes apart are read with one
            request (the bytes between them read and dropped); 0 merges only touching ranges,
            -1 never merges.
        max_span: the most bytes one merged read spans.
        readahead: whole batches read ahead by ``IndexedWebDataset.iter_batches`` (0: none).
    """

    concurrency: int | None = None
    coalesce_gap: int | None = None
    max_span: int | None = None
    readahead: int | None = None

    def resolved(self, environ: Mapping[str, str] | None = None) -> BatchConfig:
        """Every None field from the environment or its default.

        Raises:
            ConfigError: a value that is not a number of the field's kind, or out of range.
        """
        return BATCH_SETTINGS.resolve(self, environ=environ)


def batch_connections(environ: Mapping[str, str] | None = None) -> int:
    """Connections a backend keeps per host for batch reads: the resolved ``concurrency``
    (``WDS_CLOUD_BATCH_CONCURRENCY`` or 32), so the reads of one batch find their connections
    kept alive by the next instead of opening (and handshaking) new ones."""
    return int(BatchConfig().resolved(environ).concurrency or DEFAULT_CONCURRENCY)


def _pools() -> dict[int, ThreadPoolExecutor]:
    return {}


_POOLS: ProcessLocal[dict[int, ThreadPoolExecutor]] = ProcessLocal()


def _pool(size: int) -> ThreadPoolExecutor:
    """This process's pool of ``size`` threads (made on first use; idle threads cost nothing)."""
    pools = _POOLS.get(_pools)
    pool = pools.get(size)
    if pool is None:
        pool = pools.setdefault(size, ThreadPoolExecutor(size, thread_name_prefix="wds-batch"))
    return pool


def read_ranges(
    read_range: Callable[[str, int, int], bytes],
    requests: Sequence[RangeRequest],
    config: BatchConfig | None = None,
) -> list[bytes]:
    """The bytes of every request, in order, read with ``read_range(url, offset, length)``:
    coalesced, at most ``config.concurrency`` reads at once (one read runs in the caller's
    thread, without the pool).

    Raises:
        ConfigError: a bad setting or range.
        ShardError: the first read that failed (the others not yet started are cancelled).
    """
    cfg = (config or BatchConfig()).resolved()
    assert cfg.coalesce_gap is not None and cfg.max_span is not None
    assert cfg.concurrency is not None
    fetches = plan_fetches(requests, gap=cfg.coalesce_gap, max_span=cfg.max_span)
    if len(fetches) <= 1 or cfg.concurrency == 1:
        data = [read_range(f.url, f.offset, f.length) for f in fetches]
        return slices(requests, fetches, data)
    pool = _pool(cfg.concurrency)
    futures: list[Future[bytes]] = [
        pool.submit(read_range, f.url, f.offset, f.length) for f in fetches
    ]
    try:
        data = [future.result() for future in futures]
    except BaseException:
        for future in futures:
            future.cancel()
        raise
    return slices(requests, fetches, data)


class RangeBatchReads:
    """``read_batch`` for an opener that has ``read_range``: coalesced concurrent ranged reads
    (:func:`read_ranges`), the one implementation the s3, gs and http openers share."""

    def read_batch(
        self: RangeReader,
        requests: Sequence[RangeRequest],
        *,
        batch: BatchConfig | None = None,
        **options: Any,
    ) -> list[bytes]:
        """The bytes of every request, in the order of ``requests``.

        Args:
            requests: ``(url, offset, length)`` ranges of this opener's objects.
            batch: concurrency and coalescing (None: ``WDS_CLOUD_BATCH_*`` or the defaults).
            **options: passed to every ``read_range`` (its per-call options).

        Raises:
            ShardReadError: a range the object does not have, naming the URL and offset.
            ShardError: the backend's other errors, as ``read_range`` raises them.
        """

        def one(url: str, offset: int, length: int) -> bytes:
            return self.read_range(url, offset, length, **options)

        return read_ranges(one, requests, batch)


def read_batch(
    registry: OpenerRegistry,
    requests: Sequence[RangeRequest],
    config: BatchConfig | None = None,
    **options: Any,
) -> list[bytes]:
    """The bytes of every request (of any objects, any backends), in order.

    The requests of each backend go to its opener's ``read_batch`` when it has its own (one
    AIStore GetBatch request), else through :func:`read_ranges` on the registry's
    ``read_range`` (the s3, gs and http openers' shared ``read_batch`` is that same path, with
    ``config``). ``options`` go to the backend's reads.

    Raises:
        ShardError: as the backends raise it.
    """
    from wds_cloud.openers.registry import url_scheme

    groups: dict[str, list[int]] = {}
    for i, r in enumerate(requests):
        groups.setdefault(url_scheme(r.url), []).append(i)
    out: list[bytes] = [b""] * len(requests)
    for positions in groups.values():
        mine = [requests[i] for i in positions]
        reader = registry.capability(mine[0].url, BatchReader)
        if reader is not None and not isinstance(reader, RangeBatchReads):
            got = reader.read_batch(mine, **options)
        else:

            def one(url: str, offset: int, length: int) -> bytes:
                return registry.read_range(url, offset, length, **options)

            got = read_ranges(one, mine, config)
        for i, blob in zip(positions, got, strict=True):
            out[i] = blob
    return out
