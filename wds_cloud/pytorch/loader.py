"""``WebLoader``: a ``torch.utils.data.DataLoader`` with the fluid methods.

The loader is the first stage of a pipeline, so its outputs can be re-batched and shuffled
across workers in the main process, the pattern webdataset recommends::

    loader = WebLoader(dataset.batched(16), batch_size=None, num_workers=4)
    loader = loader.unbatched().shuffle(1000).batched(64)

``batched`` here collates with :func:`~wds_cloud.core.collate.torch_collate` (torch tensors)
unless another ``collation_fn`` is given; ``with_epoch(n)`` counts loader outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch.utils.data import DataLoader

from wds_cloud.core import fluid, pipeline
from wds_cloud.core.collate import torch_collate

__all__ = ["WebLoader"]


class WebLoader(pipeline.DataPipeline, fluid.FluidInterface):
    """A ``DataLoader`` wrapped in a pipeline with the fluid methods.

    Args:
        *args: passed to ``torch.utils.data.DataLoader`` (usually the dataset).
        **kw: passed to ``torch.utils.data.DataLoader`` (``batch_size``, ``num_workers``,
            ``multiprocessing_context``, ``persistent_workers``, ...).

    Attributes:
        loader: the wrapped ``DataLoader`` (also ``stage(0)``).
    """

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(DataLoader(*args, **kw))

    @property
    def loader(self) -> DataLoader[Any]:
        """The wrapped DataLoader."""
        loader: DataLoader[Any] = self.pipeline[0]
        return loader

    def batched(
        self,
        batchsize: int,
        collation_fn: Callable[[list[Any]], Any] | None = torch_collate,
        partial: bool = True,
    ) -> Any:
        """Collate ``batchsize`` items per batch (default: into torch tensors)."""
        return super().batched(batchsize, collation_fn=collation_fn, partial=partial)
