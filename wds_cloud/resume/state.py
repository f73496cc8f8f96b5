"""The resume state: which samples of the epoch were delivered, as byte extents per shard.

A sample id is ``(url, start, end, last)``: the shard, the extent ``[start, end)`` of the
sample's tar headers and data (extents of consecutive samples touch, the first starts at 0)
and whether it is the shard's last sample (``end`` is then the end-of-archive offset). The
:class:`Ledger` merges delivered extents per shard; a shard whose extents cover ``[0, end of
archive)`` is done. The JSON state lists done shards by their index in the epoch's shard order
and the merged extents of the others; :func:`remaining` turns it back into work: whole shards,
byte ranges to fetch again (samples read but not delivered) and tails to read from an offset.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from wds_cloud.errors import ConfigError

STATE_FORMAT = "wds_cloud.resume/1"

SampleId = tuple[str, int, int, bool]


def order_digest(urls: Sequence[str]) -> str:
    """A short digest of the epoch's shard order (checked on load)."""
    h = hashlib.blake2b(digest_size=8)
    for url in urls:
        h.update(url.encode())
        h.update(b"\x00")
    return h.hexdigest()


def merge_intervals(intervals: list[list[int]]) -> list[list[int]]:
    """``intervals`` (sorted in place) merged where they touch or overlap; empty ones dropped."""
    intervals.sort()
    out: list[list[int]] = []
    for a, b in intervals:
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1][1] = b
        else:
            out.append([a, b])
    return out


def index_ranges(indices: Iterable[int]) -> list[list[int]]:
    """``indices`` as sorted ``[start, end)`` runs of consecutive integers."""
    out: list[list[int]] = []
    for i in sorted(indices):
        if out and i == out[-1][1]:
            out[-1][1] = i + 1
        else:
            out.append([i, i + 1])
    return out


@dataclass
class Ledger:
    """Delivered samples of one epoch, per shard.

    Args:
        header: ``epoch``, ``seed``, ``generation`` and the shard ``order`` of the epoch.
    """

    header: dict[str, Any]
    order: list[str]
    done: set[str] = field(default_factory=set)
    intervals: dict[str, list[list[int]]] = field(default_factory=dict)
    ends: dict[str, int] = field(default_factory=dict)
    pending: list[SampleId] = field(default_factory=list)
    delivered: int = 0  # ids delivered and compacted (``pending`` holds the others)

    def add(self, ids: Iterable[SampleId]) -> None:
        """Record samples as delivered."""
        pending = self.pending
        pending.extend(ids)  # counted into ``delivered`` when compacted
        if len(pending) > 16384:
            self.compact()

    def compact(self) -> None:
        """Merge pending ids into per-shard extents; mark complete shards done.

        Consecutive ids of one shard whose extents touch (a shard read in order) are joined
        as they are scanned, so the merge sorts runs, not samples."""
        pending = self.pending[:]
        self.pending.clear()  # the same list: the delivering loop appends to it directly
        self.delivered += len(pending)
        done, ends = self.done, self.ends
        touched: dict[str, list[list[int]]] = {}
        run_url: str | None = None
        lo = hi = 0
        for url, a, b, last in pending:
            if last and url not in done:
                ends[url] = b
            if a == hi and url == run_url:
                hi = b
                continue
            if run_url is not None and run_url not in done:
                touched.setdefault(run_url, []).append([lo, hi])
            run_url, lo, hi = url, a, b
        if run_url is not None and run_url not in done:
            touched.setdefault(run_url, []).append([lo, hi])
        for url, new in touched.items():
            merged = merge_intervals(self.intervals.get(url, []) + new)
            end = ends.get(url)
            if end is not None and merged == [[0, end]]:
                done.add(url)
                self.intervals.pop(url, None)
                ends.pop(url, None)
            else:
                self.intervals[url] = merged

    def load(self, state: dict[str, Any]) -> None:
        """Start from the deliveries recorded in ``state`` (same epoch order)."""
        for i0, i1 in state.get("done", []):
            self.done.update(self.order[i0:i1])
        for url, flat in state.get("open", {}).items():
            self.intervals[url] = [[flat[i], flat[i + 1]] for i in range(0, len(flat), 2)]
        self.ends.update(state.get("ends", {}))
        self.delivered = int(state.get("delivered", 0))

    def state(self) -> dict[str, Any]:
        """The JSON-serialisable state."""
        self.compact()
        index = {url: i for i, url in enumerate(self.order)}
        return {
            "format": STATE_FORMAT,
            **{k: v for k, v in self.header.items()},
            "shards": len(self.order),
            "order": order_digest(self.order),
            "delivered": self.delivered,
            "done": index_ranges(index[u] for u in self.done if u in index),
            "open": {
                url: [x for iv in ivs for x in iv]
                for url, ivs in sorted(self.intervals.items(), key=lambda kv: index.get(kv[0], -1))
            },
            "ends": dict(self.ends),
        }


def check_state(state: Any) -> dict[str, Any]:
    """Validate the shape of a state dict.

    Raises:
        ConfigError: not a wds_cloud resume state, or one saved by a pipeline that cannot be
            resumed (in a DataLoader worker, where ``StatefulDataLoader`` asks for it anyway).
    """
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise ConfigError(
            f"not a wds_cloud loader state (expected format {STATE_FORMAT!r}): {str(state)[:200]}"
        )
    if "unresumable" in state:
        raise ConfigError(
            f"this state was saved by a pipeline that cannot be resumed: {state['unresumable']}"
        )
    return state


@dataclass(frozen=True)
class WorkItem:
    """What a reader still has to read of one shard.

    ``ranges``: byte ranges holding samples read but not delivered before (fetched with ranged
    reads); ``tail``: read the shard from this offset to its end (None: nothing after the
    ranges); a whole shard is ``ranges=(), tail=0``.
    """

    url: str
    ranges: tuple[tuple[int, int], ...] = ()
    tail: int | None = 0

    @property
    def whole(self) -> bool:
        """Whether the whole shard is to be read."""
        return not self.ranges and self.tail == 0


def remaining(order: Sequence[str], state: dict[str, Any] | None) -> list[WorkItem]:
    """The work left of the epoch, in the epoch's shard order.

    Raises:
        ConfigError: the state belongs to another shard order.
    """
    if state is None:
        return [WorkItem(url) for url in order]
    if state.get("order") != order_digest(order) or state.get("shards") != len(order):
        raise ConfigError(
            "the loader state was taken over another shard list or shard order (epoch "
            f"{state.get('epoch')}, {state.get('shards')} shards); load it into a loader built "
            "with the same URLs, seed and shardshuffle"
        )
    done: set[int] = set()
    for i0, i1 in state.get("done", []):
        done.update(range(i0, i1))
    opened = state.get("open", {})
    ends = state.get("ends", {})
    items = []
    for i, url in enumerate(order):
        if i in done:
            continue
        flat = opened.get(url)
        if not flat:
            items.append(WorkItem(url))
            continue
        ranges = []
        pos = 0
        for k in range(0, len(flat), 2):
            a, b = flat[k], flat[k + 1]
            if a > pos:
                ranges.append((pos, a))
            pos = b
        tail = None if ends.get(url) == pos else pos
        if ranges or tail is not None:
            items.append(WorkItem(url, tuple(ranges), tail))
    return items
