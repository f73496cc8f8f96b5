"""The PyTorch layer: the only package of wds_cloud that imports torch at import time.

``WebDataset``, ``DataPipeline`` and ``FluidWrapper`` are the core classes made torch
``IterableDataset`` subclasses; ``WebLoader`` wraps a ``DataLoader`` with the fluid methods.
``IterableDataset``, ``DataLoader`` and ``TorchTensor`` are torch's, as in ``webdataset.pytorch``.
"""

from __future__ import annotations

from wds_cloud.core.collate import torch_collate
from wds_cloud.pytorch.datasets import (
    DataPipeline,
    FluidWrapper,
    IndexedWebDataset,
    MockDataset,
    WebDataset,
    with_epoch,
    with_length,
)
from wds_cloud.pytorch.loader import WebLoader
from wds_cloud.pytorch.torchnames import DataLoader, IterableDataset, TorchTensor

__all__ = [
    "DataLoader",
    "DataPipeline",
    "FluidWrapper",
    "IndexedWebDataset",
    "IterableDataset",
    "MockDataset",
    "TorchTensor",
    "WebDataset",
    "WebLoader",
    "torch_collate",
    "with_epoch",
    "with_length",
]
