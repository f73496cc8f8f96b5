"""``observe.profile.current_frames``: no garbage collection (so no finalizer) runs inside
``sys._current_frames()`` (a finalizer there can deadlock CPython 3.11; see its docstring)."""

from __future__ import annotations

import gc
import sys
import threading
import weakref
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


class _Held:
    """An object only a thread's local variable holds."""


def test_a_look_keeps_no_frame_alive() -> None:
    """A look drops the frames it took before returning: ``sys._current_frames()`` includes
    the looking thread's own frame, whose locals hold the dict, so a dict left behind was cyclic
    garbage that kept every thread's frames and their locals (a DataLoader iterator, whose
    shutdown then waited out its workers' timeouts) until a collection."""
    from wds_cloud.observe.profile import Recorder

    rec = Recorder("main", 0, -1, None)
    started, release = threading.Event(), threading.Event()
    ref: list[weakref.ref[_Held]] = []

    def hold() -> None:
        held = _Held()
        ref.append(weakref.ref(held))
        started.set()
        release.wait()

    worker = threading.Thread(target=hold)
    gc.collect()
    gc.disable()  # only reference counting frees what follows
    try:
        worker.start()
        started.wait()
        rec.sample()
        release.set()
        worker.join()
        assert ref[0]() is None, "a look kept the thread's frame (and its locals) alive"
    finally:
        gc.enable()
        release.set()
