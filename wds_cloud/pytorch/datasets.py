"""Torch ``IterableDataset`` versions of the core pipeline classes.

``DataLoader`` treats these as iterable datasets: each worker process gets a (pickled) copy and
iterates it; the core shard splitters read the worker index from
``torch.utils.data.get_worker_info()`` and the rank from ``RANK``/``WORLD_SIZE`` or
``torch.distributed``. All behaviour is inherited from :mod:`wds_cloud.core`.
"""

from __future__ import annotations

from typing import Any

from torch.utils.data import Dataset, IterableDataset

from wds_cloud.core import compat, datasets, fluid, pipeline
from wds_cloud.index import indexed

__all__ = [
    "DataPipeline",
    "FluidWrapper",
    "IndexedWebDataset",
    "MockDataset",
    "WebDataset",
    "with_epoch",
    "with_length",
]


class DataPipeline(pipeline.DataPipeline, fluid.FluidInterface, IterableDataset[Any]):
    """:class:`wds_cloud.core.pipeline.DataPipeline` that is a torch ``IterableDataset``.

    Also has the fluid methods (``.shuffle()``, ``.decode()``, ``.batched()``, ...), as
    ``wds.DataPipeline`` in webdataset does not; they append stages to a copy.
    """


class WebDataset(compat.WebDataset, IterableDataset[Any]):
    """:class:`wds_cloud.core.compat.WebDataset` that is a torch ``IterableDataset``."""


class FluidWrapper(compat.FluidWrapper, IterableDataset[Any]):
    """:class:`wds_cloud.core.compat.FluidWrapper` that is a torch ``IterableDataset``."""


class MockDataset(datasets.MockDataset, IterableDataset[Any]):
    """:class:`wds_cloud.core.datasets.MockDataset` that is a torch ``IterableDataset``."""


class with_epoch(datasets.with_epoch, IterableDataset[Any]):
    """:class:`wds_cloud.core.datasets.with_epoch` that is a torch ``IterableDataset``."""


class with_length(datasets.with_length, IterableDataset[Any]):
    """:class:`wds_cloud.core.datasets.with_length` that is a torch ``IterableDataset``."""


class IndexedWebDataset(indexed.IndexedWebDataset, Dataset[Any]):
    """:class:`wds_cloud.index.indexed.IndexedWebDataset` that is a map-style torch ``Dataset``."""
