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
    stream; it is dropped when pickled (each DataLoader worker starts its own). When
    ``dataset`` has ``state_dict`` (a resumable pipeline), so does this wrapper: the samples
    delivered in the current pass and the dataset's own state (``docs/resume.md``).
    """

    def __init__(self, dataset: Iterable[Any], length: int) -> None:
        self.dataset = dataset
        self.length = _length(length, "with_epoch")
        self.source: Iterator[Any] | None = None
        self.count = 0  # samples delivered in the current pass

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["source"] = None
        return state

    def __iter__(self) -> Iterator[Any]:
        start = self.__dict__.pop("_resume_count", 0)
        self.count = start
        for _ in range(start, self.length):
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
            self.count += 1
            yield sample

    def __len__(self) -> int:
        return self.length

    def state_dict(self) -> dict[str, Any]:
        """``{"window": samples delivered in this pass, "inner": the dataset's state}``.

        Raises:
            ConfigError: the dataset has no ``state_dict`` (or refuses, saying why).
        """
        from wds_cloud.resume.state import STATE_FORMAT

        inner = getattr(self.dataset, "state_dict", None)
        if not callable(inner):
            raise ConfigError(
                f"with_epoch: {type(self.dataset).__name__} has no state_dict, so this "
                "wrapper cannot be resumed"
            )
        count = self.__dict__.get("_resume_count", self.count)
        return {
            "format": STATE_FORMAT,
            "window": count,
            "finished": count >= self.length,  # the next pass starts a new window
            "inner": inner(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the pass ``state`` was taken in (a new pass if it was complete), the
        dataset from its own state."""
        from wds_cloud.resume.state import check_state

        state = check_state(dict(state))
        if not isinstance(state.get("inner"), dict) or "window" not in state:
            raise ConfigError("not a with_epoch state (no 'window' and 'inner' entries)")
        self.dataset.load_state_dict(state["inner"])  # type: ignore[attr-defined]
        self.source = None  # the dataset goes on from its state on the next pass
        count = int(state["window"])
        self._resume_count = 0 if count >= self.length else count


class with_length:
    """``dataset`` unchanged, with ``len()`` returning ``length``."""

    def __init__(self, dataset: Iterable[Any], length: int) -> None:
        self.dataset = dataset
        self.length = _length(length, "with_length")

    def __iter__(self) -> Iterator[Any]:
        return iter(self.dataset)

    def __len__(self) -> int:
        return self.length
