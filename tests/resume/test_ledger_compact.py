"""``Ledger.compact`` (runs of touching extents joined while scanning) against a plain
reference (every extent sorted and merged) on thousands of generated delivery sequences: in
shard order, shuffled as a buffer would, with repeats across compactions, empty extents and
shards finished at different compactions."""

from __future__ import annotations

import random
from typing import Any

import pytest

from wds_cloud.resume.state import Ledger


def _reference_merge(intervals: list[list[int]]) -> list[list[int]]:
    out: list[list[int]] = []
    for a, b in sorted(intervals):
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


class _Reference:
    """The straightforward ledger: every id's extent kept, then sorted and merged."""

    def __init__(self) -> None:
        self.done: set[str] = set()
        self.intervals: dict[str, list[list[int]]] = {}
        self.ends: dict[str, int] = {}
        self.delivered = 0

    def compact(self, ids: list[Any]) -> None:
        self.delivered += len(ids)
        touched: dict[str, list[list[int]]] = {}
        for url, a, b, last in ids:
            if url in self.done:
                continue
            touched.setdefault(url, []).append([a, b])
            if last:
                self.ends[url] = b
        for url, new in touched.items():
            merged = _reference_merge(self.intervals.get(url, []) + new)
            end = self.ends.get(url)
            if end is not None and merged == [[0, end]]:
                self.done.add(url)
                self.intervals.pop(url, None)
                self.ends.pop(url, None)
            else:
                self.intervals[url] = merged


def _shard_ids(rng: random.Random, url: str) -> list[tuple[str, int, int, bool]]:
    """The ids of one shard read in order: touching extents from 0, the last one flagged."""
    ids = []
    pos = 0
    n = rng.randint(1, 30)
    for i in range(n):
        size = rng.choice([0, 512, 1024, rng.randint(1, 40) * 512])
        ids.append((url, pos, pos + size, i == n - 1))
        pos += size
    return ids


def _sequence(rng: random.Random) -> list[tuple[str, int, int, bool]]:
    urls = [f"s3://b/shard-{k:03d}.tar" for k in range(rng.randint(1, 6))]
    streams = [_shard_ids(rng, u) for u in urls]
    out: list[tuple[str, int, int, bool]] = []
    style = rng.choice(["in order", "interleaved", "shuffled", "partial", "repeats"])
    if style == "in order":
        for s in streams:
            out += s
    elif style == "interleaved":  # several readers' outputs merged round robin
        while any(streams):
            s = rng.choice([s for s in streams if s])
            out.append(s.pop(0))
    else:
        for s in streams:
            out += s
        if style == "partial":  # a stop mid-epoch: a prefix of the deliveries
            out = out[: rng.randint(0, len(out))]
        if style == "repeats":  # an id delivered again (after its shard may be done)
            out += rng.sample(out, min(len(out), rng.randint(1, 5)))
        window = rng.randint(2, 20)  # a shuffle buffer: local reordering
        for i in range(0, len(out), window):
            part = out[i : i + window]
            rng.shuffle(part)
            out[i : i + window] = part
    return out


@pytest.mark.parametrize("seed", range(4))
def test_compact_matches_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(1000):
        ids = _sequence(rng)
        ledger = Ledger({"epoch": 0}, sorted({i[0] for i in ids}))
        ref = _Reference()
        cut = 0
        while cut < len(ids):  # compactions at random points, as the delivering loop does
            step = rng.randint(1, max(1, len(ids)))
            batch = ids[cut : cut + step]
            ledger.pending.extend(batch)
            ledger.compact()
            ref.compact(batch)
            cut += step
            assert ledger.done == ref.done
            assert ledger.intervals == ref.intervals
            assert ledger.ends == ref.ends
            assert ledger.delivered == ref.delivered
            assert ledger.pending == []
