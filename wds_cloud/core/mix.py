"""Mixing several datasets: ``RandomMix`` (seedable) and ``RoundRobin``."""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from wds_cloud.core.shuffle import stable_seed
from wds_cloud.errors import ConfigError


def round_robin_shortest(*sources: Iterator[Any]) -> Iterator[Any]:
    """Alternate between sources; stop when the current one runs out."""
    for i in itertools.count():
        try:
            yield next(sources[i % len(sources)])
        except StopIteration:
            return


def round_robin_longest(*sources: Iterator[Any]) -> Iterator[Any]:
    """Alternate between sources, dropping exhausted ones, until all are exhausted."""
    live = list(sources)
    i = 0
    while live:
        i %= len(live)
        try:
            sample = next(live[i])
        except StopIteration:
            del live[i]
            continue
        i += 1
        yield sample


class RoundRobin:
    """Iterate several datasets in turn (webdataset ``RoundRobin``).

    Args:
        datasets: the datasets (re-iterated on every ``iter()``).
        longest: go on until all are exhausted instead of stopping at the first.
    """

    def __init__(self, datasets: Sequence[Iterable[Any]], longest: bool = False) -> None:
        if not datasets:
            raise ConfigError("RoundRobin needs at least one dataset")
        self.datasets = list(datasets)
        self.longest = longest

    def __iter__(self) -> Iterator[Any]:
        sources = [iter(d) for d in self.datasets]
        if self.longest:
            return round_robin_longest(*sources)
        return round_robin_shortest(*sources)


def random_samples(
    sources: list[Iterator[Any]],
    probs: Sequence[float] | None = None,
    longest: bool = False,
    rng: random.Random | None = None,
) -> Iterator[Any]:
    """Draw each next sample from a source chosen with probability ``probs[i]``.

    With ``longest=False`` stop when a chosen source is exhausted; otherwise drop it and
    renormalise.
    """
    sources = list(sources)
    weights = [1.0] * len(sources) if probs is None else [float(p) for p in probs]
    if len(weights) != len(sources):
        raise ConfigError(f"RandomMix: {len(weights)} probabilities for {len(sources)} datasets")
    if any(w < 0 for w in weights) or sum(weights) <= 0:
        raise ConfigError(f"RandomMix: probabilities must be >= 0 with a positive sum: {weights}")
    rand = (rng or random.Random()).random
    while sources:
        cum = list(itertools.accumulate(weights))
        i = builtin_min(bisect.bisect_right(cum, rand() * cum[-1]), len(sources) - 1)
        try:
            yield next(sources[i])
        except StopIteration:
            if not longest:
                return
            del sources[i]
            del weights[i]
            if weights and sum(weights) <= 0:
                return


builtin_min = min


class RandomMix:
    """Mix datasets by random choice with weights (webdataset ``RandomMix``, plus ``seed``).

    Args:
        datasets: the datasets.
        probs: relative weights (default equal).
        longest: keep going until every dataset is exhausted.
        seed: seed for the choices; with a seed, pass ``n`` uses ``(seed, epoch)`` and the
            epoch advances per ``iter()`` (``set_epoch`` sets it). ``None``: unseeded.
    """

    def __init__(
        self,
        datasets: Sequence[Iterable[Any]],
        probs: Sequence[float] | None = None,
        longest: bool = False,
        seed: int | None = None,
    ) -> None:
        if not datasets:
            raise ConfigError("RandomMix needs at least one dataset")
        self.datasets = list(datasets)
        self.probs = None if probs is None else list(probs)
        self.longest = longest
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Make the next pass use ``epoch`` (and forward it to the datasets that take it)."""
        self.epoch = epoch
        for d in self.datasets:
            if hasattr(d, "set_epoch"):
                d.set_epoch(epoch)

    def __iter__(self) -> Iterator[Any]:
        rng = None if self.seed is None else random.Random(stable_seed(self.seed, self.epoch))
        self.epoch += 1
        return random_samples(
            [iter(d) for d in self.datasets], self.probs, longest=self.longest, rng=rng
        )
