"""Data plans: several sources mixed by weight or by exact per-epoch counts, batched four ways.

A :class:`DataPlan` is a declaration (sources, quotas, batching, seed); it holds no position.
What it decides is a pure function of ``(seed, epoch, position)``, so a loader that keeps the
position (``index.mixorder.MixSampler``: epoch, global batches done, samples of each source
done) can resume it with any number of ranks and workers:

- **Quotas** (:meth:`DataPlan.quotas`): the samples each source gives per epoch. ``counts=``
  exact; ``repeat=r``: ``r * size`` rounded (halves up); ``choose=k``: ``k`` drawn without replacement
  (``k <= size``); ``weights=``: ``epoch_size`` (default: all samples of all sources) split by
  weight, largest remainder. Source ``i``'s epoch positions are ``0 .. quota_i - 1``; which
  sample each position is (a seeded permutation per source and pass) is the reader's business.
- **Composition** (:func:`compose_step`): how many samples of each source the next batches of
  one global step hold, from the samples each source has left. ``stratified``: every batch
  ``floor`` or ``ceil`` of ``B * quota_i / total`` (the remainder to the sources furthest behind
  their share, ties broken by a seeded rotation per batch); ``random``: a seeded draw without
  replacement from what is left (samples interleaved by weight); ``per_device``: each batch
  from one source, drawn by what each has left; ``per_stream``: every batch of a global step
  from the same source (a new draw when it runs out). Every mode spends each quota exactly.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wds_cloud.core.shuffle import stable_seed
from wds_cloud.errors import ConfigError

__all__ = ["BATCHINGS", "DataPlan", "PlanSource", "compose_step", "mix"]

BATCHINGS = ("random", "stratified", "per_stream", "per_device")
QUOTA_KINDS = ("weight", "count", "repeat", "choose")


@dataclass(frozen=True)
class PlanSource:
    """One source of a plan: its name, its data (a shard spec or a map-style dataset) and
    exactly one of ``weight``, ``count``, ``repeat``, ``choose``."""

    name: str
    data: Any
    kind: str
    value: float

    def quota(self, size: int) -> int | None:
        """Samples per epoch from ``size`` samples (None for a weight: the plan splits those).

        Raises:
            ConfigError: ``choose`` larger than the source.
        """
        if self.kind == "count":
            return int(self.value)
        if self.kind == "repeat":
            return math.floor(self.value * size + 0.5)  # halves up, not to even
        if self.kind == "choose":
            if self.value > size:
                raise ConfigError(
                    f"source {self.name!r}: choose={int(self.value)} but it has {size} samples "
                    f"({_describe(self.data)}): it would run out; choose at most {size}"
                )
            return int(self.value)
        return None


def _describe(data: Any) -> str:
    if isinstance(data, str):
        return f"shards {data!r}"
    if isinstance(data, list | tuple):
        return f"{len(data)} shards from {data[0]!r}" if data else "no shards"
    return type(data).__name__


def _per_source(
    names: Sequence[str], given: Mapping[str, float] | Sequence[float], what: str
) -> dict[str, float]:
    """``given`` (a mapping by name, or a sequence in source order) as a mapping by name."""
    if isinstance(given, Mapping):
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise ConfigError(f"mix: {what}= names unknown sources {unknown}; sources: {names}")
        return {k: float(v) for k, v in given.items()}
    values = list(given)
    if len(values) != len(names):
        raise ConfigError(f"mix: {len(values)} {what} values for {len(names)} sources {names}")
    return {n: float(v) for n, v in zip(names, values, strict=True)}


def largest_remainder(total: int, weights: Sequence[float]) -> list[int]:
    """``total`` split in proportion to ``weights`` (sum > 0), exactly, by largest remainder
    (ties to the earlier entry)."""
    whole = sum(weights)
    shares = [total * w / whole for w in weights]
    counts = [math.floor(s) for s in shares]
    order = sorted(range(len(shares)), key=lambda i: (counts[i] - shares[i], i))
    for i in order[: total - sum(counts)]:
        counts[i] += 1
    return counts


class DataPlan:
    """Several sources mixed into one stream of batches, epoch by epoch (``wds.mix``).

    Args:
        sources: ``{name: data}``: each ``data`` a shard spec (brace pattern, list of URLs,
            dataset JSON: read with ``IndexedWebDataset``, so the shards need ``.idx`` files or
            ``build_missing=True``) or a map-style dataset (``len`` and ``ds[i]``).
        weights: relative weights ``{name: w}`` (or a list in source order): each epoch holds
            ``epoch_size`` samples split by weight. Not with the three below.
        counts: exact samples per epoch of the sources named.
        repeat: passes per epoch (``r * size`` samples, rounded halves up) of the sources named.
        choose: samples per epoch, drawn without replacement, of the sources named.
            ``counts``/``repeat``/``choose`` may be combined; together they name every source
            exactly once.
        batching: ``"random"``, ``"stratified"``, ``"per_stream"`` or ``"per_device"``.
        seed: seeds every draw (the same plan and seed give the same epochs everywhere).
        epoch_size: samples per epoch with ``weights`` (default: all samples of all sources).

    Raises:
        ConfigError: no sources, a source given no quota or two, weights that are negative or
            do not sum to a positive number, a negative count, an unknown batching.
    """

    def __init__(
        self,
        sources: Mapping[str, Any],
        *,
        weights: Mapping[str, float] | Sequence[float] | None = None,
        counts: Mapping[str, float] | Sequence[float] | None = None,
        repeat: Mapping[str, float] | Sequence[float] | None = None,
        choose: Mapping[str, float] | Sequence[float] | None = None,
        batching: str = "random",
        seed: int = 0,
        epoch_size: int | None = None,
    ) -> None:
        if not isinstance(sources, Mapping) or not sources:
            raise ConfigError("mix: give the sources as a non-empty {name: shards or dataset}")
        names = [str(n) for n in sources]
        if batching not in BATCHINGS:
            raise ConfigError(f"mix: batching must be one of {BATCHINGS}, got {batching!r}")
        given = {"weight": weights, "count": counts, "repeat": repeat, "choose": choose}
        if weights is not None and any(v is not None for k, v in given.items() if k != "weight"):
            raise ConfigError("mix: weights= cannot be combined with counts=/repeat=/choose=")
        if all(v is None for v in given.values()):
            given["weight"] = [1.0] * len(names)  # equal weights
        kinds: dict[str, list[tuple[str, float]]] = {n: [] for n in names}
        for kind, values in given.items():
            if values is not None:
                for name, value in _per_source(names, values, kind).items():
                    kinds[name].append((kind, value))
        built = []
        for name in names:
            if len(kinds[name]) != 1:
                found = [k for k, _ in kinds[name]] or "none"
                raise ConfigError(
                    f"mix: source {name!r} needs exactly one of weight/count/repeat/choose, "
                    f"got {found}"
                )
            kind, value = kinds[name][0]
            if not math.isfinite(value) or value < 0:
                raise ConfigError(f"mix: source {name!r}: {kind} must be >= 0, got {value}")
            if kind in ("count", "choose") and value != int(value):
                raise ConfigError(f"mix: source {name!r}: {kind} must be whole, got {value}")
            built.append(PlanSource(name, sources[name], kind, value))
        if weights is not None or given["weight"] is not None:
            total = sum(s.value for s in built)
            if not total > 0:
                raise ConfigError(
                    f"mix: the weights must sum to a positive number, got "
                    f"{ {s.name: s.value for s in built} }"
                )
        if epoch_size is not None and (weights is None or epoch_size < 1):
            raise ConfigError("mix: epoch_size (>= 1) goes with weights= only")
        self.sources = built
        self.batching = batching
        self.seed = int(seed)
        self.epoch_size = epoch_size

    @property
    def names(self) -> list[str]:
        """The sources' names, in order."""
        return [s.name for s in self.sources]

    def quotas(self, sizes: Sequence[int]) -> list[int]:
        """Samples per epoch of each source, from the sources' sizes (in order).

        Raises:
            ConfigError: an empty source with a positive quota, ``choose`` over a source's
                size, or an epoch of no samples.
        """
        if len(sizes) != len(self.sources):
            raise ConfigError(f"{len(sizes)} sizes for {len(self.sources)} sources")
        if self.sources[0].kind == "weight":
            total = self.epoch_size if self.epoch_size is not None else sum(sizes)
            quotas = largest_remainder(total, [s.value for s in self.sources])
        else:
            quotas = [int(s.quota(n) or 0) for s, n in zip(self.sources, sizes, strict=True)]
        for s, n, q in zip(self.sources, sizes, quotas, strict=True):
            if q > 0 and n < 1:
                raise ConfigError(f"source {s.name!r} has no samples ({_describe(s.data)})")
        if sum(quotas) < 1:
            named = dict(zip(self.names, quotas, strict=True))
            raise ConfigError(f"mix: an epoch of no samples (quotas {named})")
        return quotas

    def shares(self, quotas: Sequence[int]) -> list[float]:
        """Each source's part of a stratified batch: its weight (normalised) with ``weights``,
        else its part of the ``quotas``."""
        if self.sources[0].kind == "weight":
            whole = sum(s.value for s in self.sources)
            return [s.value / whole for s in self.sources]
        return [q / sum(quotas) for q in quotas]

    def to_dict(self) -> dict[str, Any]:
        """The plan as plain data (the YAML form; datasets that are objects show their type)."""
        out: dict[str, Any] = {"batching": self.batching, "seed": self.seed}
        if self.epoch_size is not None:
            out["epoch_size"] = self.epoch_size
        out["sources"] = {
            s.name: {
                "shards": s.data if isinstance(s.data, str | list) else _describe(s.data),
                s.kind: int(s.value) if s.kind in ("count", "choose") else s.value,
            }
            for s in self.sources
        }
        return out

    @classmethod
    def from_yaml(cls, path_or_text: str) -> DataPlan:
        """A plan from its YAML form (a file path or the text); see ``docs/mixing.md``.

        Raises:
            ConfigError: not YAML, or a key that is not part of the form (named).
        """
        from wds_cloud.core.mixplan_yaml import plan_arguments

        sources, options = plan_arguments(path_or_text)
        return cls(sources, **options)

    def __repr__(self) -> str:
        parts = ", ".join(f"{s.name}: {s.kind}={s.value:g}" for s in self.sources)
        return f"DataPlan({parts}; batching={self.batching!r}, seed={self.seed})"


