"""The order of a data plan (``index.mixorder.MixSampler``): which samples each rank reads,
its state, and resume with other world sizes, in process (ranks simulated in lockstep; the
real-process test with gloo and SIGKILL is ``tests/resume/test_mixplan_elastic.py``)."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

import pytest

from wds_cloud.core.mixplan import BATCHINGS, DataPlan
from wds_cloud.errors import ConfigError
from wds_cloud.index.mixorder import MixedDataset, MixSampler

SIZES = [50, 37, 23]
NAMES = ["a", "b", "c"]


def plan_of(batching: str, seed: int = 3) -> DataPlan:
    return DataPlan(
        dict.fromkeys(NAMES, None),
        counts={"a": 70},
        choose={"b": 30},
        repeat={"c": 1.5},
        batching=batching,
        seed=seed,
    )


def source_of(index: int) -> tuple[str, int]:
    """``(source, sample)`` of a mixed index (sources laid end to end)."""
    for name, size in zip(NAMES, SIZES, strict=True):
        if index < size:
            return name, index
        index -= size
    raise AssertionError(index)


def run(
    plan: DataPlan, batch: int, schedule: list[tuple[int, int | None]], epochs: int
) -> tuple[Counter[tuple[int, str, int]], list[dict[str, Any]]]:
    """Ranks in lockstep, generation after generation: ``(world, steps)`` runs ``steps`` global
    steps (None: to the end of epoch ``epochs - 1``) then takes the state every rank gives
    (they must agree) for the next generation. Returns ``(epoch, source, sample)`` counts and
    the states."""
    seen: Counter[tuple[int, str, int]] = Counter()
    state: dict[str, Any] | None = None
    states = []
    for world, steps in schedule:
        ranks = [MixSampler(plan, SIZES, batch, rank=r, world=world) for r in range(world)]
        for sampler in ranks:
            if state is not None:
                sampler.load_state_dict(json.loads(json.dumps(state)))
        taken, stopped = 0, False
        while ranks[0].epoch < epochs and not stopped:
            epoch = ranks[0].epoch
            passes = [iter(s) for s in ranks]
            while not (stopped := steps is not None and taken == steps):
                got = [next(p, None) for p in passes]
                if all(g is None for g in got):
                    break  # every rank's pass is over: the next epoch
                assert got[0] is not None  # rank 0 has the most batches
                for g in got:
                    assert len(g or []) <= batch
                    seen.update((epoch, *source_of(i)) for i in g or [])
                taken += 1
        given = [s.state_dict() for s in ranks]
        assert all(g == given[0] for g in given), given
        state = given[0]
        states.append(state)
    return seen, states


def expected(plan: DataPlan, epochs: int) -> Counter[tuple[int, str, int]]:
    """What the epochs hold by definition: per source, its quota as whole permutations of its
    samples plus a part of one (each sample ``q // n`` or ``q // n + 1`` times)."""
    return run(plan, 8, [(1, None)], epochs)[0]


@pytest.mark.parametrize("batching", BATCHINGS)
def test_each_epoch_gives_each_source_its_quota_without_repeats(batching: str) -> None:
    plan = plan_of(batching)
    seen, _ = run(plan, 8, [(2, None)], 2)
    for epoch in range(2):
        for name, size, quota in zip(NAMES, SIZES, [70, 30, 35], strict=True):
            counts = [seen[(epoch, name, j)] for j in range(size)]
            assert sum(counts) == quota
            assert set(counts) <= {quota // size, quota // size + 1}  # no repeat before all
    assert seen == expected(plan, 2)  # the batching does not change what an epoch holds


@pytest.mark.parametrize("batching", BATCHINGS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_resume_with_other_world_sizes_delivers_the_same_samples(batching: str, seed: int) -> None:
    plan = plan_of(batching, seed)
    rng = random.Random(seed)
    schedule = [(w, rng.randrange(1, 9)) for w in (2, 3, 4, 1, 3)] + [(4, None)]
    seen, states = run(plan, 8, schedule, 3)
    assert seen == expected(plan, 3)
    assert all(len(json.dumps(s)) < 300 for s in states)


def test_the_state_is_small_json_of_positions() -> None:
    sampler = MixSampler(plan_of("stratified"), SIZES, 8, rank=0, world=2)
    it = iter(sampler)
    next(it), next(it)
    state = sampler.state_dict()
    assert state["format"] == "wds_cloud.mixplan/1"
    assert (state["epoch"], state["batch"]) == (0, 4)
    assert sum(state["done"].values()) == 32
    assert state["quotas"] == {"a": 70, "b": 30, "c": 35}


def test_ranks_past_the_end_of_the_last_step_get_nothing() -> None:
    plan = DataPlan(dict.fromkeys(NAMES, None), counts=[10, 10, 10], batching="random")
    lens = [len(MixSampler(plan, SIZES, 8, rank=r, world=3)) for r in range(3)]
    assert lens == [2, 1, 1]  # 4 batches over 3 ranks: rank 0 has the most


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": "other/1"}, "not a data-plan state"),
        ({"seed": 4}, "seed=4, this plan 3"),
        ({"batch_size": 16}, "batch_size=16, this plan 8"),
        ({"batching": "random"}, "batching='random', this plan 'stratified'"),
        ({"quotas": {"a": 71, "b": 30, "c": 35}}, "a: 71 -> 70"),
        ({"done": {"a": 1}}, "'done' must name"),
        ({"done": {"a": 99, "b": 0, "c": 0}}, "outside the quotas"),
    ],
)
def test_a_state_of_another_plan_is_refused(change: dict[str, Any], message: str) -> None:
    sampler = MixSampler(plan_of("stratified"), SIZES, 8, rank=0, world=1)
    with pytest.raises(ConfigError) as err:
        sampler.load_state_dict({**sampler.state_dict(), **change})
    assert message in str(err.value)


def test_mixed_dataset_reads_each_source_and_names_it() -> None:
    class Numbers:
        def __init__(self, tag: str, n: int) -> None:
            self.tag, self.n, self.batches = tag, n, 0

        def __len__(self) -> int:
            return self.n

        def __getitem__(self, i: int) -> dict[str, Any]:
            return {"__key__": f"{self.tag}{i}"}

        def get_batch(self, indices: list[int]) -> list[dict[str, Any]]:
            self.batches += 1
            return [self[i] for i in indices]

    a, b = Numbers("a", 3), Numbers("b", 2)
    mixed = MixedDataset(["first", "second"], [a, b])
    got = mixed.get_batch([4, 0, 3, 2])
    assert [s["__key__"] for s in got] == ["b1", "a0", "b0", "a2"]
    assert [s["__source__"] for s in got] == ["second", "first", "second", "first"]
    assert (a.batches, b.batches) == (1, 1)  # one batched read per source
    with pytest.raises(IndexError):
        mixed[5]
