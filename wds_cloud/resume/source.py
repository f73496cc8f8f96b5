"""The shard side of a resumable pipeline: the epoch's shard order and each reader's share.

A pipeline is resumable when its stages before the tar reader (``tarfile_to_samples``) are a
``ResampledShards`` (see :mod:`wds_cloud.resume.draws`) or a ``SimpleShardList``, optionally a ``ShardShuffle``, the standard node and worker splitters and a
``ShardTally`` (what ``WebDataset`` builds). Those stages are then replaced by one reader that
computes the epoch's global shard order, the work left in it (everything, or what a loaded
state did not deliver) and takes its share: work item ``k`` goes to rank ``k % world`` (with
``split_by_node``), then the rank's ``j``-th item to worker ``j % num_workers`` (with
``split_by_worker``). On a fresh epoch the items are whole shards, so the shares are those of
the splitters themselves.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from wds_cloud.core.curry import FilterFunction
from wds_cloud.core.extras import ShardTally
from wds_cloud.core.join import JoinedShards, join_samples
from wds_cloud.core.samples import StopShards
from wds_cloud.core.shardopen import ShardOpener, tarfile_samples, url_opener_override
from wds_cloud.core.shards import (
    ResampledShards,
    ShardShuffle,
    SimpleShardList,
    SplitReaders,
    node_info,
    single_node_only,
    split_by_node,
    split_by_sample,
    split_by_worker,
    worker_info,
)
from wds_cloud.errors import ConfigError
from wds_cloud.resume import joined
from wds_cloud.resume.draws import resampled_source
from wds_cloud.resume.reader import Pair, read_item, reader_options
from wds_cloud.resume.state import Ledger, WorkItem, remaining

T = TypeVar("T")


@dataclass
class ShardSource:
    """The recognised shard stages of a pipeline and its tar reader."""

    shard_list: SimpleShardList
    shuffle: ShardShuffle | None
    node_split: Any
    worker_split: bool
    tally: ShardTally | None
    reader: FilterFunction
    after: int  # index of the first stage after the reader
    sample_split: bool = False  # split_by_sample right after the reader (split_samples=True)

    def order(self, epoch: int | None = None) -> tuple[int, list[str]]:
        """``(epoch, shard URLs in the epoch's order)`` without advancing the shuffle."""
        urls = [d["url"] for d in self.shard_list]
        if self.shuffle is None:
            return 0 if epoch is None else epoch, urls
        shuffle = copy.copy(self.shuffle)
        if epoch is not None:
            shuffle.epoch = epoch
        used = shuffle.epoch
        return used, list(shuffle.run(urls))

    def share(self, items: list[T], fresh: bool) -> list[T]:
        """This reader's part of ``items``."""
        if self.node_split is not None:
            if fresh:
                items = list(self.node_split(items))  # the splitter's own checks and errors
            elif isinstance(self.node_split, SplitReaders):  # SageMaker's host rank and count
                items = items[self.node_split.rank :: self.node_split.world_size]
            else:
                rank, world = node_info()
                items = items[rank::world] if self.node_split is split_by_node else items
                if self.node_split is single_node_only:
                    list(single_node_only([]))  # raises with world > 1
        if self.worker_split:
            items = list(split_by_worker(items))  # worker 0 warns about surplus workers
        return items

    def share_as(self, items: list[T], reader: list[int]) -> list[T]:
        """The part of ``items`` of reader ``(rank, world, worker, workers)`` (another one than
        this process: a worker taking over another reader's with_epoch window)."""
        rank, world, worker, workers = reader
        if isinstance(self.node_split, SplitReaders):  # SageMaker hosts: not changed
            items = items[self.node_split.rank :: self.node_split.world_size]
        elif self.node_split is split_by_node:
            items = items[rank::world]
        if self.worker_split:
            items = items[worker::workers]
        return items

    def pairs(self, ctx: dict[str, Any]) -> Iterator[Pair]:
        """Read this reader's share of the epoch as ``(sample, ids)`` pairs."""
        state = ctx.get("resume")
        ctx["resume"] = None  # one pass only (a persistent worker keeps its copy of ctx)
        given = ctx.pop("items", None)
        as_reader = ctx.get("as_reader")
        if given is not None:  # samples to bring back (RandomMix: pulled, not delivered)
            yield from self.read(given)
            return
        if state is not None and self.shuffle is not None:
            self.shuffle.epoch = state["epoch"]
        epoch, order = self.order()
        if self.shuffle is not None:
            self.shuffle.epoch = epoch + 1
        if state is not None and state.get("reader") is not None:
            if self.sample_split:
                raise ConfigError(
                    "split_samples=True cannot resume from one reader's state: its samples are "
                    "spread over every shard; load the loader's (merged) state"
                )
            whole = remaining(order, None)
            mine = {
                w.url
                for w in (self.share_as(whole, as_reader) if as_reader else self.share(whole, True))
            }
            items = [w for w in remaining(order, state) if w.url in mine]
        elif as_reader:
            items = self.share_as(remaining(order, state), as_reader)
        else:
            items = self.share(remaining(order, state), state is None)
        if self.tally is not None:
            self.tally.count = len(items)
            self.tally.resumed = state is not None  # type: ignore[attr-defined]
        pairs = self.read(items)
        if self.sample_split:
            pairs = _split_pairs(pairs)
        yield from pairs

    def read(self, items: list[WorkItem]) -> Iterator[Pair]:
        """The samples of ``items`` with their ids."""
        opener, options = reader_options(self.reader)
        return _read_items(items, opener, options)

    def new_ledger(self, header: dict[str, Any], order: list[str]) -> Ledger:
        """The ledger the top object keeps for one pass over ``order``."""
        return Ledger(header, order)


@dataclass
class JoinSource(ShardSource):
    """The shard side of a pipeline reading ``wds.join(...)``: the ledger's order lists each
    row's shards, a row is shared among readers as one shard and read in lockstep
    (:mod:`wds_cloud.resume.joined`)."""

    @property
    def rows(self) -> JoinedShards:
        """The join's shard list."""
        assert isinstance(self.shard_list, JoinedShards)
        return self.shard_list

    def order(self, epoch: int | None = None) -> tuple[int, list[str]]:
        """``(epoch, every asked set's shard, row by row in the epoch's order)``."""
        used, firsts = super().order(epoch)
        return used, joined.flat_order(self.rows, firsts)

    def share(self, items: list[T], fresh: bool) -> list[T]:
        """This reader's rows of ``items`` (work items in the ledger's order)."""
        rows = super().share(joined.group(self.rows, items), fresh)
        return [w for row in rows for w in row]

    def share_as(self, items: list[T], reader: list[int]) -> list[T]:
        """Reader ``reader``'s rows of ``items``."""
        rows = super().share_as(joined.group(self.rows, items), reader)
        return [w for row in rows for w in row]

    def read(self, items: list[WorkItem]) -> Iterator[Pair]:
        """The merged samples of the rows of ``items`` with their ids."""
        return joined.read_rows(self.rows, items, self.reader)


def _read_items(
    items: list[WorkItem], opener: ShardOpener, options: dict[str, Any]
) -> Iterator[Pair]:
    for item in items:
        try:
            yield from read_item(item, opener, **options)
        except StopShards:
            return


def _split_pairs(pairs: Iterator[Pair]) -> Iterator[Pair]:
    """``split_by_sample`` on pairs: keep pair ``i`` with ``i % readers == this reader``.

    Every reader reads the same stream (the whole epoch, or the same work left by a state), so
    the readers together keep each sample of it exactly once. The samples a reader drops are
    other readers' and are not tied to its outputs (a ``select`` would tie them)."""
    rank, world, worker, nworkers = worker_info()
    nslots = world * nworkers
    slot = rank * nworkers + worker
    for i, pair in enumerate(pairs):
        if i % nslots == slot:
            yield pair


_SPLITTERS = (split_by_node, single_node_only)


def find_source(stages: list[Any]) -> Any:
    """The :class:`ShardSource` (or :class:`~wds_cloud.resume.draws.ResampledSource`) of a
    pipeline's stages, or None when they are not recognised."""
    found = [
        i
        for i, s in enumerate(stages)
        if isinstance(s, FilterFunction) and s.f in (tarfile_samples, join_samples)
    ]
    if not found:
        return None
    r = found[0]
    stage = stages[r]
    if stage.args or stage.kw.get("concatenated") or url_opener_override() is not None:
        return None  # positional options, a Pipe-mode FIFO, a url_opener assigned by the user
    prefix = stages[:r]
    if prefix and type(prefix[0]) is ResampledShards:
        return resampled_source(prefix, stage, r + 1)
    joined = stage.f is join_samples  # wds.join(...): rows of shards read in lockstep
    if not prefix or type(prefix[0]) is not (JoinedShards if joined else SimpleShardList):
        return None
    kind = JoinSource if joined else ShardSource
    source = kind(prefix[0], None, None, False, None, stage, r + 1)
    if len(stages) > r + 1 and stages[r + 1] is split_by_sample:
        source.after, source.sample_split = r + 2, True
    if split_by_sample in stages[source.after :]:
        return None  # later, it would tie other readers' samples to this reader's outputs
    for s in prefix[1:]:
        if isinstance(s, ShardShuffle) and source.shuffle is None:
            source.shuffle = s
        elif (s in _SPLITTERS or isinstance(s, SplitReaders)) and source.node_split is None:
            source.node_split = s
        elif s is split_by_worker:
            source.worker_split = True
        elif isinstance(s, ShardTally):
            source.tally = s
        else:
            return None
    return source