def mix(sources: Mapping[str, Any], **options: Any) -> DataPlan:
    """``wds.mix({"a": shards_a, "b": shards_b}, weights=[0.7, 0.3], batching="stratified")``:
    a :class:`DataPlan` (the same arguments); hand it to ``make_loader`` as ``urls``."""
    return DataPlan(sources, **options)


# -- composition of the next batches --------------------------------------------------------


def _rng(seed: int, epoch: int, batch: int) -> random.Random:
    return random.Random(stable_seed("mixplan", seed, epoch, batch))


def _stratified(
    size: int, left: list[int], quotas: list[int], share: list[float], at: tuple[int, int, int]
) -> list[int]:
    seed, epoch, batch = at
    take = [min(math.floor(size * w), n) for w, n in zip(share, left, strict=True)]
    spare = min(size, sum(left)) - sum(take)
    # who is furthest behind its share of the samples delivered after this batch gets the rest
    after = sum(quotas) - sum(left) + size
    behind = [after * w - (q - n) - t for w, q, n, t in zip(share, quotas, left, take, strict=True)]
    turn = stable_seed("mixplan-tie", seed, epoch, batch) % len(quotas)
    order = sorted(
        range(len(quotas)), key=lambda i: (-round(behind[i], 9), (i - turn) % len(quotas))
    )
    while spare > 0:
        for i in order:
            if spare > 0 and take[i] < left[i]:
                take[i] += 1
                spare -= 1
    return take


