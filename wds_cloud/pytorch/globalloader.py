"""``make_loader(..., order="global")``: a global shuffle of an indexed dataset, a batch at a
time, resumed exactly (and elastically) from a cursor (``docs/indexes.md``, "Global shuffle").

The main process plans each rank's batches (:class:`~wds_cloud.index.globalorder.Pass`: lists
of sample numbers); with ``num_workers > 0`` a ``DataLoader`` hands each list to a worker,
which reads the batch with :func:`~wds_cloud.index.globalorder.fetch_batch` (the dataset's
``get_batch``: one coalesced batch read) and runs decode / to_tuple / map and collation on
it; with ``num_workers=0`` the dataset's ``iter_batches`` reads ``prefetch_factor`` batches
ahead on threads and this process decodes. With ``batches_in_flight=k`` each worker is handed
``k`` consecutive batches at once and reads them concurrently (``iter_fetched``), for backends
whose every batch request pays a fixed wait (AIStore's GetBatch, ~100 ms; docs/aistore.md).
``num_workers * prefetch_factor * k`` (or ``max(prefetch_factor, k) + 1``) batches are in
flight, never more. The loader
counts the batches it hands to the training loop, so its state is exact however far ahead the
workers read, and the workers (which only fetch) can be any number on resume.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import chain, islice
from typing import Any

import torch.utils.data

from wds_cloud.core.collate import torch_collate
from wds_cloud.core.handlers import Handler, reraise_exception
from wds_cloud.errors import ConfigError
from wds_cloud.index.globalorder import (
    BatchOrder,
    CursorLoop,
    GlobalBatchSampler,
    fetch_batch,
    iter_fetched,
)
from wds_cloud.observe.passes import (
    batch_worker,
    profiled_iter,
    run_batch_stages,
    timed_batch_read as timed_read,
)
from wds_cloud.observe.profile import current as current_recorder, dump_dir
from wds_cloud.pytorch.datasets import IndexedWebDataset

__all__ = ["BatchReader", "GlobalLoader", "GroupReader", "global_loader", "sample_stages"]

#: ``WebDataset`` options that only mean something when streaming shards
_STREAM_ONLY = ("nodesplitter", "workersplitter", "empty_check")


class BatchReader(torch.utils.data.Dataset[Any]):
    """A map-style dataset whose ``__getitems__`` reads a whole batch with ``fetch_batch``
    and passes the samples through ``stages`` (curried pipeline stages: decode, to_tuple, map),
    in the worker that fetches it.

    Args:
        dataset: the indexed dataset.
        stages: each ``stage(iterator) -> iterator``, applied in order.
    """

    #: Measure where a worker's time goes (set by ``GlobalLoader.profile()``), and where the
    #: workers write their totals.
    profiling = False
    profile_dump: str | None = None

    def __init__(self, dataset: Any, stages: Iterable[Callable[[Any], Any]] = ()) -> None:
        self.dataset = dataset
        self.stages = list(stages)

    def __len__(self) -> int:
        return len(self.dataset)

    def process(self, samples: list[Any]) -> list[Any]:
        """A batch's samples through the stages."""
        return run_batch_stages(current_recorder(), self.stages, samples)

    def __getitems__(self, indices: list[int]) -> list[Any]:
        if self.profiling:
            rec = batch_worker(self.profile_dump)
            return self.process(timed_read(rec, lambda: fetch_batch(self.dataset, indices)))
        return self.process(fetch_batch(self.dataset, indices))

    def __getitem__(self, index: int) -> Any:
        got = self.__getitems__([index])
        if not got:
            raise KeyError(f"sample {index} was dropped by the pipeline (a map returned None)")
        return got[0]


class GroupReader(torch.utils.data.Dataset[Any]):
    """The dataset of the ``DataLoader`` when workers read several batches at once: it is
    handed groups of batches (lists of index lists); the batches of a group are read
    concurrently (:func:`iter_fetched` with the group's size read ahead, so all of them are in
    flight at once) and returned in order, each through ``reader``'s stages."""

    def __init__(self, reader: BatchReader) -> None:
        self.reader = reader

    def __len__(self) -> int:
        return len(self.reader)

    def __getitems__(self, groups: list[list[int]]) -> list[list[Any]]:
        if self.reader.profiling:
            batch_worker(self.reader.profile_dump)
        fetched = iter_fetched(self.reader.dataset, groups, readahead=len(groups))
        return [self.reader.process(samples) for samples in fetched]


