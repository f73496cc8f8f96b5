"""Small helpers webdataset 1.0.2 exposes from ``webdataset.utils`` and ``webdataset.filters``.

``identity``, ``compose``/``compose2``, ``is_iterable``, ``make_seed``, ``pick``,
``tuple2dict``/``dict2tuple``, ``transform_with``, ``PipelineStage`` (the base class of stages
that a pipeline runs through their ``run`` method), and ``pytorch_worker_info`` /
``pytorch_worker_seed`` (the names webdataset uses for :func:`wds_cloud.core.shards.worker_info`
and :func:`~wds_cloud.core.shards.worker_seed`).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from wds_cloud.core.shards import (
    worker_info as pytorch_worker_info,
    worker_seed as pytorch_worker_seed,
)
from wds_cloud.errors import ConfigError

__all__ = [
    "PipelineStage",
    "compose",
    "compose2",
    "dict2tuple",
    "identity",
    "is_iterable",
    "make_seed",
    "pick",
    "pytorch_worker_info",
    "pytorch_worker_seed",
    "transform_with",
    "tuple2dict",
]


class PipelineStage:
    """Base class of stage objects: a pipeline calls ``stage.run(upstream)`` for each pass."""

    def run(self, *src: Any) -> Iterator[Any]:
        """Yield this stage's output for the upstream iterator(s)."""
        raise NotImplementedError(f"{type(self).__name__}.run")

    def invoke(self, *args: Any, **kw: Any) -> Any:
        """webdataset's name for :meth:`run`."""
        return self.run(*args, **kw)


def identity(x: Any) -> Any:
    """Return ``x``."""
    return x


def compose2(f: Callable[[Any], Any], g: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``g(f(x))``."""
    return lambda x: g(f(x))


def compose(*fs: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Compose functions left to right: ``compose(f, g)(x) == g(f(x))``."""
    if not fs:
        raise ConfigError("compose: give at least one function")
    return functools.reduce(compose2, fs)


def is_iterable(obj: Any) -> bool:
    """Whether ``obj`` is iterable, strings and bytes excluded."""
    return not isinstance(obj, str | bytes) and isinstance(obj, Iterable | Iterator)


def make_seed(*args: Any) -> int:
    """A 31-bit seed from ``args`` (webdataset's formula; ``hash`` of strings varies by process
    unless ``PYTHONHASHSEED`` is set, as in webdataset)."""
    seed = 0
    for arg in args:
        seed = (seed * 31 + hash(arg)) & 0x7FFFFFFF
    return seed


def pick(buf: list[Any], rng: random.Random) -> Any:
    """Remove and return a random item of ``buf`` (swapping the last item into its place)."""
    k = rng.randint(0, len(buf) - 1)
    sample = buf[k]
    buf[k] = buf[-1]
    buf.pop()
    return sample


def tuple2dict(sample: Any) -> dict[Any, Any]:
    """``{0: a, 1: b}`` for ``(a, b)``; a dict unchanged."""
    if isinstance(sample, dict):
        return sample
    return dict(enumerate(sample))


def dict2tuple(d: dict[int, Any]) -> tuple[Any, ...]:
    """Inverse of :func:`tuple2dict`: ``(d[0], ..., d[max])``."""
    return tuple(d[i] for i in range(1 + max(d.keys())))


def transform_with(sample: Sequence[Any], transformers: Sequence[Any] | None) -> Any:
    """Apply ``transformers[i]`` to ``sample[i]`` (None or a missing transformer keeps the field).

    Raises:
        ConfigError: more transformers than fields.
    """
    if not transformers:
        return sample
    if len(transformers) > len(sample):
        raise ConfigError(
            f"transform_with: {len(transformers)} transformers for a sample of {len(sample)} fields"
        )
    result = list(sample)
    for i, f in enumerate(transformers):
        if f is not None:
            result[i] = f(sample[i])
    return result
