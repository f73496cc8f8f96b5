"""The shard side of a resumable pipeline: the epoch's shard order and each reader's share.

A pipeline is resumable when its stages before the tar reader (``tarfile_to_samples``) are a
``SimpleShardList``, optionally a ``ShardShuffle``, the standard node and worker splitters and a
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
from typing import Any

from wds_cloud.core.curry import FilterFunction
from wds_cloud.core.extras import ShardTally
from wds_cloud.core.samples import (
    ShardOpener,
    StopShards,
    _url_opener_override,
    tarfile_samples,
)
from wds_cloud.core.shards import (
    ShardShuffle,
    SimpleShardList,
    node_info,
    single_node_only,
    split_by_node,
    split_by_worker,
)
from wds_cloud.resume.reader import Pair, read_item
from wds_cloud.resume.state import WorkItem, remaining


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

    def share(self, items: list[WorkItem], fresh: bool) -> list[WorkItem]:
        """This reader's part of ``items``."""
        if self.node_split is not None:
            if fresh:
                items = list(self.node_split(items))  # the splitter's own checks and errors
            else:
                rank, world = node_info()
                items = items[rank::world] if self.node_split is split_by_node else items
                if self.node_split is single_node_only:
                    list(single_node_only([]))  # raises with world > 1
        if self.worker_split:
            items = list(split_by_worker(items))  # worker 0 warns about surplus workers
        return items

    def pairs(self, ctx: dict[str, Any]) -> Iterator[Pair]:
        """Read this reader's share of the epoch as ``(sample, ids)`` pairs."""
        state = ctx.get("resume")
        ctx["resume"] = None  # one pass only (a persistent worker keeps its copy of ctx)
        if state is not None and self.shuffle is not None:
            self.shuffle.epoch = state["epoch"]
        epoch, order = self.order()
        if self.shuffle is not None:
            self.shuffle.epoch = epoch + 1
        if state is not None and state.get("reader") is not None:
            mine = {w.url for w in self.share(remaining(order, None), True)}
            items = [w for w in remaining(order, state) if w.url in mine]
        else:
            items = self.share(remaining(order, state), state is None)
        if self.tally is not None:
            self.tally.count = len(items)
            self.tally.resumed = state is not None  # type: ignore[attr-defined]
        kw = dict(self.reader.kw)
        opener = kw.pop("opener", None) or ShardOpener(
            kw.pop("registry", None),
            kw.pop("cache_dir", None),
            kw.pop("cache_size", None),
            **{
                k: v
                for k, v in kw.items()
                if k not in ("handler", "select_files", "rename_files", "local_paths")
            },
        )
        options = {
            k: kw[k] for k in ("handler", "select_files", "rename_files", "local_paths") if k in kw
        }
        for item in items:
            try:
                yield from read_item(item, opener, **options)
            except StopShards:
                return


_SPLITTERS = (split_by_node, single_node_only)


def find_source(stages: list[Any]) -> ShardSource | None:
    """The :class:`ShardSource` of a pipeline's stages, or None when they are not recognised."""
    found = [
        i for i, s in enumerate(stages) if isinstance(s, FilterFunction) and s.f is tarfile_samples
    ]
    if not found:
        return None
    r = found[0]
    stage = stages[r]
    if stage.args or stage.kw.get("concatenated") or _url_opener_override() is not None:
        return None  # positional options, a Pipe-mode FIFO, a url_opener assigned by the user
    prefix = stages[:r]
    if not prefix or type(prefix[0]) is not SimpleShardList:
        return None
    source = ShardSource(prefix[0], None, None, False, None, stage, r + 1)
    for s in prefix[1:]:
        if isinstance(s, ShardShuffle) and source.shuffle is None:
            source.shuffle = s
        elif s in _SPLITTERS and source.node_split is None:
            source.node_split = s
        elif s is split_by_worker:
            source.worker_split = True
        elif isinstance(s, ShardTally):
            source.tally = s
        else:
            return None
    return source
