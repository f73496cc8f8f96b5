"""The global order: the permutation is a bijection, epochs are permutations split evenly over
ranks, the state is a tiny cursor and resume from it is exact with any world size and batch
size (planned in one process here; real ranks, workers and SIGKILL in test_global_resume.py)."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

import pytest

import wds_cloud as wds
from tests.resume.helpers import assert_exactly_once, write_shards
from wds_cloud.errors import ConfigError
from wds_cloud.index.globalorder import (
    GlobalBatchSampler,
    GlobalOrder,
    fetch_batch,
)
from wds_cloud.index.permutation import Permutation

PRIMES = [2, 3, 5, 7, 11, 13, 101, 257, 509, 1021, 2053, 4099, 7919]
POWERS = (
    [2**k for k in range(0, 15)]
    + [2**k + 1 for k in range(1, 13)]
    + [2**k - 1 for k in range(2, 13)]
)


# -- the permutation -----------------------------------------------------------------------------


@pytest.mark.parametrize("n", sorted({*range(1, 130), *PRIMES, *POWERS}))
def test_permutation_is_a_bijection(n: int) -> None:
    for seed, epoch in ((0, 0), (17, 3)):
        perm = Permutation(n, seed, epoch)
        assert sorted(perm) == list(range(n))
        assert len(perm) == n


@pytest.mark.parametrize("n", [10**9 + 7, 2**40, 3 * 2**33 + 1, 123_456_789_011])
def test_large_permutations_sampled(n: int) -> None:
    """No list of ``n`` is built: 3000 positions (the first ones and random ones) map to
    distinct elements of ``[0, n)``, and the same again from a new object."""
    rng = random.Random(n)
    positions = list(range(1000)) + [rng.randrange(n) for _ in range(2000)] + [n - 1]
    perm = Permutation(n, 5, 2)
    got = [perm[p] for p in positions]
    assert all(0 <= x < n for x in got)
    assert len(set(got)) == len(set(positions))
    assert got == [Permutation(n, 5, 2)[p] for p in positions]
    assert sum(x < 1000 for x in got[:1000]) < 10  # the start is not left in place


def test_permutation_is_deterministic_and_keyed() -> None:
    n = 1000
    base = list(Permutation(n, 17, 0))
    assert base == list(Permutation(n, 17, 0))
    others = [list(Permutation(n, 17, 1)), list(Permutation(n, 18, 0)), list(range(n))]
    for other in others:
        assert sum(a == b for a, b in zip(base, other, strict=True)) < 20
    assert base[:8] == [Permutation(n, 17, 0)[i] for i in range(8)]


def test_permutation_bounds() -> None:
    assert list(Permutation(0, 1)) == []
    with pytest.raises(IndexError, match="position 5 out of range for a permutation of 5"):
        Permutation(5, 1)[5]
    with pytest.raises(ValueError, match="must be >= 0"):
        Permutation(-1, 1)


# -- splitting an epoch over ranks ----------------------------------------------------------------


def run_ranks(
    samples: int, world: int, batch: int, *, state: Any = None, stop: int | None = None, **kw: Any
) -> tuple[list[list[list[int]]], dict[str, Any]]:
    """Every rank's batches (up to ``stop`` each) and the state they give (checked equal)."""
    out, states = [], []
    for rank in range(world):
        sampler = GlobalBatchSampler(samples, batch, seed=7, rank=rank, world=world, **kw)
        if state is not None:
            sampler.load_state_dict(json.loads(json.dumps(state)))
        got = []
        for step, indices in enumerate(sampler, 1):
            got.append(indices)
            if step == stop:
                break
        out.append(got)
        states.append(sampler.state_dict())
    assert all(s == states[0] for s in states)
    return out, states[0]


