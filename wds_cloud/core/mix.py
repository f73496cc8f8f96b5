"""Mixing several datasets: ``RandomMix`` (seedable, resumable) and ``RoundRobin``."""

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
    return mixed_samples(
        list(sources), mix_weights(probs, len(sources)), longest, rng or random.Random()
    )


def mix_weights(probs: Sequence[float] | None, n: int) -> list[float]:
    """The weights of ``n`` datasets (``probs``, or all 1.0).

    Raises:
        ConfigError: not ``n`` of them, a negative one, or no positive sum.
    """
    weights = [1.0] * n if probs is None else [float(p) for p in probs]
    if len(weights) != n:
        raise ConfigError(f"RandomMix: {len(weights)} probabilities for {n} datasets")
    if any(w < 0 for w in weights) or sum(weights) <= 0:
        raise ConfigError(f"RandomMix: probabilities must be >= 0 with a positive sum: {weights}")
    return weights


def mixed_samples(
    sources: list[Iterator[Any]],
    weights: list[float],
    longest: bool,
    rng: random.Random,
    track: dict[str, Any] | None = None,
    live: list[int] | None = None,
) -> Iterator[Any]:
    """:func:`random_samples`; ``track`` counts the RNG draws (``draws``) and lists the
    exhausted sources by their index in ``live`` (``exhausted``)."""
    live = list(range(len(sources))) if live is None else live
    rand = rng.random
    while sources:
        cum = list(itertools.accumulate(weights))
        i = builtin_min(bisect.bisect_right(cum, rand() * cum[-1]), len(sources) - 1)
        if track is not None:
            track["draws"] += 1
            track["drawn"].add(live[i])
        try:
            yield next(sources[i])
        except StopIteration:
            if track is not None:
                track["exhausted"].append(live[i])
            if not longest:
                break
            del sources[i]
            del weights[i]
            del live[i]
            if weights and sum(weights) <= 0:
                break
    if track is not None:
        track["finished"] = True


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
        emit = self.__dict__.get("_resume_emit")
        if emit:  # a DataLoader's dataset under a WebLoader, which set the function emitting
            # the tagged pass (resume.tracked.emit_mix: resume imports this module, not back)
            tagged: Iterator[Any] = emit(self)
            return tagged
        state = self.__dict__.pop("_resume_pending", None)
        if state is None:
            self._finish_unread()
        if state is None and self.seed is None:
            self.__dict__.pop("_resume_track", None)
            self.epoch += 1
            return random_samples(
                [iter(d) for d in self.datasets], self.probs, longest=self.longest
            )
        epoch = self.epoch if state is None else int(state["epoch"])
        self.epoch = epoch + 1
        rng = random.Random(stable_seed(self.seed or 0, epoch))
        track: dict[str, Any] = {
            "epoch": epoch,
            "draws": 0,
            "exhausted": [],
            "drawn": set(),  # datasets drawn from in this pass (or since it was resumed)
            "fresh": state is None,
        }
        if state is not None:
            for _ in range(int(state["draws"])):
                rng.random()  # the RNG position: draws made before the state was taken
            track.update(draws=int(state["draws"]), exhausted=list(state["exhausted"]))
        self._resume_track = track
        gone = set(track["exhausted"])
        live = [i for i in range(len(self.datasets)) if i not in gone]
        weights = mix_weights(self.probs, len(self.datasets))
        return mixed_samples(
            [iter(self.datasets[i]) for i in live],
            [weights[i] for i in live],
            self.longest,
            rng,
            track,
            live,
        )

    # -- resuming (see docs/resume.md, "with_epoch, resampling and RandomMix") ---------------

    def state_dict(self) -> dict[str, Any]:
        """The mix RNG position (draws made, exhausted datasets) and every dataset's state.

        Exact only when this object is iterated directly (it buffers nothing); each dataset
        must itself have ``state_dict`` (a resumable ``WebDataset``/``DataPipeline``).

        Raises:
            ConfigError: no ``seed`` (the draws could not be made again), or a dataset cannot
                be resumed.
        """
        from wds_cloud.resume.state import STATE_FORMAT

        if self.seed is None:
            raise ConfigError(
                "RandomMix(seed=None) draws from an unseeded RNG: pass seed= to resume"
            )
        track = (
            self.__dict__.get("_resume_pending")  # loaded, not iterated yet
            or self.__dict__.get("_resume_track")
            or {"epoch": self.epoch, "draws": 0, "exhausted": []}
        )
        seed: int = self.seed
        for i, d in enumerate(self.datasets):
            if not callable(getattr(d, "state_dict", None)):
                raise ConfigError(f"RandomMix: dataset {i} ({type(d).__name__}) has no state_dict")
        mix = {k: track[k] for k in ("epoch", "draws", "finished") if k in track}
        return {
            "format": STATE_FORMAT,
            "mix": {**mix, "seed": seed, "exhausted": list(track["exhausted"])},
            "datasets": [self._sub_state(i, track) for i in range(len(self.datasets))],
        }

    def _sub_state(self, i: int, track: dict[str, Any]) -> dict[str, Any]:
        """Dataset ``i``'s state; one not drawn from yet in a fresh pass is at the start of
        its next pass (its state is of the pass the previous ``iter()`` dropped)."""
        sub: dict[str, Any] = self.datasets[i].state_dict()  # type: ignore[attr-defined]
        if track.get("fresh") and i not in track["drawn"]:
            return _ended(sub)
        return sub

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next ``iter()`` continue the mix ``state`` was taken in: the same draws
        from the same position, each dataset resumed from its own state.

        Raises:
            ConfigError: not a RandomMix state of this many datasets, or another seed.
        """
        from wds_cloud.resume.state import check_state

        state = check_state(dict(state))
        mix, subs = state.get("mix"), state.get("datasets")
        if not isinstance(mix, dict) or not isinstance(subs, list):
            raise ConfigError("not a RandomMix state (no 'mix' and 'datasets' entries)")
        if len(subs) != len(self.datasets) or mix.get("seed") != self.seed:
            raise ConfigError(
                f"the RandomMix state was taken with {len(subs)} datasets and seed "
                f"{mix.get('seed')!r}; this RandomMix has {len(self.datasets)} and {self.seed!r}"
            )
        self.__dict__.pop("_resume_track", None)
        finished = bool(mix.get("finished"))
        for d, sub in zip(self.datasets, subs, strict=True):
            d.load_state_dict(_ended(sub) if finished else sub)  # type: ignore[attr-defined]
        if finished:
            self.epoch = int(mix["epoch"]) + 1
        else:
            self._resume_pending = dict(mix)
            self._resume_subs = subs

    def _finish_unread(self) -> None:
        """After a resumed pass: a dataset it never drew from still holds the state of a pass
        the uninterrupted run had started and dropped; make it start its next pass instead."""
        subs = self.__dict__.pop("_resume_subs", None)
        track = self.__dict__.get("_resume_track")
        if subs is None or track is None:
            return
        for i, (d, sub) in enumerate(zip(self.datasets, subs, strict=True)):
            if i not in track["drawn"]:
                d.load_state_dict(_ended(sub))  # type: ignore[attr-defined]


def _ended(sub: dict[str, Any]) -> dict[str, Any]:
    """A dataset's state with its pass ended, if the pass was started (it delivered items)."""
    if sub.get("finished") or int(sub.get("delivered", 0)) > 0:
        return dict(sub, finished=True)
    return sub
