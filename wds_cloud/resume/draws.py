"""Resuming ``resampled=True``: shards drawn with replacement, tracked by draw.

A :class:`~wds_cloud.core.shards.ResampledShards` reader (rank ``r``, DataLoader worker ``w``)
draws its ``i``-th shard from a RNG seeded with ``(worker_seed, epoch, seed)``; the same
shard can be drawn many times, so samples are tracked by *draw*, not by URL: the reader tags
every sample with the key ``"r.w:i"`` instead of the URL (``(key, start, end, last)``) and
the top object keeps a :class:`DrawLedger` of delivered extents per draw. The state lists,
per reader, the draws whose samples were all delivered (index ranges, mostly one prefix) and
the delivered extents of the others::

    "draws": {"0.1": {"done": [[0, 7], [8, 9]], "open": {"7": [0, 3072]}, "ends": {}}}

On resume each reader regenerates its draws from the seed (the RNG position is the draw
index), skips the done ones, reads the byte ranges and tails left of the open ones (as
:mod:`wds_cloud.resume.state` does for a shard) and then draws on: the same draws as an
uninterrupted run, none lost and none repeated. A reader's draws depend on its rank and worker,
so a resampled state must be loaded with the same ranks and DataLoader workers.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from wds_cloud.core.curry import FilterFunction
from wds_cloud.core.extras import ShardTally
from wds_cloud.core.samples import StopShards
from wds_cloud.core.shards import (
    ResampledShards,
    default_worker_seed,
    draw_seed,
    worker_info,
)
from wds_cloud.resume.reader import Pair, read_item, reader_options
from wds_cloud.resume.state import (
    STATE_FORMAT,
    Ledger,
    WorkItem,
    index_ranges,
    order_digest,
    remaining,
)


class _NextEpoch:
    """A ``ShardShuffle``-like view of a ``ResampledShards``' epoch: ``epoch`` is the epoch its
    next pass draws with (``ResampledShards`` advances before drawing)."""

    def __init__(self, shards: ResampledShards) -> None:
        self.shards = shards

    @property
    def epoch(self) -> int:
        return self.shards.epoch + 1

    @epoch.setter
    def epoch(self, value: int) -> None:
        self.shards.epoch = value - 1


def _split(key: str) -> tuple[str, int]:
    reader, _, index = key.rpartition(":")
    return reader, int(index)


@dataclass
class DrawLedger(Ledger):
    """A :class:`~wds_cloud.resume.state.Ledger` whose keys are draws (``"r.w:i"``)."""

    def state(self) -> dict[str, Any]:
        """The JSON-serialisable state (``draws`` per reader)."""
        self.compact()
        draws: dict[str, dict[str, Any]] = {}

        def entry(key: str) -> tuple[dict[str, Any], str]:
            reader, index = _split(key)
            d = draws.setdefault(reader, {"done": [], "open": {}, "ends": {}})
            return d, str(index)

        for key in self.done:
            d, index = entry(key)
            d["done"].append(int(index))
        for key, ivs in self.intervals.items():
            d, index = entry(key)
            d["open"][index] = [x for iv in ivs for x in iv]
        for key, end in self.ends.items():
            d, index = entry(key)
            d["ends"][index] = end
        for d in draws.values():
            d["done"] = index_ranges(d["done"])
        return {
            "format": STATE_FORMAT,
            **self.header,
            "resampled": True,
            "delivered": self.delivered,
            "draws": dict(sorted(draws.items())),
        }

    def load(self, state: dict[str, Any]) -> None:
        """Start from the deliveries recorded in ``state``."""
        for reader, d in state.get("draws", {}).items():
            for i0, i1 in d.get("done", []):
                self.done.update(f"{reader}:{i}" for i in range(i0, i1))
            for index, flat in d.get("open", {}).items():
                self.intervals[f"{reader}:{index}"] = [
                    [flat[i], flat[i + 1]] for i in range(0, len(flat), 2)
                ]
            for index, end in d.get("ends", {}).items():
                self.ends[f"{reader}:{index}"] = end
        self.delivered = int(state.get("delivered", 0))


@dataclass
class ResampledSource:
    """The shard side of a pipeline starting with ``ResampledShards``."""

    shards: ResampledShards
    tally: ShardTally | None
    reader: FilterFunction
    after: int  # index of the first stage after the reader

    @property
    def shuffle(self) -> _NextEpoch:
        """The epoch of the next pass (named as ``ShardSource.shuffle`` for the loop)."""
        return _NextEpoch(self.shards)

    def order(self, epoch: int | None = None) -> tuple[int, list[str]]:
        """``(epoch of the next pass, [])`` (or ``(epoch, [])``): draws are made by each
        reader."""
        return (self.shards.epoch + 1 if epoch is None else epoch), []

    def new_ledger(self, header: dict[str, Any], order: list[str]) -> Ledger:
        """The ledger the top object keeps for one pass."""
        return DrawLedger(header, order)

    def pairs(self, ctx: dict[str, Any]) -> Iterator[Pair]:
        """Read this reader's draws (after those ``ctx["resume"]`` delivered) as pairs."""
        state = ctx.get("resume")
        ctx["resume"] = None  # one pass only
        shards = self.shards
        if state is not None:
            shards.epoch = int(state["epoch"]) - 1
        shards.epoch += 1
        as_reader = ctx.get("as_reader")
        if as_reader:  # taking over another reader's with_epoch window: its draws
            rank, _, worker, _ = as_reader
            if shards.worker_seed is not default_worker_seed:
                from wds_cloud.errors import ConfigError

                raise ConfigError(
                    "a resampled with_epoch window state taken with other numbers of ranks or "
                    "workers needs the default worker_seed (rank * 1000 + worker) to make "
                    "another reader's draws again"
                )
            wseed = rank * 1000 + worker
        else:
            rank, _, worker, _ = worker_info()
            wseed = shards.worker_seed()
        rng = random.Random(draw_seed(wseed, shards.epoch, shards.seed))
        reader = f"{rank}.{worker}"
        mine = (state or {}).get("draws", {}).get(reader, {})
        done: set[int] = set()
        for i0, i1 in mine.get("done", []):
            done.update(range(i0, i1))
        opened, ends = mine.get("open", {}), mine.get("ends", {})
        if self.tally is not None:
            self.tally.count = 1 if shards.urls else 0
            self.tally.resumed = state is not None  # type: ignore[attr-defined]
        opener, options = reader_options(self.reader)
        urls = shards.urls
        if not urls:
            return
        for i in range(shards.nshards):
            url = urls[rng.randrange(len(urls))]
            if i in done:
                continue
            key = f"{reader}:{i}"
            item = WorkItem(url)
            flat = opened.get(str(i))
            if flat:
                left = _left_of(key, flat, ends.get(str(i)))
                if left is None:
                    continue
                item = replace(left, url=url)
            try:
                for sample, ids in read_item(item, opener, **options):
                    yield sample, [(key, a, b, last) for _, a, b, last in ids]
            except StopShards:
                return


def _left_of(key: str, flat: list[int], end: int | None) -> WorkItem | None:
    """What is left of one draw with delivered extents ``flat`` (None: nothing)."""
    sub = {"order": order_digest([key]), "shards": 1, "open": {key: flat}}
    if end is not None:
        sub["ends"] = {key: end}
    left = remaining([key], sub)
    return left[0] if left else None


def resampled_source(prefix: list[Any], reader: FilterFunction, after: int) -> Any:
    """A :class:`ResampledSource` for shard stages ``prefix`` (``ResampledShards`` and an
    optional ``ShardTally``), or None."""
    shards = prefix[0]
    if not shards.deterministic:
        return None  # draws mix in the pid and the time: they cannot be made again
    tally = None
    for s in prefix[1:]:
        if isinstance(s, ShardTally) and tally is None:
            tally = s
        else:
            return None
    return ResampledSource(shards, tally, reader, after)