def _random(size: int, left: list[int], rng: random.Random) -> list[int]:
    total = sum(left)
    picks = sorted(rng.sample(range(total), min(size, total)))
    take = [0] * len(left)
    i, edge = 0, left[0]
    for p in picks:
        while p >= edge:
            i += 1
            edge += left[i]
        take[i] += 1
    return take


def _one_source(left: list[int], rng: random.Random) -> int:
    return rng.choices(range(len(left)), weights=left)[0]


def compose_step(
    batching: str,
    size: int,
    quotas: list[int],
    done: list[int],
    batch: int,
    world: int,
    seed: int,
    epoch: int,
    share: list[float] | None = None,
) -> list[list[int]]:
    """The compositions of the batches of the next global step (one per rank, fewer at the
    epoch's end): ``result[r][i]`` samples of source ``i`` in rank ``r``'s batch.

    Args:
        batching: one of :data:`BATCHINGS`.
        size: samples per batch.
        quotas: samples per epoch of each source; ``done``: delivered so far this epoch.
        batch: global batches delivered so far this epoch (keys the seeded draws).
        world: ranks in the step.
        seed, epoch: the plan's seed and the epoch.
        share: each source's part of a stratified batch (:meth:`DataPlan.shares`; default:
            its part of the quotas).
    """
    left = [q - d for q, d in zip(quotas, done, strict=True)]
    share = share or [q / sum(quotas) for q in quotas]
    out: list[list[int]] = []
    stream = -1
    for r in range(world):
        if sum(left) == 0:
            break
        b = batch + r
        if batching == "stratified":
            take = _stratified(size, left, quotas, share, (seed, epoch, b))
        elif batching == "random":
            take = _random(size, left, _rng(seed, epoch, b))
        else:
            if batching == "per_device" or stream < 0 or left[stream] == 0:
                stream = _one_source(left, _rng(seed, epoch, b))
            take = [0] * len(left)
            take[stream] = min(size, left[stream])
        out.append(take)
        left = [n - t for n, t in zip(left, take, strict=True)]
    return out


def batches_left(batching: str, size: int, left: Iterable[int]) -> int:
    """Global batches the epoch still holds with ``left`` samples of each source."""
    left = list(left)
    if batching in ("random", "stratified"):
        return -(-sum(left) // size)
    return sum(-(-n // size) for n in left)
