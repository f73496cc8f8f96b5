"""Turn a generator function ``f(src, *args, **kw)`` into a picklable stage factory.

``shuffle = pipelinefilter(_shuffle)`` makes ``shuffle(1000)`` return a :class:`FilterFunction`
that a pipeline later calls with the upstream iterator. No closures or lambdas are involved, so
stages pickle into DataLoader workers under both fork and spawn.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any


class FilterFunction:
    """A stage: ``f`` with its arguments bound, waiting for the source iterator."""

    def __init__(self, f: Callable[..., Iterator[Any]], *args: Any, **kw: Any) -> None:
        self.f = f
        self.args = args
        self.kw = kw

    def __call__(self, data: Any) -> Iterator[Any]:
        return self.f(data, *self.args, **self.kw)

    def __str__(self) -> str:
        return f"<{self.f.__name__} {self.args} {self.kw}>"

    __repr__ = __str__


class RestCurried:
    """Picklable ``pipelinefilter(f)``: calling it binds everything but the source."""

    def __init__(self, f: Callable[..., Iterator[Any]]) -> None:
        self.f = f
        functools.update_wrapper(self, f)

    def __call__(self, *args: Any, **kw: Any) -> FilterFunction:
        return FilterFunction(self.f, *args, **kw)

    def __reduce__(self) -> tuple[Any, ...]:
        return (RestCurried, (self.f,))


def pipelinefilter(f: Callable[..., Iterator[Any]]) -> RestCurried:
    """Make ``f(src, *args, **kw)`` usable as ``f(*args, **kw)(src)`` in a pipeline."""
    return RestCurried(f)
