"""``make_loader(plan, ...)`` for a :class:`~wds_cloud.core.mixplan.DataPlan` (``wds.mix``).

The loader is the global-order loader (:class:`~wds_cloud.pytorch.globalloader.GlobalLoader`)
with the plan's order (:class:`~wds_cloud.index.mixorder.MixSampler`) instead of one
permutation: the main process plans each rank's batches, DataLoader workers read them (one
batched read per source) and run decode / to_tuple / map and collation, and the loader counts
the batches it hands out, so its state is exact however far ahead the workers read, and
resumes with any number of ranks and workers (``docs/mixing.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from wds_cloud.core.collate import torch_collate
from wds_cloud.core.handlers import reraise_exception
from wds_cloud.core.mixplan import DataPlan
from wds_cloud.errors import ConfigError, SampleError
from wds_cloud.index.mixorder import MixedDataset, MixSampler
from wds_cloud.pytorch.datasets import IndexedWebDataset
from wds_cloud.pytorch.globalloader import BatchReader, GlobalLoader, sample_stages

__all__ = ["MixLoader", "MixReader", "mix_loader", "plan_datasets"]


def _shape(sample: Any) -> Any:
    """What collation needs to be the same across a batch: a dict's fields, a tuple's length
    and element types, or the type."""
    if isinstance(sample, dict):
        return ("fields", tuple(sorted(k for k in sample if not k.startswith("__"))))
    if isinstance(sample, tuple | list):
        return ("tuple", len(sample), tuple(type(x).__name__ for x in sample))
    return ("type", type(sample).__name__)


class MixReader(BatchReader):
    """A :class:`BatchReader` that, for batches mixing sources, checks that the first sample of
    each source has, after the stages, the shape of the batch's first sample (collation would
    fail, or mix fields, otherwise); one check per source and batch.

    Raises (from :meth:`process`):
        SampleError: two sources give incompatible samples: names both sources, the shard
            (``url``) and key of the odd sample, and both shapes.
    """

    def process(self, samples: list[Any]) -> list[Any]:
        sources = [s.get("__source__") if isinstance(s, dict) else None for s in samples]
        out = super().process(samples)
        if len(out) != len(samples) or len(set(sources)) < 2:
            return out  # one source, or a stage dropped samples (no way to pair them up)
        first = _shape(out[0])
        checked = {sources[0]}
        for at, source in enumerate(sources):  # one sample of each source: the first
            if source in checked:
                continue
            checked.add(source)
            shape = _shape(out[at])
            if shape != first:
                raw, ref = samples[at], samples[0]
                raise SampleError(
                    f"a batch mixes incompatible samples of sources {sources[0]!r} and "
                    f"{source!r}: {source!r} gives {shape[1:]}, {sources[0]!r} (key "
                    f"{ref.get('__key__')!r}, shard {ref.get('__url__')!r}) gives {first[1:]}; "
                    "make every source give the same fields (to_tuple=, map=) or use "
                    "batching='per_stream'",
                    url=raw.get("__url__"),
                    key=raw.get("__key__"),
                )
        return out


class MixLoader(GlobalLoader):
    """:class:`GlobalLoader` over a plan's order: once this rank's batches of the epoch are
    delivered the position is the epoch's end (a rank past the end of the last step has no
    batch in it; the others deliver theirs at the same step)."""

    def deliver(self, plan: Any, batches: Iterable[Any]) -> Iterator[Any]:
        for step, batch in enumerate(batches, 1):
            self.sampler.delivered(plan, step)
            yield batch
        self.sampler.delivered(plan, plan.steps)


def plan_datasets(plan: DataPlan, **dataset_kw: Any) -> list[Any]:
    """Each source's map-style dataset: a shard spec read with ``IndexedWebDataset(spec,
    **dataset_kw)``, a dataset object as it is.

    Raises:
        ConfigError: a source that is neither (names it).
    """
    out = []
    for source in plan.sources:
        data = source.data
        if isinstance(data, str | list | tuple):
            out.append(IndexedWebDataset(data, **dataset_kw))
        elif hasattr(data, "__len__") and hasattr(data, "__getitem__"):
            out.append(data)
        else:
            raise ConfigError(
                f"source {source.name!r}: expected a shard spec or a map-style dataset "
                f"(len and ds[i]), got {type(data).__name__}"
            )
    return out


def mix_loader(
    plan: DataPlan,
    *,
    batch_size: int,
    num_workers: int,
    decode: Any,
    to_tuple: str | tuple[str, ...] | None,
    map: Callable[[Any], Any] | None,
    raw_map: Callable[[Any], Any] | None,
    collate: Callable[[list[Any]], Any] | None,
    prefetch_factor: int,
    persistent_workers: bool,
    pin: Callable[[Any], Any] | None,
    rank: int | None = None,
    world: int | None = None,
    **kw: Any,
) -> MixLoader:
    """The loader of ``make_loader(plan)``; ``kw``: ``handler=`` for the stages, the rest
    for each source's :class:`IndexedWebDataset` (``registry=``, ``build_missing=``, ...).

    Raises:
        ConfigError: bad sizes, or quotas that do not fit the sources.
    """
    handler = kw.pop("handler", reraise_exception)
    datasets = plan_datasets(plan, **kw)
    mixed = MixedDataset(plan.names, datasets)
    sampler = MixSampler(plan, mixed.sizes, batch_size, rank=rank, world=world)
    reader_type = MixReader if plan.batching in ("random", "stratified") else BatchReader
    stages: Iterable[Callable[[Any], Any]] = sample_stages(decode, to_tuple, map, raw_map, handler)
    return MixLoader(
        reader_type(mixed, stages),
        sampler,
        num_workers=num_workers,
        prefetch_factor=prefetch_factor,
        persistent_workers=persistent_workers,
        collate=collate or torch_collate,
        pin=pin,
    )
