"""The coalescing planner and the batch executor, on thousands of generated range layouts.

Properties checked on every layout (``plan_fetches``): every requested byte lies in the read
serving its request; a read spans only requested bytes and gaps of at most ``gap`` bytes;
a read joins ranges across a gap only while it spans at most ``max_span`` bytes (only
overlapping ranges extend it further); reads never overlap and neighbours could not merge;
``read_ranges`` gives each request's bytes in the order asked, one backend read per planned
read, never more than ``concurrency`` at once.
"""

from __future__ import annotations

import itertools
import random
import threading

import pytest

from wds_cloud.errors import ConfigError, ShardReadError
from wds_cloud.openers.capabilities import RangeRequest
from wds_cloud.openers.streams.batchplan import Fetch, plan_fetches
from wds_cloud.openers.streams.batchread import BatchConfig, read_ranges


def _layout(rng: random.Random) -> list[RangeRequest]:
    """Requests over 1-3 objects: tiny and huge ranges, touching, overlapping, duplicated,
    gaps around the threshold, unsorted."""
    urls = [f"s3://b/shard-{k}.tar" for k in range(rng.randint(1, 3))]
    out: list[RangeRequest] = []
    for _ in range(rng.randint(1, 40)):
        url = rng.choice(urls)
        kind = rng.random()
        if out and kind < 0.15:
            out.append(rng.choice(out))  # a duplicate
            continue
        offset = rng.choice([0, rng.randrange(0, 1 << 12), rng.randrange(0, 1 << 22)])
        if out and kind < 0.35:  # near the end of an earlier one
            prev = rng.choice(out)
            offset = max(0, prev.offset + prev.length + rng.randint(-600, 70_000))
            url = prev.url
        length = rng.choice([0, 1, rng.randint(1, 600), rng.randint(512, 40_000), 3 << 20])
        out.append(RangeRequest(url, offset, length))
    return out


def _check(requests: list[RangeRequest], fetches: list[Fetch], gap: int, span: int) -> None:
    served = sorted(i for f in fetches for i in f.serves)
    assert served == list(range(len(requests)))  # each request served exactly once
    for f in fetches:
        ranges = sorted(
            ((requests[i].offset, requests[i].offset + requests[i].length) for i in f.serves),
            key=lambda r: (r[0], -r[1]),
        )
        assert all(requests[i].url == f.url for i in f.serves)
        assert ranges[0][0] == f.offset and max(e for _, e in ranges) == f.end  # covers, no more
        reach = ranges[0][1]
        for start, end in ranges[1:]:
            if start > reach:  # the holes between requested ranges are allowed gaps
                assert gap >= 0 and start - reach <= gap, (f, ranges)
            if start >= reach and end > reach:  # joined across a gap (or touching): capped
                assert end - f.offset <= span, (f, ranges)
            reach = max(reach, end)
    ordered = sorted(fetches, key=lambda f: (f.url, f.offset))
    for a, b in itertools.pairwise(ordered):  # greedy: neighbours could not merge
        if a.url == b.url:
            assert b.offset >= a.end and (
                gap < 0 or b.offset - a.end > gap or b.end - a.offset > span
            )


@pytest.mark.parametrize("block", range(4))
def test_plans_on_thousands_of_layouts(block: int) -> None:
    for seed in range(block * 1000, (block + 1) * 1000):
        rng = random.Random(seed)
        requests = _layout(rng)
        gap = rng.choice([-1, 0, 511, 4096, 65536, 1 << 20])
        span = rng.choice([1, 4096, 1 << 20, 8 << 20])
        _check(requests, plan_fetches(requests, gap=gap, max_span=span), gap, span)


def test_adjacent_samples_make_one_read_and_far_ones_their_own() -> None:
    adjacent = [RangeRequest("u", 1024 * i, 1000) for i in range(64)]
    assert len(plan_fetches(adjacent, gap=0, max_span=1 << 20)) == 64  # 24-byte holes
    assert len(plan_fetches(adjacent, gap=24, max_span=1 << 20)) == 1
    assert len(plan_fetches(adjacent, gap=24, max_span=8 * 1024)) == 8  # capped at 8 KiB
    far = [RangeRequest("u", 1 << 30 - i, 10) for i in range(5)]
    assert len(plan_fetches(far, gap=65536, max_span=1 << 20)) == 5
    assert len(plan_fetches(adjacent, gap=-1, max_span=1 << 20)) == 64


def test_bad_settings_and_ranges_are_refused() -> None:
    with pytest.raises(ConfigError, match="gap >= -1"):
        plan_fetches([], gap=-2, max_span=1)
    with pytest.raises(ConfigError, match="offset >= 0"):
        plan_fetches([RangeRequest("u", -1, 3)], gap=0, max_span=1)
    with pytest.raises(ConfigError, match="WDS_CLOUD_BATCH_CONCURRENCY='0' must be at least 1"):
        BatchConfig().resolved({"WDS_CLOUD_BATCH_CONCURRENCY": "0"})
    assert BatchConfig().resolved({"WDS_CLOUD_BATCH_COALESCE_GAP": "1M"}).coalesce_gap == 1 << 20
    # the documented defaults (docs/indexes.md, README)
    assert BatchConfig().resolved({}) == BatchConfig(32, 64 << 10, 8 << 20, 2)


class _Store:
    """Objects in memory with a ``read_range`` that counts reads and reads in flight."""

    def __init__(self, rng: random.Random) -> None:
        self.blobs = {f"s3://b/shard-{k}.tar": rng.randbytes(5 << 20) for k in range(3)}
        self.reads: list[tuple[str, int, int]] = []
        self.inflight = 0
        self.peak = 0
        self.lock = threading.Lock()

    def read_range(self, url: str, offset: int, length: int) -> bytes:
        with self.lock:
            self.reads.append((url, offset, length))
            self.inflight += 1
            self.peak = max(self.peak, self.inflight)
        try:
            blob = self.blobs[url]
            if offset + length > len(blob):
                raise ShardReadError("the range ends past the object", url=url, offset=offset)
            return blob[offset : offset + length]
        finally:
            with self.lock:
                self.inflight -= 1


def test_read_ranges_in_order_one_read_per_planned_fetch() -> None:
    store = _Store(random.Random(1))
    for seed in range(300):
        rng = random.Random(seed)
        requests = [r for r in _layout(rng) if r.offset + r.length <= 5 << 20]
        config = BatchConfig(
            concurrency=rng.choice([1, 3, 32]), coalesce_gap=rng.choice([-1, 0, 65536])
        )
        store.reads.clear()
        store.peak = 0
        got = read_ranges(store.read_range, requests, config)
        assert got == [store.blobs[r.url][r.offset : r.offset + r.length] for r in requests]
        cfg = config.resolved()
        assert cfg.coalesce_gap is not None and cfg.max_span is not None
        plan = plan_fetches(requests, gap=cfg.coalesce_gap, max_span=cfg.max_span)
        assert sorted(store.reads) == sorted((f.url, f.offset, f.length) for f in plan)
        assert store.peak <= (config.concurrency or 0)


def test_a_failing_range_raises_its_error() -> None:
    store = _Store(random.Random(2))
    url = "s3://b/shard-0.tar"
    requests = [RangeRequest(url, i << 20, 100) for i in range(4)] + [
        RangeRequest(url, (5 << 20) - 10, 100)
    ]
    with pytest.raises(ShardReadError) as info:
        read_ranges(store.read_range, requests, BatchConfig(coalesce_gap=-1))
    assert info.value.url == url and info.value.offset == (5 << 20) - 10
