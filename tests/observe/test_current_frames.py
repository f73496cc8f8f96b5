"""``observe.profile.current_frames``: no garbage collection (so no finalizer) runs inside
``sys._current_frames()`` (a finalizer there can deadlock CPython 3.11; see its docstring)."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from wds_cloud.observe.profile import current_frames


class _Cycle:
    """Cyclic garbage whose finalizer notes the functions on the stack it runs under."""

    seen: list[set[str]] = []

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        names, frame = set(), sys._getframe(1)
        while frame is not None:
            names.add(frame.f_code.co_name)
            frame = frame.f_back
        _Cycle.seen.append(names)


@pytest.fixture
def eager_gc() -> Iterator[None]:
    """A collection at nearly every allocation, while cyclic garbage with finalizers waits."""
    old = gc.get_threshold()
    gc.collect()
    gc.set_threshold(1, 1, 1)
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.collect()
        _Cycle.seen.clear()


def _finalizers_inside(call: Callable[[], Any], name: str) -> int:
    """How many finalizers ran while ``call`` (a function named ``name``) was on the stack."""
    _Cycle.seen.clear()
    for _ in range(300):
        _Cycle()
        call()
    return sum(name in names for names in _Cycle.seen)


def test_no_collection_runs_inside_the_call(eager_gc: None) -> None:
    def plain() -> Any:
        return sys._current_frames()

    assert _finalizers_inside(plain, "plain") > 0  # the hazard is real without the guard
    assert _finalizers_inside(current_frames, "current_frames") == 0


def test_the_collector_is_left_as_it_was() -> None:
    assert gc.isenabled()
    assert isinstance(current_frames(), dict) and gc.isenabled()
    gc.disable()
    try:
        current_frames()
        assert not gc.isenabled()
    finally:
        gc.enable()
