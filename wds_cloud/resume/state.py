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


def _merge(intervals: list[list[int]]) -> list[list[int]]:
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


def _index_ranges(indices: Iterable[int]) -> list[list[int]]:
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
            merged = _merge(self.intervals.get(url, []) + new)
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
            "done": _index_ranges(index[u] for u in self.done if u in index),
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


def _wds_states(state: Any) -> list[Any]:
    """The wds_cloud states in ``state``: itself, or those a torchdata ``StatefulDataLoader``
    state holds (its dataset's without workers, each worker's with workers)."""
    if not isinstance(state, dict) or state.get("format") == STATE_FORMAT:
        return [state]
    snapshot = state.get("_snapshot")
    if isinstance(snapshot, dict) and isinstance(snapshot.get("_worker_snapshots"), dict):
        late = state.get("_steps_since_snapshot")
        if late:
            raise ConfigError(
                f"merge_states: this StatefulDataLoader state was taken {late} batch(es) after "
                "its workers' last snapshot, so it does not say what those batches delivered; "
                "take loader states after a multiple of snapshot_every_n_steps batches (the "
                "default, 1, makes every step one)"
            )
        return [w.get("dataset_state") for w in snapshot["_worker_snapshots"].values()]
    if "dataset_state" in state and "_num_yielded" in state:
        return [state["dataset_state"]]
    return [state]


def merge_states(states: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Merge the states of several readers (taken at the same step) into one global state.

    Under ``torch.distributed`` ``state_dict()`` gathers and merges by itself; use this when
    each rank saved its own state (e.g. ranks started with ``RANK``/``WORLD_SIZE`` only), or to
    turn torchdata ``StatefulDataLoader`` states (``loader.state_dict()`` of each rank, which
    hold one state per worker) into a state that any world size and worker count can resume.

    Raises:
        ConfigError: the states are of different epochs or shard orders, or a
            ``StatefulDataLoader`` state was taken between its workers' snapshots.
    """
    states = [check_state(s) for state in states for s in _wds_states(state)]
    if not states:
        raise ConfigError("merge_states: no states")
    if any("mixers" in s for s in states):
        from wds_cloud.resume.mixing import merge_mixes

        return merge_mixes(states)  # RandomMix states: mixers keyed by rank and worker
    if any("windows" in s for s in states):
        from wds_cloud.resume.worker_windows import merge_windows

        return merge_windows(states)  # worker windows: keyed by rank and worker
    if any(s.get("resampled") for s in states):
        from wds_cloud.resume.draws import merge_draws

        return merge_draws(states)  # resampled readers: their draws, keyed by rank and worker
    first = states[0]
    for other in states[1:]:
        for key in ("epoch", "seed", "order", "shards"):
            if other.get(key) != first.get(key):
                raise ConfigError(
                    f"merge_states: states differ in {key!r} ({first.get(key)!r} vs "
                    f"{other.get(key)!r}); save them at the same step of the same epoch"
                )
    done: set[int] = set()
    ivs: dict[str, list[list[int]]] = {}
    ends: dict[str, int] = {}
    for s in states:
        for i0, i1 in s.get("done", []):
            done.update(range(i0, i1))
        for url, flat in s.get("open", {}).items():
            ivs.setdefault(url, []).extend([flat[i], flat[i + 1]] for i in range(0, len(flat), 2))
        ends.update(s.get("ends", {}))
    merged = dict(first)
    merged.pop("reader", None)
    merged.pop("finished", None)
    if all(s.get("finished") for s in states):
        merged["finished"] = True  # every reader finished its share: the epoch is over
    merged["delivered"] = sum(int(s.get("delivered", 0)) for s in states)
    merged["generation"] = max(int(s.get("generation", 0)) for s in states)
    merged["done"] = _index_ranges(done)
    merged["open"] = {url: [x for iv in _merge(v) for x in iv] for url, v in ivs.items()}
    merged["ends"] = ends
    return merged


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
