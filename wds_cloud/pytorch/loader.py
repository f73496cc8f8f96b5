"""``WebLoader``: a ``torch.utils.data.DataLoader`` with the fluid methods.

The loader is the first stage of a pipeline, so its outputs can be re-batched and shuffled
across workers in the main process, the pattern webdataset recommends::

    loader = WebLoader(dataset.batched(16), batch_size=None, num_workers=4)
    loader = loader.unbatched().shuffle(1000).batched(64)

``batched`` here collates with :func:`~wds_cloud.core.collate.torch_collate` (torch tensors)
unless another ``collation_fn`` is given; ``with_epoch(n)`` counts loader outputs.

With workers, the tensors of each batch cross to the main process through a shared-memory
arena reused by each worker (:mod:`wds_cloud.pytorch.shm`) instead of a fresh shared-memory
segment per tensor; ``shm_batches=False`` or ``WDS_CLOUD_SHM_BATCHES=0`` turns that off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Self

from torch.utils.data import DataLoader, default_convert

from wds_cloud.core import fluid, pipeline
from wds_cloud.core.collate import torch_collate
from wds_cloud.observe.profile import dump_dir
from wds_cloud.pytorch.shm import ShmCollate, shm_batches_enabled

__all__ = ["WebLoader", "fast_convert"]

_ATOMS = frozenset({bytes, str, int, float, bool, type(None)})


def fast_convert(data: Any) -> Any:
    """``torch.utils.data.default_convert`` (what a DataLoader with ``batch_size=None`` applies
    to each item) with the same result, and a shortcut for the common case of lists and
    tuples of bytes, strings and numbers: one type check per sequence, not a recursive call
    per element (about 1 µs a sample of 64-sample batches of two fields). Like
    ``default_convert``, a plain tuple becomes a list; anything else (tensors, numpy arrays,
    mappings, namedtuples, subclasses) goes to ``default_convert``."""
    kind = type(data)
    if kind is list or kind is tuple:
        if _ATOMS.issuperset(map(type, data)):
            return list(data)
        return [fast_convert(x) for x in data]
    if kind in _ATOMS:
        return data
    return default_convert(data)


class WebLoader(pipeline.DataPipeline, fluid.FluidInterface):
    """A ``DataLoader`` wrapped in a pipeline with the fluid methods.

    Args:
        *args: passed to ``torch.utils.data.DataLoader`` (usually the dataset).
        **kw: passed to ``torch.utils.data.DataLoader`` (``batch_size``, ``num_workers``,
            ``multiprocessing_context``, ``persistent_workers``, ...).
        shm_batches: with workers, send the tensors of each batch through a shared-memory
            arena per worker (:class:`~wds_cloud.pytorch.shm.ShmCollate`; the loader's
            ``collate_fn`` is wrapped). None: ``WDS_CLOUD_SHM_BATCHES`` (default on, Linux).

    Attributes:
        loader: the wrapped ``DataLoader`` (also ``stage(0)``).
    """

    def __init__(self, *args: Any, shm_batches: bool | None = None, **kw: Any) -> None:
        loader: DataLoader[Any] = DataLoader(*args, **kw)
        if loader.collate_fn is default_convert:  # batch_size=None and no collate_fn given
            loader.collate_fn = fast_convert
        if loader.num_workers > 0 and shm_batches_enabled(shm_batches):
            slots = (loader.prefetch_factor or 2) + 2
            loader.collate_fn = ShmCollate(loader.collate_fn, slots=slots)
        super().__init__(loader)
        if self.profiling:  # WDS_CLOUD_PROFILE
            self.profile()

    @property
    def loader(self) -> DataLoader[Any]:
        """The wrapped DataLoader."""
        loader: DataLoader[Any] = self.pipeline[0]
        return loader

    def batches_out(self) -> bool:
        """Whether this loader's items are batches: its dataset's are, or it re-batches."""
        if len(self.pipeline) > 1:
            return super().batches_out()
        dataset = self.loader.dataset
        return self.loader.batch_size is not None or (
            isinstance(dataset, pipeline.DataPipeline) and dataset.batches_out()
        )

    def profile(self, on: bool = True) -> Self:
        """Measure where the time goes, here and in the workers (``docs/observability.md``):
        the dataset is profiled too, and its workers write their totals where
        :meth:`profile_report` reads them. Modifies and returns ``self``."""
        super().profile(on)
        dataset = self.loader.dataset
        if isinstance(dataset, pipeline.DataPipeline):
            dataset.profile(on)
            if "listing_seconds" in dataset.__dict__:  # recorded here, not in each worker
                self.listing_seconds = dataset.__dict__.pop("listing_seconds")
            if on and self.loader.num_workers > 0 and dataset.profile_dump is None:
                dataset.profile_dump = dump_dir()
        return self

    def batched(
        self,
        batchsize: int,
        collation_fn: Callable[[list[Any]], Any] | None = torch_collate,
        partial: bool = True,
    ) -> Any:
        """Collate ``batchsize`` items per batch (default: into torch tensors)."""
        return super().batched(batchsize, collation_fn=collation_fn, partial=partial)
