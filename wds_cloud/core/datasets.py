"""Small datasets webdataset 1.0.2 exports from ``webdataset.extradatasets``.

``MockDataset(sample, length)`` yields one sample ``length`` times (tests, loader benchmarks);
``with_epoch(dataset, length)`` makes every pass yield exactly ``length`` samples, continuing
where the previous pass stopped and restarting the dataset when it runs dry;
``with_length(dataset, length)`` gives an iterable a ``len()``. With torch installed,
``wds.MockDataset`` and the others are torch ``IterableDataset`` subclasses
(:mod:`wds_cloud.pytorch.datasets`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from wds_cloud.errors import ConfigError

__all__ = ["MockDataset", "with_epoch", "with_length"]


def _length(length: Any, who: str) -> int:
    if isinstance(length, bool) or not isinstance(length, int) or length < 0:
        raise ConfigError(f"{who}: length must be an integer >= 0, got {length!r}")
    return length


class MockDataset:
    """Yield ``sample`` ``length`` times."""

    def __init__(self, sample: Any, length: int) -> None:
        self.sample = sample
        self.length = _length(length, "MockDataset")

    def __iter__(self) -> Iterator[Any]:
        for _ in range(self.length):
            yield self.sample

    def __len__(self) -> int:
        return self.length


class with_epoch:
    """Every pass yields exactly ``length`` samples of ``dataset`` (fewer only if it is empty).

    The iterator over ``dataset`` is kept between passes, so consecutive passes continue the
    stream; it is dropped when pickled (each DataLoader worker starts its own).
    """

    def __init__(self, dataset: Iterable[Any], length: int) -> None:
        self.dataset = dataset
        self.length = _length(length, "with_epoch")
        self.source: Iterator[Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["source"] = None
        return state

    def __iter__(self) -> Iterator[Any]:
        for _ in range(self.length):
            if self.source is None:
                self.source = iter(self.dataset)
            try:
                sample = next(self.source)
            except StopIteration:
                self.source = iter(self.dataset)
                try:
                    sample = next(self.source)
                except StopIteration:
                    self.source = None
                    return  # the dataset is empty
            yield sample

    def __len__(self) -> int:
        return self.length


class with_length:
    """``dataset`` unchanged, with ``len()`` returning ``length``."""

    def __init__(self, dataset: Iterable[Any], length: int) -> None:
        self.dataset = dataset
        self.length = _length(length, "with_length")

    def __iter__(self) -> Iterator[Any]:
        return iter(self.dataset)

    def __len__(self) -> int:
        return self.length
