"""Packing efficiency (real tokens / capacity of the packs made) of ``wds.pack`` against
Megatron-Energon's published scheme at the same buffer size, on generated length distributions.

The reference is written here from Energon's documentation and its ``PackingDataset`` loop
(``docs/source/advanced/packing.md``, ``wrappers/packing_dataset.py``): it fills a reading
buffer to ``packing_buffer_size`` samples, hands the whole buffer to ``select_samples_to_pack``
(here textbook first-fit-decreasing: sort by length, longest first, each into the first bin with
room, every bin returned), then emits those groups one by one while refilling the buffer, and
at the end packs what is left the same way. ``benchmarks/bench_pack.py`` imports it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

import pytest

import wds_cloud as wds

CAPACITY = 4096
DISTRIBUTIONS = ("uniform", "lognormal", "bimodal")


def lengths_for(name: str, n: int, capacity: int = CAPACITY, seed: int = 0) -> list[int]:
    """``n`` sample lengths in ``1..capacity`` drawn from the distribution ``name``."""
    rng = random.Random(f"{name}/{seed}")

    def clip(x: float) -> int:
        return min(capacity, max(1, int(x)))

    if name == "uniform":
        return [rng.randint(1, capacity) for _ in range(n)]
    if name == "lognormal":  # median capacity / 8, a long tail up to the capacity
        return [clip(rng.lognormvariate(math.log(capacity / 8), 1.0)) for _ in range(n)]
    if name == "bimodal":  # 70 % short (10 %), 30 % long (60 %)
        return [
            clip(
                rng.gauss(0.1 * capacity, 0.03 * capacity)
                if rng.random() < 0.7
                else rng.gauss(0.6 * capacity, 0.1 * capacity)
            )
            for _ in range(n)
        ]
    raise ValueError(name)


def first_fit_decreasing(lengths: list[int], capacity: int) -> list[list[int]]:
    """Bins of positions into ``lengths``: longest first, each into the first bin with room."""
    bins: list[list[int]] = []
    fill: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        for b, used in enumerate(fill):
            if used + lengths[i] <= capacity:
                bins[b].append(i)
                fill[b] += lengths[i]
                break
        else:
            bins.append([i])
            fill.append(lengths[i])
    return bins


def energon_packs(lengths: list[int], capacity: int, buffer: int) -> list[list[int]]:
    """The packs (sample indices) Energon's loop makes with first-fit-decreasing selection."""
    source: Iterator[int] = iter(range(len(lengths)))
    reading: list[int] = []
    selected: list[list[int]] = []
    out: list[list[int]] = []

    def select() -> None:
        groups = first_fit_decreasing([lengths[i] for i in reading], capacity)
        selected.extend([reading[j] for j in group] for group in groups)
        reading.clear()

    def fill() -> bool:
        while len(reading) + sum(len(g) for g in selected) < buffer:
            nxt = next(source, None)
            if nxt is None:
                return False
            reading.append(nxt)
        return True

    while fill():
        if not selected:
            select()
        out.append(selected.pop(0))
    out.extend(selected)
    selected.clear()
    if reading:
        select()
        out.extend(selected)
    return out


def our_packs(lengths: list[int], capacity: int, buffer: int) -> list[list[int]]:
    stage = wds.pack(capacity, length=lengths.__getitem__, buffer=buffer)
    return list(stage(range(len(lengths))))


def efficiency(packs: list[list[int]], lengths: list[int], capacity: int) -> float:
    """Real tokens over the capacity of the packs."""
    return sum(lengths[i] for p in packs for i in p) / (capacity * len(packs))


def check_packs(packs: list[list[int]], lengths: list[int], capacity: int) -> None:
    assert sorted(i for p in packs for i in p) == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in p) <= capacity for p in packs)


def test_reference_is_energons_loop() -> None:
    # buffer 4: [9, 2, 8, 3] -> FFD bins [9], [8, 2], [3]: emitted one per refill; then the
    # rest [5, 6] at the end -> [6], [5]
    lengths = [9, 2, 8, 3, 5, 6]
    assert energon_packs(lengths, 10, 4) == [[0], [2, 1], [3], [5], [4]]


@pytest.mark.parametrize("name", DISTRIBUTIONS)
@pytest.mark.parametrize("buffer", [8, 64, 512])
def test_efficiency_at_least_energons(name: str, buffer: int) -> None:
    lengths = lengths_for(name, 6000)
    ours, theirs = our_packs(lengths, CAPACITY, buffer), energon_packs(lengths, CAPACITY, buffer)
    check_packs(ours, lengths, CAPACITY)
    check_packs(theirs, lengths, CAPACITY)
    mine, ref = efficiency(ours, lengths, CAPACITY), efficiency(theirs, lengths, CAPACITY)
    assert mine >= ref, f"{name}, buffer {buffer}: {mine:.4f} < Energon's {ref:.4f}"