@pytest.mark.parametrize(
    ("samples", "world", "batch"), [(100, 4, 8), (97, 3, 5), (5, 7, 2), (64, 1, 64)]
)
@pytest.mark.parametrize("uneven", ["drop", "pad"])
def test_an_epoch_is_the_permutation_split_evenly(
    samples: int, world: int, batch: int, uneven: str
) -> None:
    ranks, state = run_ranks(samples, world, batch, uneven=uneven)
    sizes = [[len(b) for b in r] for r in ranks]
    assert all(s == sizes[0] for s in sizes)  # same batches, same sizes on every rank
    assert all(x == batch for x in sizes[0][:-1])
    got = Counter(i for r in ranks for b in r for i in b)
    if uneven == "drop":
        assert sum(got.values()) == samples // world * world
        assert max(got.values(), default=1) == 1
    else:
        assert set(got) == set(range(samples))
        assert sum(got.values()) == -(-samples // world) * world
        assert sum(got.values()) - samples < world
    total = sum(got.values())
    perm = Permutation(samples, 7, 0)
    assert got == Counter(perm[p % samples] for p in range(total))  # the epoch's first positions
    assert state["epoch"] == 1 and state["cursor"] == 0


def test_epochs_differ_and_repeat_per_seed() -> None:
    first, _ = run_ranks(200, 2, 10, epoch=0)
    again, _ = run_ranks(200, 2, 10, epoch=0)
    second, _ = run_ranks(200, 2, 10, epoch=1)
    assert first == again
    assert first != second
    assert sorted(i for r in second for b in r for i in b) == list(range(200))
    sampler = GlobalBatchSampler(200, 10, seed=7, rank=0, world=1)
    one, two = [i for b in sampler for i in b], [i for b in sampler for i in b]
    assert sorted(one) == sorted(two) == list(range(200)) and one != two  # iter() twice: 2 epochs


CASES = [
    # samples, (world, batch) saving, steps before the state, (world, batch) resuming
    (320, (2, 8), 8, (3, 5)),
    (320, (2, 8), 8, (1, 32)),
    (320, (4, 2), 1, (4, 2)),
    (101, (3, 4), 5, (2, 7)),
    (101, (1, 100), 1, (5, 1)),
    (17, (2, 3), 2, (16, 1)),
]


@pytest.mark.parametrize(("samples", "saved", "steps", "resumed"), CASES)
def test_resume_from_the_cursor_with_other_world_and_batch(
    samples: int, saved: tuple[int, int], steps: int, resumed: tuple[int, int]
) -> None:
    before, state = run_ranks(samples, saved[0], saved[1], stop=steps, uneven="pad")
    assert set(state) == {"format", "seed", "epoch", "cursor", "world", "samples"}
    assert state["cursor"] == steps * saved[1] * saved[0] and state["world"] == saved[0]
    assert len(json.dumps(state)) < 120  # tiny, whatever the dataset size
    rest, after = run_ranks(samples, resumed[0], resumed[1], state=state, uneven="pad")
    delivered = [i for run in (before, rest) for r in run for b in r for i in b]
    counts = Counter(delivered)
    assert set(counts) == set(range(samples))
    assert sum(counts.values()) - samples < resumed[0]  # the pad of the last world only
    assert (after["epoch"], after["cursor"], after["world"]) == (1, 0, resumed[0])


@pytest.mark.parametrize("seed", range(30))
def test_resume_chains_random(seed: int) -> None:
    """Saved and resumed three times with random worlds, batch sizes and stops (drop): no
    sample twice, and only the last world's remainder (< its size) left out."""
    rng = random.Random(seed)
    samples = rng.randint(1, 400)
    state, delivered = None, []
    world = 1
    for stop in [rng.randint(1, 6) for _ in range(3)] + [None]:
        world, batch = rng.randint(1, 6), rng.randint(1, 16)
        ranks, state = run_ranks(samples, world, batch, state=state, stop=stop, uneven="drop")
        delivered += [i for r in ranks for b in r for i in b]
        if state["epoch"] == 1:
            break
    assert len(delivered) == len(set(delivered))
    assert samples - len(delivered) < world


def test_state_checks() -> None:
    sampler = GlobalBatchSampler(50, 5, seed=1, rank=0, world=1)
    with pytest.raises(ConfigError, match="dataset of 40 samples, this one has 50"):
        sampler.load_state_dict({**sampler.state_dict(), "samples": 40})
    with pytest.raises(ConfigError, match="not a global-order state"):
        sampler.load_state_dict({"format": "wds_cloud.resume/1"})
    with pytest.raises(ConfigError, match="bad global-order state: no cursor"):
        sampler.load_state_dict({k: v for k, v in sampler.state_dict().items() if k != "cursor"})
    with pytest.raises(ConfigError, match="uneven must be 'drop' or 'pad'"):
        GlobalBatchSampler(50, 5, uneven="wrap")
    with pytest.raises(ConfigError, match="rank 2 out of range for a world of 2"):
        GlobalBatchSampler(50, 5, rank=2, world=2)
    other = GlobalBatchSampler(50, 5, seed=99, rank=0, world=1)
    other.load_state_dict({**sampler.state_dict(), "cursor": 10})
    assert other.seed == 1  # the state's permutation goes on


def test_set_epoch_keeps_the_cursor_of_the_same_epoch() -> None:
    sampler = GlobalBatchSampler(50, 5, seed=1, rank=0, world=1)
    sampler.load_state_dict({**sampler.state_dict(), "epoch": 3, "cursor": 20})
    sampler.set_epoch(3)
    assert len(sampler) == 6
    sampler.set_epoch(4)
    assert len(sampler) == 10


def test_rank_and_world_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    sampler = GlobalBatchSampler(40, 5, seed=1)
    mine = [i for b in sampler for i in b]
    explicit = GlobalBatchSampler(40, 5, seed=1, rank=1, world=4)
    assert mine == [i for b in explicit for i in b] and len(mine) == 10
    assert sampler.state_dict()["world"] == 4


# -- reading samples -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[str]]:
    """6 local shards of 20 samples (PAX headers), indexed; (dataset JSON, keys)."""
    tmp = tmp_path_factory.mktemp("global")
    urls, keys = write_shards(tmp, 6, 20)
    wds.build_index(urls, json=str(tmp / "index.json"))
    return str(tmp / "index.json"), keys


def test_global_order_reads_the_permutation(indexed: tuple[str, list[str]]) -> None:
    json_url, keys = indexed
    ds = wds.IndexedWebDataset(json_url)
    order = GlobalOrder(ds, 16, seed=4, readahead=3)
    got = [s["__key__"] for batch in order for s in batch]
    perm = Permutation(len(ds), 4, 0)
    assert got == [ds[perm[p]]["__key__"] for p in range(len(ds))]
    assert_exactly_once(got, keys)
    assert order.state_dict()["epoch"] == 1
    second = [s["__key__"] for batch in order for s in batch]
    assert sorted(second) == sorted(keys) and second != got


def test_global_order_resumes_exactly(indexed: tuple[str, list[str]]) -> None:
    json_url, keys = indexed
    ds = wds.IndexedWebDataset(json_url)
    whole = [s["__key__"] for batch in GlobalOrder(ds, 7, seed=4) for s in batch]
    delivered: list[str] = []
    state = None
    for stop in (3, 5, None):
        order = GlobalOrder(ds, 7, seed=0, collate=lambda b: [s["__key__"] for s in b])
        if state is not None:
            order.load_state_dict(state)
        else:
            order.load_state_dict({**order.state_dict(), "seed": 4})
        for step, batch in enumerate(order, 1):
            delivered += batch
            if step == stop:
                state = json.loads(json.dumps(order.state_dict()))
                break
    assert delivered == whole
    assert_exactly_once(delivered, keys)


class _Batched:
    """A map-style dataset with ``get_batch`` that notes each call (the batch-read contract of
    ``IndexedWebDataset.get_batch``)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.calls: list[list[int]] = []

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        raise AssertionError("get_batch should have been used")

    def get_batch(self, indices: list[int]) -> list[int]:
        self.calls.append(list(indices))
        return [i * 10 for i in indices]


def test_fetch_batch_uses_get_batch_when_present() -> None:
    ds = _Batched(30)
    assert fetch_batch(ds, [3, 1, 2]) == [30, 10, 20]
    assert ds.calls == [[3, 1, 2]]
    assert fetch_batch([5, 6, 7], [2, 0]) == [7, 5]
    order = GlobalOrder(ds, 8, seed=2)
    batches = list(order)
    assert [len(c) for c in ds.calls[1:]] == [8, 8, 8, 6]  # one call per batch
    assert sorted(x for b in batches for x in b) == sorted(10 * i for c in ds.calls[1:] for i in c)


class _BatchedAhead(_Batched):
    """With ``iter_batches`` too (``IndexedWebDataset``'s read-ahead), noting its arguments."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.readaheads: list[int | None] = []

    def iter_batches(self, batches: Any, *, readahead: int | None = None) -> Any:
        self.readaheads.append(readahead)
        return (self.get_batch(list(b)) for b in batches)


def test_the_datasets_read_ahead_is_used_when_present() -> None:
    ds = _BatchedAhead(20)
    batches = list(GlobalOrder(ds, 8, seed=2, readahead=3))
    assert ds.readaheads == [3]
    assert [len(c) for c in ds.calls] == [8, 8, 4]
    assert batches == [[10 * i for i in c] for c in ds.calls]


def test_dataloader_with_the_batch_sampler(indexed: tuple[str, list[str]]) -> None:
    """``IndexedWebDataset`` + ``DataLoader(batch_sampler=GlobalBatchSampler(...))`` with two
    workers: the same batches as ``GlobalOrder``; ``state_dict(delivered=k)`` resumes at the
    loop's batch ``k`` although the DataLoader took sampler batches ahead."""
    import torch.utils.data

    json_url, keys = indexed
    ds = wds.IndexedWebDataset(json_url)
    sampler = GlobalBatchSampler(len(ds), 10, seed=4, rank=0, world=1)
    loader = torch.utils.data.DataLoader(
        ds, batch_sampler=sampler, num_workers=2, collate_fn=lambda b: [s["__key__"] for s in b]
    )
    whole = [s["__key__"] for batch in GlobalOrder(ds, 10, seed=4) for s in batch]
    got = []
    for step, batch in enumerate(loader, 1):
        got += batch
        if step == 4:
            state = sampler.state_dict(delivered=4)
            break
    assert sampler.state_dict()["cursor"] > state["cursor"] == 40  # the sampler ran ahead
    resumed = GlobalBatchSampler(len(ds), 10, seed=0, rank=0, world=1)
    resumed.load_state_dict(state)
    got += [s["__key__"] for b in resumed for s in (ds[i] for i in b)]
    assert got == whole
    assert_exactly_once(got, keys)
