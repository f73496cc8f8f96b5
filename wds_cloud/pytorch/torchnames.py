"""The torch names webdataset's ``webdataset.pytorch`` module holds (``IterableDataset``,
``DataLoader``, ``TorchTensor``), for code that imports them from there (NeMo, Cosmos)."""

from __future__ import annotations

from torch import Tensor as TorchTensor
from torch.utils.data import DataLoader, IterableDataset

__all__ = ["DataLoader", "IterableDataset", "TorchTensor"]