class _CollateEach:
    """``collate_fn`` of a :class:`GroupReader`'s ``DataLoader``: the collation of each batch
    of a group (a class, so spawned workers can unpickle it)."""

    def __init__(self, collate: Callable[[list[Any]], Any]) -> None:
        self.collate = collate

    def __call__(self, batches: list[list[Any]]) -> list[Any]:
        return [self.collate(samples) for samples in batches]


class _PassSampler:
    """The ``batch_sampler`` of the loader's ``DataLoader``: the index lists of the pass the
    loader set last, ``group`` consecutive ones at a time when ``group > 1``."""

    def __init__(self, group: int = 1) -> None:
        self.plan: Any = None  # a Pass (or a data plan's MixPass): index lists, with len
        self.group = group

    def __iter__(self) -> Iterator[Any]:
        batches: Iterator[list[int]] = iter(self.plan) if self.plan is not None else iter(())
        if self.group == 1:
            return batches
        return iter(lambda: list(islice(batches, self.group)), [])

    def __len__(self) -> int:
        count = len(self.plan) if self.plan is not None else 0
        return -(-count // self.group)


class GlobalLoader(CursorLoop):
    """Batches of an indexed dataset in the global order of a :class:`GlobalBatchSampler`.

    Each ``iter()`` reads this rank's batches from the cursor to the end of the epoch (then the
    next ``iter()`` starts the next epoch); ``len()`` is their number. ``state_dict()`` (about
    100 bytes; the same on every rank at the same step, no collective) and
    ``load_state_dict()`` resume exactly, with any number of ranks and workers.

    Args:
        reader: the :class:`BatchReader` (dataset and per-sample stages).
        sampler: the order and the split over ranks.
        num_workers, prefetch_factor, persistent_workers: as ``DataLoader``'s; with no workers
            ``prefetch_factor`` batches are read ahead (``iter_batches``).
        batches_in_flight: batches each worker reads at once (default 1): a worker is handed
            this many consecutive batches and reads them concurrently; with no workers, at
            least this many are read ahead. The batches still reach the loop one by one, in
            order, and the state counts them one by one.
        collate: collation of each batch's samples.
        pin: a function pinning a batch, or None (workers: ``DataLoader(pin_memory=True)``).
    """

    def __init__(
        self,
        reader: BatchReader,
        sampler: BatchOrder,
        *,
        num_workers: int = 0,
        prefetch_factor: int = 2,
        persistent_workers: bool = False,
        collate: Callable[[list[Any]], Any] = torch_collate,
        pin: Callable[[Any], Any] | None = None,
        batches_in_flight: int = 1,
    ) -> None:
        if batches_in_flight < 1:
            raise ConfigError(f"batches_in_flight must be >= 1, got {batches_in_flight}")
        self.reader = reader
        self.sampler = sampler
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.collate = collate
        self.pin = pin
        self.batches_in_flight = batches_in_flight
        self._source = _PassSampler(batches_in_flight)
        self.loader: torch.utils.data.DataLoader[Any] | None = None
        if num_workers > 0:
            grouped = batches_in_flight > 1
            self.loader = torch.utils.data.DataLoader(
                GroupReader(reader) if grouped else reader,
                batch_sampler=self._source,
                num_workers=num_workers,
                collate_fn=_CollateEach(collate) if grouped else collate,
                prefetch_factor=prefetch_factor,
                persistent_workers=persistent_workers,
                pin_memory=pin is not None,
            )

    profiling = False  # see profile()

    def profile(self, on: bool = True) -> GlobalLoader:
        """Measure where the time goes, here and in the workers (``docs/observability.md``):
        each batch's read (timer ``batch read``), its stages, collation, the transfer and the
        training loop's wait. Modifies and returns ``self``."""
        self.profiling = self.reader.profiling = on
        if on and self.num_workers > 0 and self.reader.profile_dump is None:
            self.reader.profile_dump = dump_dir()
        return self

    def profile_report(self, gather: bool = True) -> Any:
        """As :meth:`~wds_cloud.core.pipeline.DataPipeline.profile_report`."""
        from wds_cloud.observe.report import collect

        return collect(gather=gather)

    def export_trace(self, path: str, gather: bool = True) -> None:
        """As :meth:`~wds_cloud.core.pipeline.DataPipeline.export_trace`."""
        from wds_cloud.observe.trace import write_trace

        write_trace(path, gather=gather)

    def _finish(self, samples: list[Any]) -> Any:
        batch = self.collate(self.reader.process(samples))
        return self.pin(batch) if self.pin is not None else batch

    def __iter__(self) -> Iterator[Any]:
        if self.profiling:  # each batch's wait is timed, the main thread watched
            return profiled_iter(self._batches(), None, timed=True)
        return self._batches()

    def _batches(self) -> Iterator[Any]:
        plan = self.sampler.current_pass()
        if self.loader is None:
            ahead = max(self.prefetch_factor, self.batches_in_flight)
            fetched = iter_fetched(self.reader.dataset, plan, ahead)
            return self.deliver(plan, map(self._finish, fetched))
        self._source.plan = plan
        batches: Iterable[Any] = self.loader if len(plan) else ()
        if self.batches_in_flight > 1:
            batches = chain.from_iterable(batches)
        return self.deliver(plan, batches)


def global_loader(
    urls: str | Iterable[str],
    *,
    batch_size: int,
    num_workers: int,
    seed: int | None,
    decode: Any,
    to_tuple: str | tuple[str, ...] | None,
    map: Callable[[Any], Any] | None,
    raw_map: Callable[[Any], Any] | None,
    collate: Callable[[list[Any]], Any] | None,
    prefetch_factor: int,
    persistent_workers: bool,
    pin: Callable[[Any], Any] | None,
    **kw: Any,
) -> GlobalLoader:
    """The loader of ``make_loader(order="global")``; ``kw``: ``uneven=`` ("drop"/"pad"),
    ``batches_in_flight=`` (see :class:`GlobalLoader`), ``handler=`` for the stages, the rest for :class:`IndexedWebDataset` (``registry=``,
    ``cache_dir=``, ``build_missing=``, read options).

    Raises:
        ConfigError: a streaming-only option, or bad sizes.
    """
    uneven = kw.pop("uneven", "drop")
    in_flight = kw.pop("batches_in_flight", 1)
    handler = kw.pop("handler", reraise_exception)
    passed = [name for name in _STREAM_ONLY if name in kw]
    if passed:
        raise ConfigError(
            f"make_loader(order='global'): {', '.join(passed)} only apply to streaming "
            "(order='stream'); the global order reads every sample of the dataset once per epoch"
        )
    dataset = IndexedWebDataset(urls, **kw)
    chain = sample_stages(decode, to_tuple, map, raw_map, handler)
    sampler = GlobalBatchSampler(len(dataset), batch_size, seed=seed, uneven=uneven)
    return GlobalLoader(
        BatchReader(dataset, chain),
        sampler,
        num_workers=num_workers,
        prefetch_factor=prefetch_factor,
        persistent_workers=persistent_workers,
        collate=collate or torch_collate,
        pin=pin,
        batches_in_flight=in_flight,
    )


def sample_stages(
    decode: Any,
    to_tuple: str | tuple[str, ...] | None,
    map: Callable[[Any], Any] | None,
    raw_map: Callable[[Any], Any] | None,
    handler: Handler,
) -> list[Callable[[Any], Any]]:
    """``make_loader``'s per-sample stages (raw_map, decode, to_tuple, map, in that order) as
    curried stages, for a :class:`BatchReader`."""
    from wds_cloud.core import stages
    from wds_cloud.core.decode import decode as decode_stage

    chain: list[Callable[[Any], Any]] = []
    if raw_map is not None:
        chain.append(stages.map(raw_map, handler=handler))
    if decode is not None:
        specs = tuple(decode) if isinstance(decode, tuple | list) else (decode,)
        chain.append(decode_stage(*specs, handler=handler))
    if to_tuple is not None:
        fields = tuple(to_tuple) if isinstance(to_tuple, tuple | list) else (to_tuple,)
        chain.append(stages.to_tuple(*fields, handler=handler))
    if map is not None:
        chain.append(stages.map(map, handler=handler))
    return chain
